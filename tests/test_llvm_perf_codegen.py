"""The LLVM backend's performance machinery, tested for correctness and for the code it emits
(never for timing): register-tiled GEMM micro-kernels for dot and convolution (every edge
tile, layout and fused tail against JAX), the thread pool and unit splitting (results do not
depend on the thread count), the execution plan (one foreign call for small programs),
vectorized loops, fast-math flags and ``noalias`` in the IR, and the K-blocked accuracy.
"""
from __future__ import annotations

import ctypes
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.backends.llvm import compile_module
from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import kernels as K
from minixla.backends.llvm.runtime import ThreadPool, default_num_threads

rng = np.random.default_rng(6)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def compiled(f, *args, num_threads=None):
    """minixla's full pipeline (passes, fusion, buffer assignment), LLVM backend."""
    c = minixla.jit(f).lower(*args).compile()
    if num_threads is None:
        return c.executable
    return compile_module(c.hlo_module, c.buffer_assignment, num_threads=num_threads)


def close_to_jax(out, ref, k):
    """Dots/convs: within a few float32 roundings of a length-``k`` sum (JAX's own accuracy).
    The absolute part scales with the size of the partial sums (rms of the result): an output
    near 0 by cancellation of large terms carries their rounding error."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    eps = np.finfo(np.float32).eps
    scale = max(1.0, float(np.sqrt(np.mean(ref ** 2)))) if ref.size else 1.0
    np.testing.assert_allclose(out, ref, rtol=8 * eps * np.sqrt(k) + 1e-6, atol=8 * eps * np.sqrt(k) * scale)


# ---------------------------------------------------------------------------------------
# dot_general through the micro-kernel: every edge tile (M % MR, N % NR), K blocks (K % KC).
# A plain dot calls the precompiled routine (dot_library.py); the ``gemm_path`` fixture also
# runs each test through the kernel specialised to its shapes (what a dot with a fused tail gets).

@pytest.fixture(params=["gemm-library", "gemm"])
def gemm_path(request, monkeypatch):
    if request.param == "gemm":
        monkeypatch.setattr(K, "dot_library_params", lambda kb, dot: None)
    return request.param


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 15), (4, 16, 16), (7, 129, 17), (5, 300, 65),
                                   (37, 128, 130), (9, 257, 64)])
def test_matmul_edge_tiles(m, k, n, gemm_path):
    x, w = randn(m, k), randn(k, n)
    exe = compiled(lambda a, b: mnp.matmul(a, b), x, w)
    # k == 1: the simplifier's rule A13 turns the dot into a multiply of broadcasts.
    assert exe.kernels()[0]["strategy"] == (gemm_path if k > 1 else "loop")
    close_to_jax(exe(x, w)[0], jnp.matmul(x, w), k)


@pytest.mark.parametrize("shapes,dn", [
    (((7, 3, 40), (3, 40, 21)), (((2,), (1,)), ((1,), (0,)))),              # batch dim not leading
    (((2, 5, 3, 40), (5, 2, 40, 9)), (((3,), (2,)), ((0, 1), (1, 0)))),     # two batch dims, crossed
    (((2, 1, 6, 40), (2, 1, 40, 70)), (((3,), (2,)), ((0, 1), (0, 1)))),    # a size-1 batch dim
])
def test_library_dot_batch_layouts_bit_identical_to_specialised(shapes, dn, monkeypatch):
    from minixla.backends.llvm import kernel_cache
    a, b = randn(*shapes[0]), randn(*shapes[1])
    exe = compiled(lambda a, b: lax.dot_general(a, b, dn), a, b)
    assert exe.kernels()[0]["strategy"] == "gemm-library"
    out = exe(a, b)[0]
    close_to_jax(out, jax.lax.dot_general(a, b, dn), 40)
    monkeypatch.setattr(K, "dot_library_params", lambda kb, dot: None)
    kernel_cache.clear()
    exe = compiled(lambda a, b: lax.dot_general(a, b, dn), a, b)
    assert exe.kernels()[0]["strategy"] == "gemm"
    np.testing.assert_array_equal(out, exe(a, b)[0])  # same blocks, tiles and order


@pytest.mark.parametrize("m,n", [(37, 10), (45, 24), (21, 70)])
def test_tall_narrow_tiles_are_bit_identical_to_four_row_tiles(m, n, gemm_path, monkeypatch):
    """Narrow panels (N <= 2 vectors) use 8-row register tiles (``gemm.TALL_MR``); the tile
    height changes no arithmetic, so the results equal the 4-row tiles' bit for bit, with a
    partial last tile (M % 8 of 5) and a wide matrix's narrow edge panel (N = 70)."""
    from minixla.backends.llvm import kernel_cache
    x, w = randn(m, 150), randn(150, n)
    f = (lambda a, b: a @ b) if gemm_path == "gemm-library" else (lambda a, b: mnp.maximum(a @ b, -1e30))
    exe = compiled(f, x, w)
    assert exe.kernels()[0]["strategy"] == gemm_path
    out = exe(x, w)[0]
    close_to_jax(out, np.maximum(x.astype(np.float64) @ w, -1e30), 150)
    monkeypatch.setattr(G, "TALL_MR", G.MR)
    monkeypatch.setattr(G, "TALL_MR2", G.MR)
    kernel_cache.clear()
    np.testing.assert_array_equal(out, compiled(f, x, w)(x, w)[0])


