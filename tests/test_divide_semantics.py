"""Regression (deep fuzz find): ``x / y`` with a broadcast divisor equals JAX eager bit for bit.

JAX eager compiles ``jnp.true_divide`` to ``div(x, broadcast(y))``, which XLA's algebraic
simplifier turns into ``x * broadcast(1 / y)``: up to 1 ulp from a correctly rounded division.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.testing import eager_reference, reference_device

f32 = np.float32


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_fuzz_find_scalar_divisor(backend):
    x, y = np.array([11.25, np.nan], f32), np.array(-15.5, f32)
    got = minixla.jit(mnp.true_divide, backend=backend)(x, y)
    np.testing.assert_array_equal(got, np.array([-0.7258064, np.nan], f32))  # JAX eager's value
    assert got[0] != (x / y)[0]  # not the correctly rounded -0.7258065


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("yshape", [(), (7,), (64, 1), (64, 7)])
def test_broadcast_divisor_matches_jax_eager(backend, yshape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 7)) * 10).astype(f32)
    y = rng.standard_normal(yshape).astype(f32)
    want = np.asarray(eager_reference(jnp.true_divide, x, y, backend=backend))
    np.testing.assert_array_equal(minixla.jit(lambda a, b: a / b, backend=backend)(x, y), want)
    np.testing.assert_array_equal(minixla.jit(lambda a: a / 3.3, backend=backend)(x),
                                  np.asarray(eager_reference(jnp.true_divide, x, 3.3, backend=backend)))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_cumsum_over_a_length_one_axis_keeps_negative_zero(backend):
    """Regression (deep fuzz find): cumsum(-0.0) gave 0.0; JAX eager returns x unchanged."""
    for x in (np.array(-0.0, f32), np.full((3, 1), -0.0, f32)):
        got = minixla.jit(lambda a: mnp.cumsum(a, axis=None if a.ndim == 0 else 1), backend=backend)(x)
        assert np.signbit(got).all()
    got = minixla.jit(lambda a: mnp.cumsum(a), backend=backend)(np.full(3, -0.0, f32))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.asarray(jnp.cumsum(np.full(3, -0.0, f32)))))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_identity_arithmetic_flushes_a_subnormal_input_as_jax_eager(backend):
    """Regression (user report): x * 1.0, x / 1.0, x - 0.0, x + -0.0 and x * ones_like(x) of a
    subnormal gave 1e-40 where JAX eager (denormals-are-zero) gives 0.0: LLVM folded them to x."""
    x = np.array([1e-40, -1e-40, 1.5, -0.0, np.inf], np.float32)
    for f in (lambda a, np_: a * 1.0, lambda a, np_: a / 1.0, lambda a, np_: a - 0.0, lambda a, np_: a + (-0.0),
              lambda a, np_: 1.0 * a, lambda a, np_: a * np_.ones_like(a)):
        got = minixla.jit(lambda a: f(a, mnp), backend=backend)(x)
        want = np.asarray(eager_reference(lambda a: f(jnp.asarray(a), jnp), x, backend=backend))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        if reference_device(backend).platform == "cpu":  # (a GPU keeps f32 subnormals)
            assert got[0] == 0.0 and np.signbit(got[1])


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_identity_flush_of_a_two_element_vector_compiles(backend):
    """Regression (deep-fuzz find): the flush of x in x * 1.0 (a mean over a size-1 axis) once used
    llvm.canonicalize, which LLVM's x86 backend cannot lower as <2 x float>: the process aborted."""
    x = np.array([[[-128], [5]]], np.int8)
    got = minixla.jit(lambda a: mnp.mean(a + a, axis=2, keepdims=True), backend=backend)(x)
    assert got.dtype == np.float32 and got.tolist() == [[[0.0], [10.0]]]  # int8 -128 + -128 wraps to 0


