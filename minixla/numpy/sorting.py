"""Sorting (``jax.numpy``'s ``sort``, ``argsort``, ``lexsort``), written as ``jax.numpy`` writes
them on ``lax.sort``: stable by default, ``descending`` by reversing (``argsort`` reverses the
input and its indices first, so a stable descending sort keeps ties in input order). NaNs sort
last, ``-0.0`` ties with ``0.0`` (JAX's comparator, ``minixla.lax.sorting``).
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.numpy.promotion import _arr


def _dimension(arr, axis, opname):
    if axis is None:
        return lax.reshape(arr, (get_aval(arr).size,)), 0
    nd = get_aval(arr).ndim
    if nd == 0:
        raise errors.ShapeError(f"{opname}: axis {axis} is out of bounds for a rank-0 array")
    if not -nd <= axis < nd:
        raise errors.ShapeError(f"{opname}: axis {axis} is out of bounds for an array of rank {nd}")
    return arr, axis % nd


def _check_kind(opname, kind, order):
    if kind is not None:
        raise TypeError(f"'kind' argument to {opname} is not supported. Use stable=True or "
                        f"stable=False to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {opname} is not supported.")


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """``a`` sorted along ``axis`` (flattened for ``None``), as ``jax.numpy.sort``."""
    _check_kind("sort", kind, order)
    arr, dim = _dimension(_arr(a), axis, "sort")
    out = lax.sort(arr, dimension=dim, is_stable=stable)
    return lax.rev(out, (dim,)) if descending else out


def _index_dtype(n, dtype=None):
    if dtype is not None:
        return canonicalize_dtype(dtype)
    return canonicalize_dtype(np.int64) if n < 2 ** 31 else np.dtype(np.int64)


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """The indices that sort ``a`` along ``axis`` (``jax.numpy.argsort``); default int dtype."""
    _check_kind("argsort", kind, order)
    arr, dim = _dimension(_arr(a), axis, "argsort")
    shape = get_aval(arr).shape
    iota = lax.broadcasted_iota(_index_dtype(shape[dim], dtype), shape, dim)
    if descending and stable:
        arr, iota = lax.rev(arr, (dim,)), lax.rev(iota, (dim,))
    _, indices = lax.sort_key_val(arr, iota, dimension=dim, is_stable=stable)
    return lax.rev(indices, (dim,)) if descending else indices


def lexsort(keys, axis=-1):
    """The indices that sort by ``keys[-1]``, then ``keys[-2]``, ... (``jax.numpy.lexsort``)."""
    keys = tuple(_arr(k) for k in keys)
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({get_aval(k).shape for k in keys}) > 1:
        raise ValueError("all keys need to be the same shape")
    shape = get_aval(keys[0]).shape
    if not shape:
        return lax.full((), 0, canonicalize_dtype(int))
    _, dim = _dimension(keys[0], axis, "lexsort")
    iota = lax.broadcasted_iota(_index_dtype(shape[dim]), shape, dim)
    return lax.sort((*keys[::-1], iota), dimension=dim, num_keys=len(keys))[-1]
