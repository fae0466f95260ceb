"""Control flow (issue 15): ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Every program is written once against a ``lax`` module and run with ``jax.lax`` (JAX eager, the
reference) and with ``minixla.lax`` eagerly, under ``minixla.jit`` on the LLVM backend and on the
JAX hand-off. The jaxprs print as JAX's; the HLO (``while``/``conditional``/``tuple``/
``get-tuple-element``) round-trips through the parser, verifies and evaluates to JAX's values.
"""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
from minixla import lax
from minixla.hlo import lower_jaxpr, parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import verify

F = np.linspace(-2, 3, 6, dtype=np.float32).reshape(2, 3)
XS = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


def _cond_pytree(L, x):
    ops = {"a": x, "b": (x.sum(), 3)}
    return L.cond(x[0, 0] > 0, lambda o: {"a": o["a"] * 2, "b": o["b"][0] + 1},
                  lambda o: {"a": o["a"] - o["b"][0], "b": o["b"][0] * o["b"][1]}, ops)


def _switch(L, x):
    fs = [lambda a: a + 1, lambda a: a * a, lambda a: -a]
    return [L.switch(i, fs, x) for i in (-1, 0, 1, 2, 7)]


def _while_pytree(L, x):
    def body(c):
        i, (s, m) = c
        return i + 1, (s + m * i.astype(m.dtype), m * 0.5)
    return L.while_loop(lambda c: c[0] < 6, body, (0, (x, x + 1)))


def _while_zero_trip(L, x):
    return L.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2, x)


def _fori(L, x, n):
    return L.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), L.fori_loop(1, n, lambda i, c: c - i, x)


def _scan(L, c, xs):
    def f(carry, x):
        h, k = carry
        h = jnp.tanh(h * 0.5 + x) if L is jax.lax else minixla.numpy.tanh(h * 0.5 + x)
        return (h, k + 1), {"h": h, "k": k}
    fwd = L.scan(f, (c, np.int32(0)), xs)
    rev = L.scan(f, (c, np.int32(0)), xs, reverse=True)
    return fwd, rev


def _scan_length_only(L, c):
    return L.scan(lambda a, _: (a * 2, a + 1), c, None, length=3)


def _scan_empty(L, c, xs):
    return L.scan(lambda a, x: (a + x, a * x), c, xs[:0])


def _nested(L, x):
    # a scan inside a while, a cond inside the scan, a while inside a cond
    def step(c, row):
        c = L.cond(row.sum() > 1.0, lambda a: a + row, lambda a: a * 0.5, c)
        return c, c.sum()

    def body(s):
        i, v, acc = s
        v, ys = L.scan(step, v, XS)
        return i + 1, v, acc + ys
    out = L.while_loop(lambda s: s[0] < 2, body, (0, x[0], np.zeros(4, np.float32)))
    inner = L.cond(x[1, 0] < 0, lambda a: L.while_loop(lambda c: c[0] < 3.0, lambda c: c + 1.0, a), lambda a: a, x[1])
    return out, inner


def _map(L, x):
    return L.map(lambda r: r * r.sum(), x)


def _map_batched(L, x, batch_size):
    # jax.lax.map's batch_size (a TypeError before): vmap over batches of rows in a scan, the
    # remainder vmapped after it; a pytree in and out
    return L.map(lambda r: (r[0] * r[1].sum(), r[1][0]), (x, x * 2), batch_size=batch_size)


def _int_and_bool(L, x):
    # integer and bool carries, uint8 wrap-around
    def body(c):
        n, flag, u = c
        return n * 3 + 1, ~flag, u + np.uint8(200)
    return L.while_loop(lambda c: c[0] < 1000, body, (x, np.bool_(True), np.uint8(7)))


