"""``rng_bit_generator``: XLA's stateless bit generator (``jax.lax.rng_bit_generator``).

``rng_bit_generator(key, shape, dtype, algorithm)`` returns ``(new_key, bits)``: ``bits`` are
``shape`` random ``uint8``/``16``/``32``/``64`` values, ``new_key`` the key advanced past them.
The key is ``uint32[4]`` (or ``uint64[2]`` with x64), read as XLA's state ``u64[2] = [s0, s1]``
(``s0 = k0 | k1 << 32``, ``s1 = k2 | k3 << 32``, as JAX's lowering bitcasts it). XLA:CPU has no
kernel for it: its ``RngBitGeneratorExpander`` rewrites the instruction into integer HLO before
code generation, and ``RNG_DEFAULT`` means Philox there. minixla does the same
(``minixla.passes.rng_bit_generator_expander`` for the LLVM backend, from the expansions below;
the hand-off gives the instruction to XLA; the evaluator has a NumPy model of both):

- **Philox4x32-10** (``RNG_PHILOX``, ``RNG_DEFAULT``): key ``(lo(s0), hi(s0))``, a 128-bit
  counter ``(s1, s0)`` (low, high) plus ``0, 1, ..., ceil(n/4)-1`` with carry; each counter gives
  four words, interleaved (``bits[4i + j]`` is word j of counter i); 64-bit values pair words
  (0, 1) and (2, 3). The new key is ``[s0, s1 + counters used]``.
- **Threefry2x32-20** (``RNG_THREE_FRY``): key ``(lo(s0), hi(s0))``, 64-bit counters ``s1 + i``
  (split in lo/hi words); for <= 32 bits the output is split in two halves along its first even
  dim (else its largest), the two hash words filling the halves interleaved. 8/16-bit values
  are the low bits of the 32-bit ones. The new key is ``[s0, s1 + counters used]``.

The expansions use 32-bit words only (a 32x32->64 product as four 16-bit products), so they
need no ``uint64`` unless the output is ``uint64``. Bits match ``jax.lax.rng_bit_generator``
on CPU for every algorithm, dtype and shape (size 0 included), and so does the new key.
"""
from __future__ import annotations

import math

import numpy as np
from jax.lax import RandomAlgorithm

from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.lax import elementwise as ew
from minixla.lax import structural as st

_U32, _U64 = np.dtype("uint32"), np.dtype("uint64")
UINT_DTYPES = (np.dtype("uint8"), np.dtype("uint16"), _U32, _U64)
#: RandomAlgorithm -> the HLO attribute XLA prints
HLO_ALGORITHM = {RandomAlgorithm.RNG_DEFAULT: "rng_default", RandomAlgorithm.RNG_THREE_FRY: "rng_three_fry",
                 RandomAlgorithm.RNG_PHILOX: "rng_philox"}


def _check_key(key):
    if not ((key.dtype == _U32 and key.shape == (4,)) or (key.dtype == _U64 and key.shape == (2,))):
        raise errors.DTypeError(f"rng_bit_generator: the key must be uint32[4] (or uint64[2]), got "
                                f"{key.dtype.name}{list(key.shape)}")


def _shape_rule(key, *, shape, dtype, algorithm):
    _check_key(key)
    if np.dtype(dtype) not in UINT_DTYPES:
        raise errors.DTypeError(f"rng_bit_generator: unsupported dtype {np.dtype(dtype).name}")
    return [ShapedArray(key.shape, key.dtype, key.weak_type), ShapedArray(tuple(shape), np.dtype(dtype))]


def _impl(key, *, shape, dtype, algorithm):
    import jax
    return [np.asarray(r) for r in jax.lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=algorithm)]


