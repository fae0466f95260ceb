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
# # Tutorial 10 — vmap: batching rules, per-example gradients
#
# Write a function for **one** example; `vmap` makes it work on a batch. It does not loop:
# like `jvp` (tutorial 09) it is an interpreter over the primitives, and each primitive's
# **batching rule** rewrites it into the primitive that does the whole batch at once. A matrix-
# vector product of a batch of vectors becomes one matrix-matrix product, so the compiler sees one
# program, of the same size as the unbatched one, and fuses and vectorizes it as any other.
#
# The chapter reads the rules (elementwise, reductions, `dot_general`), the order in which the
# interpreter falls back, nesting, `in_axes`/`out_axes`, and ends with `vmap(grad(loss))`:
# per-example gradients, which JAX users reach for in differential privacy, influence functions
# or gradient-noise statistics.
#
# *Mirrors* JAX's `jax/_src/interpreters/batching.py`; minixla's is
# `minixla/interpreters/batching.py` (the interpreter and the `batching_rules` table).

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.interpreters.batching import batching_rules
from minixla.interpreters.rules import using_rule

rng = np.random.default_rng(0)


def prims(closed):
    """The primitive names of a jaxpr's equations, in order."""
    return [e.primitive.name for e in closed.jaxpr.eqns]


# %% [markdown]
# ## 1. What a batch dim is
#
# Inside `vmap`, a value is a `BatchTracer`: `val` holds every example stacked along one axis,
# `batch_dim`, and its `aval` is the abstract value of **one** example: code written for one
# example sees the shapes it expects. `in_axes` says where the batch axis of each argument is.

# %%
def f(x):
    print(f"inside f: {type(x).__name__}, one example {x.aval.str_short()}, "
          f"all of them {x.val.shape} with batch_dim={x.batch_dim}")
    return mnp.sin(x) * 2.0


xs = rng.standard_normal((3, 5)).astype(np.float32)
out = minixla.vmap(f, in_axes=1)(xs)  # 5 examples of shape (3,), stacked along axis 1
print(out.shape)

# %%
np.testing.assert_allclose(out, np.sin(xs.T) * 2, rtol=1e-6)  # out_axes=0: examples first
assert out.shape == (5, 3)

# %% [markdown]
# ## 2. Batching rules
#
# A row of `batching_rules` takes the operands' values and their batch dims (`None`: this operand
# is the same for every example) and returns the batched result and its batch dim. The
# families, as in JAX:
#
# **Elementwise, one operand** (`defvectorized`, JAX's `vectorized_batcher`): apply the primitive
# as is; the batch dim stays where it was. No data moves.

# %%
v = rng.standard_normal((3, 5)).astype(np.float32)
out, out_dim = batching_rules[lax.sin_p]([v], [1])
print(out.shape, "batch dim", out_dim)
assert out_dim == 1 and np.allclose(out, np.sin(v))

# %% [markdown]
# **Elementwise, several operands** (`defbroadcasting`, JAX's `broadcast_batcher`): operands
# must line up, so batched ones get their batch axis moved to the front and unbatched ones are
# broadcast along it. The jaxpr shows both moves:

# %%
add_jaxpr = minixla.make_jaxpr(minixla.vmap(lambda x, y: x + y, in_axes=(1, None)))(
    rng.standard_normal((3, 8)).astype(np.float32), np.ones(3, np.float32))
print(add_jaxpr)
assert prims(add_jaxpr) == ["transpose", "broadcast_in_dim", "add"]

# %% [markdown]
# A scalar operand needs no broadcast (lax's binary ops take rank-0 operands), but the batched
# operand is still moved to the front. Section 1's `sin(x) * 2.0` with the batch on axis 1 shows
# the cost: `sin` kept the axis in place, the `mul` transposed. (JAX's broadcasting rule skips
# the move when the batched operands agree on shape and batch dim and the others are scalars;
# minixla's could too.)

# %%
f_jaxpr = minixla.make_jaxpr(minixla.vmap(lambda x: mnp.sin(x) * 2.0, in_axes=1))(xs)
print(f_jaxpr)
assert prims(f_jaxpr) == ["sin", "transpose", "mul"]

# %% [markdown]
# **Reductions** renumber their `axes` past the batch axis. minixla's rule moves the batch axis
# to the front first, which costs a `transpose` when it was elsewhere; the exercise writes a
# rule that does not:

# %%
sum_jaxpr = minixla.make_jaxpr(minixla.vmap(lambda x: mnp.sum(x, axis=0), in_axes=1))(xs)
print(sum_jaxpr)
assert prims(sum_jaxpr) == ["transpose", "reduce_sum"]
assert sum_jaxpr.jaxpr.eqns[1].params["axes"] == (1,)  # the example's axis 0 is the batched array's axis 1

# %% [markdown]
# **dot_general** has two cases. When **both** operands are batched, the batch axis becomes one
# more *batch dimension* of the contraction (the `((0,), (0,))` in its dimension numbers): a
# batch of matrix products is one `dot_general`. When **one** is, its batch axis is just one
# more free dimension: a batch of matrix-vector products `w @ x_i` is the matrix product `w @ Xᵀ`.

# %%
a = rng.standard_normal((8, 3, 4)).astype(np.float32)
b = rng.standard_normal((8, 4)).astype(np.float32)
w = rng.standard_normal((3, 4)).astype(np.float32)
both = minixla.make_jaxpr(minixla.vmap(lambda a, b: a @ b))(a, b)
one = minixla.make_jaxpr(minixla.vmap(lambda w, x: w @ x, in_axes=(None, 0)))(w, b)
print(both)
print(one)

# %%
(dot_both,) = [e for e in both.jaxpr.eqns if e.primitive.name == "dot_general"]
(dot_one,) = [e for e in one.jaxpr.eqns if e.primitive.name == "dot_general"]
assert dot_both.params["dimension_numbers"][1] == ((0,), (0,))  # the vmapped axis: a batch dim
assert dot_one.params["dimension_numbers"][1] == ((), ())       # the vmapped axis: a free dim
np.testing.assert_allclose(minixla.vmap(lambda a, b: a @ b)(a, b), jax.vmap(lambda a, b: a @ b)(a, b), rtol=1e-5)
np.testing.assert_allclose(minixla.vmap(lambda w, x: w @ x, in_axes=(None, 0))(w, b), b @ w.T, rtol=1e-5)

# %% [markdown]
# Compiled, the batch of 8 matrix-vector products is one `dot` kernel (a GEMM), not 8. The rule
# leaves `x`'s batch axis where it is (the dimension numbers skip over it) and works out where it
# lands in the output: after `w`'s free dim, so the product is `(3, 8)`. The one `transpose` left
# is `vmap`'s `out_axes=0` moving that axis to the front.

# %%
compiled = minixla.jit(minixla.vmap(lambda w, x: w @ x, in_axes=(None, 0))).lower(w, b).compile()
print([(k["kind"], k["opcodes"]) for k in compiled.kernels()])
assert sum(k["kind"] == "dot" for k in compiled.kernels()) == 1
assert sum(k["kind"] == "transpose" for k in compiled.kernels()) <= 1

# %% [markdown]
# ## 3. The fallback order
#
# `BatchTrace.process_primitive` decides, for every primitive bound inside `vmap`:
#
# 1. **no operand is batched** (a constant, a closed-over value, something computed from those
#    only): bind the primitive as is; no rule is consulted, nothing is broadcast;
# 2. otherwise the primitive's **row** of `batching_rules`;
# 3. no row: an error, JAX's, naming the primitive and the user's line.
#
# `minixla.interpreters.rules.using_rule(table, prim, rule)` swaps a row in for a `with`
# block (`rule=None`: as if there were none), which shows both ends:

# %%
def uses_cumsum(x, y):
    return mnp.cumsum(y) * 0 + x  # cumsum(y): y is not batched


with using_rule("batching", lax.cumsum_p, None):
    ok = minixla.vmap(uses_cumsum, in_axes=(0, None))(np.arange(4.0, dtype=np.float32), np.ones(3, np.float32))
    try:
        minixla.vmap(uses_cumsum, in_axes=(None, 0))(np.float32(1.0), np.ones((4, 3), np.float32))
    except minixla.errors.UnsupportedError as e:
        print(e)
        error = e
print(ok.shape)

# %%
assert ok.shape == (4, 3)  # case 1: cumsum of an unbatched value needed no rule
assert "Batching rule for 'cumsum' not implemented" in str(error) and "uses_cumsum" in str(error)  # case 3
assert batching_rules[lax.cumsum_p] is not None  # the row is back after the with block