def _weak_carries(L, x16, n):
    # A weakly typed initial carry (a Python scalar) takes the body's type, as JAX's
    # ``_promote_weak_typed_input``: scan, static fori (a scan), traced fori (a while under
    # jit), while_loop; a Python-int lower bound keeps the index weak (``c + i`` stays int8).
    def at(i):  # (x16[i] for a traced i)
        return L.dynamic_index_in_dim(x16, i, keepdims=False)
    return (L.scan(lambda c, x: (c + x, c * 2), 0, x16), L.scan(lambda c, x: (c + x, c), 0, x16.astype(np.int8)),
            L.fori_loop(0, 3, lambda i, c: c + x16[0], 0), L.fori_loop(0, n, lambda i, c: c + at(i), 0.0),
            L.fori_loop(0, n, lambda i, c: c + i, np.int8(1)),
            L.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + at(c[0])), (0, 0)))


PROGRAMS = {
    "weak_carries": (_weak_carries, (np.array([1.5, -2.25, 3.0, 0.5], np.float16), np.int32(3))),
    "cond_pytree": (_cond_pytree, (F,)), "cond_pytree_false": (_cond_pytree, (-F,)),
    "switch": (_switch, (F,)), "while_pytree": (_while_pytree, (F,)),
    "while_zero_trip": (_while_zero_trip, (F,)), "fori": (_fori, (F, np.int32(4))),
    "scan": (_scan, (F[0], XS)), "scan_length_only": (_scan_length_only, (F,)),
    "scan_empty": (_scan_empty, (F[0], XS)), "nested": (_nested, (F,)), "nested_neg": (_nested, (-F,)),
    "map": (_map, (F,)), "map_batched": (lambda L, x: _map_batched(L, x, 3), (XS,)),
    "map_batch_of_all": (lambda L, x: _map_batched(L, x, np.int32(len(x))), (F,)), "int_and_bool": (_int_and_bool, (np.int32(3),)),
}


def _check(got, want):
    gl, gt = jax.tree_util.tree_flatten(got)
    wl, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt
    for g, w in zip(gl, wl):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


@functools.lru_cache(maxsize=None)
def _jax_eager(name):
    """JAX eager's result for ``PROGRAMS[name]``, computed once for the three modes (JAX's eager
    loops compile each time they run)."""
    prog, args = PROGRAMS[name]
    return prog(jax.lax, *args)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("mode", ["eager", "llvm", "jax"])
def test_matches_jax_eager(name, mode):
    prog, args = PROGRAMS[name]
    want = _jax_eager(name)
    if mode == "eager":
        got = prog(lax, *args)
    else:
        got = minixla.jit(lambda *a: prog(lax, *a), backend=mode)(*args)
    _check(got, want)


JAXPR_CASES = {
    "while": (lambda L: lambda x: L.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * x), (0, x)),
              (np.ones(3, np.float32),)),
    "scan": (lambda L: lambda c, xs: L.scan(lambda c, x: (c + x * c, c * 2), c, xs),
             (np.ones(3, np.float32), np.ones((5, 3), np.float32))),
    "switch": (lambda L: lambda i, x: L.switch(i, [lambda a: a + 1, lambda a: a * 2, lambda a: -a], x), (1, 1.0)),
    "fori_static": (lambda L: lambda x: L.fori_loop(0, 5, lambda i, c: c + i, x), (1.0,)),
    "fori_traced": (lambda L: lambda x, n: L.fori_loop(0, n, lambda i, c: c + i, x), (1.0, 3)),
    "map": (lambda L: lambda x: L.map(lambda a: a * 2, x), (np.ones(3, np.float32),)),
    "cond": (lambda L: lambda x: L.cond(x > 0, lambda a: a * 2, lambda a: a - 1, x), (np.float32(1),)),
    "scan_none": (lambda L: lambda x: L.scan(lambda c, _: (c * 2, None), x, None, length=3, reverse=True), (1.0,)),
    # a carry returned unchanged becomes a const and a y that is an x is xs itself (JAX's forwarding)
    "scan_forwarded": (lambda L: lambda w, xs: L.scan(lambda c, x: ((c[0], c[1] * c[0] + x), (c[1], x)), (w, w), xs),
                       (np.float32(1.5), np.ones(3, np.float32))),
    # an output every branch returns as the same operand is that operand (JAX's passthrough pruning)
    "cond_passthrough": (lambda L: lambda x, y: L.cond(x > 0, lambda a, b: (a, b * 2, b), lambda a, b: (a, b + 1, a),
                                                       x, y), (np.float32(1), np.float32(2))),
}


