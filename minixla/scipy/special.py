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
from minixla.interpreters.custom_derivatives import custom_jvp
from minixla.interpreters.api import jvp as _jvp
from minixla.nn import logsumexp  # noqa: F401 (jax.scipy.special.logsumexp is jax.nn's)
from minixla.numpy.promotion import _promote_inexact


def _c(x, v):
    return np.asarray(v, get_aval(x).dtype)


def _custom_jvp(name):
    """``custom_jvp`` of the decorated function, named ``name`` in a jaxpr as JAX's is."""
    def wrap(fun):
        fun.__name__ = fun.__qualname__ = name
        return custom_jvp(fun)
    return wrap


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
    """The Hurwitz zeta function ``sum_k (q + k)^-x`` (``jax.scipy.special.zeta``): ``x``, ``q``
    promoted to one inexact dtype; the Riemann zeta (``q=None``) is ``NotImplementedError``, as
    in JAX. Differentiable in both arguments, as JAX's ``custom_jvp``: the JVP (primal and
    tangent) is that of the Euler-Maclaurin series (``_zeta_series_expansion``), since ``lax.zeta``
    itself has no derivative."""
    if q is None:
        raise NotImplementedError(_RIEMANN)
    return _zeta(x, q)


_RIEMANN = "Riemann zeta function not implemented; pass q != None to compute the Hurwitz Zeta function."


@_custom_jvp("zeta")
def _zeta(x, q):
    x, q = _promote_inexact(x, q)
    return lax.zeta(x, q)


def _bernoulli_coefs(count):
    """``(2k)! / B_2k`` for ``k = 1..count`` (B the Bernoulli numbers), as float64: the
    denominators of the Euler-Maclaurin tail's terms (12, -720, 30240, ...)."""
    from fractions import Fraction
    from math import comb, factorial
    b = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        b.append(-sum(comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return np.array([float(factorial(2 * k) / b[2 * k]) for k in range(1, count + 1)])


_BERNOULLI_COEFS = _bernoulli_coefs(16)


def _zeta_series_expansion(x, q):
    """``zeta(s, a)`` by Euler-Maclaurin summation with ``N = M`` terms (8 in float32, 16
    otherwise; Johansson 2015, eq. 5), written with differentiable ops in JAX's order so its
    JVP is JAX's: ``sum_{k<N} (a+k)^-s + (a+N)^(1-s)/(s-1) + (a+N)^-s (1/2 + sum_j T_j / c_j)``,
    ``T`` the even prefix products of ``(s+m)/(a+N)`` (clipped at the dtype's max)."""
    s, a = _promote_inexact(x, q)
    dt = get_aval(a).dtype
    n = 8 if dt == np.float32 else 16
    N = np.asarray(n, dt)
    one = np.asarray(1, dt)
    s_, a_ = mnp.expand_dims(s, -1), mnp.expand_dims(a, -1)
    nd = get_aval(a).ndim
    k = np.arange(n, dtype=dt).reshape((1,) * nd + (n,))
    S = mnp.sum((a_ + k) ** -s_, -1)
    integral = lax.div((a + N) ** (one - s), s - one)
    T0 = (a + N) ** -s
    m = np.arange(2 * n, dtype=dt).reshape((1,) * get_aval(s).ndim + (2 * n,))
    s_over_a = (s_ + m) / (a_ + N)
    T1 = mnp.cumprod(s_over_a, -1)[..., ::2]
    T1 = mnp.clip(T1, max=np.finfo(dt).max)
    coefs = np.asarray(_BERNOULLI_COEFS[:get_aval(T1).shape[-1]], dt).reshape((1,) * nd + (-1,))
    T1 = T1 / coefs
    T = T0 * (np.asarray(0.5, dt) + T1.sum(-1))
    return S + integral + T


_zeta.defjvp(lambda primals, tangents: _jvp(_zeta_series_expansion, primals, tangents))


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
    """``log(x / (1 - x))``, the inverse of ``expit`` (``jax.scipy.special.logit``). Its
    derivative is JAX's ``custom_jvp``, ``g / (x (1 - x))``: ``inf`` at 0 and 1, ``-0`` at ``+-inf``."""
    return _logit(x)


@_custom_jvp("logit")
def _logit(x):
    x, = _promote_inexact(x)
    return lax.log(lax.div(x, lax.sub(_c(x, 1), x)))


_logit.defjvps(lambda g, ans, x: lax.div(g, lax.mul(x, lax.sub(_c(x, 1), x))))


def xlogy(x, y):
    """``x log y``, 0 where ``x = 0`` (unless ``y`` is NaN), as ``jax.scipy.special.xlogy``.
    Its derivative is JAX's ``custom_jvp``, ``dx log y + dy x / y`` (so ``d/dx`` at ``x = 0`` is
    ``log y``, and a zero tangent still multiplies: ``d/dy`` at ``y = 0`` is NaN)."""
    return _xlogy(x, y)


@_custom_jvp("xlogy")
def _xlogy(x, y):
    x, y = _promote_inexact(x, y)
    ok = mnp.logical_or(mnp.not_equal(x, 0.), mnp.isnan(y))
    return mnp.where(ok, mnp.multiply(x, mnp.log(y)), mnp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    result = _xlogy(x, y)
    return result, (x_dot * lax.log(y) + y_dot * x / y).astype(get_aval(result).dtype)


def xlog1py(x, y):
    """``x log1p(y)``, 0 where ``x = 0`` (unless ``y`` is NaN), as ``jax.scipy.special.xlog1py``;
    derivative JAX's ``custom_jvp``, ``dx log1p(y) + dy x / (1 + y)``."""
    return _xlog1py(x, y)


@_custom_jvp("xlog1py")
def _xlog1py(x, y):
    x, y = _promote_inexact(x, y)
    ok = mnp.logical_or(mnp.not_equal(x, 0.), mnp.isnan(y))
    return mnp.where(ok, mnp.multiply(x, mnp.log1p(y)), mnp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    result = _xlog1py(x, y)
    return result, (x_dot * lax.log1p(y) + y_dot * x / (1 + y)).astype(get_aval(result).dtype)


@_custom_jvp("_xlogx")
def _xlogx(x):
    return _xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return _xlogx(x), x_dot * (lax.log(x) + 1)


def entr(x):
    """The elementwise entropy ``-x log x`` (0 at 0, ``-inf`` below 0), as
    ``jax.scipy.special.entr``: its derivative is ``-(log x + 1)`` (JAX's ``custom_jvp`` of
    ``x log x``), so ``inf`` at 0 and ``-inf`` at ``+inf``."""
    x, = _promote_inexact(x)
    return lax.select(lax.lt(x, _c(x, 0)), lax.full_like(x, -np.inf), lax.neg(_xlogx(x)))


errors.wrap_public_functions(globals())
