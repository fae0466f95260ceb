"""How loops run on the LLVM backend (issue 15's performance levers), checked for values.

- Small kernels of loop bodies, conditions and branches are defined in the calling code and
  inlined into the loop (``control_flow.inline_in_driver``); they rely on the driver having
  set MXCSR's flush-to-zero bits, so denormals must still flush as in JAX, and the caller's
  MXCSR must come back unchanged.
- ``benchmarks/control_flow.py --fast`` runs and agrees with JAX.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np

import minixla
from minixla import lax


def _jax_value(f, *args):
    with jax.disable_jit():  # (jax arrays: NumPy's own arithmetic keeps subnormals)
        return jax.tree.map(np.asarray, f(*[jnp.asarray(a) for a in args]))


def test_small_loop_kernels_are_inlined_and_flush_denormals_as_jax():
    # c * 0.5 leaves the normal range on the 3rd trip: XLA:CPU flushes it to 0 (FTZ/DAZ)
    def loop(c):
        return lax.fori_loop(0, 4, lambda i, c: c * 0.5 + c * 0.0, c)

    def branch(p, x):
        return lax.cond(p, lambda x: x * 0.25, lambda x: x * 4.0, x)

    def jloop(c):
        return jax.lax.fori_loop(0, 4, lambda i, c: c * 0.5 + c * 0.0, c)

    def jbranch(p, x):
        return jax.lax.cond(p, lambda x: x * 0.25, lambda x: x * 4.0, x)

    c = np.full(8, 4e-38, np.float32)
    fl = minixla.jit(loop)
    np.testing.assert_array_equal(fl(c), _jax_value(jloop, c))
    assert float(np.asarray(fl(c))[0]) == 0.0
    x = np.full(8, 2e-38, np.float32)
    np.testing.assert_array_equal(minixla.jit(branch)(True, x), _jax_value(jbranch, True, x))
    np.testing.assert_array_equal(minixla.jit(branch)(False, x), _jax_value(jbranch, False, x))
    # the caller's floating-point mode is back: NumPy still computes subnormals
    assert np.float32(4e-38) * np.float32(0.5) != 0
    # the loop's kernels are defined in the calling code and no call of them is left
    exe = fl.lower(c).compile().executable
    assert "minixla.inline" in exe.llvm_ir
    step = _loop_function_ir(exe)
    assert "call void @minixla.inline" not in step and "@minixla_k_" not in step, step


def _loop_function_ir(exe):
    """The optimized IR of the function a program's (one, outermost) ``while`` became."""
    (name,) = [n for n in exe._jit._dumped()[2] if n.startswith("minixla.while_")]
    return exe._jit.function_ir(name)


def _self_loops(function_ir):
    """The basic blocks of an LLVM function that branch back to themselves: {label: body}."""
    blocks, label = {}, None
    for line in function_ir.splitlines():
        head = re.match(r"^([\w.]+):", line)
        if head:
            label = head.group(1)
            blocks[label] = []
        elif label is not None and line.strip():
            blocks[label].append(line)
    return {k: "\n".join(v) for k, v in blocks.items() if re.search(rf"label %{re.escape(k)}\b", v[-1] if v else "")}


def test_small_loop_state_stays_in_registers():
    # The loop is a function taking the arena and each array as noalias pointers, and it
    # addresses its state from the arena's base, so LLVM sees that the counter, the predicate
    # and the carry are distinct and keeps them in registers for all the trips (stored once,
    # after the loop); loaded from the table one by one they were stored and reloaded every
    # trip (~1.6x the time of a 10,000-trip fori_loop of a small update).
    def f(c):
        return lax.fori_loop(0, 1000, lambda i, c: c * 0.999 + 0.001, c)
    def want(c):  # (JAX eager's values: one IEEE float32 op at a time; its loop is slow here)
        for _ in range(1000):
            c = c * np.float32(0.999) + np.float32(0.001)
        return c
    c = np.linspace(-2, 2, 8).astype(np.float32)
    fl = minixla.jit(f)
    np.testing.assert_array_equal(fl(c), want(c))
    exe = fl.lower(c).compile().executable
    step = _loop_function_ir(exe)
    loops = _self_loops(step)
    assert len(loops) == 1, step
    body = next(iter(loops.values()))
    assert "fmul" in body and "store" not in body and "load" not in body, step
    # the result (an element of the loop's state, in the arena) is copied into a fresh output
    # array by the generated code: each call's result is its own
    assert "memcpy" in exe._jit.function_ir("minixla.seq0"), step
    first = fl(c)
    second = fl(c + np.float32(1))
    assert first.flags.owndata and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, want(c))
    np.testing.assert_array_equal(second, want(c + np.float32(1)))