@pytest.mark.parametrize("name", sorted(JAXPR_CASES))
def test_jaxpr_prints_as_jax(name):
    build, args = JAXPR_CASES[name]
    assert str(minixla.make_jaxpr(build(lax))(*args)) == str(jax.make_jaxpr(build(jax.lax))(*args))


def test_hlo_round_trip_verify_and_evaluate():
    prog, args = PROGRAMS["nested"]
    module = lower_jaxpr(minixla.make_jaxpr(lambda x: prog(lax, x))(*args))
    verify(module)
    text = module.to_string()
    assert "while(" in text and "conditional(" in text and "get-tuple-element(" in text
    assert re.search(r"condition=%\S+, body=%\S+", text)
    assert re.search(r"branch_computations=\{%\S+, %\S+\}", text)
    again = parse(text)
    assert again.to_string() == text
    verify(again)
    got = evaluate(again, *args)
    _check(list(got), jax.tree_util.tree_leaves(prog(jax.lax, *args)))


def test_hlo_conditional_semantics():
    """s32 index out of range runs the last branch; a pred index picks true_computation."""
    text = """HloModule m

%b0 (p: (f32[])) -> (f32[]) {
  %p = (f32[]) parameter(0)
  %x = f32[] get-tuple-element(%p), index=0
  ROOT %t = (f32[]) tuple(%x)
}

%b1 (q: (f32[])) -> (f32[]) {
  %q = (f32[]) parameter(0)
  %y = f32[] get-tuple-element(%q), index=0
  %n = f32[] negate(%y)
  ROOT %u = (f32[]) tuple(%n)
}

ENTRY %main (i: s32[], v: f32[], c: pred[]) -> ((f32[]), (f32[])) {
  %i = s32[] parameter(0)
  %v = f32[] parameter(1)
  %c = pred[] parameter(2)
  %tup = (f32[]) tuple(%v)
  %k = (f32[]) conditional(%i, %tup, %tup), branch_computations={%b0, %b1}
  %pc = (f32[]) conditional(%c, %tup, %tup), true_computation=%b0, false_computation=%b1
  ROOT %r = ((f32[]), (f32[])) tuple(%k, %pc)
}
"""
    module = parse(text)
    verify(module)
    assert module.to_string().count("true_computation=%b0, false_computation=%b1") == 1
    for i, c, want in [(0, True, (2.0, 2.0)), (1, False, (-2.0, -2.0)), (-5, True, (-2.0, 2.0)),
                       (9, False, (-2.0, -2.0))]:
        (k,), (pc,) = evaluate(module, np.int32(i), np.float32(2.0), np.bool_(c))
        assert (float(k), float(pc)) == want


def test_verifier_rejects_a_body_of_the_wrong_signature():
    text = """HloModule m

%cond (s: (f32[], s32[])) -> pred[] {
  %s = (f32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=1
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %ten), direction=LT
}

%body (b: (f32[], s32[])) -> (f32[]) {
  %b = (f32[], s32[]) parameter(0)
  %x = f32[] get-tuple-element(%b), index=0
  ROOT %t = (f32[]) tuple(%x)
}

ENTRY %main (v: f32[]) -> (f32[], s32[]) {
  %v = f32[] parameter(0)
  %zero = s32[] constant(0)
  %init = (f32[], s32[]) tuple(%v, %zero)
  ROOT %w = (f32[], s32[]) while(%init), condition=%cond, body=%body
}
"""
    with pytest.raises(minixla.hlo.verifier.HloVerifierError, match="body=%body must be"):
        verify(parse(text))


