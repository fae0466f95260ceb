"""Tutorial 09's exercise: the JVP rule of ``tanh`` and the transpose rule of ``reduce_sum``,
installed in minixla's tables, give JAX's derivatives (first and second order)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.interpreters.rules import using_rule
from _exercise import exercise_module


def _counted(fn, calls):
    def rule(*args, **params):
        calls.append(1)
        return fn(*args, **params)
    return rule


def test_tanh_jvp_matches_jax(rng):
    calls = []
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = rng.standard_normal((3, 4)).astype(np.float32)
    with using_rule("jvp", lax.tanh_p, _counted(exercise_module("ch09_jvp_transpose").tanh_jvp, calls)):
        y, ty = minixla.jvp(mnp.tanh, (x,), (t,))
        g = minixla.grad(lambda x: mnp.sum(mnp.tanh(x) * x))(x)
        g_jit = minixla.jit(minixla.grad(lambda x: mnp.sum(mnp.tanh(x) * x)))(x)
    assert calls, "the rule was not used"
    want_y, want_ty = jax.jvp(jnp.tanh, (x,), (t,))
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_allclose(ty, want_ty, rtol=1e-5, atol=1e-6)
    want_g = jax.grad(lambda x: jnp.sum(jnp.tanh(x) * x))(x)
    np.testing.assert_allclose(g, want_g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_jit, want_g, rtol=1e-5, atol=1e-6)


def test_tanh_jvp_second_order_float64(x64):
    xs = np.linspace(-3, 3, 13)
    with using_rule("jvp", lax.tanh_p, exercise_module("ch09_jvp_transpose").tanh_jvp):
        d2 = minixla.grad(lambda x: mnp.sum(minixla.grad(lambda x: mnp.sum(mnp.tanh(x)))(x)))(xs)
    assert d2.dtype == np.float64
    np.testing.assert_allclose(d2, -2 * np.tanh(xs) / np.cosh(xs) ** 2, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape,axes", [((5,), (0,)), ((3, 4), (1,)), ((3, 4), (0,)), ((2, 3, 4), (0, 2)),
                                        ((2, 3, 4), (0, 1, 2)), ((2, 1, 3), (1,))])
def test_reduce_sum_transpose_matches_jax(shape, axes, rng):
    calls = []
    x = rng.standard_normal(shape).astype(np.float32)
    ct = rng.standard_normal(np.sum(x, axis=axes).shape).astype(np.float32)
    rule = _counted(exercise_module("ch09_jvp_transpose").reduce_sum_transpose, calls)
    with using_rule("transpose", lax.reduce_sum_p, rule):
        _, pullback = minixla.vjp(lambda x: lax.reduce_sum(x, axes), x)
        (got,) = pullback(ct)
        (got_t,) = minixla.linear_transpose(lambda x: lax.reduce_sum(x, axes), x)(ct)
        g = minixla.grad(lambda x: mnp.sum(mnp.sin(lax.reduce_sum(x * x, axes))))(x)
    assert calls, "the rule was not used"
    _, jax_pullback = jax.vjp(lambda x: jax.lax.reduce_sum(x, axes), x)
    (want,) = jax_pullback(ct)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_t, want, rtol=1e-6)
    np.testing.assert_allclose(g, jax.grad(lambda x: jnp.sum(jnp.sin(jnp.sum(x * x, axis=axes))))(x),
                               rtol=1e-5, atol=1e-6)
