"""The memory scheduler: a topological reorder of the entry that lowers the peak of live
temporaries (XLA's list scheduler), kept only when it beats the program's order."""
import jax
import numpy as np

import minixla
from minixla.hlo import parse
from minixla.hlo.evaluator import evaluate
from minixla.passes.buffer_assignment import assign_buffers
from minixla.passes.memory_scheduler import MemoryScheduler
from conftest import filecheck

# Both big intermediates are computed before either is consumed: two live at once.
TWO_CHAINS = """HloModule t

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main.0 (p0: f32[64,64], p1: f32[64,64]) -> (f32[64], f32[64]) {
  %p0 = f32[64,64]{1,0} parameter(0)
  %p1 = f32[64,64]{1,0} parameter(1)
  %exponential.1 = f32[64,64]{1,0} exponential(%p0)
  %exponential.2 = f32[64,64]{1,0} exponential(%p1)
  %constant.3 = f32[] constant(0)
  %reduce.4 = f32[64]{0} reduce(%exponential.1, %constant.3), dimensions={1}, to_apply=%add
  %reduce.5 = f32[64]{0} reduce(%exponential.2, %constant.3), dimensions={1}, to_apply=%add
  ROOT %tuple.6 = (f32[64]{0}, f32[64]{0}) tuple(%reduce.4, %reduce.5)
}
"""


def test_consumer_runs_right_after_its_producer_and_the_arena_halves():
    m = parse(TWO_CHAINS)
    before = assign_buffers(m).arena_size
    args = [np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32) for _ in range(2)]
    want = evaluate(m, *args)
    assert MemoryScheduler().run(m) is True
    filecheck(m.to_string(), """
CHECK: %exponential.1 =
CHECK-NEXT: %reduce.4 =
CHECK: %exponential.2 =
CHECK-NEXT: %reduce.5 =
CHECK-NEXT: ROOT %tuple.6
""")
    assert assign_buffers(m).arena_size * 2 == before == 2 * 64 * 64 * 4
    for a, b in zip(evaluate(m, *args), want):
        np.testing.assert_array_equal(a, b)
    assert MemoryScheduler().run(m) is False  # already the better order


def test_program_order_is_kept_when_greedy_does_not_lower_the_peak():
    m = parse(TWO_CHAINS.replace("""  %exponential.2 = f32[64,64]{1,0} exponential(%p1)
  %constant.3 = f32[] constant(0)
  %reduce.4 = f32[64]{0} reduce(%exponential.1, %constant.3), dimensions={1}, to_apply=%add""",
                                 """  %constant.3 = f32[] constant(0)
  %reduce.4 = f32[64]{0} reduce(%exponential.1, %constant.3), dimensions={1}, to_apply=%add
  %exponential.2 = f32[64,64]{1,0} exponential(%p1)"""))
    text = m.to_string()
    assert MemoryScheduler().run(m) is False
    assert m.to_string() == text


def test_training_step_keeps_fewer_activations_live(rng, monkeypatch):
    """Two conv layers' SGD step: each weight gradient (fused with its update) runs as soon as
    its output gradient exists, so a layer's activations die before the next backward conv.
    The values are the program order's, bit for bit. (Buffer assignment's rule 5, which puts
    activations into the bytes of gradients not yet written, is off: at this size it makes the
    program order's arena the smaller, and the scheduler then keeps that order.)"""
    from benchmarks import training as T
    from minixla.passes import buffer_assignment

    monkeypatch.setattr(buffer_assignment, "MAX_OUTPUT_REGIONS", 0)

    w = next(w for w in T.training_workloads(0.1) if w.name == "convnet_train")
    args = w.make_args(rng)
    compile_step = lambda: minixla.jit(w.make_step(T.minixla_namespace())).lower(*args).compile()  # noqa: E731
    scheduled = compile_step()
    monkeypatch.setattr(MemoryScheduler, "run", lambda self, module: False)
    program_order = compile_step()
    assert scheduled.memory_analysis().temp_size_in_bytes < program_order.memory_analysis().temp_size_in_bytes
    for a, b in zip(jax.tree.leaves(scheduled(*args)), jax.tree.leaves(program_order(*args))):
        np.testing.assert_array_equal(a, b)