def test_scan_writes_its_ys_row_inline():
    # ys[t] = y updates 64 of ys's 6,400 elements in place: inlined into the loop like the
    # carry's update (it was a kernel call per trip, sized by all of ys)
    def f(L):
        return lambda c, xs: L.scan(lambda c, x: (c * 0.5 + x, c), c, xs)
    c, xs = np.ones(64, np.float32), np.random.default_rng(2).standard_normal((100, 64)).astype(np.float32)
    fl = minixla.jit(f(lax))
    want, ys = c, []  # (JAX eager's values: one IEEE float32 op at a time; its scan is slow here)
    for x in xs:
        ys.append(want)
        want = want * np.float32(0.5) + x
    for got, w in zip(fl(c, xs), (want, np.stack(ys))):
        np.testing.assert_array_equal(got, w)
    step = _loop_function_ir(fl.lower(c, xs).compile().executable)
    assert "@minixla_k_" not in step, step


def test_control_flow_benchmark_runs_fast():
    from benchmarks import control_flow
    out = control_flow.main(["--fast"])
    assert {r["name"] for r in out["rows"]} == {"rnn_scan", "rnn_grad", "fori_100"}
    for row in out["rows"]:
        assert row["max_abs_diff"] < 1e-4, row
        assert row["ratio"] > 0 and row["cpu_ratio"] > 0
    assert out["compile_short_ms"] > 0 and out["compile_long_ms"] > 0


def test_loop_program_is_written_to_and_read_from_the_persistent_cache(tmp_path):
    # (was: "cannot serialize": the loop's compile context held closures)
    def f(x):
        return lax.fori_loop(0, 9, lambda i, c: c * 0.5 + lax.cond(i > 4, lambda: 1.0, lambda: 0.25), x)
    x = np.ones(4, np.float32)
    with minixla.config.override(minixla_compilation_cache_dir=str(tmp_path / "cache"),
                                 minixla_persistent_cache_min_compile_time_secs=0.0):
        first = minixla.jit(f).lower(x).compile()
        again = minixla.jit(f).lower(x).compile()
    assert not first.persistent_cache_hit and again.persistent_cache_hit
    expected = _jax_value(lambda x: jax.lax.fori_loop(
        0, 9, lambda i, c: c * 0.5 + jax.lax.cond(i > 4, lambda: 1.0, lambda: 0.25), x), x)
    np.testing.assert_array_equal(again(x), expected)


def _rnn(L, np_, reverse=False, length=None):
    def run(W, U, h0, xs):
        def cell(h, x):
            h = np_.tanh(h @ W + x @ U)
            return h, h.sum()
        return L.scan(cell, h0, xs, reverse=reverse, length=length)
    return run


def _rnn_args(T=6, B=3, H=5, K=4):
    r = np.random.default_rng(1)
    return ((r.standard_normal((H, H)) * 0.4).astype(np.float32), (r.standard_normal((K, H)) * 0.4).astype(np.float32),
            r.standard_normal((B, H)).astype(np.float32), r.standard_normal((T, B, K)).astype(np.float32))


def _split(text):
    entry = text.index("ENTRY")
    return text[:entry], text[entry:]


def test_input_projection_dot_is_hoisted_out_of_the_scan():
    # x_t @ U depends only on xs and U: one [T*B, K] x [K, H] dot before the loop; h @ W stays
    args = _rnn_args()
    for reverse in (False, True):
        body, entry = _split(minixla.jit(_rnn(lax, minixla.numpy, reverse)).lower(*args).compile().as_text())
        assert "f32[18,5]{1,0} dot(" in entry, entry  # 6 steps x batch 3
        assert body.count(" dot(") == 1, body
        want = _jax_value(_rnn(jax.lax, jnp, reverse), *args)
        for backend in ("llvm", "jax"):
            got = minixla.jit(_rnn(lax, minixla.numpy, reverse), backend=backend)(*args)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)
    # grad through the scan: the forward and the backward loop's recomputation are hoisted alike
    loss = lambda np_, L: lambda W, U, h0, xs: (_rnn(L, np_)(W, U, h0, xs)[0] ** 2).sum()  # noqa: E731
    g = minixla.jit(minixla.grad(loss(minixla.numpy, lax), argnums=(0, 1)))(*args)
    with jax.disable_jit():
        want = jax.grad(loss(jnp, jax.lax), argnums=(0, 1))(*[jnp.asarray(a) for a in args])
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-5)


def test_dot_is_not_hoisted_when_the_loop_uses_fewer_steps_than_xs_has():
    # a while over the first 2 of 6 rows: hoisting would compute 4 rows for nothing
    def f(W, U, h0, xs):
        return lax.fori_loop(0, 2, lambda i, h: minixla.numpy.tanh(h @ W + xs[i] @ U), h0)
    body, entry = _split(minixla.jit(f).lower(*_rnn_args()).compile().as_text())
    assert " dot(" not in entry and body.count(" dot(") == 2

    def g(W, U, h0, xs):
        return jax.lax.fori_loop(0, 2, lambda i, h: jnp.tanh(h @ W + xs[i] @ U), h0)
    np.testing.assert_allclose(minixla.jit(f)(*_rnn_args()), _jax_value(g, *_rnn_args()), rtol=2e-6, atol=2e-6)


