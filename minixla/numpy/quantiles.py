"""Order statistics and binning on ``lax.sort``: ``quantile``/``percentile``/``median`` and their
``nan*`` forms, ``searchsorted``, ``digitize``, ``histogram``/``histogram_bin_edges``, ``interp``
(``jax.numpy``'s signatures, dtypes and errors).

The quantiles sort along the axis and read the two neighbouring order statistics with one
gather each, then combine them with the same ops, in the same order, as ``jax.numpy`` (so
``method="linear"`` is bit-identical to JAX eager). ``searchsorted`` is a binary search with a
static number of levels (``ceil(log2(n + 1))``), each level one gather, compared in JAX's sort
order (NaN above ``+inf``, ``-0.0 == 0.0``): the result of every query is exact, under jit,
grad (integer results carry no tangent) and vmap alike.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (_arr, _canon_axes, _cast, _default_int,
                                     _promote_dtypes, _promote_inexact, _to_inexact, _where_line)
from minixla.numpy.creation import asarray, linspace, zeros
from minixla.numpy.manipulation import concatenate, moveaxis, ravel, reshape, transpose
from minixla.numpy.elementwise import clip, isnan, remainder, where
from minixla.numpy.reductions import any as _any, max as _max, min as _min, sum as _sum
from minixla.numpy.indexing import take, take_along_axis
from minixla.numpy.sorting import sort
from minixla.numpy.sequences import bincount

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _gather_last(a, idx):
    """``a[..., idx]`` per row: ``a`` is ``R + (n,)``, ``idx`` is ``(m,) + R`` (or ``(m,)``)
    of in-range indices; the result is ``(m,) + R``."""
    r = get_aval(a).ndim - 1
    if get_aval(idx).ndim == 1:
        idx = lax.broadcast_in_dim(idx, (*get_aval(a).shape[:-1], get_aval(idx).shape[0]), (r,))
    else:
        idx = transpose(idx, (*range(1, r + 1), 0))
    out = take_along_axis(a, idx, axis=-1, mode="promise_in_bounds")
    return moveaxis(out, -1, 0)


def _raise_empty(axis, ndim, q_ndim, keepdims, squash_nans):
    """The error JAX raises for a quantile over an empty extent: its gather of one order
    statistic asks for a slice of 1 along a dimension of size 0 (TypeError from the gather's
    shape rule, naming that dimension of JAX's reshaped operand: 0 for ``axis=None``, the axis,
    or the merged last dimension of a tuple ``axis``). The ``nan`` forms index instead, and a
    rank-0 index into the (raveled, rank-1) operand is NumPy-style indexing's IndexError."""
    if axis is None:
        dim, rank = 0, 1
    elif isinstance(axis, (tuple, list)):
        dim = rank = ndim - len(axis)
        rank += 1
    else:
        dim, rank = _canon_axes(axis, ndim)[0], ndim
    if squash_nans and rank == 1 and q_ndim == 0 and not keepdims:
        raise IndexError(f"index is out of bounds for axis 0 with size 0{_where_line()}")
    raise errors.ShapeError(f"Slice size at index {dim} in gather op is out of range, must be within "
                            f"[0, 0 + 1), got 1.{_where_line()}")


