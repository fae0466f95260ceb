"""A small CNN on real handwritten digits, trained with minixla and run with minixla.

scikit-learn ships 1,797 real 8x8 handwritten digit images (no download). We train a CNN for a
few seconds with one ``minixla.jit``-compiled training step (forward, backward through
``minixla.value_and_grad``, Adam written with ``minixla.numpy``; the parameters a pytree), timed
against the same step under ``jax.jit``, then compile the *same model source* for inference with
``minixla.jit`` on both backends (minixla's LLVM code generator and the hand-off to XLA) and
compare with JAX:

    python examples/digits_cnn.py                    # a readable report
    python examples/digits_cnn.py --json             # ... and the figures as JSON on the last line
    python examples/digits_cnn.py --fast             # fewer training steps (used by the test suite)
    python examples/digits_cnn.py --plot loss.png    # ... and the loss curve as an image
    python examples/digits_cnn.py --train-with jax   # train with jax.jit instead (inference still minixla)
    python examples/digits_cnn.py --devices 8        # data-parallel training over 8 devices (below)

``--devices N`` trains data-parallel over a 1-D mesh ``"batch"`` of N devices (on a CPU the
example makes N host devices itself, ``XLA_FLAGS=--xla_force_host_platform_device_count=N``): the
same minixla step, jitted with ``backend="jax"``, ``in_shardings`` that split each batch of images
over the mesh and replicate parameters and moments, ``out_shardings`` replicated; XLA's SPMD
partitioner turns the gradient's sum over the batch into per-device partial sums plus an
all-reduce. It reports the loss curve next to the one-device run's (equal within float rounding).

``arena_bytes`` is the one arena of temporaries after fusion and buffer reuse; ``naive_bytes``
is the sum of all intermediate buffers of the program as lowered (every intermediate HLO value
in its own buffer, as an op-by-op runtime would allocate them).

Model (NHWC): conv3x3(1->16)+bias+ReLU -> conv3x3(16->32)+bias+ReLU -> dense(2048->10) -> softmax.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

if __name__ == "__main__":
    # --devices N on a CPU needs N host devices, which XLA makes only if told before JAX starts
    _n = re.search(r"--devices[= ](\d+)", " ".join(sys.argv[1:]))
    if _n and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={_n.group(1)}").strip()

import jax
import jax.numpy as jnp
import numpy as np

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
    # (imported here: scikit-learn takes ~1 s to import, which a cold-start measurement of
    # inference alone should not pay; see benchmarks/cold_start.py)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # [N, 8, 8, 1], values in [0, 1]
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def loss_fn(params, x, y, np=jnp, lax=jax.lax):
    """Mean cross-entropy of the CNN on images ``x`` f32[N,8,8,1] with labels ``y`` i32[N]
    (written with ``np``/``lax`` only, so ``minixla.value_and_grad`` and ``jax.value_and_grad``
    differentiate the same source)."""
    logits, _ = cnn(params, x, np=np, lax=lax)
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_sum_exp = np.log(np.sum(np.exp(z), axis=1))
    one_hot = (y[:, None] == np.arange(10)[None, :]).astype(np.float32)
    return np.mean(log_sum_exp - np.sum(z * one_hot, axis=1))


def make_step(np=jnp, lax=jax.lax, value_and_grad=jax.value_and_grad, lr=1e-3):
    """One Adam step ``step(params, m, v, t, x, y) -> (params, m, v, loss)`` on pytrees of
    parameters and moments; ``t`` (f32 scalar) counts steps from 1. The same source is the
    minixla step (``np=minixla.numpy, lax=minixla.lax, value_and_grad=minixla.value_and_grad``)
    and the JAX one, so both compile the same program."""
    def step(params, m, v, t, x, y):
        loss, g = value_and_grad(lambda p: loss_fn(p, x, y, np=np, lax=lax))(params)
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        m_hat, v_hat = 1 - 0.9 ** t, 1 - 0.999 ** t
        upd = lambda p, m, v: p - lr * (m / m_hat) / (np.sqrt(v / v_hat) + 1e-8)
        return jax.tree.map(upd, params, m, v), m, v, loss
    return step


def compile_step(train_with, params, m, v, t, x, y, lr=1e-3):
    """The training step compiled for ``train_with`` ("minixla": ``minixla.jit`` on the llvm
    backend; "jax": ``jax.jit``) and its compile time in ms (trace + lower + compile)."""
    t0 = time.perf_counter()
    if train_with == "minixla":
        step = make_step(mnp, minixla.lax, minixla.value_and_grad, lr)
        compiled = minixla.jit(step).lower(params, m, v, t, x, y).compile()
    else:
        compiled = jax.jit(make_step(lr=lr)).lower(params, m, v, t, x, y).compile()
    return compiled, (time.perf_counter() - t0) * 1e3


def compile_data_parallel_step(n_devices, params, m, v, t, x, y, lr=1e-3):
    """The minixla training step over a 1-D mesh ``"batch"`` of ``n_devices`` devices: images
    and labels split along the batch (``batch`` must be a multiple of ``n_devices``), parameters,
    moments and step count replicated, every result replicated; run by XLA (``backend="jax"``),
    whose partitioner all-reduces the gradients. Returns (the jitted step, compiled for these
    shapes, and its compile time in ms)."""
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((n_devices,), ("batch",))  # (a ValueError when there are fewer devices)
    batch, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    step = minixla.jit(make_step(mnp, minixla.lax, minixla.value_and_grad, lr), backend="jax",
                       in_shardings=(replicated, replicated, replicated, replicated, batch, batch),
                       out_shardings=replicated)
    t0 = time.perf_counter()
    step(params, m, v, t, x, y)  # (compiles; the cached executable serves fit's calls)
    return step, (time.perf_counter() - t0) * 1e3


def run_data_parallel(n_devices, steps, batch=64, verbose=True):
    """``--devices N``: train ``steps`` steps data-parallel over ``n_devices`` devices and the
    same steps on one device (the default minixla step), and compare the loss curves."""
    x_train, x_test, y_train, y_test = load_data()
    params = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(0)))
    zeros = jax.tree.map(np.zeros_like, params)
    idx = np.random.default_rng(0).integers(0, len(x_train), batch)
    step, compile_ms = compile_data_parallel_step(n_devices, params, zeros, zeros, np.float32(1),
                                                  x_train[idx], y_train[idx])
    sharded = fit(x_train, y_train, steps, batch=batch, step=step)
    single = fit(x_train, y_train, steps, batch=batch)
    diffs = np.abs(np.array(sharded["losses"]) - np.array(single["losses"]))
    logits, _ = cnn(sharded["params"], x_test)
    figures = {"devices": n_devices, "device_kind": jax.devices()[0].device_kind, "steps": steps,
               "batch": batch, "max_abs_loss_diff": float(diffs.max()),
               "max_rel_loss_diff": float((diffs / np.abs(single["losses"])).max()),
               "final_loss": float(np.mean(sharded["losses"][-min(50, steps):])),
               "accuracy": float(np.mean(np.argmax(np.asarray(logits), axis=1) == y_test)),
               "compile_ms": round(compile_ms, 1), "train_s": round(sharded["train_s"], 2),
               "train_s_one_device": round(single["train_s"], 2)}
    if verbose:
        print(f"data-parallel training over {n_devices} devices ({figures['device_kind']}), batch {batch} "
              f"= {batch // n_devices} images per device, {steps} steps: {sharded['train_s']:.1f} s "
              f"(one device, llvm backend: {single['train_s']:.1f} s)")
        print("loss curve (batch loss): data parallel | one device")
        for i in sorted({0, *range(0, steps, max(1, steps // 10)), steps - 1}):
            print(f"  step {i + 1:5d}  {sharded['losses'][i]:.6f} | {single['losses'][i]:.6f}")
        print(f"max |loss difference| over the curve: {figures['max_abs_loss_diff']:.2e} "
              f"(relative {figures['max_rel_loss_diff']:.2e}); test accuracy {figures['accuracy']:.4f}")
    return figures


def fit(x_train, y_train, steps, seed=0, batch=64, lr=1e-3, train_with="minixla", step=None):
    """Train the CNN with Adam for ``steps`` steps of ``batch`` random training images, every
    step one call of the compiled step (``step``: one already compiled for these shapes and
    ``train_with``; compiled here if None). Returns a dict: ``params`` (NumPy arrays), ``losses``
    (the batch loss of every step), ``step`` (the compiled step), ``compile_ms``, ``train_s``."""
    params = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(seed)))
    m = jax.tree.map(np.zeros_like, params)
    v = jax.tree.map(np.zeros_like, params)
    rng = np.random.default_rng(seed)
    batches = [rng.integers(0, len(x_train), batch) for _ in range(steps)]
    compile_ms = 0.0
    if step is None:
        step, compile_ms = compile_step(train_with, params, m, v, np.float32(1), x_train[batches[0]],
                                        y_train[batches[0]], lr)
    losses = []
    t0 = time.perf_counter()
    for t, idx in enumerate(batches, start=1):
        params, m, v, loss = step(params, m, v, np.float32(t), x_train[idx], y_train[idx])
        # Wait for each step: with 8 host devices on a 2-core machine, queueing 1,500 sharded
        # steps asynchronously starves one device thread past XLA:CPU's 40 s collective
        # rendezvous timeout (an abort, found by a fresh user; plain jax.jit does the same).
        losses.append(float(loss))
    return dict(params=jax.tree.map(np.asarray, params), losses=losses, step=step,
                compile_ms=compile_ms, train_s=time.perf_counter() - t0)


def train(x_train, y_train, steps, seed=0, batch=64, lr=1e-3, train_with="jax"):
    """The trained parameters (NumPy arrays) of ``fit`` (with JAX by default, as tutorial 14)."""
    return fit(x_train, y_train, steps, seed, batch, lr, train_with)["params"]


def time_steps(x_train, y_train, batch=64, seed=0, repeat=20, warmup=3):
    """Median ms per training step of the minixla and the ``jax.jit`` step, measured in turns
    in the same process on the same inputs (the initial parameters, one batch) after
    ``warmup`` calls, and each one's compile time (ms)."""
    params = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(seed)))
    zeros = jax.tree.map(np.zeros_like, params)
    idx = np.random.default_rng(seed).integers(0, len(x_train), batch)
    args = (params, zeros, zeros, np.float32(1), x_train[idx], y_train[idx])
    mx_step, mx_compile = compile_step("minixla", *args)
    jx_step, jx_compile = compile_step("jax", *args)
    jx_args = jax.device_put(args)
    runs = {"minixla": (mx_step, args), "jax": (lambda *a: jax.block_until_ready(jx_step(*a)), jx_args)}
    times = {name: [] for name in runs}
    for i in range(warmup + repeat):
        for name, (fn, a) in runs.items():
            t0 = time.perf_counter()
            fn(*a)
            if i >= warmup:
                times[name].append((time.perf_counter() - t0) * 1e3)
    return {"ms_minixla": float(np.median(times["minixla"])), "ms_jax": float(np.median(times["jax"])),
            "compile_ms_minixla": mx_compile, "compile_ms_jax": jx_compile, "step": mx_step, "args": args}


