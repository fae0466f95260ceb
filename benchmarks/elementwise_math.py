"""Where the time of elementwise math goes: minixla against ``jax.jit``, interleaved, one process.

    python -m benchmarks.elementwise_math                      # everything, 15 rounds
    python -m benchmarks.elementwise_math --only chain8 tanh --rounds 21
    MINIXLA_LLVM_CPU=haswell python -m benchmarks.elementwise_math   # AVX2-only code for minixla

Rows: the suite's elementwise workloads (``chain8``, ``selu``, ``softmax`` from
``benchmarks/workloads.py``), issue 18's chain of 8 (``tanh(exp(tanh(x*2+1)*0.5)*x-0.25)+x``) and one function each of ``exp``, ``tanh``, ``logistic``, ``log`` on
4M float32 elements (``log`` of ``|x| + 0.5``). Columns: minixla on the thread pool (``mx``),
minixla on one thread (``mx1``, compiled with ``MINIXLA_NUM_THREADS=1``), ``jax.jit`` (XLA:CPU,
all its threads); per element, ns and cycles (at the nominal clock of ``/proc/cpuinfo``); the
vector width of minixla's loops (the widest ``<N x float>`` of the optimized IR); and the compute
cost alone: 64K elements (in L2), minixla on one thread against jax, the best batch of all rounds
(the least disturbed by other processes).

Method. The machine may be shared: each round times one *batch* of calls per implementation
(after untimed calls that bring it to its steady state, as ``benchmarks/run.py`` does), the
implementations in turn, and a row's ratio is the median over the rounds of
``time(minixla) / time(jax)`` within a round, given with its 25th-75th percentile spread -- so
load that hits one round hits both sides of its ratio.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # ``python benchmarks/elementwise_math.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from benchmarks import workloads as W  # noqa: E402

N = 4 * 1024 * 1024
SMALL = 64 * 1024


def _functions():
    """(name, fn(ns, x), make_input(rng)) of every row."""
    def unary(op, shift=False):
        def fn(ns, x):
            return getattr(ns.np, op)(ns.np.abs(x) + np.float32(0.5) if shift else x)
        return fn

    def logistic(ns, x):
        if ns.np.__name__.startswith("jax"):
            import jax
            return jax.nn.sigmoid(x)
        from minixla import lax
        return lax.logistic(x)

    def chain8_issue(ns, x):  # issue 18's chain of 8: two tanh and an exp
        xnp = ns.np
        return xnp.tanh(xnp.exp(xnp.tanh(x * np.float32(2) + np.float32(1)) * np.float32(0.5)) * x
                        - np.float32(0.25)) + x

    normal = lambda r: r.standard_normal(N).astype(np.float32) * np.float32(2)  # noqa: E731
    rows = [("chain8", W.chain8, normal), ("chain8_issue", chain8_issue, normal), ("selu", W.selu, normal),
            ("softmax", W.softmax, lambda r: r.standard_normal((4096, 1024)).astype(np.float32)),
            ("exp", unary("exp"), normal), ("tanh", unary("tanh"), normal),
            ("logistic", logistic, normal), ("log", unary("log", shift=True), normal)]
    return rows


def _batch_timer(call, batch_s: float):
    """A function returning the median seconds per call of one batch, calibrated once."""
    call()
    t0 = time.perf_counter()
    call()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(3, int(batch_s / one))

    def batch():
        for _ in range(2):  # steady state: the thread pools awake, caches warm
            call()
        times = []
        for _ in range(number):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        return statistics.median(times)
    return batch


def vector_width(compiled) -> int:
    """Lanes of the widest float vector in the program's optimized LLVM IR (0: scalar code)."""
    text = compiled.executable.optimized_llvm_ir
    widths = [int(w) for w in re.findall(r"<(\d+) x float>", text)]
    return max(widths, default=0)


def _compile_minixla(fn, x, threads=None):
    import minixla
    from minixla.backends.llvm import kernel_cache
    saved = os.environ.get("MINIXLA_NUM_THREADS")
    if threads is not None:
        os.environ["MINIXLA_NUM_THREADS"] = str(threads)
    try:
        kernel_cache.clear() if hasattr(kernel_cache, "clear") else None
        compiled = minixla.jit(lambda a: fn(W.minixla_namespace(), a)).lower(x).compile()
    finally:
        if threads is not None:
            if saved is None:
                os.environ.pop("MINIXLA_NUM_THREADS", None)
            else:
                os.environ["MINIXLA_NUM_THREADS"] = saved
    return compiled


