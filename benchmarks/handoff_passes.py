"""The cost of the hand-off's protection against XLA's whole-program rewrites
(``minixla/backends/jax_xla.py``: ``OP_BARRIERS``): ``python -m benchmarks.handoff_passes``.

For each workload of the suite (``benchmarks/workloads.py``), minixla optimizes the program
once; the optimized module is then compiled by XLA through the hand-off as shipped
(``protected``: an optimization barrier on every op's result) and without the barriers
(``unprotected``: XLA's algebraic simplifier sees the whole program), and the
two executables are timed in interleaved rounds in this one process (a round: one sample of
each, in alternating order), so machine load hits both alike. Prints one JSON line per
workload: XLA compile ms (median of ``--compiles`` fresh compiles each, interleaved), run ms
(median sample), the run-time ratio protected / unprotected with its per-round spread, and
whether XLA's optimized entry computations have the same kernels (opcodes, fusions by kind).
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

import numpy as np


def _sample(exe, args, min_ms):
    n, t0 = 0, time.perf_counter()
    while True:
        exe(*args)
        n += 1
        dt = (time.perf_counter() - t0) * 1e3
        if dt >= min_ms:
            return dt / n


def _kernels(exe):
    """The opcodes of the entry computation XLA compiled, fusions by kind (what runs)."""
    import collections
    import re
    text = exe._compiled.as_text()
    entry = text[text.index("ENTRY"):]
    ops = re.findall(r"= \S+ ([\w-]+)\((.*)", entry)
    kinds = [op + "".join(f":{k}" for k in re.findall(r"kind=(\w+)", rest)) for op, rest in ops]
    return dict(collections.Counter(kinds))


def measure(workload, scale, rounds, compiles, min_ms):
    import minixla
    from minixla.backends import jax_xla
    from benchmarks import workloads as W

    args = workload.make_args(np.random.default_rng(0), scale)
    module = minixla.jit(functools.partial(workload.fn, W.minixla_namespace()), backend="jax") \
        .lower(*args).compile().hlo_module
    variants = {"protected": True, "unprotected": False}
    exes, compile_ms = {}, {name: [] for name in variants}
    try:
        for r in range(compiles):  # (interleaved; a fresh jax.jit each: no cache hit)
            for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                jax_xla.OP_BARRIERS = variants[name]
                exes[name] = jax_xla.JaxExecutable(module)
                compile_ms[name].append(exes[name].compile_ms)
    finally:
        jax_xla.OP_BARRIERS = True
    compile_ms = {name: statistics.median(t) for name, t in compile_ms.items()}
    kernels = {name: _kernels(exe) for name, exe in exes.items()}
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(exes["protected"](*args), exes["unprotected"](*args)))
    for exe in exes.values():
        exe(*args)  # (warm)
    samples = {name: [] for name in exes}
    for r in range(rounds):
        for name in (list(exes) if r % 2 == 0 else list(exes)[::-1]):
            samples[name].append(_sample(exes[name], args, min_ms))
    ratios = [p / x for p, x in zip(samples["protected"], samples["unprotected"])]
    return {"workload": workload.name, "compile_ms": {k: round(v, 1) for k, v in compile_ms.items()},
            "run_ms": {k: round(statistics.median(v), 3) for k, v in samples.items()},
            "run_ratio": round(statistics.median(ratios), 3),
            "run_ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
            "same_results": bool(same),
            "same_xla_kernels": kernels["protected"] == kernels["unprotected"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--compiles", type=int, default=3)
    ap.add_argument("--min-sample-ms", type=float, default=50.0)
    ap.add_argument("--only", default=None, help="comma-separated workload names")
    args = ap.parse_args(argv)
    from benchmarks import workloads as W
    only = set(args.only.split(",")) if args.only else None
    for w in W.workloads(args.scale):
        if only and w.name not in only:
            continue
        print(json.dumps(measure(w, args.scale, args.rounds, args.compiles, args.min_sample_ms)), flush=True)


if __name__ == "__main__":
    main()
