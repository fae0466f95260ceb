"""The HLO text parser: print -> parse -> print is the identity on everything the printer prints."""
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.hlo import HloParseError, parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import digits_cnn  # noqa: E402

f32 = np.float32


def _softmax(x):
    z = x - mnp.max(x, axis=-1, keepdims=True)
    e = mnp.exp(z)
    return e / mnp.sum(e, axis=-1, keepdims=True)


def _convnet(x, w, b):
    h = lax.conv_general_dilated(x, w, (2, 1), [(1, 2), (0, 1)], lhs_dilation=(1, 1), rhs_dilation=(1, 2),
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return mnp.maximum(h + b, 0.0)


PROGRAMS = {
    "add_broadcast": (lambda a, b: a + b, [np.ones((8, 3), f32), np.ones(3, f32)]),
    "softmax": (_softmax, [np.ones((4, 10), f32)]),
    "convnet": (_convnet, [np.ones((2, 6, 6, 3), f32), np.ones((3, 2, 3, 4), f32), np.ones(4, f32)]),
    "tuple_and_types": (lambda a, i: (a.T[1:, ::2] * 2, mnp.max(a) > 3, lax.div(i, mnp.full_like(i, 3)),
                                      (a > 0).astype(np.uint8), mnp.where(a > 1, a, mnp.nan), a * mnp.inf),
                        [np.ones((4, 5), f32), np.arange(6, dtype=np.int32)]),
    "dot_reduce": (lambda a, b: mnp.sum(a @ b, axis=0) - mnp.min(a), [np.ones((3, 4), f32), np.ones((4, 5), f32)]),
    "big_constant": (lambda a: a + np.arange(100, dtype=f32), [np.ones(100, f32)]),
}


def _modules(name):
    f, args = PROGRAMS[name]
    lowered = minixla.jit(f).lower(*args)
    return lowered.hlo_module, lowered.compile().hlo_module


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("stage", ["lowered", "optimized"])
@pytest.mark.parametrize("metadata", [False, True])
def test_round_trip(name, stage, metadata):
    m = _modules(name)[stage == "optimized"]
    text = m.to_string(print_metadata=metadata)
    parsed = parse(text)
    assert parsed.to_string(print_metadata=metadata) == text
    verify(parsed)


def test_round_trip_digits_cnn_with_fusions_and_values():
    params = {k: np.asarray(v) for k, v in digits_cnn.init_params(jax.random.PRNGKey(0)).items()}
    x = np.random.default_rng(0).random((2, 8, 8, 1), f32)
    f = lambda p, x: digits_cnn.cnn(p, x, np=mnp, lax=lax)  # noqa: E731
    compiled = minixla.jit(f).lower(params, x).compile()
    text = compiled.hlo_module.to_string(print_large_constants=True)
    assert "kind=kOutput" in text and "calls=%fused_computation" in text
    parsed = parse(text)
    assert parsed.to_string(print_large_constants=True) == text
    flat = jax.tree_util.tree_leaves((params, x))
    for got, want in zip(evaluate(parsed, *flat), compiled(params, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_large_constant_values_round_trip_only_when_printed():
    m = _modules("big_constant")[0]
    full = m.to_string(print_large_constants=True)
    assert "{...}" not in full
    const = [i for i in parse(full).entry.instructions if i.opcode == "constant" and i.shape.rank][0]
    np.testing.assert_array_equal(const.literal, np.arange(100, dtype=f32))
    elided = m.to_string()
    assert "{...}" in elided and parse(elided).to_string() == elided  # parses (as zeros), prints back


def test_special_values_and_types():
    text = """HloModule t

ENTRY %main.0 (p0: f64[3], p1: u8[2]) -> (f64[3], u8[2], pred[2], s32[2,2]) {
  %p0 = f64[3]{0} parameter(0)
  %p1 = u8[2]{0} parameter(1)
  %constant.1 = f64[3]{0} constant({nan, -inf, -0.0})
  %add.2 = f64[3]{0} add(%p0, %constant.1)
  %constant.3 = u8[2]{0} constant({255, 0})
  %constant.4 = pred[2]{0} constant({true, false})
  %constant.5 = s32[2,2]{1,0} constant({ {-2147483648, 2147483647}, {0, -1} })
  ROOT %tuple.6 = (f64[3]{0}, u8[2]{0}, pred[2]{0}, s32[2,2]{1,0}) tuple(%add.2, %constant.3, %constant.4, %constant.5)
}
"""
    m = parse(text)
    assert m.to_string() == text
    verify(m)
    c = m.entry.instructions[2].literal
    assert c.dtype == np.float64 and np.isnan(c[0]) and c[1] == -np.inf and np.signbit(c[2])
    assert m.entry.instructions[6].literal.dtype == np.int32
    out = evaluate(m, np.zeros(3), np.zeros(2, np.uint8))
    assert out[3][0, 0] == -2**31 and out[1].dtype == np.uint8


def test_names_stay_unique_after_parse():
    m = parse(_modules("softmax")[0].to_string())
    names = {i.name for c in m.computations for i in c.instructions}
    fresh = m.unique_name("add")
    assert fresh not in names


@pytest.mark.parametrize("text, match", [
    ("ENTRY %m () -> f32[] {\n}", "HloModule"),
    ("HloModule t\n%m (p0: f32[]) -> f32[] {\n  ROOT %p0 = f32[] parameter(0)\n}", "no ENTRY"),
    ("HloModule t\nENTRY %m (p0: f32[]) -> f32[] {\n  %p0 = f32[] parameter(0)\n}", "no ROOT"),
    ("HloModule t\nENTRY %m (p0: f32[]) -> f32[] {\n  ROOT %a = f32[] add(%p0, %q)\n}", "line 3.*not defined"),
    ("HloModule t\nENTRY %m (p0: f32[]) -> f32[] {\n  ROOT %p0 = f99[] parameter(0)\n}", "element type"),
    ("HloModule t\nENTRY %m (p0: f32[2]) -> f32[2] {\n  ROOT %c = f32[2]{0} constant({1.0})\n}", "2 needs|needs 2"),
    ("HloModule t\nENTRY %m (p0: f32[]) -> f32[] {\n  %p0 = f32[] parameter(0)\n"
     "  ROOT %r = f32[] reduce(%p0, %p0), dimensions={}, to_apply=%nowhere\n}", "undefined computation"),
    ("HloModule t\nENTRY %m (p0: f32[]) -> f32[] {\n  ROOT %p0 = f32[] parameter(0)", "not closed"),
])
def test_malformed_text_raises_parse_error(text, match):
    with pytest.raises(HloParseError, match=match):
        parse(text)
    assert issubclass(HloParseError, ValueError)