def _quantile(name, a, q, axis, method, keepdims, squash_nans, out, overwrite_input, weights):
    if weights is not None or method == "inverted_cdf":
        raise errors.UnsupportedError(f"{name}: weights / method='inverted_cdf' are not implemented "
                                      f"in minixla{_where_line()}")
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or out != None")
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' or "
                         "'inverted_cdf'")
    a, = _promote_inexact(_arr(a))
    q = _arr(q)
    aval = get_aval(a)
    if get_aval(q).ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {get_aval(q).shape}")
    q_shape = get_aval(q).shape
    qdt = get_aval(q).dtype
    # Bring the reduced axes last (merged into one) and remember the shape keepdims asks for.
    if axis is None:
        kept_shape = (1,) * aval.ndim
        a = reshape(a, (1, aval.size)) if aval.ndim else reshape(a, (1, 1))
        lead = ()
    else:
        axes = _canon_axes(axis, aval.ndim)
        if isinstance(axis, (tuple, list)) and len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
        keep = [d for d in range(aval.ndim) if d not in axes]
        lead = tuple(aval.shape[d] for d in keep)
        kept_shape = tuple(1 if d in axes else aval.shape[d] for d in range(aval.ndim))
        a = reshape(transpose(a, (*keep, *axes)), (*lead, math.prod(aval.shape[d] for d in axes)))
        if not lead:
            a = reshape(a, (1, get_aval(a).shape[-1]))
    n = get_aval(a).shape[-1]
    if n == 0:
        _raise_empty(axis, aval.ndim, len(q_shape), keepdims, squash_nans)
    qv = reshape(q, (-1,))
    m = get_aval(qv).shape[0]
    rows = get_aval(a).shape[:-1]
    if squash_nans:
        a = sort(where(isnan(a), np.nan, a), axis=-1)
        counts = _sum(lax.bitwise_not(isnan(a)), axis=-1, dtype=qdt)
        qn = lax.mul(lax.broadcast_in_dim(qv, (m, *rows), (0,)), lax.broadcast_in_dim(
            lax.sub(counts, np.asarray(1, qdt)), (m, *rows), tuple(range(1, len(rows) + 1))))
        last = lax.broadcast_in_dim(lax.sub(counts, np.asarray(1, qdt)), (m, *rows),
                                    tuple(range(1, len(rows) + 1)))
        low, high = lax.floor(qn), lax.ceil(qn)
        hw = lax.sub(qn, low)
        lw = lax.sub(np.asarray(1, qdt), hw)
        zero = np.asarray(0, qdt)
        low = lax.max(zero, lax.min(low, last))
        high = lax.max(zero, lax.min(high, last))
    else:
        a = sort(where(_any(isnan(a), axis=-1, keepdims=True), np.nan, a), axis=-1)
        nf = np.asarray(n, qdt)
        qn = lax.mul(qv, lax.sub(nf, np.asarray(1, qdt)))
        low, high = lax.floor(qn), lax.ceil(qn)
        hw = lax.sub(qn, low)
        lw = lax.sub(np.asarray(1, qdt), hw)
        top = lax.sub(nf, np.asarray(1, qdt))
        low = lax.clamp(np.asarray(0, qdt), low, top)
        high = lax.clamp(np.asarray(0, qdt), high, top)
        lw, hw = (lax.broadcast_in_dim(w, (m, *rows), (0,)) for w in (lw, hw))
    idt = _default_int()
    lo_v = _gather_last(a, lax.convert_element_type(low, idt))
    hi_v = _gather_last(a, lax.convert_element_type(high, idt))
    if method == "linear":
        res = lax.add(lax.mul(_cast(lo_v, qdt), lw), lax.mul(_cast(hi_v, qdt), hw))
    elif method == "lower":
        res = lo_v
    elif method == "higher":
        res = hi_v
    elif method == "nearest":
        res = lax.select(lax.le(hw, np.asarray(0.5, get_aval(hw).dtype)), lo_v, hi_v)
    else:
        res = lax.mul(lax.add(lo_v, hi_v), np.asarray(0.5, get_aval(lo_v).dtype))
    res = reshape(res, (*q_shape, *(kept_shape if keepdims else lead)))
    return res


