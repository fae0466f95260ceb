"""Functions that map a user function over an array (``jax.numpy``'s, via ``minixla.vmap`` as
JAX's via ``jax.vmap``): ``apply_along_axis``, ``apply_over_axes``, ``fromfunction``; and
``union1d``, ``setdiff1d``. Mirrors ``jax/_src/numpy/lax_numpy.py`` and ``setops.py``.
"""
from __future__ import annotations

import operator

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import _arr, _canon_axis1, _default_float, _promote_dtypes, _where_line
from minixla.numpy.creation import arange, full_like, ones
from minixla.numpy.manipulation import concatenate, expand_dims, ravel
from minixla.numpy.elementwise import equal, less, not_equal, where
from minixla.numpy.reductions import all, sum
from minixla.numpy.indexing import _getitem
from minixla.numpy.setops import unique

__all__ = ["apply_along_axis", "apply_over_axes", "fromfunction", "union1d", "setdiff1d"]


def _vmap(*args, **kwargs):
    from minixla.interpreters.api import vmap
    return vmap(*args, **kwargs)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d(v, *args, **kwargs)`` for every 1-D slice ``v`` of ``arr`` along ``axis``
    (``jnp.apply_along_axis``): ``func1d`` is ``vmap`` ped over the other axes, so it is traced
    once; its result's dims take the place of ``axis``."""
    arr = _arr(arr)
    nd = len(get_aval(arr).shape)
    axis = _canon_axis1(axis, nd)

    def func(a):
        return func1d(a, *args, **kwargs)
    for i in range(1, nd - axis):
        func = _vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = _vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each axis in turn, a reduced axis kept as size 1
    (``jnp.apply_over_axes``). ``ValueError`` if ``func`` returns another rank."""
    a = _arr(a)
    for axis in axes:
        b = func(a, axis)
        nb, na = len(get_aval(b).shape), len(get_aval(a).shape)
        if nb == na:
            a = b
        elif nb == na - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return a


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(i0, i1, ...)`` over the index grid of ``shape`` (``jnp.fromfunction``): the
    function is ``vmap`` ped once per axis and called on ``arange(n, dtype=dtype)`` s, so it
    sees rank-0 indices (``dtype`` default: the default float)."""
    if any(isinstance(s, Tracer) for s in np.atleast_1d(np.asarray(shape, dtype=object))):
        raise errors.ConcretizationTypeError(f"shape argument of jnp.fromfunction() must be static{_where_line()}")
    shape = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(s) for s in shape)
    dtype = _default_float() if dtype is float else dtype
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = _vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(arange(s, dtype=dtype) for s in shape), **kwargs)


def _set_size(size, operands, name):
    """The static ``size``; without one, every operand must be concrete (the result's length
    depends on the values): else ``ConcretizationTypeError``, as JAX's."""
    if any(isinstance(v, Tracer) for v in ((size,) if size is not None else operands)):
        raise errors.ConcretizationTypeError(f"The error arose in {name}(){_where_line()}")
    return None if size is None else operator.index(size)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of both arrays, flattened (``jnp.union1d``): ``unique`` of their
    concatenation. Without ``size`` the inputs must be concrete; with it the result has that
    length, padded with ``fill_value`` (default: the smallest value), as ``unique``."""
    a1, a2 = _arr(ar1), _arr(ar2)
    size = _set_size(size, (a1, a2), "union1d")
    return unique(concatenate((a1, a2), axis=None), size=size, fill_value=fill_value)


def _not_in(arr1, arr2):
    """``arr1[i] not in arr2`` for each element (JAX's ``_in1d`` by comparing all pairs)."""
    arr1, arr2 = _promote_dtypes(ravel(arr1), ravel(arr2))
    n1, n2 = get_aval(arr1).shape[0], get_aval(arr2).shape[0]
    if n1 == 0 or n2 == 0:
        return ones((n1,), dtype=bool)
    return all(not_equal(_getitem(arr1, (slice(None), None)), _getitem(arr2, (None, slice(None)))), axis=-1)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values of ``ar1`` that are not in ``ar2``, flattened (``jnp.setdiff1d``;
    ``assume_unique``: ``ar1`` is taken as it is, unsorted). Without ``size`` ``ar1`` must be
    concrete; with it the result has that length, padded with ``fill_value`` (default 0)."""
    a1, a2 = ravel(_arr(ar1)), ravel(_arr(ar2))
    size = _set_size(size, (ar1,), "setdiff1d")
    fill = full_like(a1, 0 if fill_value is None else fill_value, shape=())
    n = get_aval(a1).shape[0]
    if n == 0:
        return full_like(a1, fill, shape=size or 0)
    if not assume_unique:
        a1 = unique(a1, size=size and n)
    mask = _not_in(a1, a2)
    if size is None:
        return _getitem(a1, mask)
    if not assume_unique:
        n_unique = n + 1 - sum(equal(a1, _getitem(a1, 0)))
        mask = where(less(arange(n), n_unique), mask, False)
    picked = _getitem(a1, where(mask, size=size)[0])
    return where(less(arange(size), sum(mask)), picked, fill)
