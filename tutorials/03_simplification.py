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
# # Tutorial 03 — Simplification passes
#
# A **pass** takes an HLO module and rewrites it into a cheaper one that computes the same
# thing. "The same thing" is the hard part: for floats it means *the same bits for every
# input*, NaN, ±inf, -0.0 and subnormals included, because that is what JAX eager computes
# and what a user comparing against it sees. This chapter runs the four simplification passes
# one by one on small HLO programs, shows the IR before and after each, shows with values why
# some textbook rewrites are wrong, and ends with writing a pass and its FileCheck test.
#
# `compile()` runs them as XLA's `RunHloPasses` does: `cse`, `constant-folding`,
# `algebraic-simplifier` and `dce`, repeated until none changes the module (the `simplify/`
# entries of the log below), before fusion. The `optimize/` passes after them (transpose
# folding, convolution canonicalization, fusion, scheduling) are later chapters' subjects.
#
# *Mirrors* XLA's `xla/hlo/transforms/simplifiers/algebraic_simplifier.cc` (and `hlo_cse.cc`,
# `hlo_dce.cc`, `hlo_constant_folding.cc`, `xla/hlo/pass/hlo_pass_pipeline.h`).

# %%
import jax
import jax.numpy as jnp
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.hlo import parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import verify
from minixla.passes.algebraic_simplifier import AlgebraicSimplifier
from minixla.passes.constant_folding import ConstantFolding
from minixla.passes.cse import CommonSubexpressionElimination
from minixla.passes.dce import DeadCodeElimination


def opcodes(module):
    return [i.opcode for i in module.entry.instructions]


def f(x):
    return mnp.tanh(x) + mnp.tanh(x) * (mnp.ones(4, np.float32) * 3.0)


x4 = np.array([0.5, -1.0, 2.0, np.nan], np.float32)
compiled = minixla.jit(f).lower(x4).compile()
for entry in compiled.pass_log:
    print(f"{entry.name:<36} changed={entry.changed}")

# %%
names = [e.name for e in compiled.pass_log]
assert names.index("simplify/cse") < names.index("simplify/algebraic-simplifier") < names.index("optimize/fusion")

# %% [markdown]
# A pass is an object with a `name` and `run(module) -> bool`, which rewrites the module in
# place and says whether it changed anything (a pipeline repeats its passes until none does).
# We follow `f` through them by hand. As lowered, `tanh(x)` is computed twice and the constant
# `ones(4) * 3.0` is a `multiply` of two broadcasts:

# %%
module = minixla.jit(f).lower(x4).hlo_module.clone()
print(module)

# %% [markdown]
# ## 1. Common-subexpression elimination (CSE)
#
# Two instructions with the same opcode, shape, attributes and operands compute the same value;
# CSE keeps the first and points the users of the second at it. (Never for random numbers: two
# `rng` calls are two samples.)

# %%
print("changed:", CommonSubexpressionElimination().run(module))
print(module)

# %%
assert opcodes(module).count("tanh") == 1

# %% [markdown]
# ## 2. The algebraic simplifier, and DCE after it
#
# The simplifier rewrites one instruction at a time by rules such as `multiply(x, 1) -> x`
# (rule A4 in its docstring, `help(minixla.passes.algebraic_simplifier)`). Here
# `broadcast(1.0) * broadcast(3.0)` is `broadcast(3.0)`. The simplifier only redirects the users:
# the replaced `multiply` and the `broadcast(1.0)` stay behind, **dead** (nothing reaches the root
# through them).

# %%
print("changed:", AlgebraicSimplifier().run(module))
print(module)

# %%
assert opcodes(module).count("multiply") == 2  # the dead one is still listed ...
print("changed:", DeadCodeElimination().run(module))
print(module)

# %%
assert opcodes(module) == ["parameter", "tanh", "constant", "broadcast", "multiply", "add"]  # ... until DCE
verify(module)
np.testing.assert_allclose(evaluate(module, x4), compiled(x4), rtol=1e-6)  # f's values (tanh: to an ulp)

# %% [markdown]
# **Dead-code elimination** removes what the root does not depend on: liveness is reachability
# to the root in the dataflow graph (parameters stay, they are the signature).
#
# ## 3. Constant folding
#
# An instruction whose operands are all constants can be computed at compile time, by the
# evaluator of tutorial 02. But only if the evaluator computes *the bits the backend would*:
# exact IEEE operations (`+ - * /`, `sqrt`, compares, converts, data movement) fold;
# `exponential`, `log`, `tanh` ... do not, because the backends use their own polynomial
# approximations, an ulp or two away from NumPy's libm.

