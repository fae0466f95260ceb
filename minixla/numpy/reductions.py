"""Reductions (``sum`` ... ``any``, ``mean``/``var``/``std``), ``argmax``/``argmin`` and the
cumulative reductions, with ``axis``/``keepdims``/``dtype`` handled as ``jax.numpy`` does.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from minixla import lax
from minixla.lax.base import reduction_identity
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _canon_axes, _canon_axis1, _cast, _default_float, _default_int, _is_inexact, _where_line,
    bfloat16)
from minixla.numpy.creation import asarray, full_like
from minixla.numpy.manipulation import ravel, reshape
from minixla.numpy.promotion import broadcast_to
from minixla.numpy.elementwise import (
    _as_bool, _div_by_constant, add, isnan, logical_and, logical_not, maximum, minimum, multiply,
    sqrt, subtract, true_divide)
from minixla.numpy.elementwise import where as _where


# ---------------------------------------------------------------------------------------
# Reductions.

def _keepdims(out, x_shape, axes):
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _upcast_f16(dt):
    return np.dtype(np.float32) if np.dtype(dt) in (np.dtype(np.float16), np.dtype(bfloat16)) else np.dtype(dt)


def _operand(a, name, out=None):
    """The reduction's operand as an array or tracer; ``out=`` raises as in JAX (arrays are immutable)."""
    if out is not None:
        raise errors.UnsupportedError(f"{name}: out= is not supported (arrays are immutable){_where_line()}")
    return _arr(a) if isinstance(a, Tracer) else asarray(a)


def _masked(a, where, fill):
    """``a`` with the elements where ``where`` is False replaced by ``fill`` — the reduction's
    identity, so they do not count (``where=`` of every ``jnp`` reduction). ``where`` broadcasts
    to ``a``'s shape (ShapeError otherwise)."""
    if where is None:
        return a
    shape = get_aval(a).shape
    mask = broadcast_to(_as_bool(where), shape)
    return lax.select_n(mask, full_like(a, fill), a)


def _count(where, shape, axes, dtype, keepdims):
    """How many elements ``where`` selects along ``axes``, in ``dtype`` (the normalizer of a
    masked ``mean``/``var``)."""
    mask = broadcast_to(_as_bool(where), shape)
    return sum(mask, axes, dtype=dtype, keepdims=keepdims)


def _sum_like(lax_fn, name, identity):
    combine = add if name == "sum" else multiply

    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
           promote_integers=True):
        a = _operand(a, name, out)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if dtype is None:
            dt = aval.dtype
            if dt == np.bool_:
                dt = _default_int()
            elif not promote_integers:
                pass
            elif dt.kind == "i" and dt.itemsize < _default_int().itemsize:
                dt = _default_int()
            elif dt.kind == "u" and dt.itemsize < _default_int().itemsize:
                dt = canonicalize_dtype(np.uint64)
        else:
            dt = canonicalize_dtype(dtype)
        comp = _upcast_f16(dt) if dtype is None else dt  # (JAX widens f16/bf16 only for dtype=None)
        x = _cast(a, comp)  # (a weak operand becomes strong first, as in JAX: sum(weak) is strong)
        r = lax_fn(_masked(x, where, identity), axes)
        if initial is not None:
            r = combine(r, _cast(initial, comp))
        r = _cast(r, dt) if comp != dt else r
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, dtype=None, keepdims=False, initial=None, where=None, "
                  "promote_integers=True)``: bool and (unless ``promote_integers=False``) small "
                  "integers accumulate in the default integer type, f16/bf16 in f32 (in "
                  "``dtype`` itself when it is given, as JAX); "
                  f"an empty extent (or one ``where`` masks out) gives {identity}. ``where`` (bool, "
                  "broadcast to ``a``'s shape) selects the elements that count.")
    return fn


sum = _sum_like(lax.reduce_sum, "sum", 0)
prod = _sum_like(lax.reduce_prod, "prod", 1)


