"""Dtypes and promotion: JAX's lattice and weak types, f16/bf16 computed in f32 and rounded per op
(bit-identical to JAX eager), and float64/int64 following ``jax_enable_x64``."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.testing import check_against_jax, eager_reference
from conftest import BACKENDS

bf16, f16, f32 = ml_dtypes.bfloat16, np.float16, np.float32


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def run(f, *args, backend):
    return minixla.jit(f, backend=backend)(*args)


def test_pinned_promotion_cases(backend):
    # int8(1) + 1000: the Python int is weak, so the result stays int8 and wraps to -23.
    out = run(lambda a: a + 1000, np.int8(1), backend=backend)
    assert out.dtype == np.int8 and int(out) == -23 == int(jnp.int8(1) + 1000)
    out = run(lambda a: a + 1.5, np.arange(3, dtype=np.int32), backend=backend)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.5, 2.5, 3.5])
    out = run(lambda a: a + 1.0, np.ones(3, bf16), backend=backend)
    assert out.dtype == bf16
    out = run(lambda a: a >> 2, np.array([128, 255, 1], np.uint8), backend=backend)
    assert out.dtype == np.uint8 and out.tolist() == [32, 63, 0]  # logical shift for unsigned
    out = run(lambda a: a >> 2, np.array([-128, 127], np.int8), backend=backend)
    assert out.tolist() == [-32, 31]  # arithmetic for signed


DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, f16, bf16, f32]
SCALARS = [True, 3, -2, 2.5]


@pytest.mark.parametrize("a", DTYPES, ids=lambda d: np.dtype(d).name)
def test_binary_promotion_matches_jax(a):
    """Result dtype and weak type of ``x + y`` for every pair of dtypes and Python scalars."""
    for b in DTYPES + SCALARS:
        x = np.ones(2, a)
        y = np.ones(2, b) if not isinstance(b, (bool, int, float)) else b
        if np.dtype(a) == np.bool_ and (isinstance(b, bool) or b is np.bool_):
            op, jop = mnp.logical_or, jnp.logical_or
        else:
            op, jop = mnp.add, jnp.add
        ours = minixla.make_jaxpr(op)(x, y).out_avals[0]
        theirs = jax.make_jaxpr(jop)(x, y).out_avals[0]
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type), (a, b)


@pytest.mark.parametrize("fn", ["exp", "sin", "sqrt", "floor_divide", "true_divide", "sum", "mean",
                                "cumsum", "argmax", "prod", "var", "abs", "square", "power"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, f16, bf16, f32],
                         ids=lambda d: np.dtype(d).name)
def test_numpy_result_dtypes_match_jax(fn, dtype):
    x = np.ones((2, 3), dtype)
    if fn in ("floor_divide", "true_divide", "power"):
        if dtype == np.bool_ and fn != "true_divide":
            return
        f, jf = (lambda a: getattr(mnp, fn)(a, a)), (lambda a: getattr(jnp, fn)(a, a))
    else:
        if fn == "square" and dtype == np.bool_:
            return
        f, jf = getattr(mnp, fn), getattr(jnp, fn)
    ours = minixla.make_jaxpr(f)(x).out_avals[0]
    theirs = jax.eval_shape(jf, x)
    assert ours.dtype == theirs.dtype, (fn, dtype)


NARROW_VALUES = np.array([0.0, -0.0, 1.0, -1.5, 3.140625, 1e-3, -7.25e-2, 65504.0, -65504.0, 3e4, 1e-5, 6e-8,
                          np.inf, -np.inf, np.nan, 255.9, 1.0009765625, 0.333333], f32)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min"])
def test_narrow_float_arithmetic_is_bit_exact(dtype, op, backend):
    with np.errstate(over="ignore"):
        v = NARROW_VALUES.astype(dtype)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    res = check_against_jax(getattr(lax, op), getattr(jax.lax, op), a, b, rtol=0, atol=0,
                            backends=(backend,))[backend]
    want = np.asarray(getattr(jax.lax, op)(a, b))
    ok = ~np.isnan(want.astype(f32))
    np.testing.assert_array_equal(res.view(np.uint16)[ok], want.view(np.uint16)[ok])  # sign of zero too


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_narrow_float_chains_round_after_every_op(dtype, backend, rng):
    # A fused chain must round after each op (as JAX eager does), not once at the end.
    x = rng.standard_normal(200).astype(dtype)
    y = rng.standard_normal(200).astype(dtype)
    f = lambda a, b: (a * b + a) * 3.0 - b / (a + 2.0)  # noqa: E731
    check_against_jax(f, lambda a, b: f(jnp.asarray(a), jnp.asarray(b)), x, y, rtol=0, atol=0, backends=(backend,))
    check_against_jax(lambda a: mnp.sqrt(mnp.abs(a)), lambda a: jnp.sqrt(jnp.abs(a)), x, rtol=0, atol=0,
                      backends=(backend,))


def test_bf16_intermediate_is_rounded_before_an_f32_op(backend):
    # Deep-fuzz find: XLA keeps a bf16 intermediate of a fusion in f32 unless xla_allow_excess_precision
    # is off. square(bf16(15.875)) = 252.015625 rounds to bf16 252.0, so + 0.125 is 252.125 in JAX eager;
    # the jax hand-off gave 252.140625.
    f = lambda a, b: mnp.square(a.astype(bf16)) + b  # noqa: E731
    out = run(f, np.array([15.875], f32), np.array([0.125], f32), backend=backend)
    assert out.dtype == f32 and out.tolist() == [252.125]
    x = np.linspace(10, 20, 1001).astype(f32)
    want = np.asarray(eager_reference(lambda a: jnp.square(jnp.asarray(a).astype(bf16)) + jnp.full_like(a, 0.125),
                                      x, backend=backend))
    np.testing.assert_array_equal(run(f, x, np.full_like(x, 0.125), backend=backend), want)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_narrow_float_transcendentals_and_reductions(dtype, backend, rng):
    x = (rng.standard_normal((4, 50)) * 2).astype(dtype)
    eps = float(ml_dtypes.finfo(dtype).eps)
    for name in ["exp", "log1p", "tanh", "sin", "logistic"]:
        f = getattr(lax, name)
        arg = np.abs(x) if name == "log1p" else x
        check_against_jax(f, getattr(jax.lax, name), arg, rtol=eps, atol=eps, backends=(backend,))
    check_against_jax(lambda a: mnp.sum(a, 1), lambda a: jnp.sum(a, 1), x, rtol=eps, atol=eps, backends=(backend,))
    check_against_jax(lambda a: mnp.mean(a, 0), lambda a: jnp.mean(a, 0), x, rtol=eps, atol=eps,
                      backends=(backend,))
    check_against_jax(lambda a: a @ a.T, lambda a: jnp.asarray(a) @ jnp.asarray(a).T, x, rtol=4 * eps, atol=8 * eps,
                      backends=(backend,))


@pytest.mark.parametrize("src,dst", [(f32, bf16), (f32, f16), (bf16, f16), (f16, bf16), (np.int32, bf16),
                                     (np.int32, f16), (bf16, f32), (f16, np.int8), (bf16, np.uint8)])
def test_narrow_float_conversions(src, dst, backend, rng):
    vals = np.concatenate([NARROW_VALUES, rng.standard_normal(50).astype(f32) * 1000,
                           # f32 values just around bf16/f16 rounding midpoints (ties to even)
                           np.array([1.00390625, 1.01171875, 1.0004883, 1.0014648, 3.3895314e38], f32)])
    with np.errstate(over="ignore", invalid="ignore"):
        x = vals.astype(src)
    check_against_jax(lambda a: lax.convert_element_type(a, dst), lambda a: jax.lax.convert_element_type(jnp.asarray(a), dst),
                      x, rtol=0, atol=0, backends=(backend,))



def test_x64_float64_and_int64(x64, backend, rng):
    x = rng.standard_normal((3, 5))
    i = rng.integers(-2 ** 40, 2 ** 40, (3, 5))
    assert x.dtype == np.float64 and i.dtype == np.int64
    f = lambda a, b: (a * 2.0 + 1, b // 3 + (b >> 7), a.sum(0), b.sum(1), a + b)  # noqa: E731
    res = check_against_jax(lambda a, b: f(a, b), lambda a, b: f(jnp.asarray(a), jnp.asarray(b)), x, i,
                            rtol=1e-15, atol=0, backends=(backend,))[backend]
    assert [r.dtype for r in res] == [np.float64, np.int64, np.float64, np.int64, np.float64]
    out = run(lambda a: a + 1.5, np.arange(3), backend=backend)  # int64 + weak float -> float64
    assert out.dtype == np.float64
    check_against_jax(mnp.exp, jnp.exp, x, rtol=1e-14, atol=0, backends=(backend,))


def test_without_x64_float64_inputs_become_float32(backend):
    out = run(lambda a: a * 2, np.ones(3, np.float64), backend=backend)
    assert out.dtype == np.float32


_SCALAR_TYPES = ["float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
                 "uint8", "uint16", "uint32", "uint64", "bool_"]


def test_dtype_names_convert_like_jax_under_every_transformation():
    """``mnp.float16(x)`` converts a traced value (it raised), as ``jnp.float16(x)``: every dtype
    name, eagerly, under ``jit`` on both backends (one program converting to all of them), under
    ``vmap`` and ``grad``; and it still works as a dtype."""
    x = np.array([-2.5, 0.0, 1.5, 300.0, np.nan], np.float32)
    want = [np.asarray(getattr(jnp, n)(jnp.asarray(x))) for n in _SCALAR_TYPES]

    def all_types(v):
        return [getattr(mnp, n)(v) for n in _SCALAR_TYPES]
    runs = {"eager": all_types(x), "vmap": minixla.vmap(all_types)(x)}
    for backend in BACKENDS:
        runs[backend] = minixla.jit(all_types, backend=backend)(x)
    for how, outs in runs.items():
        for name, got, ref in zip(_SCALAR_TYPES, outs, want):
            got = np.asarray(got)
            assert got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=True), (how, name)
    floats = [n for n in _SCALAR_TYPES if n.startswith(("float", "bfloat"))]
    g = minixla.grad(lambda v: sum(getattr(mnp, n)(v).astype(np.float32) * 2 for n in floats))
    gj = jax.grad(lambda v: sum(getattr(jnp, n)(v).astype(np.float32) * 2 for n in floats))
    assert g(np.float32(1.5)) == gj(np.float32(1.5))
    # still NumPy's dtypes where a dtype is expected
    assert mnp.float32 == np.float32 and np.dtype(mnp.bfloat16) == ml_dtypes.bfloat16
    assert {np.int8: 1}[mnp.int8] == 1 and isinstance(np.float16(1), mnp.float16)
    assert mnp.zeros(2, mnp.bfloat16).dtype == ml_dtypes.bfloat16
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        mnp.int8(300)  # (as jnp.int8(300))
    with pytest.raises(minixla.errors.UnsupportedError, match="complex"):
        mnp.asarray(1.0, jnp.complex64)  # (no complex dtypes: mnp has no complex64 name)
