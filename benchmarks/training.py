"""Training-step benchmarks: ``minixla.jit`` of a whole step (forward, backward, update) against
``jax.jit`` of the same JAX program, measured in the same run.

    python -m benchmarks.training                        # the four workloads, table + JSON
    python -m benchmarks.training --only mlp_train --rounds 11
    python -m benchmarks.training --profile cnn_train    # minixla's per-kernel times
    python -m benchmarks.training --scale 0.05 --rounds 1 --min-sample-ms 0   # a smoke run

Workloads (``training_workloads``), each written once against a namespace (``ns.np``,
``ns.lax``, ``ns.value_and_grad``, ``ns.grad``, ``ns.vmap``) so both frameworks compile the
same program:

- ``mlp_train``: relu MLP 256 -> 1024 -> 1024 -> 256, batch 256, mean squared error,
  ``value_and_grad`` + an SGD update; returns the new parameters and the loss.
- ``cnn_train``: the digits CNN of ``examples/digits_cnn.py`` (conv3x3 1->16, conv3x3 16->32,
  dense 2048->10, softmax cross-entropy) with its Adam update, batch 256.
- ``convnet_train``: two conv3x3 64->64 + bias + relu layers on 32x32x64 NHWC inputs (batch 8),
  global average pool, dense 64->10, cross-entropy, SGD.
- ``per_example_grads``: ``vmap(grad(loss), in_axes=(None, 0, 0))`` of a relu MLP 64 -> 256 ->
  10 over a batch of 128 (one gradient per example, the differential-privacy pattern).

Method. After compiling and warming both up (``warmup`` calls each), ``rounds`` rounds are
taken; in each, minixla and jax each run one *batch* of calls lasting at least
``min_sample_ms`` (the order alternates between rounds), preceded by ``settle_ms`` of untimed
calls so the other framework's spinning thread pool has stopped. The round's ratio is
minixla's ms per call over jax's, both measured within the same second, so background load on a
shared host hits both alike; the report gives the median time of each, the median ratio and
the ratios' spread (min..max over the rounds). Compile time is ``jit(step).lower(*args)
.compile()`` of a fresh function (minixla's kernel cache cleared: cold), the median of
``compile_repeat``; the first of them is reported too (``first_compile_ms``: in a process's
first workload it includes minixla's one-time GEMM library set-up, loaded from its disk cache,
``library_cache.py``, or compiled). ``memory_analysis()`` of both compiled steps is printed side by side, and
every output of the minixla step is checked against jax's.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np

if __package__ in (None, ""):  # ``python benchmarks/training.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

F32 = np.float32
DN = ("NHWC", "HWIO", "NHWC")


@dataclass
class TrainWorkload:
    name: str
    make_step: Callable          # make_step(ns) -> step(*args)
    make_args: Callable          # make_args(rng) -> tuple of pytrees of numpy arrays
    flops: Callable              # flops(args) -> forward+backward flops of the dots/convs
    description: str = ""


def jax_namespace():
    import jax
    return SimpleNamespace(np=jax.numpy, lax=jax.lax, value_and_grad=jax.value_and_grad, grad=jax.grad,
                           vmap=jax.vmap, tree_map=jax.tree.map)


def minixla_namespace():
    import jax

    import minixla
    import minixla.numpy as mnp
    return SimpleNamespace(np=mnp, lax=minixla.lax, value_and_grad=minixla.value_and_grad, grad=minixla.grad,
                           vmap=minixla.vmap, tree_map=jax.tree.map)


# ---------------------------------------------------------------------------------------
# The programs.

def _mlp(ns, params, x):
    h = x
    n = len(params) // 2
    for i in range(n):
        h = ns.np.matmul(h, params[f"w{i}"]) + params[f"b{i}"]
        if i < n - 1:
            h = ns.np.maximum(h, F32(0))
    return h


def _xent(ns, logits, y):
    xnp = ns.np
    z = logits - xnp.max(logits, axis=1, keepdims=True)
    lse = xnp.log(xnp.sum(xnp.exp(z), axis=1))
    one_hot = (y[:, None] == xnp.arange(logits.shape[1])[None, :]).astype(F32)
    return xnp.mean(lse - xnp.sum(z * one_hot, axis=1))


def _sgd(ns, params, grads, lr=F32(1e-2)):
    return ns.tree_map(lambda p, g: p - lr * g, params, grads)


def mlp_train_step(ns):
    def loss(params, x, y):
        d = _mlp(ns, params, x) - y
        return ns.np.mean(d * d)

    def step(params, x, y):
        value, g = ns.value_and_grad(loss)(params, x, y)
        return _sgd(ns, params, g), value
    return step


def cnn_forward(ns, params, x):
    h = ns.lax.conv_general_dilated(x, params["w1"], (1, 1), "SAME", dimension_numbers=DN)
    h = ns.np.maximum(h + params["b1"], F32(0))
    h = ns.lax.conv_general_dilated(h, params["w2"], (1, 1), "SAME", dimension_numbers=DN)
    h = ns.np.maximum(h + params["b2"], F32(0))
    h = ns.np.reshape(h, (h.shape[0], -1))
    return h @ params["w3"] + params["b3"]


def cnn_train_step(ns, lr=1e-3):
    """The digits example's step (``examples/digits_cnn.make_step``): Adam on the CNN."""
    def step(params, m, v, t, x, y):
        loss, g = ns.value_and_grad(lambda p: _xent(ns, cnn_forward(ns, p, x), y))(params)
        m = ns.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = ns.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        m_hat, v_hat = 1 - 0.9 ** t, 1 - 0.999 ** t
        upd = lambda p, m, v: p - lr * (m / m_hat) / (ns.np.sqrt(v / v_hat) + 1e-8)
        return ns.tree_map(upd, params, m, v), m, v, loss
    return step


