"""Building and editing arrays (``jax.numpy``'s, from the same ops in the same order): ``block``,
``choose``, ``compress``, ``extract``, ``delete``, ``insert``, ``place``, ``diagflat``,
``hsplit``/``vsplit``/``dsplit``, ``rollaxis``, ``resize``, ``trim_zeros``, ``copy``, ``put_along_axis``.
Mirrors ``jax/_src/numpy/lax_numpy.py``.

Where JAX needs concrete values (``choose(mode='raise')``, ``compress`` without ``size``, a
boolean or array ``obj`` of ``delete``, ``trim_zeros``) a traced argument raises
``ConcretizationTypeError``, as JAX's does under ``jit``.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import _arr, _canon_axis1, _where_line, broadcast_arrays
from minixla.numpy.creation import arange, asarray, full, ones, zeros
from minixla.numpy.manipulation import concatenate, expand_dims, moveaxis, ravel, reshape, split, tile
from minixla.numpy.elementwise import clip, greater_equal, remainder, where
from minixla.numpy.reductions import sum
from minixla.numpy.indexing import _IndexUpdateHelper, _getitem
from minixla.numpy.sorting import argsort, sort

__all__ = ["block", "choose", "compress", "extract", "delete", "insert", "place", "diagflat",
           "hsplit", "vsplit", "dsplit", "rollaxis", "resize", "trim_zeros", "copy", "put_along_axis",
           "put"]


def _shape(x):
    return tuple(get_aval(x).shape)


def _dtype(x):
    return np.dtype(get_aval(x).dtype)


def _concrete(x, what):
    """``x`` as a NumPy array; ``ConcretizationTypeError`` if it is traced."""
    if isinstance(x, Tracer):
        raise errors.ConcretizationTypeError(f"{what}: a concrete (non-traced) value is needed"
                                             f"{_where_line()}")
    return np.asarray(x)


# ---------------------------------------------------------------------------------------

def _atleast_nd(x, n):
    m = len(_shape(x))
    return lax.broadcast(x, (1,) * (n - m)) if m < n else x


def _block(xs):
    if isinstance(xs, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {xs}")
    if isinstance(xs, list):
        if not xs:
            raise ValueError("jax.numpy.block does not allow empty list arguments")
        parts, depths = zip(*[_block(x) for x in xs])
        if builtins.any(d != depths[0] for d in depths[1:]):
            raise ValueError("Mismatched list depths in jax.numpy.block")
        rank = builtins.max(depths[0], builtins.max(len(_shape(x)) for x in parts))
        parts = [_atleast_nd(x, rank) for x in parts]
        return concatenate(parts, axis=-depths[0]), depths[0] + 1
    return asarray(xs), 1


def block(arrays):
    """An array assembled from nested lists of blocks (``jnp.block``): the innermost lists are
    concatenated along the last axis, the next ones along the one before, ... (blocks of lower
    rank get leading 1s). ``ValueError`` for tuples, empty lists and mismatched depths."""
    return _block(arrays)[0]


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` for every index ``i`` of the broadcast shapes (``jnp.choose``).

    ``a``: integer array; ``choices``: a sequence of arrays (or an array's first axis).
    ``mode``: ``'raise'`` (an out-of-range entry is a ``ValueError``; needs a concrete ``a``),
    ``'wrap'`` (``a % n``) or ``'clip'``. ``NotImplementedError`` for ``out=``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a = _arr(a)
    choices = [_arr(c) for c in choices]
    if _dtype(a).kind not in "iu":
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        arr = _concrete(a, "jnp.choose was jit-compiled with mode='raise'. Use mode='wrap' or "
                           "mode='clip' instead")
        if np.any((arr < 0) | (arr >= n)):
            raise ValueError("invalid entry in choice array")
        arr = a
    elif mode == "wrap":
        arr = remainder(a, n)
    elif mode == "clip":
        arr = clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    arr, *choices = broadcast_arrays(arr, *choices)
    from minixla.numpy.manipulation import stack
    stacked = stack(choices)
    shape = _shape(arr)
    grids = tuple(lax.broadcasted_iota(np.int32, shape, d) for d in range(len(shape)))
    return _getitem(stacked, (arr,) + grids)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` where the 1-D ``condition`` is true (``jnp.compress``;
    ``axis=None``: of the flattened ``a``). Without ``size`` the condition must be concrete
    (the result's length depends on it); with ``size`` the result has that length, the kept
    slices first, then ``fill_value``. ``ValueError`` for a condition that is not 1-D, true
    entries beyond the axis, or a ``size`` out of ``[0, a.shape[axis]]``."""
    cond, arr = _arr(condition), _arr(a)
    cond = lax.convert_element_type(cond, np.bool_) if _dtype(cond) != np.bool_ else cond
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    if len(_shape(cond)) != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        axis = 0
        arr = ravel(arr)
    else:
        arr = moveaxis(arr, axis, 0)
    n = _shape(arr)[0]
    cond, extra = _getitem(cond, slice(None, n)), _getitem(cond, slice(n, None))
    arr = _getitem(arr, slice(None, _shape(cond)[0]))
    if size is None:
        c = _concrete(cond, "jnp.compress without size= needs a concrete condition")
        if np.any(_concrete(extra, "jnp.compress")):
            raise ValueError("condition contains entries that are out of bounds")
        result = _getitem(arr, np.nonzero(c)[0])
    elif not 0 <= size <= _shape(arr)[0]:
        raise ValueError("size must be positive and not greater than the size of the array axis;"
                         f" got size={size!r} for a.shape[axis]={_shape(arr)[0]}")
    else:
        mask = expand_dims(cond, tuple(range(1, len(_shape(arr)))))
        arr = where(mask, arr, asarray(fill_value, dtype=_dtype(arr)))
        order = argsort(cond, stable=True, descending=True)
        result = _getitem(_getitem(arr, order), slice(None, size))
    return moveaxis(result, 0, axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is true, flattened (``jnp.extract``):
    ``compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)``."""
    return compress(ravel(_arr(condition)), ravel(_arr(arr)), size=size, fill_value=fill_value)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``arr`` without the entries ``obj`` along ``axis`` (``jnp.delete``; ``axis=None``: of the
    flattened array). ``obj``: an int, a slice, an integer array or a boolean mask of the
    axis' length. An integer array needs to be concrete unless ``assume_unique_indices=True``
    (then a traced one is allowed, as JAX: sorted, counted, gathered). ``ValueError`` for a
    mask of the wrong shape or an ``obj`` of another dtype."""
    a = _arr(arr)
    if axis is None:
        a = ravel(a)
        axis = 0
    shape = _shape(a)
    axis = _canon_axis1(axis, len(shape))
    head = (slice(None),) * axis
    try:
        k = operator.index(obj)
    except TypeError:
        pass
    else:
        k = _canon_axis1(k, shape[axis], "index")
        return concatenate([_getitem(a, head + (slice(0, k),)), _getitem(a, head + (slice(k + 1, None),))],
                           axis=axis)
    if isinstance(obj, slice):
        obj = np.arange(shape[axis])[obj]
        assume_unique_indices = True
    if assume_unique_indices and (isinstance(obj, Tracer) or np.asarray(obj).dtype.kind in "iu"):
        o = ravel(_arr(obj))
        if _dtype(o).kind not in "iu":
            raise ValueError(f"np.delete(arr, obj): got obj.dtype={_dtype(o)}; must be integer or bool.")
        o = clip(where(lax.lt(o, np.asarray(0, _dtype(o))), o + shape[axis], o), 0, shape[axis])
        o = sort(o)
        o = o - arange(_shape(o)[0], dtype=_dtype(o))
        i = arange(shape[axis] - _shape(o)[0], dtype=_dtype(o))
        i = i + sum(greater_equal(expand_dims(i, 0), expand_dims(o, 1)), axis=0, dtype=_dtype(i))
        return _getitem(a, head + (i,))
    o = _concrete(obj, "'obj' array argument of jnp.delete()")
    if o.dtype.kind in "iu":
        mask = np.ones(shape[axis], dtype=bool)
        mask[o] = False
    elif o.dtype == np.bool_:
        if o.shape != (shape[axis],):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be one-dimensional "
                             "with length matching specified axis.")
        mask = ~o
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={o.dtype}; must be integer or bool.")
    return _getitem(a, head + (np.nonzero(mask)[0],))


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before the indices ``obj`` along ``axis``
    (``jnp.insert``; ``axis=None``: the flattened array). ``obj``: an int, a slice or a 1-D
    integer array (may be traced); ``values`` are cast to ``arr``'s dtype and broadcast.
    ``ValueError`` for a multi-dimensional or non-integer ``obj``."""
    a = _arr(arr)
    values = _arr(values)
    if axis is None:
        a = ravel(a)
        axis = 0
    if isinstance(axis, Tracer):
        raise errors.ConcretizationTypeError(f"axis argument of jnp.insert() must be static{_where_line()}")
    shape = _shape(a)
    axis = _canon_axis1(axis, len(shape))
    if isinstance(obj, slice):
        indices = arange(*obj.indices(shape[axis]))
    else:
        indices = _arr(obj)
    if len(_shape(indices)) > 1:
        raise ValueError("jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; "
                         f"got {obj}")
    if _dtype(indices).kind not in "iu":
        if math.prod(_shape(indices)) == 0 and not isinstance(obj, Tracer):
            indices = lax.convert_element_type(indices, np.int32)
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    values = asarray(values, dtype=_dtype(a))
    while len(_shape(values)) < len(shape):
        values = expand_dims(values, 0)
    if math.prod(_shape(indices)) == 1:
        index = _getitem(ravel(indices), 0)
        if len(_shape(indices)) == 0:
            values = moveaxis(values, 0, axis)
        indices = full(_shape(values)[axis], index)
    n_input = shape[axis]
    n_insert = np.broadcast_shapes(_shape(indices), (_shape(values)[axis],))[0]
    out_shape = list(shape)
    out_shape[axis] += n_insert
    out = zeros(tuple(out_shape), _dtype(a))
    idt = _dtype(indices)
    indices = where(lax.lt(indices, np.asarray(0, idt)), indices + n_input, indices)
    indices = clip(indices, 0, n_input)
    values_ind = _IndexUpdateHelper(indices)[argsort(indices)].add(arange(n_insert, dtype=idt))
    arr_mask = _IndexUpdateHelper(ones(n_input + n_insert, dtype=bool))[values_ind].set(False)
    arr_ind = where(arr_mask, size=n_input)[0]
    head = (slice(None),) * axis
    out = _IndexUpdateHelper(out)[head + (values_ind,)].set(values)
    return _IndexUpdateHelper(out)[head + (arr_ind,)].set(a)


def place(arr, mask, vals, *, inplace=True):
    """``arr`` with the entries where ``mask`` is true replaced by ``vals`` in order (repeated
    as needed) (``jnp.place``). JAX arrays are immutable: ``inplace=False`` is required
    (``ValueError`` otherwise), as are a ``mask`` of ``arr``'s size and a non-empty ``vals``."""
    data, mask_arr, vals_arr = _arr(arr), _arr(mask), ravel(_arr(vals))
    if inplace:
        raise ValueError("jax.numpy.place cannot modify arrays in-place, because JAX arrays are "
                         "immutable. Pass inplace=False to instead return an updated array.")
    size = math.prod(_shape(data))
    if size != math.prod(_shape(mask_arr)):
        raise ValueError("place: arr and mask must be the same size")
    nvals = _shape(vals_arr)[0]
    if not nvals:
        raise ValueError("Cannot place values from an empty array")
    if not size:
        return data
    indices = where(ravel(mask_arr), size=size, fill_value=size)[0]
    if nvals < size:
        vals_arr = tile(vals_arr, int(np.ceil(size / nvals)))
    if _shape(vals_arr)[0] > size:
        vals_arr = _getitem(vals_arr, slice(None, size))
    return reshape(_IndexUpdateHelper(ravel(data))[indices].set(vals_arr, mode="drop"), _shape(data))


