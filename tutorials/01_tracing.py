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
# # Tutorial 01 — From a Python function to a jaxpr and to HLO
#
# A compiler needs a program it can look at. A Python function is not one: it is opaque
# bytecode that can do anything. JAX's trick, which minixla copies, is to **run** the function
# once on stand-in values called *tracers* and record every array operation they see.
# The record is a **jaxpr**. Lowering the jaxpr gives **HLO**, XLA's IR, which the
# optimization passes and the backends work on.
#
# ```
# Python fn --trace--> jaxpr --lower--> HLO --passes--> optimized HLO --backend--> machine code
# ```
#
# This notebook follows one small function through the first two arrows.
#
# *Mirrors* JAX's `jax/_src/core.py` (tracers, avals, `Jaxpr`) and `jax.make_jaxpr`.

# %%
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax


def predict(w, b, x):
    return mnp.maximum(x @ w + b, 0.0)


w = np.ones((3, 4), np.float32)
b = np.zeros(4, np.float32)
x = np.ones((8, 3), np.float32)

# %% [markdown]
# ## 1. Abstract values
#
# While tracing, minixla does not know the *data* of `x`, only its **abstract value** (aval):
# shape, dtype and whether the type is *weak* (a Python scalar such as `0.0` is weak: it
# adopts the dtype of the array it meets instead of forcing float64 or float32 on it).

# %%
from minixla.core import get_aval

print(get_aval(x))      # an array: strong f32
print(get_aval(0.0))    # a Python float: weak f32

# %%
assert (get_aval(x).shape, get_aval(x).dtype, get_aval(x).weak_type) == ((8, 3), np.float32, False)
assert get_aval(0.0).dtype == np.float32 and get_aval(0.0).weak_type

# %% [markdown]
# ## 2. Tracing records a jaxpr
#
# `make_jaxpr` calls `predict` with tracers. Each operation on a tracer *binds* a primitive
# (`dot_general`, `add`, `max`, ...). Instead of computing, binding appends one equation to the
# jaxpr, typed by the primitive's *shape rule*. NumPy-style broadcasting of `b` became an explicit
# `broadcast_in_dim`, and the literal `0.0` was typed `f32` because the array it meets is f32.

# %%
jaxpr = minixla.make_jaxpr(predict)(w, b, x)
print(jaxpr)

# %%
prims = [e.primitive.name for e in jaxpr.eqns]
assert prims == ["dot_general", "broadcast_in_dim", "add", "max"]
assert "0.0:f32[]" in str(jaxpr)  # the weak literal took the array's dtype

# %% [markdown]
# Every variable has a type, every equation names its primitive and its static parameters.
# That is all a compiler needs. The equations are plain Python objects:

# %%
for eqn in jaxpr.eqns:
    print(eqn.primitive.name, [str(v.aval.str_short()) for v in eqn.outvars], "from line", eqn.source_info.lineno)

# %% [markdown]
# Each equation remembers the source line of `predict` that created it (the `return` line):

# %%
import inspect

return_line = inspect.getsourcelines(predict)[1] + 1
assert all(eqn.source_info.lineno == return_line for eqn in jaxpr.eqns)

# %% [markdown]
# ## 3. What tracing cannot see
#
# A tracer has no value, so Python control flow on it cannot be decided while tracing.
# minixla raises the same error JAX does, and points at your line:

# %%
def relu_with_if(x):
    if x > 0:
        return x
    return 0.0 * x


try:
    minixla.make_jaxpr(relu_with_if)(np.float32(1.0))
except minixla.errors.TracerBoolConversionError as e:
    lines = str(e).splitlines()
    print(type(e).__name__, ":", lines[0])
    print(next(line for line in lines if line.strip().startswith("at:")))
    error = e

# %%
assert "(relu_with_if)" in str(error)  # the error names the user's function and line

# %% [markdown]
# The fix is to make the choice part of the program, with `where` (a `select_n` primitive).
# Read `select_n b c a` as "case `b` of (`c`, `a`)": the operand for `False` comes first, then
# the one for `True` (`lax.select_n(pred, *cases)` picks `cases[pred]`), so `where(p, x, y)` is
# `select_n p y x`:

# %%
where_jaxpr = minixla.make_jaxpr(lambda x: mnp.where(x > 0, x, 0.0 * x))(np.float32(1.0))
print(where_jaxpr)

# %%
assert "select_n" in [e.primitive.name for e in where_jaxpr.eqns]

# %% [markdown]
# ## 4. Lowering to HLO
#
# HLO is XLA's IR. Compared with the jaxpr it is more explicit: every elementwise operand
# has exactly the result's shape (the scalar `0.0` becomes a `constant` plus a `broadcast`),
# layouts are printed (`{1,0}` = row-major), and reductions carry a small computation
# (`to_apply`) saying how to combine two elements. `jit(f).lower(...)` stops right after lowering:

# %%
lowered = minixla.jit(predict).lower(w, b, x)
print(lowered.as_text())

# %%
hlo = lowered.as_text()
assert "f32[] constant(0.0)" in hlo and "broadcast(%constant" in hlo  # the scalar, made explicit
assert "f32[8,4]{1,0}" in hlo  # row-major layout

# %% [markdown]
# ## 5. A first look at optimization
#
# `compile()` runs the HLO passes. Fusion turns `dot` + bias `add` + `maximum` into **one
# kernel** (a `kOutput` fusion): the matrix product's accumulator gets its bias and ReLU in
# registers and is stored once. Buffer assignment then decides where every value lives.

# %%
compiled = lowered.compile()
print(compiled.as_text())
print(compiled.kernels())

# %%
kernels = compiled.kernels()
assert len(kernels) == 1 and kernels[0]["kind"] == "kOutput"
assert {"dot", "add", "maximum"} <= set(kernels[0]["opcodes"])

# %% [markdown]
# The compiled object is callable, and its answer matches JAX's:

# %%
import jax.numpy as jnp

out = compiled(w, b, x)
expected = jnp.maximum(x @ w + b, 0.0)
print(out.shape, out.dtype, float(np.max(np.abs(out - np.asarray(expected)))))
assert np.allclose(out, expected)

# %% [markdown]
# ## Exercise: a jaxpr interpreter
#
# A jaxpr is a program, so it can be run. Write `eval_jaxpr(closed_jaxpr, *args)` in
# `tutorials/exercises/ch01_eval_jaxpr.py` (the docstring there says what you need: an
# environment from variables to values, literals, and `primitive.bind` on arrays). Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch01_eval_jaxpr.py
# ```
#
# which compares it with JAX on five functions. The cell below runs your version once it exists.

# %%
from exercises import ch01_eval_jaxpr

try:
    print(ch01_eval_jaxpr.eval_jaxpr(jaxpr, w, b, x)[0][:2])
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next, tutorial 02 looks at HLO itself: its text format, the parser, the verifier and the
# evaluator. Tutorials 03-05 follow the passes (simplification, fusion, buffer assignment).
