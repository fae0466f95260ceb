"""The special functions (``minixla.lax.special``, issue 14) against JAX eager: lgamma, digamma,
polygamma, zeta, bessel_i0e/i1e, the incomplete gamma family and betainc.

Each backend compiles one program over a vector of sweep points per dtype (0, the poles at the
negative integers, negative non-integers, tiny and huge values, NaN, +-inf): the JAX hand-off
gives JAX eager's bits (the expansions are XLA's, with its contractions and rewrites made
explicit); LLVM gives the same NaN/inf pattern and values within the ulp bounds below (from
minixla's own log/exp/sin/pow). The deep sweep (thousands of points per function) is opt-in:
``MINIXLA_DEEP_SPECIAL=1``.
"""
import os

import jax
import numpy as np
import pytest

import minixla
from minixla import lax
from minixla.core import errors

BACKENDS = ("jax", "llvm")

#: the sweep: poles, negative non-integers, tiny, large, NaN, +-inf (float32-representable)
X = np.array([0.0, -0.0, 1e-30, 1e-6, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 7.25, 8.0, 8.5, 12.0, 33.0,
              150.0, 1e4, 3e38, -1.0, -2.0, -3.0, -0.5, -1.5, -2.75, -7.3, -15.6, -8.5, -1e-6,
              np.inf, -np.inf, np.nan])
A = np.array([0.0, 1e-6, 0.1, 0.5, 1.0, 1.0, 2.5, 3.0, 7.0, 10.0, 30.0, 2.0, -1.0, np.nan, np.inf, 5.0])
B = np.array([0.0, 1e-3, 0.2, 0.5, 2.0, 0.5, 1.0, 9.0, 4.0, 25.0, 30.0, np.inf, 2.0, 1.0, 3.0, np.nan])
N = np.array([0.0, 1.0, 2.0, 3.0, 1.0, 4.0, 0.5, -1.0] * 4)

#: (measured) max ulp of LLVM against JAX eager over the deep sweep, float32 / float64
LLVM_ULP = {"lgamma": (8, 8), "digamma": (64, 64), "bessel_i0e": (4, 4), "bessel_i1e": (4, 4),
            "polygamma": (64, 64), "zeta": (64, 64)}


def _unary(x, n):
    return (lax.lgamma(x), lax.digamma(x), lax.bessel_i0e(x), lax.bessel_i1e(x),
            lax.polygamma(n, x), lax.zeta(n + 1.5, lax.abs(x) + 0.25))


def _jax_unary(x, n):
    return (jax.lax.lgamma(x), jax.lax.digamma(x), jax.lax.bessel_i0e(x), jax.lax.bessel_i1e(x),
            jax.lax.polygamma(n, x), jax.lax.zeta(n + 1.5, jax.lax.abs(x) + 0.25))


def _incomplete(a, b):
    x = lax.div(b, b + 1.0)
    return (lax.igamma(a, b), lax.igammac(a, b), lax.igamma_grad_a(a, b), lax.random_gamma_grad(a, b),
            lax.betainc(a, b, x))


def _jax_incomplete(a, b):
    x = jax.lax.div(b, b + 1.0)
    return (jax.lax.igamma(a, b), jax.lax.igammac(a, b), jax.lax.igamma_grad_a(a, b),
            jax.lax.random_gamma_grad(a, b), jax.lax.betainc(a, b, x))


def ulp_distance(got, want):
    """Elementwise distance in units in the last place; NaN vs NaN is 0, NaN vs a number is huge."""
    got, want = np.asarray(got), np.asarray(want)
    it = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    def ordered(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, np.iinfo(it).min - i, i)
    d = np.abs(ordered(got) - ordered(want))
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    return np.where(nan_g & nan_w, 0, np.where(nan_g != nan_w, np.iinfo(np.int64).max, d))


