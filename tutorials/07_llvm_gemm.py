# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 07 — LLVM code generation II: tiled GEMM, packing, threads, the roofline
#
# Tutorial 06's loops are enough for elementwise kernels: LLVM vectorizes them, and memory
# bandwidth is the limit. A matrix product is different. It does `2·M·N·K` flops on `M·K + K·N`
# inputs, so it can be limited by arithmetic instead of memory, but only if every loaded
# number is used many times while it is in a register. LLVM does not restructure loops to get
# that reuse by itself, so minixla's backend writes the structure out, as BLAS libraries and
# XLA:CPU's runtime matmul do:
#
# ```
# units (threads)  >  K blocks of KC  >  packed B panel (L1)  >  MR x NR register tile of FMAs
# ```
#
# This chapter reads each level, checks the accuracy that K blocking buys, and ends with a
# **roofline**: this machine's measured limits next to what a few workloads reach.
#
# *Mirrors* XLA:CPU's runtime matmul (`xla/service/cpu/runtime_matmul.cc`, which calls Eigen's
# blocked GEMM); minixla's is `backends/llvm/gemm.py` (the tiled kernels) and `dot_library.py`
# (the precompiled routine for plain dots and backward-pass dots with a tail); `benchmarks/limits.py`
# measures the machine.

# %%
import re
import time

import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import gemm as G
from minixla.memory import kernel_traffic

rng = np.random.default_rng(0)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# %% [markdown]
# ## 1. Two ways to run a dot
#
# A **plain** dot (nothing fused into it) becomes a kernel that is one call of a routine compiled
# once per process, `minixla_dot_f32`, whose sizes and strides are run-time arguments: XLA:CPU
# likewise calls its runtime's matmul instead of generating code. A dot with a **fused tail**
# (kOutput: bias, ReLU) gets a kernel specialised to its shapes, which applies the tail to each
# finished tile while it is still in L1 -- except when an operand is read transposed (the dots
# of a backward pass, `x.T @ g` and `g @ w.T`): then the tail is a small function of the kernel
# that the routine calls on each finished tile, so only the tail is compiled per program. All
# run the same tiles; `executable.kernels()` names the strategy:

# %%
x, w, bias = normal(256, 512), normal(512, 256), normal(256)
plain = minixla.jit(lambda x, w: x @ w).lower(x, w).compile()
fused = minixla.jit(lambda x, w, b: mnp.maximum(x @ w + b, 0.0)).lower(x, w, bias).compile()
for name, c in (("plain", plain), ("fused", fused)):
    print(name, [(k["kind"], k["strategy"], k["opcodes"]) for k in c.executable.kernels()])

# %%
assert [k["strategy"] for k in plain.executable.kernels()] == ["gemm-library"]
(fused_kernel,) = fused.executable.kernels()
assert fused_kernel["kind"] == "kOutput" and fused_kernel["strategy"] == "gemm"
np.testing.assert_allclose(fused(x, w, bias), np.maximum(x @ w + bias, 0), rtol=1e-4, atol=1e-4)

# %% [markdown]
# ## 2. The register tile
#
# The innermost level keeps an `MR x NR` block of the output in registers: `MR` rows times `NV`
# vectors of `LANES` floats. One step of K loads `NV` vectors of B, broadcasts `MR` numbers of A
# and does `MR · NV` fused multiply-adds. With 4 x 4 zmm vectors (AVX-512: 16 floats each) that
# is 8 loads for 16 FMAs, and 16 accumulators + 4 B vectors + 1 broadcast = 21 of the 32
# registers: no spills, and one load per two FMAs, within what two load ports feed. (AVX2 has
# only 16 ymm registers: there the tile is 4 x 3, 12 accumulators + 3 B vectors + 1 broadcast
# = all 16, and narrow panels get 6 x 2 and 8 x 1; an 8 x 2 tile would need 19 and spill.)

# %%
lanes = G.lanes(np.float32)
print(f"vector {G.VECTOR_BYTES} bytes = {lanes} floats; tile MR={G.MR} x NV={G.NV} vectors "
      f"= {G.MR} x {G.NV * lanes} floats; K block KC={G.KC}")
print(f"registers: {G.MR * G.NV} accumulators + {G.NV} B vectors + 1 broadcast; "
      f"loads per FMA: {(G.MR + G.NV) / (G.MR * G.NV):.2f}")

# %% [markdown]
# The tile is a library routine too (`minixla_gemm_f32_4x4`, compiled on first use; every GEMM
# kernel calls it). Its hot loop, in the assembly LLVM made of it, is exactly the plan: `NV`
# aligned vector loads of the packed B panel (`vmovaps`), and `MR` times one `vbroadcastss`
# of A followed by `NV` `vfmadd231ps`:

# %%
name = G.micro_kernel(np.float32, G.MR, G.NV, False)
asm = G._library[name].asm  # the compiled routine (gemm.py keeps it for the life of the process)
blocks = re.split(r"\n(?=\.LBB)", asm)
(hot,) = [blk for blk in blocks if "vfmadd" in blk]
print(hot)

# %%
assert hot.count("vfmadd231ps") == G.MR * G.NV
assert hot.count("vbroadcastss") == G.MR
assert len(re.findall(r"vmovaps\s+[^\n]*%[xyz]mm", hot)) == G.NV  # the B vectors
assert "(%rsp)" not in hot  # no spill: every accumulator stays in a register

# %% [markdown]
# ## 3. Packing, K blocks, and why they matter
#
# B is read by column panels of `NR` floats. In a row-major `K x N` matrix, going down one
# panel jumps `N · 4` bytes per row: for `N = 1024`, a 4 KiB stride, which maps every row to the
# same few cache sets. So per K block, the `KC x NR` panel of B is first **copied** into a
# contiguous, 64-byte-aligned buffer: `KC · NR · 4` bytes, which fits L1 and is then read `M/MR`
# times, once per row tile. Packing also makes `q @ k.T` (B transposed) as fast as `q @ k`, since
# the copy can read any layout, and lets a fused producer of B be computed while packing.

# %%
panel_bytes = G.KC * G.NV * lanes * 4
print(f"packed B panel: {G.KC} x {G.NV * lanes} floats = {panel_bytes // 1024} KiB")
q, k = normal(128, 64), normal(256, 64)
qkt = minixla.jit(lambda q, k: q @ k.T).lower(q, k).compile()
print([(kk["kind"], kk["strategy"]) for kk in qkt.executable.kernels()])

# %%
assert panel_bytes <= 48 * 1024  # fits the L1 data cache of current x86 cores
assert [kk["kind"] for kk in qkt.executable.kernels()] == ["dot"]  # no transpose kernel: the GEMM reads k in place
np.testing.assert_allclose(qkt(q, k), q @ k.T, rtol=1e-4, atol=1e-4)

# %% [markdown]
# **K blocks for accuracy.** Each block of `KC` products starts from zero accumulators and is
# then added to the output. The rounding error of a float sum grows with the number of terms
# added to one running total, so a K-long dot has about `KC + K/KC` of them instead of `K`.
# Against float64, on a 4096-long dot of positive numbers (the worst case for a running sum):

# %%
K = 4096
a, b = rng.random((8, K)).astype(np.float32), rng.random((K, 64)).astype(np.float32)
exact = a.astype(np.float64) @ b.astype(np.float64)
ours = minixla.jit(lambda a, b: a @ b)(a, b)
running = np.cumsum(a[:, :, None] * b[None], axis=1, dtype=np.float32)[:, -1]  # one sequential sum


def rel_error(v):
    return float(np.abs(v - exact).max() / np.abs(exact).max())


print(f"relative error: minixla {rel_error(ours):.1e}, one running sum {rel_error(running):.1e}, "
      f"numpy (BLAS) {rel_error(a @ b):.1e}")

# %%
assert rel_error(ours) < rel_error(running) / 3

# %% [markdown]
# ## 4. Threads
#
# The output is cut into **units** — batch element x chunk of rows x column panel — and a kernel
# computes the units `[lo, hi)` it is given, so the executable can hand disjoint ranges to its
# thread pool (`ctypes` releases the GIL during the call). Row chunks are at most 256 rows (the A
# block and the output panel stay in L2) and are halved until there are about 4 units per thread,
# so that the threads finish together. The count follows from the sizes:

# %%
threads = plain.executable.num_threads
for n in (64, 256, 1024):
    sq = normal(n, n)
    c = minixla.jit(lambda a, b: a @ b).lower(sq, sq).compile()
    (kern,) = c.executable.kernels()
    plan = G.Gemm(np.dtype(np.float32), 1, n, n, 1, n, None, n, None, None, threads=threads)
    print(f"{n:>5}: {kern['units']:>3} units = {plan.row_chunks} row chunks of {plan.rows_per_unit} x "
          f"{plan.panels} panels of {plan.NR}, parallel={kern['parallel']}")
    assert kern["units"] == plan.units == plan.batch * plan.row_chunks * plan.panels

# %% [markdown]
# ## 5. The roofline
#
# A kernel is limited either by arithmetic (the FMA peak) or by memory (bytes per second times
# the flops it does per byte, its **arithmetic intensity**). The roofline plots attainable
# GFLOP/s against intensity: a slanted line `bandwidth x intensity`, then a flat roof at the
# peak. `benchmarks/limits.py` measures both limits with generated code in this process:
# independent `llvm.fma` chains on every core, and a copy through DRAM.
#
# This machine is shared (the numbers below were measured while the notebook ran and move
# from run to run); its figures are what the plot is drawn against, not a spec sheet.

# %%
import sys  # (benchmarks/ is the repository's, next to tutorials/: put the root on the path)
sys.path.insert(0, "..")
from benchmarks import limits