def diagflat(v, k=0):
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal (``jnp.diagflat``), of
    shape ``(len + |k|, len + |k|)`` and ``v``'s dtype."""
    v_ravel = ravel(_arr(v))
    n = _shape(v_ravel)[0]
    adj = n + builtins.abs(k)
    res = zeros(adj * adj, dtype=_dtype(v_ravel))
    i = np.arange(0, adj - builtins.abs(k))
    fi = i + k + i * adj if k >= 0 else i + (i - k) * adj
    res = _IndexUpdateHelper(res)[fi].set(v_ravel)
    return reshape(res, (adj, adj))


def hsplit(ary, indices_or_sections):
    """``split`` along axis 1 (axis 0 of a 1-D array) (``jnp.hsplit``)."""
    a = _arr(ary)
    return split(a, indices_or_sections, axis=0 if len(_shape(a)) == 1 else 1)


def vsplit(ary, indices_or_sections):
    """``split`` along axis 0 (``jnp.vsplit``)."""
    return split(_arr(ary), indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """``split`` along axis 2 (``jnp.dsplit``)."""
    return split(_arr(ary), indices_or_sections, axis=2)


def rollaxis(a, axis, start=0):
    """``a`` with ``axis`` moved to before position ``start`` (``jnp.rollaxis``, NumPy's older
    ``moveaxis``). ``ValueError`` unless ``-ndim <= start <= ndim``."""
    a = _arr(a)
    start = operator.index(start)
    nd = len(_shape(a))
    axis = _canon_axis1(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"start={start!r} must satisfy {-nd}<=start<={nd}")
    if start < 0:
        start += nd
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


def resize(a, new_shape):
    """The flattened ``a`` repeated (or cut) to fill ``new_shape`` (``jnp.resize``); zeros when
    ``a`` or the new shape is empty. ``ValueError`` for a negative dimension."""
    new_shape = (operator.index(new_shape),) if np.ndim(new_shape) == 0 else tuple(map(operator.index, new_shape))
    if builtins.any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    arr = ravel(_arr(a))
    n, new_size = _shape(arr)[0], math.prod(new_shape)
    if n == 0 or new_size == 0:
        return zeros(new_shape, _dtype(arr))
    arr = _getitem(tile(arr, -(-new_size // n)), slice(None, new_size))
    return reshape(arr, new_shape)


def trim_zeros(filt, trim="fb", axis=None):
    """``filt`` without its leading (``'f'``) and/or trailing (``'b'``) all-zero slices along
    ``axis`` (default: every axis) (``jnp.trim_zeros``). The result's shape depends on the
    values, so ``filt`` must be concrete (``ConcretizationTypeError`` under ``jit``)."""
    f = _arr(filt)
    values = _concrete(f, "Error arose in the `filt` argument of trim_zeros()")
    nd = values.ndim
    if axis is None:
        axes = set(range(nd))
    else:
        axes = {_canon_axis1(ax, nd) for ax in ((axis,) if np.ndim(axis) == 0 else axis)}
    t = trim.lower()
    if not axes or ("f" not in t and "b" not in t):
        return f
    slices = []
    for ax in range(nd):
        if ax not in axes:
            slices.append(slice(None))
            continue
        mask = np.any(values != 0, axis=tuple(i for i in range(nd) if i != ax))
        if not mask.any():
            slices.append(slice(0, 0))
            continue
        start = int(mask.argmax()) if "f" in t else None
        stop = values.shape[ax] - int(mask[::-1].argmax()) if "b" in t else None
        slices.append(slice(start, stop))
    return _getitem(f, tuple(slices))


def copy(a, order=None):
    """A copy of the array ``a`` (``jnp.copy``): values are immutable, so the array itself under
    ``jit``, a new NumPy array eagerly. ``TypeError`` for a list or tuple, as JAX's;
    an ``order`` other than None/``'K'`` is ``NotImplementedError``, as JAX's."""
    if isinstance(a, (list, tuple)):
        raise TypeError(f"copy requires ndarray or scalar arguments, got {type(a)} at position 0.")
    if order not in (None, "K"):
        raise NotImplementedError("Only implemented for order='K'")
    x = asarray(a)
    return x.copy() if isinstance(x, np.ndarray) else x


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """``arr`` with ``values`` (broadcast to ``indices``' shape) written at ``indices`` along
    ``axis`` (``jnp.put_along_axis``; ``axis=None``: the flattened ``arr``), the other axes
    matched position by position; ``mode`` as ``x.at[].set``. ``inplace=False`` is required
    (``ValueError``), as are ``arr`` and ``indices`` of one rank and broadcastable ``values``."""
    if inplace:
        raise ValueError("jax.numpy.put_along_axis cannot modify arrays in-place, because JAX arrays"
                         "are immutable. Pass inplace=False to instead return an updated array.")
    a, idx, vals = _arr(arr), _arr(indices), _arr(values)
    original_axis, original_shape = axis, _shape(a)
    if axis is None:
        a, axis = ravel(a), 0
    if len(_shape(a)) != len(_shape(idx)):
        raise ValueError("put_along_axis arguments 'arr' and 'indices' must have same ndim. Got "
                         f"arr.ndim={len(_shape(a))!r} and indices.ndim={len(_shape(idx))!r}.")
    from minixla.numpy.promotion import broadcast_to
    try:
        vals = broadcast_to(vals, _shape(idx))
    except (ValueError, TypeError) as e:
        raise ValueError("put_along_axis argument 'values' must be broadcastable to 'indices'. Got "
                         f"values.shape={_shape(vals)!r} and indices.shape={_shape(idx)!r}.") from e
    shape = _shape(a)
    axis = _canon_axis1(axis, len(shape))
    grids = []
    for d, n in enumerate(shape):
        if d == axis:
            grids.append(idx)
        else:
            sizes = [1] * len(shape)
            sizes[d] = n
            grids.append(np.arange(n).reshape(sizes))
    result = _IndexUpdateHelper(a)[tuple(grids)].set(vals, mode=mode)
    return reshape(result, original_shape) if original_axis is None else result


def put(a, ind, v, mode=None, *, inplace=True):
    """``a`` with the values ``v`` (flattened, repeated cyclically to ``ind``'s length) written at
    the flat indices ``ind`` (``jnp.put``): ``mode=None`` drops indices past the end (negative
    ones count from it), ``'clip'`` clamps them to ``[0, a.size - 1]``, ``'wrap'`` takes them
    modulo ``a.size``. ``inplace=False`` is required (``ValueError``); ``'raise'`` is JAX's
    ``NotImplementedError``, another mode a ``ValueError``."""
    if inplace:
        raise ValueError("jax.numpy.put cannot modify arrays in-place, because JAX arrays are immutable. "
                         "Pass inplace=False to instead return an updated array.")
    arr, idx, vals = _arr(a), ravel(_arr(ind)), ravel(_arr(v))
    shape = _shape(arr)
    size, n, nv = math.prod(shape), _shape(idx)[0], _shape(vals)[0]
    if mode not in (None, "clip", "wrap"):
        if mode == "raise":
            raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    if not size or not n or not nv:
        return arr
    if nv != n:
        vals = _getitem(tile(vals, -(-n // nv)), slice(0, n))
    scatter_mode = "drop"
    if mode == "clip":
        idx, scatter_mode = clip(idx, 0, size - 1), "promise_in_bounds"
    elif mode == "wrap":
        idx, scatter_mode = remainder(idx, size), "promise_in_bounds"
    from minixla.numpy.index_tricks import unravel_index
    return _IndexUpdateHelper(arr)[unravel_index(idx, shape)].set(vals, mode=scatter_mode)
