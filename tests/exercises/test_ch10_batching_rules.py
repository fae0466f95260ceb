"""Tutorial 10's exercise: the batching rules of ``reduce_sum`` (without moving the batch axis)
and ``concatenate``, installed in minixla's table, give ``jax.vmap``'s results."""
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


@pytest.mark.parametrize("shape,in_axis,axes", [((4, 3), 0, (0,)), ((3, 4), 1, (0,)), ((3, 4), 0, (0,)),
                                                ((2, 5, 3), 1, (0, 1)), ((2, 3, 5), 2, (1,)),
                                                ((5, 2, 3), 0, (0, 1))])
def test_reduce_sum_batch_matches_jax(shape, in_axis, axes, rng):
    calls = []
    x = rng.standard_normal(shape).astype(np.float32)
    f = lambda x: lax.reduce_sum(x, axes)  # noqa: E731
    with using_rule("batching", lax.reduce_sum_p, _counted(exercise_module("ch10_batching_rules").reduce_sum_batch,
                                                           calls)):
        got = minixla.vmap(f, in_axes=in_axis)(x)
        got_out1 = minixla.vmap(f, in_axes=in_axis, out_axes=-1)(x)
        jaxpr = minixla.make_jaxpr(minixla.vmap(f, in_axes=in_axis))(x)
    assert calls, "the rule was not used"
    want = jax.vmap(lambda x: jax.lax.reduce_sum(x, axes), in_axes=in_axis)(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_out1, jax.vmap(lambda x: jax.lax.reduce_sum(x, axes), in_axes=in_axis,
                                                  out_axes=-1)(x), rtol=1e-5, atol=1e-6)
    # vmap's out_axes=0 may move the result's batch axis afterwards; the operand is not moved
    assert jaxpr.jaxpr.eqns[0].primitive.name == "reduce_sum", "the rule moved the batch axis"


def test_reduce_sum_batch_nested_and_jit(rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    f = minixla.vmap(minixla.vmap(lambda v: mnp.sum(v * v), in_axes=1), in_axes=2)
    with using_rule("batching", lax.reduce_sum_p, exercise_module("ch10_batching_rules").reduce_sum_batch):
        got = f(x)
        got_jit = minixla.jit(f)(x)
    want = jax.vmap(jax.vmap(lambda v: jnp.sum(v * v), in_axes=1), in_axes=2)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_jit, want, rtol=1e-5)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, 0), (0, None), (None, 1), (1, 1)])
def test_concatenate_batch_matches_jax(in_axes, rng):
    calls = []
    a = rng.standard_normal((4, 3) if in_axes[0] is not None else (3,)).astype(np.float32)
    b = rng.standard_normal((2, 4) if in_axes[1] == 1 else (4, 2) if in_axes[1] == 0 else (2,)).astype(np.float32)
    if in_axes[0] == 1:
        a = a.T.copy()
    with using_rule("batching", lax.concatenate_p,
                    _counted(exercise_module("ch10_batching_rules").concatenate_batch, calls)):
        got = minixla.vmap(lambda x, y: mnp.concatenate([x, y, x]), in_axes=in_axes)(a, b)
        got_jit = minixla.jit(minixla.vmap(lambda x, y: mnp.concatenate([y, x]), in_axes=in_axes))(a, b)
    assert calls, "the rule was not used"
    want = jax.vmap(lambda x, y: jnp.concatenate([x, y, x]), in_axes=in_axes)(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
    want_jit = jax.vmap(lambda x, y: jnp.concatenate([y, x]), in_axes=in_axes)(a, b)
    np.testing.assert_allclose(got_jit, want_jit, rtol=1e-6)


def test_concatenate_batch_of_matrices(rng):
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 4)).astype(np.float32)
    with using_rule("batching", lax.concatenate_p, exercise_module("ch10_batching_rules").concatenate_batch):
        got = minixla.vmap(lambda x, y: mnp.concatenate([x, y], axis=1), in_axes=(2, None))(a, b)
    want = jax.vmap(lambda x, y: jnp.concatenate([x, y], axis=1), in_axes=(2, None))(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-6)
