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
# # Tutorial 09 — Autodiff: jvp, linearize, transpose, vjp
#
# JAX is "autograd + XLA". The compiler of tutorials 01-08 only ever sees straight-line array
# programs; automatic differentiation is what writes the *backward* program a training step
# needs, and it does so with the same primitives, as one more interpreter over them:
#
# ```
# jvp        forward mode: every value carries a tangent; one rule per primitive
# linearize  = jvp + partial evaluation: the tangent half is staged into a linear jaxpr
# transpose  runs that linear jaxpr backwards: one rule per *linear* primitive
# vjp, grad  = linearize + transpose
# ```
#
# We go from the rule of `sin` to the transposed convolution, then look at what the compiler
# makes of a training step.
#
# *Mirrors* JAX's `jax/_src/interpreters/ad.py` (and the Autodidax notebook); minixla's
# machinery is `minixla/interpreters/ad.py`, its per-primitive rows `ad_rules.py`.

# %%
import inspect

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.interpreters import ad, ad_rules
from minixla.interpreters.rules import LINEAR, rules

jax.config.update("jax_enable_x64", True)  # float64 for the numerical checks of section 5

# %% [markdown]
# ## 1. Dual numbers
#
# The derivative of a composition is the chain rule applied op by op. Forward mode carries,
# next to each value `x`, its **tangent** `dx`: how fast `x` moves when the input moves. Each
# operation maps the pair `(x, dx)` to the pair of its result. Ten lines of Python do it for
# `+`, `*` and `sin`:

# %%
class Dual:
    def __init__(self, primal, tangent):
        self.primal, self.tangent = primal, tangent

    def __add__(self, other):
        other = other if isinstance(other, Dual) else Dual(other, 0.0)
        return Dual(self.primal + other.primal, self.tangent + other.tangent)

    def __mul__(self, other):  # the product rule
        other = other if isinstance(other, Dual) else Dual(other, 0.0)
        return Dual(self.primal * other.primal, self.tangent * other.primal + self.primal * other.tangent)

    __radd__, __rmul__ = __add__, __mul__


def dual_sin(x):
    return Dual(np.sin(x.primal), np.cos(x.primal) * x.tangent)


def derivative(f, x):
    return f(Dual(x, 1.0)).tangent


print(derivative(lambda x: dual_sin(x) * x, 1.0), np.cos(1.0) * 1.0 + np.sin(1.0))

# %%
assert np.isclose(derivative(lambda x: dual_sin(x) * x, 1.0), np.cos(1.0) + np.sin(1.0))

# %% [markdown]
# minixla does the same with two changes. The pair is a **tracer** (`JVPTracer`, with `.primal`
# and `.tangent`), so every function written with `minixla.numpy` or `lax` works on it unchanged;
# and the rules are not methods of a class but rows of a table, `jvp_rules`, keyed by
# primitive, next to the other stages' tables (tutorial 01's shape rules, tutorial 02's lowering):

# %%
for name in ("sin", "mul"):
    print(name, {table: "yes" if row else "-" for table, row in rules(name).items()})
print()
print(*[line for line in inspect.getsource(ad_rules).splitlines()
        if line.startswith(("defjvp(L.sin_p", "defbilinear(L.mul_p", "            lambda ct, x, y: _unbcast(L.mul(x"))],
      sep="\n")

# %%
assert all(rules("sin")[t] for t in ("jvp", "batching")) and rules("sin")["transpose"] is None  # sin is not linear
assert all(rules("mul")[t] for t in ("jvp", "transpose", "batching"))                         # mul is, in each operand

# %% [markdown]
# `defjvp(prim, fn)` takes one function per operand, `fn(g, ans, x)` = the tangent contribution
# of an operand whose tangent is `g`. `sin`'s is `g * cos(x)`. `mul` is **bilinear**: its
# tangent is `tx * y + x * ty`. A rule can be called on its own, with arrays:

