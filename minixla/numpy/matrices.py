"""Matrix-shaped helpers of ``jax.numpy``: triangles (``tril``/``triu`` and their indices),
diagonals (``diag``, ``diagonal``, ``trace``, ``diag_indices``, ``fill_diagonal``), grids
(``meshgrid``, ``indices``), and products built from broadcasting (``kron``, ``cross``,
``vander``, ``matrix_transpose``, ``vecdot``). Each is a few ``lax`` ops in jnp's order (a
constant mask and a ``select``, a gather, a broadcast multiply), so it traces, differentiates
and compiles like the rest. Mirrors ``jax/_src/numpy/lax_numpy.py``.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import (
    _arr, _canon_axis1, _default_int, _promote_dtypes, _where_line, broadcast_shapes, broadcast_to)
from minixla.numpy.creation import arange, asarray, eye, full_like, tri, zeros_like
from minixla.numpy.manipulation import expand_dims, moveaxis, ravel, reshape, stack, swapaxes, tile
from minixla.numpy.elementwise import multiply, power, subtract, where
from minixla.numpy.reductions import sum
from minixla.numpy.indexing import _IndexUpdateHelper, _empty_of


def _static_int(value, what):
    if isinstance(value, Tracer):
        raise errors.ConcretizationTypeError(f"{what} must be a static integer, not a traced value"
                                             f"{_where_line()}")
    return operator.index(value)


def _at_least_2d(m, name):
    m = _arr(m) if isinstance(m, Tracer) else asarray(m)
    if get_aval(m).ndim < 2:
        raise errors.ShapeError(f"Argument to {name} must be at least 2D, got shape "
                                f"{get_aval(m).shape}{_where_line()}")
    return m


# ---------------------------------------------------------------------------------------
# Triangles.

def tril(m, k=0):
    """The lower triangle of the last two axes, zeros above diagonal ``k`` (``jnp.tril``)."""
    m = _at_least_2d(m, "tril")
    shape = get_aval(m).shape
    mask = broadcast_to(tri(shape[-2], shape[-1], _static_int(k, "tril's k"), dtype=bool), shape)
    return lax.select_n(mask, zeros_like(m), m)


def triu(m, k=0):
    """The upper triangle of the last two axes, zeros below diagonal ``k`` (``jnp.triu``)."""
    m = _at_least_2d(m, "triu")
    shape = get_aval(m).shape
    mask = broadcast_to(tri(shape[-2], shape[-1], _static_int(k, "triu's k") - 1, dtype=bool), shape)
    return lax.select_n(mask, m, zeros_like(m))


def _tri_indices(n, k, m, lower):
    rows, cols = np.nonzero(np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool))
    dt = _default_int()
    return lax.stage_constant(rows.astype(dt)), lax.stage_constant(cols.astype(dt))


def tril_indices(n, k=0, m=None):
    """(rows, cols) of the lower triangle of an ``n x m`` matrix (``jnp.tril_indices``), constants."""
    return _tri_indices(_static_int(n, "n"), _static_int(k, "k"), n if m is None else m, True)


def triu_indices(n, k=0, m=None):
    """(rows, cols) of the upper triangle of an ``n x m`` matrix (``jnp.triu_indices``), constants."""
    return _tri_indices(_static_int(n, "n"), _static_int(k, "k"), n if m is None else m, False)


def tril_indices_from(arr, k=0):
    """``tril_indices`` for the shape of a 2-D ``arr`` (``jnp.tril_indices_from``)."""
    shape = get_aval(_arr(arr)).shape
    if len(shape) != 2:
        raise errors.ShapeError(f"tril_indices_from: input array must be 2-D, got shape {shape}")
    return tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr, k=0):
    """``triu_indices`` for the shape of a 2-D ``arr`` (``jnp.triu_indices_from``)."""
    shape = get_aval(_arr(arr)).shape
    if len(shape) != 2:
        raise errors.ShapeError(f"triu_indices_from: input array must be 2-D, got shape {shape}")
    return triu_indices(shape[0], k, shape[1])


# ---------------------------------------------------------------------------------------
# Diagonals.

def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal ``offset`` of the plane ``(axis1, axis2)``, moved to the last axis
    (``jnp.diagonal``): a gather of the positions ``(i, i + offset)``."""
    a = _at_least_2d(a, "diagonal")
    shape = get_aval(a).shape
    offset = _static_int(offset, "diagonal's offset")
    ax1, ax2 = _canon_axis1(axis1, len(shape)), _canon_axis1(axis2, len(shape))
    if ax1 == ax2:
        raise errors.ShapeError(f"diagonal: axis1 and axis2 cannot be the same ({axis1}){_where_line()}")
    size = builtins.max(0, builtins.min(shape[ax1] + builtins.min(offset, 0),
                                        shape[ax2] - builtins.max(offset, 0)))
    a = moveaxis(a, (ax1, ax2), (-2, -1))
    i = np.arange(size, dtype=np.int32)
    j = np.arange(abs(offset), abs(offset) + size, dtype=np.int32)
    rows, cols = (i, j) if offset >= 0 else (j, i)
    if size == 0 and len(shape) == 2 and shape[0] == shape[1] and offset == 0 and get_aval(a).dtype != np.bool_:
        # JAX computes this case with platform_dependent (a cond over ``a``), so its empty result
        # is batched like ``a`` under vmap, where the indexing path gives an unbatched constant.
        return _empty_of(a, (0,))
    return a[..., rows, cols]


