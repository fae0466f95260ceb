"""XLA's control-flow passes (``passes/while_loop_*.py``, ``conditional_simplifier.py``,
``tuple_simplifier.py``), in ``minixla.jit``'s pipeline and one by one, and the LLVM backend's
loops: a real loop in the generated code, compile work independent of the trip count, one
buffer set for the loop state."""
import jax
import numpy as np
import pytest

import minixla
from minixla import lax, numpy as mnp
from minixla.hlo import lower_jaxpr, parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import verify
from minixla.passes.conditional_simplifier import ConditionalSimplifier
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.tuple_simplifier import TupleSimplifier
from minixla.passes.while_loop_analysis import trip_count
from minixla.passes.while_loop_unroller import WhileLoopUnroller

X = np.arange(3, dtype=np.float32)


def _optimized(f, *args):
    return minixla.jit(f).lower(*args).compile().as_text()


def _same_as_jax(f, g, *args):
    want = g(*args)
    for backend in ("llvm", "jax"):
        np.testing.assert_allclose(minixla.jit(f, backend=backend)(*args), want, rtol=1e-6)


def test_zero_trip_loop_is_removed():
    f = lambda L: lambda x: L.while_loop(lambda c: c[0] < 0, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1]
    assert "while(" not in _optimized(f(lax), X)
    _same_as_jax(f(lax), f(jax.lax), X)


def test_one_trip_loop_is_inlined():
    f = lambda L: lambda x: L.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1]
    assert "while(" not in _optimized(f(lax), X)
    _same_as_jax(f(lax), f(jax.lax), X)


def test_dead_state_elements_are_removed():
    # the ys of the scan are never read: the state keeps only the counter and the carry
    f = lambda L, exp: lambda x: L.scan(lambda c, a: (c + a, exp(c)), x, np.ones((5, 3), np.float32))[0]
    text = _optimized(f(lax, mnp.exp), X)
    assert "(s32[], f32[3]{0}) while(" in text
    assert "exponential" not in text and "dynamic-update-slice" not in text
    _same_as_jax(f(lax, mnp.exp), f(jax.lax, jax.numpy.exp), X)


def test_loop_invariant_code_is_hoisted():
    f = lambda L, exp: lambda x, w: L.fori_loop(0, 4, lambda i, c: c * exp(w), x)
    text = _optimized(f(lax, mnp.exp), X, X)
    entry = text[text.index("ENTRY"):]
    assert "exponential(%p1)" in entry  # computed once, before the loop
    body = text[:text.index("ENTRY")]
    assert "exponential" not in body
    _same_as_jax(f(lax, mnp.exp), f(jax.lax, jax.numpy.exp), X, X)


def test_constant_predicate_conditional_is_inlined():
    f = lambda L: lambda x: (L.cond(True, lambda a: a + 1, lambda a: a - 1, x),
                             L.switch(7, [lambda a: a * 2, lambda a: a * 3], x))
    text = _optimized(f(lax), X)
    assert "conditional(" not in text
    got = minixla.jit(f(lax))(X)
    for g, w in zip(got, f(jax.lax)(X)):
        np.testing.assert_array_equal(g, w)


def test_trip_count_and_unroller():
    f = lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2 + i.astype(np.float32), x)
    module = lower_jaxpr(minixla.make_jaxpr(f)(X))
    loop, = [i for i in module.entry.instructions if i.opcode == "while"]
    assert trip_count(loop) == 3
    assert WhileLoopUnroller(max_trip_count=2).run(module) is False
    assert WhileLoopUnroller(max_trip_count=3).run(module) is True
    TupleSimplifier().run(module)
    DeadCodeElimination().run(module)
    verify(module)
    text = module.to_string()
    assert "while(" not in text and text.count("multiply(") == 3
    np.testing.assert_array_equal(evaluate(module, X), jax.lax.fori_loop(0, 3, lambda i, c: c * 2 + i, X))