rng_bit_generator_p = Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
shape_rules[rng_bit_generator_p] = _shape_rule
impl_rules[rng_bit_generator_p] = _impl


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT):
    """``(new_key, bits)`` from XLA's stateless generator (``jax.lax.rng_bit_generator``).

    Args:
      key: ``uint32[4]`` (or ``uint64[2]`` with x64). shape: a tuple of non-negative ints (or
        one int). dtype: ``uint8``, ``uint16``, ``uint32`` or ``uint64`` (``uint64`` becomes
        ``uint32`` without x64, as in JAX). algorithm: a ``RandomAlgorithm`` (``RNG_DEFAULT`` is
        Philox on CPU, as XLA's).
    Returns:
      ``new_key`` (the key's shape and dtype) and ``bits`` (``shape``, ``dtype``).
    Raises:
      TypeError (DTypeError) for another dtype or key; ShapeError for a bad shape.
    """
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) for d in shape):
        raise errors.ShapeError(f"Shapes must be 1D sequences of concrete values of integer type, got {shape}.")
    if any(d < 0 for d in shape):
        raise errors.ShapeError(f"rng_bit_generator: shape {shape} has a negative dimension")
    requested = np.dtype(dtype)
    if requested not in UINT_DTYPES:
        raise errors.DTypeError(f"rng_bit_generator: unsupported dtype {requested.name}")
    algorithm = RandomAlgorithm(int(algorithm))
    _check_key(get_aval(key))  # (before binding: eagerly JAX's own check is an assert)
    new_key, bits = rng_bit_generator_p.bind(key, shape=tuple(int(d) for d in shape),
                                             dtype=canonicalize_dtype(requested), algorithm=algorithm)
    return new_key, bits


# ---------------------------------------------------------------------------------------
# The expansions XLA:CPU compiles (xla/hlo/builder/lib/prng.cc), in 32-bit lax ops.

def _c(v):
    return np.uint32(v & 0xFFFFFFFF)


def _add64(lo, hi, n):
    """``(lo, hi) + n`` for 64-bit values as two ``uint32`` words (``n`` a ``uint32`` array or a
    Python int below 2**32); wraps at 2**64. Returns ``(lo, hi, carried out of 64 bits)``."""
    new_lo = ew.add(lo, n if not isinstance(n, int) else _c(n))
    carry = ew.lt(new_lo, lo)
    new_hi = ew.add(hi, ew.convert_element_type(carry, _U32))
    return new_lo, new_hi, ew.bitwise_and(carry, ew.eq(new_hi, _c(0)))


def _words(key):
    """The key's four 32-bit words ``(lo(s0), hi(s0), lo(s1), hi(s1))`` as scalars."""
    if get_aval(key).dtype == _U64:
        s = [st.reshape(st.slice(key, (i,), (i + 1,)), ()) for i in range(2)]
        out = []
        for w in s:
            out += [ew.convert_element_type(w, _U32),
                    ew.convert_element_type(ew.shift_right_logical(w, np.uint64(32)), _U32)]
        return out
    return [st.reshape(st.slice(key, (i,), (i + 1,)), ()) for i in range(4)]


def _new_key(key, words, used):
    """``[s0, s1 + used]`` in the key's own dtype."""
    lo, hi, _ = _add64(words[2], words[3], used)
    parts = [words[0], words[1], lo, hi]
    if get_aval(key).dtype == _U64:
        parts = [_join64(parts[0], parts[1]), _join64(parts[2], parts[3])]
    return st.concatenate([st.reshape(p, (1,)) for p in parts], 0)


def _join64(lo, hi):
    return ew.bitwise_or(ew.convert_element_type(lo, _U64),
                         ew.shift_left(ew.convert_element_type(hi, _U64), np.uint64(32)))


def _mulhilo(x, m: int):
    """``(hi, lo)`` words of the 64-bit product ``x * m`` (``x`` uint32, ``m`` a constant), from
    four 16x16-bit products (each fits 32 bits)."""
    ml, mh = _c(m & 0xFFFF), _c(m >> 16)
    xl, xh = ew.bitwise_and(x, _c(0xFFFF)), ew.shift_right_logical(x, _c(16))
    ll, lh, hl, hh = ew.mul(xl, ml), ew.mul(xl, mh), ew.mul(xh, ml), ew.mul(xh, mh)
    mid = ew.add(ew.add(ew.shift_right_logical(ll, _c(16)), ew.bitwise_and(lh, _c(0xFFFF))),
                 ew.bitwise_and(hl, _c(0xFFFF)))
    hi = ew.add(ew.add(hh, ew.shift_right_logical(lh, _c(16))),
                ew.add(ew.shift_right_logical(hl, _c(16)), ew.shift_right_logical(mid, _c(16))))
    return hi, ew.mul(x, _c(m))


