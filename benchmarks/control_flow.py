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

``--fast`` shrinks every size (the test suite runs it: it checks only that everything runs and
agrees with JAX).
"""
from __future__ import annotations

import argparse
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


def _time(fn, args, repeat):
    fn(*args)  # warm-up (and compile)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args)
        jax.block_until_ready(out)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), out


def _compile_ms(make, args):
    t0 = time.perf_counter()
    minixla.jit(make()).lower(*args).compile()
    return (time.perf_counter() - t0) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    hidden, batch, steps, n_fori = (16, 4, 20, 100) if a.fast else (256, 32, 1000, 10_000)
    repeat = 1 if a.fast else a.repeat
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
    for name, mf, jf, args in cases:
        t0 = time.perf_counter()
        mj = minixla.jit(mf)
        mj(*args)
        m_compile = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        jj = jax.jit(jf)
        jax.block_until_ready(jj(*args))
        j_compile = (time.perf_counter() - t0) * 1e3
        m_ms, m_out = _time(mj, args, repeat)
        j_ms, j_out = _time(jj, args, repeat)
        err = float(np.max(np.abs(np.asarray(m_out) - np.asarray(j_out))))
        rows.append(dict(name=name, minixla_ms=m_ms, jax_ms=j_ms, ratio=m_ms / j_ms, minixla_compile_ms=m_compile,
                         jax_compile_ms=j_compile, max_abs_diff=err))
    short, long_ = (10, 200) if a.fast else (10, 10_000)
    c_short = _compile_ms(lambda: rnn(lax, mnp, short), (W, U, b, h0, xs[:short]))
    c_long = _compile_ms(lambda: rnn(lax, mnp, long_), (W, U, b, h0, np.zeros((long_, batch, hidden), np.float32)))
    print(f"host: {jax.devices()[0].device_kind}; hidden {hidden}, batch {batch}, {steps} steps")
    print("| workload | minixla ms | jax.jit ms | ratio | minixla compile ms | jax compile ms | max |diff| |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['name']} | {row['minixla_ms']:.2f} | {row['jax_ms']:.2f} | {row['ratio']:.2f}x | "
              f"{row['minixla_compile_ms']:.0f} | {row['jax_compile_ms']:.0f} | {row['max_abs_diff']:.1e} |")
    print(f"compile, scan of {short} steps: {c_short:.0f} ms; of {long_} steps: {c_long:.0f} ms "
          f"(ratio {c_long / c_short:.2f})")
    return dict(rows=rows, compile_short_ms=c_short, compile_long_ms=c_long)


if __name__ == "__main__":
    main()