# %% [markdown]
# ## 4. vmap of vmap
#
# `vmap` nests: each call pushes its own `BatchTrace`, and each level batches only its own axis
# (the same discipline that keeps nested `jvp`s apart in tutorial 09). The inner `vmap` sees
# `BatchTracer`s of the outer one as values like any other. All pairwise dot products of two sets
# of vectors, written as two `vmap`s over `dot`, is one `dot_general`, a matrix product:

# %%
u = rng.standard_normal((5, 3)).astype(np.float32)
t = rng.standard_normal((6, 3)).astype(np.float32)
pairwise = minixla.vmap(minixla.vmap(mnp.dot, in_axes=(None, 0)), in_axes=(0, None))
pair_jaxpr = minixla.make_jaxpr(pairwise)(u, t)
print(pair_jaxpr)

# %%
assert prims(pair_jaxpr).count("dot_general") == 1
np.testing.assert_allclose(pairwise(u, t), u @ t.T, rtol=1e-5)

# %% [markdown]
# ## 5. `in_axes` and `out_axes` as pytrees
#
# `in_axes` has one entry per positional argument, and an entry can be a pytree prefix of the
# argument: here the parameters dict is not batched (`None` for the whole dict) while the
# inputs are batched along axis 1. `out_axes` places each output's batch axis, also as a pytree.
# JAX's semantics, checked against `jax.vmap`:

# %%
def layer(p, x, np=mnp):
    y = np.tanh(p["w"] @ x + p["b"])
    return {"y": y, "norm": np.sum(y * y)}


p = {"w": rng.standard_normal((4, 3)).astype(np.float32), "b": np.zeros(4, np.float32)}
xb = rng.standard_normal((3, 10)).astype(np.float32)  # 10 examples, along axis 1
spec = dict(in_axes=(None, 1), out_axes={"y": 1, "norm": 0})
ours = minixla.vmap(layer, **spec)(p, xb)
theirs = jax.vmap(lambda p, x: layer(p, x, np=jnp), **spec)(p, xb)
print({k: v.shape for k, v in ours.items()})

# %%
assert ours["y"].shape == (4, 10) and ours["norm"].shape == (10,)
for k in ours:
    np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6)

# %% [markdown]
# Sizes must agree. The error lists every mapped argument's size, as JAX's does:

# %%
try:
    minixla.vmap(lambda x, y: x + y)(np.ones((3, 2), np.float32), np.ones((4, 2), np.float32))
except ValueError as e:
    print(e)
    size_error = e

# %%
assert "inconsistent sizes" in str(size_error) and "size 3" in str(size_error) and "size 4" in str(size_error)

# %% [markdown]
# ## 6. Per-example gradients
#
# `grad(loss)` gives the gradient of one example's loss; `vmap` of it, with the parameters
# unbatched (`in_axes=None`) and the data batched, gives one gradient **per example**: the
# transformations compose because `grad` is itself made of primitives, each with a batching rule.
# The naive alternative is a Python loop over examples, one call each:

# %%
def predict(p, x, np=mnp):
    return np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]


def example_loss(p, x, y, np=mnp):
    return (predict(p, x, np) - y) ** 2


params = {"w1": 0.5 * rng.standard_normal((4, 16)).astype(np.float32), "b1": np.zeros(16, np.float32),
          "w2": 0.5 * rng.standard_normal(16).astype(np.float32)}
X = rng.standard_normal((64, 4)).astype(np.float32)
Y = np.sin(X.sum(axis=1)).astype(np.float32)

per_example = minixla.jit(minixla.vmap(minixla.grad(example_loss), in_axes=(None, 0, 0)))
grads = per_example(params, X, Y)
one_grad = minixla.jit(minixla.grad(example_loss))
loop = [one_grad(params, X[i], Y[i]) for i in range(len(X))]
want = jax.vmap(jax.grad(lambda p, x, y: example_loss(p, x, y, np=jnp)), in_axes=(None, 0, 0))(params, X, Y)
print({k: g.shape for k, g in grads.items()})

