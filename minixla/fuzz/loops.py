"""Control flow in the differential fuzzer: ops that run a small piece of the program inside
``fori_loop``, ``scan``, ``cond`` and ``while_loop`` (``lax_`` is ``jax.lax`` or ``minixla.lax``).

- ``loop_fori``: ``c = fn(c, y)`` ``n`` times (0-3, so also the zero- and one-trip loops the
  while-loop simplifier removes or inlines), from ``c = x``.
- ``loop_scan``: the running ``fn``-combination of ``x``'s rows (forward or reverse), its ``ys``.
- ``loop_cond``: ``true_fn(a, b)`` if ``any(pred)`` else ``false_fn(a, b)``: a data-dependent branch.
- ``loop_while``: ``c = fn(c, x)`` while ``i < min(n, count_nonzero(x))``: a data-dependent trip
  count (reverse mode of a while loop is an error in JAX and minixla, so the derivative modes
  leave it out).

The loop bodies apply the same IEEE operations in the same order as JAX eager, so their
results are exact (bit for bit) whenever their operands are: the ops only read exact values.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

FNS = ["add", "subtract", "multiply", "maximum", "minimum"]
LOOP_OPS = ("loop_fori", "loop_scan", "loop_cond", "loop_while")


def _fori(np_, lax_, args, p):
    x, y = args
    fn = getattr(np_, p["fn"])
    return lax_.fori_loop(0, p["n"], lambda i, c: fn(c, y).astype(c.dtype), x)


def _scan(np_, lax_, args, p):
    (x,) = args
    fn = getattr(np_, p["fn"])

    def step(c, row):
        c = fn(c, row).astype(c.dtype)
        return c, c
    return lax_.scan(step, np_.zeros_like(x[0]), x, reverse=p["reverse"])[1]


def _cond(np_, lax_, args, p):
    pred, a, b = args
    t, f = getattr(np_, p["true_fn"]), getattr(np_, p["false_fn"])
    return lax_.cond(np_.any(pred), lambda u, v: t(u, v).astype(u.dtype),
                     lambda u, v: f(u, v).astype(u.dtype), a, b)


def _while(np_, lax_, args, p):
    (x,) = args
    fn = getattr(np_, p["fn"])
    trips = np_.minimum(p["n"], np_.sum(x != 0).astype(np.int32))

    def body(state):
        i, c = state
        return i + 1, fn(c, x).astype(c.dtype)
    return lax_.while_loop(lambda s: s[0] < trips, body, (np.int32(0), x))[1]


OPS = {"loop_fori": _fori, "loop_scan": _scan, "loop_cond": _cond, "loop_while": _while}


def draw_loop_op(draw, vals, k):
    """A loop op spec reading ``vals[k]`` (None when the values do not fit it)."""
    x = vals[k]
    kind = draw(st.sampled_from(LOOP_OPS))
    # (no bool subtract: JAX rejects it when tracing a body, and a zero-trip loop run eagerly
    # never would, so the reference would accept a program its transformations reject)
    fns = [f for f in FNS if not (x.dtype == np.bool_ and f == "subtract")]
    fn = draw(st.sampled_from(fns))
    same = [i for i, v in enumerate(vals) if v.shape == x.shape and v.dtype == x.dtype]
    if kind == "loop_fori":
        other = same + [i for i, v in enumerate(vals) if v.shape == () and v.dtype == x.dtype]
        return kind, [k, draw(st.sampled_from(other))], dict(fn=fn, n=draw(st.integers(0, 3)))
    if kind == "loop_scan":
        if not x.shape or x.shape[0] > 5:
            return None
        return kind, [k], dict(fn=fn, reverse=draw(st.booleans()))
    if kind == "loop_cond":
        pred = draw(st.integers(0, len(vals) - 1))
        return kind, [pred, k, draw(st.sampled_from(same))], dict(
            true_fn=fn, false_fn=draw(st.sampled_from(fns)))
    return kind, [k], dict(fn=fn, n=draw(st.integers(0, 3)))


def classify_loop(op, p, args):
    """Exact in, exact out; anything else is left out (see the module docstring)."""
    if not all(a.exact for a in args):
        return None
    nice = all(a.nice for a in args) and (
        op == "loop_cond" and {p["true_fn"], p["false_fn"]} <= {"maximum", "minimum"}
        or op != "loop_cond" and p["fn"] in ("maximum", "minimum"))
    return True, nice
