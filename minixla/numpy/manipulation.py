"""Shape manipulation: reshape, transpose, axis moves, expand/squeeze, concatenate/stack,
split, flip, pad, tile.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakScalar, get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _canon_axes, _canon_axis1, _cast, _is_python_scalar, _promote_dtypes, _where_line)
from minixla.numpy.creation import asarray, astype


# ---------------------------------------------------------------------------------------
# Shape manipulation.

def reshape(a, newshape=None, order="C", *, shape=None):
    """Row-major reshape with one ``-1`` allowed (``jnp.reshape``)."""
    a = _arr(a)
    if isinstance(a, WeakScalar) or _is_python_scalar(a):
        a = asarray(a)
    newshape = shape if shape is not None else newshape
    if order != "C":
        raise errors.UnsupportedError("reshape supports only order='C'")
    aval = get_aval(a)
    newshape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(int(d) for d in newshape)
    if newshape.count(-1) > 1:
        raise errors.ShapeError(f"can only specify one unknown dimension (-1) in reshape{_where_line()}")
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or aval.size % known:
            raise errors.ShapeError(f"cannot reshape array of shape {aval.shape} into shape {newshape}"
                                    f"{_where_line()}")
        newshape = tuple(aval.size // known if d == -1 else d for d in newshape)
    if aval.shape == newshape:
        return a
    return lax.reshape(a, newshape)


def ravel(a, order="C"):
    """Flatten in row-major order (``jnp.ravel``)."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """Permute axes (``jnp.transpose``); default reverses them."""
    a = _arr(a)
    nd = get_aval(a).ndim
    if axes is None:
        axes = tuple(reversed(range(nd)))
    else:
        axes = tuple(_canon_axis1(int(x), nd) for x in axes)
        if sorted(axes) != list(range(nd)):
            raise errors.ShapeError(f"transpose axes {axes} are not a permutation of {nd} axes{_where_line()}")
    return lax.transpose(a, axes)


def swapaxes(a, axis1, axis2):
    """Exchange two axes (``jnp.swapaxes``)."""
    nd = get_aval(a).ndim
    perm = list(range(nd))
    i, j = _canon_axis1(axis1, nd), _canon_axis1(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    """Move axes to new positions (``jnp.moveaxis``)."""
    nd = get_aval(a).ndim
    src = [_canon_axis1(s, nd) for s in ((source,) if isinstance(source, int) else source)]
    dst = [_canon_axis1(d, nd) for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise errors.ShapeError(f"moveaxis: source and destination need the same number of axes{_where_line()}")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def expand_dims(a, axis):
    """Insert size-1 axes at ``axis`` (``jnp.expand_dims``)."""
    a = _arr(a)
    shape = list(get_aval(a).shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = len(shape) + len(axes)
    for ax in sorted(_canon_axis1(x, nd) for x in axes):
        shape.insert(ax, 1)
    return reshape(a, shape)


def squeeze(a, axis=None):
    """Remove size-1 axes (``jnp.squeeze``); ShapeError for an axis whose size is not 1."""
    a = _arr(a)
    shape = get_aval(a).shape
    axes = [i for i, d in enumerate(shape) if d == 1] if axis is None else _canon_axes(axis, len(shape))
    for i in axes:
        if shape[i] != 1:
            raise errors.ShapeError(f"cannot select an axis to squeeze out which has size not equal to "
                                    f"one (axis {i} of shape {shape}){_where_line()}")
    return reshape(a, [d for i, d in enumerate(shape) if i not in axes])


def atleast_1d(a):
    a = _arr(a)
    return reshape(a, (1,)) if get_aval(a).ndim == 0 else a


def atleast_2d(a):
    a = atleast_1d(a)
    return reshape(a, (1,) + get_aval(a).shape) if get_aval(a).ndim == 1 else a


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along ``axis`` (``jnp.concatenate``); ``axis=None`` flattens them first."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise errors.ShapeError(f"need at least one array to concatenate{_where_line()}")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    arrays = _promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    arrays = [asarray(a) if not isinstance(a, Tracer) else a for a in arrays]
    nd = get_aval(arrays[0]).ndim
    if nd == 0:
        raise errors.ShapeError(f"zero-dimensional arrays cannot be concatenated{_where_line()}")
    return lax.concatenate(arrays, _canon_axis1(axis, nd))


def stack(arrays, axis=0, dtype=None):
    """Join arrays along a new ``axis`` (``jnp.stack``)."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise errors.ShapeError(f"need at least one array to stack{_where_line()}")
    shapes = {get_aval(a).shape for a in arrays}
    if len(shapes) != 1:
        raise errors.ShapeError(f"all input arrays must have the same shape, got {sorted(shapes)}{_where_line()}")
    nd = get_aval(arrays[0]).ndim + 1
    ax = _canon_axis1(axis, nd)
    return concatenate([expand_dims(a, ax) for a in arrays], ax, dtype)


