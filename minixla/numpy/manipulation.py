"""Shape manipulation: reshape, transpose, axis moves, expand/squeeze, concatenate/stack,
split, flip, pad (and its modes), roll, rot90, tile.
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


def _atleast(fn, arys):
    out = [fn(_arr(a)) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Each array with at least one axis (``jnp.atleast_1d``): a list for several arrays."""
    return _atleast(lambda a: reshape(a, (1,)) if get_aval(a).ndim == 0 else a, arys)


def atleast_2d(*arys):
    """Each array with at least two axes, new ones in front (``jnp.atleast_2d``)."""
    return _atleast(lambda a: reshape(a, (1,) * (2 - get_aval(a).ndim) + get_aval(a).shape)
                    if get_aval(a).ndim < 2 else a, arys)


def atleast_3d(*arys):
    """Each array with at least three axes (``jnp.atleast_3d``): a scalar becomes (1, 1, 1),
    1-D (1, N, 1), 2-D (M, N, 1)."""
    def three(a):
        shape = get_aval(a).shape
        new = {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}.get(len(shape), shape)
        return reshape(a, new) if new != shape else a
    return _atleast(three, arys)


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


def _pad_widths(pad_width, nd):
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
    return pw


def _source_index(mode, n, lo, hi):
    """For each position of the padded axis, the index of ``x`` it copies (``np.pad``'s modes)."""
    i = np.arange(-lo, n + hi)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    if mode == "symmetric":  # ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
        m = i % (2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    if n == 1:  # reflect: ... 2 1 | 0 1 ... n-1 | n-2 ...
        return np.zeros_like(i)
    m = i % (2 * n - 2)
    return np.where(m < n, m, 2 * n - 2 - m)


def pad(array, pad_width, mode="constant", constant_values=0, **kwargs):
    """Pad each axis by ``pad_width`` (before, after) as ``jnp.pad``: ``mode='constant'`` (one
    ``pad``), or ``'edge'``, ``'wrap'``, ``'reflect'``, ``'symmetric'`` (``reflect_type='even'``),
    each a gather of the source positions along the axis. Other modes raise UnsupportedError;
    padding an empty axis by a non-constant mode raises ShapeError, as JAX does."""
    array = _arr(array)
    nd = get_aval(array).ndim
    pw = _pad_widths(pad_width, nd)
    if mode == "constant":
        dt = get_aval(array).dtype
        value = _cast(constant_values, dt) if not isinstance(constant_values, Tracer) \
            else astype(constant_values, dt)
        return lax.pad(array, value, [(int(lo), int(hi), 0) for lo, hi in pw])
    if mode not in ("edge", "wrap", "reflect", "symmetric"):
        raise errors.UnsupportedError(f"pad mode '{mode}' is not supported (constant, edge, wrap, "
                                      f"reflect, symmetric){_where_line()}")
    if kwargs.get("reflect_type", "even") != "even":
        raise errors.UnsupportedError(f"pad: reflect_type={kwargs['reflect_type']!r} is not supported")
    from minixla.numpy.indexing import take  # (indexing builds on this module)
    array = asarray(array) if not isinstance(array, Tracer) else array
    for axis, (lo, hi) in enumerate(pw):
        n = get_aval(array).shape[axis]
        if lo == 0 and hi == 0:
            continue
        if n == 0:
            raise errors.ShapeError(f"can't extend empty axis {axis} using modes other than 'constant' "
                                    f"or 'empty'{_where_line()}")
        array = take(array, _source_index(mode, n, int(lo), int(hi)).astype(np.int32), axis=axis)
    return array


def roll(a, shift, axis=None):
    """Shift elements along ``axis`` cyclically (``jnp.roll``; flattened when ``axis`` is None):
    static shifts are two slices concatenated; a traced shift a dynamic slice of ``a`` twice."""
    a = _arr(a)
    a = asarray(a) if not isinstance(a, Tracer) else a
    shape = get_aval(a).shape
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape)
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    axes = tuple(_canon_axis1(ax, len(shape)) for ax in axes)
    if isinstance(shift, Tracer):
        shifts = [shift] * len(axes) if get_aval(shift).ndim == 0 else [shift[i] for i in range(len(axes))]
        for ax, s in zip(axes, shifts):
            n = shape[ax]
            start = lax.rem(lax.sub(_cast(n, np.int32), lax.rem(lax.convert_element_type(s, np.int32),
                                                                _cast(builtins.max(n, 1), np.int32))),
                            _cast(builtins.max(n, 1), np.int32))
            doubled = lax.concatenate([a, a], ax)
            idx = [_cast(0, np.int32)] * len(shape)
            idx[ax] = start
            a = lax.dynamic_slice(doubled, idx, shape)
        return a
    for ax, s in zip(*np.broadcast_arrays(np.asarray(axes), np.asarray(shift))):
        n = shape[int(ax)]
        if n == 0:
            continue
        i = int(-int(s) % n)
        a = lax.concatenate([lax.slice_in_dim(a, i, n, axis=int(ax)),
                             lax.slice_in_dim(a, 0, i, axis=int(ax))], int(ax))
    return a


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``axes``, from the first towards the second
    (``jnp.rot90``): flips and a transpose."""
    m = _arr(m)
    nd = get_aval(m).ndim
    if nd < 2:
        raise errors.ShapeError(f"rot90 requires its first argument to have ndim at least two, but got "
                                f"first argument of shape {get_aval(m).shape}, which has ndim {nd}")
    ax1, ax2 = (_canon_axis1(ax, nd) for ax in axes)
    if ax1 == ax2:
        raise errors.ShapeError("Axes must be different")
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(nd))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    return transpose(flip(m, ax2), perm) if k == 1 else flip(transpose(m, perm), ax2)


def append(arr, values, axis=None):
    """``arr`` with ``values`` concatenated at the end (``jnp.append``; both flattened when
    ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(_arr(arr)), ravel(_arr(values))], 0)
    return concatenate([arr, values], axis)


def column_stack(tup):
    """1-D arrays as columns, 2-D arrays as they are, joined along axis 1 (``jnp.column_stack``)."""
    cols = []
    for a in tup:
        a = _arr(a)
        cols.append(reshape(a, (-1, 1)) if get_aval(a).ndim < 2 else a)
    return concatenate(cols, 1)


def dstack(tup, dtype=None):
    """Join along the third axis after ``atleast_3d`` (``jnp.dstack``)."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis`` as a tuple (``jnp.unstack``, Array API)."""
    x = _arr(x)
    nd = get_aval(x).ndim
    if nd == 0:
        raise errors.ShapeError("Unstack requires arrays with rank > 0, however a scalar array was passed.")
    ax = _canon_axis1(axis, nd)
    return tuple(squeeze(lax.slice_in_dim(x, i, i + 1, axis=ax), ax) for i in range(get_aval(x).shape[ax]))


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
