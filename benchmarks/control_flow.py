"""Control-flow benchmarks (issue 15): ``python -m benchmarks.control_flow [--fast]``.

Workloads, each the same program text under ``jax.jit`` and ``minixla.jit`` (LLVM backend),
timed in the same run (median of repeats, after a warm-up call):

- ``rnn_scan``: a tanh RNN cell ``h = tanh(h @ W + x_t @ U + b)`` (hidden 256, batch 32) over
  1,000 steps with ``lax.scan``;
- ``rnn_grad``: the training step of that RNN, ``grad`` through the scan (a reverse scan over
  the saved carries) of the mean squared final state;
- ``fori_10k``: ``fori_loop`` of 10,000 iterations of a small elementwise update (per-iteration
  overhead);
- ``compile(scan 10)`` vs ``compile(scan 10,000)``: compile time must not grow with the trip
  count (the loop is a loop in the generated code).

The host is shared (2 cores, other processes): minixla and jax.jit are timed in interleaved
*rounds* (round ``r`` times one call of each, back to back, the order alternating), so a burst
of background load hits both; a row's ratio is the median of the per-round ratios, with its
10th..90th percentile, and the load average is printed. ``cpu ratio`` is the same for the
process CPU time of each call (both run their loops on one thread), which background load
disturbs less than wall time.

``--fast`` shrinks every size (``tests/test_control_flow_perf.py`` runs it: it checks only
that everything runs and agrees with JAX).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import minixla
from minixla import lax, numpy as mnp


def rnn(L, np_, steps):
    def run(W, U, b, h0, xs):
        def cell(h, x):
            h = np_.tanh(h @ W + x @ U + b)
            return h, None
        h, _ = L.scan(cell, h0, xs, length=steps)
        return h
    return run


def rnn_loss(L, np_, steps):
    f = rnn(L, np_, steps)
    return lambda W, U, b, h0, xs: ((f(W, U, b, h0, xs)) ** 2).mean()


def fori(L, n):
    return lambda x: L.fori_loop(0, n, lambda i, c: c * 0.999 + 0.001, x)


def _sample(fn, args):
    """(wall ms, process CPU ms, result) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3, out


def _spread(values):
    """median, 10th and 90th percentile."""
    v = np.asarray(values, np.float64)
    return float(np.median(v)), float(np.percentile(v, 10)), float(np.percentile(v, 90))


def _compile_ms(make, args):
    """Trace, lower and compile from scratch: no kernel compiled earlier in the process is reused."""
    from minixla.backends.llvm import kernel_cache
    kernel_cache.clear()
    t0 = time.perf_counter()
    minixla.jit(make()).lower(*args).compile()
    return (time.perf_counter() - t0) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds per workload")
    ap.add_argument("--only", nargs="*", help="workload names (rnn_scan rnn_grad fori)")
    a = ap.parse_args(argv)
    hidden, batch, steps, n_fori = (16, 4, 20, 100) if a.fast else (256, 32, 1000, 10_000)
    rounds = 2 if a.fast else a.rounds
    r = np.random.default_rng(0)
    W = (r.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    U = (r.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    b = np.zeros(hidden, np.float32)
    h0 = np.zeros((batch, hidden), np.float32)
    xs = r.standard_normal((steps, batch, hidden)).astype(np.float32)
    x = np.ones((64,), np.float32)
    rows = []
    cases = [
        ("rnn_scan", rnn(lax, mnp, steps), rnn(jax.lax, jnp, steps), (W, U, b, h0, xs)),
        ("rnn_grad", minixla.grad(rnn_loss(lax, mnp, steps)), jax.grad(rnn_loss(jax.lax, jnp, steps)),
         (W, U, b, h0, xs)),
        (f"fori_{n_fori}", fori(lax, n_fori), fori(jax.lax, n_fori), (x,)),
    ]
    load0 = os.getloadavg()[0]
    for name, mf, jf, args in cases:
        if a.only and not any(name.startswith(o) for o in a.only):
            continue
        t0 = time.perf_counter()
        mj = minixla.jit(mf)
        m_out = mj(*args)
        m_compile = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        jj = jax.jit(jf)
        j_out = jax.block_until_ready(jj(*args))
        j_compile = (time.perf_counter() - t0) * 1e3
        # a call of a 10,000-trip fori_loop lasts ~0.1 ms: time batches of calls
        inner = 1 if name.startswith("rnn") or a.fast else 50
        batch_m = lambda: [mj(*args) for _ in range(inner)][-1]  # noqa: E731
        batch_j = lambda: [jj(*args) for _ in range(inner)][-1]  # noqa: E731
        ms, js = [], []
        for k in range(rounds):
            pair = [(ms, batch_m), (js, batch_j)]
            for into, fn in (pair if k % 2 == 0 else pair[::-1]):
                w, c, _ = _sample(fn, ())
                into.append((w / inner, c / inner))
        err = float(np.max(np.abs(np.asarray(m_out) - np.asarray(j_out))))
        m_ms, j_ms = _spread([w for w, _ in ms]), _spread([w for w, _ in js])
        ratio = _spread([m[0] / j[0] for m, j in zip(ms, js)])
        cpu_ratio = _spread([m[1] / max(j[1], 1e-9) for m, j in zip(ms, js)])
        rows.append(dict(name=name, minixla_ms=m_ms[0], jax_ms=j_ms[0], ratio=ratio[0], ratio_p10_p90=ratio[1:],
                         cpu_ratio=cpu_ratio[0], cpu_ratio_p10_p90=cpu_ratio[1:],
                         minixla_compile_ms=m_compile, jax_compile_ms=j_compile, max_abs_diff=err))
    short, long_ = (10, 200) if a.fast else (10, 10_000)
    xs_long = np.zeros((long_, batch, hidden), np.float32)
    shorts, longs = [], []
    for k in range(1 if a.fast else 3):  # alternating, as the timings
        shorts.append(_compile_ms(lambda: rnn(lax, mnp, short), (W, U, b, h0, xs[:short])))
        longs.append(_compile_ms(lambda: rnn(lax, mnp, long_), (W, U, b, h0, xs_long)))
    c_short, c_long = statistics.median(shorts), statistics.median(longs)
    load1 = os.getloadavg()[0]
    print(f"host: {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs, load average {load0:.1f} -> {load1:.1f}; "
          f"hidden {hidden}, batch {batch}, {steps} steps; {rounds} interleaved rounds")
    print("| workload | minixla ms | jax.jit ms | ratio (p10..p90) | cpu ratio (p10..p90) | minixla compile ms "
          "| jax compile ms | max \\|diff\\| |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        lo, hi = row["ratio_p10_p90"]
        clo, chi = row["cpu_ratio_p10_p90"]
        print(f"| {row['name']} | {row['minixla_ms']:.2f} | {row['jax_ms']:.2f} | {row['ratio']:.2f} ({lo:.2f}..{hi:.2f}) "
              f"| {row['cpu_ratio']:.2f} ({clo:.2f}..{chi:.2f}) | {row['minixla_compile_ms']:.0f} "
              f"| {row['jax_compile_ms']:.0f} | {row['max_abs_diff']:.1e} |")
    print(f"compile, scan of {short} steps: {c_short:.0f} ms; of {long_} steps: {c_long:.0f} ms "
          f"(ratio {c_long / c_short:.2f})")
    return dict(rows=rows, compile_short_ms=c_short, compile_long_ms=c_long, load=(load0, load1))


if __name__ == "__main__":
    main()
