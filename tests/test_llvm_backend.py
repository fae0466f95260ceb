"""The LLVM backend against JAX eager (and NumPy for float64).

Programs are traced and lowered with minixla (``make_jaxpr`` + ``lower_jaxpr``); fusions are
built by hand by wrapping a lowered computation in a ``fusion`` instruction, and the buffer
assignment is a trivial one built here (every temporary at its own offset).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.backends.llvm import compile_module
from minixla.core.errors import UnsupportedError
from minixla.hlo import HloInstruction, lower_jaxpr

F32_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.7, np.inf, -np.inf, np.nan, 1e-40, -1e-40,
                         3e38, -3e38, 1e-7, 88.0, -100.0, 2.5], np.float32)


# ---------------------------------------------------------------------------------------
# Helpers.

@dataclass
class BufferSlice:
    kind: str
    index: int = -1
    offset: int = 0
    size: int = 0


class TrivialAssignment:
    """Every non-parameter, non-constant value its own 64-byte-aligned temp; roots are outputs."""

    def __init__(self, module):
        comp = module.entry
        roots = list(comp.root.operands) if comp.root.opcode == "tuple" else [comp.root]
        self.slices, offset = {}, 0
        for i in comp.instructions:
            if i.shape.is_tuple:
                continue
            if i.opcode == "parameter":
                s = BufferSlice("parameter", i.parameter_number, 0, i.shape.nbytes)
            elif i.opcode == "constant":
                s = BufferSlice("constant", -1, 0, i.shape.nbytes)
            elif i.opcode == "reshape":
                s = self.slices[i.operands[0]]
            elif i in roots:
                s = BufferSlice("output", roots.index(i), 0, i.shape.nbytes)
            else:
                s = BufferSlice("temp", -1, offset, i.shape.nbytes)
                offset += -(-i.shape.nbytes // 64) * 64
            self.slices[i] = s
        self.arena_size = offset


def lower(f, *args):
    return lower_jaxpr(minixla.make_jaxpr(f)(*args))


def compile_hlo(module):
    return compile_module(module, TrivialAssignment(module))


def run(f, *args):
    """Trace ``f(minixla.lax, minixla.numpy)``, compile, run; returns the list of outputs."""
    module = lower(lambda *a: f(lax, mnp, *a), *args)
    return compile_hlo(module)(*args)


def reference(f, *args):
    out = f(jax.lax, jnp, *[jnp.asarray(a) for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def assert_same(actual, expected, rtol=0.0, atol=0.0):
    """Equal dtype and shape; NaN where expected NaN; exact bits (incl. the sign of 0) when tol=0."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        ok = ~np.isnan(expected)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(actual[ok], expected[ok])
            np.testing.assert_array_equal(np.signbit(actual[ok]), np.signbit(expected[ok]))
        else:
            np.testing.assert_allclose(actual[ok], expected[ok], rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)


def check(f, *args, rtol=0.0, atol=0.0):
    outs, refs = run(f, *args), reference(f, *args)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert_same(o, r, rtol, atol)


def fusion_module(f, kind, *args):
    """Lower ``f`` and wrap its entry computation as the fused computation of one fusion."""
    module = lower(f, *args)
    fused = module.entry
    entry = module.new_computation("entry")
    params = [entry.add_instruction(HloInstruction("parameter", p.shape, name=f"arg{p.parameter_number}",
                                                   parameter_number=p.parameter_number))
              for p in fused.parameters]
    entry.root = entry.add_instruction(
        HloInstruction("fusion", fused.root.shape, params, attrs={"kind": kind}, called=[fused]))
    module.entry = entry
    return module


rng = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------
# Elementwise.

@pytest.mark.parametrize("op", ["neg", "abs", "sign", "floor", "ceil", "sqrt"])
def test_unary_float_exact(op):
    check(lambda L, N, x: getattr(L, op)(x), F32_SPECIALS)


