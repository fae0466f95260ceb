"""The benchmark workloads, written once against a NumPy-like namespace.

Each workload's ``fn(ns, *args)`` uses only ``ns.np`` (``numpy``, ``jax.numpy`` or
``minixla.numpy``) and three helpers that differ between the frameworks: ``ns.rsqrt``,
``ns.conv_nhwc`` (a SAME, stride-1 NHWC/HWIO convolution) and ``ns.swap_last`` (swap the
last two axes). So numpy (eager), ``minixla.jit`` and ``jax.jit`` run the same program.

``work(args)`` gives the compulsory traffic in bytes (``kind == "memory"``: every input
read once, every output written once) or the floating point operations (``kind ==
"compute"``: 2 per multiply-add of the dots and convolutions; the elementwise work
around them is not counted), from which the suite derives GB/s and GFLOP/s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

F32 = np.float32


@dataclass
class Workload:
    name: str
    fn: Callable                # fn(ns, *args) -> array
    make_args: Callable         # make_args(rng, scale) -> tuple of float32 arrays
    kind: str                   # "memory" | "compute" | "dispatch"
    work: Callable              # work(args, out) -> bytes or flops
    description: str = ""


# ---------------------------------------------------------------------------------------
# The namespaces.

def numpy_namespace():
    def conv_nhwc(x, w):
        kh, kw = w.shape[:2]
        ph, pw = (kh - 1) // 2, (kw - 1) // 2
        xp = np.pad(x, ((0, 0), (ph, kh - 1 - ph), (pw, kw - 1 - pw), (0, 0)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))  # N,H,W,C,kh,kw
        return np.tensordot(win, w, axes=([4, 5, 3], [0, 1, 2])).astype(F32)

    def max_pool2(x):
        n, h, w, c = x.shape
        return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))

    return SimpleNamespace(np=np, rsqrt=lambda v: F32(1) / np.sqrt(v), conv_nhwc=conv_nhwc,
                           swap_last=lambda a: np.swapaxes(a, -1, -2), max_pool2=max_pool2)


def jax_namespace():
    import jax
    import jax.numpy as jnp

    def conv_nhwc(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def max_pool2(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    return SimpleNamespace(np=jnp, rsqrt=jax.lax.rsqrt, conv_nhwc=conv_nhwc,
                           swap_last=lambda a: jnp.swapaxes(a, -1, -2), max_pool2=max_pool2)


def minixla_namespace():
    import minixla.numpy as mnp
    from minixla import lax

    def conv_nhwc(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def swap_last(a):
        perm = list(range(a.ndim))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return mnp.transpose(a, perm)

    def max_pool2(x):
        return lax.reduce_window(x, -mnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    return SimpleNamespace(np=mnp, rsqrt=lax.rsqrt, conv_nhwc=conv_nhwc, swap_last=swap_last,
                           max_pool2=max_pool2)


# ---------------------------------------------------------------------------------------
# The programs.

def selu(ns, x):
    xnp = ns.np
    alpha, scale = F32(1.6732632), F32(1.050701)
    return scale * xnp.where(x > 0, x, alpha * (xnp.exp(x) - F32(1)))


def chain8(ns, x):
    """Eight elementwise ops, two of them transcendental, as one would find after fusion."""
    xnp = ns.np
    y = x * F32(0.5)
    y = xnp.tanh(y)
    y = y + F32(0.25)
    y = xnp.exp(y)
    y = y * x
    y = y - F32(1)
    y = xnp.maximum(y, F32(-2))
    return y * y


def softmax(ns, x):
    xnp = ns.np
    e = xnp.exp(x - xnp.max(x, axis=-1, keepdims=True))
    return e / xnp.sum(e, axis=-1, keepdims=True)


def layernorm(ns, x, gamma, beta):
    xnp = ns.np
    mu = xnp.mean(x, axis=-1, keepdims=True)
    d = x - mu
    var = xnp.mean(d * d, axis=-1, keepdims=True)
    return d * ns.rsqrt(var + F32(1e-5)) * gamma + beta


def mlp(ns, x, w1, b1, w2, b2):
    xnp = ns.np
    h = xnp.maximum(xnp.matmul(x, w1) + b1, F32(0))
    return xnp.matmul(h, w2) + b2


def conv_bias_relu(ns, x, w, b):
    return ns.np.maximum(ns.conv_nhwc(x, w) + b, F32(0))


def cnn_maxpool(ns, x, w1, b1, w2, b2, wd):
    """Two Conv+Bias+ReLU layers, each followed by a 2x2 max-pooling, then a dense layer."""
    xnp = ns.np
    h = ns.max_pool2(xnp.maximum(ns.conv_nhwc(x, w1) + b1, F32(0)))
    h = ns.max_pool2(xnp.maximum(ns.conv_nhwc(h, w2) + b2, F32(0)))
    return xnp.matmul(h.reshape(h.shape[0], -1), wd)


def attention(ns, q, k, v):
    xnp = ns.np
    s = xnp.matmul(q, ns.swap_last(k)) * F32(1 / math.sqrt(q.shape[-1]))
    p = xnp.exp(s - xnp.max(s, axis=-1, keepdims=True))
    p = p / xnp.sum(p, axis=-1, keepdims=True)
    return xnp.matmul(p, v)


def sort(ns, x):
    return ns.np.sort(x)


def tiny(ns, x):
    return x * F32(2) + F32(1)


# ---------------------------------------------------------------------------------------
# Arguments and work.

def _normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def _bytes(args, out):
    return sum(a.nbytes for a in args) + np.asarray(out).nbytes


def attention_args(batch, heads, seq, d):
    def make(rng, scale=1.0):
        return tuple(_normal(rng, batch, heads, seq, d) for _ in range(3))
    return make


def attention_flops(args, out):
    b, h, s, d = args[0].shape
    return 2 * 2 * b * h * s * s * d


def _shrink(n, scale):
    return max(1, int(round(n * scale)))


def workloads(scale: float = 1.0) -> list[Workload]:
    """The suite. ``scale`` < 1 shrinks the big dims (the smoke test runs a tiny suite)."""
    n4m = _shrink(4 * 1024 * 1024, scale)
    rows, cols = _shrink(4096, scale), _shrink(1024, math.sqrt(scale))
    mb, mk, mh, mo = _shrink(256, scale), _shrink(1024, math.sqrt(scale)), _shrink(1024, math.sqrt(scale)), \
        _shrink(256, math.sqrt(scale))
    cn, chw, cc = _shrink(8, scale), _shrink(32, math.sqrt(scale)), _shrink(64, math.sqrt(scale))
    ab, aseq = _shrink(8, scale), _shrink(512, math.sqrt(scale))
    ps = 4 * _shrink(8, math.sqrt(scale))  # (two 2x2 poolings: a multiple of 4)
    return [
        Workload("selu", selu, lambda r, s: (_normal(r, n4m),), "memory", _bytes, f"SELU on {n4m} elements"),
        Workload("chain8", chain8, lambda r, s: (_normal(r, n4m),), "memory", _bytes,
                 f"8 elementwise ops incl. exp, tanh on {n4m}"),
        Workload("softmax", softmax, lambda r, s: (_normal(r, rows, cols),), "memory", _bytes,
                 f"softmax over ({rows},{cols}), last axis"),
        Workload("layernorm", layernorm,
                 lambda r, s: (_normal(r, rows, cols), _normal(r, cols), _normal(r, cols)), "memory", _bytes,
                 f"layernorm over ({rows},{cols}), last axis"),
        Workload("mlp", mlp,
                 lambda r, s: (_normal(r, mb, mk), _normal(r, mk, mh, scale=mk ** -0.5), _normal(r, mh),
                               _normal(r, mh, mo, scale=mh ** -0.5), _normal(r, mo)),
                 "compute", lambda a, o: 2 * a[0].shape[0] * a[1].shape[1] * (a[1].shape[0] + a[3].shape[1]),
                 f"relu(x@W1+b1)@W2+b2, x ({mb},{mk}), W1 ({mk},{mh}), W2 ({mh},{mo})"),
        Workload("conv_bias_relu", conv_bias_relu,
                 lambda r, s: (_normal(r, cn, chw, chw, cc), _normal(r, 3, 3, cc, cc, scale=(9 * cc) ** -0.5),
                               _normal(r, cc)),
                 "compute", lambda a, o: 2 * o.size * np.prod(a[1].shape[:3]),
                 f"Conv+Bias+ReLU NHWC ({cn},{chw},{chw},{cc}) HWIO (3,3,{cc},{cc}) SAME"),
        Workload("cnn_maxpool", cnn_maxpool,
                 lambda r, s: (_normal(r, cn * 4, ps, ps, 16), _normal(r, 3, 3, 16, 32, scale=(9 * 16) ** -0.5),
                               _normal(r, 32), _normal(r, 3, 3, 32, 64, scale=(9 * 32) ** -0.5), _normal(r, 64),
                               _normal(r, (ps // 4) ** 2 * 64, 10, scale=((ps // 4) ** 2 * 64) ** -0.5)),
                 "compute", lambda a, o: 2 * a[0].shape[0] * a[0].shape[1] * a[0].shape[2] * 9 * 32 * (16 + 64 // 4),
                 f"CNN: 2x (3x3 Conv+Bias+ReLU, 2x2 max-pool) + dense, NHWC ({cn * 4},{ps},{ps},16)"),
        Workload("attention", attention, attention_args(ab, 4, aseq, 64), "compute", attention_flops,
                 f"softmax(q·kᵀ/√d)·v, batch {ab}, 4 heads, seq {aseq}, d 64"),
        Workload("sort", sort, lambda r, s: (_normal(r, _shrink(1024 * 1024, scale)),), "memory", _bytes,
                 f"sort of {_shrink(1024 * 1024, scale)} float32 (minixla: an LLVM radix sort)"),
        Workload("dispatch", tiny, lambda r, s: (_normal(r, 8),), "dispatch", _bytes,
                 "cached call of x*2+1 on 8 elements"),
    ]


SWEEP_BATCH = (1, 2, 4, 8)
SWEEP_SEQ = (8, 64, 128, 256, 512, 1024)


def sweep_workloads() -> list[Workload]:
    """Attention over batch x sequence (4 heads, d 64)."""
    return [Workload(f"attention_b{b}_s{s}", attention, attention_args(b, 4, s, 64), "compute", attention_flops,
                     f"attention batch {b}, seq {s}") for b in SWEEP_BATCH for s in SWEEP_SEQ]
