"""Polynomials as coefficient arrays, highest power first (``jax.numpy``'s, from the same ops in
the same order): ``polyadd``, ``polysub``, ``polymul``, ``polyder``, ``polyint``, ``poly``.
Mirrors ``jax/_src/numpy/polynomial.py`` (``polyval`` is in ``sequences``).
"""
from __future__ import annotations

from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _promote_dtypes, _promote_inexact
from minixla.numpy.creation import arange, full, ones, zeros
from minixla.numpy.manipulation import atleast_1d, concatenate
from minixla.numpy.elementwise import maximum, negative, true_divide
from minixla.numpy.reductions import prod
from minixla.numpy.indexing import _IndexUpdateHelper, _getitem
from minixla.numpy.sequences import convolve
from minixla.numpy.editing import trim_zeros
from minixla.numpy.matrices import _static_int

__all__ = ["polyadd", "polysub", "polymul", "polyder", "polyint", "poly"]


def _len(x):
    return get_aval(x).shape[0]


def polyadd(a1, a2):
    """The sum of two polynomials (``jnp.polyadd``): the shorter added into the longer's tail;
    dtypes promoted."""
    a1, a2 = _promote_dtypes(_arr(a1), _arr(a2))
    if _len(a2) <= _len(a1):
        return _IndexUpdateHelper(a1)[-_len(a2):].add(a2)
    return _IndexUpdateHelper(a2)[-_len(a1):].add(a1)


def polysub(a1, a2):
    """``a1 - a2`` as polynomials (``jnp.polysub``): ``polyadd(a1, -a2)``."""
    a1, a2 = _promote_dtypes(_arr(a1), _arr(a2))
    return polyadd(a1, negative(a2))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials (``jnp.polymul``): their full convolution, in the promoted
    inexact dtype; ``trim_leading_zeros`` (needs concrete inputs) drops leading zeros first."""
    a1, a2 = _promote_inexact(_arr(a1), _arr(a2))
    if trim_leading_zeros and (_len(a1) > 1 or _len(a2) > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if _len(a1) == 0:
        a1 = zeros(1, dtype=get_aval(a2).dtype)
    if _len(a2) == 0:
        a2 = zeros(1, dtype=get_aval(a1).dtype)
    return convolve(a1, a2, mode="full")


def polyder(p, m=1):
    """The ``m``-th derivative (``jnp.polyder``), inexact dtype; ``ValueError`` for ``m < 0``."""
    m = _static_int(m, "'m' argument of jnp.polyder")
    p, = _promote_inexact(_arr(p))
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    dt = get_aval(p).dtype
    grid = _getitem(arange(m, _len(p), dtype=dt), None) - _getitem(arange(m, dtype=dt), (slice(None), None))
    coeff = prod(grid, axis=0)
    return _getitem(p, slice(None, -m)) * _getitem(coeff, slice(None, None, -1))


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative with integration constants ``k`` (a scalar or ``m`` values,
    default 0) (``jnp.polyint``), inexact dtype. ``ValueError`` for ``m < 0`` or a ``k`` of
    another length."""
    m = _static_int(m, "'m' argument of jnp.polyint")
    k = 0 if k is None else k
    p, k = _promote_inexact(_arr(p), _arr(k))
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if _len(k) == 1:
        k = full((m,), _getitem(k, 0))
    if tuple(get_aval(k).shape) != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    dt = get_aval(p).dtype
    grid = (_getitem(arange(_len(p) + m, dtype=dt), None)
            - _getitem(arange(m, dtype=dt), (slice(None), None)))
    coeff = _getitem(prod(maximum(1, grid), axis=0), slice(None, None, -1))
    return true_divide(concatenate((p, k)), coeff)


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (``jnp.poly``): the roots
    convolved in, one ``[1, -r]`` at a time. A square matrix (its eigenvalues' polynomial)
    needs complex ``eigvals``, which minixla lacks: ``NotImplementedError``."""
    z, = _promote_inexact(_arr(seq_of_zeros))
    z = atleast_1d(z)
    sh = tuple(get_aval(z).shape)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        raise NotImplementedError("jnp.poly of a square matrix needs complex eigvals, which minixla "
                                  "does not support")
    if len(sh) != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    dt = get_aval(z).dtype
    if sh[0] == 0:
        return ones((), dtype=dt)
    a = ones((1,), dtype=dt)
    for i in range(sh[0]):
        a = convolve(a, concatenate([ones((1,), dt), negative(_getitem(z, slice(i, i + 1)))]), mode="full")
    return a
