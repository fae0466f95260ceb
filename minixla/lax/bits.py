"""Bit-level ops composed of shifts, masks, adds, compares and selects (``jax.lax`` has
primitives for them; here they are composites, so every pass, backend and transformation
handles them as it handles those ops): ``population_count``, ``clz``, ``mulhi``, ``reduce_xor``
and ``reduce_precision``. A signed operand is bitcast to the unsigned type of its width and
back. Integers have no derivative. ``reduce_precision`` is a primitive (``reduce_precision_p``,
JAX's): its derivative is JAX's -- it is treated as linear, the tangent and the cotangent are
rounded alike -- which the composite's bitcasts could not give; it lowers to that composite
(``expand_reduce_precision``, ``minixla.hlo.bits``).
``minixla.frontends.jax_bits`` imports JAX's primitives of these names as these functions.

- ``mulhi``: the high ``w`` bits of the ``2w``-bit product by schoolbook multiplication on
  ``w/2``-bit halves in the unsigned type (no wider type needed, so 32-bit without x64); signed
  operands as unsigned, then minus ``y`` where ``x < 0`` and ``x`` where ``y < 0`` (mod ``2**w``).
- ``reduce_xor``: pairwise halving along each reduced axis (xor is associative and commutative:
  the order does not change the bits); bools included.
- ``reduce_precision``: XLA's ``ReducePrecision`` on the float's bits (round the mantissa to
  nearest even, flush exponents outside the reduced range to signed zero / infinity).
"""
from __future__ import annotations

import operator

import ml_dtypes
import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import elementwise as _ew, structural as _st
from minixla.lax.base import _check_dims, _is_float, _scalar_like, _std_prim

__all__ = ["population_count", "clz", "mulhi", "reduce_xor", "reduce_precision", "reduce_precision_p"]


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


def mulhi(x, y, /):
    """The high half of the double-width product of each pair, ``(x * y) >> w`` exactly
    (``jax.lax.mulhi``): integer operands of one dtype and shape (or a rank-0 one), result of
    that dtype. ``DTypeError`` (``TypeError``) for a float operand or two dtypes, ``ShapeError``
    (``ValueError``) for shapes that differ, as JAX's checks."""
    x, y = _scalar_like(x, y), _scalar_like(y, x)
    xa, ya = get_aval(x), get_aval(y)
    for k, a in enumerate((xa, ya)):
        if a.dtype.kind not in "iu":
            raise errors.DTypeError(f"mulhi does not accept dtype {a.dtype.name} at position {k}. Accepted "
                                    f"dtypes at position {k} are subtypes of integer.")
    if xa.dtype != ya.dtype:
        raise errors.DTypeError(f"lax.mulhi requires arguments to have the same dtypes, got "
                                f"{xa.dtype.name}, {ya.dtype.name}.")
    if xa.shape != ya.shape and xa.ndim and ya.ndim:
        raise errors.ShapeError(f"mulhi got incompatible shapes for broadcasting: {tuple(xa.shape)}, "
                                f"{tuple(ya.shape)}.")
    shape = tuple(xa.shape) or tuple(ya.shape)
    x, y = (v if tuple(get_aval(v).shape) == shape else _st.broadcast_in_dim(v, shape, ()) for v in (x, y))
    dtype, u, w = _int_info("mulhi", x)
    h = w // 2
    mask, half = _c((1 << h) - 1, u), _c(h, u)
    a, b = _unsigned(x, u), _unsigned(y, u)
    al, ah = _ew.bitwise_and(a, mask), _ew.shift_right_logical(a, half)
    bl, bh = _ew.bitwise_and(b, mask), _ew.shift_right_logical(b, half)
    ll, lh, hl, hh = _ew.mul(al, bl), _ew.mul(al, bh), _ew.mul(ah, bl), _ew.mul(ah, bh)
    mid = _ew.add(_ew.add(_ew.shift_right_logical(ll, half), _ew.bitwise_and(lh, mask)),
                  _ew.bitwise_and(hl, mask))
    hi = _ew.add(_ew.add(hh, _ew.shift_right_logical(lh, half)),
                 _ew.add(_ew.shift_right_logical(hl, half), _ew.shift_right_logical(mid, half)))
    if dtype.kind == "i":  # (the signed product's high half: subtract the sign corrections)
        zero = _c(0, dtype)
        uzero = _st.full(shape, 0, u) if shape else _c(0, u)
        hi = _ew.sub(hi, _ew.select(_ew.lt(x, zero), b, uzero))
        hi = _ew.sub(hi, _ew.select(_ew.lt(y, zero), a, uzero))
    return _back(hi, dtype)


