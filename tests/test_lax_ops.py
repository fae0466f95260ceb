"""The lax surface of issue 3, end to end on both backends against JAX eager, edge cases first.

Integer, bool and basic float arithmetic must be bit-identical; transcendental functions are
compared in ulps (``max_ulp``): those computed through libm in f64 (sin, cos, tan, atan2,
pow, cbrt, erf, erfc) are within 2 ulp of JAX's f32 results on the ranges tested here.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.core import errors
from minixla.testing import check_against_jax, eager_reference
from conftest import BACKENDS

f32, i32 = np.float32, np.int32
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5,
                     -2.5, 1e-40, -1e-40, 3e38, -3e38, 1e-7, 88.0, -103.0, 0.49999997, 7.0], f32)
INT_DTYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def check(f, jf, *args, backend, rtol=0.0, atol=0.0):
    return check_against_jax(f, jf, *args, rtol=rtol, atol=atol, backends=(backend,))[backend]


def ulp_distance(got, want):
    """Distance in float32 ulps (NaN vs NaN = 0, NaN vs number = huge)."""
    got, want = np.asarray(got, f32), np.asarray(want, f32)
    def key(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(key(got) - key(want))
    both_nan = np.isnan(got) & np.isnan(want)
    one_nan = np.isnan(got) ^ np.isnan(want)
    return np.where(both_nan, 0, np.where(one_nan, 1 << 40, d))


def max_ulp(f, jf, *args, backend):
    got = minixla.jit(f, backend=backend)(*args)
    want = np.asarray(eager_reference(jf, *args, backend=backend))
    assert got.dtype == want.dtype and got.shape == want.shape
    return int(ulp_distance(got, want).max())


def pairs(values):
    values = np.asarray(values)
    return np.repeat(values, len(values)), np.tile(values, len(values))


# ---------------------------------------------------------------------------------------
# Elementwise.

NORMAL_SPECIALS = SPECIALS[(np.abs(SPECIALS) >= 1e-37) | ~np.isfinite(SPECIALS) | (SPECIALS == 0)]


def test_libm_transcendentals_within_2_ulp(backend, rng):
    # Subnormal inputs are left out: XLA:CPU runs with denormals-are-zero, and its sin/tan/cbrt
    # then disagree with themselves (sin(1e-40) = 1e-40 but cbrt(1e-40) = -5.6e-16); ours give ±0.
    x = np.concatenate([NORMAL_SPECIALS, rng.uniform(-20, 20, 300).astype(f32)])
    for name in ["sin", "cos", "tan", "cbrt", "erf"]:
        assert max_ulp(getattr(lax, name), getattr(jax.lax, name), x, backend=backend) <= 2, name
    # XLA's f32 erfc loses accuracy in the far tail (~50 ulp at x = 8.6). The LLVM backend runs
    # XLA's algorithm (math_xla.erfc), so it is JAX's bits there too (tests/test_llvm_xla_math.py);
    # the hand-off runs XLA's own.
    assert max_ulp(lax.erfc, jax.lax.erfc, x, backend=backend) <= (0 if backend == "llvm" else 64)
    a, b = pairs(np.concatenate([NORMAL_SPECIALS, rng.uniform(-5, 5, 12).astype(f32)]))
    assert max_ulp(lax.atan2, jax.lax.atan2, a, b, backend=backend) <= 2
    assert max_ulp(lax.pow, jax.lax.pow, np.abs(a), b, backend=backend) <= 2
    assert max_ulp(lax.pow, jax.lax.pow, a, np.round(b), backend=backend) <= 2  # negative bases


def test_inline_transcendentals_within_4_ulp(backend, rng):
    x = np.concatenate([NORMAL_SPECIALS, rng.uniform(-30, 30, 300).astype(f32)])
    for name in ["expm1", "exp2"]:
        assert max_ulp(getattr(lax, name), getattr(jax.lax, name), x, backend=backend) <= 4, name
    assert max_ulp(lax.log1p, jax.lax.log1p, np.abs(x) - 0.5, backend=backend) <= 4


@pytest.mark.parametrize("method", [0, 1])
def test_round_both_methods(method, backend):
    x = np.concatenate([SPECIALS, np.arange(-4, 4.5, 0.5, dtype=f32), [0.49999997, -0.49999997, 8388609.0]])
    check(lambda a: lax.round(a, method), lambda a: jax.lax.round(a, method), x.astype(f32), backend=backend)


def test_is_finite_and_sign_of_specials(backend):
    check(lax.is_finite, jax.lax.is_finite, SPECIALS, backend=backend)


def test_float_rem_and_clamp(backend):
    a, b = pairs(SPECIALS)
    res = check(lax.rem, jax.lax.rem, a, b, backend=backend)
    want = np.asarray(jax.lax.rem(a, b))
    np.testing.assert_array_equal(np.signbit(res), np.signbit(want))  # fmod keeps the dividend's sign
    check(lambda x: lax.clamp(-1.0, x, 2.0), lambda x: jax.lax.clamp(-1.0, x, 2.0), SPECIALS, backend=backend)
    lo, hi = SPECIALS[::-1].copy(), np.abs(SPECIALS[::-1])
    check(lax.clamp, jax.lax.clamp, lo, SPECIALS, hi, backend=backend)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_div_rem_every_width(dtype, backend):
    info = np.iinfo(dtype)
    vals = np.array(sorted({info.min, info.max, 0, 1, 2, 7, info.max // 3} | (
        {-1, -2, -7, info.min + 1} if info.min < 0 else set())), dtype)
    a, b = pairs(vals)
    check(lax.div, jax.lax.div, a, b, backend=backend)   # x/0 = -1, INT_MIN/-1 = INT_MIN, no trap
    check(lax.rem, jax.lax.rem, a, b, backend=backend)   # x%0 = x, INT_MIN%-1 = 0


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_shifts_and_bitwise_every_width(dtype, backend):
    info = np.iinfo(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    x = np.array([info.min, info.max, 0, 1, 5, info.max // 2 + 1, 3], dtype)
    amounts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits] + ([-1, -bits] if info.min < 0 else [])
    a = np.repeat(x, len(amounts))
    s = np.tile(np.array(amounts).astype(dtype), len(x))
    for name in ["shift_left", "shift_right_logical", "shift_right_arithmetic"]:
        check(getattr(lax, name), getattr(jax.lax, name), a, s, backend=backend)
    check(lax.bitwise_xor, jax.lax.bitwise_xor, a, s, backend=backend)
    check(lax.bitwise_not, jax.lax.bitwise_not, x, backend=backend)


@pytest.mark.parametrize("src", [f32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("dst", INT_DTYPES + [np.int64, np.bool_])
def test_float_to_int_truncates_saturates_nan_to_zero(src, dst, backend):
    # (JAX's reference gets a jax.Array: JAX >= 0.11 converts a numpy operand on the host with
    # numpy's astype, whose out-of-range results are the C cast's, not XLA's saturation)
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.9, -0.9, 2.5, -2.5, 127.5, 128.0, -129.0, 255.9, 256.0,
                  65504.0, -65504.0, 3e9, -3e9, 1e30, -1e30], f32)
    with np.errstate(over="ignore"):
        x = x.astype(src)
    check(lambda a: lax.convert_element_type(a, dst), lambda a: jax.lax.convert_element_type(jnp.asarray(a), dst), x,
          backend=backend)


@pytest.mark.parametrize("src", INT_DTYPES)
def test_narrowing_int_conversion_wraps(src, backend):
    info = np.iinfo(src)
    x = np.array([info.min, info.max, 0, 1, 127, 128, 255, 256, 200], np.int64).astype(src)
    for dst in INT_DTYPES + [f32, np.float16, ml_dtypes.bfloat16, np.bool_]:
        check(lambda a: lax.convert_element_type(a, dst), lambda a: jax.lax.convert_element_type(jnp.asarray(a), dst), x,
              backend=backend)


@pytest.mark.parametrize("src,dst", [(f32, i32), (i32, f32), (np.float16, np.int16), (np.int16, np.float16),
                                     (ml_dtypes.bfloat16, np.uint16), (np.uint16, ml_dtypes.bfloat16),
                                     (np.uint32, np.int32)])
def test_bitcast_convert_type(src, dst, backend, rng):
    if np.dtype(src).kind in "iu":
        x = rng.integers(np.iinfo(src).min, np.iinfo(src).max, 64, dtype=np.int64).astype(src)
        x = x[~np.isnan(x.view(dst).astype(f32))] if np.dtype(dst).kind == "f" or dst == ml_dtypes.bfloat16 else x
    else:
        x = SPECIALS[~np.isnan(SPECIALS)].astype(src)
    check(lambda a: lax.bitcast_convert_type(a, dst), lambda a: jax.lax.bitcast_convert_type(a, dst), x,
          backend=backend)


# ---------------------------------------------------------------------------------------
# Structural ops.

X = np.arange(2 * 3 * 4, dtype=f32).reshape(2, 3, 4) - 7.5


def test_rev_squeeze_expand_dims(backend):
    check(lambda a: lax.rev(a, (0, 2)), lambda a: jax.lax.rev(a, (0, 2)), X, backend=backend)
    check(lambda a: lax.squeeze(a[:, :1], (1,)), lambda a: jax.lax.squeeze(a[:, :1], (1,)), X, backend=backend)
    check(lambda a: lax.expand_dims(a, (0, 3)), lambda a: jax.lax.expand_dims(a, (0, 3)), X, backend=backend)


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0), (3, 1, 0)],
    [(-1, 1, 1), (2, -2, 2), (0, -3, 0)],       # negative (cropping) and interior padding
    [(0, 0, 3), (-2, -1, 0), (1, 1, 1)],
])
def test_pad(config, backend):
    check(lambda a: lax.pad(a, -0.0, config), lambda a: jax.lax.pad(a, -0.0, config), X, backend=backend)


def test_pad_of_empty_operand(backend):
    check(lambda a: lax.pad(a, 3.0, [(1, 1, 2), (0, 1, 0)]), lambda a: jax.lax.pad(a, 3.0, [(1, 1, 2), (0, 1, 0)]),
          np.zeros((0, 2), f32), backend=backend)


def test_concatenate_incl_size_zero(backend):
    check(lambda a: lax.concatenate([a, a * 2, a[:, :0], a[:, 1:]], 1),
          lambda a: jax.lax.concatenate([a, a * 2, a[:, :0], a[:, 1:]], 1), X, backend=backend)
    check(lambda a: lax.concatenate([a[:0], a[:0]], 0), lambda a: jax.lax.concatenate([a[:0], a[:0]], 0), X,
          backend=backend)


@pytest.mark.parametrize("start", [(0, 0, 0), (1, 2, 3), (5, -3, 1), (-1, 1, 100)])
def test_dynamic_slice_and_update_clamp(start, backend):
    idx = [np.int32(s) for s in start]
    check(lambda a, *i: lax.dynamic_slice(a, i, (1, 2, 3)), lambda a, *i: jax.lax.dynamic_slice(a, i, (1, 2, 3)),
          X, *idx, backend=backend)
    u = -np.ones((1, 2, 3), f32)
    check(lambda a, b, *i: lax.dynamic_update_slice(a, b, i),
          lambda a, b, *i: jax.lax.dynamic_update_slice(a, b, i), X, u, *idx, backend=backend)


def test_dynamic_slice_with_uint8_and_python_int_indices(backend):
    check(lambda a, k: lax.dynamic_slice(a, (k, 1, 2), (2, 2, 2)),
          lambda a, k: jax.lax.dynamic_slice(a, (k, np.uint8(1), np.uint8(2)), (2, 2, 2)), X, np.uint8(200),
          backend=backend)


def test_gather_forms(backend):
    dn = lax.GatherDimensionNumbers((1, 2), (0,), (0,))
    jdn = jax.lax.GatherDimensionNumbers((1, 2), (0,), (0,))
    idx = np.array([[1], [0], [7], [-3]], i32)  # out-of-range starts are clamped
    check(lambda a, i: lax.gather(a, i, dn, (1, 3, 4)),
          lambda a, i: jax.lax.gather(a, i, jdn, (1, 3, 4), mode="clip"), X, idx, backend=backend)
    # windows: slices of size 2x2 at 2-d start points, batch dims in the middle of the output
    dn2 = lax.GatherDimensionNumbers((0, 3), (0,), (0, 2))
    jdn2 = jax.lax.GatherDimensionNumbers((0, 3), (0,), (0, 2))
    idx2 = np.array([[[0, 0], [1, 3]], [[1, 1], [0, 2]]], np.int8)
    check(lambda a, i: lax.gather(a, i, dn2, (1, 2, 2)),
          lambda a, i: jax.lax.gather(a, i, jdn2, (1, 2, 2), mode="clip"), X, idx2, backend=backend)


@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"])
def test_scatter_forms(name, backend, rng):
    dn = lax.ScatterDimensionNumbers((1,), (0, 2), (0, 2))
    jdn = jax.lax.ScatterDimensionNumbers((1,), (0, 2), (0, 2))
    idx = np.array([[1, 3], [0, 0], [1, 3], [2, 0], [-1, 1], [0, 4]], i32)  # repeats; out of range dropped
    upd = rng.standard_normal((6, 3)).astype(f32)
    f = getattr(lax, name)
    jf = getattr(jax.lax, name)
    check(lambda a, i, u: f(a, i, u, dn), lambda a, i, u: jf(a, i, u, jdn, mode="drop"), X, idx, upd,
          backend=backend, rtol=1e-6)
    iupd = rng.integers(-5, 5, (6, 3)).astype(i32)
    check(lambda a, i, u: f(a, i, u, dn), lambda a, i, u: jf(a, i, u, jdn, mode="drop"), X.astype(i32), idx, iupd,
          backend=backend)


# ---------------------------------------------------------------------------------------
# Reductions.

@pytest.mark.parametrize("name", ["reduce_prod", "reduce_sum", "reduce_max", "reduce_min"])
def test_reductions_over_size_zero_axes_give_init(name, backend):
    for x in [np.zeros((3, 0), f32), np.zeros((0, 2), i32), np.zeros((2, 0, 2), np.uint8)]:
        check(lambda a: getattr(lax, name)(a, (1,) if a.shape[1] == 0 else (0,)),
              lambda a: getattr(jax.lax, name)(a, (1,) if a.shape[1] == 0 else (0,)), x, backend=backend)


@pytest.mark.parametrize("name", ["reduce_and", "reduce_or"])
def test_reduce_and_or(name, backend, rng):
    b = rng.random((4, 5)) > 0.3
    for axes in [(0,), (1,), (0, 1)]:
        check(lambda a: getattr(lax, name)(a, axes), lambda a: getattr(jax.lax, name)(a, axes), b, backend=backend)
    check(lambda a: getattr(lax, name)(a, (1,)), lambda a: getattr(jax.lax, name)(a, (1,)),
          np.zeros((3, 0), bool), backend=backend)
    ints = rng.integers(-100, 100, (4, 5)).astype(np.int16)
    check(lambda a: getattr(lax, name)(a, (1,)), lambda a: getattr(jax.lax, name)(a, (1,)), ints, backend=backend)


def test_reduce_prod_wraps_and_propagates(backend, rng):
    check(lambda a: lax.reduce_prod(a, (1,)), lambda a: jax.lax.reduce_prod(a, (1,)),
          rng.integers(-100, 100, (3, 9)).astype(i32), backend=backend)
    check(lambda a: lax.reduce_prod(a, (0,)), lambda a: jax.lax.reduce_prod(a, (0,)),
          SPECIALS.reshape(-1, 1)[:6], backend=backend)


@pytest.mark.parametrize("which", ["argmax", "argmin"])
def test_argmax_nan_ties_and_zeros(which, backend):
    x = np.array([[1.0, np.nan, 3.0, np.nan],     # first NaN wins
                  [2.0, 5.0, 5.0, -1.0],          # first of the ties
                  [-0.0, 0.0, -0.0, 0.0],         # -0.0 == 0.0: a tie
                  [-np.inf, -np.inf, np.inf, np.inf]], f32)
    for axis in (0, 1):
        check(lambda a: getattr(lax, which)(a, axis, np.int32), lambda a: getattr(jax.lax, which)(a, axis, np.int32),
              x, backend=backend)
    ints = np.array([[3, 1, 3], [-2, -2, 0]], np.int8)
    check(lambda a: getattr(lax, which)(a, 1, np.int32), lambda a: getattr(jax.lax, which)(a, 1, np.int32), ints,
          backend=backend)
    bools = np.array([[False, True, True], [False, False, False]])
    check(lambda a: getattr(lax, which)(a, 1, np.int32), lambda a: getattr(jax.lax, which)(a, 1, np.int32), bools,
          backend=backend)


def test_argmax_of_empty_axis_raises_like_jax():
    with pytest.raises(ValueError, match="non-empty"):
        minixla.make_jaxpr(lambda a: lax.argmax(a, 0, np.int32))(np.zeros((0, 3), f32))
    with pytest.raises(ValueError):
        jax.lax.argmax(np.zeros((0, 3), f32), 0, np.int32)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(name, reverse, backend, rng):
    f, jf = getattr(lax, name), getattr(jax.lax, name)
    ints = rng.integers(-50, 50, (3, 7)).astype(i32)
    for axis in (0, 1):
        check(lambda a: f(a, axis, reverse), lambda a: jf(a, axis, reverse), ints, backend=backend)
    x = rng.standard_normal((4, 6)).astype(f32)
    x[1, 2] = np.nan
    check(lambda a: f(a, 1, reverse), lambda a: jf(a, 1, reverse), x, backend=backend, rtol=1e-5, atol=1e-6)
    check(lambda a: f(a, 0, reverse), lambda a: jf(a, 0, reverse), np.zeros((0, 3), f32), backend=backend)


# ---------------------------------------------------------------------------------------
# Contractions.

def test_dot_general_dims_in_any_order(backend, rng):
    a = rng.standard_normal((3, 2, 4, 5)).astype(f32)
    b = rng.standard_normal((5, 4, 3, 6)).astype(f32)
    dn = (((3, 2), (0, 1)), ((0,), (2,)))   # contract (5,4) in swapped order, batch lhs 0 with rhs 2
    check(lambda x, y: lax.dot_general(x, y, dn), lambda x, y: jax.lax.dot_general(x, y, dn), a, b,
          backend=backend, rtol=1e-5, atol=1e-5)
    ia = rng.integers(-100, 100, (4, 6)).astype(np.int8)
    ib = rng.integers(-100, 100, (6, 3)).astype(np.int8)
    dn2 = (((1,), (0,)), ((), ()))
    check(lambda x, y: lax.dot_general(x, y, dn2), lambda x, y: jax.lax.dot_general(x, y, dn2), ia, ib,
          backend=backend)  # int8 accumulation wraps
    check(lambda x, y: lax.dot_general(x, y, dn2, preferred_element_type=np.int32),
          lambda x, y: jax.lax.dot_general(x, y, dn2, preferred_element_type=np.int32), ia, ib, backend=backend)


@pytest.mark.parametrize("case", [
    dict(lhs=(1, 2, 9), rhs=(4, 2, 3), strides=(2,), padding="SAME", dn=("NCH", "OIH", "NCH")),
    dict(lhs=(2, 8, 7, 3), rhs=(2, 3, 3, 5), strides=(3, 2), padding="SAME", dn=("NHWC", "HWIO", "NHWC"),
         rhs_dilation=(2, 1)),
    dict(lhs=(1, 4, 6, 6), rhs=(4, 1, 3, 3), strides=(1, 1), padding=((-1, 2), (0, 0)),
         dn=("NCHW", "OIHW", "NCHW"), groups=4),  # depthwise, negative padding
    dict(lhs=(1, 2, 4, 3, 3), rhs=(3, 2, 2, 2, 1), strides=(1, 2, 1), padding="VALID",
         dn=("NCDHW", "OIDHW", "NCDHW"), lhs_dilation=(1, 2, 1)),
])
def test_conv_more_forms(case, backend, rng):
    x = rng.standard_normal(case["lhs"]).astype(f32)
    w = rng.standard_normal(case["rhs"]).astype(f32)
    padding = case["padding"]
    if case.get("lhs_dilation") and isinstance(padding, str):
        padding = [(0, 0)] * (len(case["lhs"]) - 2)
    kw = dict(window_strides=case["strides"], padding=padding, dimension_numbers=case["dn"],
              lhs_dilation=case.get("lhs_dilation"), rhs_dilation=case.get("rhs_dilation"),
              feature_group_count=case.get("groups", 1))
    check(lambda a, b: lax.conv_general_dilated(a, b, **kw), lambda a, b: jax.lax.conv_general_dilated(a, b, **kw),
          x, w, backend=backend, rtol=1e-4, atol=1e-4)


def test_shape_errors_name_the_op_and_line():
    with pytest.raises(errors.ShapeError, match=r"(?s)pad.*operands: \(f32\[2,3,4\], f32\[\]\).*test_lax_ops"):
        minixla.make_jaxpr(lambda a: lax.pad(a, 0.0, [(0, 0, 0)]))(X)
    with pytest.raises(errors.ShapeError, match="concatenate"):
        minixla.make_jaxpr(lambda a: lax.concatenate([a, a[0]], 0))(X)
    with pytest.raises(errors.DTypeError, match="shift_left"):
        minixla.make_jaxpr(lambda a: lax.shift_left(a, a))(X)


def test_bad_shapes_and_indices_raise_minixla_errors():
    """Regressions (user report): a float start index was truncated; a negative or huge result
    shape reached numpy or aborted XLA. Each now raises a minixla error naming the op."""
    from minixla.core import errors
    x = np.ones((3, 3), np.float32)
    with pytest.raises(errors.DTypeError, match="dynamic_slice: start indices must be integers"):
        minixla.jit(lambda x: lax.dynamic_slice(x, (0.5, 0), (1, 1)))(x)
    for backend in ("llvm", "jax"):
        with pytest.raises(errors.ShapeError, match="negative dimension"):
            minixla.jit(lambda x: mnp.zeros((-1, 3)) + x, backend=backend)(np.float32(1))
        with pytest.raises(errors.ShapeError, match="more than the"):
            minixla.jit(lambda x: mnp.zeros((2 ** 40, 2 ** 40)) + x, backend=backend)(np.float32(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_slice_and_index_in_dim(backend):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

    def f(L, x, i):
        return (L.dynamic_slice_in_dim(x, i, 2, axis=2), L.dynamic_index_in_dim(x, i, axis=-2, keepdims=False),
                L.dynamic_index_in_dim(x, i, 1))
    for i in (np.int32(1), np.int32(-1), np.int32(7)):
        got = minixla.jit(lambda x, i: f(lax, x, i), backend=backend)(x, i)
        for g, w in zip(got, f(jax.lax, x, i)):
            np.testing.assert_array_equal(g, np.asarray(w))