def test_library_dot_of_an_operand_with_itself_and_fallbacks():
    x = randn(33, 70)
    exe = compiled(lambda a: a @ a.T, x)
    assert exe.kernels()[0]["strategy"] == "gemm-library"
    close_to_jax(exe(x)[0], x @ x.T, 70)
    # a fused tail is a function the routine calls per tile when an operand is read transposed
    # (backward-pass dots); a forward dot with a tail, or a fused producer of the rhs, gets the
    # specialised kernel
    w, bias = randn(70, 20), randn(20)
    assert compiled(lambda a, b, c: a @ b + c, x, w, bias).kernels()[0]["strategy"] == "gemm"
    exe = compiled(lambda a, b, c: a @ b.T + c, x, w.T.copy(), bias)
    assert exe.kernels()[0]["strategy"] == "gemm-library"
    close_to_jax(exe(x, w.T.copy(), bias)[0], x.astype(np.float64) @ w + bias, 70)
    exe = compiled(lambda a, b: a @ (b * 2.0), x, w)
    assert [k["strategy"] for k in exe.kernels()] in (["gemm"], ["loop", "gemm-library"])
    close_to_jax(exe(x, w)[0], x @ (w * 2.0), 70)


def test_library_dot_routine_is_compiled_once_per_process():
    from minixla.backends.llvm import dot_library
    compiled(lambda a, b: a @ b, randn(5, 9), randn(9, 6))
    routine = G._library[dot_library.routine_name(np.float32)]
    exe = compiled(lambda a, b: a @ b, randn(50, 90), randn(90, 60))
    assert G._library[dot_library.routine_name(np.float32)] is routine
    assert "call void @minixla_dot_f32(" in exe.optimized_llvm_ir
    # Regression: the library (micro-kernels, the dot routine) was JIT-compiled without -O3
    # (a module with no linked kernel skipped the optimizer): every FMA's accumulator went
    # through the stack and the GEMM ran at a third of its speed.
    assert G._library and all(jit.optimized for jit in G._library.values())


@pytest.mark.parametrize("dn", [
    (((1,), (1,)), ((), ())),          # x @ w.T: the rhs is packed from its columns
    (((0,), (0,)), ((), ())),          # x.T @ w: the lhs is read with a stride
    (((2,), (1,)), ((0,), (0,))),      # batched
    (((2,), (2,)), ((0,), (0,))),      # batched, q @ k.T
])
def test_dot_general_layouts(dn, gemm_path):
    shapes = {(((1,), (1,)), ((), ())): ((6, 40), (70, 40)),
              (((0,), (0,)), ((), ())): ((40, 6), (40, 70)),
              (((2,), (1,)), ((0,), (0,))): ((3, 6, 40), (3, 40, 70)),
              (((2,), (2,)), ((0,), (0,))): ((3, 6, 40), (3, 70, 40))}[dn]
    a, b = randn(*shapes[0]), randn(*shapes[1])
    exe = compiled(lambda a, b: lax.dot_general(a, b, dn), a, b)
    assert exe.kernels()[0]["strategy"] == gemm_path
    close_to_jax(exe(a, b)[0], jax.lax.dot_general(a, b, dn), 40)


def test_dot_several_free_and_contracting_dims():
    a, b = randn(2, 3, 4, 5), randn(4, 5, 7, 2)
    dn = (((2, 3), (0, 1)), ((), ()))
    exe = compiled(lambda a, b: lax.dot_general(a, b, dn), a, b)
    close_to_jax(exe(a, b)[0], jax.lax.dot_general(a, b, dn), 20)