def reduce_xor(operand, axes):
    """The bitwise xor of ``operand`` over ``axes`` (``jax.lax.reduce_xor``): integer or bool
    operands, the reduced axes removed, the dtype kept; 0 (False) over an empty axis.
    ``DTypeError`` (``TypeError``) for a float operand, ``ShapeError`` (``ValueError``) for an
    axis out of range or repeated."""
    x = operand
    dtype, shape = get_aval(x).dtype, list(get_aval(x).shape)
    if dtype.kind not in "iub":
        raise errors.DTypeError(f"logical reduction requires operand dtype bool or int, got {dtype.name}.")
    axes = [int(a) for a in axes]
    _check_dims("reduce_xor", axes, len(shape))
    for axis in sorted(axes, reverse=True):
        shape = list(get_aval(x).shape)
        if shape[axis] == 0:
            shape.pop(axis)
            x = _st.full(tuple(shape), 0, dtype)
            continue
        while shape[axis] > 1:
            n = shape[axis]
            m = n // 2

            def part(lo, hi):
                start, limit = [0] * len(shape), list(shape)
                start[axis], limit[axis] = lo, hi
                return _st.slice(x, tuple(start), tuple(limit))
            y = _ew.bitwise_xor(part(0, m), part(m, 2 * m))
            x = _st.concatenate([y, part(n - 1, n)], axis) if n % 2 else y
            shape[axis] = m + n % 2
        shape.pop(axis)
        x = _st.reshape(x, tuple(shape))
    return x


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """``operand`` rounded to a float of ``exponent_bits``/``mantissa_bits`` and back, as XLA's
    ``ReducePrecision`` (``jax.lax.reduce_precision``): the mantissa rounded to nearest even on
    the bits, then exponents past the reduced range to signed infinity (overflow) or signed zero
    (at or below the smallest normal: no denormals), a NaN kept as it is (with ``mantissa_bits=0``
    too, as XLA:CPU). Float operands (any float dtype), same shape and dtype out; a Python float
    gives a weak float32. Raises ``DTypeError`` (``TypeError``) for a non-float operand,
    ``TypeError`` for non-integer bit counts, ``ValueError`` for ``exponent_bits < 1`` or
    ``mantissa_bits < 0`` (JAX's messages)."""
    exponent_bits, mantissa_bits = operator.index(exponent_bits), operator.index(mantissa_bits)
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got {mantissa_bits}")
    return reduce_precision_p.bind(_scalar_like(operand, None), exponent_bits=exponent_bits,
                                   mantissa_bits=mantissa_bits)


def _reduce_precision_rule(x, *, exponent_bits, mantissa_bits):
    if not _is_float(x.dtype):
        raise errors.DTypeError(f"reduce_precision does not accept dtype {x.dtype.name}. Accepted dtypes are "
                                "subtypes of floating.")
    return x


#: XLA's ``ReducePrecision`` (JAX's ``reduce_precision_p``): lowered to ``expand_reduce_precision``
reduce_precision_p = _std_prim("reduce_precision", _reduce_precision_rule)


def expand_reduce_precision(x, exponent_bits, mantissa_bits):
    """``reduce_precision``'s value in integer ops on the float's bits (what it lowers to)."""
    dtype = get_aval(x).dtype
    nbits, src_mant = dtype.itemsize * 8, int(ml_dtypes.finfo(dtype).nmant)
    src_exp = nbits - 1 - src_mant
    u = np.dtype(f"uint{nbits}")
    bits = _ew.bitcast_convert_type(x, u)
    if mantissa_bits < src_mant:
        last = 1 << (src_mant - mantissa_bits)
        last_bit = _ew.shift_right_logical(_ew.bitwise_and(bits, _c(last, u)), _c(src_mant - mantissa_bits, u))
        bias = _ew.add(last_bit, _c((last >> 1) - 1, u))
        bits = _ew.bitwise_and(_ew.add(bits, bias), _c(((1 << nbits) - 1) & ~(last - 1), u))
    if exponent_bits < src_exp:
        sign_mask, exp_mask = 1 << (nbits - 1), ((1 << src_exp) - 1) << src_mant
        exp_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        e = _ew.bitwise_and(bits, _c(exp_mask, u))
        overflows = _ew.gt(e, _c((exp_bias + reduced_bias) << src_mant, u))
        underflows = _ew.le(e, _c((exp_bias - reduced_bias) << src_mant, u))
        signed_zero = _ew.bitwise_and(bits, _c(sign_mask, u))
        signed_inf = _ew.bitwise_or(signed_zero, _c(exp_mask, u))
        bits = _ew.select(overflows, signed_inf, _ew.select(underflows, signed_zero, bits))
    return _ew.select(_ew.ne(x, x), x, _ew.bitcast_convert_type(bits, dtype))
