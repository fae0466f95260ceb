"""CSE in XLA's style: HLO text in, one pass, FileCheck out."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.hlo import parse
from minixla.hlo.verifier import verify
from minixla.passes.cse import CommonSubexpressionElimination
from minixla.passes.dce import DeadCodeElimination
from conftest import filecheck


def run_cse(body, params="f32[4]", result="(f32[4], f32[4])"):
    ps = params.split(";")
    header = ", ".join(f"p{i}: {p}" for i, p in enumerate(ps))
    lines = "\n".join(f"  %p{i} = {p} parameter({i})" for i, p in enumerate(ps))
    m = parse(f"HloModule t\n\nENTRY %main ({header}) -> {result} {{\n{lines}\n{body}\n}}\n")
    changed = CommonSubexpressionElimination().run(m)
    DeadCodeElimination().run(m)
    return changed, m


def test_merges_identical_instructions_and_their_users():
    changed, m = run_cse("""  %a = f32[4] exponential(%p0)
  %b = f32[4] exponential(%p0)
  %c = f32[4] negate(%a)
  %d = f32[4] negate(%b)
  ROOT %t = (f32[4], f32[4]) tuple(%c, %d)""")
    assert changed
    filecheck(m.to_string(), """
CHECK: %a = f32[4]{0} exponential(%p0)
CHECK-NOT: exponential
CHECK: %c = f32[4]{0} negate(%a)
CHECK-NOT: negate
CHECK: ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%c, %c)
""")


def test_commutative_operands_in_either_order():
    changed, m = run_cse("""  %a = f32[4] add(%p0, %p1)
  %b = f32[4] add(%p1, %p0)
  ROOT %t = (f32[4], f32[4]) tuple(%a, %b)""", "f32[4];f32[4]")
    assert changed
    filecheck(m.to_string(), "CHECK: ROOT %t = {{.*}} tuple(%a, %a)")


def test_non_commutative_operand_order_matters():
    changed, m = run_cse("""  %a = f32[4] subtract(%p0, %p1)
  %b = f32[4] subtract(%p1, %p0)
  %c = pred[4] compare(%p0, %p1), direction=LT
  %d = pred[4] compare(%p1, %p0), direction=LT
  %e = pred[4] compare(%p0, %p1), direction=EQ
  %f = pred[4] compare(%p1, %p0), direction=EQ
  ROOT %t = (f32[4], f32[4], pred[4], pred[4], pred[4], pred[4]) tuple(%a, %b, %c, %d, %e, %f)""",
                         "f32[4];f32[4]", "(f32[4], f32[4], pred[4], pred[4], pred[4], pred[4])")
    assert changed  # only the EQ pair merges
    filecheck(m.to_string(), "CHECK: tuple(%a, %b, %c, %d, %e, %e)")


def test_attributes_must_match():
    changed, m = run_cse("""  %a = f32[2,4] broadcast(%p0), dimensions={1}
  %b = f32[4,2] broadcast(%p0), dimensions={0}
  %c = pred[4] compare(%p0, %p0), direction=LT
  %d = pred[4] compare(%p0, %p0), direction=GT
  ROOT %t = (f32[2,4], f32[4,2], pred[4], pred[4]) tuple(%a, %b, %c, %d)""", "f32[4]",
                         "(f32[2,4], f32[4,2], pred[4], pred[4])")
    assert not changed


def test_constants_merge_by_bits():
    changed, m = run_cse("""  %a = f32[] constant(0.0)
  %b = f32[] constant(-0.0)
  %c = f32[] constant(0.0)
  %d = f32[] constant(nan)
  %e = f32[] constant(nan)
  %f = s32[] constant(0)
  ROOT %t = (f32[], f32[], f32[], f32[], f32[], s32[]) tuple(%a, %b, %c, %d, %e, %f)""", "f32[4]",
                         "(f32[], f32[], f32[], f32[], f32[], s32[])")
    assert changed
    filecheck(m.to_string(), "CHECK: tuple(%a, %b, %a, %d, %d, %f)")


def test_parameters_and_side_effecting_ops_are_never_merged():
    changed, m = run_cse("""  %a = f32[4] rng(%p0, %p1)
  %b = f32[4] rng(%p0, %p1)
  ROOT %t = (f32[4], f32[4], f32[4], f32[4]) tuple(%a, %b, %p0, %p1)""", "f32[4];f32[4]",
                         "(f32[4], f32[4], f32[4], f32[4])")
    assert not changed
    assert [p.name for p in m.entry.parameters] == ["p0", "p1"]


def test_reduces_with_identical_regions_merge():
    text = """HloModule t

%r1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%r2 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %z = f32[] add(%x, %y)
}

%r3 (u: f32[], v: f32[]) -> f32[] {
  %u = f32[] parameter(0)
  %v = f32[] parameter(1)
  ROOT %w = f32[] maximum(%u, %v)
}

ENTRY %main (p0: f32[4]) -> (f32[], f32[], f32[]) {
  %p0 = f32[4] parameter(0)
  %c = f32[] constant(0.0)
  %s1 = f32[] reduce(%p0, %c), dimensions={0}, to_apply=%r1
  %s2 = f32[] reduce(%p0, %c), dimensions={0}, to_apply=%r2
  %s3 = f32[] reduce(%p0, %c), dimensions={0}, to_apply=%r3
  ROOT %t = (f32[], f32[], f32[]) tuple(%s1, %s2, %s3)
}
"""
    m = parse(text)
    assert CommonSubexpressionElimination().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    filecheck(m.to_string(), "CHECK: ROOT %t = {{.*}} tuple(%s1, %s1, %s3)")


def test_jit_cse_merges_repeated_subexpressions():
    def f(x):
        return mnp.exp(x) * 2.0 + mnp.exp(x) * 2.0
    compiled = minixla.jit(f).lower(np.ones(4, np.float32)).compile()
    assert compiled.as_text().count("exponential(") == 1
    assert any(e.name.endswith("/cse") and e.changed for e in compiled.pass_log)
    np.testing.assert_allclose(compiled(np.ones(4, np.float32)), np.full(4, 4 * np.e, np.float32), rtol=1e-6)


@pytest.mark.parametrize("n", [3000])
def test_cse_on_long_chain_is_not_recursive(n):
    body = "\n".join(f"  %e{i} = f32[4] negate(%{'p0' if i == 0 else f'e{i - 1}'})" for i in range(n))
    body += "\n" + "\n".join(f"  %f{i} = f32[4] negate(%{'p0' if i == 0 else f'f{i - 1}'})" for i in range(n))
    changed, m = run_cse(body + f"\n  ROOT %t = (f32[4], f32[4]) tuple(%e{n - 1}, %f{n - 1})")
    assert changed and len(m.entry.instructions) == n + 2
