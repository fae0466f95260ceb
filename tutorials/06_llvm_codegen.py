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
# # Tutorial 06 — LLVM code generation I: kernels, loops, vectorization, inline math
#
# After fusion (tutorial 04) and buffer assignment (tutorial 05), each kernel of the program
# must become machine code. minixla's LLVM backend writes one LLVM IR function per kernel with
# llvmlite, lets LLVM's `-O3` pipeline optimize it for the host CPU, and JIT-compiles it. This
# chapter reads that code at its three stages, IR as emitted, IR after `-O3`, and assembly:
#
# ```
# fused computation --elemental emitter + loops--> LLVM IR --O3--> vector IR --codegen--> x86 assembly
# ```
#
# *Mirrors* XLA's `xla/service/elemental_ir_emitter.cc` (one element of any op), the loop
# emitters of `xla/service/llvm_ir/` and XLA:CPU's inline math (`xla/codegen/math/`,
# `xla/service/cpu/llvm_ir_runtime.cc`).

# %%
import os
import re
import tempfile

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp


def kernel_functions(ir_text: str) -> list[str]:
    """The kernel functions (``define ... @minixla_k_...``) of an LLVM IR text."""
    return re.findall(r'^define [^\n]*@"?minixla_k_.*?^}', ir_text, flags=re.M | re.S)


x = np.linspace(-3, 3, 1024, dtype=np.float32)
axpb = minixla.jit(lambda x: x * 2.0 + 1.0).lower(x).compile()
print(axpb.kernels())

# %% [markdown]
# ## 1. One kernel, as emitted
#
# `x * 2 + 1` is one kLoop fusion. Its function takes the output buffer, the input buffer
# (both `noalias`: buffer assignment guarantees they do not overlap) and a range `[lo, hi)` of
# the outer dimension, so that threads can split the work. The body is what the
# **elemental emitter** produces for one output element: load `x[i]`, `fmul`, `fadd`, store,
# inside a loop (`i.header` / `i.body`: a `phi` for the induction variable, a compare, a branch).
# Around it, the kernel sets the CPU's flush-to-zero and denormals-are-zero bits (`ldmxcsr`):
# subnormals are flushed, as in XLA:CPU and JAX eager (tutorial 03).

# %%
executable = axpb.executable
(kernel_ir,) = kernel_functions(executable.llvm_ir)
print(kernel_ir)

# %%
assert "noalias" in kernel_ir and "phi" in kernel_ir
assert re.search(r"fmul float", kernel_ir) and re.search(r"fadd float", kernel_ir)  # scalar code, one element
assert "ldmxcsr" in kernel_ir                                                     # FTZ/DAZ set ...
np.testing.assert_array_equal(axpb(x), x * np.float32(2) + np.float32(1))         # ... and the values exact

# %% [markdown]
# ## 2. What `-O3` makes of it
#
# LLVM's loop vectorizer turns the scalar loop into a `vector.body` working on `<N x float>`
# vectors as wide as the host's registers (N = 8 with AVX's 256-bit `%ymm` registers), and
# interleaves several vectors per iteration to hide latency. We wrote no vector code: a loop whose iterations are independent, whose pointers do
# not alias and whose body has no calls is all the vectorizer needs. That is why the emitter
# never calls libm, and why no fast-math flag is needed (IEEE semantics are kept).

# %%
optimized = executable.optimized_llvm_ir
(kernel_opt,) = kernel_functions(optimized)
print(kernel_opt)

# %%
widths = sorted({int(n) for n in re.findall(r"<(\d+) x float>", kernel_opt)})
print("vector widths:", widths)
assert "vector.body" in kernel_opt and widths and max(widths) >= 4

# %% [markdown]
# The assembly (`executable.asm`) shows the vector instructions: `movups` loads and stores of
# vector registers (`%xmm`/`%ymm`/`%zmm`) and `addps` (`v`-prefixed with AVX). There is no
# `mulps`: LLVM's x86 backend computes `x * 2` as `x + x`, which is exact and cheaper (a rewrite
# tutorial 03's simplifier would be allowed to make, too).

# %%
asm = executable.asm
start = asm.index("minixla_k_")
kernel_asm = asm[asm.index("\nminixla_k_", start) if "\nminixla_k_" in asm else start:]
kernel_asm = kernel_asm[:kernel_asm.index(".Lfunc_end")]
print(kernel_asm)

# %%
assert re.search(r"addps\s+%[xyz]mm", kernel_asm)
assert "mulps" not in kernel_asm

# %% [markdown]
# ## 3. Indexing: the elemental emitter at work
#
# The elemental emitter computes an element *at an index*, asking each operand for the element
# it needs: an elementwise op at the same index, a `broadcast` at the projected index, a
# `transpose` at the permuted index. Here `exp(x.T) * 2 + b` is one kernel with a loop per
# dimension (a `phi` each); `xt` is read at the transposed index, its offset the column index
# times 64 (the row length of `xt`) plus the row index: a strided load. `b` is read at the column
# alone, and `exp` is the inline polynomial of section 4.

# %%
xt = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
b = np.random.default_rng(1).standard_normal(32).astype(np.float32)
fused = minixla.jit(lambda xt, b: mnp.exp(xt.T) * 2.0 + b).lower(xt, b).compile()
print(fused.as_text())
(fused_ir,) = kernel_functions(fused.executable.llvm_ir)
print("\n".join(fused_ir.splitlines()[:40]))

# %%
assert [k["kind"] for k in fused.kernels()] == ["kLoop"]
assert len(re.findall(r"= phi", fused_ir)) >= 2 and re.search(r"mul [^\n]*\b64\b", fused_ir)
np.testing.assert_allclose(fused(xt, b), np.exp(xt.T) * 2 + b, rtol=1e-6, atol=1e-6)

