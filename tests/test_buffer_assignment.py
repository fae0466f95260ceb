"""Buffer assignment: live ranges, the heap simulator, in-place reuse, donation, aliasing safety."""
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.jit import optimization_pipeline
from minixla.passes.buffer_assignment import ALIGNMENT, assign_buffers, reads_only_at_output_index
from minixla.testing import check_against_jax, eager_reference

f32 = np.float32
BACKENDS = ("llvm", "jax")


def lowered(f, *args):
    return minixla.jit(f).lower(*args).hlo_module


def optimized(f, *args):
    m = lowered(f, *args)
    optimization_pipeline().run(m)
    return m


def check_plan(a):
    """No two buffers that are live at the same step share a byte; all in the arena, aligned."""
    for x, y in itertools.combinations(a.live_ranges, 2):
        if x.start <= y.end and y.start <= x.end and x.size and y.size:
            assert x.offset + x.size <= y.offset or y.offset + y.size <= x.offset, (x, y)
    for lr in a.live_ranges:
        assert lr.offset % ALIGNMENT == 0 and lr.offset + lr.size <= a.arena_size
        # values sharing a buffer in place follow one another: each dies where the next is born
        for v, w in zip(lr.values, lr.values[1:]):
            assert a.value_live[v][1] == a.value_live[w][0]
    # rule 5: a temporary in an output's bytes dies before that output is written, fits in it,
    # and shares no byte with another one there while both are live
    step = {v: n for n, v in enumerate(a.schedule)}
    written = {sl.index: step[v] for v, sl in a.slices.items() if sl.kind == "output" and v in step}
    for lr in a.output_ranges:
        assert lr.end < written[lr.output] and lr.offset % ALIGNMENT == 0
        assert lr.offset + lr.size <= a.slices[next(v for v, sl in a.slices.items() if sl.kind == "output"
                                                    and sl.index == lr.output)].size
    for x, y in itertools.combinations(a.output_ranges, 2):
        if x.output == y.output and x.start <= y.end and y.start <= x.end:
            assert x.offset + x.size <= y.offset or y.offset + y.size <= x.offset, (x, y)


def run_both(f, jax_f, args, donate=(), rtol=1e-5, atol=1e-6):
    """minixla on both backends (fresh copies of the arguments: donation may overwrite them)."""
    for backend in BACKENDS:
        want = eager_reference(jax_f, *args, backend=backend)
        got = minixla.jit(f, backend=backend, donate_argnums=donate)(*[np.array(a) for a in args])
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=atol, err_msg=backend)


# --- live ranges and the heap ----------------------------------------------------------

def test_chain_reuses_dead_buffers():
    def f(x):
        for _ in range(6):
            x = mnp.sum(mnp.exp(x), axis=1, keepdims=True) * x
        return x
    m = lowered(f, np.ones((64, 64), f32))
    a = assign_buffers(m)
    check_plan(a)
    assert a.arena_size < a.naive_bytes
    assert a.slices[m.entry.root].kind == "output"


def test_parameters_outputs_and_reshape_aliases():
    m = lowered(lambda a: (mnp.reshape(a * 2.0, (6,)), a), np.ones((2, 3), f32))
    a = assign_buffers(m)
    out0, out1 = m.entry.root.operands
    assert a.slices[out0].kind == "output" and a.slices[out0].index == 0
    assert a.slices[out0.operands[0]] == a.slices[out0]   # the reshape is a bitcast
    assert a.slices[out1].kind == "parameter"             # returned parameter: copied by the executable


def test_overlapping_live_ranges_get_disjoint_memory():
    def f(x):
        a = mnp.exp(x)
        b = mnp.sum(a, axis=0)
        c = mnp.sum(a * 2.0, axis=1)
        return mnp.sum(b) + mnp.sum(c)
    check_plan(assign_buffers(lowered(f, np.ones((32, 16), f32))))


# --- in-place reuse --------------------------------------------------------------------

def _scores_then_normalize(x, w1, w2, np=mnp):
    h = x @ w1                                            # a temp with two users: not output-fused
    # elementwise, h's last use: in place of h (a column sum: a row sum would make it all one
    # row fusion, fusion rule 8)
    g = np.tanh(h) * np.sum(h, axis=0, keepdims=True)
    return g @ w2


def test_elementwise_kernel_at_last_use_overwrites_its_operand(rng):
    args = [rng.standard_normal(s).astype(f32) for s in [(16, 8), (8, 32), (32, 4)]]
    m = optimized(_scores_then_normalize, *args)
    a = assign_buffers(m)
    check_plan(a)
    (instr, positions), = a.in_place.items()
    assert instr.opcode == "fusion" and instr.attrs["kind"] == "kLoop"
    assert instr.operands[positions[0]].opcode == "dot"
    assert a.slices[instr] == a.slices[instr.operands[positions[0]]]
    assert a.arena_size < a.naive_bytes
    assert "in place" in a.to_string()
    check_against_jax(_scores_then_normalize, lambda *a: _scores_then_normalize(*a, np=jnp), *args,
                      rtol=1e-4, atol=1e-4)