_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def philox4x32(x, k0, k1):
    """Ten Philox4x32 rounds on the four ``uint32`` counter words ``x`` with the key ``(k0, k1)``.
    The rounds are a loop (one body to compile, not ten copies: each round reuses its words
    several times, so an unrolled expansion fuses into dozens of kernels)."""
    from minixla.lax.control_flow import fori_loop

    def round_(r, state):
        x, ka, kb = state[:4], state[4], state[5]
        hi0, lo0 = _mulhilo(x[0], _PHILOX_M[0])
        hi1, lo1 = _mulhilo(x[2], _PHILOX_M[1])
        x = [ew.bitwise_xor(ew.bitwise_xor(hi1, x[1]), ka), lo1, ew.bitwise_xor(ew.bitwise_xor(hi0, x[3]), kb), lo0]
        return (*x, ew.add(ka, _c(_PHILOX_W[0])), ew.add(kb, _c(_PHILOX_W[1])))
    return list(fori_loop(0, 10, round_, (*x, k0, k1))[:4])


def _philox(key, shape, dtype):
    w = _words(key)
    n = math.prod(shape)
    nv = -(-(2 * n if dtype == _U64 else n) // 4)
    i = st.iota(_U32, nv)
    lo = [st.broadcast_in_dim(v, (nv,), ()) for v in w]
    a, b, ov = _add64(lo[2], lo[3], i)  # the counter's low 64 bits: s1 + i
    c, d, _ = _add64(lo[0], lo[1], ew.convert_element_type(ov, _U32))  # its high 64 bits: s0 (+ carry)
    y = philox4x32([a, b, c, d], w[0], w[1])
    if dtype == _U64:
        y = [_join64(y[0], y[1]), _join64(y[2], y[3])]
    flat = st.reshape(st.concatenate([st.reshape(v, (nv, 1)) for v in y], 1), (nv * len(y),))
    bits = st.reshape(st.slice(flat, (0,), (n,)), shape)
    if dtype.itemsize < 4:
        bits = ew.convert_element_type(bits, dtype)
    return _new_key(key, w, nv), bits


def _threefry(key, shape, dtype):
    from minixla.random.threefry import threefry2x32
    w = _words(key)
    if dtype == _U64:
        n = math.prod(shape)
        i = st.iota(_U32, n)
        lo, hi, _ = _add64(st.broadcast_in_dim(w[2], (n,), ()), st.broadcast_in_dim(w[3], (n,), ()), i)
        y0, y1 = threefry2x32(w[0], w[1], lo, hi)
        return _new_key(key, w, n), st.reshape(_join64(y0, y1), shape)
    if not shape:
        half, split = (1,), None
    else:
        even = [d for d, s in enumerate(shape) if s % 2 == 0]
        split = even[0] if even else max(range(len(shape)), key=lambda d: (shape[d], -d))
        half = tuple(-(-s // 2) if d == split else s for d, s in enumerate(shape))
    m = math.prod(half)
    i = st.iota(_U32, m)
    lo, hi, _ = _add64(st.broadcast_in_dim(w[2], (m,), ()), st.broadcast_in_dim(w[3], (m,), ()), i)
    y0, y1 = threefry2x32(w[0], w[1], lo, hi)
    if split is None:
        bits = st.reshape(y0, ())
    else:
        # the two words fill the split dim interleaved: element 2a + b is word b of position a
        inner = half[:split + 1] + (1,) + half[split + 1:]
        pair = st.concatenate([st.reshape(y, inner) for y in (y0, y1)], split + 1)
        full = tuple(2 * half[split] if d == split else s for d, s in enumerate(shape))
        bits = st.reshape(pair, full)
        if full != tuple(shape):
            bits = st.slice(bits, (0,) * len(shape), tuple(shape))
    if dtype.itemsize < 4:
        bits = ew.convert_element_type(bits, dtype)
    return _new_key(key, w, m), bits


def expand_rng_bit_generator(key, *, shape, dtype, algorithm):
    """``[new_key, bits]`` of ``rng_bit_generator`` in lax ops, as XLA:CPU expands it
    (``RNG_DEFAULT`` is Philox)."""
    dtype = np.dtype(dtype)
    if RandomAlgorithm(int(algorithm)) == RandomAlgorithm.RNG_THREE_FRY:
        return list(_threefry(key, tuple(shape), dtype))
    return list(_philox(key, tuple(shape), dtype))


__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p"]