def convnet_forward(ns, params, x):
    h = x
    for i in (1, 2):
        h = ns.lax.conv_general_dilated(h, params[f"w{i}"], (1, 1), "SAME", dimension_numbers=DN)
        h = ns.np.maximum(h + params[f"b{i}"], F32(0))
    h = ns.np.mean(h, axis=(1, 2))
    return h @ params["w3"] + params["b3"]


def convnet_train_step(ns):
    def step(params, x, y):
        value, g = ns.value_and_grad(lambda p: _xent(ns, convnet_forward(ns, p, x), y))(params)
        return _sgd(ns, params, g), value
    return step


def per_example_grads(ns):
    def loss(params, x, y):
        logits = _mlp(ns, params, x[None])
        return _xent(ns, logits, y[None])

    def step(params, x, y):
        return ns.vmap(ns.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    return step


# ---------------------------------------------------------------------------------------
# Arguments and work.

def _normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def _shrink(n, scale):
    return max(1, int(round(n * scale)))


def _mlp_params(rng, sizes):
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = _normal(rng, a, b, scale=(2.0 / a) ** 0.5)
        p[f"b{i}"] = np.zeros(b, F32)
    return p


def _mlp_flops(args, factor=3):
    """2 flops per multiply-add, forward dots and (``factor`` - 1) as many for the backward."""
    params, x = args[0], args[1]
    n = x.shape[0]
    return factor * sum(2 * n * w.shape[0] * w.shape[1] for k, w in params.items() if k.startswith("w"))


def mlp_args(scale):
    b, d, h = _shrink(256, scale), _shrink(256, scale ** 0.5), _shrink(1024, scale ** 0.5)

    def make(rng):
        params = _mlp_params(rng, (d, h, h, d))
        return params, _normal(rng, b, d), _normal(rng, b, d)
    return make


def cnn_args(scale):
    n = _shrink(256, scale)

    def make(rng):
        params = {"w1": _normal(rng, 3, 3, 1, 16, scale=(2 / 9) ** 0.5), "b1": np.zeros(16, F32),
                  "w2": _normal(rng, 3, 3, 16, 32, scale=(2 / 144) ** 0.5), "b2": np.zeros(32, F32),
                  "w3": _normal(rng, 2048, 10, scale=0.5 * (2 / 2048) ** 0.5), "b3": np.zeros(10, F32)}
        zeros = {k: np.zeros_like(v) for k, v in params.items()}
        x = rng.uniform(0, 1, (n, 8, 8, 1)).astype(F32)
        y = rng.integers(0, 10, n).astype(np.int32)
        return params, zeros, dict(zeros), F32(1), x, y
    return make


def _conv_flops(x_shape, w_shape):
    n, h, w, _ = x_shape
    return 2 * n * h * w * int(np.prod(w_shape))


def cnn_flops(args):
    params, x = args[0], args[4]
    n = x.shape[0]
    fwd = _conv_flops((n, 8, 8, 1), params["w1"].shape) + _conv_flops((n, 8, 8, 16), params["w2"].shape) \
        + 2 * n * 2048 * 10
    return 3 * fwd - _conv_flops((n, 8, 8, 1), params["w1"].shape)  # no input gradient of conv 1


def convnet_args(scale):
    n, hw, c = _shrink(8, scale), _shrink(32, scale ** 0.5), _shrink(64, scale ** 0.5)

    def make(rng):
        params = {"w1": _normal(rng, 3, 3, c, c, scale=(2 / (9 * c)) ** 0.5), "b1": np.zeros(c, F32),
                  "w2": _normal(rng, 3, 3, c, c, scale=(2 / (9 * c)) ** 0.5), "b2": np.zeros(c, F32),
                  "w3": _normal(rng, c, 10, scale=c ** -0.5), "b3": np.zeros(10, F32)}
        return params, _normal(rng, n, hw, hw, c), rng.integers(0, 10, n).astype(np.int32)
    return make


def convnet_flops(args):
    params, x = args[0], args[1]
    one = _conv_flops(x.shape, params["w1"].shape)
    return 3 * 2 * one - one  # two convs, forward + weight grads + one input gradient


def per_example_args(scale):
    b, d, h = _shrink(128, scale), _shrink(64, scale ** 0.5), _shrink(256, scale ** 0.5)

    def make(rng):
        params = _mlp_params(rng, (d, h, 10))
        return params, _normal(rng, b, d), rng.integers(0, 10, b).astype(np.int32)
    return make


def training_workloads(scale: float = 1.0) -> list[TrainWorkload]:
    return [
        TrainWorkload("mlp_train", mlp_train_step, mlp_args(scale), _mlp_flops,
                      "MLP 256x1024x1024x256 relu, batch 256, MSE, value_and_grad + SGD"),
        TrainWorkload("cnn_train", cnn_train_step, cnn_args(scale), cnn_flops,
                      "digits CNN (conv 1->16, conv 16->32, dense 2048->10), batch 256, Adam"),
        TrainWorkload("convnet_train", convnet_train_step, convnet_args(scale), convnet_flops,
                      "2x conv3x3 64->64 + relu on (8,32,32,64) NHWC, pool, dense, SGD"),
        TrainWorkload("per_example_grads", per_example_grads, per_example_args(scale),
                      lambda a: _mlp_flops(a, 2),
                      "vmap(grad) of an MLP 64x256x10 over 128 examples"),
    ]


# ---------------------------------------------------------------------------------------
# Measuring.

def _calibrate(call, min_sample_s, settle_s):
    t0 = time.perf_counter()
    call()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(min_sample_s / one)), int(settle_s / one)