# %%
folding = parse("""
HloModule folding

ENTRY %main (p0: f32[3]) -> f32[3] {
  %p0 = f32[3]{0} parameter(0)
  %c = f32[3]{0} constant({1, 2, 3})
  %square = f32[3]{0} multiply(%c, %c)
  %e = f32[3]{0} exponential(%c)
  %sum = f32[3]{0} add(%square, %e)
  ROOT %out = f32[3]{0} add(%p0, %sum)
}
""")
ConstantFolding().run(folding)
DeadCodeElimination().run(folding)
print(folding)

# %%
literals = [i.literal.tolist() for i in folding.entry.instructions if i.opcode == "constant"]
assert [1.0, 4.0, 9.0] in literals            # c * c was folded
assert "exponential" in opcodes(folding)      # exp(c) was not

# %% [markdown]
# ## 4. Rewrites that are wrong
#
# Algebra over the reals is not algebra over IEEE floats. Three rewrites every textbook
# simplifier would do, and the values that break them:
#
# - `x * 0 -> 0`: `NaN * 0` is NaN, `inf * 0` is NaN, `-1 * 0` is `-0.0`;
# - `log(exp(x)) -> x`: `exp(100)` overflows to inf, so the program gives inf, not 100;
#   `exp(-200)` underflows to 0 and gives `-inf`; and even `log(exp(0.5))` is not 0.5 in float32;
# - `x - x -> 0`: `inf - inf` is NaN.
#
# minixla does none of them (its simplifier's docstring lists them under "not rules here"). Here
# are JAX eager, minixla, and what the rewrite would give:

# %%
x = np.array([np.nan, np.inf, -1.0, 100.0, -200.0, 0.5], np.float32)
rewrites = {
    "x * 0":       (lambda np_, x: x * 0.0,           lambda x: np.zeros_like(x)),
    "log(exp(x))": (lambda np_, x: np_.log(np_.exp(x)), lambda x: x),
    "x - x":       (lambda np_, x: x - x,             lambda x: np.zeros_like(x)),
}
print(f"{'x':>13} {x}")
results = {}
for name, (fn, rewritten) in rewrites.items():
    eager = np.asarray(fn(jnp, jnp.asarray(x)))
    ours = minixla.jit(lambda x: fn(mnp, x))(x)
    results[name] = eager, ours, rewritten(x)
    print(f"{name:>13} JAX     {eager}\n{'':>13} minixla {ours}\n{'':>13} rewrite {rewritten(x)}")

# %%
for name, (eager, ours, rewritten) in results.items():
    if name == "log(exp(x))":  # exp and log: the backend's own approximations, to an ulp of JAX's
        np.testing.assert_allclose(ours, eager, rtol=1e-6)
    else:                      # exact IEEE operations: JAX's bits
        np.testing.assert_array_equal(ours.view(np.uint32), eager.view(np.uint32))
    assert not np.array_equal(rewritten.view(np.uint32), eager.view(np.uint32)), name  # the rewrite: not
assert np.signbit(results["x * 0"][0][2])                  # -1 * 0 is -0.0
assert results["log(exp(x))"][0][3] == np.inf and results["log(exp(x))"][0][5] != 0.5

# %% [markdown]
# Even `multiply(x, 1) -> x`, which holds for every float including NaN and -0.0, is only applied
# when `x` cannot be **subnormal**: like XLA:CPU and JAX eager, the backends flush subnormals to
# zero in arithmetic, so `1e-40 * 1` is 0, not `1e-40`. On a parameter the rule does not fire;
# on the result of an arithmetic instruction (already flushed) it does:

# %%
tiny = np.array([1e-40], np.float32)
print("JAX eager 1e-40 * 1 =", jnp.asarray(tiny) * 1.0, "  minixla:", minixla.jit(lambda x: x * 1.0)(tiny))
on_parameter = minixla.jit(lambda x: x * 1.0).lower(tiny).compile()
on_product = minixla.jit(lambda x: (x * x) * 1.0).lower(tiny).compile()
print([k["opcodes"] for k in on_parameter.kernels()], [k["opcodes"] for k in on_product.kernels()])

