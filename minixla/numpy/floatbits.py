"""Functions on the bits of numbers (``jax.numpy``'s, built from the same ``lax`` ops in the same
order, so the values are JAX's): ``frexp``, ``ldexp``, ``spacing``, ``modf``, ``gcd``, ``lcm``,
``i0``, ``bitwise_count``, ``packbits`` and ``unpackbits``. Mirrors ``jax/_src/numpy/ufuncs.py`` and ``lax_numpy.py``.

``frexp`` scales a subnormal by ``2**nmant`` before reading its exponent field: exact for f16;
f32 subnormals are read as ±0 by XLA:CPU's multiply, so JAX's (and this) frexp gives
``(±0.5, -149)`` for all of them; bf16 ones are returned as they are, with exponent 0 (see
``_frexp_impl``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.interpreters.custom_derivatives import custom_jvp
from minixla.numpy.promotion import _arr, _full_shape, _promote_dtypes, _promote_inexact
from minixla.numpy.creation import full_like
from minixla.numpy.elementwise import (
    abs, add, ceil, equal, exp2, floor, floor_divide, greater, isinf, isnan, less, logical_or,
    multiply, not_equal, power, subtract, where)
from minixla.numpy.reductions import any
from minixla.numpy.ufuncs import copysign

__all__ = ["frexp", "ldexp", "spacing", "modf", "gcd", "lcm", "i0", "bitwise_count", "packbits",
           "unpackbits"]

_INT_OF_BITS = {16: np.int16, 32: np.int32, 64: np.int64}


def _dtype(x):
    return np.dtype(get_aval(x).dtype)


def _is_complex(dtype):
    return np.dtype(dtype).kind == "c"


def _normalize_float(x):
    """(bits of x as a signed int, exponent correction): a subnormal |x| is first multiplied by
    ``2**nmant`` (so its exponent field is the true one) and the correction is ``-nmant``."""
    info = ml_dtypes.finfo(_dtype(x))
    int_type = np.dtype(_INT_OF_BITS[info.bits])
    cond = lax.lt(lax.abs(x), full_like(x, info.tiny))
    x1 = where(cond, lax.mul(x, full_like(x, 1 << info.nmant)), x)
    x2 = where(cond, np.asarray(-info.nmant, int_type), np.asarray(0, int_type))
    return lax.bitcast_convert_type(x1, int_type), x2


def frexp(x, /):
    """Mantissa and base-2 exponent (``jnp.frexp``): ``x == m * 2**e`` with ``0.5 <= |m| < 1``.

    ``x``: any real array (ints and bools promoted to the default float). Returns ``(m, e)``:
    ``m`` of ``x``'s float dtype, ``e`` int32, both ``x``'s shape. ±0, ±inf and NaN give
    ``(x, 0)``. ``TypeError`` for complex input. Differentiable in ``m`` (JAX's rule
    ``dm = dx * 2**-e``); ``e`` has a zero (float0) tangent."""
    x, = _promote_inexact(_arr(x))
    if _is_complex(_dtype(x)):
        raise TypeError("frexp does not support complex-valued inputs")
    return _frexp(x)


def _frexp_impl(x):
    dtype = _dtype(x)
    info = ml_dtypes.finfo(dtype)
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    x1, x2 = _normalize_float(x)
    it = _dtype(x1)
    c = lambda v: np.asarray(v, it)  # noqa: E731
    x2 = lax.add(x2, lax.add(lax.sub(lax.bitwise_and(lax.shift_right_arithmetic(x1, c(info.nmant)), c(mask)),
                                     c(bias)), c(1)))
    x1 = lax.bitwise_and(x1, c(~(mask << info.nmant)))
    x1 = lax.bitwise_or(x1, c((bias - 1) << info.nmant))
    x1 = lax.bitcast_convert_type(x1, dtype)
    # f32/f64: ±0 is found on the bits, as the code XLA generates for JAX's frexp does (LLVM
    # turns its ``x == 0`` into a test of the bits): a subnormal is then not "zero" although
    # XLA:CPU's arithmetic reads it as 0 (the scaling above gave bits 0), so JAX's frexp
    # returns (±0.5, minexp - nmant) for every one of them, and so does this one. (bf16 is
    # compared widened to f32, where a subnormal is ±0: (x, 0); f16 subnormals are exact.)
    if dtype in (np.float32, np.float64):
        bits = lax.bitcast_convert_type(x, it)
        is_zero = equal(lax.bitwise_and(bits, c((1 << (info.bits - 1)) - 1)), c(0))
    else:
        is_zero = equal(x, 0)
    cond = logical_or(logical_or(isinf(x), isnan(x)), is_zero)
    x2 = where(cond, lax.full_like(x2, 0), x2)
    return where(cond, x, x1), lax.convert_element_type(x2, np.int32)


_frexp_impl.__name__ = _frexp_impl.__qualname__ = "_frexp"
_frexp = custom_jvp(_frexp_impl)


@_frexp.defjvp
def _frexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    m, e = frexp(x)
    mdot = multiply(t, exp2(lax.neg(lax.convert_element_type(e, _dtype(t)))))
    return (m, e), (mdot, lax.full_like(e, 0))


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` (``jnp.ldexp``), exact where the result is representable: ``x1`` is split
    by ``frexp`` first, so a small ``x1`` and a large ``x2`` do not overflow on the way.

    ``x1``: real (ints promoted to the default float); ``x2``: integer; broadcast together.
    Result: ``x1``'s float dtype. ±0 and ±inf ``x1`` are returned as they are. ``ValueError``
    for a complex ``x1`` or an inexact ``x2``, as JAX."""
    x1, x2 = _arr(x1), _arr(x2)
    d1, d2 = _dtype(x1), _dtype(x2)
    if _is_complex(d1) or d2.kind in "fc" or d2 == ml_dtypes.bfloat16:
        raise ValueError(f"ldexp not supported for input types {(d1, d2)}")
    x1, = _promote_inexact(x1)
    x2 = lax.convert_element_type(x2, _dtype(x1))
    x1, x2 = _full_shape(x1, x2)
    m, e = frexp(x1)
    e = lax.convert_element_type(add(lax.convert_element_type(e, _dtype(x2)), x2), _dtype(x1))
    positive = greater(e, 0)
    m = where(positive, multiply(m, 2), m)
    e = where(positive, subtract(e, 1), e)
    x = multiply(m, power(2, lax.convert_element_type(e, _dtype(m))))
    return where(logical_or(isinf(x1), equal(x1, 0)), x1, x)


