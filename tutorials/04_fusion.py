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
# # Tutorial 04 — Fusion
#
# After lowering, every HLO instruction would be its own loop over memory: read the operands,
# write the result. For most array programs the time goes into that memory traffic, not into
# arithmetic: on a laptop-class CPU, moving one float to DRAM and back costs about as much as
# twenty flops. **Fusion** merges producers into their consumers so that intermediates stay in
# registers: fewer kernels, fewer bytes moved. A fusion is an HLO instruction (`fusion`) that
# calls a *fused computation*; its `kind` says what kind of kernel it becomes:
#
# - **kLoop** — one loop over the output, every element computed from the operands;
# - **kInput** — a reduction (the *hero*) reading its operand expression element by element,
#   plus an elementwise epilogue;
# - **kOutput** — a contraction (`dot`, `convolution`) with its elementwise tail applied to the
#   accumulator.
#
# We follow softmax through the pass, then look at each rule. Tutorial 05 decides where the
# values that remain stored live.
#
# *Mirrors* XLA's `xla/service/instruction_fusion.cc` (and `cpu_instruction_fusion.cc`).

# %%
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.memory import kernel_traffic


def softmax(x, np=mnp):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


x = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
lowered = minixla.jit(softmax).lower(x)
compiled = lowered.compile()

# %% [markdown]
# ## 1. Before and after fusion
#
# Lowered, softmax is a handful of instructions, each a kernel of its own (reshapes are free:
# a row-major reshape is a bitcast). After the passes:

# %%
print("kernels before fusion:", compiled.kernels_unfused)
for k in compiled.kernels():
    print(f"  {k['name']:<12} {k['kind']:<8} {' '.join(k['opcodes'])}")
print(f"bytes moved: {kernel_traffic(lowered.hlo_module):,} before, {kernel_traffic(compiled.hlo_module):,} after")

# %%
lowered_ops = [i.opcode for i in lowered.hlo_module.entry.instructions]
assert "reshape" in lowered_ops  # reshapes are there, but launch no kernel:
assert compiled.kernels_unfused == sum(op not in ("parameter", "constant", "reshape") for op in lowered_ops)
(kernel,) = compiled.kernels()  # one kernel ...
assert kernel["kind"] == "kInput" and {"reduce", "exponential", "divide"} <= set(kernel["opcodes"])
assert kernel_traffic(compiled.hlo_module) == 2 * x.nbytes  # ... reading x once, writing the result once
assert kernel_traffic(lowered.hlo_module) > 2 * x.nbytes

# %% [markdown]
# One kernel: a **row fusion** (rule 8, kind kInput). Both reductions reduce the row (the
# minor dim) and are only broadcast back along it, so the kernel takes one row at a time:
# the maximum into a register, then `sum(exp(x - max))`, then `exp(x - max) / sum` into the
# output. A 4 KiB row comes from DRAM once; the later passes re-read it from L1.
#
# The decisions and the rules behind them are in the **fusion log**, one line per
# producer/consumer pair:

# %%
for d in compiled.fusion_log:
    if d.producer.startswith(("exponential", "subtract", "reduce")):
        print(d)

# %%
assert any("rule 8" in d.reason for d in compiled.fusion_log if d.producer.startswith("reduce"))

# %% [markdown]
# Rows longer than the cache budget (32 KiB: here 16,384 floats = 64 KiB) get rules 1-7's plan,
# three kernels:
#
# 1. `reduce` — the row maximum.
# 2. a **kInput** fusion — `sum(exp(x - max))`: the reduction reads its operand expression
#    element by element, so `exp(x - max)` is never written to memory.
# 3. a **kLoop** fusion — `exp(x - max) / sum`: one loop over the output.

# %%
x_long = np.random.default_rng(0).standard_normal((16, 16384)).astype(np.float32)
long_rows = minixla.jit(softmax).lower(x_long).compile()
for k in long_rows.kernels():
    print(f"  {k['name']:<12} {k['kind']:<8} {' '.join(k['opcodes'])}")

# %%
kinds = [k["kind"] for k in long_rows.kernels()]
assert kinds == ["reduce", "kInput", "kLoop"]
assert all("exponential" in k["opcodes"] for k in long_rows.kernels()[1:])  # exp in both fusions

# %% [markdown]
# `exp(x - max)` is computed *twice*, once in each fusion: storing it would cost a write
# and a read; recomputing costs one `exp` per element. The log names the rule (4) for the copy:

# %%
print(next(d for d in long_rows.fusion_log if d.producer.startswith("exponential") and "rule 4" in d.reason))

# %% [markdown]
# The pictures say the same. `compiled.graph()` draws every instruction, each fusion a box
# holding the instructions of its kernel (blue kLoop, orange kInput, green kOutput); in a
# notebook it shows itself as a picture when Graphviz's `dot` is installed, and as its DOT text
# otherwise (any Graphviz viewer renders it). Here is its start:

# %%
print("\n".join(compiled.graph().source.splitlines()[:8]))

# %% [markdown]
# Without Graphviz, networkx and matplotlib draw the kernel graph of the two plans: one node per
# kernel of the entry computation, an edge where a kernel reads another's output.

# %%
import matplotlib.pyplot as plt
import networkx as nx

COLORS = {"kLoop": "#bbdefb", "kInput": "#ffe0b2", "kOutput": "#c8e6c9", "parameter": "#eeeeee"}