# %%
assert float(jnp.asarray(tiny)[0] * 1.0) == 0.0 and minixla.jit(lambda x: x * 1.0)(tiny)[0] == 0.0
assert "multiply" in on_parameter.kernels()[0]["opcodes"]                        # x * 1 kept
assert on_product.kernels()[0]["opcodes"].count("multiply") == 1                 # (x*x) * 1 -> x*x

# %% [markdown]
# ## 5. Writing a pass, and testing it with FileCheck
#
# XLA tests a pass as *HLO text in, one pass run, text out*, checked with LLVM's **FileCheck**:
# `CHECK:` lines must match in order, `CHECK-NOT:` must not match between them, `%[[X:.*]]` binds a
# name that a later `%[[X]]` must repeat. minixla's tests use the `filecheck` Python package the
# same way (`tests/conftest.py::filecheck`), and also evaluate the module before and after on
# NaN, ±inf, ±0.0 and subnormals: the bits must not change. Here is the test of rule A7,
# `negate(negate(x)) -> x`:

# %%
import os
import subprocess
import sys
import tempfile


def filecheck(text: str, checks: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(checks)
    tool = os.path.join(os.path.dirname(sys.executable), "filecheck")
    r = subprocess.run([tool, fh.name], input=text, capture_output=True, text=True)
    os.unlink(fh.name)
    return "ok" if r.returncode == 0 else r.stderr


double_negate = """
HloModule t

ENTRY %main (p0: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %n1 = f32[8]{0} negate(%p0)
  %n2 = f32[8]{0} negate(%n1)
  ROOT %out = f32[8]{0} exponential(%n2)
}
"""
before, after = parse(double_negate), parse(double_negate)
AlgebraicSimplifier().run(after)
DeadCodeElimination().run(after)
print(after)
special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -3.0, 1e-40], np.float32)
check = filecheck(after.to_string(), """
CHECK: %p0 = f32[8]{0} parameter(0)
CHECK-NOT: negate
CHECK: ROOT %out = f32[8]{0} exponential(%p0)
""")
print("FileCheck:", check)

# %%
assert check == "ok"
np.testing.assert_array_equal(evaluate(before, special).view(np.uint32), evaluate(after, special).view(np.uint32))

# %% [markdown]
# ## 6. Exercise: `x / 2**k -> x * 2**-k`
#
# A division costs several multiplications. When `c` is `±2**k` and **both `c` and `1/c` are
# normal floats** (in float32 `2**-126 <= |c|, |1/c|`), `1/c` is exact and `x / c == x * (1/c)`
# for every `x`, bit for bit. Otherwise the rewrite changes results: `1/3` is rounded, and
# `c = 2**127` is a fine power of two whose reciprocal `2**-127` is subnormal -- and multiplying by
# a subnormal (flushed to zero on this backend, as XLA:CPU does) multiplies by zero. (The other
# way round, a subnormal `c = 2**-127` is itself flushed: `x / c` is `x / 0`.)

# %%
big = jnp.float32(2.0**127)
print("2**127 / 2**127 =", big / big, "   2**127 * 2**-127 =", big * jnp.float32(2.0**-127))

# %%
assert float(big / big) == 1.0 and float(big * jnp.float32(2.0**-127)) == 0.0

# %% [markdown]
# Write the pass `DivideByPowerOfTwo` in `tutorials/exercises/ch03_divide_by_power_of_two.py`
# (its docstring gives the rule and the IR calls you need). Its test,
# `tests/exercises/test_ch03_divide_by_power_of_two.py`, is written as above: FileCheck on the
# rewritten text, the same bits before and after on special values, and the look-alikes that
# must be left alone (`x / 3`, `x / 0`, `x / 2**127`, integer division, a non-constant divisor):
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch03_divide_by_power_of_two.py
# ```
#
# The cell below runs your pass on `x / 2` once it exists.

# %%
from exercises import ch03_divide_by_power_of_two

halve = parse("""
HloModule t

ENTRY %main (p0: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %t = f32[] constant(2)
  %two = f32[8]{0} broadcast(%t), dimensions={}
  ROOT %out = f32[8]{0} divide(%p0, %two)
}
""")
try:
    ch03_divide_by_power_of_two.DivideByPowerOfTwo().run(halve)
    DeadCodeElimination().run(halve)
    print(halve)
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next, tutorial 04: fusion, the pass that decides which instructions become one kernel.