# %%
x, y = np.float32(1.0), np.float32(3.0)
print(ad.jvp_rules[lax.sin_p]([x], [np.float32(2.0)]))
print(ad.jvp_rules[lax.mul_p]([x, y], [np.float32(1.0), np.float32(0.5)]))

# %%
assert np.allclose(ad.jvp_rules[lax.sin_p]([x], [np.float32(2.0)]), (np.sin(1.0), 2 * np.cos(1.0)))
assert np.allclose(ad.jvp_rules[lax.mul_p]([x, y], [np.float32(1.0), np.float32(0.5)]), (3.0, 1.0 * 3.0 + 1.0 * 0.5))

# %% [markdown]
# `minixla.jvp(f, primals, tangents)` pushes a JVP trace on the trace stack and calls `f` on
# `JVPTracer`s. When `f` binds a primitive, the trace looks its rule up. A value the tangents do
# not reach (a constant, an integer) has the symbolic tangent `Zero`: no work is done for it,
# and integer inputs get JAX's `float0` tangents.

# %%
def f(x):
    print("inside f:", type(x).__name__, "primal", x.primal, "tangent", x.tangent)
    return mnp.sin(x) * x


primal_out, tangent_out = minixla.jvp(f, (np.float32(1.0),), (np.float32(1.0),))
want = jax.jvp(lambda x: jnp.sin(x) * x, (np.float32(1.0),), (np.float32(1.0),))
print(primal_out, tangent_out, "  JAX:", want)

# %%
assert np.allclose(primal_out, want[0]) and np.allclose(tangent_out, want[1])
int_tangent = np.zeros((), jax.dtypes.float0)  # the tangent of an integer input
assert minixla.jvp(lambda x, n: x * n, (np.float32(2.0), 3), (np.float32(1.0), int_tangent))[1] == 3.0

# %% [markdown]
# ## 2. linearize = jvp + partial evaluation
#
# A JVP computes one directional derivative per call. Reverse mode needs the derivative as a
# *function* of the tangent, written down so that it can be run backwards. `linearize` gets it
# by running the JVP with the primals known and the tangents **unknown**: the tangents are
# tracers of a jaxpr trace pushed *below* the JVP trace. Every primal operation runs right away
# (`sin 1.0`, `cos 1.0`), every tangent operation is staged into a jaxpr. The known values the
# tangent equations need become that jaxpr's constants: the **residuals** that a backward pass
# keeps from the forward pass. Here they are `cos x` and `sin x`; `x` itself, a known scalar,
# appears as the literal `1.0`.

# %%
y, f_jvp = minixla.linearize(lambda x: mnp.sin(x) * x, np.float32(1.0))
print(f_jvp.jaxpr)
print("residuals:", f_jvp.jaxpr.consts)

# %%
linear_prims = {e.primitive.name for e in f_jvp.jaxpr.jaxpr.eqns}
assert linear_prims <= LINEAR                       # only linear primitives are staged
assert np.isclose(f_jvp(np.float32(1.0)), np.cos(1.0) + np.sin(1.0))
assert any(np.isclose(c, np.cos(np.float32(1.0))) for c in f_jvp.jaxpr.consts)  # cos x is a residual
assert "mul d 1.0:f32[]" in str(f_jvp.jaxpr)                                    # x, a literal

# %% [markdown]
# The jaxpr is linear in `d`: each equation is a multiplication by a constant, an addition or a
# conversion. Linear maps have transposes, and that is all reverse mode needs.
#
# ## 3. Transpose rules
#
# The transpose of a linear map `f: x -> A x` is `ct -> Aᵀ ct`. It is the same map read
# backwards: given the **cotangent** `ct` of the output, what is the cotangent of the input?
# `backward_pass` walks a linear jaxpr from its last equation to its first and calls the
# `transpose_rules` row of each primitive, with the linear operand marked `UndefinedPrimal`:
#
# - **mul by a constant**: `ct -> ct * c` (the other operand must be known: `x * x` is not linear);
# - **add**: the cotangent goes to both operands; **reduce_sum** transposes to a broadcast,
#   **broadcast** to a sum, **slice** to a pad.