def test_rsqrt():
    # Ours is the correctly rounded 1/sqrt(x); XLA:CPU's differs from it by up to 1 ulp.
    check(lambda L, N, x: L.rsqrt(x), np.concatenate([F32_SPECIALS, np.abs(randn(64))]), rtol=2.5e-7)


def test_denormals_are_flushed_like_xla_cpu():
    # JAX eager (XLA:CPU) runs with FTZ/DAZ: subnormal inputs read as 0, subnormal results become 0.
    x = np.array([1e-40, -1e-40, 1e-45, 1e-30, 0.0], np.float32)
    check(lambda L, N, x: (L.add(x, 0.0), L.mul(x, 1e-10), L.sign(x), L.eq(x, 0.0),
                           L.convert_element_type(x, np.bool_)), x)


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "logistic"])
def test_unary_float_transcendental(op):
    x = np.concatenate([F32_SPECIALS, randn(64) * 10]).astype(np.float32)
    check(lambda L, N, x: getattr(L, op)(x), x, rtol=2e-6, atol=1e-37)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min"])
def test_binary_float_specials(op):
    x, y = np.meshgrid(F32_SPECIALS, F32_SPECIALS)
    check(lambda L, N, a, b: getattr(L, op)(a, b), x, y)


def test_no_contraction_of_user_ops():
    # a*x+b*x must round twice, as JAX eager does (an FMA would change the bits).
    a, b, x = randn(4096), randn(4096), randn(4096)
    check(lambda L, N, a, b, x: L.add(L.mul(a, x), L.mul(b, x)), a, b, x)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_float_nan(op):
    x, y = np.meshgrid(F32_SPECIALS[:10], F32_SPECIALS[:10])
    check(lambda L, N, a, b: getattr(L, op)(a, b), x, y)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.uint32])
def test_integer_arithmetic_and_division(dtype):
    info = np.iinfo(dtype)
    vals = np.array(sorted({0, 1, 2, 7, info.max, info.min, info.max - 1, info.min + 1}
                           | ({-1, -7} if info.min < 0 else set())), dtype)
    x, y = np.meshgrid(vals, vals)

    def f(L, N, a, b):
        return (L.add(a, b), L.sub(a, b), L.mul(a, b), L.div(a, b), L.max(a, b), L.min(a, b),
                L.bitwise_and(a, b), L.bitwise_or(a, b), L.bitwise_not(a), L.lt(a, b), L.ge(a, b),
                L.eq(a, b))
    check(f, x, y)


def test_integer_unary_signed():
    x = np.array([0, 1, -1, 5, -5, 2**31 - 1, -2**31], np.int32)
    check(lambda L, N, x: (L.neg(x), L.abs(x), L.sign(x)), x)


def test_bool_ops():
    x, y = np.meshgrid(np.array([False, True]), np.array([False, True]))

    def f(L, N, a, b):
        return (L.bitwise_and(a, b), L.bitwise_or(a, b), L.bitwise_not(a), L.lt(a, b), L.ne(a, b),
                L.max(a, b), L.min(a, b), L.select_n(a, b, L.bitwise_not(b)))
    check(f, x, y)


def test_select_and_where():
    x, y = randn(7, 5), randn(7, 5)
    check(lambda L, N, a, b: (N.where(a > b, a, b), L.select_n(a < 0.0, a, b * 2.0)), x, y)


@pytest.mark.parametrize("to", [np.int32, np.int8, np.uint8, np.uint32, np.bool_])
def test_convert_float_to_int_saturates(to):
    x = np.array([0.0, -0.0, 0.9, -0.9, 1.5, -1.5, 127.9, 128.0, -129.0, 255.5, 256.0, 3e9, -3e9,
                  np.inf, -np.inf, np.nan, 1e-40], np.float32)
    check(lambda L, N, x: L.convert_element_type(x, to), x)


