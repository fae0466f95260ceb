"""Derivatives of the shapes the grad fuzzer (``python -m minixla.fuzz --mode grad``) reported,
against JAX: ``dynamic_update_slice`` with an update that has a size-0 dimension (the start
clamp then allows ``start == dim``) after ops whose derivative is infinite at a point (``fmod``
by 0: JAX's zero cotangent times ``-inf`` is NaN, and so must ours be), under ``grad``, ``vjp``
and ``vmap`` with batched starts; eagerly and on both backends."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

from ad_cases import MODES, run

X = np.array([[[1.5, -2.0]]], np.float32)
Y = np.array([[[0.0, 4.0]]], np.float32)
#: starts below 0, at 0, at the dim (allowed for a size-0 update) and past it
STARTS = np.array([[0, 0, 0], [1, 1, 2], [-2, 4, 3], [0, 1, 1]], np.int32)


def _loss(L, np_, sizes):
    def f(a, b, s):
        c = np_.fmod(a, b)
        upd = c[tuple(slice(0, n) for n in sizes)]
        z = L.dynamic_update_slice(c, upd, [s[0], s[1], s[2]])
        return np_.sum(z * np_.arange(1.0, 3.0, dtype=np.float32))
    return f


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sizes", [(1, 0, 2), (0, 1, 1), (1, 1, 2)])
def test_dynamic_update_slice_empty_update_grad_matches_jax(sizes, mode):
    with np.errstate(all="ignore"):
        want = [jax.grad(_loss(jax.lax, jnp, sizes), argnums=(0, 1))(X, Y, s) for s in STARTS]

    def ours(a, b, starts):
        g = minixla.grad(_loss(lax, mnp, sizes), argnums=(0, 1))
        return [g(a, b, starts[k]) for k in range(len(STARTS))]
    got = run(mode, ours, X, Y, STARTS)
    for s, g, w in zip(STARTS, got, want):
        for gi, wi in zip(g, w):
            np.testing.assert_array_equal(np.asarray(gi), np.asarray(wi), err_msg=f"starts {s}")


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_update_slice_empty_update_vjp_and_vmap_match_jax(mode):
    ct = np.array([[[0.25, -3.0]]], np.float32)

    def f(L, np_, vjp, vmap):
        def g(a, b, t, starts):
            dus = lambda a, s: L.dynamic_update_slice(a, np_.fmod(a, b)[:, :0], [s[0], s[1], s[2]])  # noqa: E731
            y, pull = vjp(lambda a: dus(a, starts[2]), a)
            return y, pull(t), vmap(dus, in_axes=(None, 0))(a, starts)
        return g
    with np.errstate(all="ignore"):
        want = f(jax.lax, jnp, jax.vjp, jax.vmap)(X, Y, ct, STARTS)
    got = run(mode, f(lax, mnp, minixla.vjp, minixla.vmap), X, Y, ct, STARTS)
    for gi, wi in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(gi), np.asarray(wi))


@pytest.mark.parametrize("mode", ["eager", "llvm", "jax"])
def test_at_multiply_with_static_unique_index_has_a_gradient(mode):
    # the grad fuzzer (seed 9631): x.at[..., 0].multiply(v) raised "scatter_mul gradients are
    # only implemented if unique_indices=True"; JAX's indexer knows ints and slices select
    # each position once, and so does minixla's now (static positions checked at trace time)
    x = np.arange(10, dtype=np.float32).reshape(1, 2, 5)
    v = np.float32(1.5)

    def f(np_):
        return lambda x, v: (x.at[..., 0].multiply(v) ** 2).sum()
    want = jax.grad(f(jnp), (0, 1))(x, v)
    g = minixla.grad(f(mnp), (0, 1))
    got = g(x, v) if mode == "eager" else minixla.jit(g, backend=mode)(x, v)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(Exception, match="unique_indices"):  # repeated positions: JAX raises too
        minixla.grad(lambda x, v: x.at[np.array([0, 0])].multiply(v).sum(), (0, 1))(x.reshape(-1), v)


@pytest.mark.parametrize("mode", ["eager", "llvm", "jax"])
def test_integer_pow_zero_has_zero_tangent_even_for_a_nan_one(mode):
    # the grad fuzzer (seed 9631): integer_pow(x, 0) of a value whose own tangent is NaN
    # ((-1)**2.5); JAX's JVP is zeros for y = 0, minixla's was g * 0 = NaN
    def f(lx, np_):
        return lambda v: lx.integer_pow(np_.power(v, 2.5), 0)
    x = np.float32(-1.0)
    want = jax.grad(f(jax.lax, jnp))(x)
    g = minixla.grad(f(lax, mnp))
    got = g(x) if mode == "eager" else minixla.jit(g, backend=mode)(x)
    np.testing.assert_array_equal(got, want)
