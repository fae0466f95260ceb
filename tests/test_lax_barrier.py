"""``lax.optimization_barrier`` (issue 14): the identity that no pass optimizes across, on both
backends, under grad/vmap and through the JAX front end, against JAX."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import minixla as mx
import minixla.numpy as mnp
from minixla import lax

BACKENDS = ("llvm", "jax")


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_pytree_and_weak_types(backend):
    def f(lib, np_):
        def g(x, y):
            a, (b, c) = lib.optimization_barrier((x * 2.0, (y, 3)))
            return np_.sin(a) + b, a, c
        return g
    x, y = np.linspace(-1, 1, 6, dtype=np.float32), np.float32(0.5)
    want = jax.jit(f(jax.lax, jnp))(x, y)
    _same(mx.jit(f(lax, mnp), backend=backend)(x, y), want)
    _same(mx.jit(f(jax.lax, jnp), backend=backend, frontend="jax")(x, y), want)


def test_eager_and_jaxpr():
    x = np.arange(3, dtype=np.int32)
    got, want = lax.optimization_barrier([x, 2]), jax.lax.optimization_barrier([x, 2])
    _same(got, want)
    assert str(mx.make_jaxpr(lambda x: lax.optimization_barrier((x, x)))(x)).count("optimization_barrier") == 1


def test_cse_and_fusion_do_not_cross_it():
    # sin(x) and sin(barrier(x)) are two values: CSE keeps both sines, and the multiply does
    # not fuse with what reads the barrier's result (the barrier is removed only after the passes)
    def f(lib, np_):
        return lambda x: (np_.sin(x) + np_.sin(lib.optimization_barrier(x)), lib.optimization_barrier(x * 3.0) + 1.0)
    x = np.linspace(0, 1, 8, dtype=np.float32)
    compiled = mx.jit(f(lax, mnp)).lower(x).compile()
    text = compiled.as_text()
    assert text.count("sine(") == 2 and "opt-barrier" not in text
    plain = mx.jit(lambda x: (mnp.sin(x) + mnp.sin(x), x * 3.0 + 1.0)).lower(x).compile().as_text()
    assert plain.count("sine(") == 1 and text.count("fusion(") > plain.count("fusion(")
    jax_text = mx.jit(f(lax, mnp), backend="jax").lower(x).compile().as_text()
    assert jax_text.count("opt-barrier(") == 2
    for backend in BACKENDS:
        _same(mx.jit(f(lax, mnp), backend=backend)(x), f(jax.lax, jnp)(x))  # (JAX eager: jax.jit contracts x * 3 + 1 to an fma)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_vmap_match_jax(backend):
    def loss(lib, np_):
        return lambda w, x: np_.sum(np_.tanh(lib.optimization_barrier(w * x)) ** 2)
    w, x = np.float32(0.7), np.linspace(-2, 2, 5, dtype=np.float32)
    _same(mx.jit(mx.grad(loss(lax, mnp)), backend=backend)(w, x), jax.grad(loss(jax.lax, jnp))(w, x))
    _same(mx.jit(mx.vmap(loss(lax, mnp), (None, 0)), backend=backend)(w, x[:, None]),
          jax.vmap(loss(jax.lax, jnp), (None, 0))(w, x[:, None]))
    t = mx.jvp(lambda x: lax.optimization_barrier((x, 2.0 * x)), (x,), (np.ones_like(x),))
    _same(t, jax.jvp(lambda x: jax.lax.optimization_barrier((x, 2.0 * x)), (x,), (np.ones_like(x),)))