def _minmax(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        a = _operand(a, name, out)
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        if initial is None and where is not None:
            raise errors.ShapeError(f"reduction operation {name} does not have an identity, so to use "
                                    f"a where mask one has to specify 'initial'{_where_line()}")
        if initial is None and builtins.any(aval.shape[i] == 0 for i in axes):
            raise errors.ShapeError(f"zero-size array to reduction operation {name} which has no "
                                    f"identity (shape {aval.shape}, axis {axis}){_where_line()}")
        a = _cast(a, aval.dtype)  # (strong, as JAX's reductions: max(weak) is strong)
        r = lax_fn(_masked(a, where, reduction_identity("maximum" if name == "max" else "minimum", aval.dtype)), axes)
        if initial is not None:
            r = (maximum if name == "max" else minimum)(r, initial)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, keepdims=False, initial=None, where=None)``: "
                  "NaN-propagating; an empty extent, or a ``where`` mask, needs ``initial`` (else "
                  "ShapeError, a ValueError, with JAX's message).")
    return fn


max = amax = _minmax(lax.reduce_max, "max")
min = amin = _minmax(lax.reduce_min, "min")


def _bool_reduction(lax_fn, name):
    def fn(a, axis=None, out=None, keepdims=False, *, where=None):
        a = _as_bool(_operand(a, name, out))
        aval = get_aval(a)
        axes = _canon_axes(axis, aval.ndim)
        r = lax_fn(_masked(a, where, name == "all"), axes)
        return _keepdims(r, aval.shape, axes) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}(a, axis=None, keepdims=False, *, where=None)``: the truth values "
                  f"reduced over ``axis``; masked-out elements count as {name == 'all'}.")
    return fn


all = _bool_reduction(lax.reduce_and, "all")  # noqa: A001
any = _bool_reduction(lax.reduce_or, "any")  # noqa: A001