def _error(fn):
    with pytest.raises((TypeError, ValueError)) as info:
        fn()
    msg = str(info.value)
    assert "test_control_flow.py" in msg, msg  # the user's line
    return msg


def test_errors_match_jax():
    x = np.ones(3, np.float32)
    m = _error(lambda: lax.cond(True, lambda a: {"a": a, "b": a}, lambda a: {"a": a, "b": a.astype(np.int32)}, x))
    assert "cond branches must have equal output types" in m
    assert "The output of true_fun at path ['b'] has type float32[3] but the corresponding output of " \
           "false_fun has type int32[3], so the dtypes do not match." in m
    m = _error(lambda: lax.cond(True, lambda a: {"a": a}, lambda a: {"a": a[:2]}, x))
    assert "float32[2], so the shapes do not match" in m
    m = _error(lambda: lax.cond(True, lambda a: (a,), lambda a: [a], x))
    assert "cond branch outputs must have the same pytree structure" in m
    assert "Pred must be a scalar" in _error(lambda: lax.cond(x > 0, lambda a: a, lambda a: a, x))
    m = _error(lambda: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1].astype(np.int32)), (0, x)))
    assert ("The input carry component c[1] has type float32[3] but the corresponding output carry "
            "component has type int32[3], so the dtypes do not match.") in m
    assert "cond_fun must return a boolean scalar" in _error(lambda: lax.while_loop(lambda c: c, lambda c: c, x))
    m = _error(lambda: lax.scan(lambda c, a: (c, a), 0.0, (np.ones(3), np.ones(4))))
    assert "scan got values with different leading axis sizes: 3, 4." in m
    m = _error(lambda: lax.scan(lambda c, a: (c, a), 0.0, np.ones(3), length=4))
    assert "scan got `length` argument of 4 which disagrees with leading axis sizes [3]." in m
    assert "scan got no values to scan over" in _error(lambda: lax.scan(lambda c, a: (c, a), 0.0, None))
    m = _error(lambda: lax.fori_loop(0, 3, lambda i, c: c.astype(np.int32), 1.0))
    assert "loop_carry[1] has type float32[] but the corresponding output carry component has type int32[]" in m
    assert "Index type must be an integer" in _error(lambda: lax.switch(1.5, [lambda a: a, lambda a: a], 1.0))
    assert "Empty branch sequence" in _error(lambda: lax.switch(1, [], 1.0))
    # the same errors while tracing under jit
    m = _error(lambda: minixla.jit(lambda v: lax.while_loop(lambda c: c[0] < 3, lambda c: c[:2], v))(x))
    assert "so the shapes do not match" in m
    # (JAX checks cond_fun's output before the carry)
    m = _error(lambda: minixla.jit(lambda v: lax.while_loop(lambda c: c < 3, lambda c: c[:2], v))(x))
    assert "cond_fun must return a boolean scalar, but got output type(s) [ShapedArray(bool[3])]." in m


def _jax_message(fn):
    """``fn(L)`` raises with ``L = jax.lax`` and with minixla's ``lax``: the same exception
    class (or a subclass) and the same message, minixla's without its ``api:`` prefix and its
    operands/at lines (JAX prints neither) and with its own class names where JAX names its."""
    raised = []
    for L in (jax.lax, lax):
        with pytest.raises((TypeError, ValueError)) as info:
            fn(L)
        m = "\n".join(ln for ln in str(info.value).split("\n") if not ln.startswith(("  operands: ", "  at: ")))
        raised.append((info.value, re.sub(r"^[a-z_]+: ", "", m)))
    (jax_err, want), (err, got) = raised
    assert isinstance(err, type(jax_err)), (type(err), type(jax_err))
    want = want.replace("jax._src.core.ShapedArray", "minixla.core.avals.ShapedArray").replace("JitTracer(", "Tracer(")
    assert got == want, (got, want)


