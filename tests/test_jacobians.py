"""jacfwd, jacrev, hessian and eval_shape against JAX (pytrees, argnums), eager and jitted."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

from ad_cases import MODES, as_np, assert_tree_close, run


def f(np_, x, y):
    return {"a": np_.sin(x) * y[0], "b": np_.sum(x ** 2) * y}


X = np.linspace(-1, 1, 3).astype(np.float32)
Y = np.array([0.5, 2.0], np.float32)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("mode", MODES)
def test_jacobians_match_jax(jac, mode):
    for argnums in (0, 1, (0, 1)):
        ours = getattr(minixla, jac)(lambda x, y: f(mnp, x, y), argnums=argnums)
        want = as_np(getattr(jax, jac)(lambda x, y: f(jnp, x, y), argnums=argnums)(X, Y))
        assert_tree_close(run(mode, ours, X, Y), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_hessian_and_jacfwd_of_jacrev(mode):
    g = lambda np_: (lambda x: np_.sum(np_.tanh(x) * x[::-1] ** 3))  # noqa: E731
    want = as_np(jax.hessian(g(jnp))(X))
    assert_tree_close(run(mode, minixla.hessian(g(mnp)), X), want, rtol=1e-5, atol=1e-6)
    assert_tree_close(run(mode, minixla.jacfwd(minixla.jacrev(g(mnp))), X), want, rtol=1e-5, atol=1e-6)


def test_eval_shape():
    out = minixla.eval_shape(lambda x, y: f(mnp, x, y), X, Y)
    want = jax.eval_shape(lambda x, y: f(jnp, x, y), X, Y)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(want)
    for o, w in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(want)):
        assert (o.shape, o.dtype) == (w.shape, w.dtype)
    s = minixla.eval_shape(minixla.grad(lambda x: mnp.sum(x * x)), jax.ShapeDtypeStruct((4, 2), np.float32))
    assert (s.shape, s.dtype) == ((4, 2), np.float32)