def _check_arraylike(name, *args):
    """JAX's ``check_arraylike``: a list or tuple (or other non-array) argument is a TypeError
    naming the function and the argument's position, as ``jnp.quantile(x, [0.5])`` raises."""
    for i, a in enumerate(args):
        if not (isinstance(a, (np.ndarray, np.generic, int, float, bool)) or hasattr(a, "aval")
                or hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}.")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None):
    """The ``q``-th quantiles (``q`` in [0, 1], rank <= 1) of ``a`` along ``axis`` (an int, a
    tuple, or ``None`` for all), as ``jax.numpy.quantile``: shape ``q.shape + reduced shape``
    (``keepdims`` keeps the reduced axes as 1); any NaN in a slice gives NaN. ``method`` is
    ``linear`` (default), ``lower``, ``higher``, ``midpoint`` or ``nearest``. Raises ValueError
    for another method, a rank-2 ``q`` or ``out``/``overwrite_input``; ``weights`` and
    ``inverted_cdf`` are not implemented (UnsupportedError)."""
    _check_arraylike("quantile", a, q)
    return _quantile("quantile", a, q, axis, method, keepdims, False, out, overwrite_input, weights)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                weights=None):
    """``quantile`` ignoring NaNs (``jax.numpy.nanquantile``); an all-NaN slice gives NaN."""
    _check_arraylike("nanquantile", a, q)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, out, overwrite_input, weights)


def _percent(q):
    q, = _promote_inexact(_arr(q))
    return lax.div(q, np.asarray(100, get_aval(q).dtype))


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None):
    """``quantile(a, q / 100, ...)`` (``jax.numpy.percentile``)."""
    _check_arraylike("percentile", a, q)
    return _quantile("percentile", a, _percent(q), axis, method, keepdims, False, out, overwrite_input,
                     weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None):
    """``nanquantile(a, q / 100, ...)`` (``jax.numpy.nanpercentile``)."""
    _check_arraylike("nanpercentile", a, q)
    return _quantile("nanpercentile", a, _percent(q), axis, method, keepdims, True, out, overwrite_input,
                     weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median along ``axis``: ``quantile(a, 0.5, method="midpoint")`` (``jax.numpy.median``)."""
    _check_arraylike("median", a)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False, out, overwrite_input, None)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median ignoring NaNs (``jax.numpy.nanmedian``)."""
    _check_arraylike("nanmedian", a)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True, out, overwrite_input, None)


# ---------------------------------------------------------------------------------------
# Searching and binning.