def hstack(arrays):
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, 0 if get_aval(arrays[0]).ndim == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(a) for a in arrays], 0)


def split(ary, indices_or_sections, axis=0):
    """Split into pieces along ``axis`` (``jnp.split``): a section count or static split points."""
    ary = _arr(ary)
    shape = get_aval(ary).shape
    ax = _canon_axis1(axis, len(shape))
    n = shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise errors.ShapeError(f"array split does not result in an equal division: {n} into {k}"
                                    f"{_where_line()}")
        points = [n // k * i for i in range(1, k)]
    else:
        points = [int(p) for p in indices_or_sections]
    bounds = [0] + [builtins.min(builtins.max(p, 0), n) for p in points] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = [0] * len(shape)
        limit = list(shape)
        start[ax], limit[ax] = lo, builtins.max(lo, hi)
        out.append(lax.slice(ary, start, limit))
    return out


def array_split(ary, sections, axis=0):
    n = get_aval(ary).shape[_canon_axis1(axis, get_aval(ary).ndim)]
    q, r = builtins.divmod(n, sections)
    points, acc = [], 0
    for i in range(sections - 1):
        acc += q + (1 if i < r else 0)
        points.append(acc)
    return split(ary, points, axis)


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (``jnp.flip``)."""
    m = _arr(m)
    nd = get_aval(m).ndim
    return lax.rev(m, _canon_axes(axis, nd))


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def pad(array, pad_width, mode="constant", constant_values=0):
    """Pad with a constant (``jnp.pad``, ``mode='constant'``); ``pad_width`` as in NumPy."""
    array = _arr(array)
    if mode != "constant":
        raise errors.UnsupportedError(f"pad mode '{mode}' is not supported (only 'constant')")
    nd = get_aval(array).ndim
    pw = np.asarray(pad_width, dtype=np.int64)
    if pw.ndim == 0:
        pw = np.full((nd, 2), int(pw))
    elif pw.shape == (2,) or pw.shape == (1, 2):
        pw = np.tile(pw.reshape(1, 2), (nd, 1))
    elif pw.shape == (1,):
        pw = np.full((nd, 2), int(pw[0]))
    if pw.shape != (nd, 2) or (pw < 0).any():
        raise errors.ShapeError(f"pad_width {pad_width!r} must be non-negative (before, after) pairs "
                                f"for each of {nd} dims{_where_line()}")
    dt = get_aval(array).dtype
    value = _cast(constant_values, dt) if not isinstance(constant_values, Tracer) else astype(constant_values, dt)
    return lax.pad(array, value, [(int(lo), int(hi), 0) for lo, hi in pw])


def tile(A, reps):
    """Repeat the whole array ``reps`` times per axis (``jnp.tile``)."""
    A = _arr(A)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    shape = get_aval(A).shape
    nd = builtins.max(len(shape), len(reps))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + tuple(int(r) for r in reps)
    x = reshape(A, shape)
    # broadcast to (r0, d0, r1, d1, ...) then merge each pair.
    big = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    x = lax.broadcast_in_dim(x, big, tuple(range(1, 2 * nd, 2)))
    return reshape(x, [r * d for r, d in zip(reps, shape)])