def test_jax_handoff_evaluates_hlo_outside_an_executable_too():
    """The hidden 1.0 and constants only exist while a JaxExecutable traces; evaluating a
    computation directly must still compute x * 3 + x (it squared the product before)."""
    from minixla.backends import jax_xla
    x = np.arange(3, dtype=np.float32)
    c = minixla.jit(lambda a: a * 3.0 + a, backend="jax").lower(x).compile()
    np.testing.assert_array_equal(jax_xla.evaluate_computation(c.hlo_module.entry, [jnp.asarray(x)]), x * 3 + x)


def _narrow_float_cases(np_, nn_, lax_):
    """x / 3, x / (a broadcast column), x / (a closed-over row), 3 / x, logistic, silu, round(x, 2),
    and unary ops whose f16 form or subnormal inputs XLA:CPU treats specially (expm1, tanh, sin,
    log1p, pow).
    XLA:CPU widens bf16 to f32 before rewriting x / broadcast(y) into x * (1 / y) (so the
    reciprocal is an f32 one), keeps f16 in f16 (an f16 reciprocal), and expands logistic into
    1 / (1 + exp(-x)), rounding each op to the narrow type. (Softmax is x / broadcast(sum): the
    same rewrite, and a second of JAX eager dispatch; left out.)"""
    def f(x):
        m = np_.reshape(x, (256, 256))
        c = np.asarray([3.0, 7.0, 0.1, 1e-38] * 64, np.float32).astype(x.dtype)
        return (np_.divide(x, 3.0), np_.divide(m, np_.reshape(x[:256], (256, 1))), np_.divide(m, c),
                np_.divide(3.0, x), lax_.logistic(x), nn_.silu(x), np_.round(x, 2),
                np_.expm1(x), np_.tanh(x), np_.sin(x), np_.log1p(x), np_.power(x, x[::-1]))
    return f


_NARROW_REFERENCE = {}


@pytest.mark.parametrize("backend", ["llvm", "jax", "eager"])
def test_bf16_f16_division_and_logistic_bit_identical_to_jax_eager(backend):
    """Regression (fresh user): bf16 ``x / 3`` multiplied by 1/3 rounded to bf16 (357 of 1024
    values an ulp off JAX), bf16/f16 logistic and silu on LLVM were rounded once (JAX rounds
    each op of XLA's expansion), f16 ``round(x, 2)`` was not computed in f32 as jax.numpy does,
    a subnormal constant divisor (1e-38) was not flushed, f16 expm1 on LLVM was not XLA's
    per-op f16 expansion (11,381 values off), and on LLVM a subnormal bf16 input of tanh, sin,
    log1p and pow was flushed where XLA passes it through (or the reverse). Every bf16 and f16
    bit pattern."""
    import ml_dtypes
    import minixla.lax as mlax
    import minixla.nn as mnn
    bits = np.arange(1 << 16, dtype=np.uint16)
    f = _narrow_float_cases(mnp, mnn, mlax)
    device = reference_device("jax" if backend == "eager" else backend)
    for dtype in (ml_dtypes.bfloat16, np.float16):
        x = bits.view(dtype)
        key = (np.dtype(dtype).name, str(device))
        if key not in _NARROW_REFERENCE:  # (JAX eager dispatch is most of the cost: once per dtype)
            ref = eager_reference(_narrow_float_cases(jnp, jax.nn, jax.lax), jnp.asarray(x),
                                  backend="jax" if backend == "eager" else backend)
            _NARROW_REFERENCE[key] = [np.asarray(w) for w in ref]
        got = f(x) if backend == "eager" else minixla.jit(f, backend=backend)(x)
        for k, (g, w) in enumerate(zip(got, _NARROW_REFERENCE[key])):
            if backend == "eager" and k == 5:
                continue  # (eager nn.silu is numpy's `x * sigmoid(x)`: no denormal flush, not minixla's multiply)
            g = np.asarray(g)
            assert g.dtype == w.dtype == dtype, (k, g.dtype)
            same = (g.view(np.uint16) == w.view(np.uint16)) | (np.isnan(g) & np.isnan(w))
            assert same.all(), (np.dtype(dtype).name, k, int((~same).sum()), g[~same][:4], w[~same][:4])