lim = limits.measure(threads, quick=True)
print({k: round(v, 1) for k, v in lim.items()})

# %%
assert lim["fma_gflops_1thread"] > 0 and lim["copy_gbs_1thread"] > 0

# %% [markdown]
# The workloads: square matmuls of growing size (intensity `2n³ / (3 · 4n²) = n/6` flop per
# byte, so they cross from memory-bound to compute-bound), the MLP and Conv+Bias+ReLU of the
# benchmark suite at a quarter of their size, and `chain8` (eight elementwise ops, counted as
# eight flops per element). Bytes are the traffic of the compiled kernels
# (`minixla.memory.kernel_traffic`, tutorial 04); times are the best of a few calls.

# %%
from benchmarks.workloads import minixla_namespace, workloads

ns = minixla_namespace()


def best_time(c, args, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        c(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


points = []
for n in (32, 128, 512):
    sq = (normal(n, n), normal(n, n))
    c = minixla.jit(lambda a, b: a @ b).lower(*sq).compile()
    points.append((f"matmul {n}", 2 * n ** 3, kernel_traffic(c.hlo_module), best_time(c, sq)))
    assert kernel_traffic(c.hlo_module) == 3 * n * n * 4  # so the intensity is n/6
suite = {wl.name: wl for wl in workloads(scale=0.25)}
for wl_name in ("mlp", "conv_bias_relu", "chain8"):
    wl = suite[wl_name]
    args = wl.make_args(np.random.default_rng(1), 0.25)
    c = minixla.jit(lambda *a, fn=wl.fn: fn(ns, *a)).lower(*args).compile()
    out = c(*args)
    flops = wl.work(args, out) if wl.kind == "compute" else 8 * args[0].size
    points.append((wl_name, flops, kernel_traffic(c.hlo_module), best_time(c, args)))
for label, flops, nbytes, t in points:
    print(f"{label:<16} {flops / nbytes:7.2f} flop/byte  {flops / t / 1e9:7.1f} GFLOP/s")

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
ai = np.logspace(-1.5, 3, 200)
for key_f, key_b, style, label in (("fma_gflops_1thread", "copy_gbs_1thread", "--", "1 thread"),
                                   ("fma_gflops", "copy_gbs", "-", f"{threads} threads")):
    ax.loglog(ai, np.minimum(lim[key_f], lim[key_b] * ai), "k" + style, lw=1, label=f"roof, {label}")
for label, flops, nbytes, t in points:
    ax.loglog(flops / nbytes, flops / t / 1e9, "o")
    ax.annotate(label, (flops / nbytes, flops / t / 1e9), fontsize=8, xytext=(4, -10), textcoords="offset points")
ax.set_xlabel("arithmetic intensity (flop / byte of kernel traffic)")
ax.set_ylabel("GFLOP/s")
ax.legend(fontsize=8)
ax.grid(alpha=0.3, which="both")

# %%
intensity = {label: flops / nbytes for label, flops, nbytes, _ in points}
assert intensity["matmul 32"] < 8 < intensity["matmul 512"]  # from the slanted part of the roof to the flat one
assert intensity["chain8"] < 2  # elementwise work is memory-bound on any machine

# %% [markdown]
# How to read it: a point far below the slanted line is not using the memory system well (too
# many passes over the data: fusion's job, tutorial 04); a point far below the roof on the right
# is not using the FMA units well (tiles, packing, threads: this chapter). The small matmul sits
# left, where no tiling can help; on a quiet machine the large ones approach the roof (on a
# shared one, as when this notebook was executed, other jobs' work scatters the points).
#
# ## Exercise: pack a panel, and the roofline model
#
# In `tutorials/exercises/ch07_packing.py` write
#
# 1. `pack_panel(b, k0, kc, j0, nr)`: the `kc x nr` block of B at rows `k0..`, columns `j0..`,
#    copied to a new contiguous array, with **zeros** where it runs past B's last row or column
#    (the GEMM packs edge panels that way so that the micro-kernel never needs a bounds check);
# 2. `attainable_gflops(flops, nbytes, peak_gflops, bandwidth_gbs)`: the roofline's bound for a
#    kernel doing `flops` on `nbytes` of traffic.
#
# Check them with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch07_packing.py
# ```
#
# which also multiplies two matrices panel by panel with your packing (a blocked GEMM in NumPy)
# and compares with `a @ b`. The cell below runs your version once it exists.

# %%
from exercises import ch07_packing

try:
    print(ch07_packing.pack_panel(np.arange(12.0).reshape(3, 4), 2, 2, 2, 3))
    print(ch07_packing.attainable_gflops(2 * 512 ** 3, 3 * 512 * 512 * 4, lim["fma_gflops"], lim["copy_gbs"]))
except NotImplementedError as e:
    print("not written yet:", e)
