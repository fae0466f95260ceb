"""Fusion: kinds, legality rules, duplication, the decision log, and results against JAX."""
import os

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.jit import optimization_pipeline
from minixla.passes.buffer_assignment import assign_buffers
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.fusion import FusionPass, count_kernels, format_fusion_log, is_conv_bias_relu
from minixla.testing import check_against_jax
from conftest import filecheck

f32 = np.float32


def lowered(f, *args):
    return minixla.jit(f).lower(*args).hlo_module


def fused(f, *args, **fusion_options):
    """Only fusion (and DCE) on the lowered module."""
    m = lowered(f, *args)
    p = FusionPass(**fusion_options)
    p.run(m)
    DeadCodeElimination().run(m)
    return m, p


def optimized(f, *args):
    """The full optimization pipeline, no backend."""
    m = lowered(f, *args)
    optimization_pipeline().run(m)
    return m


def kinds(m):
    return [i.attrs["kind"] if i.opcode == "fusion" else i.opcode
            for i in m.entry.instructions if i.opcode not in ("parameter", "constant", "tuple", "reshape")]


def softmax(x, np=mnp):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def layernorm(x, g, b, np=mnp):
    mean = np.mean(x, axis=1, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * g + b


def conv(x, w, lax=lax):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


# --- kLoop / kInput / kOutput ----------------------------------------------------------

def test_elementwise_chain_becomes_one_kloop():
    m, _ = fused(lambda a, b: mnp.tanh(a * b + 1.0) - b, np.ones((4, 5), f32), np.ones(5, f32))
    assert count_kernels(m) == 1
    filecheck(m.to_string(), """
CHECK: %fused_computation
CHECK: multiply
CHECK: tanh
CHECK: ENTRY
CHECK-NOT: multiply
CHECK: ROOT %fusion.{{.*}} = f32[4,5]{1,0} fusion(%p{{.}}, %p{{.}}), kind=kLoop, calls=%fused_computation
""")


def test_reduce_fuses_its_elementwise_operand_kinput():
    m, _ = fused(lambda a: mnp.sum(mnp.exp(a) * 2.0, axis=1), np.ones((4, 5), f32))
    assert count_kernels(m) == 1
    root = m.entry.root
    assert root.opcode == "fusion" and root.attrs["kind"] == "kInput"
    assert root.fused_computation.root.opcode == "reduce"


def test_reduce_is_not_fused_into_a_consumer_that_broadcasts_it():
    # (without rule 8's row fusion, which tests/test_row_fusion.py covers)
    m, p = fused(lambda a: a - mnp.max(a, axis=1, keepdims=True), np.ones((4, 5), f32), row_fusion_bytes=0)
    assert count_kernels(m) == 2
    assert any(not d.fused and "broadcasts it" in d.reason for d in p.log)


def test_reduce_takes_an_elementwise_epilogue():
    # mean = sum / n and sqrt(var + eps) finish inside the reduction's kernel.
    m, p = fused(lambda a: mnp.sqrt(mnp.mean(a * a, axis=1) + 1e-5), np.ones((4, 5), f32))
    assert count_kernels(m) == 1
    assert m.entry.root.attrs["kind"] == "kInput" and m.entry.root.fused_computation.root.opcode == "sqrt"
    assert any(d.fused and "epilogue" in d.reason for d in p.log)


@pytest.mark.parametrize("shape", [(512, 1024), (3, 7)])
def test_softmax_and_layernorm_are_at_most_three_kernels(shape):
    x, g, b = np.ones(shape, f32), np.ones(shape[1], f32), np.ones(shape[1], f32)
    # rule 8: one row fusion each (the row fits the cache budget) ...
    assert kinds(optimized(softmax, x)) == ["kInput"]
    assert kinds(optimized(layernorm, x, g, b)) == ["kInput"]
    # ... and without it, rules 1-7's plan: three kernels each.
    m, _ = fused(softmax, x, row_fusion_bytes=0)
    assert kinds(m) == ["reduce", "kInput", "kLoop"]
    m, _ = fused(layernorm, x, g, b, row_fusion_bytes=0)
    # The mean is sum(x) * (1/n) (JAX's rounding); the cheap multiply is recomputed in its
    # users (rule 4), so the first reduce runs alone.
    assert kinds(m) == ["reduce", "kInput", "kLoop"]


def test_softmax_recomputes_exp_instead_of_storing_it():
    m, p = fused(softmax, np.ones((4, 8), f32), row_fusion_bytes=0)
    # exp lives in the sum's kInput fusion and in the divide's kLoop fusion, never in memory.
    entry_ops = [i.opcode for i in m.entry.instructions]
    assert "exponential" not in entry_ops
    with_exp = [i for i in m.entry.instructions if i.opcode == "fusion"
                and any(j.opcode == "exponential" for j in i.fused_computation.instructions)]
    assert sorted(i.attrs["kind"] for i in with_exp) == ["kInput", "kLoop"]
    assert any(d.fused and d.producer.startswith("exponential") and "rule 4" in d.reason for d in p.log)


def test_softmax_and_layernorm_match_jax_on_both_backends(rng):
    x = (rng.standard_normal((6, 33)) * 4).astype(f32)
    x[0, 3] = np.inf  # a row with +inf gives NaN, as in JAX
    g, b = rng.standard_normal(33).astype(f32), rng.standard_normal(33).astype(f32)
    check_against_jax(softmax, lambda x: softmax(x, np=jnp), x, rtol=2e-6, atol=1e-7)
    check_against_jax(layernorm, lambda x, g, b: layernorm(x, g, b, np=jnp), x[1:], g, b, rtol=2e-5, atol=2e-6)


def test_broadcast_then_reduce_never_materializes_the_big_array(rng):
    L, N = 64, 48
    f = lambda a, b, np=mnp: np.sum(np.tanh(a[:, None] * b[None, :]), axis=1)
    a, b = rng.standard_normal(L).astype(f32), rng.standard_normal(N).astype(f32)
    m = optimized(f, a, b)
    assert kinds(m) == ["kInput"]
    assert all(i.shape.size < L * N for i in m.entry.instructions)
    assert assign_buffers(m).naive_bytes == 0
    check_against_jax(f, lambda a, b: f(a, b, np=jnp), a, b, rtol=1e-5, atol=1e-5)


def test_conv_bias_relu_is_exactly_one_koutput_kernel(rng):
    f = lambda x, w, b, np=mnp, lax=lax: np.maximum(conv(x, w, lax) + b, 0.0)
    args = rng.standard_normal((2, 6, 6, 3)).astype(f32), rng.standard_normal((3, 3, 3, 4)).astype(f32), \
        rng.standard_normal(4).astype(f32)
    m = optimized(f, *args)
    assert kinds(m) == ["kOutput"] and is_conv_bias_relu(m.entry.root)
    check_against_jax(f, lambda *a: f(*a, np=jnp, lax=jax.lax), *args, rtol=1e-5, atol=1e-5)


def test_conv_bias_residual_relu6_is_one_koutput_kernel(rng):
    def f(x, w, b, r, np=mnp, lax=lax):
        return np.minimum(np.maximum(conv(x, w, lax) + b + r, 0.0), 6.0)
    args = (rng.standard_normal((2, 5, 5, 3)).astype(f32), rng.standard_normal((3, 3, 3, 4)).astype(f32),
            rng.standard_normal(4).astype(f32), rng.standard_normal((2, 5, 5, 4)).astype(f32))
    m = optimized(f, *args)
    assert kinds(m) == ["kOutput"]
    ops = {i.opcode for i in m.entry.root.fused_computation.instructions}
    assert {"convolution", "add", "maximum", "minimum"} <= ops
    check_against_jax(f, lambda *a: f(*a, np=jnp, lax=jax.lax), *args, rtol=1e-5, atol=1e-5)


def test_clamp_tail_fuses_into_dot():
    m = optimized(lambda x, w: lax.clamp(0.0, x @ w, 6.0), np.ones((4, 8), f32), np.ones((8, 3), f32))
    assert kinds(m) == ["kOutput"]


def test_mlp_is_one_koutput_kernel_per_layer(rng):
    def mlp(x, w1, b1, w2, b2, np=mnp):
        h = np.maximum(x @ w1 + b1, 0.0)
        return np.tanh(h @ w2 + b2)
    args = [rng.standard_normal(s).astype(f32) for s in [(4, 8), (8, 16), (16,), (16, 3), (3,)]]
    m = optimized(mlp, *args)
    assert kinds(m) == ["kOutput", "kOutput"]
    check_against_jax(mlp, lambda *a: mlp(*a, np=jnp), *args, rtol=1e-5, atol=1e-5)


def test_dot_with_a_second_user_is_not_output_fused():
    def f(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "VALID")
        return mnp.maximum(y, 0.0), y
    m, p = fused(f, np.ones((1, 2, 5, 5), f32), np.ones((3, 2, 3, 3), f32))
    assert any(i.opcode == "convolution" for i in m.entry.instructions)
    assert any(not d.fused and "users outside" in d.reason for d in p.log)


# --- legality and profitability --------------------------------------------------------

def test_producer_that_reads_two_big_arrays_is_not_duplicated():
    # a + b feeds a reduce and an elementwise output: recomputing it would read two arrays
    # instead of one, so it is stored once; the broadcast of c is cheap and duplicated.
    def f(a, b, c):
        s = a + b
        cc = mnp.broadcast_to(c, (4, 5))
        return s * cc, mnp.sum(s - cc, axis=0)
    m, p = fused(f, np.ones((4, 5), f32), np.ones((4, 5), f32), np.ones(5, f32))
    assert any(i.opcode == "add" for i in m.entry.instructions)
    assert any(not d.fused and "reads 2 arrays" in d.reason for d in p.log)
    assert any(d.fused and "rule 3" in d.reason for d in p.log)


def test_expensive_producer_not_fused_under_an_expanding_broadcast():
    m, p = fused(lambda a: mnp.broadcast_to(mnp.exp(a), (64, 8)) * 2.0, np.ones(8, f32))
    assert any(i.opcode == "exponential" for i in m.entry.instructions)
    assert any("recomputed per copy" in d.reason for d in p.log)
    # ... also when a reshape sits between the producer and the broadcast
    m, _ = fused(lambda a: mnp.reshape(mnp.sqrt(a), (8, 1)) * np.ones((8, 16), f32), np.ones(8, f32))
    assert any(i.opcode == "sqrt" for i in m.entry.instructions)


def test_nothing_is_fused_into_a_dot():
    m, p = fused(lambda x, w: mnp.exp(x) @ w, np.ones((4, 8), f32), np.ones((8, 3), f32))
    assert kinds(m) == ["exponential", "dot"]
    assert any(not d.fused and "reads each operand element many times" in d.reason for d in p.log)


def test_duplication_is_capped():
    def chain(x):
        for _ in range(6):
            x = mnp.sum(mnp.exp(x), axis=1, keepdims=True) * x
        return x
    m, p = fused(chain, np.ones((8, 8), f32), max_duplicates=1, row_fusion_bytes=0)
    assert any("rule 4c" in d.reason for d in p.log)
    # every original multiply exists at most twice: itself and one copy
    multiplies = [d.producer for d in p.log if d.fused and "rule 4" in d.reason and d.producer.startswith("multiply")]
    assert max(multiplies.count(n) for n in set(multiplies)) == 1
    assert nx.is_directed_acyclic_graph(m.entry.graph())


def test_fusion_size_cap():
    def f(x):
        for _ in range(10):
            x = x * 1.5 + 0.5
        return x
    m, p = fused(f, np.ones(8, f32), max_fusion_size=6)
    assert count_kernels(m) > 1
    for i in m.entry.instructions:
        if i.opcode == "fusion":  # (the scalar constants and their broadcasts count nothing)
            ops = [j for j in i.fused_computation.instructions if j.opcode in ("multiply", "add")]
            assert len(ops) <= 6, len(ops)
    assert any("size cap" in d.reason for d in p.log)


def test_fusion_size_cap_counts_integer_ops_as_a_quarter():
    # a threefry-like hash: 20 rounds of add, rotate, xor; each word has two users, so a cut
    # between rounds would store both words. 100 integer ops are 25 units: one kernel.
    def f(x0, x1):
        for r in range(20):
            x0 = x0 + x1
            x1 = ((x1 << np.uint32(13 + r % 7)) | (x1 >> np.uint32(19 - r % 7))) ^ x0
        return x0 ^ x1
    u = np.arange(16, dtype=np.uint32)
    m, p = fused(f, u, u * np.uint32(7))
    assert count_kernels(m) == 1, m.to_string()
    np.testing.assert_array_equal(minixla.jit(f)(u, u * np.uint32(7)), jax.jit(f)(u, u * np.uint32(7)))


def test_fusion_never_creates_a_cycle_and_logs_the_path():
    def f(a):
        e = mnp.exp(a)
        return e / mnp.sum(e, axis=1, keepdims=True)
    m, p = fused(f, np.ones((4, 5), f32), row_fusion_bytes=0)  # (rule 8 would fuse it all)
    assert nx.is_directed_acyclic_graph(m.entry.graph())
    order = {i: n for n, i in enumerate(m.entry.instructions)}
    assert all(order[o] < order[i] for i in m.entry.instructions for o in i.operands)
    assert any("would create a cycle through %reduce" in d.reason for d in p.log)


# --- random programs: legal fusions that compute JAX's answer --------------------------

_UNARY = ["exp", "tanh", "neg", "abs"]
_BINARY = ["add", "mul", "sub", "max"]


@st.composite
def programs(draw):
    n_ops = draw(st.integers(2, 9))
    ops = []
    for k in range(n_ops):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "rowsum", "colmax"]))
        a = draw(st.integers(0, k))   # operand: 0 = the input, j = result of op j-1
        b = draw(st.integers(0, k))
        name = draw(st.sampled_from(_UNARY if kind == "unary" else _BINARY))
        ops.append((kind, name, a, b))
    n_out = draw(st.integers(1, 2))
    return ops, n_out


