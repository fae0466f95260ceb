"""Bit counting on integers, composed of shifts, masks, adds, compares and selects (``jax.lax``
has primitives for them; here they are composites, so every pass, backend and transformation
handles them as it handles those ops): ``population_count`` and ``clz``. A signed operand is
bitcast to the unsigned type of its width and back. Integers have no derivative.
``minixla.frontends.jax_bits`` imports JAX's ``population_count_p`` / ``clz_p`` as these.
"""
from __future__ import annotations

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import elementwise as _ew, structural as _st

__all__ = ["population_count", "clz"]


def _int_info(name, x):
    dtype = get_aval(x).dtype
    if dtype.kind not in "iu":
        raise errors.DTypeError(f"{name} does not accept dtype {dtype.name}. Accepted dtypes are "
                                "subtypes of integer.")
    bits = dtype.itemsize * 8
    return dtype, np.dtype(f"uint{bits}"), bits


def _unsigned(x, udtype):
    return x if get_aval(x).dtype == udtype else _ew.bitcast_convert_type(x, udtype)


def _back(x, dtype):
    return x if get_aval(x).dtype == dtype else _ew.bitcast_convert_type(x, dtype)


def _c(v, dtype):
    return np.asarray(v, dtype)


def population_count(x):
    """The number of 1 bits of each element (``jax.lax.population_count``): any integer
    dtype, same shape and dtype out; the SWAR count (pairs, nibbles, bytes, then the bytes
    summed by shifts) on the unsigned type of the operand's width. ``DTypeError``
    (a ``TypeError``) for a non-integer operand, as JAX."""
    dtype, u, w = _int_info("population_count", x)
    y = _unsigned(x, u)
    m1, m2, m4 = (int("".join([p] * (w // len(p))), 2) for p in ("01", "0011", "00001111"))
    y = _ew.sub(y, _ew.bitwise_and(_ew.shift_right_logical(y, _c(1, u)), _c(m1, u)))
    y = _ew.add(_ew.bitwise_and(y, _c(m2, u)), _ew.bitwise_and(_ew.shift_right_logical(y, _c(2, u)), _c(m2, u)))
    y = _ew.bitwise_and(_ew.add(y, _ew.shift_right_logical(y, _c(4, u))), _c(m4, u))
    s = 8
    while s < w:
        y = _ew.add(y, _ew.shift_right_logical(y, _c(s, u)))
        s *= 2
    return _back(_ew.bitwise_and(y, _c(2 * w - 1 if w < 128 else 255, u)), dtype)


def clz(x):
    """The number of leading zero bits of each element (``jax.lax.clz``; the width for 0):
    a binary search in ``w/2, w/4, ..., 1`` bit steps. Integer operands only, as JAX."""
    dtype, u, w = _int_info("clz", x)
    y = _unsigned(x, u)
    shape = tuple(get_aval(y).shape)
    n = _st.full(shape, 0, u) if shape else _c(0, u)
    zero = _c(0, u)
    s = w // 2
    while s >= 1:
        t = _ew.shift_right_logical(y, _c(s, u))
        none = _ew.eq(t, zero)
        n = _ew.select(none, _ew.add(n, _c(s, u)), n)
        y = _ew.select(none, y, t)
        s //= 2
    n = _ew.add(n, _ew.convert_element_type(_ew.eq(y, zero), u))
    return _back(n, dtype)