# %% [markdown]
# ## 4. Inline `exp`
#
# `exponential` has no instruction on x86, and LLVM's `llvm.exp` intrinsic becomes one libm call
# per element, which blocks vectorization. Like XLA:CPU, minixla emits `exp` inline -- and for
# float32 it emits *XLA's own* algorithm (`minixla/backends/llvm/math_xla.py`, read from XLA's
# dumped IR), so the bits are JAX's: range reduction `x = k ln2 + r`, a polynomial in `r`
# evaluated with `llvm.fma` (where XLA's LLVM fuses a multiply into an add), reconstruction by
# `2^k`, clamps done with `select`. (float64 uses minixla's own fit, `math.py`.) The only calls
# in the kernel are LLVM intrinsics that become single instructions:

# %%
xs = np.linspace(-87.0, 88.5, 1 << 18, dtype=np.float32)
exp_compiled = minixla.jit(mnp.exp).lower(xs).compile()
(exp_ir,) = kernel_functions(exp_compiled.executable.llvm_ir)
calls = sorted(set(re.findall(r'call \S+ @"?([\w.]+)', exp_ir)))
print(calls)

# %%
assert all(c.startswith("llvm.") for c in calls)  # no libm call: expf is not called
assert "llvm.fma.f32" in calls

# %% [markdown]
# How accurate is it? We measure the error in **ulp** (units in the last place: the spacing of
# float32 numbers at the true value) against float64 NumPy, on 2^18 points from -87 to 88.5, and
# do the same for JAX's (XLA's) `exp` -- the two curves coincide, because the bits do:

# %%
reference = np.exp(xs.astype(np.float64))
ulp = np.spacing(reference.astype(np.float32)).astype(np.float64)
err_minixla = np.abs(exp_compiled(xs).astype(np.float64) - reference) / ulp
err_jax = np.abs(np.asarray(jnp.exp(xs)).astype(np.float64) - reference) / ulp
print(f"max error: minixla {err_minixla.max():.2f} ulp, JAX {err_jax.max():.2f} ulp; "
      f"mean: minixla {err_minixla.mean():.2f}, JAX {err_jax.mean():.2f}")

fig, ax = plt.subplots(figsize=(7, 3))
bins = np.linspace(xs[0], xs[-1], 350)
where = np.digitize(xs, bins)
per_bin = lambda e: [e[where == k].max() for k in range(1, len(bins))]  # noqa: E731
ax.plot(bins[1:], per_bin(err_minixla), lw=0.8, label="minixla (inline, LLVM)")
ax.plot(bins[1:], per_bin(err_jax), lw=0.8, ls="--", alpha=0.7, label="JAX / XLA:CPU")
ax.set_xlabel("x")
ax.set_ylabel("max error (ulp)")
ax.set_ylim(0, 1.5)
ax.set_title("float32 exp(x): error against float64")
ax.legend(loc="upper right", fontsize=8)
fig.tight_layout()

# %%
np.testing.assert_array_equal(exp_compiled(xs), np.asarray(jnp.exp(xs)))  # XLA's bits
assert err_minixla.max() < 6.0  # XLA's exp: about one ulp here, 5.5 next to its overflow
special = np.array([np.nan, np.inf, -np.inf, 0.0, 89.0, -104.0], np.float32)  # the select-patched cases
np.testing.assert_array_equal(minixla.jit(mnp.exp)(special), np.array([np.nan, np.inf, 0, 1, np.inf, 0], np.float32))

# %% [markdown]
# ## 5. Dumping every stage
#
# Like XLA's `--xla_dump_to`, `MINIXLA_DUMP=dir` writes what each compilation sees, stage by
# stage: the jaxpr, the HLO before and after the passes, the fusion log, the buffer assignment,
# the LLVM IR before (`ir-no-opt.ll`) and after `-O3` (`ir-with-opt.ll`) and the assembly (`.s`).
# Open them in an editor, or diff two compilations.

# %%
with tempfile.TemporaryDirectory() as dump_dir:
    os.environ["MINIXLA_DUMP"] = dump_dir
    try:
        minixla.jit(lambda x: mnp.tanh(x) * x).lower(x).compile()
    finally:
        del os.environ["MINIXLA_DUMP"]
    dumped = sorted(os.listdir(dump_dir))
print("\n".join(dumped))

# %%
stages = [name.split(".", 3)[-1] for name in dumped]
for stage in ("jaxpr.txt", "after_optimizations.hlo.txt", "ir-no-opt.ll", "ir-with-opt.ll", "s"):
    assert any(s.endswith(stage) for s in stages), stage

# %% [markdown]
# ## 6. Exercise: a loop kernel in llvmlite
#
# Write `emit_saxpy(module)` in `tutorials/exercises/ch06_saxpy.py`: an LLVM function
# `void saxpy(float a, const float *x, float *y, int64_t n)` computing `y[i] = a * x[i] + y[i]`,
# with llvmlite's IR builder and minixla's `for_loop` (the docstring lists the calls). The test
# JIT-compiles it with `minixla.backends.llvm.target.JitModule`, calls it through `ctypes` on
# lengths that exercise the vector body and the remainder, compares with NumPy bit for bit, and
# checks that `-O3` vectorized it:
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch06_saxpy.py
# ```
#
# The cell below prints your function's IR once it exists.

# %%
from llvmlite import ir

from exercises import ch06_saxpy

try:
    print(ch06_saxpy.emit_saxpy(ir.Module(name="saxpy")))
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Matrix products are where the loop vectorizer is not enough: `minixla/backends/llvm/gemm.py`
# tiles, packs and threads them by hand (XLA:CPU calls a runtime library for the same reason).
# Tutorial 07 reads that code.