def draw_kernels(c, ax, title):
    g = c.hlo_module.entry.graph()
    keep = [i for i in g if i.opcode not in ("constant", "tuple")]
    g = g.subgraph(keep)
    pos = {}
    for depth, layer in enumerate(nx.topological_generations(g)):
        for k, i in enumerate(layer):
            pos[i] = (k - (len(layer) - 1) / 2 + 0.35 * (depth % 2), -depth)
    kind = {i: i.attrs.get("kind", i.opcode) for i in g}
    nx.draw_networkx(g, pos, ax=ax, node_shape="s", node_size=2000, font_size=8,
                     labels={i: f"{kind[i]}\n%{i.name}" for i in g},
                     node_color=[COLORS.get(kind[i], "#f5f5f5") for i in g], arrowsize=12)
    ax.set_title(title, fontsize=9)
    ax.margins(x=0.5, y=0.15)
    ax.axis("off")


fig, axes = plt.subplots(1, 2, figsize=(7, 5))
draw_kernels(compiled, axes[0], "rows of 4 KiB: one row kernel")
draw_kernels(long_rows, axes[1], "rows of 64 KiB: three kernels")
fig.tight_layout()

# %%
assert compiled.graph().source.startswith("digraph")

# %% [markdown]
# ## 2. The rules
#
# The fusion pass visits consumers from the end of the program and pulls producers into them.
# Its docstring (`help(minixla.passes.fusion)`) lists the rules; here each one in action.
#
# **kOutput: a contraction with its elementwise tail.** Conv + bias + ReLU is one kernel: the
# accumulator gets the bias and the activation in registers, then is stored once. An MLP layer
# (`dot` + bias + activation) likewise; a residual add and a ReLU6 clamp join the tail too.

# %%
def block(x, w, b, r):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return mnp.minimum(mnp.maximum(y + b + r, 0.0), 6.0)


args = (np.ones((2, 8, 8, 4), np.float32), np.ones((3, 3, 4, 8), np.float32),
        np.ones(8, np.float32), np.ones((2, 8, 8, 8), np.float32))
block_kernels = minixla.jit(block).lower(*args).compile().kernels()
print(block_kernels)

# %%
assert len(block_kernels) == 1 and block_kernels[0]["kind"] == "kOutput"
assert {"convolution", "add", "maximum", "minimum"} <= set(block_kernels[0]["opcodes"])

# %% [markdown]
# **Reductions take an epilogue, never a broadcast.** `sqrt(mean(d*d) + eps)` finishes each
# reduced value once, inside the reduction's kernel. But `x - max(x)` needs the whole row's
# maximum before its first subtraction, so in a loop kernel the reduction stays a kernel of
# its own. Rule 8's row kernel is the exception (each row's reductions finish before its
# outputs), which makes layernorm one kernel too:

# %%
def layernorm(x, g, b, np=mnp):
    mean = np.mean(x, axis=1, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * g + b


g, b = np.ones(1024, np.float32), np.zeros(1024, np.float32)
ln = minixla.jit(layernorm).lower(x, g, b).compile()
for k in ln.kernels():
    print(f"  {k['kind']:<8} {' '.join(o for o in k['opcodes'] if o != 'constant')}")

# %%
assert [k["kind"] for k in ln.kernels()] == ["kInput"]  # layernorm: one kernel

# %% [markdown]
# **Never a cycle.** A producer can be *moved* into a fusion only if all its users are inside.
# In the three-kernel softmax, `exp` also feeds the sum that the final divide reads: moving `exp` into the divide's
# fusion would make the sum read the fusion and the fusion read the sum. The pass never moves a
# producer with a user outside, names the user that would close the cycle — then duplicates instead (rule 4):

# %%
cycle = [d for d in long_rows.fusion_log if d.producer.startswith("exponential") and "cycle" in d.reason]
print(cycle[0])
assert cycle and all(d.fused and "rule 4" in d.reason for d in cycle)

# %% [markdown]

# **Expensive work is not recomputed per copy.** An `exp` under a broadcast that expands it
# would be recomputed for every copy, so it is stored instead:

# %%
c = minixla.jit(lambda v: mnp.broadcast_to(mnp.exp(v), (64, 8)) * 2.0).lower(np.ones(8, np.float32)).compile()
print([k["kind"] for k in c.kernels()])
print(next(d for d in c.fusion_log if "per copy" in d.reason))

# %%
assert [k["kind"] for k in c.kernels()] == ["exponential", "kLoop"]  # exp stored, not recomputed


# %% [markdown]
# ## 3. Exercise: count the bytes moved
#
# The number fusion optimizes is the traffic between kernels and memory. Write
# `bytes_moved(module)` in `tutorials/exercises/ch04_bytes_moved.py`: for every instruction of
# the entry computation that launches a kernel, the bytes of its distinct operands plus its
# result; parameters, constants, tuples and reshapes (bitcasts) launch nothing. Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch04_bytes_moved.py
# ```
#
# which compares it with `minixla.memory.kernel_traffic` before and after fusion on several
# programs. The cell below runs your version once it exists.

# %%
from exercises import ch04_bytes_moved

try:
    print(ch04_bytes_moved.bytes_moved(lowered.hlo_module), ch04_bytes_moved.bytes_moved(compiled.hlo_module))
except NotImplementedError as e:
    print("not written yet:", e)
