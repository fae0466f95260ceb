"""Tutorial 14's exercise: conv with folded weights, compiled by minixla, equals conv + batch
norm computed by JAX eager."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.testing import eager_reference
from _exercise import exercise_module

DN = ("NHWC", "HWIO", "NHWC")


def conv_bias_relu(x, w, b, np_=mnp, lax=minixla.lax):
    return np_.maximum(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN) + b, 0.0)


def conv_bn_relu(x, w, b, gamma, beta, mean, var, eps):
    z = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN) + b
    return jnp.maximum(gamma * (z - mean) / jnp.sqrt(var + eps) + beta, 0.0)


@pytest.mark.parametrize("c_in,c_out,eps", [(1, 16, 1e-5), (16, 32, 1e-3), (3, 5, 0.1)])
def test_folded_conv_matches_conv_then_batchnorm(c_in, c_out, eps, rng):
    fold = exercise_module("ch14_fold_batchnorm").fold_batchnorm
    x = rng.standard_normal((4, 8, 8, c_in)).astype(np.float32)
    w = rng.standard_normal((3, 3, c_in, c_out)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32)
    gamma = rng.uniform(0.5, 2.0, c_out).astype(np.float32)
    beta = rng.standard_normal(c_out).astype(np.float32)
    mean = rng.standard_normal(c_out).astype(np.float32)
    var = rng.uniform(0.1, 3.0, c_out).astype(np.float32)
    w2, b2 = fold(w, b, gamma, beta, mean, var, eps)
    assert np.asarray(w2).shape == w.shape and np.asarray(b2).shape == b.shape
    assert np.asarray(w2).dtype == np.float32 and np.asarray(b2).dtype == np.float32
    want = np.asarray(eager_reference(conv_bn_relu, x, w, b, gamma, beta, mean, var, np.float32(eps), backend="llvm"))
    compiled = minixla.jit(conv_bias_relu).lower(x, w2, b2).compile()
    assert [k["kind"] for k in compiled.kernels()] == ["kOutput"]  # one Conv+Bias+ReLU kernel
    np.testing.assert_allclose(compiled(x, w2, b2), want, rtol=1e-4, atol=1e-4)
