"""Data-dependent sizes made static: ``nonzero``/``flatnonzero``/``argwhere`` and ``unique`` (with
the Array API's ``unique_all``/``unique_counts``/``unique_inverse``/``unique_values``), and
``partition``/``argpartition`` on ``lax.top_k``, as ``jax.numpy`` defines them.

Their output length depends on the values, so under a transformation (jit, vmap, grad) the
caller must give a static ``size=`` (the result is cut or padded to it, padding with
``fill_value``); without it a traced input raises ``ConcretizationTypeError``, as in JAX. An
eager call without ``size`` reads the count from the concrete input.

``nonzero`` uses JAX's scatter-free trick: ``cumsum(bincount(cumsum(mask), length=size))`` is,
for each output slot ``j``, the position of the ``(j+1)``-th nonzero element.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import _arr, _canon_axis1, _cast, _default_int, _where_line
from minixla.numpy.creation import arange, asarray, full, zeros
from minixla.numpy.manipulation import atleast_1d, concatenate, moveaxis, ravel, reshape, transpose
from minixla.numpy.elementwise import isnan, where
from minixla.numpy.reductions import any as _any, cumsum, sum as _sum
from minixla.numpy.indexing import take
from minixla.numpy.sequences import bincount
from minixla.numpy.sorting import lexsort

_UNIQUE_HINT = ("To make jnp.unique() compatible with JIT and other transforms, you can specify a "
                "concrete value for the size argument, which will determine the output size.")


def _static_size(size, what):
    if isinstance(size, Tracer):
        raise errors.ConcretizationTypeError(f"{what}: the size argument must be a static int"
                                             f"{_where_line()}")
    return operator.index(size)


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements of ``a``, one int array per dimension
    (``jax.numpy.nonzero``). With ``size`` the arrays have that length: the first ``size``
    nonzeros, then ``fill_value`` (a scalar or one per dimension; default 0). Raises ValueError
    for a 0-d ``a``; ConcretizationTypeError for a traced ``a`` without ``size``."""
    arr = _arr(a)
    aval = get_aval(arr)
    if aval.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar)."
                         "nonzero() instead.")
    mask = arr if aval.dtype == np.bool_ else lax.ne(arr, np.zeros((), aval.dtype))
    if size is None:
        if isinstance(arr, Tracer):
            raise errors.ConcretizationTypeError(
                "The size argument of jnp.nonzero must be statically specified to use jnp.nonzero "
                f"within JAX transformations.{_where_line()}")
        size = int(np.count_nonzero(np.asarray(mask)))
    else:
        size = _static_size(size, "nonzero")
    idt = _default_int()
    if aval.size == 0 or size == 0:
        return tuple(zeros(size, idt) for _ in aval.shape)
    flat = cumsum(bincount(cumsum(ravel(mask)), length=size))
    strides = [math.prod(aval.shape[d + 1:]) for d in range(aval.ndim)]
    out = tuple(lax.rem(lax.div(flat, np.asarray(s, idt)), np.asarray(n, idt))
                for s, n in zip(strides, aval.shape))
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * aval.ndim
        if len(fills) != aval.ndim or any(np.shape(f) != () for f in fills):
            raise ValueError(f"fill_value must be a scalar or a tuple of length {aval.ndim}; got {fill_value}")
        past = lax.ge(arange(size, dtype=idt), _sum(mask, dtype=idt))
        out = tuple(where(past, f, o) for f, o in zip(fills, out))
    return out


