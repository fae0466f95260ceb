"""NaN bits of elementwise maximum/minimum and clamp: bit-identical to JAX eager (XLA:CPU).

XLA:CPU returns a NaN first operand as it is; a NaN second operand keeps its payload with its
sign bit and-ed (max) or or-ed (min) with the first operand's; a bf16 NaN result is the quiet
NaN of its sign (narrowed from f32, payload dropped, as every bf16 op). Not covered here: max/min
reductions and scans (tests/test_nan_reduction_order.py; XLA:CPU's vectorized ones do not even
propagate NaN in long rows, see test_llvm_backend.test_vectorized_reductions_propagate_nan) and
XLA:CPU's f16 vector lanes, which give the canonical +NaN 0x7e00 whatever the operands."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import minixla
import minixla.lax as mlax

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_NANS = {"float32": [0x7FC00000, 0xFFC00000, 0x7FC00123, 0x7F800001],
         "float64": [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123],
         "float16": [0x7E00, 0xFE00, 0x7E12], "bfloat16": [0x7FC0, 0xFFC0, 0x7FC1, 0xFF81]}


def _bits(a):
    a = np.asarray(a)
    return a.view(_UINT[a.dtype.itemsize])


def _operands(dtype):
    """(x, y) covering NaN x NaN, NaN x number and number x NaN, numbers of both signs."""
    nans = np.array(_NANS[np.dtype(dtype).name], _UINT[np.dtype(dtype).itemsize]).view(dtype)
    nums = np.array([-1.5, 1.0, -0.0, 0.0, -np.inf, np.inf], dtype)
    vals = np.concatenate([nans, nums])
    x, y = np.meshgrid(vals, vals, indexing="ij")
    keep = np.isnan(x.astype(np.float32)) | np.isnan(y.astype(np.float32))
    return x[keep], y[keep]


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", jnp.bfloat16])
def test_max_min_nan_bits(dtype, backend):
    dtype = np.dtype(dtype)
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs jax_enable_x64")
    x, y = _operands(dtype)
    if dtype == np.float16:  # XLA:CPU's f16 vector lanes give the canonical +NaN (0x7e00); its
        x, y = x[:, None], y[:, None]  # scalar loop (a minor dim of 1) the operand rule above
    got = minixla.jit(lambda a, b: (mlax.max(a, b), mlax.min(a, b)), backend=backend)(x, y)
    for g, want in zip(got, (lax.max(x, y), lax.min(x, y))):
        assert np.asarray(g).dtype == dtype
        np.testing.assert_array_equal(_bits(g), _bits(want))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_clamp_and_fused_nan_bits(backend):
    u = lambda *v: np.array(v, np.uint32).view(np.float32)  # noqa: E731
    nan, mnan = u(0x7FC00000)[0], u(0xFFC00000)[0]
    lo = np.float32([-2, 1, nan, -1, -1, mnan])
    x = np.float32([nan, mnan, -1, -0.5, nan, 3])
    hi = np.float32([-1, 2, 2, nan, mnan, 4])
    f = lambda a, b, c: (lax.clamp(a, b, c), lax.min(b * 2, c + 1), lax.max(a - 1, b))  # noqa: E731
    g = lambda a, b, c: (mlax.clamp(a, b, c), mlax.min(b * 2, c + 1), mlax.max(a - 1, b))  # noqa: E731
    for got, want in zip(minixla.jit(g, backend=backend)(lo, x, hi), f(lo, x, hi)):
        np.testing.assert_array_equal(_bits(got), _bits(want))



@pytest.mark.parametrize("dtype", ["float32", "float16", jnp.bfloat16])
def test_evaluator_nan_bits(dtype):
    # the HLO evaluator (the constant folder's) gives the backends' bits
    from minixla.hlo.evaluator import float_max, float_min
    x, y = _operands(np.dtype(dtype))
    x, y = x[:, None], y[:, None]
    for got, want in ((float_max(x, y), lax.max(x, y)), (float_min(x, y), lax.min(x, y))):
        np.testing.assert_array_equal(_bits(got), _bits(want))