def spacing(x, /):
    """The distance from ``x`` to the next float away from zero (``jnp.spacing``), negative for
    negative ``x``; f16 takes the step towards +inf, as JAX's. A zero step (from the largest
    finite value's neighbour being inf, or a flushed subnormal) gives the smallest subnormal
    with ``x``'s sign. ``ValueError`` for complex input."""
    arr, = _promote_inexact(_arr(x))
    dtype = _dtype(arr)
    if _is_complex(dtype):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    inf = np.asarray(np.inf, dtype)
    if dtype == np.float16:
        return subtract(lax.nextafter(arr, lax.full_like(arr, np.inf)), arr)
    result = subtract(lax.nextafter(arr, copysign(inf, arr)), arr)
    tiny = np.asarray(ml_dtypes.finfo(dtype).smallest_subnormal, dtype)
    return where(equal(result, 0), copysign(tiny, arr), result)


def modf(x, /, out=None):
    """Fractional and integral parts, both with ``x``'s sign (``jnp.modf``): ``(x - w, w)`` with
    ``w = floor(x)`` for ``x >= 0`` else ``ceil(x)``; ints promoted to the default float.
    ``NotImplementedError`` for ``out=``, as JAX."""
    x, = _promote_inexact(_arr(x))
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    whole = where(lax.ge(x, lax.full_like(x, 0)), floor(x), ceil(x))
    return subtract(x, whole), whole


def _integer_pair(name, x1, x2):
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    if _dtype(x1).kind not in "iu":
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
    return x1, x2


def gcd(x1, x2):
    """Greatest common divisor, elementwise and non-negative (``jnp.gcd``): Euclid's algorithm
    as one ``while_loop`` over the broadcast arrays (``gcd(0, 0) == 0``). Integer dtypes
    (promoted together); ``ValueError`` for others."""
    x1, x2 = _integer_pair("gcd", x1, x2)
    x1, x2 = _full_shape(x1, x2)
    return _gcd(x1, x2)


def _gcd(x1, x2):
    def cond(xs):
        return any(not_equal(xs[1], 0))

    def body(xs):
        a, b = xs
        nz = not_equal(b, 0)
        a, b = where(nz, b, a), where(nz, lax.rem(a, b), lax.full_like(b, 0))
        lt = less(a, b)
        return where(lt, b, a), where(lt, a, b)

    g, _ = lax.while_loop(cond, body, (abs(x1), abs(x2)))
    return g


def lcm(x1, x2):
    """Least common multiple, elementwise and non-negative (``jnp.lcm``): ``|x1| * (|x2| //
    gcd)``, 0 where the gcd is 0 (wrapping on overflow, as JAX). Integers only (``ValueError``)."""
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    x1, x2 = abs(x1), abs(x2)
    if _dtype(x1).kind not in "iu":
        raise ValueError("Arguments to jax.numpy.lcm must be integers.")
    x1, x2 = _full_shape(x1, x2)
    d = _gcd(x1, x2)
    return where(equal(d, 0), lax.full_like(d, 0), multiply(x1, floor_divide(x2, d)))