def test_value_with_two_late_consumers_is_not_overwritten(rng):
    # t has an elementwise consumer (u) and a later one (the final dot): u must not take t's
    # buffer, or the dot would read u's values instead of t's.
    def f(x, w, v, np=mnp):
        t = x @ w
        u = np.exp(t) * 0.5
        s = np.sum(u, axis=1, keepdims=True)
        return (t + s) @ v
    args = [rng.standard_normal(s).astype(f32) for s in [(8, 6), (6, 16), (16, 3)]]
    m = optimized(f, *args)
    a = assign_buffers(m)
    check_plan(a)
    for instr, positions in a.in_place.items():
        for k in positions:  # whatever is in place, it is its operand's last use
            v = instr.operands[k]
            assert a.value_live[v][1] == a.schedule.index(instr)
    run_both(f, lambda *a: f(*a, np=jnp), args)


def test_kernels_that_read_other_indices_are_never_in_place():
    m = optimized(lambda x: mnp.transpose(mnp.exp(x) @ x) + 1.0, np.ones((8, 8), f32))
    a = assign_buffers(m)
    for instr in m.entry.instructions:
        if instr.opcode in ("dot", "transpose", "reduce") or instr.attrs.get("kind") in ("kInput", "kOutput"):
            assert instr not in a.in_place
    transpose_fusion = [i for i in m.entry.instructions if i.opcode == "fusion"
                        and any(j.opcode == "transpose" for j in i.fused_computation.instructions)]
    for t in transpose_fusion:
        assert not reads_only_at_output_index(t, 0)


def test_constants_and_undonated_parameters_are_never_overwritten(rng):
    c = rng.standard_normal((8, 8)).astype(f32)
    f = lambda x: mnp.tanh(x * 2.0 + c) @ x
    x = rng.standard_normal((8, 8)).astype(f32)
    x0 = x.copy()
    a = assign_buffers(optimized(f, x))
    assert all(a.slices[i].kind == "temp" for i in a.in_place)
    run_both(f, lambda x: jnp.tanh(x * 2.0 + c) @ x, [x])
    minixla.jit(f)(x)
    np.testing.assert_array_equal(x, x0)


def test_update_slice_reading_the_buffer_it_writes(rng):
    # The update is computed from the operand it is written into.
    def f(x, np=mnp, lax=lax):
        y = np.exp(x) - 1.0
        upd = lax.slice(y, (0,), (4,)) * 2.0
        return lax.dynamic_update_slice(y, upd, (3,)) + y
    x = rng.standard_normal(12).astype(f32)
    run_both(f, lambda x: f(x, np=jnp, lax=jax.lax), [x])


# --- donation --------------------------------------------------------------------------

def test_donated_input_is_overwritten_in_place_and_returned(rng):
    f = lambda x, y, np=mnp: np.tanh(x) * 2.0 + y
    x, y = rng.standard_normal((4, 8)).astype(f32), rng.standard_normal((4, 8)).astype(f32)
    want = np.asarray(f(x, y, np=jnp))
    compiled = minixla.jit(f, donate_argnums=0).lower(x, y).compile()
    a = compiled.buffer_assignment
    assert a.donated == (0,) and a.aliases == [(0, 0)]
    ma = compiled.memory_analysis()
    assert ma.alias_size_in_bytes == x.nbytes and ma.output_size_in_bytes == x.nbytes
    xd = x.copy()
    out = compiled(xd, y)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    assert np.shares_memory(out, xd)  # the result lives in the donated array, as in JAX
    run_both(f, lambda x, y: f(x, y, np=jnp), [x, y], donate=(0,))


def test_donated_input_used_later_or_returned_is_not_overwritten(rng):
    def f(x, w, np=mnp):
        t = np.exp(x) + 1.0           # x is read again below: t may not overwrite it
        return t @ w + np.sum(x), x   # and x is returned
    x, w = rng.standard_normal((4, 4)).astype(f32), rng.standard_normal((4, 4)).astype(f32)
    compiled = minixla.jit(f, donate_argnums=(0,)).lower(x, w).compile()
    assert compiled.buffer_assignment.aliases == []
    assert all(compiled.buffer_assignment.slices[i].kind != "parameter" for i in compiled.buffer_assignment.in_place)
    run_both(f, lambda x, w: f(x, w, np=jnp), [x, w], donate=(0,))


