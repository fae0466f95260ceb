"""Import rules for JAX's bit-level primitives: ``population_count``, ``clz``, ``mulhi``,
``reduce_xor`` and ``reduce_precision`` are ``minixla.lax``'s own (``lax/bits.py``: compositions
of shifts, masks, adds, compares and selects on the operand's own width; ``reduce_precision`` a
primitive lowered to such a composition), imported as they are.
- ``eq_to``, ``le_to``, ``lt_to``: XLA's ``TOTALORDER`` comparisons (what ``jnp.searchsorted``,
  ``digitize``, ``interp`` and ``histogram`` bind): floats as the signed integers of their bits
  with the magnitude bits of negatives flipped (``lax.sort``'s key), so ``-NaN < -inf < ... <
  -0.0 < 0.0 < ... < inf < NaN``, ``-0.0 != 0.0`` and NaNs of different bits differ, as XLA;
  integers and bools by their ordinary comparison.
"""
from __future__ import annotations

from minixla import lax
from minixla.frontends.jax_importer import _broadcast_size1, _norm, import_rules
from minixla.lax.bits import clz, population_count
from minixla.lax.sorting import _total_order_key


def _mulhi(x, y):
    return lax.mulhi(*_broadcast_size1(x, y))


import_rules.update({"population_count": population_count, "clz": clz, "mulhi": _mulhi,
                     "reduce_xor": lambda x, *, axes, **_: lax.reduce_xor(x, _norm(axes)),
                     "reduce_precision": lambda x, *, exponent_bits, mantissa_bits: lax.reduce_precision(
                         x, exponent_bits, mantissa_bits)})


def _total_order(compare):
    def rule(x, y):
        x, y = _broadcast_size1(x, y)
        return compare(_total_order_key(x), _total_order_key(y))
    return rule


import_rules.update(eq_to=_total_order(lax.eq), le_to=_total_order(lax.le), lt_to=_total_order(lax.lt))
