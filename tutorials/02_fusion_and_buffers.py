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
# # Tutorial 02 — Fusion and buffer assignment
#
# After lowering, every HLO instruction would be its own loop over memory: read the operands,
# write the result. For most array programs the time goes into that memory traffic, not into
# arithmetic: on a laptop-class CPU, moving one float to DRAM and back costs about as much as
# twenty flops. Two passes attack it:
#
# - **fusion** merges producers into consumers so intermediates stay in registers
#   (fewer kernels, fewer bytes moved);
# - **buffer assignment** decides where the intermediates that *are* stored live, reusing
#   memory whose contents are dead (smaller footprint, fewer page faults).
#
# We follow softmax through both, then look at each rule, and compare with XLA.

# %%
import jax
import jax.numpy as jnp
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
assert compiled.kernels_unfused > 1
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
# The pictures say the same: each fusion is a box holding the instructions of its kernel
# (blue kLoop, orange kInput, green kOutput). In a notebook `compiled.graph()` draws itself
# (with Graphviz's `dot` installed; otherwise it shows the DOT text, which any Graphviz viewer
# renders).

# %%
compiled.graph()

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
# fusion would make the sum read the fusion and the fusion read the sum. The pass checks this
# with networkx reachability and says so — then duplicates instead (rule 4):

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
# ## 3. Buffer assignment
#
# What remains stored needs memory. Buffer assignment computes each value's **live range**
# over the schedule (from the step defining it to its last use), lets an elementwise kernel
# write **in place** of an operand that dies there, and packs all temporaries into one arena
# with a heap simulator (largest first, best fit among buffers alive at the same time).
# Outputs go straight into the result arrays.

# %%
print(compiled.buffer_assignment)
print(long_rows.buffer_assignment)

# %% [markdown]
# The row-fused softmax has no temporaries at all; the three-kernel plan stores two row
# vectors (16 floats each, one per row: the max and the sum's reciprocal).

# %%
assert compiled.buffer_assignment.arena_size == 0
assert [lr.size for lr in long_rows.buffer_assignment.live_ranges] == [16 * 4, 16 * 4]

# %% [markdown]
# `memory_analysis()` mirrors JAX's; let's put XLA's next to it:

# %%
ours = compiled.memory_analysis()
xla = jax.jit(lambda x: softmax(x, np=jnp)).lower(x).compile().memory_analysis()
print(ours)
print("XLA temp_size_in_bytes:", xla.temp_size_in_bytes, f"= {xla.temp_size_in_bytes // (512 * 4)} vector(s) of 512 floats")

# %%
assert ours.temp_size_in_bytes == 0
assert xla.temp_size_in_bytes >= 512 * 4

# %% [markdown]
# XLA:CPU stores at least one vector with an element per row (a row statistic, 2,048 B here)
# between its kernels; minixla's row kernel keeps both statistics in registers and needs no
# temporary at all.
#
# **In place.** Here `h = x @ w1` has two users (the product `h @ w2` and `tanh`), so it is
# stored; the elementwise kernel `tanh(h) * 2`, which reads it last, writes its result over it:

# %%
def scores(x, w1, w2):
    h = x @ w1
    s = h @ w2
    return (mnp.tanh(h) * 2.0) @ w2 + s


rng = np.random.default_rng(1)
a = [rng.standard_normal(s).astype(np.float32) for s in [(256, 64), (64, 256), (256, 8)]]
sc = minixla.jit(scores).lower(*a).compile()
print(sc.buffer_assignment)
print(sc.memory_analysis())

# %%
ba = sc.buffer_assignment
(h_buffer,) = [lr for lr in ba.live_ranges if len(lr.values) == 2]   # one buffer holds two values:
assert h_buffer.definer.opcode == "dot" and h_buffer.values[1].attrs["kind"] == "kLoop"  # h, then tanh(h)*2
assert ba.arena_size < ba.naive_bytes

# %% [markdown]
# The live-bytes curve shows how memory use evolves step by step (arguments always count; the
# peak is what the best possible placement would need):

# %%
import matplotlib.pyplot as plt

ma = sc.memory_analysis()
plt.figure(figsize=(6, 2.5))
plt.step(range(len(ma.live_bytes)), np.array(ma.live_bytes) / 1024, where="mid")
plt.xlabel("schedule step")
plt.ylabel("live KiB")
plt.title("scores: live bytes per step")
plt.tight_layout()

# %% [markdown]
# **Donation.** As with `jax.jit(f, donate_argnums=...)`, a donated argument's buffer may be
# reused: here the output is computed in place of `x` and returned in its memory
# (`alias_size_in_bytes`). Do not use a donated array after the call.

# %%
step = minixla.jit(lambda x, g: x - 0.1 * g, donate_argnums=0)
xs, gs = np.ones(4, np.float32), np.arange(4, dtype=np.float32)
c = step.lower(xs, gs).compile()
print(c.memory_analysis().alias_size_in_bytes, "bytes aliased")
print(step(xs, gs))

# %%
assert c.memory_analysis().alias_size_in_bytes == xs.nbytes

# %% [markdown]
# `python -m benchmarks.memory` prints these figures for the digits CNN, an MLP, softmax,
# layernorm, Conv+Bias+ReLU and attention, next to XLA's. Next: the LLVM backend, turning each
# kernel into vectorized machine code.