def _check(names, got, want, backend, dtype, bounds=None):
    for name, g, w in zip(names, got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, name
        # special values exactly JAX's: the NaN and inf pattern (and the sign of an inf)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{name} NaN pattern")
        np.testing.assert_array_equal(np.where(np.isinf(w), w, 0), np.where(np.isinf(w), g, 0),
                                      err_msg=f"{name} inf pattern")
        if backend == "jax" and bounds is None:
            np.testing.assert_array_equal(g, w, err_msg=f"{name}: the hand-off is JAX eager's bits")
        else:
            limit = (bounds or LLVM_ULP)[name][dtype == np.float64]
            d = ulp_distance(g, w)
            assert d.max() <= limit, (name, dtype, d.max(), g[d.argmax()], w[d.argmax()])


UNARY = ("lgamma", "digamma", "bessel_i0e", "bessel_i1e", "polygamma", "zeta")


@pytest.mark.parametrize("backend", BACKENDS)
def test_gamma_zeta_bessel_match_jax_eager(backend):
    x, n = X.astype(np.float32), N.astype(np.float32)
    got = minixla.jit(_unary, backend=backend)(x, n)
    _check(UNARY, got, _jax_unary(x, n), backend, np.float32)


def test_gamma_zeta_bessel_float64_on_the_handoff(x64):
    x, n = X.astype(np.float64), N.astype(np.float64)
    got = minixla.jit(_unary, backend="jax")(x, n)
    _check(UNARY, got, _jax_unary(x, n), "jax", np.float64)


INCOMPLETE = ("igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "betainc")
#: relative error bounds (in ulp) of the incomplete gamma/beta family: iterative, and each
#: iteration's log/exp/divisions round as minixla's own approximations do (LLVM) or as XLA
#: fuses them (the hand-off)
INCOMPLETE_ULP = {"igamma": (64, 64), "igammac": (64, 64), "igamma_grad_a": (256, 256),
                  "random_gamma_grad": (256, 256), "betainc": (256, 256)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_incomplete_gamma_and_beta_match_jax_eager(backend):
    a, b = A.astype(np.float32), B.astype(np.float32)
    got = minixla.jit(_incomplete, backend=backend)(a, b)
    _check(INCOMPLETE, got, _jax_incomplete(a, b), backend, np.float32, INCOMPLETE_ULP)


def test_eager_is_jax_and_float16_computes_in_float32():
    x = X.astype(np.float32)
    np.testing.assert_array_equal(lax.lgamma(x), jax.lax.lgamma(x))
    np.testing.assert_array_equal(lax.betainc(A, B, np.full(16, 0.5)), jax.lax.betainc(A, B, np.full(16, 0.5)))
    h = np.array([0.5, 3.0, -2.5, 20.0], np.float16)
    got = minixla.jit(lax.lgamma, backend="jax")(h)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, jax.lax.lgamma(h))


def test_dtype_errors_are_jaxs():
    with pytest.raises(TypeError, match="lgamma does not accept dtype int32"):
        lax.lgamma(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError):
        jax.lax.lgamma(np.arange(3, dtype=np.int32))
    f32, f16 = np.ones(3, np.float32), np.ones(3, np.float16)
    with pytest.raises(TypeError, match="igamma requires arguments to have the same dtypes"):
        jax.make_jaxpr(jax.lax.igamma)(f32, f16)
    with pytest.raises(errors.DTypeError, match="igamma requires arguments to have the same dtypes"):
        minixla.make_jaxpr(lax.igamma)(f32, f16)
    with pytest.raises(ValueError, match="polygamma gradient with respect to m"):
        minixla.grad(lambda m: lax.polygamma(m, 2.5))(1.0)


def test_derivatives_match_jax_grad():
    """JAX's JVP rules: lgamma' = digamma, digamma' = polygamma(1), igamma via igamma_grad_a
    (in a) and the density (in x), i0e/i1e, betainc in x; grad, jvp and vmap compose."""
    def f(lib, a, x):
        return (lib.lgamma(x) + lib.digamma(x) + lib.igamma(a, x) + lib.igammac(x, a)
                + lib.bessel_i0e(x - 2.0) + lib.bessel_i1e(x - 2.0) + lib.polygamma(2.0, x)
                + lib.betainc(a, 2.0, x * 0.25))
    a, x = np.float32(1.7), np.float32(2.3)
    want = jax.grad(lambda a, x: f(jax.lax, a, x), argnums=1)(a, x)
    np.testing.assert_allclose(minixla.grad(lambda a, x: f(lax, a, x), argnums=1)(a, x), want, rtol=2e-5)
    # compiled: the tangent's igamma/digamma lower like the primal's
    g = minixla.jit(minixla.grad(lambda a, x: lax.lgamma(x) + lax.igamma(a, x), argnums=1), backend="llvm")
    np.testing.assert_allclose(g(a, x), jax.grad(lambda a, x: jax.lax.lgamma(x) + jax.lax.igamma(a, x),
                                                 argnums=1)(a, x), rtol=2e-5)
    # in a (igamma_grad_a; betainc is not differentiable in a: only its x part here)
    got_a = minixla.grad(lambda a: lax.igamma(a, x) + lax.igammac(x, a))(a)
    want_a = jax.grad(lambda a: jax.lax.igamma(a, x) + jax.lax.igammac(x, a))(a)
    np.testing.assert_allclose(got_a, want_a, rtol=2e-5)
    xs = np.array([0.5, 1.5, 4.0], np.float32)
    np.testing.assert_array_equal(minixla.vmap(lambda v: lax.igamma(v, 2.0))(xs), jax.lax.igamma(xs, np.float32(2.0)))


@pytest.mark.skipif(not os.environ.get("MINIXLA_DEEP_SPECIAL"), reason="deep sweep: MINIXLA_DEEP_SPECIAL=1")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_deep_sweep(backend, dtype, x64):
    r = np.random.RandomState(0)
    x = np.concatenate([X, r.uniform(-20, 20, 4000), np.exp(r.uniform(-30, 30, 4000)) * r.choice([-1, 1], 4000),
                        np.arange(-10, 11) + 0.5]).astype(dtype)
    n = np.resize(N, x.shape).astype(dtype)
    got = minixla.jit(_unary, backend=backend)(x, n)
    _check(UNARY, got, _jax_unary(x, n), backend, dtype)


# ---------------------------------------------------------------------------------------
# minixla.random's gamma family and minixla.scipy.special.

def test_random_gamma_family_is_jax_random_bit_for_bit():
    """Eagerly (``random_gamma``'s eager implementation is JAX's; beta/dirichlet/chisquare/t are
    minixla ops around it), with the keys split as JAX splits them; the gradient in ``a`` is
    JAX's implicit reparameterization through ``random_gamma_grad``."""
    import minixla.random as mr
    key = jax.random.PRNGKey(3)
    k = np.asarray(jax.random.key_data(key))
    a = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    b = np.array([1.5, 0.2, 3.0, 1.0], np.float32)
    pairs = [(mr.gamma(k, a), jax.random.gamma(key, a)), (mr.beta(k, a, b), jax.random.beta(key, a, b))]
    if os.environ.get("MINIXLA_DEEP_SPECIAL"):  # (each jax.random function is a compile of its own)
        pairs += [(mr.loggamma(k, a, (2, 4)), jax.random.loggamma(key, a, (2, 4))),
                  (mr.chisquare(k, b), jax.random.chisquare(key, b)), (mr.t(k, b, (4,)), jax.random.t(key, b, (4,)))]
        # (dirichlet's softmax: minixla's runs op by op, JAX's jitted inside dirichlet: 1 ulp apart)
        np.testing.assert_allclose(mr.dirichlet(k, a, (2,)), jax.random.dirichlet(key, a, (2,)), rtol=2.5e-7)
    for got, want in pairs:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got = minixla.grad(lambda a: minixla.numpy.sum(mr.gamma(k, a)))(a)
    np.testing.assert_allclose(got, jax.grad(lambda a: jax.random.gamma(key, a).sum())(a), rtol=1e-6)
    with pytest.raises(ValueError, match="must be a float dtype"):
        mr.gamma(k, a, dtype=np.int32)


def test_jax_program_with_gammaln_and_random_gamma_imports():
    """A JAX program written with jax.scipy.special and jax.random.gamma, imported
    (``frontend="jax"``) and compiled on the hand-off: ``jax.jit``'s bits."""
    import jax.scipy.special as jss

    def f(key, a):
        g = jax.random.gamma(key, a)
        return jss.gammaln(a) + jss.digamma(g) + jss.gammainc(a, g), jss.xlogy(a, g) - jss.i0e(g)
    key, a = jax.random.PRNGKey(0), np.array([0.5, 1.5, 4.0, 9.0], np.float32)
    got = minixla.jit(f, frontend="jax", backend="jax")(key, a)
    for g, w in zip(got, jax.jit(f)(key, a)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_scipy_special_is_jax_scipy_special():
    import jax.scipy.special as jss
    from minixla.scipy import special as ms
    x = np.array([0.5, 2.5, -1.5, 7.0, 0.0, -3.0, np.inf, np.nan], np.float32)
    for name in ("gammaln", "digamma", "i0", "i0e", "i1", "i1e", "erf", "erfc", "expit", "entr", "logit", "erfinv"):
        np.testing.assert_array_equal(getattr(ms, name)(x), getattr(jss, name)(x), err_msg=name)
    for name in ("gammainc", "gammaincc", "xlogy", "xlog1py", "zeta"):
        np.testing.assert_array_equal(getattr(ms, name)(x + 2, np.abs(x)), getattr(jss, name)(x + 2, np.abs(x)),
                                      err_msg=name)
    np.testing.assert_array_equal(ms.polygamma(np.arange(8) % 4, x), jss.polygamma(np.arange(8) % 4, x))
    np.testing.assert_array_equal(ms.betainc(2.0, 3.0, x / 8), jss.betainc(2.0, 3.0, x / 8))
    np.testing.assert_array_equal(ms.gammaln(3), jss.gammaln(3))  # (an int: the default float)
    with pytest.raises(ValueError, match="must be of integer type"):
        ms.polygamma(1.0, x)


@pytest.mark.skipif(not os.environ.get("MINIXLA_DEEP_SPECIAL"), reason="slow compile: MINIXLA_DEEP_SPECIAL=1")
@pytest.mark.parametrize("backend", BACKENDS)
def test_random_gamma_compiled(backend):
    import minixla.random as mr
    key = jax.random.PRNGKey(0)
    a = np.array([0.3, 1.0, 2.5, 7.0, 0.05, 30.0], np.float32)
    k = np.asarray(jax.random.key_data(key))
    got = minixla.jit(lambda k, a: (mr.gamma(k, a), mr.loggamma(k, a)), backend=backend)(k, a)
    np.testing.assert_array_equal(got[0], jax.random.gamma(key, a))
    np.testing.assert_array_equal(got[1], jax.random.loggamma(key, a))
