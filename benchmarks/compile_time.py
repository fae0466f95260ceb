"""Compile time versus program size: is every stage linear in the number of ops?

Two programs, each compiled at several sizes with every stage timed separately:

* ``chain``: ``n`` elementwise ops (``x = x * b - 0.5``, ``maximum``, ``+ a``, ... over two
  f32[64] inputs). They fuse into a few big kernels (fusion's cost: big clusters, up to the
  size cap).
* ``gd``: ``n`` steps of gradient descent on a least-squares fit, unrolled in Python inside the
  jitted function: ``w = w - 0.1 * (2/N * (X.T @ (X @ w + b - y)))`` with X f32[64,8], w
  f32[8,1], b f32[], y f32[64,1]. Two dots and a few elementwise ops per step: **many**
  kernels (2 per step), so fusion, buffer assignment and codegen see thousands of small
  decisions (fusion used to run a graph search per candidate: 12 s at 200 steps).

Stages:

    trace     Python function -> jaxpr
    lower     jaxpr -> HLO
    <pass>    each pass of the optimization pipeline, all its runs (compiled.pass_log)
    buffers   buffer assignment (live ranges, in-place reuse, heap simulation), run again alone
    passes    the whole pipeline + buffer assignment (what Compiled.passes_ms reports)
    codegen   the backend (LLVM IR emission, -O3, machine code, the call plan), kernel cache cleared

For each stage the ratio between the largest and the smallest size is printed (8x the ops by
default); linear stages give about 8x, and anything far above ~10x is a super-linear hot spot.

    python -m benchmarks.compile_time [--program chain gd] [--sizes 500 1000 4000]
                                      [--steps 25 50 100 200] [--repeat 3] [--backend llvm|jax]
                                      [--profile N]
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import kernel_cache
from minixla.hlo.lowering import lower_jaxpr
from minixla.passes.buffer_assignment import assign_buffers


def chain(n: int):
    """A function of two f32[64] arrays made of ``n`` elementwise ops (no two alike)."""
    def f(a, b):
        x = a
        for i in range(n):
            k = i % 4
            if k == 0:
                x = x * b
            elif k == 1:
                x = x - 0.5
            elif k == 2:
                x = mnp.maximum(x, a)
            else:
                x = x + float(i)
        return x
    f.__name__ = f"chain_{n}"
    return f


def gradient_descent(steps: int):
    """``steps`` unrolled gradient-descent steps of a least-squares fit (``X @ w + b ~ y``)."""
    def f(X, w, b, y):
        n = X.shape[0]
        for _ in range(steps):
            w = w - 0.1 * (2.0 / n * (X.T @ (X @ w + b - y)))
        return w
    f.__name__ = f"gd_{steps}"
    return f


def gd_args():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 8), np.float32), np.zeros((8, 1), np.float32), np.float32(0.5),
            rng.standard_normal((64, 1), np.float32))


def chain_args():
    return np.linspace(-1, 1, 64, dtype=np.float32), np.full(64, 0.999, np.float32)


PROGRAMS = {"chain": (chain, chain_args), "gd": (gradient_descent, gd_args)}


def measure(n: int, backend: str = "llvm", program: str = "chain") -> dict:
    """Milliseconds per stage for ``program`` of size ``n`` (ops of the chain, steps of gd)."""
    make, make_args = PROGRAMS[program]
    args = make_args()
    jitted = minixla.jit(make(n), backend=backend)
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    trace_and_lower = (time.perf_counter() - t0) * 1e3
    gc.disable()  # as jit's stages do (see minixla.jit._gc_paused)
    t0 = time.perf_counter()
    lower_jaxpr(lowered.jaxpr, name="again")
    lower = (time.perf_counter() - t0) * 1e3
    gc.enable()
    kernel_cache.clear()  # a cold compile: the sizes share kernels (gd's steps are all alike)
    compiled = lowered.compile()
    out = compiled(*args)
    assert out.shape == np.shape(args[1] if program == "gd" else args[0])
    per_pass: dict = {}
    for e in compiled.pass_log:
        if not e.name.startswith("optimize/fixed-point"):  # its inner passes are listed too
            short = e.name.split("/")[-1]
            per_pass[short] = per_pass.get(short, 0.0) + e.ms
    gc.disable()
    t0 = time.perf_counter()
    assign_buffers(compiled.hlo_module, donated=lowered.donated)
    buffers = (time.perf_counter() - t0) * 1e3
    gc.enable()
    return {"n": n, "trace": trace_and_lower - lower, "lower": lower, **per_pass, "buffers": buffers,
            "passes": compiled.passes_ms, "codegen": compiled.compile_ms - compiled.passes_ms,
            "kernels": len(compiled.kernels()), "instructions": len(lowered.hlo_module.entry.instructions),
            "per_pass": per_pass}


STAGES = ("trace", "lower", "passes", "codegen")


def best_of(repeat: int, n: int, backend: str, program: str) -> dict:
    """``measure`` ``repeat`` times; each stage's minimum (a shared machine only adds time)."""
    runs = [measure(n, backend, program) for _ in range(max(1, repeat))]
    best = {k: (min(r[k] for r in runs) if isinstance(v, float) else v) for k, v in runs[0].items()}
    best["per_pass"] = {k: best[k] for k in runs[0]["per_pass"]}
    return best


def report(program: str, rows) -> None:
    """One line per size: every stage's ms; then the ratio between the largest and smallest size."""
    stages = ["trace", "lower", *rows[-1]["per_pass"], "buffers", "passes", "codegen"]
    unit = "steps" if program == "gd" else "ops"
    print(f"{program}: ms per stage (passes = the whole pipeline + buffers)")
    print(f"{unit:>6} {'HLO':>6} " + " ".join(f"{s[:12]:>12}" for s in stages) + f" {'total':>9} {'kernels':>8}")
    for r in rows:
        total = sum(r[s] for s in STAGES)
        print(f"{r['n']:>6} {r['instructions']:>6} " + " ".join(f"{r.get(s, 0.0):>12.1f}" for s in stages)
              + f" {total:>9.1f} {r['kernels']:>8}")
    lo, hi = rows[0], rows[-1]
    if hi["n"] > lo["n"]:
        tot = sum(hi[s] for s in STAGES) / sum(lo[s] for s in STAGES)
        print(f"{unit} {lo['n']} -> {hi['n']} ({hi['n'] / lo['n']:g}x): " + ", ".join(
            f"{s} {hi.get(s, 0.0) / max(lo.get(s, 0.0), 1e-9):.1f}x" for s in stages) + f", total {tot:.1f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", nargs="+", default=["chain", "gd"], choices=sorted(PROGRAMS))
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 4000], help="chain lengths (ops)")
    ap.add_argument("--steps", type=int, nargs="+", default=[25, 50, 100, 200], help="gd steps")
    ap.add_argument("--repeat", type=int, default=3, help="compile each size N times, keep each stage's best")
    ap.add_argument("--backend", default="llvm", choices=minixla.jit.__globals__["BACKENDS"])
    ap.add_argument("--profile", type=int, default=0,
                    help="profile the compile of size N (of the first --program)")
    args = ap.parse_args(argv)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        measure(args.profile, args.backend, args.program[0])
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        return
    for program in args.program:
        measure(5, args.backend, program)  # warm up imports and the LLVM target
        sizes = sorted(args.steps if program == "gd" else args.sizes)
        report(program, [best_of(args.repeat, n, args.backend, program) for n in sizes])


if __name__ == "__main__":
    main()
