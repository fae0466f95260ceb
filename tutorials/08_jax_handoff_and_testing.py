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
# # Tutorial 08 — The JAX hand-off and differential testing
#
# minixla has two backends for the same optimized HLO: its own LLVM code generator (tutorial 06)
# and a **hand-off** to real XLA through JAX, which runs on whatever device JAX has (CPU, GPU,
# TPU). And it has one reference for every value, dtype and error: **JAX eager**, op by op.
# This chapter shows the hand-off, why the reference is eager JAX and not `jax.jit`, and how
# the test suite compares the two backends with it: differential testing.
#
# *Mirrors* JAX's test utilities (`jax._src.test_util`, `jax._src.public_test_util`:
# `check_grads`, `assertAllClose`); the hand-off plays the part of JAX's own lowering
# (`jax._src.interpreters.mlir`), replaying HLO as `jax.lax` calls.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.testing import check_against_jax


def layer(x, w, b, np=mnp):
    return np.tanh(x @ w + b)


rng = np.random.default_rng(0)
x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(16, 8), (8, 4), (4,)])

# %% [markdown]
# ## 1. One HLO, two backends
#
# `minixla.jit(f, backend="jax")` runs the same tracing, lowering and passes; only the last
# step differs: the optimized module is replayed instruction by instruction as `jax.lax` calls
# under `jax.jit` (a `fusion` by evaluating its fused computation inline), and XLA compiles that
# for JAX's default device. XLA then fuses, assigns buffers and generates code its own way.

# %%
on_llvm = minixla.jit(layer, backend="llvm").lower(x, w, b).compile()
on_jax = minixla.jit(layer, backend="jax").lower(x, w, b).compile()
print(on_jax.as_text())
print(type(on_llvm.executable).__name__, type(on_jax.executable).__name__)

# %%
assert on_llvm.as_text() == on_jax.as_text()  # the same optimized HLO ...
np.testing.assert_allclose(on_llvm(x, w, b), on_jax(x, w, b), rtol=1e-6, atol=1e-6)  # ... the same values

# %% [markdown]
# ## 2. The reference is JAX eager, not `jax.jit`
#
# `jax.jit` is a compiler too, with the freedom compilers take. Two examples on the CPU:
#
# - `x * x + x`: XLA:CPU lets LLVM *contract* the multiply and the add into one fused
#   multiply-add, rounding once where eager JAX rounds twice;
# - `0.0 + x`: XLA folds it to `x`, which is wrong for `x = -0.0` (`0.0 + -0.0` is `+0.0`).
#
# Eager JAX (`jax.disable_jit()`) runs each op alone, so neither happens; it is the semantics
# users see when they debug, and minixla reproduces it on both backends (the hand-off passes XLA
# its constants as run-time arguments and multiplies every float product by a run-time 1.0, so
# XLA cannot see through them).

# %%
xs = rng.standard_normal(10_000).astype(np.float32)
square_plus = lambda np_, x: x * x + x  # noqa: E731
with jax.disable_jit():
    eager = np.asarray(square_plus(jnp, jnp.asarray(xs)))
jitted = np.asarray(jax.jit(lambda x: square_plus(jnp, x))(xs))
ours = {be: minixla.jit(lambda x: square_plus(mnp, x), backend=be)(xs) for be in ("llvm", "jax")}
print(f"x*x + x: jax.jit differs from eager on {np.mean(jitted != eager):.0%} of the inputs; "
      f"minixla llvm on {np.mean(ours['llvm'] != eager):.0%}, minixla jax on {np.mean(ours['jax'] != eager):.0%}")

zero = np.array([-0.0], np.float32)
with jax.disable_jit():
    eager_zero = np.asarray(jnp.add(0.0, jnp.asarray(zero)))
print("0.0 + -0.0: eager", eager_zero, " jax.jit", np.asarray(jax.jit(lambda x: 0.0 + x)(zero)),
      " minixla", *(f"{be} {minixla.jit(lambda x: 0.0 + x, backend=be)(zero)}" for be in ("llvm", "jax")))

# %%
if jax.default_backend() == "cpu":  # (what XLA does on a GPU is its own business)
    assert np.mean(jitted != eager) > 0.05
    assert np.signbit(np.asarray(jax.jit(lambda x: 0.0 + x)(zero)))[0]
for be in ("llvm", "jax"):
    np.testing.assert_array_equal(ours[be], eager)
    assert not np.signbit(minixla.jit(lambda x: 0.0 + x, backend=be)(zero))[0] and not np.signbit(eager_zero)[0]

