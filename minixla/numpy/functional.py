"""Functions that map a user function over an array (``jax.numpy``'s, via ``minixla.vmap`` as
JAX's via ``jax.vmap``): ``apply_along_axis``, ``apply_over_axes``, ``fromfunction``; and
``union1d``. Mirrors ``jax/_src/numpy/lax_numpy.py`` and ``setops.py``.
"""
from __future__ import annotations

import operator

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer
from minixla.numpy.promotion import _arr, _canon_axis1, _default_float, _where_line
from minixla.numpy.creation import arange
from minixla.numpy.manipulation import concatenate, expand_dims
from minixla.numpy.setops import unique

__all__ = ["apply_along_axis", "apply_over_axes", "fromfunction", "union1d"]


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


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of both arrays, flattened (``jnp.union1d``): ``unique`` of their
    concatenation. Without ``size`` the inputs must be concrete; with it the result has that
    length, padded with ``fill_value`` (default: the smallest value), as ``unique``."""
    a1, a2 = _arr(ar1), _arr(ar2)
    if size is None:
        for a in (a1, a2):
            if isinstance(a, Tracer):
                raise errors.ConcretizationTypeError(f"The error arose in union1d(){_where_line()}")
    else:
        if isinstance(size, Tracer):
            raise errors.ConcretizationTypeError(f"The error arose in union1d(){_where_line()}")
        size = operator.index(size)
    return unique(concatenate((a1, a2), axis=None), size=size, fill_value=fill_value)
