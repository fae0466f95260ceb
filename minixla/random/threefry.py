"""The threefry2x32 counter-based PRNG (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011), as ``jax._src.random.threefry2x32`` defines it.

``threefry2x32(k1, k2, x1, x2)`` is the hash: a key pair and a pair of counter arrays in, a
pair of ``uint32`` arrays of random bits out. It is a plain function of ``minixla.lax`` ops,
not a primitive: JAX's ``threefry2x32_p`` has no semantics of its own beyond its lowering
(20 rounds of ``add`` with wraparound, rotate = ``shift_left | shift_right_logical``, ``xor``,
and a key injection every 4 rounds), so minixla traces those ops directly and every stage
(passes, LLVM, the hand-off) sees ordinary uint32 HLO. A JAX jaxpr importer maps
``threefry2x32_p`` onto this function.

Keys are ``uint32[..., 2]`` arrays here; ``minixla.random.keys`` wraps them as typed keys.
The functions below are the ``PRNGImpl`` of JAX's ``threefry2x32`` with the default
``jax_threefry_partitionable=True`` (JAX 0.10): ``split`` and ``random_bits`` hash the
64-bit iota of the output shape split in (hi, lo) 32-bit halves, so element ``i`` of a
sample never depends on the sample's size.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval

_U32 = np.dtype("uint32")
#: the rotation distances of the even and odd groups of 4 rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: Threefish's key-schedule parity constant.
_PARITY = 0x1BD11BDA


def _u32(x):
    return lax.convert_element_type(x, _U32) if get_aval(x).dtype != _U32 else x


def _rotate_left(x, d: int):
    return lax.bitwise_or(lax.shift_left(x, np.uint32(d)), lax.shift_right_logical(x, np.uint32(32 - d)))


def _round(v, rot):
    x0 = lax.add(v[0], v[1])
    return [x0, lax.bitwise_xor(x0, _rotate_left(v[1], rot))]


def threefry2x32(k1, k2, x1, x2):
    """The threefry2x32 hash (``jax._src.random.threefry2x32.threefry2x32_p``).

    Args:
      k1, k2: the key's two ``uint32`` words (scalars, or arrays broadcastable to the counts).
      x1, x2: ``uint32`` counter arrays of one shape.

    Returns:
      ``(y1, y2)``: two ``uint32`` arrays of the counters' shape.

    Raises ``DTypeError`` unless every argument is ``uint32``.
    """
    args = (k1, k2, x1, x2)
    if any(get_aval(a).dtype != _U32 for a in args):
        raise errors.DTypeError("threefry2x32 requires uint32 arguments, got "
                                + ", ".join(get_aval(a).dtype.name for a in args))
    shape = get_aval(x1).shape
    if get_aval(x2).shape != shape:
        raise errors.ShapeError(f"threefry2x32 counts must have one shape, got {shape} and "
                                f"{get_aval(x2).shape}")
    k1, k2 = (lax.broadcast_in_dim(k, shape, tuple(range(len(shape) - get_aval(k).ndim, len(shape))))
              if get_aval(k).shape not in ((), shape) else k for k in (k1, k2))
    ks = [k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(_PARITY))]
    x = [lax.add(x1, ks[0]), lax.add(x2, ks[1])]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x = _round(x, r)
        # key injection i+1: words (i+1) % 3 and (i+2) % 3 of the schedule, plus the round count
        x = [lax.add(x[0], ks[(i + 1) % 3]),
             lax.add(lax.add(x[1], ks[(i + 2) % 3]), np.uint32(i + 1))]
    return tuple(x)


def threefry_2x32(keypair, count):
    """Hash the ``uint32`` array ``count`` (any shape) with ``keypair = (k1, k2)``: its flat
    halves are the two counter words (padded by one zero when the size is odd), as JAX's
    ``threefry_2x32``. Returns a ``uint32`` array of ``count``'s shape."""
    k1, k2 = keypair
    count = _u32(count)
    shape = get_aval(count).shape
    n = math.prod(shape)
    flat = lax.reshape(count, (n,))
    if n % 2:
        flat = lax.concatenate([flat, lax.full((1,), 0, _U32)], 0)
    half = (n + n % 2) // 2
    x1 = lax.slice(flat, (0,), (half,))
    x2 = lax.slice(flat, (half,), (2 * half,))
    y1, y2 = threefry2x32(k1, k2, x1, x2)
    out = lax.concatenate([y1, y2], 0)
    if n % 2:
        out = lax.slice(out, (0,), (n,))
    return lax.reshape(out, shape)