def test_dot_is_hoisted_past_the_size_limit_when_no_bigger_than_xs(monkeypatch):
    # A 10,000-step RNN's projection (as big as its xs) is hoisted as a 1,000-step one's is, so
    # compile time and code do not change with the sequence length; a bigger one is not.
    from minixla.jit import optimization_pipeline
    from minixla.passes import while_loop_dot_hoisting
    monkeypatch.setattr(while_loop_dot_hoisting, "MAX_HOISTED_BYTES", 300)
    for K, hoisted in ((5, True), (4, False)):  # P: 6*3*5 floats (360 bytes); xs: 6*3*K floats
        args = _rnn_args(K=K)
        module = minixla.jit(_rnn(lax, minixla.numpy)).lower(*args).hlo_module.clone()
        optimization_pipeline().run(module)
        body, entry = _split(module.to_string())
        assert (" dot(" in entry) == hoisted and body.count(" dot(") == (1 if hoisted else 2), (K, entry)


def test_loop_invariant_gemm_rhs_is_packed_once_before_the_loop(monkeypatch):
    # h @ W and h @ W.T with W passed through the loop: while-loop-gemm-packing lays W out in
    # the GEMM's panels ([P, K, NR]) once before the loop, the body's GEMMs read them in place;
    # values are JAX's and bit-identical to the unpacked program's (same blocks, same order)
    import sys

    from minixla.backends.llvm.gemm import panel_columns
    stages = sys.modules["minixla.stages"]
    nr = panel_columns(np.float32)
    H, B, T = 2 * nr, 4, 5
    r = np.random.default_rng(2)
    W = (r.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    h0 = r.standard_normal((B, H)).astype(np.float32)
    xs = r.standard_normal((T, B, H)).astype(np.float32)

    Wc = (r.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)  # (closed over: a constant)

    def rnn(L, np_):
        def run(W, h0, xs):
            def cell(c, x):
                h, g, k = c
                return (np_.tanh(h @ W + x), np_.tanh(g @ W.T) * 0.5, np_.tanh(k @ Wc)), None
            # (the scan inside a loop: the panels go before both)
            return L.fori_loop(0, 2, lambda i, c: L.scan(cell, c, xs)[0], (h0, h0, h0))
        return run
    compiled = minixla.jit(rnn(lax, minixla.numpy)).lower(W, h0, xs).compile()
    text = compiled.as_text()
    entry = _split(text)[1]
    bodies = re.findall(r"\n%scan_body[^\n]*\n.*?\n}", text, re.S)
    packed = f"f32[2,{H},{nr}]"
    assert len(bodies) == 2 and entry.count(f"{packed}{{2,1,0}} fusion(") == 3, entry  # the packings, first
    assert not any(f"f32[{H},{H}]" in body for body in bodies), bodies    # W, Wc left the loop states
    inner = next(body for body in bodies if " while(" not in body)
    assert len(re.findall(rf"{re.escape(packed)}\S* get-tuple-element", inner)) == 3, inner  # read by the GEMMs
    assert "bpack" in compiled.executable.llvm_ir                      # (read in place when aligned)
    got = compiled(W, h0, xs)
    want = _jax_value(rnn(jax.lax, jnp), W, h0, xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)
    monkeypatch.setattr(stages, "backend_passes", lambda backend: [])
    plain = minixla.jit(rnn(lax, minixla.numpy)).lower(W, h0, xs).compile()
    assert f"{packed}" not in plain.as_text()
    for g, p in zip(got, plain(W, h0, xs)):
        np.testing.assert_array_equal(g, p)
    # a user's array already in that layout, not 64-byte aligned: its panels are copied as before
    Wp = np.ascontiguousarray(W.reshape(H, 2, nr).transpose(1, 0, 2))
    raw = np.empty(Wp.size + 1, np.float32)
    unaligned = raw[1:] if raw.ctypes.data % 64 == 0 else raw[:-1]
    unaligned = unaligned.reshape(Wp.shape)
    unaligned[...] = Wp
    dot = minixla.jit(lambda h, p: lax.dot_general(h, p, (((1,), (1,)), ((), ()))))
    want = np.einsum("bk,pkn->bpn", h0.astype(np.float64), Wp.astype(np.float64))
    for arg in (Wp, unaligned):
        np.testing.assert_allclose(dot(h0, arg), want, rtol=2e-5, atol=2e-5)