def test_loop_bounds_carries_and_messages_as_jax():
    """fori_loop's bound rule (equal dtypes, or signed ints with one Python int; float and
    bool bounds run), and JAX's messages for changed carry structures/types, non-pair scan
    bodies, branch outputs, bad predicates/indices, eagerly and under jit."""
    xs = np.ones((3, 2), np.float32)
    # a weak initial carry under grad and vmap (jax.grad / jax.vmap of the same, pinned)
    g = minixla.grad(lambda w: lax.fori_loop(0, 3, lambda i, c: c * w + 1.0, 0.0))(np.float16(1.5))
    assert g.dtype == np.float16 and g == 4.0
    i8 = np.arange(3, dtype=np.int8)
    c, ys = minixla.vmap(lambda w: lax.scan(lambda c, x: (c * w + x, c), 0, i8))(i8)
    assert c.dtype == ys.dtype == np.int8 and c.tolist() == [2, 3, 4] and ys.tolist() == [[0, 0, 1]] * 3
    # operand=None is an operand; JAX's deprecated cond(pred, x_true, f_true, x_false, f_false)
    assert bool(lax.cond(True, lambda a: a is None, lambda a: False, operand=None))
    assert lax.cond(False, 1.0, lambda x: x + 1, 2.0, lambda x: x * 3) == 6.0
    for bounds in ((0.0, 3.0), (np.float32(0), np.float32(2.5)), (False, True), (np.int8(1), 3)):
        want = jax.lax.fori_loop(*bounds, lambda i, c: c + i, 0.5)
        got = lax.fori_loop(*bounds, lambda i, c: c + i, 0.5)
        assert np.asarray(got).dtype == np.asarray(want).dtype and got == want, (bounds, got, want)
    cases = [
        lambda L: L.fori_loop(np.int8(0), np.int32(3), lambda i, c: c, 0),
        lambda L: L.fori_loop(np.uint8(0), 3, lambda i, c: c, 0),
        lambda L: L.fori_loop(0, 3.5, lambda i, c: c, 0),
        lambda L: L.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, [c[1]]), (0, 1.0)),
        lambda L: L.while_loop(lambda c: c["a"] < 3, lambda c: {"a": c["a"] + 1, "b": c["a"]}, {"a": 0, "c": 1}),
        lambda L: L.while_loop(lambda c: (c < 3, c < 3), lambda c: c + 1, 0),
        lambda L: L.while_loop(lambda c: c, lambda c: c - 1, 3),
        lambda L: L.scan(lambda c, x: ((c, c), x), 0.0, xs),
        lambda L: L.scan(lambda c, x: c, 0.0, xs),
        lambda L: L.scan(lambda c, x: (c, x, x), 0.0, xs),
        lambda L: L.scan(lambda c, x: ((c[0].astype(np.int32), c[1][:1]), x), (xs[0], xs[0]), xs),
        lambda L: L.scan(lambda c, x: (x, x), 0, xs[:, 0] > 0),  # 0 stays int32 against a bool body
        lambda L: L.scan(lambda c, x: (c, x), 0.0, 1.0),
        lambda L: L.scan(lambda c, x: (c, x), 0.0, (xs, xs[:2]), length=3),
        lambda L: L.scan(lambda c, x: (c, x), 0.0, xs, unroll=-1),
        lambda L: L.cond(True, lambda: np.float32(1), lambda: np.int32(1)),
        lambda L: L.cond(True, lambda: (1.0, 2.0), lambda: (1.0,)),
        lambda L: L.cond(True, lambda: {"a": xs, "b": xs}, lambda: {"a": xs[0], "b": xs.astype(np.int32)}),
        lambda L: L.switch(1, [lambda: np.float32(1), lambda: np.int32(1), lambda: np.int32(1)]),
        lambda L: L.switch(True, [lambda: 1.0, lambda: 2.0]),
        lambda L: L.cond("a", lambda: 1.0, lambda: 2.0),
        lambda L: L.cond(None, lambda: 1.0, lambda: 2.0),
        lambda L: L.cond(True, 1.0, 2.0),
        lambda L: L.cond(True, lambda a: a, lambda a: a, 1.0, operand=2.0),
        lambda L: L.switch(0, [lambda: 1.0, 2.0]),
        lambda L: L.while_loop(lambda c: c < 1, 1.0, 0),
        lambda L: L.fori_loop(0, 3, None, 0),
        lambda L: L.associative_scan(lambda a, b: a + b, (xs[:, 0], xs[:2, 0])),
        lambda L: L.associative_scan(lambda a, b: a + b, xs, axis=2),  # (was taken as axis % ndim)
        lambda L: L.associative_scan(lambda a, b: a + b, np.float32(1)),
    ]
    jits = [
        lambda L, jit: jit(lambda i: L.switch(i, [lambda: 1.0, lambda: 2.0]))(1.0),
        lambda L, jit: jit(lambda p: L.cond(p, lambda: 1.0, lambda: 2.0))(np.ones(2, np.float32)),
        lambda L, jit: jit(lambda x: L.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, [c[1]]), (0, x)))(1.0),
        lambda L, jit: jit(lambda n: L.fori_loop(0, n, lambda i, c: c, 0.0, unroll=2))(3),
        lambda L, jit: jit(lambda n: L.fori_loop(0, n, lambda i, c: c, 0.0))(np.float32(3)),
    ]
    for case in cases:
        _jax_message(case)
    for case in jits:
        _jax_message(lambda L: case(L, jax.jit if L is jax.lax else minixla.jit))