def test_dot_float64_matches_numpy(gemm_path):
    a, b = randn(13, 70, dtype=np.float64), randn(70, 21, dtype=np.float64)
    with jax.enable_x64(True):
        exe = compiled(lambda a, b: mnp.matmul(a, b), a, b)
        out = exe(a, b)[0]
    assert exe.kernels()[0]["strategy"] == gemm_path and out.dtype == np.float64
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)


def test_dot_specials_propagate():
    a, b = randn(5, 20), randn(20, 18)
    a[1, 3], a[2, 4], b[7, 5] = np.nan, np.inf, -np.inf
    exe = compiled(lambda a, b: mnp.matmul(a, b), a, b)
    out, ref = exe(a, b)[0], np.asarray(jnp.matmul(a, b))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(ref))


def test_dot_with_fused_tail_is_one_gemm_kernel():
    x, w, b = randn(20, 33), randn(33, 70), randn(70)
    f = lambda x, w, b: mnp.maximum(mnp.matmul(x, w) + b, 0.0)  # noqa: E731
    exe = compiled(f, x, w, b)
    (kernel,) = exe.kernels()
    assert kernel["kind"] == "kOutput" and kernel["strategy"] == "gemm"
    close_to_jax(exe(x, w, b)[0], jnp.maximum(jnp.matmul(x, w) + b, 0.0), 33)


@pytest.mark.parametrize("case", ["plain", "batched"])
def test_packed_transposed_lhs_is_bit_identical(case, monkeypatch):
    """A weight-gradient dot ``x.T @ g`` with a fused tail packs its strided lhs into MR-row
    panels (``gemm.Gemm.pack_a``): the same FMAs in the same order, so bit-identical to the
    unpacked kernel, with a partial last tile (M % 4), rows past the last whole vector
    (M % 16), an edge panel, several K blocks, and a batch dimension; against float64. Both
    the library routine with the tail as a function (the default) and the kernel specialised
    to the shapes (``kernels.LIBRARY_TAILS`` off) give the same bits."""
    from minixla.backends.llvm import kernel_cache
    if case == "plain":
        x, g, w = randn(300, 45), randn(300, 104), randn(45, 104)
        f = lambda x, g, w: w - 0.01 * (x.T @ g)  # noqa: E731
        ref = np.asarray(w, np.float64) - 0.01 * (np.asarray(x, np.float64).T @ g)
    else:
        x, g, w = randn(2, 20, 37), randn(2, 20, 100), randn(2, 37, 100)
        f = lambda x, g, w: w - 0.01 * mnp.einsum("bkm,bkn->bmn", x, g)  # noqa: E731
        ref = w - 0.01 * np.einsum("bkm,bkn->bmn", x.astype(np.float64), g)
    seen = []
    real = K.gemm_for_dot
    monkeypatch.setattr(K, "gemm_for_dot", lambda *a: (lambda gm: (seen.append(gm.pack_a), gm)[1])(real(*a)))
    outs = []
    for path in ("gemm-library", "gemm"):
        monkeypatch.setattr(K, "LIBRARY_TAILS", path == "gemm-library")
        for pack in (True, False):
            monkeypatch.setattr(G, "PACK_A", pack)
            kernel_cache.clear()
            exe = compiled(f, x, g, w)
            assert [k["strategy"] for k in exe.kernels()] == [path]
            outs.append(exe(x, g, w)[0])
    assert seen == [True, False] * 2
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-4)


def test_library_routine_reads_a_widely_shared_strided_lhs_in_place(monkeypatch):
    """Regression (speed, the MLP step's 256-feature weight gradient): the library routine
    packed a strided lhs once per group of column panels, so a dot with one row chunk and many
    groups repacked all of it 4-8 times. It now reads such an lhs in place
    (``dot_library.Params.pack_a``: at most ``PACK_A_MAX_GROUPS`` packings), with the units
    that implies (every panel computed: a units count of the packing plan would leave panels
    unwritten); bit-identical to the packed run, and JAX's values."""
    from minixla.backends.llvm import dot_library as DL
    from minixla.backends.llvm import kernel_cache
    x, g, w = randn(40, 20), randn(40, 1000), randn(20, 1000)
    f = lambda x, g, w: w - 0.01 * (x.T @ g)  # noqa: E731
    seen = []
    real = DL.Params.pack_a
    monkeypatch.setattr(DL.Params, "pack_a", lambda self, gm: (lambda r: (seen.append((r, gm.panel_groups)), r)[1])(real(self, gm)))
    outs, default = [], DL.PACK_A_MAX_GROUPS
    for limit in (default, 99):
        monkeypatch.setattr(DL, "PACK_A_MAX_GROUPS", limit)
        kernel_cache.clear()
        exe = compiled(f, x, g, w, num_threads=2)
        assert [k["strategy"] for k in exe.kernels()] == ["gemm-library"]
        outs.append(exe(x, g, w)[0])
    assert seen[0][0] is False and seen[0][1] > default and seen[-1][0] is True
    np.testing.assert_array_equal(outs[0], outs[1])
    close_to_jax(outs[0], jnp.asarray(w) - 0.01 * (jnp.asarray(x).T @ jnp.asarray(g)), 40)


