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
# # Tutorial 11 — Control flow: cond, while, scan in jaxpr, HLO and machine code
#
# A Python `if` or `for` on a traced value cannot be staged: the value does not exist yet.
# `lax.cond`, `lax.while_loop` and `lax.scan` take the branches and the loop body as
# functions, trace each **once** into a closed sub-jaxpr, and bind one primitive that carries
# it. HLO has the same structure: `conditional` and `while` instructions *call* computations.
# The LLVM backend then emits a real loop, so a loop of 10,000 steps compiles as fast as one
# of 10.
#
# *Mirrors* `jax/_src/lax/control_flow/`, XLA's `while_loop_simplifier.cc`,
# `while_loop_invariant_code_motion.cc` and XLA:CPU's while thunk.

# %%
import time

import jax
import numpy as np

import minixla
from minixla import lax
import minixla.numpy as mnp

# %% [markdown]
# ## 1. Sub-jaxprs
#
# The body of a `fori_loop` with Python bounds becomes a `scan` (reverse-differentiable);
# with a traced bound, a `while`. The values a body closes over (`w` here) become operands
# of the equation: every sub-jaxpr is closed.

# %%
w = np.float32(0.5)
print(minixla.make_jaxpr(lambda x: lax.fori_loop(0, 5, lambda i, c: c * w + i, x))(1.0))
print(minixla.make_jaxpr(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * w + i, x))(1.0, 3))

# %% [markdown]
# It prints exactly as `jax.make_jaxpr` does:

# %%
f = lambda L: lambda x, i: L.switch(i, [lambda a: a + 1, lambda a: -a], x)
assert str(minixla.make_jaxpr(f(lax))(1.0, 1)) == jax.make_jaxpr(f(jax.lax))(1.0, 1).pretty_print(use_color=False)
print(minixla.make_jaxpr(f(lax))(1.0, 1))

# %% [markdown]
# ## 2. HLO: `while`, `conditional`, tuples
#
# A called computation sees only its parameter, so the loop state is **one tuple**: the
# condition maps it to `pred[]`, the body to the next state. A `scan` is a `while` over
# `(i, consts, carry, xs, ys)` whose body reads row `i` of `xs` with `dynamic-slice` and writes
# row `i` of `ys` with `dynamic-update-slice`.

# %%
def rnn(h, xs, W):
    return lax.scan(lambda h, x: (mnp.tanh(h @ W + x), h.sum()), h, xs)


h0, W = np.zeros((2, 4), np.float32), np.eye(4, dtype=np.float32) * 0.5
xs = np.linspace(-1, 1, 40, dtype=np.float32).reshape(5, 2, 4)
lowered = minixla.jit(rnn).lower(h0, xs, W)
print(lowered.as_text())

# %% [markdown]
# ## 3. Loop passes
#
# The passes run on every computation (fusion inside the body too). XLA's loop passes know
# trip counts: a loop of zero trips disappears, one of one trip is inlined, state elements
# nobody reads are dropped, and work that is the same every iteration moves before the loop.

# %%
from minixla.passes.while_loop_analysis import trip_count

loop = next(i for i in lowered.hlo_module.entry.instructions if i.opcode == "while")
print("trip count:", trip_count(loop))

hoist = lambda x, w: lax.fori_loop(0, 4, lambda i, c: c * mnp.exp(w), x)
text = minixla.jit(hoist).lower(np.ones(3, np.float32), np.ones(3, np.float32)).compile().as_text()
print(text[text.index("ENTRY"):])  # exp(w) is computed once, before the while

# %% [markdown]
# ## 4. Machine code: the loop is a loop
#
# The LLVM backend emits the whole loop into one function: the condition's kernels, a branch,
# the body's kernels, a jump back. The state lives in one buffer set; the body writes the new
# carry over the old one when nothing reads the old value afterwards, and `ys` is updated one
# row per step, in place.

# %%
compiled = lowered.compile()
ir_text = compiled.executable.llvm_ir
loop_fn = ir_text[ir_text.index('define void @"while_'):]  # the loop step (its profiling thunk)
loop_fn = loop_fn[:loop_fn.index("\n}") + 2]
print("\n".join(line for line in loop_fn.splitlines() if "call" in line or ":" in line or "br " in line))

# %% [markdown]
# Compile time does not depend on the trip count:

# %%
for n in (10, 2000):
    xs_n = np.zeros((n, 2, 4), np.float32)
    t0 = time.perf_counter()
    minixla.jit(rnn).lower(h0, xs_n, W).compile()
    print(f"scan of {n} steps: compiled in {(time.perf_counter() - t0) * 1e3:.0f} ms")

# %% [markdown]
# ## 5. Transformations
#
# `grad` of a `scan`: the primal scan saves the carry each step starts from; the backward
# pass is a scan in the other direction over those residuals. `while_loop` has no reverse mode
# (its trip count is unknown), as in JAX.

# %%
loss = lambda W, xs: (rnn(h0, xs, W)[0] ** 2).sum()
jloss = lambda W, xs: (jax.lax.scan(lambda h, x: (jax.numpy.tanh(h @ W + x), h.sum()), h0, xs)[0] ** 2).sum()
g = minixla.jit(minixla.grad(loss))(W, xs)
np.testing.assert_allclose(g, jax.grad(jloss)(W, xs), rtol=1e-5, atol=1e-6)
print(g)

# %% [markdown]
# ## 6. Exercise: trip counts
#
# Write `trip_count(loop)` in `tutorials/exercises/ch11_trip_count.py`: the number of times a
# `while`'s body runs when the loop counts an integer from a constant to a constant (the
# shape every `fori_loop` and `scan` lowers to), `None` otherwise. Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch11_trip_count.py
# ```

# %%
from exercises import ch11_trip_count

try:
    print(ch11_trip_count.trip_count(loop))
except NotImplementedError as e:
    print("not written yet:", e)
