"""Array creation: ``asarray``, ``zeros``/``ones``/``full`` (and ``*_like``), ``arange``,
``linspace``, ``eye``, ``tri``; inside a trace constants are staged (``lax.stage_constant``).
"""
from __future__ import annotations

import builtins

import jax.numpy as _jnp
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakArray, WeakScalar, canonicalize_dtype, get_aval, weak_array
from minixla.core.avals import canonicalize_shape
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _default_float, _is_python_scalar, _np_astype, _where_line, broadcast_to)


# ---------------------------------------------------------------------------------------
# Array creation.

def asarray(a, dtype=None):
    """A tracer stays itself (converted to ``dtype`` if given); anything else becomes a numpy
    array with JAX's canonical dtype (float64 -> float32 unless x64 is on)."""
    if isinstance(a, Tracer):
        return a if dtype is None else astype(a, dtype)
    # JAX keeps a weak type here only without ``dtype``: ``jnp.asarray(1.0)`` and the
    # asarray of a weak array are weak, ``jnp.asarray(1.0, float32)`` and lists are not.
    weak = dtype is None and (isinstance(a, (WeakScalar, WeakArray)) or (
        _is_python_scalar(a) and not isinstance(a, bool)))
    if isinstance(a, WeakScalar):
        a = a.value
    if isinstance(a, (list, tuple)) and builtins.any(isinstance(v, Tracer) for v in _flatten_list(a)):
        return stack([asarray(v, dtype) for v in a])
    arr = np.asarray(a)
    if dtype is None and _is_python_scalar(a):
        dtype = get_aval(a).dtype
    dtype = canonicalize_dtype(dtype if dtype is not None else arr.dtype)
    if _is_python_scalar(a) and not isinstance(a, bool) and dtype.kind in "iu":
        value = int(a)  # (a float truncates first; NaN and inf raise as int() does, as in JAX)
        if not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:  # (jnp.int8(300) raises)
            raise errors.ScalarOverflowError(f"Python integer {value} out of bounds for "
                                             f"{dtype.name}{_where_line()}")
    return weak_array(_np_astype(arr, dtype), weak)


def _flatten_list(a):
    for v in a:
        if isinstance(v, (list, tuple)):
            yield from _flatten_list(v)
        else:
            yield v


array = asarray


def astype(x, dtype):
    """Cast to ``dtype`` (``jnp.astype``): float -> int truncates and saturates, NaN -> 0."""
    x = _arr(x)
    if isinstance(x, WeakScalar) or _is_python_scalar(x):
        x = asarray(x)
    return lax.convert_element_type(x, dtype)


def _shape_arg(shape):
    return canonicalize_shape(shape)


def zeros(shape, dtype=None):
    """An array of zeros (``jnp.zeros``); the default dtype is the default float. Inside a trace
    (and so for every creation function here) the result is staged, like JAX's."""
    return lax.full(_shape_arg(shape), 0, canonicalize_dtype(dtype or _default_float()))


def ones(shape, dtype=None):
    """An array of ones (``jnp.ones``)."""
    return lax.full(_shape_arg(shape), 1, canonicalize_dtype(dtype or _default_float()))


empty = zeros


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (``jnp.full``); a traced fill value is broadcast."""
    shape = _shape_arg(shape)
    if isinstance(fill_value, Tracer):
        v = fill_value if dtype is None else astype(fill_value, dtype)
        return broadcast_to(v, shape)
    if dtype is None and _is_python_scalar(fill_value):
        # (lax.full gives the weak type JAX gives, and wraps a Python int into int32 as JAX
        # does here, without the OverflowError of arithmetic: full(2, 2**40) is [0, 0])
        return lax.full(shape, fill_value)
    dt = canonicalize_dtype(dtype) if dtype is not None else asarray(fill_value).dtype
    return lax.full(shape, _np_astype(np.asarray(fill_value), dt), dt)


def _like(x, dtype, shape):
    aval = get_aval(_arr(x))
    return (aval.shape if shape is None else _shape_arg(shape)), (aval.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, shape=None):
    """Zeros with ``a``'s shape and dtype (``jnp.zeros_like``)."""
    return full_like(a, 0, dtype, shape)


def empty_like(prototype, dtype=None, shape=None):
    """``jnp.empty_like``: as JAX, the zeros of ``prototype``'s (or the given) dtype and shape."""
    return zeros_like(prototype, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    """Ones with ``a``'s shape and dtype (``jnp.ones_like``)."""
    return full_like(a, 1, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    """``fill_value`` with ``a``'s shape and dtype (``jnp.full_like``); weakly typed when ``a``
    is and no ``dtype`` is given (``zeros_like(weak)`` is weak in JAX)."""
    weak = dtype is None and get_aval(_arr(a)).weak_type
    shape, dtype = _like(a, dtype, shape)
    dtype = canonicalize_dtype(dtype)
    if isinstance(fill_value, Tracer):
        return lax.full(shape, fill_value, dtype)
    return lax.full(shape, _np_astype(np.asarray(fill_value), dtype), dtype, _weak_type=weak)


def arange(start, stop=None, step=None, dtype=None):
    """``jnp.arange`` with static bounds: a constant, computed by JAX so values and dtype match."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise errors.ConcretizationTypeError(f"arange needs static (non-traced) bounds{_where_line()}")
    from minixla.core.tracing import current_jaxpr_trace
    if step is None and (stop is None or (np.ndim(start) == 0 and start == 0)) and current_jaxpr_trace():
        # Inside a trace, ``arange(n)`` is JAX's own ``broadcasted_iota`` (jnp.arange's code):
        # staged, not computed by an eager JAX op (an XLA compile, ~40 ms at a process's start).
        # Its dtype and size are JAX's (``eval_shape`` traces jnp.arange, compiling nothing).
        import jax
        out = jax.eval_shape(lambda: _jnp.arange(start, stop, step, dtype=dtype))
        return lax.broadcasted_iota(out.dtype, out.shape, 0)
    return lax.stage_constant(np.asarray(_jnp.arange(start, stop, step, dtype=dtype)))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``jnp.linspace`` with static arguments: a constant, computed by JAX so the values match."""
    out = _jnp.linspace(start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dtype, axis=axis)
    if retstep:
        return lax.stage_constant(np.asarray(out[0])), np.asarray(out[1])
    return lax.stage_constant(np.asarray(out))


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop, num)`` (``jnp.logspace``) with static arguments: a
    constant, computed by JAX so the values match."""
    return lax.stage_constant(np.asarray(_jnp.logspace(start, stop, num, endpoint, base, dtype, axis)))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Numbers spaced evenly on a log scale from ``start`` to ``stop`` (``jnp.geomspace``) with
    static arguments: a constant, computed by JAX so the values match."""
    return lax.stage_constant(np.asarray(_jnp.geomspace(start, stop, num, endpoint, dtype, axis)))


def eye(N, M=None, k=0, dtype=None):
    """Identity-like matrix (``jnp.eye``), a constant."""
    return lax.stage_constant(np.asarray(_jnp.eye(N, M, k, dtype=dtype)))


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    return lax.stage_constant(np.asarray(_jnp.tri(N, M, k, dtype=dtype)))


# Imported last, after this module's definitions, to close an import cycle: ``asarray`` of a list
# of arrays stacks them; ``stack`` converts with ``asarray``.
from minixla.numpy.manipulation import stack  # noqa: E402
