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
# Every stage of the course on one real model: a small convolutional network trained with JAX
# on scikit-learn's 1,797 real 8x8 handwritten digits (no download), then the *same model
# source* compiled by minixla: traced (01), lowered to HLO (02), simplified (03), fused (04),
# given one arena of memory (05) and compiled to machine code (06), checked against JAX (08).
#
# Model (NHWC): conv3x3(1->16)+bias+ReLU -> conv3x3(16->32)+bias+ReLU -> dense(2048->10) -> softmax.
# The code is `examples/digits_cnn.py`, whose `python examples/digits_cnn.py` prints the same
# report for a longer training.
#
# *Mirrors* no single file: this is what `jax.jit` does with a model, end to end.

# %%
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path.cwd().parent))  # the repository root, for examples/

import jax
import matplotlib.pyplot as plt
import numpy as np

import minixla
import minixla.numpy as mnp
from examples.digits_cnn import cnn, intermediate_bytes, load_data, train
from minixla.passes.fusion import is_conv_bias_relu

x_train, x_test, y_train, y_test = load_data()
print(f"{len(x_train)} training and {len(x_test)} test images of {x_train.shape[1:]}")

fig, axes = plt.subplots(1, 10, figsize=(8, 1.1))
for ax, img, label in zip(axes, x_test, y_test):
    ax.imshow(img[..., 0], cmap="gray_r")
    ax.set_title(str(label), fontsize=9)
    ax.axis("off")

# %% [markdown]
# ## 1. Train with JAX
#
# Adam on the cross-entropy, 150 steps of 64 images (a few seconds; minixla has no autodiff yet,
# that is chapter 09's subject). `cnn(params, x, np=..., lax=...)` is written once and runs with
# `jax.numpy` or with `minixla.numpy`.

# %%
params = train(x_train, y_train, steps=150)
jax_logits, jax_probs = jax.jit(cnn)(params, x_test)
jax_accuracy = float(np.mean(np.argmax(jax_probs, axis=1) == y_test))
print(f"JAX test accuracy: {jax_accuracy:.3f}")

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
