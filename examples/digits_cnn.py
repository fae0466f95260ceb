"""A small CNN on real handwritten digits, trained with JAX and run with minixla.

scikit-learn ships 1,797 real 8x8 handwritten digit images (no download). We train a CNN with
JAX for a few seconds, then compile the *same model source* with ``minixla.jit`` on both
backends (minixla's LLVM code generator and the hand-off to XLA) and compare:

    python examples/digits_cnn.py            # a readable report
    python examples/digits_cnn.py --json     # ... and the figures as JSON on the last line
    python examples/digits_cnn.py --fast     # fewer training steps (used by the test suite)

``arena_bytes`` is the one arena of temporaries after fusion and buffer reuse; ``naive_bytes``
is the sum of all intermediate buffers of the program as lowered (every intermediate HLO value
in its own buffer, as an op-by-op runtime would allocate them).

Model (NHWC): conv3x3(1->16)+bias+ReLU -> conv3x3(16->32)+bias+ReLU -> dense(2048->10) -> softmax.
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import kernel_cache
from minixla.passes.fusion import is_conv_bias_relu


def cnn(params, x, np=jnp, lax=jax.lax):
    """Logits and class probabilities for images ``x`` f32[N,8,8,1]. Runs unchanged with
    ``np=jax.numpy, lax=jax.lax`` (training, reference) or ``np=minixla.numpy, lax=minixla.lax``."""
    dn = ("NHWC", "HWIO", "NHWC")
    h = lax.conv_general_dilated(x, params["w1"], (1, 1), "SAME", dimension_numbers=dn)
    h = np.maximum(h + params["b1"], 0.0)
    h = lax.conv_general_dilated(h, params["w2"], (1, 1), "SAME", dimension_numbers=dn)
    h = np.maximum(h + params["b2"], 0.0)
    h = np.reshape(h, (h.shape[0], -1))
    logits = h @ params["w3"] + params["b3"]
    z = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(z)
    probs = e / np.sum(e, axis=1, keepdims=True)
    return logits, probs


def init_params(key):
    k1, k2, k3 = jax.random.split(key, 3)
    he = lambda k, shape, fan_in: jax.random.normal(k, shape, jnp.float32) * np.sqrt(2.0 / fan_in)
    return {"w1": he(k1, (3, 3, 1, 16), 9), "b1": jnp.zeros(16),
            "w2": he(k2, (3, 3, 16, 32), 144), "b2": jnp.zeros(32),
            "w3": he(k3, (2048, 10), 2048) * 0.5, "b3": jnp.zeros(10)}


def load_data(seed=0):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1], values in [0, 1]
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def train(x_train, y_train, steps, seed=0, batch=64, lr=1e-3):
    """Adam on cross-entropy, with JAX (a later milestone trains with minixla itself)."""
    params = init_params(jax.random.PRNGKey(seed))

    def loss_fn(p, x, y):
        logits, _ = cnn(p, x)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 10), axis=1))

    @jax.jit
    def step(p, m, v, t, x, y):
        g = jax.grad(loss_fn)(p, x, y)
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        upd = lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        return jax.tree.map(upd, p, m, v), m, v

    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    rng = np.random.default_rng(seed)
    for t in range(1, steps + 1):
        idx = rng.integers(0, len(x_train), batch)
        params, m, v = step(params, m, v, t, x_train[idx], y_train[idx])
    return jax.tree.map(np.asarray, params)


def intermediate_bytes(module) -> int:
    """Bytes of every intermediate value of ``module``'s entry computation, each in its own
    buffer: what running the program op by op (no fusion, no reuse) would allocate besides its
    inputs and outputs. Reshapes are bitcasts and own no bytes."""
    root = module.entry.root
    outputs = set(root.operands) if root.opcode == "tuple" else {root}
    return sum(i.shape.nbytes for i in module.entry.instructions
               if i.opcode not in ("parameter", "constant", "tuple", "reshape") and i not in outputs)


def run(steps=1500, verbose=True):
    x_train, x_test, y_train, y_test = load_data()
    t0 = time.perf_counter()
    params = train(x_train, y_train, steps)
    train_s = time.perf_counter() - t0

    ref_logits, _ = jax.jit(cnn)(params, x_test)
    ref_logits = np.asarray(ref_logits)
    minixla_cnn = lambda p, x: cnn(p, x, np=mnp, lax=minixla.lax)

    report = {}
    for backend in ("llvm", "jax"):
        t0 = time.perf_counter()
        compiled = minixla.jit(minixla_cnn, backend=backend).lower(params, x_test).compile()
        first_ms = (time.perf_counter() - t0) * 1e3
        compile_ms = first_ms
        if backend == "llvm":
            # The first compile of a process also pays one-time start-up: LLVM's initialization,
            # the compile worker's start (in-process meanwhile), the precompiled GEMM routine
            # and micro-kernels, Python's first imports. The compile time reported is a cold
            # compile without it: the same program again, with the kernel cache emptied.
            kernel_cache.clear()
            t0 = time.perf_counter()
            compiled = minixla.jit(minixla_cnn, backend=backend).lower(params, x_test).compile()
            compile_ms = (time.perf_counter() - t0) * 1e3
        logits, probs = compiled(params, x_test)
        report[backend] = dict(compiled=compiled, logits=logits, probs=probs, compile_ms=compile_ms,
                               startup_ms=first_ms - compile_ms)

    llvm = report["llvm"]
    compiled = llvm["compiled"]
    fusions = [i for i in compiled.hlo_module.entry.instructions if i.opcode == "fusion"]
    convs = [i for i in compiled.hlo_module.entry.instructions if i.opcode == "convolution"]
    conv_fusions = [f for f in fusions if any(i.opcode == "convolution" for i in f.fused_computation.instructions)]
    figures = {
        "accuracy": float(np.mean(np.argmax(llvm["probs"], axis=1) == y_test)),
        "max_abs_diff_llvm": float(np.max(np.abs(llvm["logits"] - ref_logits))),
        "max_abs_diff_jax_backend": float(np.max(np.abs(report["jax"]["logits"] - ref_logits))),
        "kernels_unfused": compiled.kernels_unfused,
        "kernels_fused": len(compiled.kernels()),
        "conv_bias_relu_fused": bool(len(conv_fusions) == 2 and not convs
                                     and all(is_conv_bias_relu(f) for f in conv_fusions)),
        "arena_bytes": compiled.buffer_assignment.arena_size,
        "naive_bytes": intermediate_bytes(compiled.lowered.hlo_module),
        "compile_ms": round(llvm["compile_ms"], 1),
        "startup_ms": round(llvm["startup_ms"], 1),
    }
    if verbose:
        print(f"digits: {len(x_train)} train / {len(x_test)} test images, trained {steps} steps "
              f"with JAX in {train_s:.1f} s")
        print(f"test accuracy (minixla, llvm backend): {figures['accuracy']:.4f}")
        print(f"max |logits - JAX logits|: llvm {figures['max_abs_diff_llvm']:.2e}, "
              f"jax backend {figures['max_abs_diff_jax_backend']:.2e}")
        print(f"kernels: {figures['kernels_unfused']} before fusion, {figures['kernels_fused']} after")
        for k in compiled.kernels():
            print(f"  {k['name']:<14} {k['kind']:<8} {' '.join(o for o in k['opcodes'] if o != 'constant')}")
        print(f"each Conv+Bias+ReLU is one kOutput kernel: {figures['conv_bias_relu_fused']}")
        print(f"memory: arena {figures['arena_bytes']} bytes; the program's intermediates, each in its own "
              f"buffer (no fusion, no reuse): {figures['naive_bytes']} bytes; after fusion "
              f"{compiled.buffer_assignment.naive_bytes} bytes of temporaries remain before reuse")
        print(f"compile (cold, one-time start-up excluded): llvm {llvm['compile_ms']:.0f} ms; start-up, paid "
              f"by the first compile of the process: {llvm['startup_ms']:.0f} ms; jax backend (first compile, "
              f"JAX's start-up included) {report['jax']['compile_ms']:.0f} ms")
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    parser.add_argument("--fast", action="store_true", help="train for fewer steps")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 1500, 300 with --fast)")
    args = parser.parse_args(argv)
    steps = args.steps or (300 if args.fast else 1500)
    figures = run(steps)
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
