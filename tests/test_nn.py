"""``minixla.nn`` against ``jax.nn`` on both backends, including NaN/inf/±0 and large |x|."""
import jax
import numpy as np
import pytest

import minixla
import minixla.nn as mnn
from minixla.testing import check_against_jax
from conftest import BACKENDS

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.standard_normal(40) * 4, [np.nan, np.inf, -np.inf, -0.0, 0.0, 30., -30., 100., -100.]]
                   ).astype(np.float32).reshape(7, 7)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


# gelu's tanh form computes 1 + tanh(z) with tanh(z) near -1 for z < -5: the inline tanh is
# within a few ulp of XLA's, which leaves an absolute error of a few 1e-7 there.
@pytest.mark.parametrize("name,atol", [("relu", 0), ("relu6", 0), ("sigmoid", 1e-7), ("silu", 1e-7),
                                       ("log_sigmoid", 1e-7), ("gelu", 1e-6), ("elu", 1e-7), ("selu", 1e-7),
                                       ("softplus", 1e-7), ("leaky_relu", 0), ("hard_tanh", 0),
                                       ("softmax", 1e-7), ("log_softmax", 1e-6), ("logsumexp", 1e-6)])
def test_activation(name, atol, backend):
    check_against_jax(getattr(mnn, name), getattr(jax.nn, name), X, rtol=4e-6 if atol else 0, atol=atol,
                      backends=(backend,))


def test_gelu_exact_softmax_axes_logsumexp_keepdims(backend):
    kw = dict(rtol=4e-6, atol=1e-7, backends=(backend,))
    check_against_jax(lambda a: mnn.gelu(a, approximate=False), lambda a: jax.nn.gelu(a, approximate=False), X, **kw)
    for axis in (0, 1, (0, 1)):
        check_against_jax(lambda a: mnn.softmax(a, axis), lambda a: jax.nn.softmax(a, axis), X, **kw)
        check_against_jax(lambda a: mnn.log_softmax(a, axis), lambda a: jax.nn.log_softmax(a, axis), X,
                          rtol=4e-6, atol=1e-6, backends=(backend,))
    check_against_jax(lambda a: mnn.logsumexp(a, 1, keepdims=True),
                      lambda a: jax.nn.logsumexp(a, 1, keepdims=True), X, **kw)
    check_against_jax(mnn.logsumexp, jax.nn.logsumexp, np.full((3,), -np.inf, np.float32), **kw)
    check_against_jax(lambda a: mnn.elu(a, 0.5), lambda a: jax.nn.elu(a, 0.5), X, **kw)


def test_one_hot(backend):
    kw = dict(rtol=0, atol=0, backends=(backend,))
    check_against_jax(lambda a: mnn.one_hot(a, 5), lambda a: jax.nn.one_hot(a, 5), np.array([0, 3, 7, -1], np.int32),
                      **kw)
    check_against_jax(lambda a: mnn.one_hot(a, 3, axis=0, dtype=np.int32),
                      lambda a: jax.nn.one_hot(a, 3, axis=0, dtype=np.int32), np.array([[0, 2], [1, 1]], np.int32),
                      **kw)


def test_softmax_gradient_stops_at_the_max_as_jax():
    # Fuzzer find (grad mode): JAX 0.10's softmax (jax_softmax_custom_jvp off) subtracts
    # stop_gradient(max); minixla differentiated through the max, whose cancelling terms rounded
    # to -1e-8 where JAX's gradient is exactly 0.
    x = np.array([[1, -0.25, 20], [88, 4, 1]], np.float32)
    c = np.array([[0.5, -2, -1.5], [-1.25, 2.25, -1]], np.float32)
    want = jax.vjp(lambda x: jax.nn.softmax(x, axis=1), x)[1](c)[0]
    got = minixla.jit(lambda x, c: minixla.vjp(lambda x: minixla.nn.softmax(x, axis=1), x)[1](c)[0])(x, c)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
