"""More of ``jax.lax``'s structural helpers, as composites of the structural primitives (JAX
binds primitives of their own for ``split``/``tile``/...; here they are slices, reshapes,
broadcasts, concatenates and gathers, so every pass, backend and transformation already
handles them): ``split``, ``stack``, ``unstack``, ``tile``, ``index_take``, ``empty``, ``dtype``
and ``broadcast_shapes``. ``minixla.frontends`` imports JAX's ``split``/``stack``/``unstack``/
``tile`` primitives as these.
"""
from __future__ import annotations

import operator

import numpy as np

from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, canonicalize_shape, get_aval
from minixla.lax import elementwise as _ew, indexing as _ix, structural as _st

__all__ = ["split", "stack", "unstack", "tile", "index_take", "empty", "dtype", "broadcast_shapes"]


def _axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise errors.ShapeError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def split(operand, sizes, axis=0):
    """``operand`` cut along ``axis`` into consecutive pieces of ``sizes`` (``jax.lax.split``):
    a list of ``len(sizes)`` arrays of the operand's dtype. ``ShapeError`` (``ValueError``) for
    a negative size, sizes that do not add up to the dimension, or an axis out of range (JAX's
    messages)."""
    shape = tuple(get_aval(operand).shape)
    axis = _axis(axis, len(shape))
    sizes = [operator.index(s) for s in sizes]
    if any(s < 0 for s in sizes):
        raise errors.ShapeError(f"Sizes passed to split must be nonnegative, got {sizes}")
    if sum(sizes) != shape[axis]:
        raise errors.ShapeError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                                f"operand shape {list(shape)}")
    outs, start = [], 0
    for size in sizes:
        lo, hi = [0] * len(shape), list(shape)
        lo[axis], hi[axis] = start, start + size
        outs.append(_st.slice(operand, tuple(lo), tuple(hi)))
        start += size
    return outs


def stack(operands, axis=0):
    """``operands`` (one shape and dtype) joined along a new dimension at ``axis``
    (``jax.lax.stack``): shape ``shape[:axis] + (n,) + shape[axis:]``. ``ShapeError``
    (``ValueError``) for differing shapes or ranks and an axis out of ``[-ndim-1, ndim]``;
    ``DTypeError`` (``TypeError``) for differing dtypes; ``IndexError`` for no operands, as JAX."""
    operands = list(operands)
    if not operands:
        raise IndexError("lax.stack needs at least one operand")
    shapes = [tuple(get_aval(x).shape) for x in operands]
    if len({len(s) for s in shapes}) > 1:
        raise errors.ShapeError("Cannot stack arrays with different numbers of dimensions: got "
                                + ", ".join(map(str, shapes)) + ".")
    if len(set(shapes)) > 1:
        raise errors.ShapeError("All input arrays must have the same shape. Got " + ", ".join(map(str, shapes)) + ".")
    dtypes = [np.dtype(get_aval(x).dtype) for x in operands]
    if len(set(dtypes)) > 1:
        raise errors.DTypeError("lax.stack requires arguments to have the same dtypes, got "
                                + ", ".join(d.name for d in dtypes) + ".")
    shape = shapes[0]
    axis = _axis(axis, len(shape) + 1)
    new = shape[:axis] + (1,) + shape[axis:]
    return _st.concatenate([_st.reshape(x, new) for x in operands], axis)


def unstack(x, axis=0):
    """The slices of ``x`` along ``axis``, that dimension removed (``jax.lax.unstack``): a
    tuple of ``x.shape[axis]`` arrays. ``ShapeError`` (``ValueError``) for an axis out of range."""
    shape = tuple(get_aval(x).shape)
    axis = _axis(axis, len(shape))
    rest = shape[:axis] + shape[axis + 1:]
    return tuple(_st.reshape(_st.slice_in_dim(x, i, i + 1, axis=axis), rest) for i in range(shape[axis]))


def tile(operand, reps):
    """``operand`` repeated ``reps[d]`` times along each dimension ``d`` (``jax.lax.tile``):
    shape ``(reps[d] * shape[d], ...)``, a broadcast to ``(r0, n0, r1, n1, ...)`` merged by one
    reshape. ``len(reps)`` must equal the rank (``TypeError``, JAX's message); a negative
    repetition is a ``ShapeError``."""
    shape = tuple(get_aval(operand).shape)
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != len(shape):
        raise TypeError(f"reps length must be equal to the ndim of x, got len(reps)={len(reps)} and "
                        f"x.ndim={len(shape)}.")
    if any(r < 0 for r in reps):
        raise errors.ShapeError(f"tile: reps must be non-negative, got {reps}")
    wide = tuple(d for r, n in zip(reps, shape) for d in (r, n))
    x = _st.broadcast_in_dim(operand, wide, tuple(range(1, len(wide), 2)))
    return _st.reshape(x, tuple(r * n for r, n in zip(reps, shape)))


def index_take(src, idxs, axes):
    """``src`` indexed by one integer array per axis of ``axes`` (``jax.lax.index_take``): the
    result is ``(n,)`` followed by ``src``'s other dimensions, for ``n`` the indices' length;
    indices wrap modulo the axis size (negative ones count from the end), as JAX's. A gather."""
    shape = tuple(get_aval(src).shape)
    axes = tuple(operator.index(a) for a in axes)
    idxs = list(idxs)
    if len(idxs) != len(axes):
        raise errors.ShapeError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    cols = []
    for i, ax in zip(idxs, axes):
        i = _st.reshape(i, tuple(get_aval(i).shape) + (1,))
        size = np.asarray(shape[ax], get_aval(i).dtype)
        cols.append(_ew.rem(_ew.add(_ew.rem(i, size), size), size))  # (Python's modulo, as JAX's %)
    indices = _st.concatenate(cols, 1)
    sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    dn = _ix.GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                    collapsed_slice_dims=axes, start_index_map=axes)
    return _ix.gather(src, indices, dn, sizes)


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values are not to be relied on
    (``jax.lax.empty``); here zeros, as XLA:CPU gives. ``out_sharding`` is accepted for JAX's
    signature (one device: no layout to set)."""
    return _st.full(canonicalize_shape(shape), 0, canonicalize_dtype(dtype))


def dtype(x):
    """The canonical dtype of ``x`` (``jax.lax.dtype``): an array's dtype or a Python scalar's
    default (``float32`` for a float without x64). ``TypeError`` when ``x`` has none (a list)."""
    if isinstance(x, (bool, int, float)) or (hasattr(x, "dtype") and not isinstance(x, type)):
        return get_aval(x).dtype
    try:
        return canonicalize_dtype(x)  # (a dtype or a scalar type)
    except TypeError:
        raise TypeError(f"Cannot determine dtype of {x}") from None


def broadcast_shapes(*shapes):
    """The shape the given ``shapes`` broadcast to, NumPy's rule (``jax.lax.broadcast_shapes``):
    a tuple of ints. ``ShapeError`` (``ValueError``) for incompatible shapes (JAX's message) or
    for no shapes at all."""
    if not shapes:
        raise errors.ShapeError("broadcast_shapes needs at least one shape")
    shapes = [tuple(operator.index(d) for d in s) for s in shapes]
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise errors.ShapeError(f"Incompatible shapes for broadcasting: shapes={shapes}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