def _sort_lt(x, y):
    """``x < y`` in JAX's sort order: NaN above everything (all NaNs equal), ``-0.0 == 0.0``."""
    dt = get_aval(x).dtype
    if dt.kind == "f" or dt.name == "bfloat16":
        return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(lax.eq(x, x), lax.ne(y, y)))
    if dt == np.bool_:
        return lax.bitwise_and(lax.bitwise_not(x), y)
    return lax.lt(x, y)


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion indices of ``v`` into the sorted 1-D ``a`` (``jax.numpy.searchsorted``): for
    ``side="left"`` the first ``i`` with ``v <= a[i]``, for ``"right"`` the first with
    ``v < a[i]``; ``sorter`` is an argsort of ``a``. Shape of ``v``, int32. ``method`` is
    accepted for JAX's signature (every method gives the same indices). Raises ValueError for
    a non-1-D ``a`` or a bad ``side``."""
    if side not in ("left", "right"):
        raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"Unsupported method: {method}")
    a, v = _arr(a), _arr(v)
    if get_aval(a).ndim != 1:
        raise ValueError("a should be 1-dimensional")
    a, v = _promote_dtypes(a, v)
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    n = get_aval(a).shape[0]
    vshape = get_aval(v).shape
    idt = np.dtype(np.int32)
    if n == 0:
        return lax.full(vshape, 0, idt)
    # Binary search: the answer lies in [low, high]; each level halves it with one gather.
    low = lax.full(vshape, 0, idt)
    high = lax.full(vshape, n, idt)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = lax.add(low, lax.div(lax.sub(high, low), np.asarray(2, idt)))
        at_mid = take(a, mid, mode="clip")
        go_left = (lax.bitwise_not(_sort_lt(at_mid, v)) if side == "left" else _sort_lt(v, at_mid))
        low = lax.select(go_left, low, mid)
        high = lax.select(go_left, mid, high)
    return high


def digitize(x, bins, right=False, *, method=None):
    """The bin index of each ``x`` (``jax.numpy.digitize``): ``bins`` is 1-D, increasing or
    decreasing; ``right`` says which edge is closed. Int32, shape of ``x``."""
    x, bins = _arr(x), _arr(bins)
    if isinstance(right, Tracer):
        raise errors.ConcretizationTypeError(f"digitize: the right argument must be static{_where_line()}")
    if get_aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    n = get_aval(bins).shape[0]
    if n == 0:
        return zeros(get_aval(x).shape, np.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    up = searchsorted(bins, x, side=side, **kw)
    down = lax.sub(np.int32(n), searchsorted(lax.rev(bins, (0,)), x, side=side, **kw))
    increasing = lax.ge(lax.slice(bins, (n - 1,), (n,)), lax.slice(bins, (0,), (1,)))
    return where(reshape(increasing, ()), up, down)


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002 (numpy's name)
    """The ``bins + 1`` edges ``histogram`` uses (``jax.numpy.histogram_bin_edges``): ``bins`` is
    a static int (equal widths over ``range``, default ``[a.min(), a.max()]``, widened by 0.5
    each way if empty) or the 1-D edges themselves. String ``bins`` are not implemented."""
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    arr = _arr(a)
    dt = _to_inexact(get_aval(arr).dtype)
    if np.ndim(bins) == 1 or (isinstance(bins, Tracer) and get_aval(bins).ndim == 1):
        return asarray(bins, dt) if not isinstance(bins, Tracer) else _cast(bins, dt)
    if isinstance(bins, Tracer):
        raise errors.ConcretizationTypeError(f"histogram_bin_edges: the bins argument must be a "
                                             f"static int{_where_line()}")
    nbins = operator.index(bins)
    if range is None:
        lo, hi = _min(arr), _max(arr)
    else:
        rng = range
        if isinstance(rng, (list, tuple)) and len(rng) == 2:
            lo, hi = (_arr(r) for r in rng)
        else:
            rng = _arr(rng)
            if get_aval(rng).shape != (2,):
                raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
            lo, hi = lax.reshape(lax.slice(rng, (0,), (1,)), ()), lax.reshape(lax.slice(rng, (1,), (2,)), ())
    lo, hi = _cast(lo, dt), _cast(hi, dt)
    empty = lax.eq(lax.sub(hi, lo), np.asarray(0, dt))
    lo = where(empty, lax.sub(lo, np.asarray(0.5, dt)), lo)
    hi = where(empty, lax.add(hi, np.asarray(0.5, dt)), hi)
    if isinstance(lo, Tracer) or isinstance(hi, Tracer):
        return _linspace_traced(lo, hi, nbins, dt)
    return linspace(lo, hi, nbins + 1, dtype=dt)


def _linspace_traced(lo, hi, n, dt):
    """``linspace(lo, hi, n + 1)`` of traced scalars, by JAX's formula: ``lo * (1 - t) + hi * t``
    for ``t = iota(n) / n``, then ``hi`` itself (``histogram_bin_edges`` under ``jit``)."""
    t = lax.div(lax.iota(dt, n), lax.full((n,), n, dt))
    one = lax.full((n,), 1, dt)
    out = lax.add(lax.mul(lax.broadcast(lo, (n,)), lax.sub(one, t)), lax.mul(lax.broadcast(hi, (n,)), t))
    return lax.concatenate([out, lax.broadcast(hi, (1,))], 0)



def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002 (numpy's name)
    """``(counts, bin_edges)`` of ``a`` (flattened) as ``jax.numpy.histogram``: bins half-open
    ``[e_i, e_{i+1})`` except the last, closed; values outside are dropped; ``weights`` (shape of
    ``a``) sum per bin; ``density`` divides by the bin width and the total. Counts are in the
    inexact dtype of ``a`` (and ``weights``)."""
    a = _arr(a)
    if weights is None:
        a, = _promote_inexact(a)
        weights = lax.full(get_aval(a).shape, 1, get_aval(a).dtype)
    else:
        weights = _arr(weights)
        if get_aval(a).shape != get_aval(weights).shape:
            raise ValueError("weights should have the same shape as a.")
        a, weights = _promote_inexact(a, weights)
    edges = histogram_bin_edges(a, bins, range)
    ne = get_aval(edges).shape[0]
    idx = searchsorted(edges, a, side="right")
    last = lax.reshape(lax.slice(edges, (ne - 1,), (ne,)), ())
    idx = where(lax.eq(a, _cast(last, get_aval(a).dtype)), ne - 1, idx)
    counts = bincount(ravel(idx), ravel(weights), length=ne)  # past the last edge: dropped
    counts = lax.slice(counts, (1,), (ne,))
    if density:
        widths = lax.sub(lax.slice(edges, (1,), (ne,)), lax.slice(edges, (0,), (ne - 1,)))
        counts = counts / widths / _sum(counts)
    return counts, edges


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of ``(xp, fp)`` at ``x`` (``jax.numpy.interp``): ``xp``
    increasing (sorted for ``period``); outside the range ``left``/``right`` (default the end
    values, or ``"extrapolate"``); ``period`` makes it periodic. Shape of ``x``, inexact dtype."""
    x, xp, fp = _arr(x), _arr(xp), _arr(fp)
    if get_aval(xp).shape != get_aval(fp).shape or get_aval(xp).ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = _promote_inexact(x, xp)
    fp, = _promote_inexact(fp)
    ext = {}
    for nm, val in (("left", left), ("right", right)):
        if isinstance(val, str) and val != "extrapolate":
            raise ValueError(f"the only valid string value of `{nm}` is 'extrapolate', but got: {val!r}")
        ext[nm] = isinstance(val, str)
    if period is not None:
        if np.ndim(period) != 0 and not (isinstance(period, Tracer) and get_aval(period).ndim == 0):
            raise ValueError(f"period must be a scalar; got {period}")
        period = lax.abs(_cast(_arr(period), get_aval(x).dtype))
        x, xp = remainder(x, period), remainder(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        k = get_aval(xp).shape[0]
        xp = concatenate([lax.sub(lax.slice(xp, (k - 1,), (k,)), period), xp,
                          lax.add(lax.slice(xp, (0,), (1,)), period)])
        fp = concatenate([lax.slice(fp, (k - 1,), (k,)), fp, lax.slice(fp, (0,), (1,))])
    k = get_aval(xp).shape[0]
    i = clip(searchsorted(xp, x, side="right"), 1, k - 1)
    im1 = lax.sub(i, np.int32(1))
    fp_i, fp_im1 = take(fp, i, mode="clip"), take(fp, im1, mode="clip")
    xp_i, xp_im1 = take(xp, i, mode="clip"), take(xp, im1, mode="clip")
    df = fp_i - fp_im1
    dx = xp_i - xp_im1
    delta = x - xp_im1
    eps = np.spacing(np.finfo(get_aval(xp).dtype).eps)
    dx0 = lax.abs(dx) <= eps
    f = where(dx0, fp_im1, fp_im1 + (delta / where(dx0, 1, dx)) * df)
    if period is None:
        if not ext["left"]:
            f = where(x < take(xp, 0), take(fp, 0) if left is None else left, f)
        if not ext["right"]:
            f = where(x > take(xp, k - 1), take(fp, k - 1) if right is None else right, f)
    return f


__all__ = ["quantile", "nanquantile", "percentile", "nanpercentile", "median", "nanmedian",
           "searchsorted", "digitize", "histogram_bin_edges", "histogram", "interp"]
