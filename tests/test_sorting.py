"""``lax.sort`` / ``sort_key_val`` / ``top_k`` and ``minixla.numpy``'s ``sort``/``argsort``/
``lexsort`` against JAX on both backends and the HLO evaluator (issue 14): multi-operand,
``num_keys``, any dimension, stability, and JAX's comparator (``-0.0 == 0.0``, NaN last, a
denormal ties with zero on XLA:CPU); ``top_k``'s raw total order.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.hlo.evaluator import evaluate

BACKENDS = ("llvm", "jax")
SPECIAL = np.array([1., np.nan, -0., 0., -np.nan, 3., np.inf, 1., 1e-45, -1e-40, -np.inf, 2., -0., np.nan],
                   np.float32)


def _same(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def _programs(xlax, xnp):
    """The same sorting program over the jax or minixla namespaces (one compile per backend)."""
    def f(x, i8, f16, bf16, m, b):
        return [*xlax.sort_key_val(x, np.arange(x.shape[0], dtype=np.int32)),
                *xlax.sort((i8, f16, bf16, b), dimension=1, num_keys=2),
                xlax.sort(m, dimension=0),
                *xlax.top_k(x, 6),
                xnp.argsort(m, axis=1, descending=True), xnp.sort(m, axis=None, descending=True),
                xnp.lexsort((i8, b)), xnp.argsort(x)]
    return f


@pytest.fixture(scope="module")
def args():
    r = np.random.RandomState(0)
    return (SPECIAL, r.randint(-2, 2, (3, 20)).astype(np.int8), r.randn(3, 20).astype(np.float16),
            r.randn(3, 20).astype(ml_dtypes.bfloat16), r.randint(0, 4, (4, 6)).astype(np.float32),
            r.randint(0, 2, (3, 20)).astype(bool))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sorts_as_jax(backend, args):
    want = _programs(jax.lax, jnp)(*args)
    got = minixla.jit(_programs(lax, mnp), backend=backend)(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)


def test_eager_and_evaluator_as_jax(args):
    want = _programs(jax.lax, jnp)(*args)
    for g, w in zip(_programs(lax, mnp)(*args), want):
        _same(g, w)
    module = minixla.jit(_programs(lax, mnp)).lower(*args).hlo_module
    for g, w in zip(evaluate(module, *args), want):
        _same(g, w)


def test_sort_grad_and_vmap():
    x = np.random.RandomState(1).randn(3, 6).astype(np.float32)
    w = np.arange(6, dtype=np.float32)

    def f(xnp):
        return lambda x: xnp.sum(xnp.sort(x, axis=1) * w)
    np.testing.assert_allclose(minixla.grad(f(mnp))(x), jax.grad(f(jnp))(x))
    np.testing.assert_allclose(minixla.jit(minixla.grad(f(mnp)))(x), jax.grad(f(jnp))(x))
    _same(minixla.vmap(lambda r, k: lax.sort_key_val(k, r)[1], in_axes=(0, None))(x, x[0]),
          jax.vmap(lambda r, k: jax.lax.sort_key_val(k, r)[1], in_axes=(0, None))(x, x[0]))


def test_sort_errors():
    f32 = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="one shape"):
        minixla.jit(lambda a, b: lax.sort((a, b)))(f32, np.ones(4, np.float32))
    with pytest.raises(ValueError, match="num_keys"):
        minixla.jit(lambda a: lax.sort((a, a), num_keys=3))(f32)
    with pytest.raises(ValueError, match="rank"):
        lax.sort(np.float32(1.))
    with pytest.raises(ValueError, match="k=5"):
        lax.top_k(f32, 5)


def test_llvm_sort_kernel_is_a_radix_sort_not_a_loop_per_element():
    x = np.random.RandomState(2).randn(4096).astype(np.float32)
    compiled = minixla.jit(mnp.sort).lower(x).compile()
    assert [k["kind"] for k in compiled.kernels()] == ["sort"]
    assert "radix.scatter" in compiled.executable.llvm_ir
    _same(compiled(x), jnp.sort(x))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_top_k_and_lu_return_lists_as_jax(backend):
    # jax.lax.top_k and jax.lax.linalg.lu return lists: a result put in a pytree (tree_map
    # against JAX's, a scan carry) has JAX's structure (were tuples; fresh-user finding)
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0], [2.0, 2.0, 5.0]], np.float32)
    want = (jax.lax.top_k(x, 2), jax.lax.linalg.lu(x))
    for got in ((lax.top_k(x, 2), lax.linalg.lu(x)),
                minixla.jit(lambda a: (lax.top_k(a, 2), lax.linalg.lu(a)), backend=backend)(x)):
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-6)
