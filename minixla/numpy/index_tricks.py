"""Index arithmetic and NumPy's index tricks (``jax.numpy``'s): ``unravel_index``,
``ravel_multi_index``, ``ix_``, and the objects indexed to build arrays, ``mgrid``, ``ogrid``,
``r_``, ``c_`` (``s_`` and ``index_exp`` are NumPy's own, as in JAX). Mirrors
``jax/_src/numpy/index_tricks.py`` and ``lax_numpy.py``.

The index-trick objects read their slices eagerly: a traced bound raises
``ConcretizationTypeError`` (``arange`` needs static bounds), as JAX's.
"""
from __future__ import annotations

import math
import operator

import jax
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import _arr, _promote_dtypes, _where_line
from minixla.numpy.creation import arange, asarray, linspace
from minixla.numpy.manipulation import concatenate, expand_dims, stack, transpose
from minixla.numpy.elementwise import clip, divmod, greater, less, remainder, where
from minixla.numpy.matrices import meshgrid

__all__ = ["unravel_index", "ravel_multi_index", "ix_", "mgrid", "ogrid", "r_", "c_", "s_",
           "index_exp", "mask_indices"]

s_ = np.s_
index_exp = np.index_exp


def _shape(x):
    return tuple(get_aval(x).shape)


def _dtype(x):
    return np.dtype(get_aval(x).dtype)