# %%
for k in params:
    assert grads[k].shape == (64,) + params[k].shape
    np.testing.assert_allclose(grads[k], np.stack([g[k] for g in loop]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[k], want[k], rtol=1e-5, atol=1e-6)
mean_grad = minixla.grad(lambda p: mnp.mean(example_loss(p, X, Y)))(params)
for k in params:  # the batch gradient is the mean of the per-example ones
    np.testing.assert_allclose(grads[k].mean(axis=0), mean_grad[k], rtol=1e-4, atol=1e-6)

# %% [markdown]
# What does the program look like? The batched program has exactly as many `dot_general`s as
# the one-example gradient: each became one batched `dot_general`. The weight gradient of `w1`
# for one example is an outer product `xᵀ · δ`; for all of them it is one `dot_general` with
# the examples as its batch dim (`((0,), (0,))`), a `[64, 4, 16]` result:

# %%
single = minixla.make_jaxpr(minixla.grad(example_loss))(params, X[0], Y[0])
batched = minixla.make_jaxpr(minixla.vmap(minixla.grad(example_loss), in_axes=(None, 0, 0)))(params, X, Y)
print("dot_generals, one example:", prims(single).count("dot_general"),
      "  vmapped:", prims(batched).count("dot_general"))
for e in batched.jaxpr.eqns:
    if e.primitive.name == "dot_general":
        print(" ", e.outvars[0].aval.str_short(), e.params["dimension_numbers"])

# %%
assert prims(single).count("dot_general") == prims(batched).count("dot_general")
assert any(e.primitive.name == "dot_general" and e.params["dimension_numbers"][1] == ((0,), (0,))
           and e.outvars[0].aval.shape[0] == 64 for e in batched.jaxpr.eqns)

# %% [markdown]
# Compiled, the program has no loop over the 64 examples. Of the five `dot_general`s, the two
# that contract a real dimension (the forward products by `w1` and `w2`) stay GEMMs (a `dot`
# kernel, or a kOutput one with the elementwise tail that follows fused in); the
# three whose contracting dims have extent 1 (outer products and scalings: one example's
# output, and so its cotangent, is a scalar) are rewritten to
# a broadcasting `multiply` by the algebraic simplifier (its rule A13, as XLA's) and then fused
# with their neighbours, so they are not kernels of their own:

# %%
kernels = per_example.lower(params, X, Y).compile().kernels()
print(len(kernels), "kernels:", [(k["kind"], k["opcodes"].count("multiply")) for k in kernels])
dots = [e for e in batched.jaxpr.eqns if e.primitive.name == "dot_general"]
real_contractions = [e for e in dots if any(e.invars[0].aval.shape[d] > 1 for d in e.params["dimension_numbers"][0][0])]
assert sum(k["kind"] in ("dot", "kOutput") for k in kernels) == len(real_contractions) == 2

# %% [markdown]
# Per-example gradients carry information the mean hides: how unevenly the examples pull on the
# parameters. Their norms, as DP-SGD clips them:

# %%
norms = np.sqrt(sum((grads[k].reshape(len(X), -1) ** 2).sum(axis=1) for k in params))
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.hist(norms, bins=20)
ax.axvline(np.linalg.norm(np.concatenate([mean_grad[k].ravel() for k in params])), color="k", ls="--",
           label="norm of the mean gradient")
ax.set_xlabel("per-example gradient norm")
ax.legend()

# %%
assert norms.max() > 2 * np.median(norms)  # a few examples pull much harder than the typical one

# %% [markdown]
# ## Exercise: two batching rules
#
# Write two rows of `batching_rules` in `tutorials/exercises/ch10_batching_rules.py`:
#
# 1. `reduce_sum_batch(vals, dims, *, axes)`, **without moving the batch axis**: keep it where it
#    is, renumber the reduced `axes` around it, and say where it ends up (in the jaxpr of a
#    vmapped sum, `reduce_sum` must read the operand as it comes, with no `transpose` first);
# 2. `concatenate_batch(vals, dims, *, dimension)`: operands may be batched along different
#    axes, or not at all (`None`): an unbatched operand must be broadcast to the batch.
#
# The test installs them with `using_rule` and compares `vmap` (several `in_axes`, nested,
# under `jit`) with `jax.vmap`:
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch10_batching_rules.py
# ```
#
# The cell below runs your rules once they exist.

# %%
from exercises import ch10_batching_rules

try:
    with using_rule("batching", lax.reduce_sum_p, ch10_batching_rules.reduce_sum_batch), \
            using_rule("batching", lax.concatenate_p, ch10_batching_rules.concatenate_batch):
        print(minixla.make_jaxpr(minixla.vmap(lambda x: mnp.sum(x, axis=0), in_axes=1))(xs))
        print(minixla.vmap(lambda x, y: mnp.concatenate([x, y]), in_axes=(1, None))(xs, np.ones(2, np.float32)).shape)
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next in the course's outline (`DESIGN.md`), tutorial 11 puts control flow (`cond`,
# `while_loop`, `scan`) into jaxprs, HLO and machine code.
