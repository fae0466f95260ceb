"""Every primitive, end to end through minixla.jit on both backends, against JAX eager."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.core.primitive import registry, shape_rules, impl_rules
from minixla.hlo.lowering import lowering_rules
from minixla.testing import check_against_jax
from conftest import BACKENDS

f32, i32 = np.float32, np.int32
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 1e-40, -1e-40, 3e38, -3e38, 0.5,
                     2.5, -2.5, 88.0, -88.0, 100.0, -100.0], f32)
INT_EXTREMES = np.array([np.iinfo(i32).min, np.iinfo(i32).max, -1, 0, 1, 7, -7, 2, 31, 32], i32)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def check(f, jf, *args, backend, rtol=1e-6, atol=0.0):
    return check_against_jax(f, jf, *args, rtol=rtol, atol=atol, backends=(backend,))


def floats(rng, shape):
    return rng.standard_normal(shape).astype(f32) * 3


UNARY_FLOAT = [("neg", lax.neg, jax.lax.neg, 0), ("abs", lax.abs, jax.lax.abs, 0),
               ("sign", lax.sign, jax.lax.sign, 0), ("floor", lax.floor, jax.lax.floor, 0),
               ("ceil", lax.ceil, jax.lax.ceil, 0), ("sqrt", lax.sqrt, jax.lax.sqrt, 1e-6),
               ("rsqrt", lax.rsqrt, jax.lax.rsqrt, 1e-6), ("exp", lax.exp, jax.lax.exp, 2e-6),
               ("log", lax.log, jax.lax.log, 2e-6), ("tanh", lax.tanh, jax.lax.tanh, 2e-6),
               ("logistic", lax.logistic, jax.lax.logistic, 2e-6)]


@pytest.mark.parametrize("name,op,jop,rtol", UNARY_FLOAT, ids=[u[0] for u in UNARY_FLOAT])
def test_unary_float(name, op, jop, rtol, backend, rng):
    x = np.concatenate([SPECIALS, floats(rng, 200)]).reshape(2, -1)
    check(op, jop, x, backend=backend, rtol=rtol, atol=1e-37)


BINARY = [("add", lax.add, jax.lax.add), ("sub", lax.sub, jax.lax.sub), ("mul", lax.mul, jax.lax.mul),
          ("div", lax.div, jax.lax.div), ("max", lax.max, jax.lax.max), ("min", lax.min, jax.lax.min)]


@pytest.mark.parametrize("name,op,jop", BINARY, ids=[b[0] for b in BINARY])
def test_binary_float_bit_exact(name, op, jop, backend, rng):
    x = np.repeat(SPECIALS, len(SPECIALS))
    y = np.tile(SPECIALS, len(SPECIALS))
    res = check(op, jop, x, y, backend=backend, rtol=0)
    want = np.asarray(jop(x, y))
    got = res[backend]
    # bit-identical, including the sign of zero and NaN positions
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("name,op,jop", BINARY, ids=[b[0] for b in BINARY])
def test_binary_int32_with_extremes(name, op, jop, backend):
    x = np.repeat(INT_EXTREMES, len(INT_EXTREMES))
    y = np.tile(INT_EXTREMES, len(INT_EXTREMES))
    check(op, jop, x, y, backend=backend)  # x/0 = -1 and INT_MIN/-1 = INT_MIN, without a trap


@pytest.mark.parametrize("direction", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare(direction, backend):
    x = np.repeat(SPECIALS, len(SPECIALS))
    y = np.tile(SPECIALS, len(SPECIALS))
    check(getattr(lax, direction), getattr(jax.lax, direction), x, y, backend=backend)
    check(getattr(lax, direction), getattr(jax.lax, direction), INT_EXTREMES, INT_EXTREMES[::-1],
          backend=backend)


def test_logical_ops_on_bool_and_int(backend):
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    check(lax.bitwise_and, jax.lax.bitwise_and, a, b, backend=backend)
    check(lax.bitwise_or, jax.lax.bitwise_or, INT_EXTREMES, INT_EXTREMES[::-1], backend=backend)
    check(lax.bitwise_not, jax.lax.bitwise_not, a, backend=backend)


def test_integer_pow(backend, rng):
    x = floats(rng, (3, 4))
    for y in (0, 1, 2, 3, 5, -2):
        check(lambda a: lax.integer_pow(a, y), lambda a: jax.lax.integer_pow(a, y), x, backend=backend)
    check(lambda a: a ** 3, lambda a: a ** 3, INT_EXTREMES, backend=backend)


def test_select_n(backend, rng):
    p = rng.random((3, 4)) > 0.5
    a, b = floats(rng, (3, 4)), floats(rng, (3, 4))
    check(lax.select_n, jax.lax.select_n, p, a, b, backend=backend)
    w = rng.integers(0, 3, (3, 4)).astype(i32)
    check(lax.select_n, jax.lax.select_n, w, a, b, a * 2, backend=backend)
    check(mnp.where, jnp.where, p, a, 0.0, backend=backend)


@pytest.mark.parametrize("src,dst", [(f32, i32), (i32, f32), (f32, np.bool_), (np.bool_, f32),
                                     (i32, np.int8), (np.int8, i32), (f32, np.uint8), (i32, np.bool_)])
def test_convert_element_type(src, dst, backend):
    if src == f32:
        x = np.concatenate([SPECIALS, [2.9, -2.9, 255.5, 256.0, -129.0]]).astype(f32)
    elif src == np.bool_:
        x = np.array([True, False])
    else:
        x = np.concatenate([INT_EXTREMES, [127, 128, -128, -129, 255, 256]]).astype(src)
    check(lambda a: lax.convert_element_type(a, dst), lambda a: jax.lax.convert_element_type(jnp.asarray(a), dst), x,
          backend=backend)


def test_broadcast_reshape_transpose_slice_iota(backend, rng):
    x = floats(rng, (2, 3, 4))
    check(lambda a: lax.broadcast_in_dim(a, (5, 2, 3, 4), (1, 2, 3)),
          lambda a: jax.lax.broadcast_in_dim(a, (5, 2, 3, 4), (1, 2, 3)), x, backend=backend)
    check(lambda a: lax.broadcast_in_dim(a[:, :1, :], (2, 3, 4, 6), (0, 1, 2)),
          lambda a: jax.lax.broadcast_in_dim(a[:, :1, :], (2, 3, 4, 6), (0, 1, 2)), x, backend=backend)
    check(lambda a: lax.reshape(a, (4, 6)) * 2.0, lambda a: jax.lax.reshape(a, (4, 6)) * 2.0, x, backend=backend)
    check(lambda a: lax.transpose(a, (2, 0, 1)), lambda a: jax.lax.transpose(a, (2, 0, 1)), x, backend=backend)
    check(lambda a: lax.slice(a, (0, 1, 0), (2, 3, 4), (1, 1, 2)),
          lambda a: jax.lax.slice(a, (0, 1, 0), (2, 3, 4), (1, 1, 2)), x, backend=backend)
    check(lambda a: a[1, ::2, -1], lambda a: a[1, ::2, -1], x, backend=backend)
    check(lambda a: a + lax.broadcasted_iota(f32, (2, 3, 4), 1),
          lambda a: a + jax.lax.broadcasted_iota(f32, (2, 3, 4), 1), x, backend=backend)


@pytest.mark.parametrize("red,jred", [(lax.reduce_sum, jax.lax.reduce_sum), (lax.reduce_max, jax.lax.reduce_max),
                                      (lax.reduce_min, jax.lax.reduce_min)])
def test_reductions(red, jred, backend, rng):
    x = floats(rng, (3, 5, 7))
    for axes in [(0,), (1,), (2,), (0, 2), (0, 1, 2)]:
        check(lambda a: red(a, axes), lambda a: jred(a, axes), x, backend=backend, rtol=1e-5, atol=1e-5)
    check(lambda a: red(a, (1,)), lambda a: jred(a, (1,)), np.zeros((3, 0), f32), backend=backend)
    check(lambda a: red(a, (0,)), lambda a: jred(a, (0,)), rng.integers(-9, 9, (4, 3)).astype(i32),
          backend=backend)
    nan_x = x.copy()
    nan_x[1, 2, 3] = np.nan
    check(lambda a: red(a, (2,)), lambda a: jred(a, (2,)), nan_x, backend=backend, rtol=1e-5, atol=1e-5)


def test_dot_general(backend, rng):
    a, b = floats(rng, (2, 3, 4)), floats(rng, (2, 4, 5))
    check(lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
          lambda x, y: jax.lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), a, b,
          backend=backend, rtol=1e-5, atol=1e-5)
    c = floats(rng, (4, 2, 6))  # contract the first dim, batch the second: any order
    check(lambda x, y: lax.dot_general(x, y, (((2,), (0,)), ((0,), (1,)))),
          lambda x, y: jax.lax.dot_general(x, y, (((2,), (0,)), ((0,), (1,)))), a, c,
          backend=backend, rtol=1e-5, atol=1e-5)
    m, v = floats(rng, (7, 9)), floats(rng, (9,))
    check(lambda x, y: x @ y, lambda x, y: x @ y, m, v, backend=backend, rtol=1e-5, atol=1e-5)
    ia, ib = rng.integers(-5, 5, (3, 4)).astype(i32), rng.integers(-5, 5, (4, 2)).astype(i32)
    check(lambda x, y: x @ y, lambda x, y: x @ y, ia, ib, backend=backend)
    check(lambda x, y: x @ y, lambda x, y: x @ y, np.ones((3, 0), f32), np.ones((0, 2), f32), backend=backend)


CONV_CASES = [
    dict(strides=(1, 1), padding="SAME", dn=("NHWC", "HWIO", "NHWC")),
    dict(strides=(2, 2), padding="SAME", dn=("NHWC", "HWIO", "NHWC")),
    dict(strides=(1, 2), padding="VALID", dn=("NCHW", "OIHW", "NCHW")),
    dict(strides=(1, 1), padding=((2, 0), (1, 3)), dn=("NCHW", "OIHW", "NCHW"), rhs_dilation=(2, 1)),
    dict(strides=(2, 1), padding=((1, 1), (0, 1)), dn=("NCHW", "OIHW", "NCHW"), lhs_dilation=(2, 1)),
    dict(strides=(1, 1), padding="SAME", dn=("NHWC", "HWIO", "NHWC"), groups=2),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv_general_dilated(case, backend, rng):
    g = case.get("groups", 1)
    nhwc = case["dn"][0] == "NHWC"
    x = floats(rng, (2, 7, 6, 4) if nhwc else (2, 4, 7, 6))
    w = floats(rng, (3, 3, 4 // g, 6) if nhwc else (6, 4 // g, 3, 2))
    kw = dict(window_strides=case["strides"], padding=case["padding"], dimension_numbers=case["dn"],
              lhs_dilation=case.get("lhs_dilation"), rhs_dilation=case.get("rhs_dilation"),
              feature_group_count=g)
    check(lambda a, b: lax.conv_general_dilated(a, b, **kw),
          lambda a, b: jax.lax.conv_general_dilated(a, b, **kw), x, w, backend=backend, rtol=1e-4, atol=1e-4)


def test_conv_bias_relu_fused_matches(backend, rng):
    def f(x, w, b, lax=lax, np_=mnp):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return np_.maximum(y + b, 0.0)
    x, w, b = floats(rng, (2, 5, 5, 3)), floats(rng, (3, 3, 3, 4)), floats(rng, (4,))
    check(f, lambda *a: f(*a, lax=jax.lax, np_=jnp), x, w, b, backend=backend, rtol=1e-4, atol=1e-4)


def test_softmax_and_mixed_program(backend, rng):
    def softmax(x, np_=mnp):
        z = x - np_.max(x, axis=-1, keepdims=True)
        e = np_.exp(z)
        return e / np_.sum(e, axis=-1, keepdims=True)
    check(softmax, lambda x: softmax(x, jnp), floats(rng, (5, 33)), backend=backend, rtol=1e-5, atol=1e-6)


def test_scalars_and_size_zero(backend):
    check(lambda a, b: a * b + 1.0, lambda a, b: a * b + 1.0, f32(2.0), f32(3.0), backend=backend)
    check(lambda a: mnp.exp(a) * 2.0, lambda a: jnp.exp(a) * 2.0, np.zeros((0, 3), f32), backend=backend)
    check(lambda a: (a, a + 1.0), lambda a: (a, a + 1.0), np.ones(3, f32), backend=backend)
    check(lambda a: 3.0, lambda a: jnp.asarray(3.0), np.ones(3, f32), backend=backend)


def test_string_padding_with_lhs_dilation_is_an_error_like_jax():
    with pytest.raises(ValueError, match="lhs_dilation"):
        minixla.make_jaxpr(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME", lhs_dilation=(2, 2)))(
            np.ones((1, 1, 4, 4), f32), np.ones((1, 1, 3, 3), f32))


def test_every_primitive_has_every_rule():
    """Adding a primitive means adding a row to each stage's table; this fails if one is missing."""
    from minixla.backends.jax_xla import jax_rules
    from minixla.backends.llvm.elemental import emit_rules
    missing = []
    for name, prim in registry.items():
        for table, what in [(shape_rules, "shape rule"), (impl_rules, "eager impl"),
                            (lowering_rules, "HLO lowering")]:
            if prim not in table:
                missing.append(f"{name}: {what}")
    from minixla.hlo.evaluator import evaluate_rules
    hlo_opcodes = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "sign",
                   "floor", "ceil", "exponential", "log", "tanh", "logistic", "sqrt", "rsqrt", "not",
                   "and", "or", "compare", "select", "convert", "broadcast", "reshape", "transpose",
                   "slice", "iota", "reduce", "dot", "convolution", "constant", "fusion", "tuple",
                   # issue 3
                   "exponential-minus-one", "log-plus-one", "cbrt", "sine", "cosine", "tan", "erf", "erfc",
                   "is-finite", "round-nearest-afz", "round-nearest-even", "remainder", "power", "atan2",
                   "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic", "clamp",
                   "bitcast-convert", "reverse", "pad", "concatenate", "dynamic-slice", "dynamic-update-slice",
                   "gather", "scatter", "reduce-window"}
    for op in hlo_opcodes - set(jax_rules):
        missing.append(f"HLO {op}: jax hand-off rule")
    for op in hlo_opcodes - set(evaluate_rules):
        missing.append(f"HLO {op}: evaluator rule")
    kernel_ops = {"reduce", "dot", "convolution", "fusion", "tuple", "reshape", "scatter"}
    for op in hlo_opcodes - set(emit_rules) - kernel_ops:
        missing.append(f"HLO {op}: LLVM elemental emitter rule")
    from minixla.backends.llvm.kernels_extra import KERNELS
    assert "scatter" in KERNELS
    assert not missing, missing
