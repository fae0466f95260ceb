"""The ``rbg`` and ``unsafe_rbg`` PRNG implementations (``jax._src.random.rbg``), bit for bit.

Their keys are ``uint32[4]``; their random bits come from XLA's stateless generator,
``lax.rng_bit_generator`` with ``RNG_DEFAULT`` (Philox4x32 on CPU; ``minixla.lax.rng``), so
``bits``/``uniform``/``normal``/... of an rbg key are not threefry's. The two differ in how they
derive keys:

- ``rbg``: seed, ``split`` and ``fold_in`` are threefry2x32's, applied to each half of the key
  (``uint32[2, 2]``) -- JAX's ``vmap`` of them over the halves;
- ``unsafe_rbg``: ``split`` takes every tenth row of ``rng_bit_generator(key, (10 n, 4))``, and
  ``fold_in(key, d)`` xors the key with the last row of ``rng_bit_generator(seed(d), (10, 4))``.

A typed key (``minixla.random.key(seed, impl="rbg")``) carries its implementation
(``key<rbg>``, ``key<urbg>``); a raw ``uint32[4]`` key is read with the default implementation,
``jax.config.jax_default_prng_impl``, as JAX reads it.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.random import threefry

_U32 = np.dtype("uint32")
_UINT = {8: np.dtype("uint8"), 16: np.dtype("uint16"), 32: _U32, 64: np.dtype("uint64")}


def rbg_seed(seed):
    """``uint32[4]``: the threefry key of ``seed``, twice."""
    half = threefry.threefry_seed(seed)
    return lax.concatenate([half, half], 0)


def _halves(key):
    return [lax.reshape(lax.slice(key, (2 * i,), (2 * i + 2,)), (2,)) for i in range(2)]


def rbg_split(key, shape):
    """``uint32[*shape, 4]``: each half of ``key`` split by threefry, the halves side by side."""
    shape = tuple(shape)
    parts = [threefry.threefry_split(h, shape) for h in _halves(key)]  # each (*shape, 2)
    return lax.concatenate(parts, len(shape))


def rbg_fold_in(key, data):
    """Each half of ``key`` folded with ``data`` by threefry."""
    return lax.concatenate([threefry.threefry_fold_in(h, data) for h in _halves(key)], 0)


def rbg_random_bits(key, bit_width: int, shape):
    """``uint{bit_width}[*shape]`` from ``lax.rng_bit_generator(key, shape)`` (RNG_DEFAULT)."""
    from minixla.core import errors
    if bit_width not in _UINT:
        raise errors.DTypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return lax.rng_bit_generator(key, tuple(shape), dtype=_UINT[bit_width])[1]


def unsafe_rbg_split(key, shape):
    """Every tenth row of ``rng_bit_generator(key, (10 n, 4))``, as ``uint32[*shape, 4]``."""
    shape = tuple(shape)
    n = math.prod(shape)
    rows = lax.rng_bit_generator(key, (10 * n, 4), dtype=_U32)[1]
    return lax.reshape(lax.slice(rows, (0, 0), (10 * n, 4), (10, 1)), (*shape, 4))


def unsafe_rbg_fold_in(key, data):
    """``key ^`` the last row of ``rng_bit_generator(rbg_seed(data), (10, 4))``."""
    rows = lax.rng_bit_generator(rbg_seed(data), (10, 4), dtype=_U32)[1]
    return lax.bitwise_xor(key, lax.reshape(lax.slice(rows, (9, 0), (10, 4)), (4,)))


class PRNGImpl:
    """One PRNG implementation (``jax._src.random.prng.PRNGImpl``): its key's trailing data
    dims, ``seed``, ``split``, ``fold_in``, ``random_bits`` on raw key data, and its names."""

    def __init__(self, name, tag, key_size, seed, split, fold_in, random_bits):
        self.name, self.tag, self.key_size = name, tag, key_size
        self.seed, self.split, self.fold_in, self.random_bits = seed, split, fold_in, random_bits

    def __repr__(self):
        return f"PRNGImpl({self.name})"

    def __str__(self):
        return self.name


IMPLS = {
    "threefry2x32": PRNGImpl("threefry2x32", "fry", 2, threefry.threefry_seed, threefry.threefry_split,
                             threefry.threefry_fold_in, threefry.threefry_random_bits),
    "rbg": PRNGImpl("rbg", "rbg", 4, rbg_seed, rbg_split, rbg_fold_in, rbg_random_bits),
    "unsafe_rbg": PRNGImpl("unsafe_rbg", "urbg", 4, rbg_seed, unsafe_rbg_split, unsafe_rbg_fold_in,
                           rbg_random_bits),
}


def default_impl() -> PRNGImpl:
    """The implementation raw keys and ``key(seed)`` use: ``jax.config.jax_default_prng_impl``
    (``threefry2x32`` unless changed). Raises UnsupportedError for one minixla lacks."""
    import jax
    return resolve(jax.config.jax_default_prng_impl)


def resolve(impl) -> PRNGImpl:
    """``impl`` (None, a name, a ``PRNGImpl`` or a key dtype) as a ``PRNGImpl``."""
    from minixla.core import errors
    if impl is None:
        return default_impl()
    if isinstance(impl, PRNGImpl):
        return impl
    name = getattr(impl, "impl", None) or str(impl)  # (a KeyDType carries its impl's name)
    name = {"threefry": "threefry2x32"}.get(name, name)
    if name not in IMPLS:
        raise errors.UnsupportedError(f"minixla.random implements the threefry2x32, rbg and unsafe_rbg "
                                      f"PRNGs, got impl={impl!r}")
    return IMPLS[name]