def flatnonzero(a, *, size=None, fill_value=None):
    """``nonzero(ravel(a), ...)[0]`` (``jax.numpy.flatnonzero``)."""
    return nonzero(ravel(_arr(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements as rows, shape ``(count or size, a.ndim)``
    (``jax.numpy.argwhere``); ``size``/``fill_value`` as ``nonzero``."""
    arr = _arr(a)
    nd = get_aval(arr).ndim
    cols = nonzero(atleast_1d(arr), size=size, fill_value=fill_value)
    rows = transpose(lax.concatenate([reshape(c, (1, -1)) for c in cols], 0))
    n = get_aval(rows).shape[0]
    if nd == 0:
        return zeros((n, 0), get_aval(rows).dtype)
    return rows


def _unique_sorted(aux, equal_nan):
    """``aux`` (unique axis first) sorted by rows, the mask of first occurrences, the permutation."""
    n, *rest = get_aval(aux).shape
    width = math.prod(rest)
    if width == 0:
        perm = zeros(1, _default_int())
        n = 1
    else:
        keys = transpose(reshape(aux, (n, width)))
        perm = lexsort([reshape(lax.slice_in_dim(keys, i, i + 1, axis=0), (n,)) for i in range(width)][::-1])
    aux = take(aux, perm, axis=0, mode="clip") if get_aval(aux).size else aux
    if get_aval(aux).size:
        lo, hi = lax.slice_in_dim(aux, 0, n - 1, axis=0), lax.slice_in_dim(aux, 1, n, axis=0)
        neq = lax.ne(hi, lo)
        dt = get_aval(aux).dtype
        if equal_nan and (dt.kind == "f" or dt.name == "bfloat16"):
            neq = lax.bitwise_and(neq, lax.bitwise_not(lax.bitwise_and(isnan(hi), isnan(lo))))
        if len(rest):
            neq = _any(neq, axis=tuple(range(1, 1 + len(rest))))
        mask = concatenate([np.ones(1, np.bool_), neq])
    else:
        mask = zeros(n, np.bool_)
    return aux, mask, perm


def _unique(arr, axis, return_index, return_inverse, return_counts, equal_nan, size, fill_value):
    n_axis = get_aval(arr).shape[axis]
    if n_axis == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, fill_value "
                         "must be specified")
    aux, mask, perm = _unique_sorted(moveaxis(arr, axis, 0), equal_nan)
    if size is None:
        ind = np.flatnonzero(np.asarray(mask))
        ind = asarray(ind.astype(_default_int()))
    else:
        ind = nonzero(mask, size=size)[0]
    has = get_aval(aux).size > 0
    result = take(aux, ind, axis=0, mode="clip") if has else aux
    if size is not None and fill_value is not None:
        fill = _cast(_arr(fill_value), get_aval(result).dtype)
        rshape = get_aval(result).shape
        if rshape[0]:
            valid = lax.lt(arange(size, dtype=_default_int()), _sum(mask, dtype=_default_int()))
            valid = lax.broadcast_in_dim(valid, rshape, (0,))
            result = where(valid, result, fill)
        else:
            result = full((size, *rshape[1:]), fill, get_aval(result).dtype)
    ret = [moveaxis(result, 0, axis)]
    idt = _default_int()
    if return_index:
        ret.append(take(perm, ind, mode="clip") if has else perm)
    if return_inverse:
        if has:
            imask = lax.sub(cumsum(mask, dtype=idt), np.asarray(1, idt))
            dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                             scatter_dims_to_operand_dims=(0,))
            ret.append(lax.scatter(zeros(get_aval(mask).shape, idt), reshape(perm, (-1, 1)), imask, dn,
                                   mode=lax.GatherScatterMode.FILL_OR_DROP))
        else:
            ret.append(zeros(n_axis, idt))
    if return_counts:
        if has:
            total = get_aval(mask).shape[0]
            if size is None:
                idx = concatenate([ind, np.array([total], idt)])
            else:
                idx = nonzero(mask, size=size + 1)[0]
                tail = lax.slice_in_dim(idx, 1, size + 1)
                idx = concatenate([lax.slice_in_dim(idx, 0, 1),
                                   where(lax.ne(tail, np.asarray(0, idt)), tail, total)])
            ret.append(lax.sub(lax.slice_in_dim(idx, 1, get_aval(idx).shape[0]),
                               lax.slice_in_dim(idx, 0, get_aval(idx).shape[0] - 1)))
        elif n_axis:
            ret.append(full((1,), n_axis, idt))
        else:
            ret.append(zeros(0, idt))
    return ret


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):  # noqa: A002 (numpy's name)
    """The sorted unique elements of ``ar`` (``jax.numpy.unique``; with ``axis``, unique slices
    along it), and on request the index of each one's first occurrence, the inverse indices
    (shape of ``ar`` for ``axis=None``) and the counts. ``size`` fixes the number of results
    (extra slots hold ``fill_value``, default the smallest value); a traced ``ar`` needs it
    (ConcretizationTypeError otherwise). ``equal_nan`` makes all NaNs one value."""
    arr = _arr(ar)
    if size is None:
        if isinstance(arr, Tracer):
            raise errors.ConcretizationTypeError("The error arose for the first argument of jnp.unique(). "
                                                 + _UNIQUE_HINT + _where_line())
    else:
        size = _static_size(size, "unique")
    shape = get_aval(arr).shape
    if axis is None:
        arr, ax = ravel(arr), 0
    else:
        ax = _canon_axis1(axis, get_aval(arr).ndim)
    ret = _unique(arr, ax, return_index, return_inverse, return_counts, equal_nan, size, fill_value)
    if return_inverse and axis is None:
        i = 2 if return_index else 1
        ret[i] = reshape(ret[i], shape)
    return ret[0] if len(ret) == 1 else tuple(ret)


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_all(x, /, *, size=None, fill_value=None):
    """Values, first indices, inverse indices and counts (the Array API's ``unique_all``; NaNs distinct)."""
    return UniqueAllResult(*unique(x, True, True, True, equal_nan=False, size=size, fill_value=fill_value))


def unique_counts(x, /, *, size=None, fill_value=None):
    """Values and counts (the Array API's ``unique_counts``)."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """Values and inverse indices (the Array API's ``unique_inverse``)."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_values(x, /, *, size=None, fill_value=None):
    """The unique values (the Array API's ``unique_values``)."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


# ---------------------------------------------------------------------------------------
# Partitions: the kth element in place, smaller ones before, larger after (JAX's order: the
# smallest kth+1 ascending from ``top_k`` of the negation, the rest descending).

def _partition_setup(a, kth, axis, name):
    arr = _arr(a)
    aval = get_aval(arr)
    if aval.dtype.kind == "c":
        raise errors.UnsupportedError(f"jnp.{name} for complex dtype is not implemented.")
    ax = _canon_axis1(axis, aval.ndim)
    n = aval.shape[ax]
    kth = operator.index(kth)
    if not -n <= kth < n:
        raise errors.ShapeError(f"{name}: kth={kth} is out of bounds for an axis of size {n}")
    return moveaxis(arr, ax, -1), kth % n, ax, n


def _negated(arr):
    dt = get_aval(arr).dtype
    if dt.kind == "u":  # -(x + 1) keeps 0 the largest after wrapping
        return lax.neg(lax.add(arr, np.asarray(1, dt)))
    return lax.neg(arr)


def partition(a, kth, axis=-1):
    """``a`` partially sorted along ``axis`` so that index ``kth`` holds the value a full sort
    would put there, smaller values before it and larger after (``jax.numpy.partition``)."""
    arr, kth, ax, n = _partition_setup(a, kth, axis, "partition")
    dt = get_aval(arr).dtype
    low = lax.top_k(_negated(arr), kth + 1)[0]
    low = (lax.sub(lax.neg(low), np.asarray(1, dt)) if dt.kind == "u" else lax.neg(low))
    high = lax.top_k(arr, n - kth - 1)[0]
    return moveaxis(lax.concatenate([low, high], get_aval(arr).ndim - 1), -1, ax)


def argpartition(a, kth, axis=-1):
    """The indices that ``partition`` would move to each place (``jax.numpy.argpartition``), int32."""
    arr, kth, ax, n = _partition_setup(a, kth, axis, "argpartition")
    shape = get_aval(arr).shape
    low = lax.top_k(_negated(arr), kth + 1)[1]
    # the rest: the positions not taken (ties resolved by index, as JAX's proxy does)
    iota = lax.broadcasted_iota(np.int32, (*shape, kth + 1), len(shape) - 1)
    taken = lax.reduce_or(lax.eq(iota, lax.broadcast_in_dim(low, (*shape, kth + 1),
                                                            (*range(len(shape) - 1), len(shape)))),
                          (len(shape),))
    proxy = lax.select(taken, lax.full(shape, 0.0, np.float32), lax.full(shape, 1.0, np.float32))
    high = lax.top_k(proxy, n - kth - 1)[1]
    return moveaxis(lax.concatenate([low, high], len(shape) - 1), -1, ax)


__all__ = ["nonzero", "flatnonzero", "argwhere", "unique", "unique_all", "unique_counts",
           "unique_inverse", "unique_values", "partition", "argpartition"]
