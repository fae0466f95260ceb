"""More elementwise functions built from ``lax`` ops, each in the order of ops ``jax.numpy``
uses (so the values are JAX's): ``hypot``, ``copysign``, ``logaddexp2``, ``fmax``/``fmin``,
``sinc``, ``deg2rad``/``rad2deg``, ``heaviside``, ``isclose``/``allclose``,
``array_equal``/``array_equiv``, ``isposinf``/``isneginf``, and the real-only views of complex
functions (``real``, ``imag``, ``conj``, ``angle``). Mirrors ``jax/_src/numpy/ufuncs.py``.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.interpreters.custom_derivatives import custom_jvp
from minixla.numpy.promotion import (
    _arr, _cast, _default_float, _full_shape, _is_inexact, _promote_inexact,
    _where_line, broadcast_shapes)
from minixla.numpy.creation import asarray, full_like, zeros_like
from minixla.numpy.elementwise import (
    abs, equal, greater, isfinite, isnan, less, logical_and, logical_or, signbit, where)
from minixla.numpy.misc import _logaddexp_jvp_rule
from minixla.numpy.reductions import all


def _inexact_pair(x1, x2):
    return _full_shape(*_promote_inexact(_arr(x1), _arr(x2)))


def _const(x, value):
    return full_like(x, value)


def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` without overflow (``jnp.hypot``): ``big * sqrt(1 + (small/big)**2)``,
    inf where either is ±inf (even with a NaN)."""
    x1, x2 = _inexact_pair(x1, x2)
    x1, x2 = lax.abs(x1), lax.abs(x2)
    inf = _const(x1, np.inf)
    either_inf = lax.bitwise_or(lax.eq(x1, inf), lax.eq(x2, inf))
    big, small = lax.max(x1, x2), lax.min(x1, x2)
    big_is_zero = lax.eq(big, _const(big, 0))
    ratio = lax.div(small, lax.select(big_is_zero, _const(big, 1), big))
    scaled = lax.mul(big, lax.sqrt(lax.add(_const(big, 1), lax.mul(ratio, ratio))))
    return lax.select(either_inf, inf, lax.select(big_is_zero, big, scaled))


def copysign(x1, x2, /):
    """``|x1|`` with the sign bit of ``x2`` (``jnp.copysign``; -0.0 and negative NaNs count as
    negative), in floating point."""
    x1, x2 = _inexact_pair(x1, x2)
    magnitude = lax.abs(x1)
    return lax.select(signbit(x2), lax.neg(magnitude), magnitude)


def logaddexp2(x1, x2, /):
    """``log2(2**x1 + 2**x2)`` without overflow (``jnp.logaddexp2``):
    ``max + log1p(2**-|x1 - x2|) / ln 2``, or ``x1 + x2`` where the difference is NaN. Its
    derivative is JAX's ``custom_jvp`` rule ``t1 2**(x1 - out) + t2 2**(x2 - out)`` (a tie gives
    (0.5, 0.5)), as ``logaddexp``'s."""
    return _logaddexp2(*_inexact_pair(x1, x2))


def _logaddexp2_impl(x1, x2):
    delta = lax.sub(x1, x2)
    tail = lax.mul(_const(x1, 1 / np.log(2)), lax.log1p(lax.exp2(lax.neg(lax.abs(delta)))))
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), lax.add(lax.max(x1, x2), tail))


_logaddexp2_impl.__name__ = _logaddexp2_impl.__qualname__ = "logaddexp2"  # JAX's name in a jaxpr
_logaddexp2 = custom_jvp(_logaddexp2_impl)
_logaddexp2.defjvp(_logaddexp_jvp_rule(_logaddexp2, lax.exp2, "_logaddexp2_jvp"))


def fmax(x1, x2):
    """Elementwise maximum ignoring NaN (``jnp.fmax``): NaN only where both are NaN."""
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    """Elementwise minimum ignoring NaN (``jnp.fmin``)."""
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


