"""A character-level RNN trained with ``lax.scan``, by minixla and by JAX (issue 15's example).

The task: predict the next character of text generated from a small grammar (words of a fixed
vocabulary in random order, separated by spaces), so a model that learns the words gets its
loss well below ``ln(vocabulary)``. The model is a tanh RNN, ``h = tanh(x_t @ Wx + h @ Wh + b)``
with logits ``h @ Wy + by``, unrolled over the sequence by ``lax.scan``; the training step is
``grad`` through the scan (a reverse scan over the saved carries) and plain SGD.

The same source runs with ``minixla.lax``/``minixla.numpy`` (compiled with ``minixla.jit``, LLVM
backend) and with ``jax.lax``/``jax.numpy`` (``jax.jit``) from the same initial parameters; the
loss curves are compared step by step, and the JSON line reports both, the timings and the
largest difference.

    python examples/char_rnn.py [--fast] [--json]
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import minixla
from minixla import lax as mlax, numpy as mnp

WORDS = ["scan", "loop", "while", "cond", "carry", "grad", "jit"]


def make_text(n_chars: int, seed: int = 0) -> str:
    r = np.random.default_rng(seed)
    out = []
    while sum(len(w) + 1 for w in out) < n_chars:
        out.append(WORDS[r.integers(len(WORDS))])
    return " ".join(out)[:n_chars]


def model(L, np_):
    def loss(params, xs, ys):
        wx, wh, b, wy, by = params
        h0 = np_.zeros((xs.shape[1], wh.shape[0]), np.float32)

        def cell(h, x):
            h = np_.tanh(x @ wx + h @ wh + b)
            return h, h
        _, hs = L.scan(cell, h0, xs)            # hs: [T, batch, hidden]
        logits = hs @ wy + by                   # [T, batch, vocab]
        m = logits.max(axis=-1, keepdims=True)
        logp = logits - m - np_.log(np_.exp(logits - m).sum(axis=-1, keepdims=True))
        return -(logp * ys).sum() / (ys.shape[0] * ys.shape[1])

    def step(params, xs, ys, lr):
        g = grad(loss)(params, xs, ys)
        return [p - lr * d for p, d in zip(params, g)], loss(params, xs, ys)
    grad = minixla.grad if L is mlax else jax.grad
    return step


def batches(text, vocab, seq, batch, steps, seed=1):
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text])
    eye = np.eye(len(vocab), dtype=np.float32)
    r = np.random.default_rng(seed)
    for _ in range(steps):
        starts = r.integers(0, len(ids) - seq - 1, batch)
        chunk = np.stack([ids[s:s + seq + 1] for s in starts], axis=1)  # [T+1, batch]
        yield eye[chunk[:-1]], eye[chunk[1:]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true",
                    help="a small run: 60 steps, sequences of 16, batch 8, hidden 32 (default: 400, 32, 16, 64)")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON line: both loss curves, the timings and their largest difference")
    a = ap.parse_args(argv)
    steps, seq, batch, hidden = (60, 16, 8, 32) if a.fast else (400, 32, 16, 64)
    text = make_text(4000)
    vocab = sorted(set(text))
    v = len(vocab)
    r = np.random.default_rng(0)
    params = [(r.standard_normal((v, hidden)) * 0.3).astype(np.float32),
              (r.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32),
              np.zeros(hidden, np.float32),
              (r.standard_normal((hidden, v)) * 0.1).astype(np.float32), np.zeros(v, np.float32)]
    lr = np.float32(0.5)
    data = list(batches(text, vocab, seq, batch, steps))
    results = {}
    for name, (L, np_, jit) in {"minixla": (mlax, mnp, minixla.jit), "jax": (jax.lax, jnp, jax.jit)}.items():
        step = jit(model(L, np_))
        p = [x.copy() for x in params]
        losses = []
        t0 = time.perf_counter()
        p, l0 = step(p, *data[0], lr)  # (compiles)
        compile_ms = (time.perf_counter() - t0) * 1e3
        losses.append(float(l0))
        t0 = time.perf_counter()
        for xs, ys in data[1:]:
            p, loss = step(p, xs, ys, lr)
            losses.append(float(loss))
        ms = (time.perf_counter() - t0) * 1e3 / max(len(data) - 1, 1)
        results[name] = dict(losses=losses, ms_per_step=ms, compile_ms=compile_ms)
    m, j = np.array(results["minixla"]["losses"]), np.array(results["jax"]["losses"])
    figures = dict(steps=steps, vocab=v, initial_loss=float(m[0]), final_loss=float(m[-5:].mean()),
                   final_loss_jax=float(j[-5:].mean()), max_abs_loss_diff=float(np.abs(m - j).max()),
                   ms_per_step_minixla=results["minixla"]["ms_per_step"],
                   ms_per_step_jax=results["jax"]["ms_per_step"],
                   compile_ms_minixla=results["minixla"]["compile_ms"], compile_ms_jax=results["jax"]["compile_ms"])
    if not a.json:
        print(f"vocabulary {v}, ln(vocab) = {np.log(v):.3f}; {steps} SGD steps of {batch} sequences of {seq}")
        for k in range(0, steps, max(steps // 10, 1)):
            print(f"  step {k:4d}: loss minixla {m[k]:.4f}  jax {j[k]:.4f}")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
