"""Reductions (``sum`` ... ``any``, ``mean``/``var``/``std``), ``argmax``/``argmin`` and the
cumulative reductions, with ``axis``/``keepdims``/``dtype`` handled as ``jax.numpy`` does.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _canon_axes, _canon_axis1, _cast, _default_float, _default_int, _is_inexact, _where_line,
    bfloat16)
from minixla.numpy.creation import asarray, full_like
from minixla.numpy.manipulation import ravel, reshape
from minixla.numpy.elementwise import (
    _as_bool, _div_by_constant, add, maximum, minimum, multiply, sqrt, subtract)


# ---------------------------------------------------------------------------------------
# Reductions.

def _keepdims(out, x_shape, axes):
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _upcast_f16(dt):
    return np.dtype(np.float32) if np.dtype(dt) in (np.dtype(np.float16), np.dtype(bfloat16)) else np.dtype(dt)


def _sum_like(lax_fn, name, identity):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        if where is not None or out is not None:
            raise errors.UnsupportedError(f"{name}: where= and out= are not supported")
        a = _arr(a)
        if not isinstance(a, Tracer):
            a = asarray(a)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if dtype is None:
            dt = aval.dtype
            if dt == np.bool_:
                dt = _default_int()
            elif dt.kind == "i" and dt.itemsize < _default_int().itemsize:
                dt = _default_int()
            elif dt.kind == "u" and dt.itemsize < _default_int().itemsize:
                dt = canonicalize_dtype(np.uint64)
        else:
            dt = canonicalize_dtype(dtype)
        comp = _upcast_f16(dt)
        x = _cast(a, comp) if aval.dtype != comp else a
        r = lax_fn(x, axes)
        if initial is not None:
            r = (add if name == "sum" else multiply)(r, _cast(initial, comp))
        r = _cast(r, dt) if comp != dt else r
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, dtype=None, keepdims=False, initial=None)``: bool and "
                  f"small integers accumulate in the default integer type, f16/bf16 in f32; "
                  f"an empty extent gives {identity}.")
    return fn


sum = _sum_like(lax.reduce_sum, "sum", 0)
prod = _sum_like(lax.reduce_prod, "prod", 1)


def _minmax(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        if where is not None or out is not None:
            raise errors.UnsupportedError(f"{name}: where= and out= are not supported")
        a = _arr(a)
        if not isinstance(a, Tracer):
            a = asarray(a)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if initial is None and builtins.any(aval.shape[i] == 0 for i in axes):
            raise errors.ShapeError(f"zero-size array to reduction operation {name} which has no "
                                    f"identity (shape {aval.shape}, axis {axis}){_where_line()}")
        r = lax_fn(a, axes)
        if initial is not None:
            r = (maximum if name == "max" else minimum)(r, initial)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}``: NaN-propagating; an empty extent needs ``initial`` "
                  "(else ShapeError, as NumPy/JAX raise).")
    return fn


max = amax = _minmax(lax.reduce_max, "max")
min = amin = _minmax(lax.reduce_min, "min")


def _bool_reduction(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, where=None):
        a = _as_bool(_arr(a) if isinstance(a, Tracer) else asarray(a))
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        r = lax_fn(a, axes)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}``: the truth values reduced over ``axis``."
    return fn


all = _bool_reduction(lax.reduce_and, "all")  # noqa: A001
any = _bool_reduction(lax.reduce_or, "any")  # noqa: A001


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Arithmetic mean (``jnp.mean``): integers average in the default float, f16/bf16 in f32."""
    a = _arr(a) if isinstance(a, Tracer) else asarray(a)
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    n = math.prod(aval.shape[i] for i in axes)
    if dtype is None:
        dt = aval.dtype if _is_inexact(aval.dtype) else _default_float()
    else:
        dt = canonicalize_dtype(dtype)
    comp = _upcast_f16(dt)
    s = sum(a, axes, dtype=comp, keepdims=keepdims)
    return _cast(_div_by_constant(s, n), dt)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Variance ``sum((a - mean)**2) / (n - ddof)`` (``jnp.var``), NaN when ``n - ddof <= 0``."""
    a = _arr(a) if isinstance(a, Tracer) else asarray(a)
    correction = ddof if correction is None else correction
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    if dtype is None:
        dt = aval.dtype if _is_inexact(aval.dtype) else _default_float()
    else:
        dt = canonicalize_dtype(dtype)
    comp = _upcast_f16(dt)
    a = _cast(a, comp)
    a_mean = mean(a, axes, dtype=comp, keepdims=True)
    centered = lax.integer_pow(subtract(a, a_mean), 2)
    n = math.prod(aval.shape[i] for i in axes)
    result = _div_by_constant(sum(centered, axes, dtype=comp, keepdims=keepdims), n - correction)
    result = _cast(result, dt)
    return result if n - correction > 0 else full_like(result, np.nan, dt)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, correction=None):
    """Standard deviation, ``sqrt(var)`` (``jnp.std``)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where, correction))


def _argminmax(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        aval = get_aval(a)
        if axis is None:
            if aval.size == 0:
                raise errors.ShapeError(f"attempt to get {name} of an empty sequence{_where_line()}")
            r = lax_fn(ravel(a), 0, _default_int())
            return reshape(r, (1,) * aval.ndim) if keepdims else r
        ax = _canon_axis1(axis, aval.ndim)
        if aval.shape[ax] == 0:
            raise errors.ShapeError(f"attempt to get {name} of an empty sequence (shape {aval.shape}, "
                                    f"axis {axis}){_where_line()}")
        r = lax_fn(a, ax, _default_int())
        return _keepdims(r, aval.shape, (ax,)) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}``: index of the first extreme value (int32); the first NaN wins. "
                  "Raises ShapeError (a ValueError) for an empty array, like JAX.")
    return fn


argmax = _argminmax(lax.argmax, "argmax")
argmin = _argminmax(lax.argmin, "argmin")


def _cumulative(lax_fn, name):
    def fn(a, axis=None, dtype=None):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        if axis is None:
            a, axis = ravel(a), 0
        aval = get_aval(a)
        ax = _canon_axis1(axis, aval.ndim)
        dt = canonicalize_dtype(dtype) if dtype is not None else (
            _default_int() if aval.dtype == np.bool_ else aval.dtype)
        comp = _upcast_f16(dt) if name in ("cumsum", "cumprod") else dt
        a = _cast(a, comp)
        if aval.ndim == 0:
            a, ax = reshape(a, (1,)), 0
        return _cast(lax_fn(a, ax), dt)
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}(a, axis=None, dtype=None)``: inclusive scan (flattened if axis is None)."
    return fn


cumsum = _cumulative(lax.cumsum, "cumsum")
cumprod = _cumulative(lax.cumprod, "cumprod")
