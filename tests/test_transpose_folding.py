"""Transpose folding: dot(transpose(x), y) reads x directly, bit-identically."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.hlo import parse
from minixla.passes.transpose_folding import TransposeFolding
from minixla.testing import check_against_jax
from conftest import filecheck

f32 = np.float32


def test_rhs_transpose_folds_into_contracting_dims():
    m = parse("""HloModule t

ENTRY %main.0 (p0: f32[2,3], p1: f32[4,3]) -> f32[2,4] {
  %p0 = f32[2,3]{1,0} parameter(0)
  %p1 = f32[4,3]{1,0} parameter(1)
  %transpose.1 = f32[3,4]{1,0} transpose(%p1), dimensions={1,0}
  ROOT %dot.2 = f32[2,4]{1,0} dot(%p0, %transpose.1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
}
""")
    assert TransposeFolding().run(m) is True
    filecheck(m.to_string(), """
CHECK: ROOT %dot.2 = f32[2,4]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
""")


def test_transpose_that_reorders_free_dims_is_not_folded():
    # The lhs's free dims (0, 1) come from x's dims (1, 0): folding would transpose the result.
    m = parse("""HloModule t

ENTRY %main.0 (p0: f32[3,2,5], p1: f32[5,4]) -> f32[2,3,4] {
  %p0 = f32[3,2,5]{2,1,0} parameter(0)
  %p1 = f32[5,4]{1,0} parameter(1)
  %transpose.1 = f32[2,3,5]{2,1,0} transpose(%p0), dimensions={1,0,2}
  ROOT %dot.2 = f32[2,3,4]{2,1,0} dot(%transpose.1, %p1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
}
""")
    assert TransposeFolding().run(m) is False
    assert "dot(%transpose.1, %p1)" in m.to_string()


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_attention_scores_do_not_materialize_k_transpose(backend, rng):
    q = rng.standard_normal((2, 3, 16, 8)).astype(f32)
    k = rng.standard_normal((2, 3, 16, 8)).astype(f32)
    f = lambda q, k: mnp.matmul(q, mnp.swapaxes(k, -1, -2)) if hasattr(mnp, "swapaxes") else \
        mnp.matmul(q, mnp.transpose(k, (0, 1, 3, 2)))
    compiled = minixla.jit(f, backend=backend).lower(q, k).compile()
    assert not any(i.opcode == "transpose" for i in compiled.hlo_module.entry.instructions)
    check_against_jax(f, lambda q, k: jnp.matmul(q, jnp.swapaxes(k, -1, -2)), q, k,
                      rtol=1e-5, atol=1e-5, backends=(backend,))


def test_folding_is_bit_identical(rng):
    x, w = rng.standard_normal((5, 7)).astype(f32), rng.standard_normal((6, 7)).astype(f32)
    folded = minixla.jit(lambda x, w: x @ w.T)(x, w)
    unfolded = minixla.jit(lambda x, wt: x @ wt)(x, np.ascontiguousarray(w.T))
    np.testing.assert_array_equal(folded, unfolded)


def test_transposed_dot_result_becomes_a_dot_with_swapped_operands():
    # (A B)^T = B^T A^T: reverse mode's weight gradient (dot then transpose) is one dot.
    m = parse("""HloModule t

ENTRY %main.0 (p0: f32[6,2], p1: f32[6,3]) -> f32[3,2] {
  %p0 = f32[6,2]{1,0} parameter(0)
  %p1 = f32[6,3]{1,0} parameter(1)
  %dot.1 = f32[2,3]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={0}, rhs_batch_dims={}, rhs_contracting_dims={0}
  ROOT %transpose.2 = f32[3,2]{1,0} transpose(%dot.1), dimensions={1,0}
}
""")
    assert TransposeFolding().run(m) is True
    filecheck(m.to_string(), """
CHECK: ROOT %transpose.2 = f32[3,2]{1,0} dot(%p1, %p0), lhs_batch_dims={}, lhs_contracting_dims={0}, rhs_batch_dims={}, rhs_contracting_dims={0}
""")


def test_batched_transposed_dot_keeps_batch_dims_and_second_users_block_the_swap():
    batched = """HloModule t

ENTRY %main.0 (p0: f32[4,2,5], p1: f32[4,5,3]) -> f32[4,3,2] {
  %p0 = f32[4,2,5]{2,1,0} parameter(0)
  %p1 = f32[4,5,3]{2,1,0} parameter(1)
  %dot.1 = f32[4,2,3]{2,1,0} dot(%p0, %p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT %transpose.2 = f32[4,3,2]{2,1,0} transpose(%dot.1), dimensions={%s}
}
"""
    m = parse(batched.replace("%s", "0,2,1"))
    assert TransposeFolding().run(m) is True
    assert "dot(%p1, %p0), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, " \
           "rhs_contracting_dims={2}" in m.to_string()
    m = parse(batched.replace("%s", "2,0,1").replace("f32[4,3,2]", "f32[3,4,2]"))  # moves the batch dim
    assert TransposeFolding().run(m) is False
    two_users = parse("""HloModule t

ENTRY %main.0 (p0: f32[2,5], p1: f32[5,3]) -> (f32[3,2], f32[2,3]) {
  %p0 = f32[2,5]{1,0} parameter(0)
  %p1 = f32[5,3]{1,0} parameter(1)
  %dot.1 = f32[2,3]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %transpose.2 = f32[3,2]{1,0} transpose(%dot.1), dimensions={1,0}
  ROOT %tuple.3 = (f32[3,2]{1,0}, f32[2,3]{1,0}) tuple(%transpose.2, %dot.1)
}
""")
    assert TransposeFolding().run(two_users) is False


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_weight_gradient_update_has_no_transpose_and_matches_jax(backend, rng):
    """The SGD step of a dense layer: the weight gradient's dot writes W's layout, and the
    update is fused into it (no transpose kernel, no strided update loop)."""
    def step(w, x, y, np=mnp, grad=minixla.grad):
        g = grad(lambda w: np.sum((x @ w - y) ** 2))(w)
        return w - 0.1 * g
    w, x, y = (rng.standard_normal(s).astype(f32) for s in [(24, 40), (16, 24), (16, 40)])
    compiled = minixla.jit(step, backend=backend).lower(w, x, y).compile()
    assert not any("transpose" in str(i.opcode) for i in compiled.hlo_module.entry.instructions)
    if backend == "llvm":
        assert all("transpose" not in k["opcodes"] for k in compiled.kernels())
    check_against_jax(step, lambda w, x, y: step(w, x, y, np=jnp, grad=jax.grad), w, x, y,
                      rtol=1e-5, atol=1e-5, backends=(backend,))


def test_swapped_dot_is_bit_identical(rng):
    a, b = rng.standard_normal((70, 9)).astype(f32), rng.standard_normal((70, 33)).astype(f32)
    swapped = minixla.jit(lambda a, b: (a.T @ b).T)(a, b)
    direct = minixla.jit(lambda a, b: b.T @ a)(a, b)
    np.testing.assert_array_equal(swapped, direct)


def test_wide_weight_gradient_copies_its_strided_lhs_row_major(rng, monkeypatch):
    """``dot-lhs-row-major``: ``w - lr * (x.T @ g)`` with 1024 output columns reads a row-major
    copy of ``x.T`` (a transpose kernel first); the 256-column one keeps reading ``x`` down its
    columns. Bit-identical to the packed strided read (the same K blocks and tiles)."""
    from minixla.passes import dot_lhs_copy

    step = lambda x, g, w: w - f32(0.01) * (x.T @ g)  # noqa: E731
    x, g, w = (rng.standard_normal(s).astype(f32) for s in [(256, 1024), (256, 1024), (1024, 1024)])
    kinds = lambda c: [k["kind"] for k in c.kernels()]  # noqa: E731
    copied = minixla.jit(step).lower(x, g, w).compile()
    assert kinds(copied) == ["transpose", "kOutput"]
    narrow = minixla.jit(step).lower(x, g[:, :256], w[:, :256]).compile()
    assert kinds(narrow) == ["kOutput"]
    monkeypatch.setattr(dot_lhs_copy, "MIN_COLUMNS", 1 << 40)
    packed = minixla.jit(step).lower(x, g, w).compile()
    assert kinds(packed) == ["kOutput"]
    np.testing.assert_array_equal(copied(x, g, w), packed(x, g, w))
    np.testing.assert_allclose(copied(x, g, w), w - 0.01 * (x.T.astype(np.float64) @ g), rtol=1e-5, atol=1e-5)
