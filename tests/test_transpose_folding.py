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
