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
# # Tutorial 14 — Putting it together: the digits CNN
#
# Every stage of the course on one real model: a small convolutional network on scikit-learn's
# 1,797 real 8x8 handwritten digits (no download), **trained by minixla**: one compiled program
# per training step, forward, backward (tutorial 09's `value_and_grad`) and the Adam update
# written with `minixla.numpy`. Then the *same model source* is compiled for inference: traced
# (01), lowered to HLO (02), simplified (03), fused (04), given one arena of memory (05) and
# compiled to machine code (06), checked against JAX (08).
#
# Model (NHWC): conv3x3(1->16)+bias+ReLU -> conv3x3(16->32)+bias+ReLU -> dense(2048->10) -> softmax.
# The model, the loss and the data are `examples/digits_cnn.py`'s (whose
# `python examples/digits_cnn.py` trains longer and times the step against `jax.jit`'s).
#
# *Mirrors* no single file: this is what `jax.jit` does with a model, end to end.

# %%
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path.cwd().parent))  # the repository root, for examples/

import jax
import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp
from examples.digits_cnn import cnn, init_params, intermediate_bytes, load_data, loss_fn
from minixla.passes.fusion import is_conv_bias_relu

x_train, x_test, y_train, y_test = load_data()
print(f"{len(x_train)} training and {len(x_test)} test images of {x_train.shape[1:]}")

fig, axes = plt.subplots(1, 10, figsize=(8, 1.1))
for ax, img, label in zip(axes, x_test, y_test):
    ax.imshow(img[..., 0], cmap="gray_r")
    ax.set_title(str(label), fontsize=9)
    ax.axis("off")

# %% [markdown]
# ## 1. Train with minixla
#
# `loss_fn(params, x, y, np=..., lax=...)` (the mean cross-entropy of `cnn`) is written once and
# runs with `jax.numpy` or with `minixla.numpy`. The training step differentiates it with
# `minixla.value_and_grad` and applies Adam to the parameter pytree (a dict of arrays;
# `jax.tree.map` walks it), all under one `minixla.jit`: forward, backward and update are one
# program, compiled once. It also returns the gradient, so that the first step can be checked.

# %%
def minixla_loss(p, x, y):
    return loss_fn(p, x, y, np=mnp, lax=minixla.lax)


@minixla.jit
def train_step(params, m, v, t, x, y):
    loss, g = minixla.value_and_grad(minixla_loss)(params, x, y)
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)              # Adam's moments
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    m_hat, v_hat = 1 - 0.9 ** t, 1 - 0.999 ** t                         # bias corrections
    update = lambda p, m, v: p - 1e-3 * (m / m_hat) / (mnp.sqrt(v / v_hat) + 1e-8)
    return jax.tree.map(update, params, m, v), m, v, loss, g


params0 = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(0)))
params, m, v = params0, jax.tree.map(np.zeros_like, params0), jax.tree.map(np.zeros_like, params0)
rng = np.random.default_rng(0)
batches = [rng.integers(0, len(x_train), 64) for _ in range(150)]  # 150 random batches
losses = []
t0 = time.perf_counter()
for t, idx in enumerate(batches, start=1):
    params, m, v, loss, g = train_step(params, m, v, np.float32(t), x_train[idx], y_train[idx])
    losses.append(float(loss))
    if t == 1:
        first_grad, compile_s = g, time.perf_counter() - t0
train_s = time.perf_counter() - t0 - compile_s
print(f"{len(batches)} Adam steps of 64 images: first call (trace + compile + run) {compile_s:.1f} s, "
      f"the other {len(batches) - 1} in {train_s:.1f} s; loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}")

fig, ax = plt.subplots(figsize=(6, 2.5))
ax.semilogy(np.arange(1, len(losses) + 1), losses)
ax.set(xlabel="Adam step", ylabel="batch cross-entropy")
ax.grid(alpha=0.3)

# %% [markdown]
# The gradient of that first step, at the initial parameters, against JAX's on the same batch
# (`jax.grad` of the same `loss_fn` written with `jax.numpy`; under `jax.jit` here to keep the
# chapter fast, `examples/digits_cnn.py` compares with JAX eager). Sums of up to 2,048 terms in
# another order: they agree to about 1e-7.

# %%
idx = batches[0]
jax_grad = jax.jit(jax.grad(loss_fn))(params0, x_train[idx], y_train[idx])
grad_diff = max(float(np.max(np.abs(np.asarray(first_grad[k]) - np.asarray(jax_grad[k])))) for k in params0)
print(f"max |minixla grad - jax.grad| at the initial parameters: {grad_diff:.1e}")

# %%
assert grad_diff < 1e-5
assert np.mean(losses[-10:]) < 0.5 * losses[0]  # the loss went down

# %% [markdown]
# The trained parameters, run by JAX on the test images (the reference for the next sections):

