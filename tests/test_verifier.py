"""The HLO verifier: valid modules pass; each broken invariant is reported clearly."""
import importlib

import numpy as np
import pytest

import minixla
from minixla.hlo import HloInstruction, Shape, parse
from minixla.hlo.verifier import HloVerifierError, verify
from minixla.passes.pipeline import HloPass

f32 = np.float32
stages = importlib.import_module("minixla.stages")  # (where Lowered.compile reads its pipeline)

GOOD = """HloModule t

%region_add.1 (a.2: f32[], b.3: f32[]) -> f32[] {
  %a.2 = f32[] parameter(0)
  %b.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(%a.2, %b.3)
}

ENTRY %main.0 (p0: f32[4,3], p1: f32[3]) -> f32[3] {
  %p0 = f32[4,3]{1,0} parameter(0)
  %p1 = f32[3]{0} parameter(1)
  %broadcast.5 = f32[4,3]{1,0} broadcast(%p1), dimensions={1}
  %multiply.6 = f32[4,3]{1,0} multiply(%p0, %broadcast.5)
  %constant.7 = f32[] constant(0.0)
  ROOT %reduce.8 = f32[3]{0} reduce(%multiply.6, %constant.7), dimensions={0}, to_apply=%region_add.1
}
"""


def test_good_module_and_compiled_modules_verify():
    verify(parse(GOOD))
    f = lambda a, b: (a @ b.T, minixla.numpy.sum(a, axis=0) > 1)  # noqa: E731
    lowered = minixla.jit(f).lower(np.ones((4, 3), f32), np.ones((5, 3), f32))
    verify(lowered.hlo_module)
    verify(lowered.compile().hlo_module)


@pytest.mark.parametrize("old, new, match", [
    ("%multiply.6 = f32[4,3]{1,0} multiply", "%multiply.6 = f32[4,4]{1,0} multiply", "operands of 'multiply' differ|has shape"),
    ("%multiply.6 = f32[4,3]{1,0} multiply(%p0, %broadcast.5)", "%multiply.6 = s32[4,3]{1,0} multiply(%p0, %broadcast.5)",
     "has shape s32"),
    ("dimensions={1}\n", "dimensions={0}\n", "broadcast operand dim 0"),
    ("dimensions={0}, to_apply", "dimensions={2}, to_apply", "reduce dimensions"),
    ("%constant.7 = f32[] constant(0.0)", "%constant.7 = f32[3]{0} constant({0.0, 0.0, 0.0})", "init"),
    ("ROOT %add.4 = f32[] add", "ROOT %add.4 = f32[] maximum", None),  # still a valid region
    ("%p1 = f32[3]{0} parameter(1)", "%p1 = f32[3]{0} parameter(0)", "parameter numbers"),
    ("%multiply.6 = f32[4,3]{1,0} multiply(%p0, %broadcast.5)",
     "%multiply.6 = f32[4,3]{1,0} frobnicate(%p0, %broadcast.5)", "no shape rule for opcode 'frobnicate'"),
    ("%a.2 = f32[] parameter(0)", "%a.2 = s32[] parameter(0)", "to_apply=%region_add.1 must be|operands of 'add' differ"),
])
def test_broken_module_is_reported(old, new, match):
    assert old in GOOD
    m = parse(GOOD.replace(old, new))
    if match is None:
        verify(m)
        return
    with pytest.raises(HloVerifierError, match=match):
        verify(m)


def _module():
    return parse(GOOD)


def test_dangling_operand_and_order():
    m = _module()
    comp = m.entry
    stray = HloInstruction("negate", Shape(f32, (4, 3)), [comp.parameters[0]], name="stray")
    comp.instructions[3].operands[0] = stray  # multiply uses an instruction not in the computation
    with pytest.raises(HloVerifierError, match="uses %stray, which is not defined before it"):
        verify(m)
    m = _module()
    comp = m.entry
    comp.instructions[2], comp.instructions[3] = comp.instructions[3], comp.instructions[2]
    with pytest.raises(HloVerifierError, match="not defined before it"):
        verify(m)


def test_root_and_names():
    m = _module()
    m.entry.root = HloInstruction("constant", Shape(f32, ()), name="elsewhere", literal=np.float32(1))
    with pytest.raises(HloVerifierError, match="root is not one of its instructions"):
        verify(m)
    m = _module()
    m.entry.instructions[3].name = "p0"
    with pytest.raises(HloVerifierError, match="name %p0 is used twice"):
        verify(m)


def test_fusion_operands_must_match_parameters():
    f = lambda a: minixla.numpy.exp(a) * 2.0 + 1.0  # noqa: E731
    m = minixla.jit(f).lower(np.ones((4,), f32)).compile().hlo_module
    fusion = next(i for i in m.entry.instructions if i.opcode == "fusion")
    verify(m)
    fusion.operands[0] = HloInstruction("parameter", Shape(f32, (5,)), name="wrong", parameter_number=1)
    m.entry.instructions.insert(0, fusion.operands[0])
    with pytest.raises(HloVerifierError, match="fusion operand %wrong"):
        verify(m)


class _BreakShapes(HloPass):
    """A buggy pass: gives the root a wrong shape."""
    name = "break-shapes"

    def run(self, module):
        root = module.entry.root
        root.shape = Shape(root.shape.dtype, root.shape.dims + (1,))
        return True


def test_jit_verifies_after_every_pass(monkeypatch):
    original = stages.optimization_pipeline

    def pipeline(after_pass=None):
        p = original(after_pass)
        p.passes.insert(1, _BreakShapes())
        return p
    monkeypatch.setattr(stages, "optimization_pipeline", pipeline)
    monkeypatch.setenv("MINIXLA_VERIFY", "1")
    with pytest.raises(HloVerifierError, match="after 'optimize/break-shapes'"):
        minixla.jit(lambda a: a * 2.0).lower(np.ones(3, f32)).compile()
    monkeypatch.setenv("MINIXLA_VERIFY", "0")
    minixla.jit(lambda a: a * 3.0).lower(np.ones(3, f32)).compile()  # not verified: no error


class _BreakShapesSilently(_BreakShapes):
    """A buggy pass that also reports no change."""
    name = "break-shapes-silently"

    def run(self, module):
        super().run(module)
        return False


def test_jit_skips_unchanged_passes_and_verifies_the_result(monkeypatch):
    # the verifier runs after the lowering and after each pass that reported a change (a pass
    # that changed nothing leaves the module already verified), then on the final module when
    # the last pass reported no change: a pass that changes the module silently is still caught
    calls = []
    monkeypatch.setattr(stages, "verify", lambda m: calls.append(1) or verify(m))
    monkeypatch.setenv("MINIXLA_VERIFY", "1")
    c = minixla.jit(lambda a: a * 2.0 + 1.0).lower(np.ones(3, f32)).compile()
    changed = [e for e in c.pass_log if e.changed and not e.name.split("/")[-1].startswith("fixed-point")]
    final = 0 if c.pass_log[-1].changed else 1
    assert len(calls) == 1 + len(changed) + final < len(c.pass_log)
    original = stages.optimization_pipeline

    def pipeline(after_pass=None):
        p = original(after_pass)
        p.passes.append(_BreakShapesSilently())
        return p
    monkeypatch.setattr(stages, "optimization_pipeline", pipeline)
    with pytest.raises(HloVerifierError, match="after 'the last pass"):
        minixla.jit(lambda a: a * 4.0).lower(np.ones(3, f32)).compile()
