"""Tutorial 05's exercise: ``live_ranges`` agrees with buffer assignment's ``value_live``."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.passes.buffer_assignment import assign_buffers
from _exercise import exercise_module


def softmax(x):
    e = mnp.exp(x - mnp.max(x, axis=1, keepdims=True))
    return e / mnp.sum(e, axis=1, keepdims=True)


def scores(x, w1, w2):
    h = x @ w1
    s = h @ w2
    return (mnp.tanh(h) * 2.0) @ w2 + s


CASES = {
    "softmax_long_rows": (softmax, [(4, 16384)]),
    "scores": (scores, [(32, 8), (8, 16), (16, 4)]),
    "two_outputs_and_reshape": (lambda x, w: ((x @ w).reshape(-1), mnp.exp(x).sum(axis=0)), [(6, 5), (5, 3)]),
    "output_is_a_parameter": (lambda x, y: (x, mnp.tanh(y) * y), [(3,), (4,)]),
}


@pytest.mark.parametrize("fused", [False, True], ids=["lowered", "compiled"])
@pytest.mark.parametrize("name", CASES)
def test_matches_buffer_assignment(name, fused, rng):
    live_ranges = exercise_module("ch05_live_ranges").live_ranges
    fn, shapes = CASES[name]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    lowered = minixla.jit(fn).lower(*args)
    module = lowered.compile().hlo_module if fused else lowered.hlo_module
    want = {v.name: r for v, r in assign_buffers(module).value_live.items()}
    assert live_ranges(module) == want


def test_pinned_chain():
    """exp(x) * 2 then a sum, unfused: the schedule and every range written out by hand."""
    live_ranges = exercise_module("ch05_live_ranges").live_ranges
    module = minixla.jit(lambda x: mnp.sum(mnp.exp(x) * 2.0)).lower(np.ones(4, np.float32)).hlo_module
    names = [i.opcode for i in module.entry.instructions]
    step = {op: names.index(op) for op in ("exponential", "multiply", "reduce")}
    got = live_ranges(module)
    by_opcode = {next(i.opcode for i in module.entry.instructions if i.name == n): r for n, r in got.items()}
    assert by_opcode["exponential"] == (step["exponential"], step["multiply"])
    assert by_opcode["multiply"] == (step["multiply"], step["reduce"])
    assert by_opcode["reduce"] == (step["reduce"], len(names))
