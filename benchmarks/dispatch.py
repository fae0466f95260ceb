"""Dispatch: the cost of a cached call, ``minixla.jit`` against ``jax.jit`` in one process.

    python -m benchmarks.dispatch              # the table
    python -m benchmarks.dispatch --profile    # ... and where minixla's time goes (cProfile)

Two calls: ``x * 2 + 1`` on 8 float32 (the work is nothing: all of it is dispatch), and
``tree_map(a + 1)`` over a dict of 100 float32[4] arrays (flattening, keying, 100 arguments
and 100 outputs). ``jax.jit`` gets device arrays and is waited for (``block_until_ready``);
minixla gets numpy arrays. Samples alternate between the two (background load hits both
alike); each is the *CPU time* of this thread over ``calls`` calls (less sensitive to other
processes than wall time); reported: the median sample, per call.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import minixla  # noqa: E402


def _per_call_us(fn, calls: int) -> float:
    t = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t) / calls * 1e6


def cases():
    """``[(name, minixla call, jax call, calls per sample)]``, compiled and warmed up."""
    x = np.ones(8, np.float32)
    f = minixla.jit(lambda x: x * np.float32(2) + np.float32(1))
    jf = jax.jit(lambda x: x * 2 + 1)
    jx = jax.device_put(x)
    tree = {f"a{i:03d}": np.ones(4, np.float32) for i in range(100)}
    jtree = jax.device_put(tree)
    g = minixla.jit(lambda t: jax.tree.map(lambda a: a + np.float32(1), t))
    jg = jax.jit(lambda t: jax.tree.map(lambda a: a + 1, t))
    out = [("small (x*2+1, f32[8])", lambda: f(x), lambda: jf(jx).block_until_ready(), 2000),
           ("pytree of 100 f32[4]", lambda: g(tree), lambda: jax.block_until_ready(jg(jtree)), 100)]
    for _, a, b, _ in out:
        a(), b()
    return out


def run(repeat: int = 15, scale: float = 1.0) -> list[dict]:
    rows = []
    for name, ours, theirs, calls in cases():
        n = max(1, int(calls * scale))
        a, b = [], []
        for _ in range(repeat):
            a.append(_per_call_us(ours, n))
            b.append(_per_call_us(theirs, n))
        rows.append({"case": name, "minixla_us": statistics.median(a), "jax_us": statistics.median(b),
                     "ratio": statistics.median(a) / statistics.median(b)})
    return rows


def profile(top: int = 12) -> str:
    out = io.StringIO()
    for name, ours, _, calls in cases():
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(calls * 5):
            ours()
        pr.disable()
        out.write(f"--- {name}: {calls * 5} calls\n")
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the calls per sample")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    rows = run(args.repeat, args.scale)
    print(f"{'cached call':28s} {'minixla':>10s} {'jax.jit':>10s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['case']:28s} {r['minixla_us']:8.2f}us {r['jax_us']:8.2f}us {r['ratio']:6.2f}")
    if args.profile:
        print(profile())
    return rows


if __name__ == "__main__":
    main()
