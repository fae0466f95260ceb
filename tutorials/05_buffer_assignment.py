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
# # Tutorial 05 — Buffer assignment
#
# After fusion (tutorial 04), the values that are still stored need memory. Buffer
# assignment computes each value's **live range** over the schedule (from the step defining it to its last use), lets an elementwise kernel
# write **in place** of an operand that dies there, and packs all temporaries into one arena
# with a heap simulator (largest first, best fit among buffers alive at the same time).
# Outputs go straight into the result arrays.
#
# *Mirrors* XLA's `xla/service/buffer_assignment.cc` and `heap_simulator.cc`.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import minixla
import minixla.numpy as mnp


def softmax(x, np=mnp):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


x = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
compiled = minixla.jit(softmax).lower(x).compile()
# rows of 64 KiB, over the row-fusion budget: three kernels (tutorial 04)
x_long = np.random.default_rng(0).standard_normal((16, 16384)).astype(np.float32)
long_rows = minixla.jit(softmax).lower(x_long).compile()

# %% [markdown]
# ## 1. The plan of softmax
#
# The plan is printed as the arena size and, per temporary buffer, its offset, size and live
# range `[first step, last step]` in the schedule (the order of the entry instructions):

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
# ## 2. Next to XLA
#
# `memory_analysis()` mirrors JAX's `Compiled.memory_analysis()`; let's put XLA's next to it:

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
# ## 3. In place
#
# Here `h = x @ w1` has two users (the product `h @ w2` and `tanh`), so it is
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
# ## 4. The heap simulator
#
# In a chain of layers each activation dies once the next layer has read it. Three
# temporaries of 128 KiB, but never more than two alive at once: the heap simulator puts the
# third at the first one's offset. Drawn as XLA's heap-simulator pictures are, one rectangle per
# buffer, its live range along the schedule and its bytes in the arena:

# %%
def mlp(x, w1, w2, w3, w4):
    h1 = mnp.tanh(x @ w1)
    h2 = mnp.tanh(h1 @ w2)
    h3 = mnp.tanh(h2 @ w3)
    return h3 @ w4


rng = np.random.default_rng(0)
shapes = [(128, 64), (64, 256), (256, 256), (256, 256), (256, 10)]
layers = minixla.jit(mlp).lower(*[rng.standard_normal(s).astype(np.float32) for s in shapes]).compile()
print(layers.buffer_assignment)

import matplotlib.patches as patches
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 2.8))
for k, lr in enumerate(layers.buffer_assignment.live_ranges):
    ax.add_patch(patches.Rectangle((lr.start - 0.45, lr.offset / 1024), lr.end - lr.start + 0.9, lr.size / 1024,
                                   facecolor="#bbdefb", edgecolor="#1565c0"))
    ax.text((lr.start + lr.end) / 2, (lr.offset + lr.size / 2) / 1024, f"h{k + 1}: %{lr.definer.name}", ha="center",
            va="center", fontsize=8)
ax.set_xlim(min(lr.start for lr in layers.buffer_assignment.live_ranges) - 1, len(layers.buffer_assignment.schedule))
ax.set_ylim(0, layers.buffer_assignment.arena_size / 1024 * 1.1)
ax.set_xlabel("schedule step")
ax.set_ylabel("arena offset (KiB)")
ax.set_title(f"arena {layers.buffer_assignment.arena_size // 1024} KiB for "
             f"{layers.buffer_assignment.naive_bytes // 1024} KiB of temporaries")
fig.tight_layout()

# %%
h1, h2, h3 = layers.buffer_assignment.live_ranges
assert h1.end <= h3.start and h3.offset == h1.offset        # disjoint lifetimes, same bytes
assert layers.buffer_assignment.arena_size == 2 * h1.size == 2 * layers.buffer_assignment.naive_bytes // 3

# %% [markdown]
# ## 5. The live-bytes curve
#
# The curve shows how memory use evolves step by step (arguments always count; the
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
# ## 6. Donation
#
# As with `jax.jit(f, donate_argnums=...)`, a donated argument's buffer may be
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
# layernorm, Conv+Bias+ReLU and attention, next to XLA's.
#
# ## 7. Exercise: live ranges
#
# Write `live_ranges(module)` in `tutorials/exercises/ch05_live_ranges.py`: for every value of
# the entry computation that needs a buffer (not a parameter, a constant, a tuple or a
# reshape, which is another name for its operand's value), the steps `(start, end)` from its
# definition to its last use, where a use through a reshape counts, and a value the program
# returns stays live to the end (`end = len(schedule)`). Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch05_live_ranges.py
# ```
#
# which compares it with the buffer assignment's `value_live` on several programs.

# %%
from exercises import ch05_live_ranges

try:
    print(ch05_live_ranges.live_ranges(sc.hlo_module))
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next: the LLVM backend turns each kernel into vectorized machine code.