def _batch(call, number, settle):
    for _ in range(settle):
        call()
    t = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - t) / number


def _memory(ma) -> dict:
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")
    return {k: int(getattr(ma, k)) for k in keys if hasattr(ma, k)}


def _norm_diff(a, b) -> float:
    """max |a - b| relative to max |b| (elementwise relative errors blow up near zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not b.size:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def compile_pair(workload, args):
    """Fresh ``minixla.jit`` (cold kernel cache) and ``jax.jit`` compiles of the step:
    ``(minixla_compiled, jax_compiled, minixla_ms, jax_ms)``."""
    import jax

    import minixla
    from minixla.backends.llvm import kernel_cache

    kernel_cache.clear()
    t = time.perf_counter()
    mc = minixla.jit(workload.make_step(minixla_namespace())).lower(*args).compile()
    mx_ms = (time.perf_counter() - t) * 1e3
    jargs = jax.device_put(args)
    t = time.perf_counter()
    jc = jax.jit(workload.make_step(jax_namespace())).lower(*jargs).compile()
    jx_ms = (time.perf_counter() - t) * 1e3
    return mc, jc, mx_ms, jx_ms


def run_training_workload(workload, scale=1.0, rounds=9, min_sample_ms=200.0, settle_ms=100.0,
                          warmup=3, compile_repeat=3, seed=0) -> dict:
    """Compile, check and time one training workload (see the module docstring)."""
    import jax

    from minixla.backends.llvm import gemm, library_cache

    args = workload.make_args(np.random.default_rng(seed))
    comp_mx, comp_jx, mc, jc = [], [], None, None
    lib_ms, lib_stats = gemm.library_compile_ms(), dict(library_cache.stats)
    for _ in range(max(1, compile_repeat)):
        mc, jc, a, b = compile_pair(workload, args)
        comp_mx.append(a)
        comp_jx.append(b)
    jargs = jax.device_put(args)
    calls = {"minixla": lambda: mc(*args), "jax": lambda: jax.block_until_ready(jc(*jargs))}
    out_mx, out_jx = jax.tree.leaves(mc(*args)), jax.tree.leaves(jc(*jargs))
    diff = max((_norm_diff(a, b) for a, b in zip(out_mx, out_jx)), default=0.0)
    for call in calls.values():
        for _ in range(warmup):
            call()
    plan = {n: _calibrate(c, min_sample_ms / 1e3, settle_ms / 1e3) for n, c in calls.items()}
    samples = {n: [] for n in calls}
    ratios = []
    for r in range(rounds):
        order = ("minixla", "jax") if r % 2 == 0 else ("jax", "minixla")
        for n in order:
            samples[n].append(_batch(calls[n], *plan[n]) * 1e3)
        ratios.append(samples["minixla"][-1] / samples["jax"][-1])
    flops = workload.flops(args)
    time_ms = {n: statistics.median(s) for n, s in samples.items()}
    return {"name": workload.name, "description": workload.description,
            "time_ms": time_ms, "samples_ms": samples, "ratios": ratios,
            "ratio_median": statistics.median(ratios), "ratio_spread": [min(ratios), max(ratios)],
            "gflops": {n: flops / (t / 1e3) / 1e9 for n, t in time_ms.items()},
            "compile_ms": {"minixla": statistics.median(comp_mx), "jax": statistics.median(comp_jx)},
            "compile_ratio": statistics.median(comp_mx) / statistics.median(comp_jx),
            # (the first compile of each in this run: for a process's first workload it pays the
            # one-time work, e.g. minixla's GEMM library, loaded from its disk cache or compiled)
            "first_compile_ms": {"minixla": comp_mx[0], "jax": comp_jx[0]},
            "gemm_library": {"compile_ms": gemm.library_compile_ms() - lib_ms,
                             **{k: library_cache.stats[k] - lib_stats[k] for k in lib_stats}},
            "memory": {"minixla": _memory(mc.memory_analysis()), "jax": _memory(jc.memory_analysis())},
            "kernels": len(mc.kernels()), "max_norm_diff_vs_jax": diff}


def profile(workload, scale=1.0, seed=0, repeat=5) -> list[dict]:
    """minixla's per-kernel times of the step (``executable.profile``), slowest first."""
    import minixla
    args = workload.make_args(np.random.default_rng(seed))
    mc = minixla.jit(workload.make_step(minixla_namespace())).lower(*args).compile()
    import jax
    prof = mc.executable.profile(*mc._check_args(jax.tree.leaves(args)), repeat=repeat)
    return sorted(prof, key=lambda d: -d["ms"])