def test_convert_between_ints_and_bools():
    x = np.array([0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -2**31], np.int32)

    def f(L, N, x):
        return (L.convert_element_type(x, np.int8), L.convert_element_type(x, np.uint8),
                L.convert_element_type(x, np.float32), L.convert_element_type(x, np.bool_),
                L.convert_element_type(L.convert_element_type(x, np.bool_), np.float32),
                L.convert_element_type(L.convert_element_type(x, np.uint8), np.int32))
    check(f, x)


def run_x64(f, *args):
    with jax.enable_x64(True):
        return run(f, *args)


def test_float64_against_numpy():
    x = np.concatenate([F32_SPECIALS.astype(np.float64), rng.standard_normal(32) * 5])
    x = x[~((np.abs(x) < 1e-37) & (x != 0))]  # subnormal as f32: flushed, unlike numpy
    y = x[::-1].copy()
    outs = run_x64(lambda L, N, a, b: (L.add(a, b), L.div(a, b), L.max(a, b), L.sqrt(a),
                                   L.convert_element_type(a, np.float32), L.exp(a)), x, y)
    with np.errstate(all="ignore"):
        assert_same(outs[0], x + y)
        assert_same(outs[1], x / y)
        assert_same(outs[3], np.sqrt(x))
        assert_same(outs[4], x.astype(np.float32))
        assert_same(outs[5], np.exp(x), rtol=1e-14)
        ref_max = np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x, y))
    assert_same(outs[2][~((x == 0) & (y == 0))], ref_max[~((x == 0) & (y == 0))])


def test_float64_conversions_against_numpy():
    x = np.array([1.5, -2.5, 1e300, -1e300, np.nan, np.inf], np.float64)
    out, = run_x64(lambda L, N, a: L.convert_element_type(a, np.int32), x)
    np.testing.assert_array_equal(out, [1, -2, 2**31 - 1, -2**31, 0, 2**31 - 1])


# ---------------------------------------------------------------------------------------
# Data movement.

def test_broadcast_transpose_reshape_slice_iota():
    x, v = randn(4, 6), randn(6)

    def f(L, N, x, v):
        t = L.transpose(x, (1, 0))                                   # [6, 4]
        b = L.broadcast_in_dim(v, (6, 4), (0,))                      # v along rows
        r = L.reshape(L.add(t, b), (3, 8))
        s = L.slice(r, (1, 1), (3, 8), (1, 3))                       # [2, 3]
        i = L.broadcasted_iota(np.int32, (2, 3), 1)
        return s, L.convert_element_type(i, np.float32) + s, L.reshape(x, (24,)), L.iota(np.float32, 5)
    check(f, x, v)


def test_broadcast_scalar_and_rank3_transpose():
    x = randn(2, 3, 4)
    check(lambda L, N, x: (L.transpose(x, (2, 0, 1)) * 2.0, L.broadcast_in_dim(x, (2, 5, 3, 4), (0, 2, 3))), x)


# ---------------------------------------------------------------------------------------
# Reductions.

@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (0, 1, 2)])
def test_reductions_float(axes):
    x = randn(5, 6, 7)
    check(lambda L, N, x: (L.reduce_sum(x, axes), L.reduce_max(x, axes), L.reduce_min(x, axes)), x,
          rtol=1e-5, atol=1e-5)


def test_reductions_int_bool_and_nan():
    xi = rng.integers(-1000, 1000, (9, 33)).astype(np.int32)
    xb = xi > 500
    xf = randn(3, 4)
    xf[1, 2] = np.nan
    check(lambda L, N, a, b, c: (L.reduce_sum(a, (1,)), L.reduce_max(a, (0,)), L.reduce_min(a, (0, 1)),
                                 L.reduce_max(b, (1,)), L.reduce_min(b, (0,)), L.reduce_max(c, (1,)),
                                 L.reduce_min(c, (0,))), xi, xb, xf)