# %% [markdown]
# ## 3. `check_against_jax`
#
# `minixla.testing.check_against_jax(f, jax_f, *args)` compiles `f` on each backend, runs
# `jax_f` eagerly on the device that backend targets, and compares: integers, bools, dtypes and
# shapes exactly, floats within `rtol`/`atol`, NaN equal to NaN. Most of the suite's tests are
# this call. It returns the outputs per backend:

# %%
outs = check_against_jax(layer, lambda x, w, b: layer(x, w, b, np=jnp), x, w, b)
print({be: out.shape for be, out in outs.items()})

# %%
assert set(outs) == {"llvm", "jax"}

# %% [markdown]
# When something differs, the error says where, per backend and output. Here the "reference" is
# the wrong rewrite `x - x -> 0` of tutorial 03, which the compiler rightly does not make:

# %%
try:
    check_against_jax(lambda x: x - x, lambda x: jnp.zeros_like(x), np.array([np.inf, 1.0, np.nan], np.float32))
except AssertionError as e:
    mismatch = str(e)
    print(mismatch)

# %%
assert "[llvm] output 0: 2 of 3 elements differ" in mismatch and "[jax] output 0" in mismatch

# %% [markdown]
# ## 4. Fuzzing: random programs
#
# Hand-written tests check what their author thought of. A **differential fuzzer** writes the
# programs: random compositions of ops on random inputs full of special values, each run by
# minixla and by JAX eager. `tests/test_fuzz.py` does it with hypothesis (random DAGs of 1-30
# ops, many dtypes, shrinking a failure to a minimal program). The idea fits in a cell: chains of
# exact float ops on values that are multiples of 1/4 (so every result is exact in float32 and
# must match bit for bit, sign of zero included):

# %%
OPS = {
    "add": lambda np_, a, b: a + b, "subtract": lambda np_, a, b: a - b,
    "multiply": lambda np_, a, b: a * b, "maximum": lambda np_, a, b: np_.maximum(a, b),
    "minimum": lambda np_, a, b: np_.minimum(a, b), "where": lambda np_, a, b: np_.where(a > b, a, b),
    "negate": lambda np_, a, b: -a, "abs": lambda np_, a, b: np_.abs(b),
}
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.25, -1.5, 2.0], np.float32)


def random_program(seed):
    r = np.random.default_rng(seed)
    steps = [(str(r.choice(list(OPS))), int(r.integers(0, k + 2)), int(r.integers(0, k + 2))) for k in range(6)]

    def program(np_, x, y):
        values = [x, y]
        for op, i, j in steps:
            values.append(OPS[op](np_, values[i], values[j]))
        return values[-1]
    return steps, program


failures = []
for seed in range(12):
    steps, program = random_program(seed)
    x8, y8 = (np.random.default_rng(seed + k).permutation(SPECIAL) for k in (100, 200))
    with jax.disable_jit():
        want = np.asarray(program(jnp, jnp.asarray(x8), jnp.asarray(y8)))
    for be in ("llvm", "jax"):
        got = minixla.jit(lambda x, y: program(mnp, x, y), backend=be)(x8, y8)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        if not same.all():
            failures.append((seed, be, steps))
print(f"12 random programs x 2 backends: {len(failures)} mismatches")
print("one of them:", random_program(3)[0])

# %%
assert failures == []

# %% [markdown]
# ## 5. Exercise: distances in ulp
#
# Tolerances like `rtol=1e-6` are blunt: near zero they are too loose, for large values they
# depend on the magnitude. Numerical libraries compare floats in **ulp** instead (tutorial 06
# measured `exp` that way): how many float32 values lie between the two. Write
# `ulp_distance(a, b)` in `tutorials/exercises/ch08_ulp_distance.py` (the docstring gives the
# rules for zeros, infinities and NaN, and a hint). Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch08_ulp_distance.py
# ```
#
# The cell below measures minixla's `tanh` against JAX eager's with it once it exists.

# %%
from exercises import ch08_ulp_distance

t = np.linspace(-5, 5, 1001, dtype=np.float32)
with jax.disable_jit():
    tanh_jax = np.asarray(jnp.tanh(jnp.asarray(t)))
try:
    d = ch08_ulp_distance.ulp_distance(minixla.jit(mnp.tanh)(t), tanh_jax)
    print("tanh: max", d.max(), "ulp from JAX eager")
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next, tutorial 09 differentiates programs (jvp, linearize, transpose, vjp) and tutorial 10
# vectorizes them (vmap); the chapters after them follow the outline in `DESIGN.md` ("The
# course") up to tutorial 14, which puts the course together on the digits CNN.