def test_loop_and_branch_results_have_jaxs_weak_types():
    """A loop's results have its body's output types and a cond's those of its branch 0
    (false_fun), weak types included, as JAX's abstract evaluation: checked on the traced
    jaxpr's outputs (``ys`` of a weak carry stay weak, so ``ys + f16`` is f16)."""
    xs = np.arange(3, dtype=np.float32)
    progs = [  # (traced arguments: make_jaxpr evaluates a program of constants eagerly)
        lambda L, xs, p: L.scan(lambda c, x: (c + x, c), 0.0, xs),
        lambda L, xs, p: L.scan(lambda c, x: (c + x, c), 0.0, xs)[1] + np.float16(1),
        lambda L, xs, p: L.while_loop(lambda c: c < xs[0], lambda c: c + 1.0, 0.0),
        lambda L, xs, p: L.while_loop(lambda c: c < xs[0], lambda c: c + np.float32(1), 0.0),
        lambda L, xs, p: L.fori_loop(0, 3, lambda i, c: c + i * xs[0].astype(np.int32), 0),
        lambda L, xs, p: L.cond(p, lambda: np.float32(2), lambda: 1.0),
        lambda L, xs, p: L.cond(p, lambda: 1.0, lambda: np.float32(2)),
        lambda L, xs, p: L.switch(p.astype(np.int32), [lambda: 1.0, lambda: np.float32(2)]),
    ]
    for prog in progs:
        got = minixla.make_jaxpr(lambda *a: prog(lax, *a))(xs, True).out_avals
        want = jax.make_jaxpr(lambda *a: prog(jax.lax, *a))(xs, True).out_avals
        assert [(a.shape, a.dtype, a.weak_type) for a in got] == \
            [(a.shape, a.dtype, a.weak_type) for a in want], (got, want)


def test_readme_control_flow_example():
    import pathlib
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme[readme.index("## Control flow"):readme.index("## The digits CNN")]
    shown = str(minixla.make_jaxpr(lambda x: lax.fori_loop(0, 5, lambda i, c: c + i, x))(1.0))
    assert shown in section
    assert shown == str(jax.make_jaxpr(lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c + i, x))(1.0))