def test_reductions_over_empty_axes_give_init():
    x = np.zeros((3, 0, 2), np.float32)
    check(lambda L, N, x: (L.reduce_sum(x, (1,)), L.reduce_max(x, (1, 2)), L.reduce_min(x, (0, 1))), x)
    xi = np.zeros((0, 4), np.int32)
    check(lambda L, N, x: (L.reduce_max(x, (0,)), L.reduce_sum(x, (0,)), L.reduce_sum(x, (1,))), xi)


def test_size_zero_arrays():
    x = np.zeros((0, 3), np.float32)
    check(lambda L, N, x: (L.exp(x) + 1.0, L.transpose(x, (1, 0))), x)
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 5), np.float32)
    check(lambda L, N, a, b: L.dot(a, b), a, b)  # K = 0: zeros


# ---------------------------------------------------------------------------------------
# Dot.

@pytest.mark.parametrize("la,ra,dn", [
    ((8, 16), (16, 12), (((1,), (0,)), ((), ()))),            # x @ w
    ((8, 16), (12, 16), (((1,), (1,)), ((), ()))),            # x @ w.T
    ((16, 8), (16, 12), (((0,), (0,)), ((), ()))),            # x.T @ w
    ((3, 8, 16), (3, 16, 5), (((2,), (1,)), ((0,), (0,)))),   # batched
    ((8, 3, 16), (16, 5, 3), (((2,), (0,)), ((1,), (2,)))),   # batch dims anywhere
    ((4, 6, 5), (6, 5, 7), (((1, 2), (0, 1)), ((), ()))),     # two contracting dims
    ((9, 16), (16,), (((1,), (0,)), ((), ()))),               # matrix-vector
    ((16,), (16, 9), (((0,), (0,)), ((), ()))),               # vector-matrix
    ((16,), (16,), (((0,), (0,)), ((), ()))),                 # vector-vector -> scalar
])
def test_dot_general(la, ra, dn):
    a, b = randn(*la), randn(*ra)
    check(lambda L, N, a, b: L.dot_general(a, b, dn), a, b, rtol=1e-5, atol=1e-5)


def test_dot_integer():
    a = rng.integers(-50, 50, (7, 9)).astype(np.int32)
    b = rng.integers(-50, 50, (9, 4)).astype(np.int32)
    check(lambda L, N, a, b: (L.dot(a, b), L.dot_general(a, b.T, (((1,), (1,)), ((), ())))), a, b)


def test_matmul_in_larger_program():
    x, w, bias = randn(32, 64), randn(64, 48), randn(48)
    check(lambda L, N, x, w, b: N.tanh(N.matmul(x, w) + b), x, w, bias, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# Convolution.

@pytest.mark.parametrize("case", [
    dict(lhs=(2, 9, 9, 3), rhs=(3, 3, 3, 8), dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1), padding="SAME"),
    dict(lhs=(2, 9, 8, 3), rhs=(3, 2, 3, 4), dn=("NHWC", "HWIO", "NHWC"), strides=(2, 2), padding="VALID"),
    dict(lhs=(2, 3, 9, 9), rhs=(8, 3, 3, 3), dn=("NCHW", "OIHW", "NCHW"), strides=(1, 2), padding="SAME"),
    dict(lhs=(1, 10, 10, 4), rhs=(3, 3, 4, 6), dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1), padding="SAME",
         rhs_dilation=(2, 2)),
    dict(lhs=(2, 7, 7, 6), rhs=(3, 3, 3, 4), dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1), padding="SAME",
         groups=2),
    dict(lhs=(2, 8, 8, 4), rhs=(3, 3, 1, 4), dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1), padding="SAME",
         groups=4),                                                    # depthwise
    dict(lhs=(1, 5, 5, 2), rhs=(3, 3, 2, 3), dn=("NHWC", "HWIO", "NHWC"), strides=(1, 1),
         padding=((2, 1), (0, 2)), lhs_dilation=(2, 1)),               # transposed-conv style
    dict(lhs=(2, 3, 11), rhs=(5, 3, 4), dn=("NCH", "OIH", "NCH"), strides=(2,), padding="SAME"),  # 1-D
])
def test_conv(case):
    a, b = randn(*case["lhs"]), randn(*case["rhs"])

    def f(L, N, a, b):
        return L.conv_general_dilated(a, b, case["strides"], case["padding"],
                                      lhs_dilation=case.get("lhs_dilation"),
                                      rhs_dilation=case.get("rhs_dilation"),
                                      dimension_numbers=case["dn"],
                                      feature_group_count=case.get("groups", 1))
    check(f, a, b, rtol=1e-4, atol=1e-5)


