"""Tutorial 03's exercise: ``x / 2**k -> x * 2**-k``, FileCheck on the HLO and the same bits on
NaN, ±inf, ±0.0, subnormals and the extremes before and after."""
import numpy as np
import pytest

from minixla.hlo import parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import verify
from minixla.passes.dce import DeadCodeElimination
from conftest import filecheck
from _exercise import exercise_module

F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -3.0, 1e-40, 1.2e-38, -2.0**127, 3.4e38,
                7.0, 2.0**-126, -1e-45, 0.1, 2.0**127], np.float32)


def module(divisor: str, dtype="f32", dividend="%p0") -> str:
    return f"""HloModule t

ENTRY %main (p0: {dtype}[16], p1: {dtype}[16]) -> {dtype}[16] {{
  %p0 = {dtype}[16]{{0}} parameter(0)
  %p1 = {dtype}[16]{{0}} parameter(1)
  %e = {dtype}[16]{{0}} exponential(%p0)
  {divisor}
  ROOT %d = {dtype}[16]{{0}} divide({dividend}, %c)
}}
"""


def scalar_divisor(value, dtype="f32"):
    return (f"%s = {dtype}[] constant({value})\n"
            f"  %c = {dtype}[16]{{0}} broadcast(%s), dimensions={{}}")


def run_pass(text):
    m = parse(text)
    before = parse(text)
    changed = exercise_module("ch03_divide_by_power_of_two").DivideByPowerOfTwo().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    return before, m, changed


def assert_same_bits(before, after, inputs):
    want, got = evaluate(before, *inputs), evaluate(after, *inputs)
    assert want.dtype == got.dtype
    np.testing.assert_array_equal(want.view(np.uint32), got.view(np.uint32))


@pytest.mark.parametrize("value,reciprocal", [("2", "0.5"), ("0.25", "4.0"), ("-8", "-0.125"),
                                              ("1.1754943508222875e-38", "8.507059173023462e+37")])
def test_power_of_two_becomes_a_multiply(value, reciprocal):
    before, after, changed = run_pass(module(scalar_divisor(value)))
    assert changed, f"x / {value} should become x * {reciprocal}, but run() returned False:\n{after}"
    filecheck(after.to_string(), f"""
CHECK: %[[C:.*]] = f32[] constant({reciprocal})
CHECK: %[[B:.*]] = f32[16]{{0}} broadcast(%[[C]])
CHECK: ROOT %{{{{.*}}}} = f32[16]{{0}} multiply(%p0, %[[B]])
CHECK-NOT: divide
""")
    assert_same_bits(before, after, [F32, F32[::-1].copy()])


def test_rank0_and_an_array_constant():
    text = """HloModule t

ENTRY %main (p0: f32[], p1: f32[3]) -> (f32[], f32[3]) {
  %p0 = f32[] parameter(0)
  %p1 = f32[3]{0} parameter(1)
  %two = f32[] constant(2)
  %d0 = f32[] divide(%p0, %two)
  %fours = f32[3]{0} constant({4, 4, 4})
  %d1 = f32[3]{0} divide(%p1, %fours)
  ROOT %t = (f32[], f32[3]{0}) tuple(%d0, %d1)
}
"""
    before, after, changed = run_pass(text)
    assert changed and "divide" not in after.to_string(), (
        f"a rank-0 divide and a divide by a constant array of 4s should both become multiplies:\n{after}")
    for k in range(0, len(F32), 3):
        args = [F32[k].reshape(()), np.resize(F32[k:k + 3], 3)]
        for want, got in zip(evaluate(before, *args), evaluate(after, *args)):
            np.testing.assert_array_equal(np.atleast_1d(want).view(np.uint32), np.atleast_1d(got).view(np.uint32))


def test_chain_of_divides():
    text = module(scalar_divisor("2"), dividend="%e").replace(
        "ROOT %d = f32[16]{0} divide(%e, %c)",
        "%d = f32[16]{0} divide(%e, %c)\n  ROOT %d2 = f32[16]{0} divide(%d, %c)")
    before, after, changed = run_pass(text)
    assert changed and after.to_string().count("multiply(") == 2 and "divide" not in after.to_string(), (
        f"(e / 2) / 2: both divides should become multiplies (the second's dividend is the first):\n{after}")
    assert_same_bits(before, after, [F32, F32])


@pytest.mark.parametrize("divisor", [
    scalar_divisor("3"),                      # 1/3 is rounded
    scalar_divisor("0"),                      # x / 0 is ±inf or NaN
    scalar_divisor("-0"),
    scalar_divisor("inf"),
    scalar_divisor("nan"),
    scalar_divisor("1.7014118346046923e+38"),  # 2**127: its reciprocal 2**-127 is subnormal
    scalar_divisor("5.877471754111438e-39"),   # 2**-127 itself is subnormal
    "%c = f32[16]{0} add(%p1, %p1)",          # not a constant
], ids=["three", "zero", "minus_zero", "inf", "nan", "reciprocal_subnormal", "subnormal", "parameter"])
def test_left_alone(divisor):
    before, after, changed = run_pass(module(divisor))
    assert not changed, f"this divisor must be left alone, but run() returned True:\n  {divisor}\n{after}"
    assert "divide(%p0, %c)" in after.to_string(), f"the divide by\n  {divisor}\nwas rewritten:\n{after}"


def test_integers_left_alone():
    before, after, changed = run_pass(module(scalar_divisor("2", "s32"), dtype="s32").replace(
        "%e = s32[16]{0} exponential(%p0)\n", ""))
    assert not changed and "divide(" in after.to_string(), f"an integer divide must be left alone:\n{after}"

