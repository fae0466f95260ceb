"""DCE and the pass pipeline on small modules."""
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.hlo import HloInstruction, Shape
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.fusion import FusionPass
from minixla.passes.pipeline import FixedPoint, PassPipeline

f32 = np.float32


def lowered(f, *args):
    return minixla.jit(f).lower(*args).hlo_module


# --- DCE -------------------------------------------------------------------------------

def test_dce_removes_unused_but_keeps_parameters_and_root():
    m = lowered(lambda a, b: a * 2.0, np.ones(3, f32), np.ones(3, f32))
    comp = m.entry
    dead = comp.add_instruction(HloInstruction("exponential", Shape(f32, (3,)), [comp.parameters[0]]))
    assert DeadCodeElimination().run(m) is True
    assert dead not in comp.instructions
    assert [p.name for p in comp.parameters] == ["p0", "p1"]  # unused p1 stays: it is the signature
    assert DeadCodeElimination().run(m) is False


def test_pipeline_logs_and_fixed_point_stops():
    m = lowered(lambda a: mnp.exp(a) + 1.0, np.ones(3, f32))
    pipe = PassPipeline("opt", [FixedPoint(DeadCodeElimination()), FusionPass()])
    assert pipe.run(m) is True
    names = [e.name for e in pipe.log]
    assert names == ["opt/fixed-point(dce)", "opt/fusion"]
    assert pipe.log[1].changed and pipe.log[1].ms >= 0


# Fusion tests live in tests/test_fusion.py, buffer assignment in tests/test_buffer_assignment.py.
