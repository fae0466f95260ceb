"""Compile time versus program size: is every stage linear in the number of ops?

A chain of ``n`` elementwise ops (``x = x * b - 0.5``, ``maximum``, ``+ a``, ... over two
f32[64] inputs) is traced, lowered, optimized and compiled; each stage is timed separately:

    trace     Python function -> jaxpr
    lower     jaxpr -> HLO
    passes    the optimization pipeline (simplify fixed point, fusion) + buffer assignment
    codegen   the backend (LLVM IR emission, -O3, machine code)

For each stage the ratio between n = 4000 and n = 500 (8x more ops) is printed; linear
stages give about 8x, and anything far above ~10x is a quadratic hot spot.

    python -m benchmarks.compile_time [--sizes 250 1000 4000] [--backend llvm|jax] [--profile N]
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
from minixla.hlo.lowering import lower_jaxpr


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


def measure(n: int, backend: str = "llvm") -> dict:
    """Milliseconds per stage for a chain of ``n`` ops."""
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    b = np.full(64, 0.999, np.float32)
    jitted = minixla.jit(chain(n), backend=backend)
    t0 = time.perf_counter()
    lowered = jitted.lower(a, b)
    trace_and_lower = (time.perf_counter() - t0) * 1e3
    gc.disable()  # as jit's stages do (see minixla.jit._gc_paused)
    t0 = time.perf_counter()
    lower_jaxpr(lowered.jaxpr, name="again")
    lower = (time.perf_counter() - t0) * 1e3
    gc.enable()
    compiled = lowered.compile()
    out = compiled(a, b)
    assert out.shape == (64,)
    per_pass: dict = {}
    for e in compiled.pass_log:
        if not e.name.startswith("optimize/fixed-point"):  # its inner passes are listed too
            short = e.name.split("/")[-1]
            per_pass[short] = per_pass.get(short, 0.0) + e.ms
    return {"n": n, "trace": trace_and_lower - lower, "lower": lower,
            "passes": compiled.passes_ms, "codegen": compiled.compile_ms - compiled.passes_ms,
            "kernels": len(compiled.kernels()), "per_pass": per_pass}


STAGES = ("trace", "lower", "passes", "codegen")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 4000])
    ap.add_argument("--backend", default="llvm", choices=minixla.jit.__globals__["BACKENDS"])
    ap.add_argument("--profile", type=int, default=0, help="profile the compile of a chain of N ops")
    args = ap.parse_args(argv)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        measure(args.profile, args.backend)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        return
    measure(50, args.backend)  # warm up imports and the LLVM target
    rows = [measure(n, args.backend) for n in args.sizes]
    print(f"{'n':>6} " + " ".join(f"{s + ' ms':>11}" for s in STAGES) + f" {'total ms':>10} {'kernels':>8}")
    for r in rows:
        total = sum(r[s] for s in STAGES)
        print(f"{r['n']:>6} " + " ".join(f"{r[s]:>11.1f}" for s in STAGES) + f" {total:>10.1f} {r['kernels']:>8}")
    print("per pass (ms, all rounds): " + "; ".join(
        f"n={r['n']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["per_pass"].items()) for r in rows))
    by_n = {r["n"]: r for r in rows}
    for lo, hi in ((500, 4000), (250, 1000), (1000, 4000)):
        if lo in by_n and hi in by_n:
            ratios = {s: by_n[hi][s] / max(by_n[lo][s], 1e-9) for s in STAGES}
            tot = sum(by_n[hi][s] for s in STAGES) / sum(by_n[lo][s] for s in STAGES)
            print(f"n {lo} -> {hi} ({hi // lo}x ops): " + ", ".join(f"{s} {v:.1f}x" for s, v in ratios.items())
                  + f", total {tot:.1f}x")


if __name__ == "__main__":
    main()