# %%
jax_logits, jax_probs = jax.jit(cnn)(params, x_test)
jax_accuracy = float(np.mean(np.argmax(jax_probs, axis=1) == y_test))
print(f"test accuracy of the minixla-trained CNN (run by JAX): {jax_accuracy:.3f}")

# %%
assert jax_accuracy > 0.85

# %% [markdown]
# ## 2. The same source, compiled by minixla
#
# The jaxpr has about twenty equations and the lowered program about as many kernels; after
# the passes there are 4: each Conv+Bias+ReLU is one kOutput kernel (tutorial 04), the dense
# layer with its bias a third, the softmax a row kernel (kInput).

# %%
def minixla_cnn(p, x):
    return cnn(p, x, np=mnp, lax=minixla.lax)


jaxpr = minixla.make_jaxpr(minixla_cnn)(params, x_test)
compiled = minixla.jit(minixla_cnn).lower(params, x_test).compile()
print(f"{len(jaxpr.eqns)} jaxpr equations, {compiled.kernels_unfused} kernels before fusion, "
      f"{len(compiled.kernels())} after:")
for k in compiled.kernels():
    print(f"  {k['name']:<14} {k['kind']:<8} {' '.join(o for o in k['opcodes'] if o != 'constant')}")

# %%
fusions = [i for i in compiled.hlo_module.entry.instructions if i.opcode == "fusion"]
conv_fusions = [f for f in fusions if any(i.opcode == "convolution" for i in f.fused_computation.instructions)]
assert len(conv_fusions) == 2 and all(is_conv_bias_relu(f) for f in conv_fusions)
assert [k["kind"] for k in compiled.kernels()] == ["kOutput", "kOutput", "kOutput", "kInput"]
assert 15 <= len(jaxpr.eqns) <= 30 and 15 <= compiled.kernels_unfused <= 30

# %% [markdown]
# ## 3. The same answers
#
# On the LLVM backend and on the hand-off to XLA, the logits agree with JAX's to about 1e-5
# (float sums in another order, over up to 2,048 terms), and the predicted classes are the same:

# %%
logits, probs = compiled(params, x_test)
logits_xla, _ = minixla.jit(minixla_cnn, backend="jax")(params, x_test)
diff = float(np.max(np.abs(logits - np.asarray(jax_logits))))
diff_xla = float(np.max(np.abs(logits_xla - np.asarray(jax_logits))))
predicted = np.argmax(np.asarray(probs), axis=1)
accuracy = float(np.mean(predicted == y_test))
print(f"max |logits - JAX|: llvm {diff:.1e}, jax backend {diff_xla:.1e}; minixla accuracy {accuracy:.3f}")

# %%
assert diff < 1e-4 and diff_xla < 1e-4
np.testing.assert_array_equal(predicted, np.argmax(np.asarray(jax_probs), axis=1))

# %% [markdown]
# ## 4. Memory
#
# Run op by op, every intermediate value would have its own buffer. After fusion only the
# kernels' outputs are stored, and buffer assignment packs them into one arena:

# %%
naive = intermediate_bytes(compiled.lowered.hlo_module)
arena = compiled.buffer_assignment.arena_size
print(f"op by op: {naive / 2**20:.1f} MiB of intermediates; after fusion: "
      f"{compiled.buffer_assignment.naive_bytes / 2**20:.1f} MiB; one arena: {arena / 2**20:.1f} MiB")
print(compiled.memory_analysis())

# %%
assert arena <= compiled.buffer_assignment.naive_bytes < naive

# %% [markdown]
# ## 5. Exercise: fold a batch norm into the convolution
#
# Models trained with batch normalization carry, at inference, a fixed per-channel affine map
# after each convolution: `gamma * (z - mean) / sqrt(var + eps) + beta`. An inference compiler
# folds it into the convolution's weights and bias, so that Conv+BN+ReLU becomes the one
# Conv+Bias+ReLU kernel above. Write `fold_batchnorm(w, b, gamma, beta, mean, var, eps)` in
# `tutorials/exercises/ch14_fold_batchnorm.py`; its test compiles the folded convolution with
# minixla (one kOutput kernel) and compares with JAX eager's Conv+BN+ReLU:
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch14_fold_batchnorm.py
# ```

# %%
from exercises import ch14_fold_batchnorm

c_out = params["b1"].shape[0]
try:
    w2, b2 = ch14_fold_batchnorm.fold_batchnorm(params["w1"], params["b1"], np.ones(c_out, np.float32),
                                                np.zeros(c_out, np.float32), np.zeros(c_out, np.float32),
                                                np.ones(c_out, np.float32), 1e-5)
    print("identity batch norm: weights scaled by", float(w2.ravel()[0] / params["w1"].ravel()[0]))
except NotImplementedError as e:
    print("not written yet:", e)