def max_abs_grad_diff(x, y, seed=0):
    """max |grad - jax.grad| of the loss at the initial parameters, over every parameter:
    ``minixla.jit(minixla.grad(loss))`` against ``jax.grad`` run eagerly, op by op (the reference)."""
    params = jax.tree.map(np.asarray, init_params(jax.random.PRNGKey(seed)))
    g = minixla.jit(minixla.grad(lambda p, x, y: loss_fn(p, x, y, np=mnp, lax=minixla.lax)))(params, x, y)
    with jax.disable_jit():
        ref = jax.grad(loss_fn)(params, x, y)
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref)))


def save_plot(losses, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=0.6, alpha=0.5, label="batch loss")
    w = min(50, len(losses))
    ax.plot(np.arange(w, len(losses) + 1), np.convolve(losses, np.ones(w) / w, "valid"), label=f"mean of {w}")
    ax.set(xlabel="step", ylabel="cross-entropy", yscale="log", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def intermediate_bytes(module) -> int:
    """Bytes of every intermediate value of ``module``'s entry computation, each in its own
    buffer: what running the program op by op (no fusion, no reuse) would allocate besides its
    inputs and outputs. Reshapes are bitcasts and own no bytes."""
    root = module.entry.root
    outputs = set(root.operands) if root.opcode == "tuple" else {root}
    return sum(i.shape.nbytes for i in module.entry.instructions
               if i.opcode not in ("parameter", "constant", "tuple", "reshape") and i not in outputs)


def run(steps=1500, verbose=True, train_with="minixla", batch=64, plot=None):
    x_train, x_test, y_train, y_test = load_data()
    minixla_cnn = lambda p, x: cnn(p, x, np=mnp, lax=minixla.lax)
    # Inference is compiled first (for the shapes of the parameters; it runs after training), so
    # that its first compile is the process's first and measures the one-time start-up.
    shapes = init_params(jax.random.PRNGKey(0))
    report = {}
    for backend in ("llvm", "jax"):
        t0 = time.perf_counter()
        compiled = minixla.jit(minixla_cnn, backend=backend).lower(shapes, x_test).compile()
        first_ms = (time.perf_counter() - t0) * 1e3
        compile_ms = first_ms
        if backend == "llvm":
            # The first compile of a process also pays one-time start-up: LLVM's initialization,
            # the compile worker's start (in-process meanwhile), the precompiled GEMM routine
            # and micro-kernels, Python's first imports. The compile time reported is a cold
            # compile without it: the same program again, with the kernel cache emptied.
            kernel_cache.clear()
            t0 = time.perf_counter()
            compiled = minixla.jit(minixla_cnn, backend=backend).lower(shapes, x_test).compile()
            compile_ms = (time.perf_counter() - t0) * 1e3
        report[backend] = dict(compiled=compiled, compile_ms=compile_ms, startup_ms=first_ms - compile_ms)

    # The training step's compile times are measured cold too: minixla's kernel cache emptied.
    grad_diff = max_abs_grad_diff(x_train[:batch], y_train[:batch])
    kernel_cache.clear()
    timing = time_steps(x_train, y_train, batch)
    training = fit(x_train, y_train, steps, batch=batch, train_with=train_with,
                   step=timing["step"] if train_with == "minixla" else None)
    params, losses = training["params"], training["losses"]
    if plot:
        save_plot(losses, plot, f"digits CNN, Adam, batch {batch}, trained with {train_with}")

    ref_logits, _ = jax.jit(cnn)(params, x_test)
    ref_logits = np.asarray(ref_logits)
    for r in report.values():
        r["logits"], r["probs"] = r["compiled"](params, x_test)

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
        "train_backend": train_with,
        "train_ms_per_step_minixla": round(timing["ms_minixla"], 2),
        "train_ms_per_step_jax": round(timing["ms_jax"], 2),
        "final_loss": float(np.mean(losses[-min(50, len(losses)):])),
        "max_abs_grad_diff": grad_diff,
    }
    if verbose:
        print(f"digits: {len(x_train)} train / {len(x_test)} test images, trained {steps} steps of "
              f"{batch} images with {train_with} in {training['train_s']:.1f} s")
        marks = sorted({0, *range(0, steps, max(1, steps // 10)), steps - 1})
        print("loss curve (batch loss, mean of the 10 steps up to the step):")
        for i in marks:
            print(f"  step {i + 1:5d}  {np.mean(losses[max(0, i - 9):i + 1]):.4f}")
        print(f"training step (forward, backward, Adam; batch {batch}), median of the same step in "
              f"turns, after warm-up: minixla {timing['ms_minixla']:.1f} ms, jax.jit {timing['ms_jax']:.1f} ms; "
              f"compile: minixla {timing['compile_ms_minixla']:.0f} ms, jax.jit {timing['compile_ms_jax']:.0f} ms")
        print(f"max |grad - jax.grad| at the initial parameters: {grad_diff:.2e}")
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
    parser.add_argument("--batch", type=int, default=64, help="images per training step (default 64)")
    parser.add_argument("--train-with", choices=("minixla", "jax"), default="minixla",
                        help="which compiler runs the training step (default minixla)")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curve as an image (matplotlib)")
    parser.add_argument("--devices", type=int, default=None, metavar="N",
                        help="train data-parallel over N devices and compare with one device")
    args = parser.parse_args(argv)
    steps = args.steps or (300 if args.fast else 1500)
    if args.devices:
        figures = run_data_parallel(args.devices, steps, batch=args.batch)
    else:
        figures = run(steps, train_with=args.train_with, batch=args.batch, plot=args.plot)
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