def _run_program(prog, x, np):
    ops, n_out = prog
    fns = {"exp": lambda v: np.exp(np.minimum(v, 10.0)), "tanh": np.tanh, "neg": lambda v: -v, "abs": np.abs,
           "add": lambda u, v: u + v, "mul": lambda u, v: u * v, "sub": lambda u, v: u - v, "max": np.maximum}
    vals = [x]
    for kind, name, a, b in ops:
        u, v = vals[a], vals[b]
        if kind == "unary":
            r = fns[name](u)
        elif kind == "binary":
            r = fns[name](u, v)
        elif kind == "rowsum":
            r = u - np.sum(u, axis=1, keepdims=True) * 0.25
        else:
            r = fns[name](u, np.max(v, axis=0, keepdims=True))
        vals.append(r)
    return tuple(vals[-n_out:])


@settings(max_examples=int(os.environ.get("MINIXLA_FUZZ_EXAMPLES", "12")), deadline=None)
@given(programs())
def test_random_programs_fuse_legally_and_match_jax(prog):
    x = np.linspace(-2, 2, 4 * 6, dtype=f32).reshape(4, 6)
    f = lambda x: _run_program(prog, x, mnp)
    m, p = fused(f, x)
    assert nx.is_directed_acyclic_graph(m.entry.graph())
    for d in p.log:
        assert d.reason  # every decision names its rule
    check_against_jax(f, lambda x: _run_program(prog, x, jnp), x, rtol=1e-5, atol=1e-5)


