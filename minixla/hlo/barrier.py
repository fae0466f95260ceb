"""Lowering of ``optimization_barrier`` (``minixla.lax.barrier``): XLA's ``opt-barrier`` of the
operands' tuple, each result a ``get-tuple-element`` of it, as JAX lowers it
(``stablehlo.optimization_barrier``)."""
from __future__ import annotations

from minixla.hlo.ir import Shape
from minixla.hlo.lowering import lowering_rules, shape_of
from minixla.lax.barrier import optimization_barrier_p


def _optimization_barrier(ctx, operands, in_avals, out_avals):
    shape = Shape.tuple_of([shape_of(a) for a in out_avals])
    barrier = ctx.add("opt-barrier", shape, [ctx.add("tuple", shape, list(operands))])
    return [ctx.add("get-tuple-element", s, [barrier], index=k) for k, s in enumerate(shape.tuple_shapes)]


lowering_rules[optimization_barrier_p] = _optimization_barrier