def diag(v, k=0):
    """A 1-D ``v`` as the diagonal ``k`` of a square matrix, or the diagonal ``k`` of a 2-D
    ``v`` (``jnp.diag``)."""
    v = _arr(v) if isinstance(v, Tracer) else asarray(v)
    k = _static_int(k, "diag's k")
    shape = get_aval(v).shape
    if len(shape) == 2:
        return diagonal(v, offset=k)
    if len(shape) != 1:
        raise errors.ShapeError(f"diag input must be 1d or 2d, got shape {shape}{_where_line()}")
    n = shape[0] + abs(k)
    zero = full_like(v, 0, shape=())
    padded = lax.pad(v, zero, ((builtins.max(0, -k), builtins.max(0, k), 0),))
    return where(eye(n, k=k, dtype=bool), reshape(padded, (n, 1)), zero)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum of the diagonal ``offset`` of the plane ``(axis1, axis2)`` (``jnp.trace``), with
    ``sum``'s accumulation dtype."""
    if out is not None:
        raise errors.UnsupportedError(f"trace: out= is not supported{_where_line()}")
    a = _at_least_2d(a, "trace")
    shape = get_aval(a).shape
    ax1, ax2 = _canon_axis1(axis1, len(shape)), _canon_axis1(axis2, len(shape))
    if ax1 == ax2:
        raise errors.ShapeError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
    a = moveaxis(a, (ax1, ax2), (-2, -1))
    mask = eye(shape[ax1], shape[ax2], k=_static_int(offset, "trace's offset"), dtype=bool)
    return sum(where(mask, a, zeros_like(a)), axis=(-2, -1), dtype=dtype)


