"""Polynomials as coefficient arrays, highest power first (``jax.numpy``'s, from the same ops in
the same order): ``polyadd``, ``polysub``, ``polymul``, ``polyder``, ``polyint``, ``poly``, ``polydiv``,
``polyfit``.
Mirrors ``jax/_src/numpy/polynomial.py`` (``polyval`` is in ``sequences``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _promote_dtypes, _promote_inexact
from minixla.numpy.creation import arange, asarray, full, ones, zeros
from minixla.numpy.manipulation import atleast_1d, concatenate, transpose
from minixla.numpy.elementwise import maximum, negative, sqrt, true_divide
from minixla.numpy.reductions import prod, sum as _sum
from minixla.numpy.indexing import _IndexUpdateHelper, _getitem
from minixla.numpy.sequences import convolve
from minixla.numpy.editing import _concrete, trim_zeros
from minixla.numpy.matrices import _static_int

__all__ = ["polyadd", "polysub", "polymul", "polyder", "polyint", "poly", "polydiv", "polyfit"]


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


def polydiv(u, v, *, trim_leading_zeros=False):
    """The quotient and remainder of ``u / v`` as polynomials (``jnp.polydiv``): long division,
    one leading coefficient at a time (each step subtracts ``(u[k] / v[0]) * v`` from ``u[k:k +
    len(v)]``); both in the promoted inexact dtype, the quotient of length ``max(len(u) -
    len(v) + 1, 1)`` and the remainder of ``len(u)`` (leading entries near zero, below
    ``sqrt(eps)``, dropped with ``trim_leading_zeros``, which needs concrete inputs)."""
    u, v = _promote_inexact(_arr(u), _arr(v))
    m, n = _len(u) - 1, _len(v) - 1
    dt = get_aval(u).dtype
    inv_lead = true_divide(ones((), dt), _getitem(v, 0))
    q = zeros(max(m - n + 1, 1), dtype=dt)
    for k in range(m - n + 1):
        d = inv_lead * _getitem(u, k)
        q = _IndexUpdateHelper(q)[k].set(d)
        u = _IndexUpdateHelper(u)[k:k + n + 1].add(negative(d) * v)
    if trim_leading_zeros:
        values = _concrete(u, "Error arose in the `u` argument of polydiv()")
        tol = float(np.sqrt(ml_dtypes.finfo(values.dtype).eps))
        big = np.flatnonzero(np.abs(values) >= tol)
        u = _getitem(u, slice(int(big[0]) if big.size else values.shape[0], None))
    return q, u


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (``jnp.polyfit``): the
    Vandermonde matrix of ``x`` (rows weighted by ``w``, columns scaled to unit norm) solved with
    ``linalg.lstsq``; coefficients highest power first, shape ``(deg + 1,)`` or ``(deg + 1, k)``
    for a 2-d ``y``. ``full`` adds ``(residuals, rank, singular values, rcond)``; ``cov`` adds the
    coefficients' covariance (``'unscaled'``: without the residual factor). Raises JAX's
    ``ValueError``/``TypeError`` for ``deg < 0`` and for shapes that do not fit."""
    from minixla.numpy import linalg
    from minixla.numpy.matrices import vander
    from minixla.numpy.contractions import dot, outer
    x, y = _arr(x), _arr(y)
    deg = _static_int(deg, "deg must be int")
    order = deg + 1
    sx, sy = tuple(get_aval(x).shape), tuple(get_aval(y).shape)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if len(sx) != 1:
        raise TypeError("expected 1D vector for x")
    if sx[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if not 1 <= len(sy) <= 2:
        raise TypeError("expected 1D or 2D array for y")
    if sx[0] != sy[0]:
        raise TypeError("expected x and y to have same length")
    x, = _promote_inexact(x)
    if rcond is None:
        rcond = sx[0] * float(ml_dtypes.finfo(get_aval(x).dtype).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w, = _promote_inexact(_arr(w))
        if get_aval(w).ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if get_aval(w).shape[0] != sy[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * _getitem(w, (slice(None), None))
        rhs = rhs * (_getitem(w, (slice(None), None)) if len(sy) == 2 else w)
    scale = sqrt(_sum(lhs * lhs, axis=0))
    lhs = lhs / _getitem(scale, (None, slice(None)))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, float(rcond))
    c = c / (_getitem(scale, (slice(None), None)) if len(sy) == 2 else scale)
    if full:
        return c, resids, rank, s, asarray(float(rcond), dtype=get_aval(x).dtype)
    if not cov:
        return c
    base = linalg.inv(dot(transpose(lhs), lhs)) / outer(scale, scale)
    if cov == "unscaled":
        fac = asarray(1.0, dtype=get_aval(base).dtype)
    else:
        if sx[0] <= order:
            raise ValueError("the number of data points must exceed order to scale the covariance matrix")
        fac = resids / (sx[0] - order)
    if len(sy) == 1:
        return c, base * _getitem(atleast_1d(fac), (None,))
    return c, _getitem(base, (slice(None), slice(None), None)) * _getitem(atleast_1d(fac), (None, None))