# %%
from minixla.interpreters.ad import UndefinedPrimal
from minixla.core.avals import ShapedArray

ct = np.array([1.0, 2.0], np.float32)
print(ad.transpose_rules[lax.mul_p](ct, UndefinedPrimal(ShapedArray((2,), np.float32)), np.float32(3.0)))
try:
    ad.transpose_rules[lax.mul_p](ct, UndefinedPrimal(ShapedArray((2,), np.float32)),
                                  UndefinedPrimal(ShapedArray((2,), np.float32)))
except ValueError as e:
    print("ValueError:", e)
    error = e

# %%
assert np.array_equal(ad.transpose_rules[lax.mul_p](ct, UndefinedPrimal(ShapedArray((2,), np.float32)),
                                                    np.float32(3.0))[0], ct * 3)
assert "not linear" in str(error)

# %% [markdown]
# **dot_general has two transposes**, one per operand: it is linear in each. For `c = a @ b`,
# `da = ct @ bᵀ` and `db = aᵀ @ ct`. minixla writes both as `dot_general`s that contract the
# right dims of their operands in place, so no transposed copy of `a` or `b` is made (one small
# `transpose` puts the result's dims in `b`'s order). The jaxpr of a VJP of a matmul shows them:

# %%
a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
b = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)


def vjp_of(f, *args):
    out, pullback = minixla.vjp(f, *args)
    return pullback(mnp.ones_like(out))


matmul_bwd = minixla.make_jaxpr(lambda a, b: vjp_of(lambda a, b: a @ b, a, b))(a, b)
print(matmul_bwd)

# %%
dots = [e for e in matmul_bwd.jaxpr.eqns if e.primitive.name == "dot_general"]
assert len(dots) == 3  # the forward product, then one per operand's transpose
assert dots[2].params["dimension_numbers"] == (((1,), (1,)), ((), ()))  # da = ct . b over b's dim 1: no copy of b
da, db = vjp_of(lambda a, b: a @ b, a, b)
ones = np.ones((4, 2), np.float32)
assert np.allclose(da, ones @ b.T) and np.allclose(db, a.T @ ones)

# %% [markdown]
# **conv_general_dilated** is bilinear too, and both its transposes are convolutions again:
#
# - the **lhs transpose** (the gradient of the input, the "transposed convolution" of the
#   literature) convolves the cotangent with the kernel **flipped in space** (`rev`) and with
#   its in/out features swapped (`transpose`); the forward stride becomes an `lhs_dilation`
#   (zeros between the cotangent's elements), and the padding becomes `K - 1 - lo`;
# - the **rhs transpose** (the weight gradient) is a convolution *between the input and the
#   cotangent*: the cotangent plays the kernel, the batch dim is the contracted one, and the
#   forward stride becomes the kernel's `rhs_dilation`.

# %%
def conv(x, w):
    return lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))


xc = np.random.default_rng(2).standard_normal((2, 7, 7, 3))
wc = np.random.default_rng(3).standard_normal((3, 3, 3, 4))
conv_bwd = minixla.make_jaxpr(lambda x, w: vjp_of(conv, x, w))(xc, wc)
for e in conv_bwd.jaxpr.eqns:
    p = e.params
    print(e.primitive.name, e.outvars[0].aval.str_short(),
          {k: p[k] for k in ("window_strides", "padding", "lhs_dilation", "rhs_dilation") if k in p} or p)