def test_donated_temp_chain_and_jax_semantics(rng):
    # A temporary computed in the donated buffer, then the output elsewhere.
    def f(x, w, np=mnp):
        h = np.tanh(x) * 3.0
        return h @ w
    x, w = rng.standard_normal((6, 6)).astype(f32), rng.standard_normal((6, 5)).astype(f32)
    compiled = minixla.jit(f, donate_argnums=0).lower(x, w).compile()
    (instr, _), = compiled.buffer_assignment.in_place.items()
    assert compiled.buffer_assignment.slices[instr].kind == "parameter"
    assert compiled.memory_analysis().temp_size_in_bytes == 0
    run_both(f, lambda x, w: f(x, w, np=jnp), [x, w], donate=(0,))


def test_donating_an_array_passed_twice_or_read_only_copies_it(rng):
    f = minixla.jit(lambda x, y: x * 2.0 + y, donate_argnums=0)
    x = rng.standard_normal(16).astype(f32)
    x0 = x.copy()
    np.testing.assert_allclose(f(x, x), x0 * 3.0)       # y aliases x: x is not overwritten mid-way
    np.testing.assert_array_equal(x, x0)
    ro = x0.copy()
    ro.setflags(write=False)
    np.testing.assert_allclose(f(ro, x0), x0 * 3.0)
    np.testing.assert_array_equal(ro, x0)


def test_donate_argnums_out_of_range_raises():
    with pytest.raises(ValueError, match="donate_argnums"):
        minixla.jit(lambda x: x + 1.0, donate_argnums=3).lower(np.ones(2, f32))


# --- random programs -------------------------------------------------------------------

@settings(max_examples=int(os.environ.get("MINIXLA_FUZZ_EXAMPLES", "10")), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["tanh", "mul", "dot", "rowsum"]), st.integers(0, 8)),
                min_size=2, max_size=8), st.booleans())
def test_random_plans_never_clobber_live_values(steps, donate):
    def prog(x, w, np):
        vals = [x]
        for op, k in steps:
            u = vals[k % len(vals)]
            if op == "tanh":
                vals.append(np.tanh(u) * 1.5)
            elif op == "mul":
                vals.append(u * vals[-1])
            elif op == "dot":
                vals.append(u @ w)
            else:
                vals.append(u - np.sum(u, axis=1, keepdims=True) * 0.125)
        return vals[-1], vals[len(vals) // 2]
    x = np.linspace(-1, 1, 36, dtype=f32).reshape(6, 6)
    w = np.linspace(-0.5, 0.5, 36, dtype=f32).reshape(6, 6)
    compiled = minixla.jit(lambda x, w: prog(x, w, mnp), donate_argnums=(0,) if donate else ()).lower(x, w).compile()
    check_plan(compiled.buffer_assignment)
    run_both(lambda x, w: prog(x, w, mnp), lambda x, w: prog(x, w, jnp), [x, w],
             donate=(0,) if donate else (), rtol=1e-4, atol=1e-5)


def test_temporaries_live_in_outputs_not_yet_written(rng, monkeypatch):
    """Rule 5 (XLA's maybe-live-out allocations holding temporaries): an MLP's SGD step keeps
    its activations in the bytes of the weight gradients written after they die, so its arena
    is smaller than without the rule (and than XLA's), with the same values bit for bit; with
    donated parameters (outputs written in place of them) the rule has no output to use."""
    from benchmarks import training as T
    from minixla.passes import buffer_assignment

    w = next(w for w in T.training_workloads(0.01) if w.name == "mlp_train")
    args = w.make_args(rng)
    step = w.make_step(T.minixla_namespace())
    on = minixla.jit(step).lower(*args).compile()
    check_plan(on.buffer_assignment)
    assert on.buffer_assignment.output_ranges and "in output" in on.buffer_assignment.to_string()
    monkeypatch.setattr(buffer_assignment, "MAX_OUTPUT_REGIONS", 0)
    off = minixla.jit(step).lower(*args).compile()
    assert not off.buffer_assignment.output_ranges
    assert on.memory_analysis().temp_size_in_bytes < off.memory_analysis().temp_size_in_bytes
    for _ in range(2):  # (a second call: the temporaries' bytes are fresh arrays again)
        for a, b in zip(jax.tree.leaves(on(*args)), jax.tree.leaves(off(*args))):
            np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    donated = minixla.jit(step, donate_argnums=0).lower(*args).compile()
    assert not donated.buffer_assignment.output_ranges or check_plan(donated.buffer_assignment) is None
    got = donated(jax.tree.map(np.copy, args[0]), *args[1:])
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(off(*args))):
        np.testing.assert_array_equal(a, b)
