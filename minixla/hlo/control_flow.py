"""Lowering ``cond``, ``while`` and ``scan`` to HLO ``conditional`` and ``while``
(``jax/_src/lax/control_flow/loops.py`` and ``conditionals.py``, their MLIR lowerings).

HLO has no implicit captures: a called computation sees only its parameter. So, as XLA's
``while`` and ``conditional`` require, each sub-jaxpr becomes a computation of **one
tuple-shaped parameter**, unpacked with ``get-tuple-element``:

- ``while``: the state is ``(cond_consts..., body_consts..., carry...)``; the condition
  computation maps it to a ``pred[]``, the body to the next state (consts passed through).
  The results are ``get-tuple-element`` s of the ``while``.
- ``cond``: ``conditional(index, operands_tuple, ...)`` with one branch computation per
  branch, each taking the operands tuple and returning a tuple of the outputs; an ``s32``
  index out of range runs the last branch (XLA's semantics; ``lax.switch`` clamps before).
- ``scan``: a ``while`` over ``(i, consts..., carry..., xs..., ys...)`` whose body reads
  step ``t = i`` (``length - 1 - i`` when reversed) of each ``xs`` with ``dynamic-slice``
  and writes each ``y`` into ``ys`` with ``dynamic-update-slice``, as JAX lowers it.
  A scan of length 0 is no loop at all: its carry is the initial one and ``ys`` are empty.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import HloInstruction, Shape
from minixla.hlo.lowering import LoweringContext, lower_jaxpr_body, lowering_rules, shape_of
from minixla.lax.control_flow import cond_p, scan_p, while_p


def tuple_param_computation(ctx, base: str, shapes):
    """A new computation of one tuple parameter of ``shapes``; returns it, a context adding to
    it and the ``get-tuple-element`` of each element."""
    comp = ctx.module.new_computation(base)
    sub = LoweringContext(ctx.module, comp)
    sub.metadata = dict(ctx.metadata)
    tshape = Shape.tuple_of(shapes)
    param = comp.add_instruction(HloInstruction(
        "parameter", tshape, name=ctx.module.unique_name("arg_tuple"), parameter_number=0))
    elems = [sub.add("get-tuple-element", s, [param], index=k) for k, s in enumerate(shapes)]
    return comp, sub, elems


def _tuple(ctx, values):
    return ctx.add("tuple", Shape.tuple_of([v.shape for v in values]), values)


def _elements(ctx, tup, first, count):
    shapes = tup.shape.tuple_shapes
    return [ctx.add("get-tuple-element", shapes[k], [tup], index=k) for k in range(first, first + count)]


def _while(ctx, operands, in_avals, out_avals, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    shapes = [o.shape for o in operands]
    n = cond_nconsts + body_nconsts
    cond_comp, cctx, elems = tuple_param_computation(ctx, "while_cond", shapes)
    cond_comp.root, = lower_jaxpr_body(cctx, cond_jaxpr.jaxpr, [], elems[:cond_nconsts] + elems[n:])
    body_comp, bctx, elems = tuple_param_computation(ctx, "while_body", shapes)
    outs = lower_jaxpr_body(bctx, body_jaxpr.jaxpr, [], elems[cond_nconsts:])
    body_comp.root = _tuple(bctx, elems[:n] + outs)
    loop = ctx.add("while", Shape.tuple_of(shapes), [_tuple(ctx, operands)], called=[cond_comp, body_comp])
    return _elements(ctx, loop, n, len(out_avals))


lowering_rules[while_p] = _while


def _cond(ctx, operands, in_avals, out_avals, *, branches):
    index, *ops = operands
    shapes = [o.shape for o in ops]
    arg = _tuple(ctx, ops)
    comps = []
    for k, branch in enumerate(branches):
        comp, sub, elems = tuple_param_computation(ctx, f"branch_{k}", shapes)
        comp.root = _tuple(sub, lower_jaxpr_body(sub, branch.jaxpr, [], elems))
        comps.append(comp)
    out = ctx.add("conditional", Shape.tuple_of([shape_of(a) for a in out_avals]),
                  [index] + [arg] * len(branches), called=comps)
    return _elements(ctx, out, 0, len(out_avals))


lowering_rules[cond_p] = _cond


def _s32(ctx, value):
    return ctx.constant(np.int32(value), np.int32)


def _scan(ctx, operands, in_avals, out_avals, *, jaxpr, length, num_carry, num_consts, reverse, unroll):
    consts = operands[:num_consts]
    carry = operands[num_consts:num_consts + num_carry]
    xs = operands[num_consts + num_carry:]
    y_shapes = [shape_of(a) for a in out_avals[num_carry:]]
    zeros = [ctx.add("broadcast", s, [ctx.constant(0, s.dtype)], dimensions=()) for s in y_shapes]
    if length == 0:
        return list(carry) + zeros
    state = [_s32(ctx, 0)] + list(consts) + list(carry) + list(xs) + zeros
    shapes = [s.shape for s in state]
    nc, nx = num_consts + num_carry, len(xs)

    cond_comp, cctx, elems = tuple_param_computation(ctx, "scan_cond", shapes)
    cond_comp.root = cctx.add("compare", Shape(np.bool_, ()), [elems[0], _s32(cctx, length)], direction="LT")

    body_comp, b, elems = tuple_param_computation(ctx, "scan_body", shapes)
    i = elems[0]
    t = b.add("subtract", i.shape, [_s32(b, length - 1), i]) if reverse else i
    x_elems = elems[1 + nc:1 + nc + nx]
    slices = []
    for x in x_elems:
        rest = x.shape.dims[1:]
        zero = [_s32(b, 0) for _ in rest]
        row = b.add("dynamic-slice", Shape(x.shape.dtype, (1,) + rest), [x, t] + zero,
                    dynamic_slice_sizes=(1,) + rest)
        slices.append(b.add("reshape", Shape(x.shape.dtype, rest), [row]))
    outs = lower_jaxpr_body(b, jaxpr.jaxpr, [], elems[1:1 + nc] + slices)
    new_ys = []
    for ys, y in zip(elems[1 + nc + nx:], outs[num_carry:]):
        rest = ys.shape.dims[1:]
        row = b.add("reshape", Shape(ys.shape.dtype, (1,) + rest), [y])
        new_ys.append(b.add("dynamic-update-slice", ys.shape, [ys, row, t] + [_s32(b, 0) for _ in rest]))
    one = _s32(b, 1)
    body_comp.root = _tuple(b, [b.add("add", i.shape, [i, one])] + elems[1:1 + num_consts]
                            + outs[:num_carry] + x_elems + new_ys)
    loop = ctx.add("while", Shape.tuple_of(shapes), [_tuple(ctx, state)], called=[cond_comp, body_comp])
    loop.attrs["trip_count"] = length  # (known: the loop passes and the backends may use it)
    return _elements(ctx, loop, 1 + num_consts, num_carry) + _elements(ctx, loop, 1 + nc + nx, len(y_shapes))


lowering_rules[scan_p] = _scan