def format_table(results) -> str:
    lines = ["| workload | minixla ms | jax.jit ms | minixla / jax (median, min..max) | GFLOP/s minixla / jax "
             "| compile ms minixla / jax | temp bytes minixla / XLA | kernels | max diff |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        t, g, c, m = r["time_ms"], r["gflops"], r["compile_ms"], r["memory"]
        lo, hi = r["ratio_spread"]
        lines.append(f"| {r['name']} | {t['minixla']:.2f} | {t['jax']:.2f} | {r['ratio_median']:.2f} ({lo:.2f}..{hi:.2f}) "
                     f"| {g['minixla']:.0f} / {g['jax']:.0f} | {c['minixla']:.0f} / {c['jax']:.0f} "
                     f"| {m['minixla'].get('temp_size_in_bytes', 0):,} / {m['jax'].get('temp_size_in_bytes', 0):,} "
                     f"| {r['kernels']} | {r['max_norm_diff_vs_jax']:.1e} |")
    return "\n".join(lines)


def format_memory(results) -> str:
    lines = ["| workload | | argument | output | alias | temp |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for fw, label in (("minixla", "minixla"), ("jax", "XLA")):
            m = r["memory"][fw]
            lines.append(f"| {r['name']} | {label} | {m.get('argument_size_in_bytes', 0):,} | "
                         f"{m.get('output_size_in_bytes', 0):,} | {m.get('alias_size_in_bytes', 0):,} | "
                         f"{m.get('temp_size_in_bytes', 0):,} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.training", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", help="workload names (default: all)")
    p.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    p.add_argument("--min-sample-ms", type=float, default=200.0, help="minimum duration of one batch of calls")
    p.add_argument("--settle-ms", type=float, default=100.0, help="untimed calls before each batch")
    p.add_argument("--compile-repeat", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="shrink the workloads (smoke runs)")
    p.add_argument("--profile", nargs="*", help="print minixla's per-kernel times of these workloads and exit")
    p.add_argument("--out", default="results", help="directory for training.json")
    a = p.parse_args(argv)
    workloads = training_workloads(a.scale)
    by_name = {w.name: w for w in workloads}
    if a.profile is not None:
        for name in a.profile or list(by_name):
            prof = profile(by_name[name], a.scale)
            total = sum(d["ms"] for d in prof)
            print(f"\n{name}: {len(prof)} kernels, {total:.2f} ms in all")
            for d in prof:
                print(f"  {d['ms']:8.3f} ms  {d['kind']:8s} {d['strategy']:10s} {d['name']}: "
                      f"{' '.join(d['opcodes'][:8])}{' ...' if len(d['opcodes']) > 8 else ''}")
        return []
    if a.only:
        unknown = set(a.only) - set(by_name)
        if unknown:
            p.error(f"unknown workload(s) {sorted(unknown)}; choose from {sorted(by_name)}")
        workloads = [by_name[n] for n in a.only]
    results = []
    for w in workloads:
        print(f"running {w.name} ...", flush=True)
        results.append(run_training_workload(w, a.scale, a.rounds, a.min_sample_ms, a.settle_ms,
                                             compile_repeat=a.compile_repeat))
    print()
    print(format_table(results))
    for r in results:
        f, lib = r["first_compile_ms"], r["gemm_library"]
        if lib["hits"] or lib["compile_ms"]:
            print(f"\n{r['name']}: first compile of this process {f['minixla']:.0f} ms (jax {f['jax']:.0f} ms); "
                  f"GEMM library routines loaded from the disk cache: {lib['hits']}, compiling the others took"
                  f" {lib['compile_ms']:.0f} ms")
    print()
    print("memory_analysis() of the compiled step, bytes (minixla's next to XLA's):\n")
    print(format_memory(results))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "training.json").write_text(json.dumps(results, indent=1))
    print(f"\nwrote {out / 'training.json'}")
    return results


if __name__ == "__main__":
    main()