def _inexact_result(aval_dtype, dtype, upcast):
    """(result dtype, accumulation dtype) of ``mean``/``var``/``nanmean``: integers give the
    default float; f16/bf16 accumulate in f32 where ``upcast`` (``var`` always, ``mean`` when
    ``dtype`` is None, ``nanmean`` never: JAX's rules)."""
    dt = (aval_dtype if _is_inexact(aval_dtype) else _default_float()) if dtype is None \
        else canonicalize_dtype(dtype)
    return dt, (_upcast_f16(dt) if upcast else dt)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean (``jnp.mean``): integers average in the default float, f16/bf16 in f32
    (in ``dtype`` itself when it is given, as JAX). Without ``where`` it is ``sum * (1/n)``, the
    reciprocal rounded to the dtype: XLA folds JAX's division by the constant ``n`` so.

    With ``where`` (bool, broadcast to ``a``) the sum of the selected elements is divided by their
    count (NaN where none is selected), as JAX does.
    """
    a = _operand(a, "mean", out)
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    dt, comp = _inexact_result(aval.dtype, dtype, upcast=dtype is None)
    s = sum(a, axes, dtype=comp, keepdims=keepdims, where=where)
    if where is None:
        n = math.prod(aval.shape[i] for i in axes)
        result = _cast(_div_by_constant(s, n), dt)
        if n or not _is_inexact(dt):
            return result
        return _nan_like(result, dt)
    return _cast(lax.div(s, _count(where, aval.shape, axes, comp, keepdims)), dt)


def _nan_like(result, dt):
    """NaN (positive, as XLA folds JAX's ``0 * (1/0)`` or ``where(n - ddof > 0, ..., nan)``) in
    ``result``'s shape, batched like ``result`` under vmap."""
    return lax.select_n(np.bool_(False), full_like(result, np.nan, dt), result)


_arithmetic_mean = mean  # (``var``'s argument ``mean`` is the precomputed mean)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Variance ``sum((a - mean)**2) / (n - ddof)`` (``jnp.var``), NaN when ``n - ddof <= 0``;
    f16/bf16 are computed in f32 (whatever ``dtype``), and the final division is exact, as
    JAX's (its ``n - ddof`` is a run-time value, not a folded constant); with ``where``, ``n`` is the count of selected elements (per output element). ``mean``, if
    given, is the mean computed with ``keepdims=True`` (ShapeError for another rank)."""
    a = _operand(a, "var", out)
    correction = ddof if correction is None else correction
    aval = get_aval(a)
    axes = _canon_axes(axis, aval.ndim)
    dt, comp = _inexact_result(aval.dtype, dtype, upcast=True)
    a = _cast(a, comp)
    if mean is None:
        a_mean = _arithmetic_mean(a, axes, dtype=comp, keepdims=True, where=where)
    else:
        a_mean = _cast(_arr(mean), comp)
        if get_aval(a_mean).ndim != aval.ndim:
            raise errors.ShapeError(f"var: mean of shape {get_aval(a_mean).shape} must have the rank "
                                    f"of a {aval.shape} (keepdims=True){_where_line()}")
    centered = lax.integer_pow(subtract(a, a_mean), 2)
    total = sum(centered, axes, dtype=comp, keepdims=keepdims, where=where)
    if where is None:
        n = math.prod(aval.shape[i] for i in axes)
        # (JAX's ``n - ddof`` in the computation dtype is a run-time value of its jitted ``_var``,
        # so XLA divides exactly: no reciprocal)
        normalizer = np.asarray(n, comp) - np.asarray(correction, comp)
        result = _cast(_div_by_constant(total, normalizer, folded=False), dt)
        if normalizer > 0:
            return result
        return _nan_like(result, dt)  # (JAX's ``where(n - ddof > 0, total / (n - ddof), nan)``)
    normalizer = subtract(_count(where, aval.shape, axes, comp, keepdims), _cast(correction, comp))
    result = lax.select_n(lax.gt(normalizer, full_like(normalizer, 0)),
                          full_like(total, np.nan), lax.div(total, normalizer))
    return _cast(result, dt)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Standard deviation, ``sqrt(var)`` (``jnp.std``)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction))


# ---------------------------------------------------------------------------------------
# NaN-ignoring reductions: each is its plain reduction with the NaNs masked out, as jnp's.

def _not_nan(a):
    return logical_not(isnan(a))


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``jnp.nansum``: ``sum`` treating NaN as 0."""
    a = _operand(a, "nansum", out)
    # (JAX's form: under vmap, an empty ``where`` is its constant 0, so the sum is unbatched)
    if _is_inexact(get_aval(a).dtype):
        a = _where(isnan(a), _cast(0, get_aval(a).dtype), a)
    return sum(a, axis, dtype, None, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``jnp.nanprod``: ``prod`` treating NaN as 1."""
    a = _operand(a, "nanprod", out)
    if _is_inexact(get_aval(a).dtype):
        a = _where(isnan(a), _cast(1, get_aval(a).dtype), a)
    return prod(a, axis, dtype, None, keepdims, initial, where)


def _and_where(mask, where):
    return mask if where is None else logical_and(mask, where)


def _nan_extreme(reduction, name):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        a = _operand(a, name, out)
        aval = get_aval(a)
        if not _is_inexact(aval.dtype):
            return reduction(a, axis, None, keepdims, initial, where)
        fill = -np.inf if name == "nanmax" else np.inf
        r = reduction(_where(isnan(a), _cast(fill, aval.dtype), a), axis, None, keepdims, initial, where)
        if initial is not None:
            return r
        return _where(all(isnan(a), axis, keepdims=keepdims), _cast(np.nan, aval.dtype), r)
    fn.__name__ = name
    fn.__doc__ = (f"``jnp.{name}``: ``{name[3:]}`` ignoring NaNs; NaN where every element is NaN "
                  "(unless ``initial`` is given).")
    return fn


nanmax = _nan_extreme(max, "nanmax")
nanmin = _nan_extreme(min, "nanmin")


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """``jnp.nanmean``: the mean of the non-NaN elements (NaN where there is none).

    As JAX's: for a float ``a``, ``nansum`` and the count of non-NaN elements are both computed
    in ``dtype`` (default ``a``'s: f16/bf16 are not widened) and divided exactly; an integer or
    bool ``a`` is ``mean``.
    """
    a = _operand(a, "nanmean", out)
    aval = get_aval(a)
    if not _is_inexact(aval.dtype):
        return mean(a, axis, dtype, None, keepdims, where=where)
    dt, _ = _inexact_result(aval.dtype, dtype, upcast=False)
    count = sum(_not_nan(a), axis, dtype=dt, keepdims=keepdims, where=where)
    return lax.div(nansum(a, axis, dtype=dt, keepdims=keepdims, where=where), count)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """``jnp.nanvar``: the variance of the non-NaN elements (NaN where fewer than ``ddof + 1``)."""
    a = _operand(a, "nanvar", out)
    if _is_inexact(get_aval(a).dtype):
        where = _and_where(_not_nan(a), where)
    return var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """``jnp.nanstd``: ``sqrt(nanvar)``."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where, mean))


def count_nonzero(a, axis=None, keepdims=False):
    """``jnp.count_nonzero``: the number of nonzero (NaN counts) elements, in the default int."""
    a = _operand(a, "count_nonzero")
    return sum(_as_bool(a), axis, dtype=_default_int(), keepdims=keepdims)


def ptp(a, axis=None, out=None, keepdims=False):
    """``jnp.ptp``: ``max - min`` along ``axis`` (peak to peak)."""
    a = _operand(a, "ptp", out)
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """``jnp.average``: ``sum(a * w) / sum(w)`` along ``axis`` (the mean when ``weights`` is None).

    ``weights`` has ``a``'s shape, or is 1-D of ``a.shape[axis]`` when ``axis`` is an int
    (ValueError otherwise, with JAX's messages). ``returned=True`` also gives ``sum(w)``
    broadcast to the result.
    """
    a = _operand(a, "average")
    aval = get_aval(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        axes = _canon_axes(axis, aval.ndim)
        count = math.prod(aval.shape[i] for i in axes)
        weights_sum = full_like(avg, count, get_aval(avg).dtype)
        return (avg, weights_sum) if returned else avg
    w = _operand(weights, "average")
    w_aval = get_aval(w)
    dt = get_aval(true_divide(multiply(_cast(0, aval.dtype), _cast(0, w_aval.dtype)), 1.0)).dtype
    if w_aval.shape != aval.shape:
        if axis is None:
            raise errors.ShapeError("Axis must be specified when shapes of a and weights differ."
                                    f"{_where_line()}")
        if w_aval.ndim != 1 or not isinstance(axis, int) or \
                w_aval.shape[0] != aval.shape[_canon_axis1(axis, aval.ndim)]:
            raise errors.ShapeError("Shape of weights must be consistent with shape of a along "
                                    f"specified axis.{_where_line()}")
        ax = _canon_axis1(axis, aval.ndim)
        w = lax.broadcast_in_dim(w, aval.shape, (ax,))
    a, w = _cast(a, dt), _cast(w, dt)
    weights_sum = sum(w, axis, keepdims=keepdims)
    avg = true_divide(sum(multiply(a, w), axis, keepdims=keepdims), weights_sum)
    if returned:
        return avg, broadcast_to(weights_sum, get_aval(avg).shape)
    return avg


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


def _nan_arg(arg, name):
    def fn(a, axis=None, out=None, keepdims=False):
        a = _operand(a, name, out)
        aval = get_aval(a)
        if not _is_inexact(aval.dtype):
            return arg(a, axis, keepdims=keepdims)
        fill = -np.inf if name == "nanargmax" else np.inf
        r = arg(_where(isnan(a), _cast(fill, aval.dtype), a), axis, keepdims=keepdims)
        return _where(all(isnan(a), axis, keepdims=keepdims), _cast(-1, get_aval(r).dtype), r)
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}``: ``{name[3:]}`` ignoring NaNs; -1 where every element is NaN."
    return fn


nanargmax = _nan_arg(argmax, "nanargmax")
nanargmin = _nan_arg(argmin, "nanargmin")


def _cumulative(lax_fn, name):
    def fn(a, axis=None, dtype=None):
        a = _arr(a) if isinstance(a, Tracer) else asarray(a)
        if axis is None:
            a, axis = ravel(a), 0
        aval = get_aval(a)
        ax = _canon_axis1(axis, aval.ndim)
        dt = canonicalize_dtype(dtype) if dtype is not None else (
            _default_int() if aval.dtype == np.bool_ else aval.dtype)
        a = _cast(a, dt)  # (f16/bf16 scan in their own dtype, as JAX's)
        if aval.ndim == 0:
            a, ax = reshape(a, (1,)), 0
        return lax_fn(a, ax)
    fn.__name__ = name
    fn.__doc__ = f"``jnp.{name}(a, axis=None, dtype=None)``: inclusive scan (flattened if axis is None)."
    return fn


cumsum = _cumulative(lax.cumsum, "cumsum")
cumprod = _cumulative(lax.cumprod, "cumprod")
