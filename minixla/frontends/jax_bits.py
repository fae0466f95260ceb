"""Import rules for JAX's bit-level primitives, as compositions of minixla's integer ops:
``population_count``, ``clz``, ``mulhi``, ``reduce_xor`` and ``reduce_precision``.

minixla has no primitives of these names; each rule builds the exact value from shifts, masks,
adds, compares and selects on the operand's own width (a signed operand is bitcast to the
unsigned type of its width and back), so every stage -- passes, the evaluator, LLVM, the
hand-off, ``vmap`` -- handles the result as it handles those ops. Integers have no derivative.

- ``population_count``, ``clz``: ``minixla.lax``'s own (``lax/bits.py``), imported as they are.
- ``mulhi``: the high ``w`` bits of the ``2w``-bit product by schoolbook multiplication on
  ``w/2``-bit halves in the unsigned type (no wider type needed, so 32-bit without x64); signed
  operands as unsigned, then minus ``y`` where ``x < 0`` and ``x`` where ``y < 0`` (mod ``2**w``).
- ``reduce_xor``: pairwise halving along each reduced axis (xor is associative and commutative:
  the order does not change the bits); bools included.
- ``reduce_precision``: XLA's ``ReducePrecision`` on the float's bits (round the mantissa to
  nearest even, flush exponents outside the reduced range to signed zero / infinity).
- ``eq_to``, ``le_to``, ``lt_to``: XLA's ``TOTALORDER`` comparisons (what ``jnp.searchsorted``,
  ``digitize``, ``interp`` and ``histogram`` bind): floats as the signed integers of their bits
  with the magnitude bits of negatives flipped (``lax.sort``'s key), so ``-NaN < -inf < ... <
  -0.0 < 0.0 < ... < inf < NaN``, ``-0.0 != 0.0`` and NaNs of different bits differ, as XLA;
  integers and bools by their ordinary comparison.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.frontends.jax_importer import _broadcast_size1, _norm, import_rules
from minixla.lax.bits import _back, _c, _int_info, _unsigned, clz, population_count
from minixla.lax.sorting import _total_order_key


def mulhi(x, y):
    x, y = _broadcast_size1(x, y)
    dtype, u, w = _int_info("mulhi", x)
    h = w // 2
    mask = _c((1 << h) - 1, u)
    a, b = _unsigned(x, u), _unsigned(y, u)
    half = _c(h, u)
    al, ah = lax.bitwise_and(a, mask), lax.shift_right_logical(a, half)
    bl, bh = lax.bitwise_and(b, mask), lax.shift_right_logical(b, half)
    ll, lh, hl, hh = lax.mul(al, bl), lax.mul(al, bh), lax.mul(ah, bl), lax.mul(ah, bh)
    mid = lax.add(lax.add(lax.shift_right_logical(ll, half), lax.bitwise_and(lh, mask)),
                  lax.bitwise_and(hl, mask))
    hi = lax.add(lax.add(hh, lax.shift_right_logical(lh, half)),
                 lax.add(lax.shift_right_logical(hl, half), lax.shift_right_logical(mid, half)))
    if dtype.kind == "i":  # (the signed product's high half: subtract the sign corrections)
        zero = _c(0, dtype)
        shape = tuple(get_aval(hi).shape)
        uzero = lax.full(shape, 0, u) if shape else _c(0, u)
        hi = lax.sub(hi, lax.select(lax.lt(x, zero), b, uzero))
        hi = lax.sub(hi, lax.select(lax.lt(y, zero), a, uzero))
    return _back(hi, dtype)


def reduce_xor(x, *, axes, **_):
    dtype = get_aval(x).dtype
    if dtype.kind not in "iub":
        raise errors.DTypeError(f"reduce_xor requires an integer or bool operand, got {dtype.name}")
    axes = sorted(int(a) for a in _norm(axes))
    for axis in reversed(axes):
        shape = list(get_aval(x).shape)
        if shape[axis] == 0:
            shape.pop(axis)
            x = lax.full(tuple(shape), 0, dtype)
            continue
        while shape[axis] > 1:
            n = shape[axis]
            m = n // 2

            def part(lo, hi):
                start = [0] * len(shape)
                limit = list(shape)
                start[axis], limit[axis] = lo, hi
                return lax.slice(x, tuple(start), tuple(limit))
            y = lax.bitwise_xor(part(0, m), part(m, 2 * m))
            x = lax.concatenate([y, part(n - 1, n)], axis) if n % 2 else y
            shape[axis] = m + n % 2
        shape.pop(axis)
        x = lax.reshape(x, tuple(shape))
    return x


import_rules.update({"population_count": population_count, "clz": clz, "mulhi": mulhi,
                     "reduce_xor": reduce_xor})


def reduce_precision(x, *, exponent_bits, mantissa_bits):
    """``x`` rounded to a float with ``exponent_bits``/``mantissa_bits`` and back, as XLA's
    ``ReducePrecision``: the mantissa rounded to nearest even on the bits, then exponents past
    the reduced range to signed infinity (overflow) or signed zero (at or below the smallest
    normal: no denormals), a NaN kept as it is (with ``mantissa_bits=0`` too, as XLA:CPU)."""
    dtype = get_aval(x).dtype
    info = np.finfo(dtype)
    nbits, src_mant = dtype.itemsize * 8, int(info.nmant)
    src_exp = nbits - 1 - src_mant
    exponent_bits, mantissa_bits = int(exponent_bits), int(mantissa_bits)
    u = np.dtype(f"uint{nbits}")
    bits = lax.bitcast_convert_type(x, u)
    if mantissa_bits < src_mant:
        last = 1 << (src_mant - mantissa_bits)
        last_bit = lax.shift_right_logical(lax.bitwise_and(bits, _c(last, u)), _c(src_mant - mantissa_bits, u))
        bias = lax.add(last_bit, _c((last >> 1) - 1, u))
        bits = lax.bitwise_and(lax.add(bits, bias), _c(((1 << nbits) - 1) & ~(last - 1), u))
    if exponent_bits < src_exp:
        sign_mask, exp_mask = 1 << (nbits - 1), ((1 << src_exp) - 1) << src_mant
        exp_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        e = lax.bitwise_and(bits, _c(exp_mask, u))
        overflows = lax.gt(e, _c((exp_bias + reduced_bias) << src_mant, u))
        underflows = lax.le(e, _c((exp_bias - reduced_bias) << src_mant, u))
        signed_zero = lax.bitwise_and(bits, _c(sign_mask, u))
        signed_inf = lax.bitwise_or(signed_zero, _c(exp_mask, u))
        bits = lax.select(overflows, signed_inf, lax.select(underflows, signed_zero, bits))
    return lax.select(lax.ne(x, x), x, lax.bitcast_convert_type(bits, dtype))


import_rules["reduce_precision"] = reduce_precision


def _total_order(compare):
    def rule(x, y):
        x, y = _broadcast_size1(x, y)
        return compare(_total_order_key(x), _total_order_key(y))
    return rule


import_rules.update(eq_to=_total_order(lax.eq), le_to=_total_order(lax.le), lt_to=_total_order(lax.lt))
