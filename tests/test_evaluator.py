"""The NumPy HLO evaluator gives XLA's (JAX eager's) values, edge cases included."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax as jlax

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.backends.jax_xla import jax_rules
from minixla.hlo import Shape, parse
from minixla.hlo.evaluator import evaluate, evaluate_rules
from minixla.hlo.printer import format_literal
from minixla.hlo.verifier import shape_rules

F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3e38, -7.0, 0.5], np.float32)
S32 = np.array([-2**31, -1, 0, 1, 2**31 - 1, 7, -7, 2, 3, -3], np.int32)
U8 = np.array([0, 1, 2, 127, 128, 254, 255, 3, 9, 200], np.uint8)


def eager(f, *xs):
    with jax.disable_jit():
        return np.asarray(f(*[jnp.asarray(x) for x in xs]))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind == "f":
        return bool(np.all((np.isnan(a) & np.isnan(b)) | (a.view(f"u{a.itemsize}") == b.view(f"u{a.itemsize}"))))
    return bool(np.array_equal(a, b))


def run(opcode, args, result, attrs=""):
    params = [f"  %p{k} = {Shape(a.dtype, a.shape)} parameter({k})" for k, a in enumerate(args)]
    header = ", ".join(f"p{k}: {str(Shape(a.dtype, a.shape)).split('{')[0]}" for k, a in enumerate(args))
    ops = ", ".join(f"%p{k}" for k in range(len(args)))
    n = args[0].shape[0]
    text = (f"HloModule t\n\nENTRY %main ({header}) -> {result}[{n}] {{\n" + "\n".join(params)
            + f"\n  ROOT %r = {result}[{n}] {opcode}({ops}){attrs}\n}}\n")
    return evaluate(parse(text), *args)


def pairs(v):
    return np.repeat(v, len(v)), np.tile(v, len(v))


BINARY = [
    ("divide", S32, "s32", jlax.div), ("remainder", S32, "s32", jlax.rem), ("multiply", S32, "s32", jlax.mul),
    ("add", S32, "s32", jlax.add), ("subtract", U8, "u8", jlax.sub), ("divide", U8, "u8", jlax.div),
    ("remainder", U8, "u8", jlax.rem), ("maximum", S32, "s32", jlax.max),
    ("maximum", F32, "f32", jlax.max), ("minimum", F32, "f32", jlax.min), ("divide", F32, "f32", jlax.div),
    ("multiply", F32, "f32", jlax.mul), ("add", F32, "f32", jlax.add), ("remainder", F32, "f32", jlax.rem),
    ("and", U8, "u8", jlax.bitwise_and), ("or", S32, "s32", jlax.bitwise_or),
]


@pytest.mark.parametrize("opcode, values, rtype, ref", BINARY, ids=[f"{b[0]}-{b[2]}" for b in BINARY])
def test_binary_matches_jax_eager(opcode, values, rtype, ref):
    a, b = pairs(values)
    assert same_bits(run(opcode, [a, b], rtype), eager(ref, a, b))


@pytest.mark.parametrize("direction, ref", [("EQ", jlax.eq), ("NE", jlax.ne), ("LT", jlax.lt), ("GE", jlax.ge)])
def test_compare_matches_jax_eager(direction, ref):
    a, b = pairs(F32)
    assert same_bits(run("compare", [a, b], "pred", f", direction={direction}"), eager(ref, a, b))


CONVERTS = [("s32", np.int32), ("u8", np.uint8), ("s8", np.int8), ("pred", np.bool_), ("f16", np.float16)]


@pytest.mark.parametrize("name, dtype", CONVERTS)
def test_convert_saturates_like_jax(name, dtype):
    x = np.concatenate([F32, np.array([2.0**31, -2.0**31 - 256, 4e9, 255.9, -0.9, 300.0, 65520.0], np.float32)])
    assert same_bits(run("convert", [x], name), eager(lambda v: jlax.convert_element_type(v, dtype), x))


@pytest.mark.parametrize("opcode, ref", [("sign", jlax.sign), ("negate", jlax.neg), ("abs", jlax.abs),
                                         ("floor", jlax.floor), ("ceil", jlax.ceil), ("sqrt", jlax.sqrt)])
def test_unary_matches_jax_eager(opcode, ref):
    assert same_bits(run(opcode, [F32], "f32"), eager(ref, F32))
    if opcode in ("sign", "negate", "abs"):
        assert same_bits(run(opcode, [S32], "s32"), eager(ref, S32))


@pytest.mark.parametrize("opcode, ref", [("exponential", jlax.exp), ("log", jlax.log), ("tanh", jlax.tanh),
                                         ("logistic", jlax.logistic), ("rsqrt", jlax.rsqrt)])
def test_transcendentals_are_close(opcode, ref):
    x = np.array([0.5, 1.0, 2.0, 10.0, 0.0, np.inf, np.nan, -1.0], np.float32)
    np.testing.assert_allclose(run(opcode, [x], "f32"), eager(ref, x), rtol=3e-6)


def test_reductions_nan_and_signed_zero():
    x = np.array([[-0.0, 0.0, 1.0], [np.nan, 2.0, -1.0], [0.0, -0.0, -np.inf]], np.float32)
    f = lambda a: (mnp.max(a, axis=1), mnp.min(a, axis=1), mnp.sum(a, axis=0))  # noqa: E731
    lowered = minixla.jit(f).lower(x)
    got = evaluate(lowered.hlo_module, x)
    want = (eager(lambda a: jnp.max(a, axis=1), x), eager(lambda a: jnp.min(a, axis=1), x),
            eager(lambda a: jnp.sum(a, axis=0), x))
    for g, w in zip(got, want):
        assert same_bits(g, w)


def test_dot_and_conv_close_to_jax(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    x = rng.standard_normal((2, 7, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 6)).astype(np.float32)

    def f(a, b, x, w, np_=mnp, lax_=lax):
        d = lax_.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
        c = lax_.conv_general_dilated(x, w, (2, 1), [(1, 2), (0, 1)], lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
        return d, c
    lowered = minixla.jit(f).lower(a, b, x, w)
    got = evaluate(lowered.hlo_module, a, b, x, w)
    with jax.disable_jit():
        want = f(a, b, x, w, jnp, jlax)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-5)


def test_fusions_evaluate_like_the_backend():
    f = lambda a, b: mnp.sum(mnp.exp(a) * b, axis=1) + mnp.max(a)  # noqa: E731
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    b = np.full((3, 4), 0.5, np.float32)
    compiled = minixla.jit(f).lower(a, b).compile()
    assert "fusion(" in compiled.as_text()
    np.testing.assert_allclose(evaluate(compiled.hlo_module, a, b), compiled(a, b), rtol=1e-6)


def test_argument_errors():
    m = minixla.jit(lambda a: a + 1.0).lower(np.ones(3, np.float32)).hlo_module
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        evaluate(m, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        evaluate(m, np.ones(4))


def test_every_backend_opcode_has_evaluator_and_verifier_rows():
    backend_opcodes = set(jax_rules)
    assert not backend_opcodes - set(evaluate_rules), "evaluate_rules lacks rows"
    assert not backend_opcodes - set(shape_rules), "verifier shape_rules lacks rows"


def test_literal_text_round_trip_of_extremes():
    x = np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny, -0.0, 1 / 3], np.float32)
    assert same_bits(parse(f"HloModule t\n\nENTRY %m () -> f32[4] {{\n  ROOT %c = f32[4] constant("
                           f"{format_literal(x)})\n}}\n").entry.root.literal, x)


SUBNORMAL_CASES = [
    ("add", lambda x: jlax.add(x, jnp.zeros_like(x))), ("multiply", lambda x: jlax.mul(x, jnp.ones_like(x))),
    ("maximum", lambda x: jlax.max(x, jnp.zeros_like(x))), ("ceil", jlax.ceil), ("sign", jlax.sign),
    ("sqrt", jlax.sqrt), ("negate", jlax.neg), ("abs", jlax.abs),
]


@pytest.mark.parametrize("opcode, ref", SUBNORMAL_CASES, ids=[c[0] for c in SUBNORMAL_CASES])
def test_subnormals_flush_like_jax_eager(opcode, ref):
    x = np.array([1e-40, -1e-40, 1e-45, 1.0, -0.0, 2e-38], np.float32)
    hlo_x = [x] if opcode not in ("add", "multiply", "maximum") else \
        [x, np.ones_like(x) if opcode == "multiply" else np.zeros_like(x)]
    assert same_bits(run(opcode, hlo_x, "f32"), eager(ref, x))


def test_flush_denormals_accepts_bfloat16():
    """Regression (deep fuzz find): np.finfo rejects bfloat16, the evaluator crashed on it."""
    import ml_dtypes
    from minixla.hlo.evaluator import flush_denormals
    x = np.array([1e-39, -1e-39, 1.0], ml_dtypes.bfloat16)
    out = flush_denormals(x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out.astype(np.float32), [0.0, -0.0, 1.0])
    assert np.signbit(out.astype(np.float32)[1])