def test_conditional_simplifier_on_hlo_text():
    text = """HloModule m

%b0 (p: (f32[2])) -> (f32[2]) {
  %p = (f32[2]{0}) parameter(0)
  %x = f32[2]{0} get-tuple-element(%p), index=0
  ROOT %t = (f32[2]{0}) tuple(%x)
}

%b1 (q: (f32[2])) -> (f32[2]) {
  %q = (f32[2]{0}) parameter(0)
  %y = f32[2]{0} get-tuple-element(%q), index=0
  %n = f32[2]{0} negate(%y)
  ROOT %u = (f32[2]{0}) tuple(%n)
}

ENTRY %main (v: f32[2]) -> f32[2] {
  %v = f32[2]{0} parameter(0)
  %c = s32[] constant(-3)
  %tup = (f32[2]{0}) tuple(%v)
  %k = (f32[2]{0}) conditional(%c, %tup, %tup), branch_computations={%b0, %b1}
  ROOT %r = f32[2]{0} get-tuple-element(%k), index=0
}
"""
    m = parse(text)
    assert ConditionalSimplifier().run(m)
    TupleSimplifier().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    out = m.to_string()
    assert "conditional" not in out and "negate(%v)" in out  # -3 is out of range: the last branch


# --- the LLVM backend ----------------------------------------------------------------------

def _rnn(n):
    def f(h, xs, w):
        return lax.scan(lambda h, x: (mnp.tanh(h @ w + x), h.sum()), h, xs)
    h, w = np.zeros((2, 4), np.float32), np.eye(4, dtype=np.float32) * 0.5
    xs = np.linspace(-1, 1, n * 8, dtype=np.float32).reshape(n, 2, 4)
    return f, (h, xs, w)


def test_llvm_loop_is_a_loop_and_compiles_the_same_for_any_trip_count():
    counts = {}
    for n in (3, 500):
        f, args = _rnn(n)
        compiled = minixla.jit(f).lower(*args).compile()
        exe = compiled.executable
        ir_text = exe.llvm_ir
        assert "while_" in ir_text and ".head:" in ir_text  # the loop's blocks, in one function
        counts[n] = (len(exe.kernels()), ir_text.count("call void"))
        want = jax.lax.scan(lambda h, x: (jax.numpy.tanh(h @ args[2] + x), h.sum()), args[0], args[1])
        for g, w in zip(compiled(*args), want):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    assert counts[3] == counts[500]  # the same kernels and calls: code does not grow with the trips


def test_llvm_loop_state_is_one_buffer_set():
    # a fori_loop of small updates: the arena does not depend on the trip count, the carry is
    # updated in place (no scratch copy), and the result is right
    def f(n):
        return lambda x: lax.fori_loop(0, n, lambda i, c: c * 0.5 + 1.0, x)
    arenas = set()
    for n in (10, 10_000):
        compiled = minixla.jit(f(n)).lower(X).compile()
        arenas.add(compiled.buffer_assignment.arena_size)
        steps = [k for k in compiled.executable._kernels if getattr(k, "kind", None) == "while"]
        assert len(steps) == 1 and not steps[0].phase1 and not steps[0].phase2  # written in place
        np.testing.assert_allclose(compiled(X), jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + 1.0, X), rtol=1e-6)
    assert len(arenas) == 1


def test_llvm_permuted_state_goes_through_scratch():
    # (a, b) -> (b, a + b): the old a is read after b is produced, so copies are needed
    f = lambda L: lambda x: L.fori_loop(0, 7, lambda i, c: (c[1], c[0] + c[1]), (x, x + 1))
    got = minixla.jit(f(lax))(X)
    for g, w in zip(got, f(jax.lax)(X)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("index", [-1, 0, 1, 5])
def test_llvm_switch_branches(index):
    f = lambda L: lambda i, x: L.switch(i, [lambda a: a + 1, lambda a: a * a, lambda a: -a], x)
    np.testing.assert_array_equal(minixla.jit(f(lax))(np.int32(index), X), f(jax.lax)(np.int32(index), X))