# %%
prims = [e.primitive.name for e in conv_bwd.jaxpr.eqns]
convs = [e for e in conv_bwd.jaxpr.eqns if e.primitive.name == "conv_general_dilated"]
fwd, w_grad, x_grad = convs
assert [name for name in prims if name in ("rev", "transpose")] == ["transpose", "rev"]
assert x_grad.params["lhs_dilation"] == fwd.params["window_strides"]     # stride -> dilation of the cotangent
assert w_grad.params["rhs_dilation"] == fwd.params["window_strides"]     # stride -> dilation of the "kernel" ct
assert w_grad.outvars[0].aval.shape == wc.shape and x_grad.outvars[0].aval.shape == xc.shape

# %% [markdown]
# A transpose is right when it satisfies the definition `<ct, f(x)> = <fᵀ(ct), x>` for every
# `x` and `ct`: the **dot-product test**. `linear_transpose(f, x)` transposes any linear
# function; for the convolution in each operand, with stride 2 and padding, in float64:

# %%
rng = np.random.default_rng(4)
ct = rng.standard_normal(conv(xc, wc).shape)
(x_t,) = minixla.linear_transpose(lambda x: conv(x, wc), xc)(ct)
(w_t,) = minixla.linear_transpose(lambda w: conv(xc, w), wc)(ct)
lhs_side = (np.vdot(ct, conv(xc, wc)), np.vdot(x_t, xc), np.vdot(w_t, wc))
print(lhs_side)

