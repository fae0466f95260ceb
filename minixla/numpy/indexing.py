"""Indexing: ``take``/``take_along_axis`` (and ``repeat``, a take), ``x[idx]`` (basic and
integer-array, as slices and gathers) and ``x.at[idx].set/add/...`` (static indices, as one
scatter).
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
    _arr, _canon_axis1, _cast, _default_int, _is_int_index, _promote_dtypes, _where_line,
    broadcast_shapes, broadcast_to)
from minixla.numpy.creation import asarray, astype, zeros
from minixla.numpy.manipulation import concatenate, expand_dims, ravel, reshape
from minixla.numpy.elementwise import remainder


# ---------------------------------------------------------------------------------------
# take, take_along_axis and repeat (gathers along one axis).

def repeat(a, repeats, axis=None, total_repeat_length=None):
    """Repeat each element ``repeats`` times (``jnp.repeat``); ``repeats`` is a static int or list."""
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    shape = get_aval(a).shape
    ax = _canon_axis1(axis, len(shape))
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        x = expand_dims(a, ax + 1)
        big = list(get_aval(x).shape)
        big[ax + 1] = r
        x = broadcast_to(x, big)
        new = list(shape)
        new[ax] = shape[ax] * r
        return reshape(x, new)
    reps = np.asarray(repeats)
    if isinstance(repeats, Tracer) or reps.shape != (shape[ax],):
        raise errors.ShapeError(f"repeat: repeats must be a static int or a list of {shape[ax]} ints{_where_line()}")
    idx = np.repeat(np.arange(shape[ax]), reps)
    return take(a, idx, axis=ax)


def take(a, indices, axis=None, mode=None, fill_value=None, unique_indices=False,
         indices_are_sorted=False):
    """Elements at ``indices`` along ``axis`` (``jnp.take``; ``axis=None`` takes from the flat
    array), one XLA gather. Modes as JAX's: ``None``/``"fill"`` counts negative indices from the
    end (in the indices' dtype; unsigned ones are never negative) and gives ``fill_value`` for
    the others out of range (default: NaN for floats, the minimum of a signed and the maximum of
    an unsigned int, True for bool); ``"clip"`` clamps (negatives to 0, they do not wrap);
    ``"wrap"`` takes the index modulo the axis size. Raises ``ValueError`` for another mode or
    non-integer indices, ``IndexError`` for a non-empty take from an empty axis."""
    a = _arr(a)
    idx = _canonical_index(indices)
    idt = get_aval(idx).dtype
    if idt.kind not in "iub":
        raise ValueError(f"take: indices must have an integer type, got {idt.name}{_where_line()}")
    if idt == np.bool_:
        idx = _cast(idx, np.int32)
    if axis is None:
        a, axis = ravel(a), 0
    aval = get_aval(a)
    ax = _canon_axis1(axis, aval.ndim)
    n = aval.shape[ax]
    if mode is None or mode == "fill":
        gmode = lax.GatherScatterMode.FILL_OR_DROP
        idx = _count_from_end(idx, n)
    elif mode == "raise":
        raise errors.UnsupportedError(f"take: mode='raise' is not supported (as in JAX){_where_line()}")
    elif mode == "wrap":
        idx = remainder(idx, _cast(n, get_aval(idx).dtype)) if n else idx
        gmode = lax.GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode == "clip":
        gmode = lax.GatherScatterMode.CLIP
    else:
        raise ValueError(f"Invalid mode '{mode}' for np.take{_where_line()}")
    ishape = get_aval(idx).shape
    if n == 0:
        if math.prod(ishape):
            raise IndexError(f"Cannot do a non-empty jnp.take() from an empty axis.{_where_line()}")
        return a
    out_shape = aval.shape[:ax] + ishape + aval.shape[ax + 1:]
    if math.prod(ishape) == 0:
        return zeros(out_shape, aval.dtype)
    nd = len(ishape)
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(ax)) + tuple(range(ax + nd, aval.ndim + nd - 1)),
        collapsed_slice_dims=(ax,), start_index_map=(ax,))
    sizes = list(aval.shape)
    sizes[ax] = 1
    return lax.gather(a, reshape(idx, ishape + (1,)), dn, sizes, mode=gmode,
                      fill_value=fill_value if gmode is lax.GatherScatterMode.FILL_OR_DROP else None)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """``jnp.take_along_axis``: ``arr`` indexed along ``axis`` by ``indices`` of the same rank
    (their other dims broadcast against ``arr``'s), one XLA gather. As JAX: unless
    ``mode="promise_in_bounds"`` the indices are first converted to int32 (int64 for a huge
    axis) and negative ones counted from the end; then ``mode`` ``None``/``"fill"`` gives
    ``fill_value`` (NaN for floats, see ``take``) out of range and ``"clip"`` clamps. An empty
    axis gives zeros. Raises ``TypeError`` for non-integer indices, ``ValueError`` for a rank
    mismatch."""
    arr = _arr(arr)
    idx = _canonical_index(indices)
    idt = get_aval(idx).dtype
    if idt.kind not in "iu":
        raise errors.DTypeError(f"take_along_axis indices must be of integer type, got {idt.name}"
                                f"{_where_line()}")
    if axis is None:
        if get_aval(idx).ndim != 1:
            raise errors.ShapeError(f"take_along_axis: when axis=None, indices must have a single "
                                    f"dimension, got {get_aval(idx).shape}{_where_line()}")
        arr, axis = ravel(arr), 0
    shape = get_aval(arr).shape
    ax = _canon_axis1(axis, len(shape))
    ishape = get_aval(idx).shape
    if len(ishape) != len(shape):
        raise errors.ShapeError(f"take_along_axis: indices rank {len(ishape)} != array rank {len(shape)}{_where_line()}")
    arr_shape = tuple(1 if i == ax else d for i, d in enumerate(shape))
    try:
        out_shape = broadcast_shapes(ishape, arr_shape)
    except errors.ShapeError as e:
        raise errors.ShapeError(f"take_along_axis: {e.args[0]}{_where_line()}") from None
    n = shape[ax]
    if n == 0:  # (as JAX: a constant, unbatched under vmap)
        return zeros(out_shape, get_aval(arr).dtype)
    if 0 in out_shape:
        # No gather (its slices could not fit a 0-sized dim), but an empty result traced from
        # both operands: JAX's gather there is batched when ``arr`` or ``indices`` is.
        pred = lax.convert_element_type(_empty_of(idx, out_shape), np.bool_)
        return lax.select_n(pred, _empty_of(arr, out_shape), _empty_of(arr, out_shape))
    itype = _index_dtype((n,))
    if mode == "promise_in_bounds":
        # XLA clamps; clamping first in the indices' own dtype keeps that (a uint32 index
        # >= 2**31 is large, not negative) when they join the int32 iotas below.
        idx = _clamp_in_dtype(idx, n)
    else:
        idx = _count_from_end(_cast(idx, itype), n)
    gmode = lax.GatherScatterMode.from_any("fill" if mode is None else mode)
    parts = []
    for d in range(len(shape)):
        if d == ax:
            part = broadcast_to(_cast(idx, itype), out_shape)
        elif shape[d] == 1:  # broadcast against the indices: always row 0
            part = np.zeros(out_shape, itype)
        else:
            part = lax.broadcasted_iota(itype, out_shape, d)
        parts.append(reshape(part, out_shape + (1,)))
    gidx = parts[0] if len(parts) == 1 else concatenate(parts, axis=-1)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(len(shape))),
                                    start_index_map=tuple(range(len(shape))))
    return lax.gather(arr, gidx, dn, [1] * len(shape), mode=gmode,
                      fill_value=fill_value if gmode is lax.GatherScatterMode.FILL_OR_DROP else None)


def _canonical_index(idx):
    """A static index array in the dtype ``jnp.take`` converts it to first (int64 -> int32
    without x64, wrapping); a tracer is already canonical. (``x[idx]`` counts a NumPy index
    from the end before it converts, so it does not use this.)"""
    if isinstance(idx, Tracer):
        return idx
    idx = np.asarray(idx)
    return _cast(idx, canonicalize_dtype(idx.dtype)) if idx.dtype != np.bool_ else idx


def _index_dtype(shape):
    """The signed index dtype JAX converts gather indices into ``shape`` to (int32, or int64
    for a dim past int32's range)."""
    big = builtins.any(d > np.iinfo(np.int32).max for d in shape)
    return canonicalize_dtype(np.int64 if big else np.int32)


def _count_from_end(idx, n, strict=False):
    """JAX's ``_normalize_index``: ``idx + n`` where ``idx < 0``, computed in ``idx``'s dtype
    (wrapping); unsigned indices are returned unchanged. ``strict``: a size ``n`` that does not
    fit the dtype raises ``OverflowError``, as ``x[idx]`` does in JAX."""
    dt = get_aval(idx).dtype
    if dt.kind != "i":
        return idx
    if strict and n > np.iinfo(dt).max:
        raise OverflowError(f"Python integer {n} out of bounds for {dt.name}{_where_line()}")
    with np.errstate(all="ignore"):
        c = np.asarray(n).astype(dt)[()]
        if not isinstance(idx, Tracer):
            v = np.asarray(idx)
            return np.where(v < 0, v + c, v).astype(dt)
    return lax.select_n(lax.lt(idx, np.zeros((), dt)[()]), idx, lax.add(idx, c))


def _clamp_in_dtype(idx, n):
    """Indices clamped to ``[0, n - 1]`` in their own dtype (unsigned ones are never negative)."""
    dt = get_aval(idx).dtype
    hi = np.asarray(builtins.min(n - 1, np.iinfo(dt).max)).astype(dt)[()]
    if not isinstance(idx, Tracer):
        return np.clip(np.asarray(idx), 0, hi).astype(dt)
    out = lax.min(idx, hi)
    return lax.max(out, np.zeros((), dt)[()]) if dt.kind == "i" else out


# ---------------------------------------------------------------------------------------
# Indexing: x[idx] (basic and integer-array) and x.at[idx].set/add/... (static indices).

def _normalize_index(idx, ndim):
    """Turn an index into a list of ('slice', s) / ('int', i) / ('none',) / ('adv', array) covering
    every dim; numpy bool masks become integer arrays (``nonzero``); lists become arrays."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    expanded = []
    for i in idx:
        if isinstance(i, list):
            i = np.asarray(i)
            if i.dtype == np.float64 and i.size == 0:
                i = i.astype(np.int32)
        if isinstance(i, Tracer) and i.dtype == np.bool_:
            raise IndexError("boolean indices must be concrete (a traced bool mask has a "
                             f"data-dependent shape); use where(mask, x, y) instead{_where_line()}")
        if isinstance(i, (np.ndarray, np.bool_)) and np.asarray(i).dtype == np.bool_:
            i = np.asarray(i)
            if i.ndim == 0:
                raise errors.UnsupportedError("a scalar boolean index is not supported")
            expanded.extend(("adv", nz) for nz in np.nonzero(i))
            continue
        if isinstance(i, (np.ndarray, Tracer)) and not (isinstance(i, np.ndarray) and i.ndim == 0
                                                       and i.dtype.kind in "iu"):
            if get_aval(i).dtype.kind not in "iu":
                raise IndexError(f"indices must be integers, slices, None, Ellipsis or integer arrays, "
                                 f"got an array of dtype {get_aval(i).dtype.name}{_where_line()}")
            expanded.append(("adv", i))
        elif isinstance(i, np.ndarray):
            expanded.append(("int", i[()]))
        elif i is None:
            expanded.append(("none",))
        elif i is Ellipsis:
            expanded.append(("ellipsis",))
        elif isinstance(i, builtins.slice):
            for part in (i.start, i.stop, i.step):
                if isinstance(part, Tracer):
                    raise errors.ConcretizationTypeError(
                        f"slice bounds must be static; use lax.dynamic_slice for traced starts{_where_line()}")
            expanded.append(("slice", i))
        elif _is_int_index(i):
            expanded.append(("int", i))  # (its dtype matters: unsigned ints never count from the end)
        else:
            raise IndexError(f"indices must be integers, slices, None, Ellipsis or integer arrays, "
                             f"got {type(i).__name__}{_where_line()}")
    n_ell = builtins.sum(e[0] == "ellipsis" for e in expanded)
    if n_ell > 1:
        raise IndexError(f"an index can only have a single ellipsis ('...'){_where_line()}")
    n_real = builtins.sum(e[0] in ("slice", "int", "adv") for e in expanded)
    if n_real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {n_real} "
                         f"were indexed{_where_line()}")
    fill = [("slice", builtins.slice(None))] * (ndim - n_real)
    if n_ell:
        k = [e[0] for e in expanded].index("ellipsis")
        expanded = expanded[:k] + fill + expanded[k + 1:]
    else:
        expanded = expanded + fill
    if builtins.any(e[0] == "adv" for e in expanded):  # ints join the advanced indices (NumPy)
        expanded = [("adv", _int_index_array(e[1])) if e[0] == "int" else e for e in expanded]
    return expanded


def _int_index_array(i):
    """A static int index as the 0-d array JAX makes of it: a Python int is int32 (an
    ``OverflowError`` past its range, as in JAX), a NumPy integer keeps its dtype."""
    if isinstance(i, np.integer):
        return _cast(np.asarray(i), canonicalize_dtype(i.dtype))
    info = np.iinfo(_default_int())
    if not info.min <= int(i) <= info.max:
        raise OverflowError(f"Python int {int(i)} too large to convert to {np.dtype(_default_int()).name}"
                            f"{_where_line()}")
    return np.asarray(int(i), _default_int())


def _static_start(i, n, rank):
    """The start of a static int index ``i`` into a dim of size ``n`` (> 0), as JAX computes it:
    in range, counted from the end if negative; out of range, through JAX's dynamic-slice path,
    where the index keeps its dtype (unsigned ones never count from the end) for a rank-1
    operand and is converted to int32 for a higher rank; then clamped."""
    v = int(i)
    if -n <= v < n:
        return v + n if v < 0 else v
    a = _int_index_array(i)
    if rank > 1:
        a = _cast(a, _index_dtype((n,)))
    v = int(a)
    if a.dtype.kind == "i" and v < 0:
        v += n
    return builtins.min(builtins.max(v, 0), n - 1)


def _getitem(x, idx, mode=None, fill_value=None):
    """``x[idx]`` (and ``x.at[idx].get(mode, fill_value)``) with NumPy's indexing: ints (negative
    too), slices with any step, None, Ellipsis, integer arrays (static or traced; broadcast
    together, placed as NumPy places them) and concrete bool masks. Out-of-range indices follow
    JAX: ``mode=None`` (``"promise_in_bounds"``) or ``"clip"`` clamps, ``"fill"`` gives
    ``fill_value`` (NaN for floats, see ``take``). Negative indices count from the end, except
    unsigned ones; as in JAX, integer-array indices are converted to int32 after that (so a
    uint32 index >= 2**31 is out of range at the low end), and so are traced scalar indices of
    an operand of rank > 1. Indexing a size-0 axis raises IndexError."""
    x = _arr(x)
    shape = get_aval(x).shape
    entries = _normalize_index(idx, len(shape))
    fill = mode is not None and lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.FILL_OR_DROP
    clip = mode is not None and lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.CLIP
    if fill:  # JAX: only a gather can fill, so static ints join the gather's indices
        entries = [("adv", _int_index_array(e[1])) if e[0] == "int" else e for e in entries]
    adv = [e[1] for e in entries if e[0] == "adv"]
    if adv and not fill and builtins.all(get_aval(a).ndim == 0 for a in adv) and builtins.all(
            e[1].step in (None, 1, -1) for e in entries if e[0] == "slice"):
        return _dynamic_slice_getitem(x, shape, entries)
    starts, limits, strides, revs = [], [], [], []
    dim = 0
    for e in entries:
        if e[0] == "none":
            continue
        d = shape[dim]
        if e[0] == "slice":
            s, l, st = e[1].indices(d)
            if st == 0:
                raise errors.ShapeError(f"slice step cannot be zero{_where_line()}")
            if st > 0:
                n = len(range(s, l, st))
                starts.append(s), limits.append(s + (n - 1) * st + 1 if n else s), strides.append(st)
            else:
                n = len(range(s, l, st))
                # x[s:l:-k] = rev(x[s-(n-1)k : s+1 : k])
                lo = s - (n - 1) * (-st) if n else 0
                starts.append(lo), limits.append(s + 1 if n else 0), strides.append(-st)
                revs.append(dim)
        elif e[0] == "int":
            if d == 0:
                raise IndexError(f"index {e[1]} is out of bounds for axis {dim} with size 0{_where_line()}")
            if clip:
                v = int(e[1])
                i = builtins.min(builtins.max(v + d if v < 0 else v, 0), d - 1)
            else:
                i = _static_start(e[1], d, len(shape))
            starts.append(i), limits.append(i + 1), strides.append(1)
        else:  # advanced: keep the whole dim for the gather
            starts.append(0), limits.append(d), strides.append(1)
        dim += 1
    y = x
    if starts != [0] * len(shape) or limits != list(shape) or builtins.any(s != 1 for s in strides):
        y = lax.slice(x, starts, limits, strides)
    if revs:
        y = lax.rev(y, revs)
    yshape = get_aval(y).shape
    adv_pos = [k for k, e in enumerate(entries) if e[0] == "adv"]
    if not adv_pos:
        out_shape, dim = [], 0
        for e in entries:
            if e[0] == "none":
                out_shape.append(1)
                continue
            if e[0] == "slice":
                out_shape.append(yshape[dim])
            dim += 1
        if fill and math.prod(out_shape) == 0:  # (JAX's gather path, see _advanced_getitem)
            return _zeros_as_gathered(y, out_shape)
        return reshape(y, out_shape)
    mode = lax.GatherScatterMode.from_any(lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    return _advanced_getitem(y, yshape, entries, adv_pos, mode, fill_value)


def _dynamic_slice_getitem(x, shape, entries):
    """JAX's dynamic-slice path of ``x[idx]``: scalar (0-d) indices, slices of step 1 or -1, None.
    One ``dynamic_slice`` (which counts signed negative starts from the end and clamps); with
    more than one dim every start is converted to int32 first, as JAX does."""
    starts, sizes, revs, out_shape, dim = [], [], [], [], 0
    for e in entries:
        if e[0] == "none":
            out_shape.append(1)
            continue
        d = shape[dim]
        if e[0] == "slice":
            s, l, st = e[1].indices(d)
            n = len(range(s, l, st))
            if st < 0:
                s = s - n + 1 if n else 0
                revs.append(dim)
            starts.append(np.int32(s)), sizes.append(n), out_shape.append(n)
        else:
            if d == 0:
                raise IndexError(f"index is out of bounds for axis {dim} with size 0{_where_line()}")
            starts.append(e[1]), sizes.append(1)
        dim += 1
    if len(starts) > 1:
        starts = [_cast(i, _index_dtype(shape)) for i in starts]
    y = lax.dynamic_slice(x, starts, sizes)
    if revs:
        y = lax.rev(y, revs)
    return reshape(y, out_shape)


def _entry_dims(entries):
    """The operand dim of each non-None entry."""
    dims, dim = {}, 0
    for k, e in enumerate(entries):
        if e[0] != "none":
            dims[k] = dim
            dim += 1
    return dims


def _gather_indices(arrays, sizes, idx_dtype, bshape):
    """JAX's integer-array indices for a gather: each counted from the end where negative (in
    its own dtype; an unsigned one is never negative), converted to ``idx_dtype``, broadcast to
    ``bshape`` and stacked on a new last dim (the index vector). Static in, static out."""
    parts = []
    for a, n in zip(arrays, sizes):
        a = _cast(_count_from_end(a, n, strict=True), idx_dtype)
        a = np.broadcast_to(a, bshape) if not isinstance(a, Tracer) else broadcast_to(a, bshape)
        parts.append(a)
    if builtins.all(not isinstance(a, Tracer) for a in parts):
        return np.stack(parts, axis=-1).astype(idx_dtype)
    parts = [reshape(a, tuple(bshape) + (1,)) for a in parts]
    return parts[0] if len(parts) == 1 else concatenate(parts, axis=-1)


def _advanced_getitem(y, yshape, entries, adv_pos, mode, fill_value):
    edims = _entry_dims(entries)
    adv_dims = [edims[k] for k in adv_pos]
    rest_dims = [d for d in range(len(yshape)) if d not in adv_dims]
    arrays = [entries[k][1] for k in adv_pos]
    try:
        bshape = broadcast_shapes(*(get_aval(a).shape for a in arrays))
    except errors.ShapeError as err:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together: "
                         f"{err.args[0]}{_where_line()}") from None
    out_shape = _advanced_result_shape(yshape, entries, adv_pos, bshape)
    if math.prod(yshape[d] for d in adv_dims) == 0 and math.prod(out_shape):
        raise IndexError(f"index is out of bounds for an axis of size 0 (shape {yshape}){_where_line()}")
    if math.prod(out_shape) == 0:
        # As JAX's gather path of ``x[idx]``: an empty result is ``full_like(y, 0, shape)``, a
        # constant of the static shapes, so under vmap it is unbatched whatever ``y`` and the
        # indices are (``vmap(..., out_axes=None)`` accepts it, as jax.vmap does).
        return _zeros_as_gathered(y, out_shape)
    # One gather whose index vector has a component per advanced dim (the start_index_map);
    # those dims collapse, the others are whole windows (offset dims after the batch dims).
    indices = _gather_indices(arrays, [yshape[d] for d in adv_dims], _index_dtype(yshape), bshape)
    nb = len(bshape)
    dn = lax.GatherDimensionNumbers(offset_dims=tuple(range(nb, nb + len(rest_dims))),
                                    collapsed_slice_dims=tuple(adv_dims), start_index_map=tuple(adv_dims))
    sizes = [1 if d in adv_dims else yshape[d] for d in range(len(yshape))]
    g = lax.gather(y, indices, dn, sizes, mode=mode,
                   fill_value=fill_value if mode is lax.GatherScatterMode.FILL_OR_DROP else None)
    if adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))):
        # The broadcast block goes where the first advanced index was (among the other dims).
        q = builtins.sum(1 for d in rest_dims if d < adv_dims[0])
        perm = list(range(nb, nb + q)) + list(range(nb)) + list(range(nb + q, nb + len(rest_dims)))
        g = lax.transpose(g, perm)
    return reshape(g, out_shape)


def _advanced_result_shape(yshape, entries, adv_pos, bshape):
    """NumPy's placement: adjacent advanced indices put their broadcast shape where the first of
    them was, separated ones put it first."""
    edims = _entry_dims(entries)
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    out_shape, seen = ([] if adjacent else list(bshape)), False
    for k, e in enumerate(entries):
        if e[0] == "none":
            out_shape.append(1)
        elif e[0] == "slice":
            out_shape.append(yshape[edims[k]])
        elif adjacent and not seen:
            out_shape.extend(bshape)
            seen = True
    return tuple(out_shape)


def _empty_of(y, shape):
    """An empty array of ``shape`` computed from ``y`` (an empty slice of it), so it is traced
    (and batched) like ``y``: for the jnp functions whose JAX code reaches an empty result through
    ops on the operand (a cond, a scan, a gather with batching dims) rather than a constant."""
    return reshape(lax.slice(reshape(y, (-1,)), (0,), (0,)), shape)


def _zeros_as_gathered(y, shape):
    """JAX's ``lax.full_like(y, 0, shape=shape)``: y's dtype and weak type, none of its values."""
    aval = get_aval(y)
    if getattr(aval, "weak_type", False):  # (a weak type is always its kind's default dtype)
        return lax.full(shape, {"f": 0.0, "c": 0j}.get(aval.dtype.kind, 0))
    return zeros(shape, aval.dtype)


class _IndexUpdateHelper:
    """``x.at``: ``x.at[idx].set(v)`` etc. (``jax.numpy.ndarray.at``)."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx)


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates with static indices, as one XLA scatter.

    Indices follow NumPy indexing (ints, slices, None, Ellipsis, integer arrays, bool masks);
    they must be static (Python/NumPy values). As in JAX, negative indices count from the end
    (not unsigned ones), integer indices are then converted to int32, and ``mode`` says what
    happens to the others out of range: ``None``/``"drop"``/``"fill"`` and
    ``"promise_in_bounds"`` skip their updates, ``"clip"`` clamps them into range.
    With repeated indices, ``set`` keeps the last update and the others combine them all.
    ``get(mode=None, fill_value=None)`` is ``x[idx]`` with JAX's gather modes (see ``_getitem``).
    """
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
        return _getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter, mode, unique_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_add, mode, unique_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_mul, mode, unique_indices)

    mul = multiply

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_min, mode, unique_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return _scatter_static(self.array, self.index, values, lax.scatter_max, mode, unique_indices)


def _static_flat_positions(shape, idx, mode=None):
    """The flat position of every element ``x[idx]`` selects, as an int array of the result's
    shape; elements out of range get -1 (a scatter drops them), or, with ``mode="clip"``, are
    clamped into range. Integer indices are treated as JAX's scatter treats them (counted from
    the end where negative and signed, then converted to int32). NumPy does the indexing on a
    grid with one extra "out of range" slot per integer-indexed dim."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    clip = lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.CLIP
    entries = _normalize_index(idx, len(shape))
    int_dims, dim = set(), 0
    for e in entries:
        if e[0] == "none":
            continue
        if e[0] in ("int", "adv"):
            int_dims.add(dim)
        dim += 1
    grid_shape = [n + 1 if d in int_dims else n for d, n in enumerate(shape)]
    grid = np.full(grid_shape, -1, np.int64)
    grid[tuple(builtins.slice(0, n) for n in shape)] = np.arange(math.prod(shape)).reshape(shape)
    new_idx, dim = [], 0
    for e in entries:
        if e[0] == "none":
            new_idx.append(None)
            continue
        n = shape[dim]
        if e[0] == "int" and n == 0:  # (as JAX's scatter, which XLA could not index there)
            raise IndexError(f"index is out of bounds for axis {dim} with size 0{_where_line()}")
        if e[0] == "slice":
            new_idx.append(e[1])
        else:
            a = _int_index_array(e[1]) if e[0] == "int" else np.asarray(e[1])
            if e[0] == "int" and a.dtype.kind == "i":  # a Python-level count from the end, as JAX's
                v = int(e[1])
                a = _cast(np.asarray(v + n if v < 0 else v), a.dtype)
            else:
                a = _count_from_end(a, n, strict=True)
            v = np.asarray(_cast(a, _index_dtype(shape))).astype(np.int64)
            v = np.clip(v, 0, builtins.max(n - 1, 0)) if clip else np.where((v < 0) | (v >= n), n, v)
            new_idx.append(v if e[0] == "adv" else int(v))
        dim += 1
    return grid[tuple(new_idx)]