@pytest.mark.parametrize("library", [True, False])
def test_tail_streams_are_prefetched_and_change_no_bit(library, monkeypatch):
    """The arrays a fused tail reads at the output's own index (``Gemm.tail_streams``: the
    weights of a fused SGD update, the activations of a relu mask; not a broadcast bias) are
    prefetched tile by tile before the last K block: same results with it off, and the
    prefetches are in the kernel's IR (its tail function's, on the library path)."""
    from minixla.backends.llvm import kernel_cache
    monkeypatch.setattr(K, "LIBRARY_TAILS", library)
    x, g, w, b = randn(70, 45), randn(70, 104), randn(45, 104), randn(104)
    progs = {"sgd": (lambda x, g, w: w - 0.01 * (x.T @ g), (x, g, w), 1),
             "mask": (lambda x, g, w: (g @ w.T) * (x > 0), (x, g, w), 1),
             "bias": (lambda x, g, w, b: mnp.maximum(x @ w + b, 0.0), (x, g[:, :45].T.copy(), w, b), 0),
             # step t of a stacked array (an RNN's hoisted x_t @ U): its block, t clamped
             "slice": (lambda x, p, w, t: mnp.tanh(x @ w + lax.dynamic_slice(p, (t, 0, 0), (1, 70, 104))[0]),
                       (x, randn(3, 70, 104), w, np.int32(5)), 1)}
    real = K.gemm_for_dot
    for name, (f, args, n_streams) in progs.items():
        seen = []
        monkeypatch.setattr(K, "gemm_for_dot", lambda *a: (lambda gm: (seen.append(len(gm.tail_streams)), gm)[1])(real(*a)))
        kernel_cache.clear()
        on = compiled(f, *args)
        monkeypatch.setattr(G, "TAIL_PREFETCH", False)
        kernel_cache.clear()
        off = compiled(f, *args)
        monkeypatch.setattr(G, "TAIL_PREFETCH", True)
        assert seen == [n_streams, n_streams], name
        assert [k["strategy"] for k in on.kernels()] == ["gemm-library" if library and name in ("sgd", "mask")
                                                         else "gemm"]
        count = lambda exe: exe.optimized_llvm_ir.count("@llvm.prefetch")  # noqa: E731
        assert (count(on) > count(off)) == bool(n_streams), name
        np.testing.assert_array_equal(on(*args)[0], off(*args)[0])
        if name == "slice":  # (t = 5 clamped to the last block, as XLA clamps it)
            want = jnp.tanh(args[0] @ args[2] + jax.lax.dynamic_slice(args[1], (5, 0, 0), (1, 70, 104))[0])
            np.testing.assert_allclose(on(*args)[0], want, rtol=2e-5, atol=2e-5)


def test_column_reduce_under_an_elementwise_tail_is_a_reduce_kernel():
    """``b - lr * sum(g, axis=0)`` (a bias update) reduces ``g`` as a reduce kernel, rows into a
    row of accumulators, then applies the tail to its output -- not a loop in which each
    element walks its column; a reduction over a minor dim stays a loop. Against jax."""
    g, b, x = randn(300, 70), randn(70), randn(3, 5, 7)
    cases = [(lambda b, g: b - 0.01 * mnp.sum(g, axis=0), lambda b, g: b - 0.01 * jnp.sum(g, axis=0), (b, g), "reduce"),
             (lambda b, x: mnp.exp(b) * mnp.sum(x, axis=(0, 1)) + b,
              lambda b, x: jnp.exp(b) * jnp.sum(x, axis=(0, 1)) + b, (b[:7], x), "reduce"),
             (lambda b, g: b[:1] - 0.01 * mnp.sum(g, axis=1), lambda b, g: b[:1] - 0.01 * jnp.sum(g, axis=1),
              (b, g), None)]
    for f, ref, args, strategy in cases:
        exe = compiled(f, *args)
        got = [k["strategy"] for k in exe.kernels() if "reduce" in k["opcodes"]]
        assert (got == ["reduce"]) == (strategy == "reduce"), got
        np.testing.assert_allclose(exe(*args)[0], ref(*args), rtol=2e-6, atol=2e-6)