def _key_words(key):
    k = lax.reshape(key, (2,))
    return (lax.reshape(lax.slice(k, (0,), (1,)), ()), lax.reshape(lax.slice(k, (1,), (2,)), ()))


def iota_2x32_shape(shape):
    """``(hi, lo)``: the 64-bit row-major iota of ``shape`` as two ``uint32`` arrays
    (``jax._src.random.prng.iota_2x32_shape``). ``hi`` is zero below 2**32 elements."""
    shape = tuple(shape)
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise errors.UnsupportedError(f"random bits for {n} >= 2**32 elements are not supported")
    if not shape:
        zero = lax.full((), 0, _U32)
        return zero, zero
    lo = lax.reshape(lax.iota(_U32, n), shape)
    return lax.full(shape, 0, _U32), lo


def threefry_seed(seed):
    """The key ``[seed >> 32, seed & 0xFFFFFFFF]`` (as ``uint32[2]``) of an integer scalar seed."""
    aval = get_aval(seed)
    if aval.shape:
        raise errors.ShapeError(f"PRNG key seed must be a scalar; got shape {aval.shape}")
    if aval.dtype.kind not in "iu":
        raise errors.DTypeError(f"PRNG key seed must be an integer; got {aval.dtype.name}")
    # XLA's logical shift by >= the bit width gives 0: the high word of a 32-bit seed is 0.
    hi = _u32(lax.shift_right_logical(seed, np.asarray(32, aval.dtype)))
    lo = _u32(seed)  # (convert keeps the low 32 bits: seed & 0xFFFFFFFF)
    return lax.concatenate([lax.reshape(hi, (1,)), lax.reshape(lo, (1,))], 0)


def threefry_split(key, shape):
    """``uint32[*shape, 2]``: ``prod(shape)`` new keys from ``key`` (``uint32[2]``)."""
    if get_aval(key).shape[-1:] == (4,):  # (rbg key data, from a sampler: minixla.random.rbg)
        from minixla.random import rbg
        return rbg.rbg_split(key, shape)
    k1, k2 = _key_words(key)
    hi, lo = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, hi, lo)
    nd = len(tuple(shape))
    b1, b2 = (lax.expand_dims(b, (nd,)) for b in (b1, b2))
    return lax.concatenate([b1, b2], nd)


def threefry_fold_in(key, data):
    """A new key from ``key`` and the ``uint32`` scalar ``data`` (JAX's ``fold_in``)."""
    return threefry_2x32(_key_words(key), threefry_seed(_u32(data)))


_UINT = {8: np.dtype("uint8"), 16: np.dtype("uint16"), 32: np.dtype("uint32"), 64: np.dtype("uint64")}


def threefry_random_bits(key, bit_width: int, shape):
    """``uint{bit_width}[*shape]`` random bits from ``key`` (``uint32[2]``): the xor of the two
    hash words for 8/16/32 bits (truncated below 32), ``hi << 32 | lo`` for 64 bits."""
    if bit_width not in _UINT:
        raise errors.DTypeError("random bits requires 8-, 16-, 32- or 64-bit field width")
    if get_aval(key).shape[-1:] == (4,):  # (rbg/unsafe_rbg key data: XLA's rng_bit_generator)
        from minixla.random import rbg
        return rbg.rbg_random_bits(key, bit_width, shape)
    k1, k2 = _key_words(key)
    hi, lo = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, hi, lo)
    dtype = _UINT[bit_width]
    if bit_width == 64:
        hi64 = lax.convert_element_type(b1, dtype)
        lo64 = lax.convert_element_type(b2, dtype)
        return lax.bitwise_or(lax.shift_left(hi64, np.asarray(32, dtype)), lo64)
    bits = lax.bitwise_xor(b1, b2)
    return bits if bit_width == 32 else lax.convert_element_type(bits, dtype)