def _is_traced_index(idx):
    return builtins.any(isinstance(i, Tracer) or (isinstance(i, builtins.slice) and builtins.any(
        isinstance(p, Tracer) for p in (i.start, i.stop, i.step)))
        for i in (idx if isinstance(idx, tuple) else (idx,)))


def _traced_flat_positions(shape, idx, mode=None):
    """``_static_flat_positions`` for an index holding tracers: ``x[idx]`` of the array of flat
    positions ``0 .. size-1`` (a gather, so the index means exactly what it means to ``x[idx]``),
    with -1 where an index is out of range (``mode="fill"``) — or clamped with ``mode="clip"``."""
    size = math.prod(shape)
    dt = np.int32 if size < 2 ** 31 else np.int64
    positions = reshape(lax.iota(dt, size), shape)
    clip = lax.GatherScatterMode.from_any(mode) is lax.GatherScatterMode.CLIP
    return _getitem(positions, idx, mode="clip" if clip else "fill", fill_value=-1)


def _empty_index_arrays(idx):
    """Whether an integer index array of ``idx`` (or the positions of a boolean mask) is empty:
    then JAX still scatters (zero updates), else an empty selection is an empty slice."""
    for i in idx if isinstance(idx, tuple) else (idx,):
        if i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)):
            continue
        shape = get_aval(i).shape if isinstance(i, Tracer) else np.shape(i)
        if not shape:
            continue
        if isinstance(i, Tracer):
            if math.prod(shape) == 0:
                return True
        elif (np.count_nonzero(i) if np.asarray(i).dtype == np.bool_ else np.size(i)) == 0:
            return True
    return False