# --- the log and the kernels API -------------------------------------------------------

def test_fusion_log_is_on_the_compiled_object_and_in_dumps(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_DUMP", str(tmp_path))
    compiled = minixla.jit(softmax, backend="jax").lower(np.ones((4, 8), f32)).compile()
    log = compiled.fusion_log
    assert log and all(d.reason for d in log)
    fused_into = {d.fusion for d in log if d.fused}
    assert fused_into == {k["name"] for k in compiled.kernels() if k["kind"] in ("kLoop", "kInput")}
    text = format_fusion_log(log)
    assert "exponential" in text and "rule 8" in text
    dumped = [p for p in os.listdir(tmp_path) if p.endswith("fusion_log.txt")]
    assert dumped and "rule 8" in (tmp_path / dumped[0]).read_text()


def test_kernels_api_lists_kinds_and_opcodes():
    compiled = minixla.jit(softmax, backend="jax").lower(np.ones((4, 8), f32)).compile()
    ks = compiled.kernels()
    assert [k["kind"] for k in ks] == ["kInput"]  # one row fusion (rule 8)
    assert "exponential" in ks[0]["opcodes"] and ks[0]["opcodes"].count("reduce") == 2
    assert ks[0]["opcodes"][-1] == "multiply"  # e * (1 / sum): XLA's division by a broadcast


def test_relu_mask_through_a_reshape_fuses_into_the_dot(rng):
    """The gradient of a flattening layer, ``reshape(g @ W.T) * mask``, is one kOutput
    kernel: the tail reads the dot's element at the output's linear index (rule 6)."""
    def f(g, w, h, np=mnp):
        d = np.reshape(g @ w.T, h.shape)
        return d * (h > 0).astype(np.float32)
    g, w, h = (rng.standard_normal(s).astype(f32) for s in [(5, 7), (4 * 6 * 3, 7), (5, 4, 6, 3)])
    m = optimized(f, g, w, h)
    assert kinds(m) == ["kOutput"]
    check_against_jax(f, lambda *a: f(*a, np=jnp), g, w, h, rtol=1e-5, atol=1e-5)
    # and a convolution's tail through a reshape (row-major: the same linear index)
    x, k = rng.standard_normal((2, 5, 5, 3)).astype(f32), rng.standard_normal((3, 3, 3, 4)).astype(f32)
    c = lambda x, k, np=mnp, lax=lax: np.maximum(np.reshape(conv(x, k, lax=lax), (2, 100)), 0.0)
    assert kinds(optimized(c, x, k)) == ["kOutput"]
    check_against_jax(c, lambda x, k: c(x, k, np=jnp, lax=jax.lax), x, k, rtol=1e-5, atol=1e-5)


def test_relu_mask_recomputes_the_activation_from_the_pre_activation():
    """Rule 4d: the backward relu mask ``h == max(h, 0)`` (JAX's balanced max JVP) reads only
    the pre-activation ``x @ w``; ``max(h, 0)``, stored anyway for the next dot, is recomputed
    in the mask kernel, so it can die at its last dot (the MLP step's arena: 5.25 -> 4.25 MiB).
    The gradients are JAX's bit for bit, with h == +0 / -0 (mask 1/2), NaN and inf: the
    operands are small dyadic numbers, so every dot is exact in any order."""
    def loss(p, x, np=mnp):
        y = np.maximum(x @ p["w"] + p["b"], 0.0)
        return np.sum((y @ p["v"]) * np.arange(1.0, 5.0, dtype=np.float32))

    r = np.random.default_rng(3)
    p = {"w": r.integers(-2, 3, (6, 8)).astype(f32) / 2, "b": r.integers(-1, 2, 8).astype(f32),
         "v": r.integers(-2, 3, (8, 4)).astype(f32) / 4}
    p["b"][:3] = -0.0
    x = r.integers(-2, 3, (5, 6)).astype(f32)
    x[0] = 0.0                       # h = b exactly: +0 + -0, and the ties at 0 of other rows
    x[1, 2], x[2, 4], x[3, 1] = np.nan, np.inf, -np.inf
    step = lambda p, x, np=mnp, grad=minixla.grad: grad(loss)(p, x, np=np)  # noqa: E731
    compiled = minixla.jit(step).lower(p, x).compile()
    assert any(d.fused and "rule 4d" in d.reason for d in compiled.fusion_log)
    got = compiled(p, x)
    want = jax.jit(lambda p, x: jax.grad(lambda p: loss(p, x, np=jnp))(p))(p, x)
    for k in p:
        np.testing.assert_array_equal(got[k], np.asarray(want[k]))
        np.testing.assert_array_equal(np.signbit(got[k]), np.signbit(np.asarray(want[k])))