def unravel_index(indices, shape):
    """The multi-index of each flat index into ``shape`` (``jnp.unravel_index``): a tuple of
    arrays of ``indices``' shape and dtype. Out-of-range flat indices are clamped, as JAX's
    (too large -> the last index, below -1 -> 0; -1 counts from the end)."""
    idx = _arr(indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if builtins_any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        idx, out[i] = divmod(idx, s)
    oob_pos = greater(idx, 0)
    oob_neg = asarray(False) if _dtype(idx).kind == "u" else less(idx, -1)
    return tuple(where(oob_pos, s - 1, where(oob_neg, 0, i)) for s, i in zip(shape, out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """The flat index of each multi-index into ``dims`` (``jnp.ravel_multi_index``).

    ``multi_index``: a sequence of integer arrays (broadcast together), one per dim;
    ``mode``: ``'raise'`` (needs concrete indices; ``ValueError`` for an out-of-range one),
    ``'clip'``, ``'wrap'`` or ``'ignore'``; ``order``: ``'C'`` or ``'F'``. The result dtype is
    ``result_type(int, *multi_index)`` unless ``dtype`` is given (an integer dtype that holds
    ``prod(dims) - 1``, else ``ValueError``). ``TypeError`` for non-integer indices."""
    if len(multi_index) != len(dims):
        raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    if builtins_any_traced(dims):
        raise errors.ConcretizationTypeError(f"in `dims` argument of ravel_multi_index(){_where_line()}")
    dims = tuple(operator.index(d) for d in dims)
    arrs = [_arr(i) for i in multi_index]
    if dtype is None:
        dtype = np.dtype(jax.dtypes.result_type(int, *(_dtype(a) for a in arrs)))
    else:
        dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise ValueError(f"dtype={dtype!r} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dtype!r} not large enough to hold flattened "
                         f"index for dims={dims!r}. Use the dtype argument to pass a suitable dtype "
                         "(e.g. dtype=np.min_scalar_type(prod(dims))).")
    for index in arrs:
        if mode == "raise" and isinstance(index, Tracer):
            raise errors.ConcretizationTypeError(
                "The error occurred because ravel_multi_index was jit-compiled with mode='raise'. "
                f"Use mode='wrap' or mode='clip' instead.{_where_line()}")
        if _dtype(index).kind not in "iu":
            raise TypeError("only int indices permitted")
    if mode == "raise":
        if builtins_any(np.any((np.asarray(i) < 0) | (np.asarray(i) >= d)) for i, d in zip(arrs, dims)):
            raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        arrs = [clip(i, 0, d - 1) for i, d in zip(arrs, dims)]
    elif mode == "wrap":
        arrs = [remainder(i, d) for i, d in zip(arrs, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    result = asarray(0, dtype=dtype)
    for i, s in zip(arrs, strides):
        result = result + asarray(i, dtype=dtype) * int(s)
    return result


def builtins_any(it):  # (the builtin: ``any`` is jnp.any in this package)
    for v in it:
        if v:
            return True
    return False


def builtins_any_traced(values):
    return builtins_any(isinstance(v, Tracer) for v in values)


def ix_(*args):
    """An open mesh from 1-D index arrays (``jnp.ix_``): the ``i``-th result is ``args[i]``
    reshaped to ``(1, ..., n_i, ..., 1)``, so ``x[ix_(a, b)]`` picks the cross product.
    ``ValueError`` for an argument that is not 1-D, ``NotImplementedError`` for booleans."""
    arrs = [_arr(a) for a in args]
    n = len(arrs)
    out = []
    for i, a in enumerate(arrs):
        if len(_shape(a)) != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {_shape(a)}")
        if _dtype(a) == np.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = _shape(a)[0]
        if _shape(a)[0] == 0:
            out.append(lax.full(tuple(shape), 0, np.int32))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# mgrid / ogrid / r_ / c_

def _concrete_bound(v, what):
    if isinstance(v, Tracer):
        raise errors.ConcretizationTypeError(f"{what}: a concrete value is needed{_where_line()}")
    return v


def _grid_1d(s: slice, op_name: str):
    start = _concrete_bound(s.start, f"slice start of jnp.{op_name}") or 0
    stop = _concrete_bound(s.stop, f"slice stop of jnp.{op_name}")
    step = _concrete_bound(s.step, f"slice step of jnp.{op_name}") or 1
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _Mgrid:
    """``mgrid[a:b:s, ...]``: a dense mesh of ``arange`` s (``linspace`` for a complex step
    ``nj``), stacked on a new first axis (``jnp.mgrid``)."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_1d(key, "mgrid")
        out = _promote_dtypes(*(_grid_1d(k, "mgrid") for k in key))
        out = meshgrid(*out, indexing="ij", sparse=False)
        return arange(0) if not out else stack(out, 0)


class _Ogrid:
    """``ogrid[a:b:s, ...]``: the open (sparse) mesh of ``mgrid`` (``jnp.ogrid``)."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_1d(key, "ogrid")
        out = _promote_dtypes(*(_grid_1d(k, "ogrid") for k in key))
        return meshgrid(*out, indexing="ij", sparse=True)


mgrid, ogrid = _Mgrid(), _Ogrid()


def _ndmin(x, n):
    while len(_shape(x)) < n:
        x = expand_dims(x, 0)
    return x


class _AxisConcat:
    axis: int
    ndmin: int
    trans1d: int
    op_name: str

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        directive = key[0]
        if isinstance(directive, str):
            key = key[1:]
            if directive == "r":
                params[-1] = 0
            elif directive == "c":
                params[-1] = 1
            else:
                vec = directive.split(",")
                vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
                try:
                    params = list(map(int, vec))
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        axis, ndmin, trans1d, matrix = params
        output = []
        for item in key:
            if isinstance(item, slice):
                new, item_ndim = _grid_1d(item, self.op_name), 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                new = asarray(item)
                item_ndim = len(_shape(new))
            new = _ndmin(new, ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = tuple(range(ndmin))
                shifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                new = transpose(new, order[shifts:] + order[:shifts])
            output.append(new)
        res = concatenate(tuple(output), axis=axis)
        if matrix != -1 and len(_shape(res)) == 1:
            res = expand_dims(res, matrix)
        return res

    def __len__(self):
        return 0


class RClass(_AxisConcat):
    """``r_[...]``: slices (as ``arange``/``linspace``), arrays and scalars concatenated along
    the first axis; a leading string directive (``'r'``, ``'c'``, ``'axis,ndmin,trans1d'``)
    changes it, as NumPy's and JAX's ``r_``."""
    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcat):
    """``c_[...]``: ``r_`` along the last axis, 1-D pieces as columns (``jnp.c_``)."""
    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


r_, c_ = RClass(), CClass()


def mask_indices(n, mask_func, k=0, *, size=None):
    """The ``(rows, cols)`` indices (int32) of the nonzero entries of ``mask_func(ones((n, n)),
    k)`` (``jnp.mask_indices``; ``mask_func`` is e.g. ``minixla.numpy.triu``), row-major;
    ``size`` fixes their number (padded with 0, truncated), as ``nonzero`` -- needed under ``jit``."""
    from minixla.numpy.creation import ones
    from minixla.numpy.setops import nonzero
    return nonzero(mask_func(ones((operator.index(n), operator.index(n))), k), size=size)