def test_gemm_prefer_vector_width_is_local_to_gemm_kernels(monkeypatch):
    """``gemm.PREFER_VECTOR_WIDTH`` gives the GEMM kernel's own loops (its tail function, on
    the library path) LLVM's ``"prefer-vector-width"`` attribute -- and no other kernel --
    without changing a bit."""
    from minixla.backends.llvm import kernel_cache
    x, w, b = randn(20, 33), randn(33, 70), randn(70)
    f = lambda x, w, b: (mnp.maximum(mnp.matmul(x, w) + b, 0.0), mnp.exp(b) * 2.0)  # noqa: E731
    plain = compiled(f, x, w, b)
    monkeypatch.setattr(G, "PREFER_VECTOR_WIDTH", 512)
    kernel_cache.clear()
    wide = compiled(f, x, w, b)
    attr = '"prefer-vector-width"="512"'
    defines = [line for line in wide.llvm_ir.splitlines() if line.startswith("define")]
    assert attr not in plain.llvm_ir and sum(attr in line for line in defines) == 1
    for got, want in zip(wide(x, w, b), plain(x, w, b)):
        np.testing.assert_array_equal(got, want)


def test_k_blocking_beats_one_running_sum():
    """The K-blocked accumulation (blocks of KC, then added) is more accurate than one
    sequential float32 sum over K, measured against float64."""
    k = 8 * G.KC
    a, b = randn(8, k), randn(k, 32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    seq = np.zeros((8, 32), np.float32)
    for i in range(k):
        seq = seq + a[:, i:i + 1] * b[i]
    ours = compiled(lambda a, b: mnp.matmul(a, b), a, b)(a, b)[0]
    assert np.abs(ours - exact).max() < np.abs(seq - exact).max()


# ---------------------------------------------------------------------------------------
# Convolution through the micro-kernel.

CONVS = [
    dict(x=(2, 9, 9, 3), w=(3, 3, 3, 16), strides=(1, 1), padding="SAME"),
    dict(x=(1, 11, 10, 5), w=(3, 2, 5, 70), strides=(2, 1), padding=[(2, 0), (1, 1)]),
    dict(x=(1, 12, 12, 4), w=(3, 3, 4, 8), strides=(1, 1), padding="VALID", rhs_dilation=(2, 2)),
    dict(x=(1, 5, 5, 200), w=(2, 2, 200, 17), strides=(1, 1), padding="SAME"),   # C > KC: c blocks
    dict(x=(3, 17, 6), w=(5, 6, 9), strides=(2,), padding="SAME", dn=("NWC", "WIO", "NWC")),
    dict(x=(2, 7, 7, 3), w=(8, 3, 3, 3), strides=(1, 1), padding="SAME", dn=("NHWC", "OIHW", "NHWC")),
]


@pytest.mark.parametrize("case", CONVS, ids=range(len(CONVS)))
def test_conv_gemm_against_jax(case):
    x, w = randn(*case["x"]), randn(*case["w"])
    dn = case.get("dn", ("NHWC", "HWIO", "NHWC"))
    kw = dict(rhs_dilation=case.get("rhs_dilation"), dimension_numbers=dn)

    def f(L):
        return lambda x, w: L.conv_general_dilated(x, w, case["strides"], case["padding"], **kw)
    exe = compiled(f(lax), x, w)
    assert exe.kernels()[0]["strategy"] == "gemm"
    taps = np.prod(case["w"][:-2]) if dn[1].endswith("IO") else np.prod(case["w"][2:])
    close_to_jax(exe(x, w)[0], f(jax.lax)(x, w), taps * x.shape[-1])


def test_conv_bias_relu_one_gemm_kernel():
    x, w, b = randn(2, 8, 8, 16), randn(3, 3, 16, 20), randn(20)

    def f(L, N):
        return lambda x, w, b: N.maximum(L.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b, 0.0)
    exe = compiled(f(lax, mnp), x, w, b)
    (kernel,) = exe.kernels()
    assert kernel["kind"] == "kOutput" and kernel["strategy"] == "gemm"
    close_to_jax(exe(x, w, b)[0], f(jax.lax, jnp)(x, w, b), 9 * 16)


def test_conv_grouped_falls_back_to_rows():
    # (an NCHW conv is a GEMM between transposes: tests/test_conv_canonicalization.py)
    x, w = randn(1, 6, 6, 4), randn(3, 3, 2, 6)
    conv = lambda L: lambda x, w: L.conv_general_dilated(  # noqa: E731
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
    exe = compiled(conv(lax), x, w)
    assert exe.kernels()[0]["strategy"] == "conv-rows"
    close_to_jax(exe(x, w)[0], conv(jax.lax)(x, w), 18)


# ---------------------------------------------------------------------------------------
# Threads: the units split the output, never a sum, so results are bit-identical.

def _programs():
    x, w, b = randn(64, 96), randn(96, 130), randn(130)
    big = randn(300, 257)
    img, k = randn(2, 12, 12, 8), randn(3, 3, 8, 24)
    return [
        (lambda x, w, b: mnp.maximum(mnp.matmul(x, w) + b, 0.0), (x, w, b)),
        (lambda y: mnp.exp(y - mnp.max(y, axis=-1, keepdims=True)) / 3.0, (big,)),
        (lambda y: mnp.tanh(y) * 2.0 + mnp.sum(y, axis=0), (big,)),
        (lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
         (img, k)),
    ]


@pytest.mark.parametrize("prog", range(4))
def test_results_do_not_depend_on_thread_count(prog, monkeypatch):
    from minixla.backends.llvm import executable
    monkeypatch.setattr(executable, "PARALLEL_MIN_NS", 0)  # split every kernel that has units
    f, args = _programs()[prog]
    one = compiled(f, *args, num_threads=1)
    three = compiled(f, *args, num_threads=3)
    assert any(k["parallel"] for k in three.kernels())
    assert not any(k["parallel"] for k in one.kernels())
    for a, b in zip(one(*args), three(*args)):
        np.testing.assert_array_equal(a, b)


def test_parallel_for_covers_every_unit_once():
    seen = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        lambda table, lo, hi: seen.extend(range(lo, hi)))
    pool = ThreadPool(3)
    for units in (0, 1, 2, 7, 100):
        seen.clear()
        pool.parallel_for(callback, 0, units)
        assert sorted(seen) == list(range(units))
    pool.shutdown()


def test_num_threads_environment(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_THREADS", "3")
    assert default_num_threads() == 3
    for bad in ("0", "two"):
        monkeypatch.setenv("MINIXLA_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="MINIXLA_NUM_THREADS"):
            default_num_threads()


# ---------------------------------------------------------------------------------------
# Execution plan and introspection.

def test_small_program_is_one_foreign_call():
    x = randn(8, 3)
    # (a column sum: a row sum would make it one row fusion, fusion rule 8)
    exe = compiled(lambda x: mnp.exp(x) + mnp.sum(x * 2.0, axis=0), x)
    assert len(exe.kernels()) >= 2
    assert len(exe._steps) == 1 and exe._steps[0][1] == 0  # one sequence function, no split
    np.testing.assert_allclose(exe(x)[0], np.asarray(jnp.exp(x) + jnp.sum(x * 2.0, axis=0)), rtol=1e-6)


def test_profile_times_every_kernel():
    x, w = randn(30, 40), randn(40, 50)
    exe = compiled(lambda x, w: mnp.sum(mnp.tanh(mnp.matmul(x, w)), axis=0), x, w)
    prof = exe.profile(x, w, repeat=2)
    assert [p["name"] for p in prof] == [k["name"] for k in exe.kernels()]
    assert all(p["ms"] >= 0 for p in prof)


# ---------------------------------------------------------------------------------------
# The emitted IR: vector types, fast-math flags, noalias.

def _functions(ir_text):
    """name -> body text of each ``define``."""
    out, name = {}, None
    for line in ir_text.splitlines():
        m = re.match(r'define [^@]*@"?([\w.]+)"?\(', line)
        if m:
            name = m.group(1)
            out[name] = line + "\n"
        elif name is not None:
            out[name] += line + "\n"
    return out


def _kernel_bodies(ir_text):
    return {n: b for n, b in _functions(ir_text).items() if not n.endswith(".thunk") and not n.startswith("minixla.")}


@pytest.mark.parametrize("f", [
    lambda x: x * 2.0 + 1.0,
    lambda x: mnp.exp(x) * mnp.tanh(x),
    lambda x: mnp.sum(x, axis=-1),
    lambda x: mnp.max(x, axis=-1),
], ids=["affine", "exp-tanh", "sum", "max"])
def test_loops_are_vectorized(f):
    x = randn(64, 256)
    exe = compiled(f, x)
    vector = re.compile(r"<(\d+) x float>")
    for name, body in _kernel_bodies(exe.optimized_llvm_ir).items():
        widths = {int(w) for w in vector.findall(body)}
        assert widths and max(widths) >= 4, f"{name} has no vector code"


def test_row_kernel_exp_pass_interleaves_less_and_stays_vectorized():
    from minixla.backends.llvm import kernels_rows
    x = randn(64, 256)
    exe = compiled(lambda x: mnp.exp(x) / mnp.sum(mnp.exp(x), axis=-1, keepdims=True), x)
    assert [k["strategy"] for k in exe.kernels()] == ["rows"]
    hint = f'!{{ !"llvm.loop.interleave.count", i32 {kernels_rows.EXPENSIVE_PASS_INTERLEAVE} }}'
    assert hint in exe.llvm_ir
    assert re.search(r"^(!\d+) = distinct !\{\1, ", exe.llvm_ir, re.MULTILINE)  # a valid loop ID
    body, = _kernel_bodies(exe.optimized_llvm_ir).values()
    assert re.search(r"<16 x float>|<8 x float>", body)
    np.testing.assert_allclose(exe(x)[0], np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=2e-6)


def test_gemm_uses_vector_fma(monkeypatch):
    monkeypatch.setattr(K, "dot_library_params", lambda kb, dot: None)  # the specialised kernel
    x, w = randn(16, 64), randn(64, 64)
    exe = compiled(lambda a, b: mnp.matmul(a, b), x, w)
    lanes = G.lanes(np.float32)
    # the register tile is the library micro-kernel the kernel calls (compiled once per process)
    assert f"call void @{G.micro_kernel_name(np.float32, G.MR, G.NV, False)}(" in exe.optimized_llvm_ir
    lib = G._library[G.micro_kernel_name(np.float32, G.MR, G.NV, False)]
    assert f"@llvm.fma.v{lanes}f32" in lib.optimized_llvm_ir


_FORBIDDEN = ("fast", "contract", "nnan", "ninf", "nsz", "arcp", "afn")


def _flags(body):
    return set(re.findall(r"\b(" + "|".join(_FORBIDDEN + ("reassoc",)) + r")\b", body))


def test_no_fast_math_on_elementwise_ops():
    x = randn(16, 32)
    exe = compiled(lambda x: mnp.exp(x) / (1.0 + mnp.tanh(x * x)) - x, x)
    for body in _kernel_bodies(exe.llvm_ir).values():
        assert _flags(body) == set()


def test_reassoc_only_in_reductions():
    x = randn(16, 32)
    exe = compiled(lambda x: mnp.sum(x * 3.0, axis=-1), x)
    for body in _kernel_bodies(exe.llvm_ir).values():
        assert _flags(body) <= {"reassoc"}
        for line in body.splitlines():
            if "reassoc" in line:  # only the accumulation: fadd into the accumulator
                assert re.search(r"= fadd reassoc", line), line
            if "fmul" in line:     # the user's multiply by 3 carries no flag
                assert "fmul float" in line or "fmul <" in line, line
    assert any("reassoc" in b for b in _kernel_bodies(exe.llvm_ir).values())


def test_kernel_pointers_are_noalias():
    x, w = randn(8, 8), randn(8, 8)
    exe = compiled(lambda x, w: mnp.maximum(mnp.matmul(x, w), 0.0) + mnp.sum(x), x, w)
    for name, body in _kernel_bodies(exe.llvm_ir).items():
        header = body.splitlines()[0]
        ptrs = re.findall(r"ptr( noalias)? %", header)
        assert ptrs and all(p == " noalias" for p in ptrs), header


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_parallel_kernels_work_after_fork(monkeypatch):
    import os
    import signal
    from minixla.backends.llvm import executable
    monkeypatch.setattr(executable, "PARALLEL_MIN_NS", 0)
    x = randn(256, 64)
    exe = compiled(lambda x: mnp.exp(x) * 2.0, x, num_threads=2)
    expect = exe(x)[0]
    pid = os.fork()
    if pid == 0:  # the workers did not survive the fork: the pool must start new ones
        signal.alarm(30)
        ok = np.array_equal(exe(x)[0], expect)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0  # (SIGALRM: the child hung)


# ---------------------------------------------------------------------------------------
# The register tile fits the target's registers (AVX-512: 32, AVX2: 16).

def _hot_loop_stack_accesses(asm: str) -> list[int]:
    """Per innermost loop holding vector FMAs (a label, then straight code up to the jump
    back to it): its accesses through the stack pointer -- a spilled accumulator shows as a
    load and a store around its FMA."""
    lines, counts = asm.splitlines(), []
    for i, line in enumerate(lines):
        m = re.match(r"^(\.LBB\w+):", line)
        if not m:
            continue
        for j in range(i + 1, len(lines)):
            if re.match(r"^\.LBB\w+:", lines[j]):
                break
            if re.match(r"^\s+j\w+\s+" + re.escape(m.group(1)) + r"\s*$", lines[j]):
                body = lines[i + 1:j]
                if any("vfmadd" in b for b in body):
                    counts.append(sum("(%rsp" in b for b in body))
                break
    return counts


_TILE_CHECK = """
import numpy as np, minixla, minixla.numpy as mnp
from minixla.backends.llvm import gemm as G, kernels as K
lanes = G.lanes(np.float32)
expect_regs = {regs}
assert G.VECTOR_REGISTERS == expect_regs, (G.VECTOR_REGISTERS, G.VECTOR_BYTES)
assert (G.MR + 1) * G.NV + 1 <= expect_regs and G.TALL_MR2 * 2 + 3 <= expect_regs
shapes = [(G.MR, G.NV), (G.TALL_MR2, 2), (G.TALL_MR, 1)]
asm = {{s: G._library[G.micro_kernel(np.float32, *s, False)].asm for s in shapes}}
rng = np.random.default_rng(0)
x, b = rng.standard_normal((37, 150), np.float32), rng.standard_normal(70, np.float32)
outs = []
for n in (70, 2 * lanes):   # full panels with a masked edge; one two-vector panel (TALL_MR2 rows)
    w = rng.standard_normal((150, n), np.float32)
    ref = np.maximum(x.astype(np.float64) @ w + b[:n], 0)
    for f in (lambda x, w: x @ w, lambda x, w, b: mnp.maximum(x @ w + b, 0.0)):
        args = (x, w) if f.__code__.co_argcount == 2 else (x, w, b[:n])
        out = np.asarray(minixla.jit(f)(*args), np.float64)
        if len(args) == 2:
            out = np.maximum(out + b[:n], 0)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        outs.append(out)
RESULT = {{"asm": {{f"{{r}}x{{v}}": a for (r, v), a in asm.items()}}, "vector_bytes": G.VECTOR_BYTES}}
"""


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86 assembly")
@pytest.mark.parametrize("target", ["host", "haswell"])
def test_register_tiles_fit_the_target_registers(target):
    """Every tile shape the target uses (full panel, two-vector and one-vector panels) keeps
    its accumulators in registers: no stack access in the micro-kernel's FMA loop (AVX-512:
    4x4, 8x2, 8x1 of 32 zmm registers; AVX2 -- ``MINIXLA_LLVM_CPU=haswell``, run in a
    subprocess since the tile is chosen at import -- 4x3, 6x2, 8x1 of 16 ymm registers), and
    the dots through them, library routine and specialised kernel, stay right."""
    import json
    import os
    import subprocess
    import sys
    if target == "host":
        if G.VECTOR_BYTES < 32:
            pytest.skip("no AVX on this host")
        scope = {}
        exec(_TILE_CHECK.format(regs=G.VECTOR_REGISTERS), scope)
        result = scope["RESULT"]
    else:
        code = _TILE_CHECK.format(regs=16) + "import json; print(json.dumps(RESULT))"
        env = dict(os.environ, MINIXLA_LLVM_CPU="haswell", MINIXLA_NUM_THREADS="1")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        result = json.loads(p.stdout.strip().splitlines()[-1])
        assert result["vector_bytes"] == 32
    for shape, asm in result["asm"].items():
        loops = _hot_loop_stack_accesses(asm)
        assert loops and all(n == 0 for n in loops), (shape, loops)
        assert ("zmm" in asm) == (result["vector_bytes"] == 64), shape