def sinc(x, /):
    """``sin(pi x) / (pi x)``, 1 at 0 (``jnp.sinc``); its derivatives of every order at 0 are
    exact, by JAX's ``custom_jvp`` Maclaurin rule."""
    x, = _promote_inexact(_arr(x))
    is_zero = lax.eq(x, _const(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe = lax.select(is_zero, _const(x, 1), pi_x)
    return lax.select(is_zero, _sinc_maclaurin(0, pi_x), lax.div(lax.sin(safe), safe))


def _sinc_maclaurin_impl(k, x):
    # The k-th derivative of sin(x)/x at 0, shaped as x (JAX's _sinc_maclaurin): its JVP is the
    # (k+1)-th times the tangent, so every order of grad of sinc at 0 is the Taylor coefficient
    # (d2/dx2 sinc(0) = -pi**2 / 3), where differentiating the select would give 0.
    zero = lax.mul(x, _const(x, 0))
    return zero if k % 2 else lax.add(zero, _const(x, (-1) ** (k // 2) / (k + 1)))


_sinc_maclaurin_impl.__name__ = _sinc_maclaurin_impl.__qualname__ = "_sinc_maclaurin"
_sinc_maclaurin = custom_jvp(_sinc_maclaurin_impl, nondiff_argnums=(0,))


@_sinc_maclaurin.defjvp
def _sinc_maclaurin_jvp(k, primals, tangents):
    (x,), (t,) = primals, tangents
    return _sinc_maclaurin(k, x), lax.mul(_sinc_maclaurin(k + 1, x), t)


def deg2rad(x, /):
    """Degrees to radians, ``x * (pi / 180)`` (``jnp.deg2rad``, alias ``radians``)."""
    x, = _promote_inexact(_arr(x))
    return lax.mul(x, _cast(np.pi / 180, get_aval(x).dtype))


def rad2deg(x, /):
    """Radians to degrees, ``x * (180 / pi)`` (``jnp.rad2deg``, alias ``degrees``)."""
    x, = _promote_inexact(_arr(x))
    return lax.mul(x, _cast(180 / np.pi, get_aval(x).dtype))


radians, degrees = deg2rad, rad2deg


def heaviside(x1, x2, /):
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``, NaN where ``x1`` is NaN
    (``jnp.heaviside``)."""
    x1, x2 = _inexact_pair(x1, x2)
    zero, one = _const(x1, 0), _const(x1, 1)
    at_zero = lax.select(lax.ne(x1, x1), x1, x2)
    return lax.select(lax.lt(x1, zero), zero, lax.select(lax.gt(x1, zero), one, at_zero))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``a == b or (b finite and |a - b| <= atol + rtol * |b|)`` (``jnp.isclose``; the tolerances
    are rounded to the inexact dtype of ``a`` and ``b``)."""
    a, b = _inexact_pair(a, b)
    dt = get_aval(a).dtype
    margin = lax.add(_const(b, _cast(atol, dt)), lax.mul(_const(b, _cast(rtol, dt)), lax.abs(b)))
    in_range = lax.le(lax.abs(lax.sub(a, b)), margin)
    out = logical_or(lax.eq(a, b), logical_and(isfinite(b), in_range))
    return logical_or(out, logical_and(isnan(a), isnan(b))) if equal_nan else out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``all(isclose(a, b, ...))`` (``jnp.allclose``): a bool scalar."""
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """True when the shapes are equal and every element is (``jnp.array_equal``); False for
    different shapes without comparing."""
    a1, a2 = _arr(a1), _arr(a2)
    if get_aval(a1).shape != get_aval(a2).shape:
        return np.asarray(False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all(eq)


def array_equiv(a1, a2):
    """True when the shapes broadcast together and every element is equal (``jnp.array_equiv``)."""
    a1, a2 = _arr(a1), _arr(a2)
    try:
        broadcast_shapes(get_aval(a1).shape, get_aval(a2).shape)
    except errors.ShapeError:
        return np.asarray(False)
    return all(equal(a1, a2))


def _is_signed_inf(x, infinity, name, out):
    if out is not None:
        raise errors.UnsupportedError(f"{name}: out= is not supported{_where_line()}")
    x = _arr(x)
    if not _is_inexact(get_aval(x).dtype):
        return full_like(x, False, np.bool_)
    return lax.eq(x, _const(x, infinity))


def isposinf(x, /, out=None):
    """True where ``x`` is +inf (``jnp.isposinf``); False for integers."""
    return _is_signed_inf(x, np.inf, "isposinf", out)


def isneginf(x, /, out=None):
    """True where ``x`` is -inf (``jnp.isneginf``); False for integers."""
    return _is_signed_inf(x, -np.inf, "isneginf", out)


# minixla has no complex dtypes: these are the real-valued cases of jnp's complex functions.

def real(val, /):
    """The real part (``jnp.real``): ``val`` itself for real dtypes."""
    return _arr(val)


def imag(val, /):
    """The imaginary part (``jnp.imag``): zeros of ``val``'s dtype for real dtypes."""
    return zeros_like(_arr(val))


def conjugate(x, /):
    """The complex conjugate (``jnp.conjugate``, alias ``conj``): ``x`` itself for real dtypes."""
    return _arr(x)


conj = conjugate


def angle(z, deg=False):
    """The argument ``atan2(0, z)`` (``jnp.angle``): pi for negative numbers and -0.0, else 0;
    integers in the default float."""
    z = _arr(z)
    if not _is_inexact(get_aval(z).dtype) or get_aval(z).ndim == 0:  # (JAX's rule, 0-d included)
        z = _cast(z, _default_float())
    result = lax.atan2(zeros_like(z), z)
    return rad2deg(result) if deg else result


def isscalar(element):
    """True for Python/NumPy scalars and 0-d arrays (``jnp.isscalar``); a Python bool."""
    if np.isscalar(element):
        return True
    if hasattr(element, "aval") or isinstance(element, np.ndarray):
        return get_aval(element).ndim == 0
    return False


def isreal(x):
    """True everywhere for real dtypes (``jnp.isreal``)."""
    return full_like(_arr(x), True, np.bool_)


def iscomplex(x):
    """False everywhere for real dtypes (``jnp.iscomplex``)."""
    return full_like(_arr(x), False, np.bool_)
