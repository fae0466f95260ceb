"""Set operations on two arrays, flattened: ``intersect1d`` and ``setxor1d`` (``jax.numpy``'s,
in ``jax/_src/numpy/setops.py``), by comparing all pairs of values (``functional._not_in``), so
with ``size=`` they trace under ``jit``. NaN equals nothing here, as in JAX's sorted compare."""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _promote_dtypes
from minixla.numpy.creation import arange, full, full_like
from minixla.numpy.manipulation import concatenate, expand_dims, ravel
from minixla.numpy.elementwise import equal, less, logical_and, logical_not, subtract, where
from minixla.numpy.reductions import any as _any, argmax, max as _max, min as _min, sum
from minixla.numpy.indexing import _getitem
from minixla.numpy.setops import unique
from minixla.numpy.sorting import sort
from minixla.numpy.functional import _set_size

__all__ = ["intersect1d", "setxor1d"]


def _uniques(a, assume_unique, size, return_index=False):
    """``(values, first_index, valid)``: ``a``'s sorted unique values (``a`` sorted as it is if
    ``assume_unique``), their index in ``a``, and which slots hold one (``size`` given: unique's
    padding slots are not valid; they repeat the smallest value)."""
    n = get_aval(a).shape[0]
    if assume_unique:
        idx = lax.sort((a, arange(n, dtype=np.int32)), num_keys=1)
        return idx[0], idx[1], full((n,), True)
    if n == 0:
        return a, arange(0, dtype=np.int32), full((0,), True)
    if return_index:
        vals, first = unique(a, return_index=True, size=size and n)
    else:
        vals, first = unique(a, size=size and n), None
    if size is None:
        return vals, first, full(get_aval(vals).shape, True)
    n_unique = subtract(n + 1, sum(equal(vals, _getitem(vals, 0))))
    return vals, first, less(arange(n), n_unique)


def _pick(vals, mask, size, fill_value):
    """``vals[mask]`` (sorted, as ``vals``): all of them without ``size``; else the first ``size``,
    padded with ``fill_value`` (default: the smallest picked value, 0 if none, NaN if
    one is NaN). Also the picked
    positions (padded with ``len(vals)``) and their count."""
    if size is None:
        return _getitem(vals, mask), None, None
    n = get_aval(vals).shape[0]
    count = sum(mask)
    pos = where(mask, size=size, fill_value=n)[0] if n else full((size,), 0, np.int32)
    got = less(arange(size), count)
    picked = _getitem(vals, where(got, pos, 0)) if n else full((size,), 0, get_aval(vals).dtype)
    if fill_value is None:  # as JAX: the free slots (0 first) take the max, then the min
        picked = where(got, picked, full_like(picked, 0, shape=()))
        fill = _min(where(got, picked, _max(picked)))
    else:
        fill = full_like(picked, fill_value, shape=())
    return where(got, picked, fill), where(got, pos, n), got


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """The sorted values found in both arrays, flattened (``jnp.intersect1d``): 1-D, of the
    promoted dtype. ``return_indices``: also the index of each in ``ar1`` and ``ar2`` (their
    first occurrence; int32). ``assume_unique``: the inputs are taken as free of duplicates.
    Without ``size`` the inputs must be concrete (``ConcretizationTypeError``); with it the
    result has ``size`` slots, extra ones hold ``fill_value`` (default: the smallest result) and
    the out-of-range indices ``ar1.size``, ``ar2.size``."""
    a1, a2 = _promote_dtypes(ravel(_arr(ar1)), ravel(_arr(ar2)))
    size = _set_size(size, (a1, a2), "intersect1d")
    u1, i1, ok1 = _uniques(a1, assume_unique, size, return_indices)
    u2, i2, ok2 = _uniques(a2, assume_unique, size, return_indices)
    mask = logical_and(_in_valid(u1, u2, ok2), ok1)
    vals, pos, got = _pick(u1, mask, size, fill_value)
    if not return_indices:
        return vals
    n1, n2 = get_aval(a1).shape[0], get_aval(a2).shape[0]
    if size is None:
        j1 = _getitem(i1, mask)
        j2 = _getitem(i2, argmax(_pairs(equal, vals, u2), axis=1)) if n2 else j1
        return vals, j1, j2
    j1 = _getitem(concatenate((i1, full((1,), n1, i1.dtype))), pos)
    j2 = _getitem(i2, argmax(logical_and(_pairs(equal, vals, u2), ok2), axis=1)) if n2 else j1
    return vals, j1, where(got, j2, n2)


def _pairs(op, x, y):
    """``op(x[i], y[j])`` for all pairs: shape ``(len(x), len(y))``."""
    return op(expand_dims(x, 1), expand_dims(y, 0))


def _in_valid(u1, u2, ok2):
    """``u1[i]`` equals some valid ``u2[j]``."""
    if get_aval(u1).shape[0] == 0 or get_aval(u2).shape[0] == 0:
        return full(get_aval(u1).shape, False)
    return _any(logical_and(_pairs(equal, u1, u2), expand_dims(ok2, 0)), axis=1)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values found in exactly one of the arrays, flattened (``jnp.setxor1d``): 1-D,
    of the promoted dtype (a NaN in both arrays is kept twice). ``assume_unique``: the inputs
    are taken as free of duplicates. Without ``size`` the inputs must be concrete
    (``ConcretizationTypeError``); with it the result has ``size`` slots, extra ones hold
    ``fill_value`` (default: the smallest result, 0 if none)."""
    a1, a2 = _promote_dtypes(ravel(_arr(ar1)), ravel(_arr(ar2)))
    size = _set_size(size, (a1, a2), "setxor1d")
    u1, _, ok1 = _uniques(a1, assume_unique, size)
    u2, _, ok2 = _uniques(a2, assume_unique, size)
    keep = concatenate((logical_and(logical_not(_in_valid(u1, u2, ok2)), ok1),
                        logical_and(logical_not(_in_valid(u2, u1, ok1)), ok2)))
    both = concatenate((u1, u2))
    if size is None:
        return sort(_getitem(both, keep))
    # kept values first, each part sorted: a stable two-key sort (dropped last, then by value)
    _, vals = lax.sort((logical_not(keep), both), num_keys=2) if get_aval(both).shape[0] else (keep, both)
    return _pick(vals, less(arange(get_aval(vals).shape[0]), sum(keep)), size, fill_value)[0]
