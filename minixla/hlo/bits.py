"""Lowering of ``reduce_precision`` (``minixla.lax.bits``): the integer ops of
``expand_reduce_precision`` on the operand's own float type, traced once per shape, dtype and
bit widths and inlined (JAX's ``mlir.lower_fun``), so every backend runs the same bits."""
from __future__ import annotations

import functools

import numpy as np

from minixla.core.avals import ShapedArray
from minixla.hlo.lowering import inline_jaxpr, lowering_rules
from minixla.lax.bits import expand_reduce_precision, reduce_precision_p


@functools.lru_cache(maxsize=64)
def _traced(dims, dtype, exponent_bits, mantissa_bits):
    from minixla.core.tracing import trace_to_jaxpr
    return trace_to_jaxpr(lambda x: [expand_reduce_precision(x, exponent_bits, mantissa_bits)],
                          [ShapedArray(dims, dtype)])


def _reduce_precision(ctx, operands, in_avals, out_aval, *, exponent_bits, mantissa_bits):
    closed = _traced(tuple(out_aval.shape), np.dtype(out_aval.dtype), exponent_bits, mantissa_bits)
    out, = inline_jaxpr(ctx, closed, operands)
    return out


lowering_rules[reduce_precision_p] = _reduce_precision