def i0(x):
    """The modified Bessel function of the first kind, order 0 (``jnp.i0``):
    ``exp(|x|) * bessel_i0e(|x|)``; ints promoted to the default float, ``ValueError`` for
    complex. Its derivative is JAX's: the expression's, with 0 at ``x == 0``."""
    x_arr, = _promote_inexact(_arr(x))
    if _dtype(x_arr).kind != "f" and _dtype(x_arr) != ml_dtypes.bfloat16:
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {_dtype(x_arr)}")
    return _i0(x_arr)


def _i0_impl(x):
    abs_x = lax.abs(x)
    return lax.mul(lax.exp(abs_x), lax.bessel_i0e(abs_x))


_i0_impl.__name__ = _i0_impl.__qualname__ = "_i0"
_i0 = custom_jvp(_i0_impl)


@_i0.defjvp
def _i0_jvp(primals, tangents):
    import minixla
    out, t_out = minixla.jvp(_i0_impl, primals, tangents)
    return out, where(equal(primals[0], 0), lax.full_like(t_out, 0), t_out)


def bitwise_count(x, /):
    """The number of 1 bits of ``|x|`` (``jnp.bitwise_count``), as uint8: ``population_count``
    of ``abs(x)``. Integer and bool input; ``population_count``'s ``TypeError`` for floats, as
    JAX."""
    x = _arr(x)
    if _dtype(x) == np.bool_:
        return lax.convert_element_type(x, np.uint8)
    return lax.convert_element_type(lax.population_count(abs(x)), np.uint8)


_BIT_ORDERS = ("little", "big")


def _bit_weights(bitorder):
    if bitorder not in _BIT_ORDERS:
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = np.arange(8, dtype=np.uint8)
    return bits[::-1] if bitorder == "big" else bits


def packbits(a, axis=None, bitorder="big"):
    """Bits (``a != 0``) packed eight to a uint8 along ``axis`` (``jnp.packbits``; ``None``: the
    flattened array), zero-padded to a multiple of 8; ``bitorder`` ``'big'`` puts the first
    element in the high bit. ``TypeError`` unless ``a`` is integer or bool."""
    from minixla.numpy.manipulation import ravel, reshape, swapaxes
    from minixla.numpy.reductions import sum
    arr = _arr(a)
    if _dtype(arr).kind not in "biu":
        raise TypeError("Expected an input array of integer or boolean data type")
    bits = _bit_weights(bitorder)
    arr = lax.convert_element_type(not_equal(arr, 0), np.uint8)
    if axis is None:
        arr, axis = ravel(arr), 0
    arr = swapaxes(arr, axis, -1)
    shape = tuple(get_aval(arr).shape)
    if shape[-1] % 8:
        arr = lax.pad(arr, np.uint8(0), [(0, 0, 0)] * (len(shape) - 1) + [(0, 8 - shape[-1] % 8, 0)])
        shape = tuple(get_aval(arr).shape)
    arr = reshape(arr, shape[:-1] + (shape[-1] // 8, 8))
    packed = lax.convert_element_type(sum(lax.shift_left(arr, lax.broadcast(bits, shape[:-1] + (shape[-1] // 8,))),
                                          axis=-1), np.uint8)
    return swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """Each uint8 of ``a`` unpacked into 8 uint8 bits along ``axis`` (``jnp.unpackbits``;
    ``None``: flattened), cut or zero-padded to ``count``. ``TypeError`` unless ``a`` is uint8."""
    from minixla.numpy.manipulation import pad, ravel, reshape, swapaxes
    from minixla.numpy.indexing import _getitem
    arr = _arr(a)
    if _dtype(arr) != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    weights = (np.uint8(1) << _bit_weights("little"))
    weights = weights[::-1] if bitorder == "big" else weights
    if axis is None:
        arr, axis = ravel(arr), 0
    arr = swapaxes(arr, axis, -1)
    shape = tuple(get_aval(arr).shape)
    wide = lax.broadcast_in_dim(arr, shape + (8,), tuple(range(len(shape))))
    unpacked = lax.convert_element_type(
        greater(lax.bitwise_and(wide, lax.broadcast(weights, shape)), 0), np.uint8)
    unpacked = reshape(unpacked, shape[:-1] + (-1,))
    n = tuple(get_aval(unpacked).shape)[-1]
    if count is not None:
        if count > n:
            unpacked = pad(unpacked, [(0, 0)] * (len(shape) - 1) + [(0, count - n)])
        else:
            unpacked = _getitem(unpacked, (Ellipsis, slice(None, count)))
    return swapaxes(unpacked, axis, -1)