# %%
assert np.allclose(lhs_side[0], lhs_side[1], rtol=1e-12) and np.allclose(lhs_side[0], lhs_side[2], rtol=1e-12)
assert np.allclose(x_t, jax.linear_transpose(lambda x: jax.lax.conv_general_dilated(
    x, wc, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")), xc)(ct)[0])

# %% [markdown]
# ## 4. vjp = linearize + transpose; grad
#
# `vjp(f, x)` linearizes `f` at `x` and returns the transpose of the linear map as the
# *pullback*. `grad(f)` is the pullback of the cotangent `1.0` of a scalar output. Under
# `make_jaxpr`, the whole thing, forward and backward, is one jaxpr: the forward equations
# (`sin`, `cos`: the residual), then the transposed tangent equations, in JAX's layout. JAX's
# own jaxpr has the same equations: the unused forward product is `_` (DCE removes it in both
# compilers), and the two cotangents of `x` are summed by `add_any`, the primitive both use to
# accumulate tangents and cotangents (linear, and an HLO `add` once lowered):

# %%
def g(x):
    return mnp.sin(x) * x


print(minixla.make_jaxpr(minixla.grad(g))(np.float32(1.0)))
jax_jaxpr = jax.make_jaxpr(jax.grad(lambda x: jnp.sin(x) * x))(np.float32(1.0))
print(jax_jaxpr)

# %%
ours = minixla.make_jaxpr(minixla.grad(g))(np.float32(1.0))
names = [e.primitive.name for e in ours.jaxpr.eqns]
assert names == [e.primitive.name for e in jax_jaxpr.eqns] and names[-1] == "add_any"
assert np.isclose(minixla.grad(g)(np.float32(1.0)), jax.grad(lambda x: jnp.sin(x) * x)(np.float32(1.0)))

# %% [markdown]
# ## 5. Checked against JAX and against central differences
#
# A gradient has two independent checks: JAX's (`jax.grad`, on the same program written with
# `jax.numpy`) and finite differences `(f(x + h e_i) - f(x - h e_i)) / 2h`, which need no
# derivative rule at all (JAX's `check_grads` does the same). Central differences have an
# error of order h², so they are taken in float64:

# %%
def loss(w, x, np=mnp):
    return np.sum(np.tanh(x @ w) ** 2) + np.max(np.exp(w))


w64 = np.random.default_rng(5).standard_normal((3, 2))
x64 = np.random.default_rng(6).standard_normal((4, 3))
g_minixla = minixla.grad(loss)(w64, x64)
g_jax = jax.grad(lambda w, x: loss(w, x, np=jnp))(w64, x64)
h = 1e-6
g_fd = np.zeros_like(w64)
for i in np.ndindex(w64.shape):
    e = np.zeros_like(w64)
    e[i] = h
    g_fd[i] = (loss(w64 + e, x64, np=np) - loss(w64 - e, x64, np=np)) / (2 * h)
print("max |minixla - jax|:", np.abs(g_minixla - g_jax).max(), "  max |minixla - central differences|:",
      np.abs(g_minixla - g_fd).max())

# %%
assert g_minixla.dtype == np.float64
np.testing.assert_allclose(g_minixla, g_jax, rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(g_minixla, g_fd, rtol=1e-6, atol=1e-7)

# %% [markdown]
# Gradients of elementwise functions are curves: `grad(lambda x: sum(f(x)))` at a vector of
# points is `f'` at each point (each output element depends on its own input only). Here
# `softplus` and its derivative, the logistic function, and the second derivative by `grad` of
# `grad`, all against JAX:

# %%
def softplus(x, np=mnp):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


xs = np.linspace(-5, 5, 200)
d1 = minixla.grad(lambda x: mnp.sum(softplus(x)))
d2 = minixla.grad(lambda x: mnp.sum(d1(x)))
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(xs, softplus(xs, np=np), label="softplus")
ax.plot(xs, d1(xs), label="grad: logistic")
ax.plot(xs, d2(xs), label="grad of grad")
ax.legend()
ax.grid(alpha=0.3)

# %%
np.testing.assert_allclose(d1(xs), 1 / (1 + np.exp(-xs)), rtol=1e-12, atol=1e-15)
jax_d2 = jax.vmap(jax.grad(jax.grad(lambda x: softplus(x, np=jnp))))(xs)
np.testing.assert_allclose(d2(xs), jax_d2, rtol=1e-10, atol=1e-15)

# %% [markdown]
# ## 6. Perturbation confusion
#
# Nested derivatives must keep their tangents apart. The classic test: `d/dx [x · d/dy (x + y)]`
# at any point is `d/dx [x · 1] = 1`. Our `Dual` class gets it wrong: inside, `x` is already a
# `Dual` carrying the *outer* tangent, and `x + y` adds it to the inner one.

# %%
print("Dual numbers:", derivative(lambda x: x * derivative(lambda y: x + y, 1.0), 2.0))
print("minixla:", minixla.grad(lambda x: x * minixla.grad(lambda y: x + y)(1.0))(2.0))
print("JAX:", jax.grad(lambda x: x * jax.grad(lambda y: x + y)(1.0))(2.0))

# %%
assert derivative(lambda x: x * derivative(lambda y: x + y, 1.0), 2.0) == 2.0  # wrong
assert minixla.grad(lambda x: x * minixla.grad(lambda y: x + y)(1.0))(2.0) == 1.0  # right, as JAX

# %% [markdown]
# minixla gets it right because each `jvp` pushes its **own** `JVPTrace`, and a trace only
# reads the tangent of its own tracers: `JVPTrace.lift` treats a tracer of another trace as a
# constant (tangent `Zero`), so the inner `grad` sees the outer `x` as a constant, as it should.

# %%
print(inspect.getsource(ad.JVPTrace.lift))

# %% [markdown]
# ## 7. A training step, and what the compiler does with it
#
# A training step is `jit(value_and_grad(loss))` plus the update. First a small one that we run:
# a one-hidden-layer MLP fitting `sin(3x)` with plain SGD, its loss curve below.

# %%
def mlp(p, x):
    return mnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]


def mse(p, x, y):
    return mnp.mean((mlp(p, x) - y) ** 2)


@minixla.jit
def sgd_step(p, x, y):
    value, grads = minixla.value_and_grad(mse)(p, x, y)
    return value, jax.tree_util.tree_map(lambda a, g: a - 0.2 * g, p, grads)


rng = np.random.default_rng(0)
xt = np.linspace(-1, 1, 64, dtype=np.float32)[:, None]
yt = np.sin(3 * xt)
params = {"w1": rng.standard_normal((1, 32)).astype(np.float32), "b1": np.zeros(32, np.float32),
          "w2": 0.1 * rng.standard_normal((32, 1)).astype(np.float32)}
curve = []
for _ in range(300):
    value, params = sgd_step(params, xt, yt)
    curve.append(float(value))
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.semilogy(curve)
ax.set_xlabel("SGD step")
ax.set_ylabel("mean squared error")
print(f"loss: {curve[0]:.3f} -> {curve[-1]:.4f}")

# %%
assert curve[-1] < 0.1 * curve[0]

# %% [markdown]
# The compiler sees only the jaxpr of the whole step, forward, backward and update, and
# optimizes it as any other program. Take a convolutional step: conv 3x3 + bias + ReLU, a dense
# layer, softmax cross-entropy, SGD. Compiled, two things from JAX's and XLA's playbook show:
#
# - the **ReLU mask** of the backward pass (`max`'s JVP rule: `x == max(x, 0)`, halved at a tie)
#   is not a kernel or a buffer of its own: it is recomputed from the forward pre-activation
#   inside the fusion that multiplies it with the incoming cotangent (a kLoop kernel, or the
#   epilogue of the GEMM that computes that cotangent when fusion can put it there);
# - the **weight gradient** of the convolution (the rhs transpose of section 3) runs as a
#   register-tiled GEMM (strategy `gemm`), with the SGD update `w - lr * g` fused into its
#   epilogue (kOutput). Conv canonicalization (`conv_canonicalization.py`, after XLA:CPU's) put
#   the batch dim, which the weight gradient contracts, where the GEMM reads it contiguously.
#   The gradient of the input is not computed at all: `x` is not differentiated, its tangent is
#   `Zero` and the lhs transpose is never staged.

# %%
def cnn(p, x, np=mnp, lax=lax):
    y = lax.conv_general_dilated(x, p["w1"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = np.maximum(y + p["b1"], 0.0)
    return h.reshape(h.shape[0], -1) @ p["w2"]


def xent(p, x, labels, np=mnp, lax=lax):
    logits = cnn(p, x, np, lax)
    m = np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=1)) + m[:, 0]
    return np.mean(lse - np.sum(logits * labels, axis=1))


def conv_step(p, x, labels, value_and_grad=minixla.value_and_grad, **lib):
    value, grads = value_and_grad(xent)(p, x, labels, **lib)
    return value, jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)


pc = {"w1": 0.3 * rng.standard_normal((3, 3, 1, 8)).astype(np.float32), "b1": np.zeros(8, np.float32),
      "w2": 0.05 * rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32)}
xb = rng.standard_normal((32, 8, 8, 1)).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
step = minixla.jit(conv_step).lower(pc, xb, labels).compile()
for k in step.executable.kernels():
    print(f"{k['name']:<18} {k['kind']:<12} {k['strategy']:<13} {' '.join(o for o in k['opcodes'] if o != 'constant')}")

# %%
kernels = step.executable.kernels()
mask = [k for k in kernels if "compare" in k["opcodes"] and "maximum" in k["opcodes"]]
assert mask and all(k["kind"] in ("kLoop", "kInput", "kOutput") and "multiply" in k["opcodes"] for k in mask)
assert not any(k["kind"] == "compare" for k in kernels)  # the mask is never a kernel of its own
convs = [k for k in kernels if "convolution" in k["opcodes"]]
assert len(convs) == 2  # forward and weight gradient; no input gradient
w_grad = [instr for instr in step.hlo_module.entry.instructions
          if instr.shape.dims == pc["w1"].shape and instr.opcode in ("fusion", "convolution")]
(w_kernel,) = [k for k in convs if k["name"].endswith(w_grad[0].name.replace(".", "_"))]
assert w_kernel["strategy"] == "gemm" and {"multiply", "subtract"} <= set(w_kernel["opcodes"])  # SGD update fused

# %% [markdown]
# The fusion log says why the mask's `compare` joined its consumer, and the optimized HLO shows
# the weight-gradient kernel (its fused computation, then its call in `ENTRY`). Read its
# `convolution`: the window is 8x8, the size of the cotangent, which plays the kernel; the
# operand `%transpose.N` is the input with its batch dim moved last (`01bf`), the dim the
# GEMM contracts; the result, in the kernel's own layout, goes straight into `w - 0.1 * g`:

# %%
for d in step.fusion_log:
    if d.producer.startswith("compare"):
        print(d)
from minixla.hlo.printer import print_computation, print_instruction

w_fusion = w_grad[0]
print(print_computation(w_fusion.fused_computation))
print(print_instruction(w_fusion))

# %%
assert any(d.producer.startswith("compare") and d.fused for d in step.fusion_log)
value, new_p = step(pc, xb, labels)
want_value, want_p = jax.jit(lambda *a: conv_step(*a, value_and_grad=jax.value_and_grad, np=jnp, lax=jax.lax))(
    pc, xb, labels)
print("max |minixla - jax.jit| after one step:", max(float(np.abs(new_p[k] - want_p[k]).max()) for k in pc))
assert np.isclose(value, want_value, rtol=1e-5)
assert all(np.allclose(new_p[k], want_p[k], rtol=1e-4, atol=1e-5) for k in pc)

# %% [markdown]
# (The step is written once, with `np=`/`lax=`/`value_and_grad=` arguments, as
# `examples/digits_cnn.py`'s `make_step`: the check runs exactly the same source under `jax.jit`
# with `jax.numpy`.)
#
# ## Exercise: a JVP rule and a transpose rule
#
# Write two rows of minixla's tables in `tutorials/exercises/ch09_jvp_transpose.py`:
#
# 1. `tanh_jvp(primals, tangents)`, the `jvp_rules` row of `tanh`. A row has the signature of
#    the rows called in section 1 (`ad.jvp_rules[lax.sin_p]([x], [t])`): lists of primals and
#    tangents in, **one pair** `(primal_out, tangent_out)` out -- not `defjvp`'s per-operand
#    `fn(g, ans, x)`. Write it with `minixla.lax` (or `minixla.numpy`), not NumPy: a first
#    derivative would work with `np.tanh`, because `linearize` passes the primal as an array, but
#    `grad(grad(f))` runs your rule on tracers;
# 2. `reduce_sum_transpose(ct, x, *, axes)`, the `transpose_rules` row of `reduce_sum`, called as
#    the `mul` row in section 3: `x` is an `UndefinedPrimal` (only `x.aval` is known); return a
#    **list** with one cotangent per operand, here `[cotangent of x]`, of `x`'s shape.
#
# A row that returns something else (a bare array, a tangent of the wrong shape) raises a
# `TransformTypeError` naming the rule.
#
# `minixla.interpreters.rules.using_rule(table, prim, rule)` puts a rule in a table for the
# duration of a `with` block; the test does that and compares `jvp`, `grad`, `vjp` and the
# second derivative with JAX's:
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch09_jvp_transpose.py
# ```
#
# The cell below runs your rules once they exist.

# %%
from exercises import ch09_jvp_transpose
from minixla.interpreters.rules import using_rule

try:
    with using_rule("jvp", lax.tanh_p, ch09_jvp_transpose.tanh_jvp), \
            using_rule("transpose", lax.reduce_sum_p, ch09_jvp_transpose.reduce_sum_transpose):
        print(minixla.grad(lambda x: mnp.sum(mnp.tanh(x), axis=0).sum())(np.ones((2, 3), np.float32)))
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next, tutorial 10 is the other transformation, `vmap`, and its composition with this one:
# per-example gradients.
