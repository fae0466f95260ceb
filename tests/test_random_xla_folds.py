"""``minixla.random`` where XLA's compile of JAX's jitted samplers changes the bits (issue 14),
one regression per rule, each against ``jax.random`` bit for bit, eagerly and under
``minixla.jit`` on both backends (one program per backend):

- constant bounds with ``maxval - minval == 1``: XLA folds ``(bits - 1) + minval`` into
  ``bits + (minval - 1)`` (float16/32, not bfloat16): float16 ``gumbel``/``logistic``/
  ``categorical`` of ``[tiny, 1)`` were up to 8-15 ulp off in ~6% of the values;
- maxwell's row sum: FMAs x1^2 first for float32 threefry draws, x0^2 first for rbg keys,
  rounded squares as ``(x0^2 + x2^2) + x1^2`` past 4,096 normals (its own fusion), float32
  squares rounded once for bfloat16;
- the hand-off's ``fma(a, b, c)`` with a product for ``c``: LLVM contracted ``c``'s product in
  ~5% of maxwell's rows;
- a one-element ``wald`` (shape ``(1,)``) is folded as a scalar one (64 ulp before).
"""
import jax
import jax.random as jr
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.random as mr

F16, F32, BF16 = np.float16, np.float32, ml_dtypes.bfloat16


def _cases():
    """(name, fn(random module, key of impl), impl)."""
    return [
        ("gumbel_f16", lambda R, k: R.gumbel(k, (300,), F16), "threefry2x32"),
        ("logistic_f16", lambda R, k: R.logistic(k, (300,), F16), "threefry2x32"),
        ("categorical_f16", lambda R, k: R.categorical(k, np.linspace(-1, 1, 40).astype(F16).reshape(8, 5)),
         "threefry2x32"),
        ("maxwell_f32_small", lambda R, k: R.maxwell(k, (200,), F32), "threefry2x32"),
        ("maxwell_f32_large", lambda R, k: R.maxwell(k, (1400,), F32), "threefry2x32"),
        ("maxwell_f32_rbg", lambda R, k: R.maxwell(k, (200,), F32), "rbg"),
        ("maxwell_bf16", lambda R, k: R.maxwell(k, (200,), BF16), "threefry2x32"),
        ("double_sided_maxwell", lambda R, k: R.double_sided_maxwell(k, 0.5, 2.0, (1400,), F32), "threefry2x32"),
        ("wald_one", lambda R, k: R.wald(k, 1.5, (1,), F32), "threefry2x32"),
    ]


def _bits(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "f" or x.dtype == BF16 else x


def _program(R, seed):
    return [fn(R, R.key(seed, impl=impl)) for _, fn, impl in _cases()]


@pytest.mark.parametrize("mode", ["eager", "llvm", "jax"])
def test_xla_folds_bit_identical(mode):
    seed = 5
    want = [_bits(jax.device_get(w)) for w in _program(jr, seed)]
    if mode == "eager":
        got = _program(mr, seed)
    else:
        # (the keys made inside from a traced seed: one program for all the cases)
        got = minixla.jit(lambda s: _program(mr, s), backend=mode)(np.int32(seed))
    for (name, _, _), g, w in zip(_cases(), got, want):
        np.testing.assert_array_equal(_bits(g), w, err_msg=f"{name} {mode}")
