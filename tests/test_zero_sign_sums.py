"""The sign of a zero sum in dots, against ``jax.jit`` (XLA:CPU) on both backends.

XLA:CPU's matrix-vector emitter (one lhs row times ``x @ W``, batched or not) computes the
columns in tiles of 32 bytes of f32/f64 from +0.0 and the last ``N % tile`` in a scalar epilogue
that starts from its first product: a sum of -0.0 products is +0.0 in the tiles and -0.0 in the
epilogue (``elemental.gemv_tail_starts_at_minus_zero``); a GEMM (two rows or more) is +0.0.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy  # noqa: F401


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_dot_of_minus_zero_products_keeps_xlas_sign(backend, dtype):
    a = -np.zeros((2, 7), dtype)
    b = np.ones((7, 21), dtype)
    a[1, 3] = 1.0  # (row 1: one +1 product, so +0.0 or a number everywhere)

    def prog(x, w):
        return [x[:1] @ w, x[0] @ w, x[:, None, :] @ w, jnp.maximum(x[:1] @ w, -1.0), x @ w, x[:1] @ w[:, :16]]
    want = jax.jit(prog)(a, b)
    got = minixla.jit(prog, backend=backend)(a, b)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=f"output {k}")
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_empty_contraction_is_plus_zero_in_every_column(backend):
    # (grad fuzzer seed 10031: a one-row x @ W with K = 0 gave -0.0 in the epilogue's columns)
    for xs, ws in [((0,), (0, 2)), ((0,), (0, 9)), ((1, 0), (0, 9)), ((3, 0), (0, 9))]:
        x, w = np.zeros(xs, np.float32), np.zeros(ws, np.float32)
        want = np.asarray(jax.jit(jnp.dot)(x, w))
        got = np.asarray(minixla.jit(minixla.numpy.dot, backend=backend)(x, w))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=str((xs, ws)))
