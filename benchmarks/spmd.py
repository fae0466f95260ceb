"""``python -m benchmarks.spmd``: the collectives minixla's SPMD partitioner inserts, and the
bytes each moves per device, next to those of XLA's own partitioned HLO for the same
annotations (``jax.jit(f, in_shardings=..., out_shardings=...).lower(...).compile()
.as_text()`` on 8 host devices), with one byte model for both
(``minixla.passes.spmd_partitioner.collective_bytes``: ring all-reduce 2(n-1)/n, ...; XLA's
text is read by ``benchmarks.spmd_runtime.xla_collectives``).

Options: ``--json`` prints the results as JSON (``tests/test_spmd_partitioner.py`` reads it).
The programs are written once against a NumPy-like module ``np_`` (``minixla.numpy`` or
``jax.numpy``).
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys

if __name__ == "__main__":  # (before jax is imported: XLA reads the flag once)
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jjnp
import numpy as np
from jax.sharding import PartitionSpec as P


def mlp(np_, x, w1, w2):
    return np_.tanh(x @ w1) @ w2


def train_step(np_, w1, w2, x, y):
    """One SGD step of the MLP on a mean squared error (the gradients are what data
    parallelism all-reduces)."""
    grad = jax.grad if np_ is jjnp else __import__("minixla").grad

    def loss(w1, w2):
        return np_.mean((np_.tanh(x @ w1) @ w2 - y) ** 2)
    g1, g2 = grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def block(np_, x, wq, wk, wv, wo):
    """A transformer block's attention (heads on dim 1 of the projections) and residual."""
    q = np_.einsum("bsd,dhk->bhsk", x, wq)
    k = np_.einsum("bsd,dhk->bhsk", x, wk)
    v = np_.einsum("bsd,dhk->bhsk", x, wv)
    att = np_.einsum("bhsk,bhtk->bhst", q, k) / 2.0
    att = np_.exp(att - np_.max(att, axis=-1, keepdims=True))
    att = att / np_.sum(att, axis=-1, keepdims=True)
    o = np_.einsum("bhst,bhtk->bhsk", att, v)
    return x + np_.einsum("bhsk,hkd->bsd", o, wo)


def cnn(np_, x, k, w):
    """The digits CNN's forward shape: conv, relu, global average pool, dense."""
    lax = jax.lax if np_ is jjnp else __import__("minixla").lax
    y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = np_.maximum(y, 0.0)
    y = np_.mean(y, axis=(1, 2))
    return y @ w


def grads(np_, x, y):
    """Data-parallel gradients kept sharded over the batch axis (ZeRO)."""
    return x.T @ y, np_.sum(y, axis=0)


HEADS = P(None, "model", None)
#: name -> (function, mesh axes, in_specs, out_specs, argument shapes)
CASES = {
    "mlp data-parallel": (mlp, {"data": 4}, (P("data"), P(), P()), P("data"), [(8, 4), (4, 6), (6, 3)]),
    "mlp megatron": (mlp, {"model": 2}, (P(), P(None, "model"), P("model", None)), P(),
                     [(8, 4), (4, 6), (6, 3)]),
    "mlp 2d": (mlp, {"data": 2, "model": 4}, (P("data"), P(None, "model"), P("model", None)), P("data"),
               [(8, 4), (4, 8), (8, 4)]),
    "mlp train step": (train_step, {"data": 4}, (P(), P(), P("data"), P("data")), (P(), P()),
                       [(4, 6), (6, 3), (8, 4), (8, 3)]),
    "transformer block": (block, {"model": 2}, (P(), HEADS, HEADS, HEADS, P("model", None, None)), P(),
                          [(2, 4, 8), (8, 4, 2), (8, 4, 2), (8, 4, 2), (4, 2, 8)]),
    "cnn forward": (cnn, {"batch": 4}, (P("batch"), P(), P()), P(), [(8, 6, 6, 1), (3, 3, 1, 4), (4, 3)]),
    "zero gradients": (grads, {"data": 4}, (P("data"), P("data")), (P("data"), P("data")),
                       [(8, 4), (8, 8)]),
}


def minixla_collectives(name) -> list:
    """``[(opcode, shape, bytes per device)]`` of minixla's per-device program for case ``name``."""
    import minixla.numpy as mnp
    from minixla.passes.spmd_partitioner import collective_bytes
    from minixla.sharding import partition
    f, axes, specs, out_specs, shapes = CASES[name]
    args = [np.zeros(s, np.float32) for s in shapes]
    return collective_bytes(partition(functools.partial(f, mnp), axes, specs, out_specs, args=args))


def xla_collectives(name) -> list:
    """The same for XLA's partitioned HLO (needs ``math.prod(axes)`` JAX devices)."""
    from jax.sharding import Mesh, NamedSharding

    from benchmarks.spmd_runtime import xla_collectives as parse_xla
    f, axes, specs, out_specs, shapes = CASES[name]
    n = math.prod(axes.values())
    if len(jax.devices()) < n:
        raise RuntimeError(f"{name} needs {n} devices, JAX has {len(jax.devices())}: run with "
                           "XLA_FLAGS=--xla_force_host_platform_device_count=8")
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(axes.values())), tuple(axes))

    def ns(s):
        return NamedSharding(mesh, s)
    outs = tuple(map(ns, out_specs)) if type(out_specs) is tuple else ns(out_specs)
    g = jax.jit(lambda *a: f(jjnp, *a), in_shardings=tuple(map(ns, specs)), out_shardings=outs)
    args = [jax.ShapeDtypeStruct(s, jjnp.float32) for s in shapes]
    return [(c["opcode"], c["shape"], c["bytes"])
            for c in parse_xla(g.lower(*args).compile().as_text(), n)]


def run() -> dict:
    return {name: {"minixla": minixla_collectives(name), "xla": xla_collectives(name)} for name in CASES}


def format_table(results: dict) -> str:
    def cell(colls):
        return ", ".join(f"{op} {shape}" for op, shape, _ in colls) or "none"

    def total(colls):
        return f"{sum(b for _, _, b in colls):.0f}"
    rows = ["| program | minixla collectives | bytes/device | XLA collectives | bytes/device |",
            "|---|---|---|---|---|"]
    for name, r in results.items():
        rows.append(f"| {name} | {cell(r['minixla'])} | {total(r['minixla'])} | {cell(r['xla'])} | "
                    f"{total(r['xla'])} |")
    return "\n".join(rows)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    results = run()
    print(json.dumps(results) if "--json" in argv else format_table(results))
    return results


if __name__ == "__main__":
    main()
