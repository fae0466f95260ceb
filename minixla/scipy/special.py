"""``minixla.scipy.special``: ``jax.scipy.special``'s functions that the special primitives of
``minixla.lax`` cover, with JAX's definitions: each promotes its arguments to an inexact dtype
(``promote_args_inexact``: integers and bools become the default float) and binds the
primitive, or composes a few ``lax`` ops exactly as JAX writes them (``i0 = exp|x| i0e``,
``logit = log(x / (1 - x))``, ``xlogy = where(x != 0 or isnan(y), x log y, 0)``, ...).
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla import numpy as mnp
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.nn import logsumexp  # noqa: F401 (jax.scipy.special.logsumexp is jax.nn's)
from minixla.numpy.promotion import _promote_inexact


def _c(x, v):
    return np.asarray(v, get_aval(x).dtype)


def gammaln(x):
    """``log |Gamma(x)|`` (``jax.scipy.special.gammaln``; ``lax.lgamma``)."""
    x, = _promote_inexact(x)
    return lax.lgamma(x)


def digamma(x):
    """``psi(x)``, the logarithmic derivative of Gamma (``jax.scipy.special.digamma``)."""
    x, = _promote_inexact(x)
    return lax.digamma(x)


def polygamma(n, x):
    """The ``n``-th derivative of ``digamma`` (``jax.scipy.special.polygamma``): ``n`` must be
    of integer type (``ValueError`` otherwise, as JAX)."""
    n_dtype = get_aval(n).dtype
    if n_dtype.kind not in "iu":
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype {n_dtype}.")
    n, x = _promote_inexact(n, x)
    return lax.polygamma(n, x)


def zeta(x, q=None):
    """The Hurwitz zeta function (``jax.scipy.special.zeta``); the Riemann zeta (``q=None``)
    is ``NotImplementedError``, as in JAX."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute the "
                                  "Hurwitz Zeta function.")
    x, q = _promote_inexact(x, q)
    return lax.zeta(x, q)


def gammainc(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)`` (``lax.igamma``)."""
    a, x = _promote_inexact(a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x)`` (``lax.igammac``)."""
    a, x = _promote_inexact(a, x)
    return lax.igammac(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)`` (``lax.betainc``)."""
    a, b, x = _promote_inexact(a, b, x)
    return lax.betainc(a, b, x)


def i0e(x):
    """``exp(-|x|) I0(x)`` (``lax.bessel_i0e``)."""
    x, = _promote_inexact(x)
    return lax.bessel_i0e(x)


def i0(x):
    """The modified Bessel function ``I0(x) = exp(|x|) i0e(x)``."""
    x, = _promote_inexact(x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1e(x):
    """``exp(-|x|) I1(x)`` (``lax.bessel_i1e``)."""
    x, = _promote_inexact(x)
    return lax.bessel_i1e(x)


def i1(x):
    """The modified Bessel function ``I1(x) = exp(|x|) i1e(x)``."""
    x, = _promote_inexact(x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


def erf(x):
    """The error function (``lax.erf``)."""
    x, = _promote_inexact(x)
    return lax.erf(x)


def erfc(x):
    """``1 - erf(x)`` (``lax.erfc``)."""
    x, = _promote_inexact(x)
    return lax.erfc(x)


def erfinv(x):
    """The inverse error function (``lax.erf_inv``)."""
    x, = _promote_inexact(x)
    return lax.erf_inv(x)


def expit(x):
    """The logistic sigmoid ``1 / (1 + exp(-x))`` (``lax.logistic``)."""
    x, = _promote_inexact(x)
    return lax.logistic(x)


def logit(x):
    """``log(x / (1 - x))``, the inverse of ``expit``."""
    x, = _promote_inexact(x)
    return lax.log(lax.div(x, lax.sub(_c(x, 1), x)))


def xlogy(x, y):
    """``x log y``, 0 where ``x = 0`` (unless ``y`` is NaN), as ``jax.scipy.special.xlogy``.
    (JAX's custom derivative at ``x = 0`` is not reproduced: differentiate where ``x != 0``.)"""
    x, y = _promote_inexact(x, y)
    ok = mnp.logical_or(mnp.not_equal(x, 0.), mnp.isnan(y))
    return mnp.where(ok, mnp.multiply(x, mnp.log(y)), mnp.zeros_like(x))


def xlog1py(x, y):
    """``x log1p(y)``, 0 where ``x = 0`` (unless ``y`` is NaN), as ``jax.scipy.special.xlog1py``."""
    x, y = _promote_inexact(x, y)
    ok = mnp.logical_or(mnp.not_equal(x, 0.), mnp.isnan(y))
    return mnp.where(ok, mnp.multiply(x, mnp.log1p(y)), mnp.zeros_like(x))


def entr(x):
    """The elementwise entropy ``-x log x`` (0 at 0, ``-inf`` below 0)."""
    x, = _promote_inexact(x)
    return lax.select(lax.lt(x, _c(x, 0)), lax.full_like(x, -np.inf), lax.neg(xlogy(x, x)))


errors.wrap_public_functions(globals())