def _clock_ghz() -> float:
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"model name.*@ ([\d.]+)GHz", text)
        if m:
            return float(m.group(1))
        mhz = [float(v) for v in re.findall(r"cpu MHz\s*:\s*([\d.]+)", text)]
        return statistics.median(mhz) / 1e3 if mhz else float("nan")
    except OSError:  # pragma: no cover
        return float("nan")


def run(only=None, rounds=15, batch_s=0.06):
    import jax
    from minixla.backends.llvm import target
    rng = np.random.default_rng(0)
    ghz = _clock_ghz()
    results = []
    for name, fn, make in _functions():
        if only and name not in only:
            continue
        x = make(rng)
        mx = _compile_minixla(fn, x)
        mx1 = _compile_minixla(fn, x, threads=1)
        jfn = jax.jit(lambda a: fn(W.jax_namespace(), a))
        xj = jax.device_put(x)
        want = np.asarray(jfn(xj))
        got = np.asarray(mx(x))
        err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-30))) if want.size else 0.0
        timers = {"mx": _batch_timer(lambda: mx(x), batch_s), "mx1": _batch_timer(lambda: mx1(x), batch_s),
                  "jax": _batch_timer(lambda: jfn(xj).block_until_ready(), batch_s)}
        samples = {k: [] for k in timers}
        for _ in range(rounds):
            for k, t in timers.items():
                samples[k].append(t())
        # Compute cost without DRAM traffic: 64K elements (in L2), one thread, best batch.
        xs = x.reshape(-1)[:SMALL].reshape(-1, 1024) if x.ndim == 2 else x[:SMALL]
        xsj = jax.device_put(xs)
        small = {"mx1": _batch_timer(lambda c=_compile_minixla(fn, xs, threads=1): c(xs), batch_s / 4),
                 "jax": _batch_timer(lambda: jfn(xsj).block_until_ready(), batch_s / 4)}
        best = {k: min(t() for _ in range(rounds)) * 1e9 / xs.size for k, t in small.items()}
        ratios = [m / j for m, j in zip(samples["mx"], samples["jax"])]
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        med = {k: statistics.median(v) for k, v in samples.items()}
        n = x.size
        row = {"name": name, "ratio": statistics.median(ratios), "ratio_p25": q[0], "ratio_p75": q[2],
               "ms": {k: v * 1e3 for k, v in med.items()},
               "ns_per_elem": {k: v * 1e9 / n for k, v in med.items()},
               "cycles_per_elem": {k: v * 1e9 / n * ghz for k, v in med.items()},
               "scaling": med["mx1"] / med["mx"], "vector_width": vector_width(mx),
               "max_rel_diff_vs_jax": err, "in_cache_ns_per_elem": best,
               "in_cache_cycles_per_elem": {k: v * ghz for k, v in best.items()}}
        results.append(row)
        print(f"{name:12s} mx {row['ms']['mx']:7.3f} ms  mx1 {row['ms']['mx1']:7.3f}  jax {row['ms']['jax']:7.3f}"
              f"  ratio mx/jax {row['ratio']:.2f} [{row['ratio_p25']:.2f}, {row['ratio_p75']:.2f}]"
              f"  ns/elem mx1 {row['ns_per_elem']['mx1']:.3f} ({row['cycles_per_elem']['mx1']:.2f} cyc)"
              f"  2T/1T {row['scaling']:.2f}  <{row['vector_width']} x float>"
              f"  in cache, 1 thread: mx {best['mx1']:.3f} ns/elem ({best['mx1'] * ghz:.2f} cyc),"
              f" jax {best['jax']:.3f}", flush=True)
    cpu, features = target.host_cpu()
    print(f"host: {target.host_cpu_description()}; minixla target cpu={cpu} "
          f"{'(features restricted)' if os.environ.get('MINIXLA_LLVM_FEATURES') else ''}; "
          f"clock {ghz:.2f} GHz; {rounds} interleaved rounds")
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="*")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--batch-ms", type=float, default=60.0)
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args(argv)
    rows = run(a.only, a.rounds, a.batch_ms / 1e3)
    if a.json:
        import json
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