def diag_indices(n, ndim=2):
    """``ndim`` copies of ``arange(n)``: the indices of the main diagonal (``jnp.diag_indices``)."""
    n, ndim = _static_int(n, "n"), _static_int(ndim, "ndim")
    if n < 0 or ndim < 0:
        raise errors.ShapeError(f"n argument to diag_indices must be nonnegative, got {n}"
                                if n < 0 else f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (arange(n, dtype=_default_int()),) * ndim


def diag_indices_from(arr):
    """``diag_indices`` for a square ``arr`` (``jnp.diag_indices_from``)."""
    shape = get_aval(_arr(arr)).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise errors.ShapeError(f"diag_indices_from: all dimensions of input must be of equal length, "
                                f"got shape {shape}")
    return diag_indices(shape[0], len(shape))


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """A copy of ``a`` with its main diagonal set to ``val`` (``jnp.fill_diagonal``; JAX
    requires ``inplace=False``, arrays being immutable): a scalar, or values tiled along it."""
    if inplace:
        raise errors.UnsupportedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise errors.UnsupportedError("wrap=True is not supported (as in JAX)")
    a = _at_least_2d(a, "fill_diagonal")
    shape = get_aval(a).shape
    if len(shape) > 2 and len(set(shape)) != 1:
        raise errors.ShapeError(f"All dimensions of input must be of equal length, got {shape}")
    n = builtins.min(shape)
    val = _arr(val) if isinstance(val, Tracer) else asarray(val)
    if get_aval(val).ndim:
        flat = ravel(val)
        val = tile(flat, -(-n // get_aval(flat).shape[0]))[:n]
    return _IndexUpdateHelper(a)[diag_indices(n, len(shape))].set(val)


# ---------------------------------------------------------------------------------------
# Grids.

def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D ``xi`` (``jnp.meshgrid``): ``indexing="xy"`` swaps the first
    two axes (Cartesian), ``"ij"`` does not (matrix); ``sparse`` keeps size-1 axes."""
    if not copy:
        raise errors.UnsupportedError("jax.numpy.meshgrid only supports copy=True")
    if indexing not in ("xy", "ij"):
        raise errors.ShapeError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    args = [_arr(x) if isinstance(x, Tracer) else asarray(x) for x in xi]
    if builtins.any(get_aval(a).ndim != 1 for a in args):
        raise errors.ShapeError(f"Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                                f"{[get_aval(a).shape for a in args]}{_where_line()}")
    swap = indexing == "xy" and len(args) >= 2
    if swap:
        args[0], args[1] = args[1], args[0]
    sizes = [get_aval(a).shape[0] for a in args]
    out = []
    for i, a in enumerate(args):
        shape = [1] * len(args) if sparse else list(sizes)
        shape[i] = sizes[i]
        out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    if swap:
        out[0], out[1] = out[1], out[0]
    return out


def indices(dimensions, dtype=None, sparse=False):
    """The index of every position along each axis of a grid of shape ``dimensions``
    (``jnp.indices``): stacked, or a tuple of broadcastable arrays with ``sparse=True``."""
    dimensions = tuple(_static_int(d, "indices' dimensions") for d in dimensions)
    dt = canonicalize_dtype(dtype) if dtype is not None else _default_int()
    out = []
    for i, d in enumerate(dimensions):
        shape = tuple(d if j == i else (1 if sparse else e) for j, e in enumerate(dimensions))
        out.append(lax.broadcasted_iota(dt, shape, i))
    return tuple(out) if sparse else (stack(out, 0) if out else asarray(np.zeros((0,), dt)))


# ---------------------------------------------------------------------------------------
# Products.

def kron(a, b):
    """The Kronecker product (``jnp.kron``): interleave ``a``'s and ``b``'s axes and multiply."""
    a, b = _promote_dtypes(_arr(a), _arr(b))
    a = a if isinstance(a, Tracer) else asarray(a)
    b = b if isinstance(b, Tracer) else asarray(b)
    na, nb = get_aval(a).ndim, get_aval(b).ndim
    if na < nb:
        a = expand_dims(a, tuple(range(nb - na)))
    elif nb < na:
        b = expand_dims(b, tuple(range(na - nb)))
    nd = builtins.max(na, nb)
    out_shape = tuple(x * y for x, y in zip(get_aval(a).shape, get_aval(b).shape))
    return reshape(multiply(expand_dims(a, tuple(range(1, 2 * nd, 2))),
                            expand_dims(b, tuple(range(0, 2 * nd, 2)))), out_shape)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-vectors along the given axes (``jnp.cross``); two 2-vectors
    give the scalar z component."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(_arr(a) if isinstance(a, Tracer) else asarray(a), axisa, -1)
    b = moveaxis(_arr(b) if isinstance(b, Tracer) else asarray(b), axisb, -1)
    na, nb = get_aval(a).shape[-1], get_aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise errors.ShapeError(f"Dimension must be either 2 or 3 for cross product (got {na} and {nb})")
    if na == 2 and nb == 2:
        return subtract(multiply(a[..., 0], b[..., 1]), multiply(a[..., 1], b[..., 0]))
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else zeros_like(a0)
    b2 = b[..., 2] if nb == 3 else zeros_like(b0)
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
               subtract(multiply(a2, b0), multiply(a0, b2)),
               subtract(multiply(a0, b1), multiply(a1, b0))])
    return moveaxis(c, 0, axisc)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix ``x[:, None] ** powers`` (``jnp.vander``), highest power first
    unless ``increasing``."""
    x = _arr(x) if isinstance(x, Tracer) else asarray(x)
    if get_aval(x).ndim != 1:
        raise errors.ShapeError(f"x must be a one-dimensional array, got shape {get_aval(x).shape}")
    n = get_aval(x).shape[0] if N is None else _static_int(N, "vander's N")
    if n < 0:
        raise errors.ShapeError("N must be nonnegative")
    powers = lax.iota(get_aval(x).dtype, n)
    if not increasing:
        powers = lax.sub(full_like(powers, n - 1), powers)
    return power(expand_dims(x, -1), expand_dims(powers, 0))


def matrix_transpose(x, /):
    """Swap the last two axes (``jnp.matrix_transpose``; ShapeError below 2-D)."""
    x = _at_least_2d(x, "matrix_transpose")
    return swapaxes(x, -1, -2)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """The dot product of vectors along ``axis``, broadcasting the other axes (``jnp.vecdot``):
    one ``dot_general`` with the broadcast axes as batch dimensions."""
    x1, x2 = _promote_dtypes(_arr(x1), _arr(x2))
    x1 = moveaxis(x1 if isinstance(x1, Tracer) else asarray(x1), axis, -1)
    x2 = moveaxis(x2 if isinstance(x2, Tracer) else asarray(x2), axis, -1)
    s1, s2 = get_aval(x1).shape, get_aval(x2).shape
    if s1[-1] != s2[-1]:
        raise errors.ShapeError(f"x1 and x2 must have the same size along axis {axis}; got "
                                f"{s1} and {s2}{_where_line()}")
    batch = broadcast_shapes(s1[:-1], s2[:-1])
    x1, x2 = broadcast_to(x1, (*batch, s1[-1])), broadcast_to(x2, (*batch, s2[-1]))
    dims = tuple(range(len(batch)))
    return lax.dot_general(x1, x2, (((len(batch),), (len(batch),)), (dims, dims)),
                           precision=precision, preferred_element_type=preferred_element_type)