def test_conv_integer():
    a = rng.integers(-5, 5, (1, 6, 6, 2)).astype(np.int32)
    b = rng.integers(-5, 5, (3, 3, 2, 3)).astype(np.int32)
    check(lambda L, N, a, b: L.conv_general_dilated(a, b, (1, 1), "SAME",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC")), a, b)


@pytest.mark.parametrize("layout", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")])
def test_conv_padding_is_multiplied_like_xla(layout):
    # XLA:CPU pads with zeros that are multiplied: an inf weight that meets the padding gives
    # NaN (0 * inf), on every kernel path (register-tiled NHWC, row fallback NCHW).
    a = np.ones((1, 3, 3, 1), np.float32)
    b = np.ones((3, 3, 1, 1), np.float32)
    b[0, 0, 0, 0] = np.inf
    if layout[0] == "NCHW":
        a, b = a.transpose(0, 3, 1, 2).copy(), b.transpose(3, 2, 0, 1).copy()
    check(lambda L, N, a, b: L.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=layout), a, b)


# ---------------------------------------------------------------------------------------
# Fusions built by hand.

def _conv_bias_relu(L, N, x, w, b):
    y = L.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return L.max(y + L.broadcast_in_dim(b, y.shape, (3,)), 0.0)


def test_output_fusion_conv_bias_relu():
    x, w, b = randn(2, 8, 8, 3), randn(3, 3, 3, 16), randn(16)
    module = fusion_module(lambda *a: _conv_bias_relu(lax, mnp, *a), "kOutput", x, w, b)
    exe = compile_hlo(module)
    (kernel,) = exe.kernels()
    assert kernel["kind"] == "kOutput" and kernel["strategy"] == "gemm"
    assert "convolution" in exe.kernels()[0]["opcodes"]
    out, = exe(x, w, b)
    assert_same(out, reference(_conv_bias_relu, x, w, b)[0], rtol=1e-4, atol=1e-5)


def test_output_fusion_dot_with_tail_and_dtype_change():
    # The tail converts to int32: the accumulator cannot live in the output (elemental fallback).
    def f(L, N, x, w, b):
        y = L.dot(x, w) + L.broadcast_in_dim(b, (8, 12), (1,))
        return L.convert_element_type(L.mul(y, 100.0), np.int32)
    x, w, b = randn(8, 16), randn(16, 12), randn(12)
    exe = compile_hlo(fusion_module(lambda *a: f(lax, mnp, *a), "kOutput", x, w, b))
    out, = exe(x, w, b)
    ref = reference(f, x, w, b)[0]
    assert out.dtype == np.int32
    assert np.abs(out - ref).max() <= 1


def test_output_fusion_dot_tail_same_dtype():
    def f(L, N, x, w, b):
        return L.tanh(L.dot_general(x, w, (((1,), (1,)), ((), ()))) * 0.5 + L.broadcast_in_dim(b, (8, 12), (1,)))
    x, w, b = randn(8, 16), randn(12, 16), randn(12)
    for wt in (w, w.T.copy()):
        g = f if wt is w else (lambda L, N, x, w, b: L.tanh(L.dot(x, w) * 0.5 + L.broadcast_in_dim(b, (8, 12), (1,))))
        exe = compile_hlo(fusion_module(lambda *a: g(lax, mnp, *a), "kOutput", x, wt, b))
        out, = exe(x, wt, b)
        assert_same(out, reference(g, x, wt, b)[0], rtol=1e-5, atol=1e-6)


def test_input_fusion_reduce_of_elementwise():
    def f(L, N, x, y):
        return L.reduce_sum(L.exp(x) * y, (1,)), L.reduce_max(L.transpose(x, (1, 0)) + 1.0, (0,))
    x, y = randn(16, 40), randn(16, 40)
    for k in range(2):
        g = lambda L, N, x, y, k=k: f(L, N, x, y)[k]  # noqa: E731
        exe = compile_hlo(fusion_module(lambda *a: g(lax, mnp, *a), "kInput", x, y))
        assert exe.kernels()[0]["kind"] == "kInput"
        out, = exe(x, y)
        assert_same(out, reference(g, x, y)[0], rtol=1e-5, atol=1e-5)


def test_loop_fusion_with_array_constant_and_inner_reduce():
    table = np.arange(12, dtype=np.float32).reshape(3, 4)

    def f(L, N, x, y):
        s = L.reduce_sum(x, (1,))                                        # a reduce inside a kLoop
        return L.transpose(x * table, (1, 0)) + L.broadcast_in_dim(s, (4, 3), (1,)) + y
    x, y = randn(3, 4), randn(4, 3)
    exe = compile_hlo(fusion_module(lambda *a: f(lax, mnp, *a), "kLoop", x, y))
    out, = exe(x, y)
    assert_same(out, reference(f, x, y)[0], rtol=1e-6, atol=1e-6)


def test_conv_inside_loop_fusion_uses_elemental_conv():
    def f(L, N, x, w):
        y = L.conv_general_dilated(x, w, (2, 1), ((1, 0), (2, 1)), rhs_dilation=(1, 2),
                                   dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=2)
        return L.convert_element_type(y * 10.0, np.int32)
    x, w = randn(2, 4, 7, 6), randn(6, 2, 2, 3)
    exe = compile_hlo(fusion_module(lambda *a: f(lax, mnp, *a), "kOutput", x, w))
    out, = exe(x, w)
    assert np.abs(out - reference(f, x, w)[0]).max() <= 1


# ---------------------------------------------------------------------------------------
# Outputs, errors, code quality.

def test_outputs_that_alias_params_constants_and_each_other():
    x = randn(2, 3)
    exe = compile_hlo(lower(lambda x: (x, x + 1.0, x + 1.0, lax.reshape(x, (3, 2)),
                                       mnp.asarray(np.float32(7.0)), mnp.zeros((2,), np.float32)), x))
    outs = exe(x)
    x_before = x.copy()
    outs[0][...] = 0
    np.testing.assert_array_equal(x, x_before)  # a copy, not the argument itself
    np.testing.assert_array_equal(outs[1], x + 1.0)
    np.testing.assert_array_equal(outs[2], x + 1.0)
    np.testing.assert_array_equal(outs[3], x.reshape(3, 2))
    np.testing.assert_array_equal(outs[4], 7.0)
    np.testing.assert_array_equal(outs[5], np.zeros(2, np.float32))
    # Fresh outputs on every call.
    again = exe(x)
    assert again[1] is not outs[1]


def test_unsupported_dtype_and_opcode_raise():
    # (float16/bfloat16 and 'power' are supported since issue 3: use complex64 and 'cholesky'.)
    from minixla.hlo.ir import Shape
    module = lower(lambda x: x + x, np.ones((4,), np.float32))
    module.entry.root.shape = Shape(np.complex64, (4,))
    with pytest.raises(UnsupportedError, match="complex64"):
        compile_hlo(module)
    module = lower(lambda x: x * 2.0, np.ones((4,), np.float32))
    root = module.entry.root
    root.opcode = "cholesky"
    with pytest.raises(UnsupportedError, match="cholesky"):
        compile_hlo(module)
    root.opcode = "frobnicate"
    with pytest.raises(UnsupportedError, match="frobnicate"):
        compile_hlo(module)


def test_wrong_arguments_raise():
    exe = compile_hlo(lower(lambda x: x + 1.0, np.ones((4,), np.float32)))
    with pytest.raises(TypeError):
        exe(np.ones((5,), np.float32))
    with pytest.raises(TypeError):
        exe(np.ones((4,), np.float64))


def test_big_elementwise_kernel_is_vectorized():
    x = randn(256, 1024)
    exe = compile_hlo(lower(lambda x: mnp.tanh(x) * 2.0 + mnp.exp(x) - x, x))
    assert re.search(r"<(8|16) x float>", exe.optimized_llvm_ir)
    assert "define" in exe.llvm_ir and exe.compile_ms > 0
    assert "vfmadd" in exe.asm or "vmul" in exe.asm
    assert " fast " not in exe.optimized_llvm_ir and "contract" not in exe.llvm_ir


def test_reduction_is_vectorized():
    exe = compile_hlo(lower(lambda x: mnp.sum(x, axis=1), randn(64, 1024)))
    assert re.search(r"<(8|16) x float>", exe.optimized_llvm_ir)


def test_vectorized_reductions_propagate_nan():
    # Against NumPy: XLA:CPU's own vectorized max/min reductions drop NaNs in long rows (JAX
    # eager gives reduce_max([..., nan, ...] * 1000) != nan), against XLA's stated semantics.
    x = randn(8, 1000)
    x[2, 517] = np.nan
    x[5, 3] = np.nan
    x[6, :] = -0.0
    x[7, ::2] = 0.0
    x[7, 1::2] = -0.0
    mx, mn, mx0, sm = run(lambda L, N, x: (L.reduce_max(x, (1,)), L.reduce_min(x, (1,)), L.reduce_max(x, (0,)),
                                           L.reduce_sum(x, (1,))), x)
    # (NumPy's max/min do not order -0.0 < +0.0: the signs of zeros are checked below instead.)
    assert_same(mx, np.max(x, axis=1), atol=1e-30)
    assert_same(mn, np.min(x, axis=1), atol=1e-30)
    assert_same(mx0, np.max(x, axis=0), atol=1e-30)
    assert_same(sm, np.sum(x, axis=1), rtol=1e-5, atol=1e-4)
    assert np.signbit(mn[6]) and np.signbit(mn[7]) and not np.signbit(mx[7])


def test_scalar_and_noncontiguous_arguments():
    a, b = np.float32(2.0), np.asarray(np.float32(3.0))
    check(lambda L, N, a, b: L.add(L.mul(a, b), 1.0), a, b)
    x = randn(6, 8)
    exe = compile_hlo(lower(lambda x: x * 2.0, x.T))
    np.testing.assert_array_equal(exe(x.T)[0], x.T * 2.0)  # a transposed view is copied first


def test_concurrent_calls_from_threads_do_not_share_temporaries():
    """Regression: one arena shared by all calls gave wrong results under threads."""
    from concurrent.futures import ThreadPoolExecutor
    import minixla
    import minixla.numpy as mnp

    f = minixla.jit(lambda x, w: (lambda h: h / mnp.sum(h, axis=1, keepdims=True))(mnp.exp(x @ w)))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((128, 128)).astype(np.float32) * 0.1 for _ in range(8)]
    w = rng.standard_normal((128, 128)).astype(np.float32) * 0.1
    want = [f(x, w) for x in xs]
    with ThreadPoolExecutor(8) as ex:
        for _ in range(5):
            got = list(ex.map(lambda x: f(x, w), xs))
            for g, e in zip(got, want):
                np.testing.assert_array_equal(g, e)