def _scatter_static(x, idx, values, scatter_fn, mode=None, unique_indices=False):
    """``x.at[idx].<op>(values)``: one scatter into the flattened ``x`` at the flat positions
    ``idx`` selects (computed at trace time for static indices, gathered for traced ones).
    The scatter has ``unique_indices=True`` when the user says so, or when static positions
    are known not to repeat (as JAX's indexer knows for ints and slices): ``x.at[0].multiply(v)``
    then has a gradient in ``v`` (JAX's scatter-mul JVP needs unique indices)."""
    x = _arr(x)
    aval = get_aval(x)
    traced = _is_traced_index(idx)
    pos = (_traced_flat_positions if traced else _static_flat_positions)(aval.shape, idx, mode)
    if not traced and not unique_indices:
        inside = np.asarray(pos).reshape(-1)
        inside = inside[inside >= 0]  # (-1: out of range, dropped)
        unique_indices = bool(np.unique(inside).size == inside.size)
    pos_shape = get_aval(pos).shape
    # As jax.numpy: the update is computed in the promoted dtype of x and the values, and the
    # result converted back to x's dtype (uint8 x.at[i].min(-1.5) is 0, bool .min(-1.5) is True).
    x_out_dtype = aval.dtype
    if isinstance(values, int) and aval.dtype.kind in "iu" and (
            np.iinfo(aval.dtype).min <= values <= np.iinfo(aval.dtype).max):
        # (JAX converts a Python int that fits x's dtype straight to it here, without the
        # default-int OverflowError of arithmetic: uint32 x.at[0].set(2**31) is exact)
        values = _cast(values, aval.dtype, weak=True)
    x, values = _promote_dtypes(x, _arr(values))
    x = asarray(x) if not isinstance(x, Tracer) else x
    dt = get_aval(x).dtype
    if dt == np.bool_ and scatter_fn in (lax.scatter_add, lax.scatter_mul):
        raise errors.DTypeError(f"x.at[idx].{'add' if scatter_fn is lax.scatter_add else 'multiply'} "
                                f"does not accept dtype bool (as in JAX){_where_line()}")
    if math.prod(pos_shape) == 0 and not _empty_index_arrays(idx):
        # As JAX: no scatter at all when the indexed slice is empty (a 0-sized dim the index
        # leaves, an empty slice): x as it is -- not even a scatter's gradient rule is reached
        return x if dt == x_out_dtype else astype(x, x_out_dtype)
    try:
        values = broadcast_to(values, pos_shape)
    except errors.ShapeError:
        raise errors.ShapeError(f"x.at[idx] update of shape {get_aval(values).shape} cannot be "
                                f"broadcast to the indexed shape {pos_shape}{_where_line()}") from None
    if not isinstance(values, Tracer):
        values = np.asarray(values)
    flat = reshape(x, (aval.size,))
    n = math.prod(pos_shape)
    idx_dtype = np.int32 if aval.size < 2 ** 31 else np.int64
    indices = reshape(pos, (n, 1)) if isinstance(pos, Tracer) else pos.reshape(n, 1).astype(idx_dtype)
    upd = reshape(values, (n,))
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    out = reshape(scatter_fn(flat, indices, upd, dn, unique_indices=bool(unique_indices)), aval.shape)
    return out if dt == x_out_dtype else astype(out, x_out_dtype)
