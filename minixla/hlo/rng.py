"""``rng-bit-generator`` in HLO: its lowering, verifier and evaluator rows (issue 14).

XLA's ``RngBitGenerator`` has one tuple-shaped result ``(new_state, bits)``; minixla's backends
have no tuples, so (as for ``sort``) each result is its own ``rng-bit-generator`` instruction
of the key, ``result_index`` naming the one it returns, ``algorithm=rng_default|rng_three_fry|
rng_philox`` as XLA prints it. The LLVM backend never sees it: XLA:CPU's
``RngBitGeneratorExpander`` (``minixla.passes.rng_bit_generator_expander``) rewrites it into
integer HLO first. The evaluator's row is an independent NumPy model of XLA's Philox4x32-10
and Threefry2x32-20 generators (``xla/hlo/builder/lib/prng.cc``), vectorized over the counters.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.hlo.evaluator import evaluate_rules
from minixla.hlo.lowering import lowering_rules, shape_of
from minixla.hlo.verifier import _array, _require, shape_rules

_U32, _U64 = np.uint32, np.uint64


def _lower(ctx, operands, in_avals, out_avals, *, shape, dtype, algorithm):
    alg = lax.rng.HLO_ALGORITHM[lax.RandomAlgorithm(int(algorithm))]
    # (both results carry the bits' type: the new state depends on how many counters they use)
    return [ctx.add("rng-bit-generator", shape_of(a), operands, algorithm=alg, result_index=j,
                    bits_dims=tuple(shape), bits_type=np.dtype(dtype).name)
            for j, a in enumerate(out_avals)]


lowering_rules[lax.rng_bit_generator_p] = _lower


def _verify(instr):
    _require(len(instr.operands) == 1, "'rng-bit-generator' takes 1 operand")
    key = _array(instr.operands[0])
    j = instr.attrs.get("result_index")
    _require(instr.attrs.get("algorithm") in ("rng_default", "rng_three_fry", "rng_philox"),
             lambda: f"rng-bit-generator algorithm {instr.attrs.get('algorithm')!r}")
    _require((key.dtype == np.uint32 and key.dims == (4,)) or (key.dtype == np.uint64 and key.dims == (2,)),
             lambda: f"rng-bit-generator key must be u32[4] or u64[2], got {key}")
    _require(j in (0, 1), lambda: f"rng-bit-generator result_index={j}")
    dims, dtype = tuple(instr.attrs["bits_dims"]), np.dtype(instr.attrs["bits_type"])
    _require(dtype.kind == "u", lambda: f"rng-bit-generator bits of type {dtype.name}")
    return key if j == 0 else type(key)(dtype, dims)


shape_rules["rng-bit-generator"] = _verify


# ---- the NumPy model -------------------------------------------------------------------

def _rotl(x, d):
    return (x << _U32(d)) | (x >> _U32(32 - d))


def _threefry2x32(k0, k1, x0, x1):
    ks = [k0, k1, k0 ^ k1 ^ _U32(0x1BD11BDA)]
    x = [x0 + ks[0], x1 + ks[1]]
    for i in range(5):
        for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = x[0] ^ _rotl(x[1], r)
        x = [x[0] + ks[(i + 1) % 3], x[1] + ks[(i + 2) % 3] + _U32(i + 1)]
    return x


def _philox4x32(x, k0, k1):
    for _ in range(10):
        p0 = x[0].astype(_U64) * _U64(0xD2511F53)
        p1 = x[2].astype(_U64) * _U64(0xCD9E8D57)
        x = [(p1 >> _U64(32)).astype(_U32) ^ x[1] ^ k0, p1.astype(_U32),
             (p0 >> _U64(32)).astype(_U32) ^ x[3] ^ k1, p0.astype(_U32)]
        k0, k1 = k0 + _U32(0x9E3779B9), k1 + _U32(0xBB67AE85)
    return x


def _split(u64):
    return u64.astype(_U32), (u64 >> _U64(32)).astype(_U32)


def _join(lo, hi):
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def generate(state, shape, dtype, algorithm):
    """``(new_state, bits)`` of XLA's generator for a ``u64[2]`` state (NumPy arrays)."""
    s0, s1 = _U64(state[0]), _U64(state[1])
    dtype, shape = np.dtype(dtype), tuple(shape)
    n = math.prod(shape)
    k0, k1 = _split(np.asarray(s0))
    with np.errstate(over="ignore"):
        if algorithm == "rng_three_fry":
            if dtype.itemsize == 8:
                y = _threefry2x32(k0, k1, *_split(s1 + np.arange(n, dtype=_U64)))
                return np.array([s0, s1 + _U64(n)]), _join(*y).reshape(shape)
            if not shape:
                half, split = (1,), None
            else:
                even = [d for d, s in enumerate(shape) if s % 2 == 0]
                split = even[0] if even else int(np.argmax(shape))
                half = tuple(-(-s // 2) if d == split else s for d, s in enumerate(shape))
            m = math.prod(half)
            y0, y1 = _threefry2x32(k0, k1, *_split(s1 + np.arange(m, dtype=_U64)))
            if split is None:
                bits = y0.reshape(())
            else:
                pair = np.stack([y0.reshape(half), y1.reshape(half)], split + 1)
                full = tuple(2 * half[split] if d == split else s for d, s in enumerate(shape))
                bits = pair.reshape(full)[tuple(slice(0, s) for s in shape)]
            return np.array([s0, s1 + _U64(m)]), bits.astype(dtype)
        nv = -(-(2 * n if dtype.itemsize == 8 else n) // 4)
        low = s1 + np.arange(nv, dtype=_U64)
        high = np.where(low < s1, s0 + _U64(1), s0)
        y = _philox4x32([*_split(low), *_split(high)], k0, k1)
        if dtype.itemsize == 8:
            y = [_join(y[0], y[1]), _join(y[2], y[3])]
        bits = np.stack(y, 1).reshape(-1)[:n].reshape(shape)
        return np.array([s0, s1 + _U64(nv)]), bits.astype(dtype)


def bits_of(instr):
    """``(dims, dtype)`` of the bits an ``rng-bit-generator`` instruction's pair produces."""
    return tuple(instr.attrs["bits_dims"]), np.dtype(instr.attrs["bits_type"])


def _evaluate(instr, key):
    key = np.ascontiguousarray(key)
    state = key.view(_U64) if key.dtype == np.uint32 else key  # (little-endian: k0 | k1 << 32)
    dims, dtype = bits_of(instr)
    new_state, bits = generate(state, dims, dtype, instr.attrs["algorithm"])
    if instr.attrs["result_index"] == 1:
        return bits
    return new_state.astype(_U64).view(np.uint32) if key.dtype == np.uint32 else new_state.astype(_U64)


evaluate_rules["rng-bit-generator"] = _evaluate
