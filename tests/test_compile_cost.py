"""Compile cost grows linearly with the program: no stage may be quadratic in the number of kernels.

The program is ``benchmarks.compile_time``'s unrolled gradient descent (two dots and a few
elementwise ops per step, so two kernels per step). At 8x the steps every stage must do at most
16x the work: 8x is linear, ~11x is n log n or a linear stage whose bounded windows (fusion looks
a few steps up from each root) are not yet full in the small program, 64x is quadratic.
Work is counted, never timed: the Python function calls a stage makes (``cProfile``'s count,
the same on every run), fusion's search steps (``FusionPass.work``) and the heap simulator's
tree nodes visited. Fusion used to run a graph search per candidate (75x the calls at 8x the
steps) and the heap simulator scanned every placed buffer per buffer. Fusion's rule-6 path
checks were even exponential in a cluster of diamonds (``y = sin(y) + y`` after a reduction).
"""
import cProfile
import pstats

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from benchmarks.compile_time import gd_args, gradient_descent
from minixla.hlo.verifier import verify
from minixla.jit import optimization_pipeline
from minixla.passes import buffer_assignment
from minixla.passes.fusion import FusionPass
from minixla.testing import check_against_jax

SMALL, LARGE = 25, 200
BOUND = 16.0  # at LARGE / SMALL = 8x the steps: twice linear, a quarter of quadratic


def _calls(fn):
    prof = cProfile.Profile()
    prof.enable()
    try:
        out = fn()
    finally:
        prof.disable()
    return out, pstats.Stats(prof).total_calls


def _work(steps: int) -> dict:
    """Deterministic work per compile stage for ``steps`` unrolled steps."""
    work = {}
    lowered, work["trace+lower"] = _calls(lambda: minixla.jit(gradient_descent(steps)).lower(*gd_args()))
    module = lowered.hlo_module.clone()
    verified = []
    pipeline = optimization_pipeline(after_pass=lambda name, m: verified.append(name))
    for p in pipeline.passes:
        _, n = _calls(lambda: p.run(module))
        work[f"pass {p.name}"] = work.get(f"pass {p.name}", 0) + n
        _, n = _calls(lambda: verify(module))  # what MINIXLA_VERIFY=1 runs after each pass
        work["verify"] = work.get("verify", 0) + n
    fusion = next(p for p in pipeline.passes if isinstance(p, FusionPass))
    work["fusion search steps"] = fusion.work
    indexes = []

    class Counted(buffer_assignment._PlacedIndex):
        def __init__(self, *a):
            super().__init__(*a)
            indexes.append(self)
    original = buffer_assignment._PlacedIndex
    buffer_assignment._PlacedIndex = Counted
    try:
        _, work["buffer assignment"] = _calls(lambda: buffer_assignment.assign_buffers(module))
    finally:
        buffer_assignment._PlacedIndex = original
    work["heap nodes visited"] = sum(i.visited for i in indexes)
    _, work["print"] = _calls(module.to_string)
    work["kernels"] = sum(1 for i in module.entry.instructions if i.opcode == "fusion")
    return work


@pytest.fixture(scope="module")
def small_and_large():
    return _work(SMALL), _work(LARGE)


def test_every_stage_is_linear_in_steps(small_and_large):
    small, large = small_and_large
    assert large["kernels"] >= 8 * small["kernels"] * 0.9  # the program really has 8x the kernels
    too_much = {k: f"{small[k]} -> {large[k]} ({large[k] / small[k]:.1f}x)"
                for k in small if k != "kernels" and large[k] > BOUND * max(small[k], 1)}
    assert not too_much, f"super-linear at {LARGE // SMALL}x the steps: {too_much}"


def _shared_value_program(n: int):
    def f(x, w, s):
        out = x
        for _ in range(n):  # a dot per step: a kernel per step, each reading x + s
            out = (out @ w) * (x + s)  # x + s: one instruction (after CSE) with n users
        return out
    return minixla.jit(f).lower(np.ones((4, 16), np.float32), np.eye(16, dtype=np.float32),
                                np.float32(2)).hlo_module


def test_fusion_work_per_decision_does_not_grow_with_a_values_users():
    """A value read by every step (here ``x + s``, 100 or 400 users) is considered once per
    cluster; what fusion scans per decision is bounded by the cluster and the instructions a few
    steps above its root, not by that value's users (scanning them made it quadratic)."""
    work = {}
    for n in (100, 400):
        m = _shared_value_program(n)
        optimization_pipeline().passes[0].run(m)  # simplify (CSE merges the n copies of x + s)
        fusion = FusionPass()
        fusion.run(m)
        work[n] = (fusion.work, len(fusion.log))
    (w1, d1), (w4, d4) = work[100], work[400]
    assert d4 >= 3.5 * d1, work
    assert w4 <= 4 * 1.5 * w1, work


def test_gradient_descent_program_matches_jax():
    """The benchmark's many-kernel program computes what JAX computes (both backends)."""
    f = gradient_descent(SMALL)
    check_against_jax(f, f, *gd_args(), rtol=2e-5, atol=2e-5)


def _diamonds(k: int):
    """A reduction, then k steps of ``y = sin(y) + y``."""
    def f(x):
        y = mnp.sum(x, axis=1)
        for _ in range(k):
            y = mnp.sin(y) + y  # y feeds both sin and add: 2^k paths from the sum to the root
        return y
    return f


def test_fusion_rule_checks_visit_each_member_once():
    """Rule 6's path checks (does the reduction reach the root through elementwise ops only?)
    walked every path from the hero to the root: 2^k for k diamonds (24 took 37 s); each
    member is now visited once. The fused program still matches JAX."""
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    counts = {}
    for k in (8, 16):
        m = minixla.jit(_diamonds(k)).lower(x).hlo_module
        fusion = FusionPass()
        _, counts[k] = _calls(lambda: fusion.run(m))
        assert [i.opcode for i in m.entry.instructions] == ["parameter", "fusion"]
    assert counts[16] <= 3 * counts[8], counts  # 2^8 = 256x as many paths; 2x the members
    check_against_jax(_diamonds(16), _diamonds(16), x, rtol=1e-5, atol=1e-5)


def _diamond_loop(k: int):
    """k steps of ``y = sin(y) + y`` on the input: one kLoop fusion with 2^k paths."""
    def f(x):
        y = x
        for _ in range(k):
            y = mnp.sin(y) + y
        return y
    return f


def test_in_place_check_visits_each_fused_instruction_once():
    """Buffer assignment's in-place rule (does the fusion read its operand only at the index it
    writes?) walked every path from the parameter to the root: 22 diamonds took 19 s."""
    x = np.ones((4, 8), np.float32)
    counts = {}
    for k in (8, 16):
        m = minixla.jit(_diamond_loop(k)).lower(x).hlo_module.clone()
        optimization_pipeline().run(m)
        fusion = m.entry.root
        assert fusion.opcode == "fusion" and fusion.attrs["kind"] == "kLoop"
        same, counts[k] = _calls(lambda: buffer_assignment.reads_only_at_output_index(fusion, 0))
        assert same
    assert counts[16] <= 3 * counts[8], counts
