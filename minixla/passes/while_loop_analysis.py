"""What the loop passes share: trip counts and inlining a called computation
(XLA's ``while_loop_analysis.cc`` ``ComputeWhileLoopTripCount`` and ``call_inliner.cc``).

``trip_count(while)`` recognizes the loop every ``fori_loop``/``scan`` lowers to: a scalar
integer induction variable ``i`` (state element ``k``) whose initial value is a constant ``c``,
which the body increments by a positive constant ``s`` and which the condition compares with
a constant ``n`` (``i < n`` or ``i <= n``): ``max(0, ceil((n - c) / s))`` trips (``n + 1 - c``
for ``<=``). Anything else is ``None`` (unknown): the passes then leave the loop alone.

``inline(comp, at, callee, args)`` copies ``callee``'s instructions into ``comp`` just before
instruction ``at``, its tuple parameter's elements replaced by ``args``; it returns the
instructions of the callee's root elements. Computations the copied instructions call are
cloned too, so that no two instructions share a loop body a later pass may rewrite.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import HloComputation, HloInstruction


def _scalar_int_constant(instr):
    if instr.opcode == "constant" and instr.shape.rank == 0 and np.dtype(instr.shape.dtype).kind in "iu":
        return int(np.asarray(instr.literal))
    return None


def _param_element(comp, instr):
    """``k`` if ``instr`` is ``get-tuple-element(parameter(0)), index=k`` of ``comp``."""
    if instr.opcode == "get-tuple-element" and instr.operands[0].opcode == "parameter" \
            and instr.operands[0] in comp.instructions:
        return instr.attrs["index"]
    return None


def init_elements(loop):
    """The instructions of a ``while``'s initial state (its operand is a ``tuple``), or None."""
    op = loop.operands[0]
    return list(op.operands) if op.opcode == "tuple" else None


def trip_count(loop) -> int | None:
    """The number of times the body of ``loop`` runs, when it is known (see the module docstring)."""
    cond, body = loop.called
    init = init_elements(loop)
    root = cond.root
    if init is None or root.opcode != "compare" or root.attrs.get("direction") not in ("LT", "LE"):
        return None
    k = _param_element(cond, root.operands[0])
    n = _scalar_int_constant(root.operands[1])
    if k is None or n is None:
        return None
    c = _scalar_int_constant(init[k])
    step = body.root.operands[k] if body.root.opcode == "tuple" else None
    if c is None or step is None or step.opcode != "add":
        return None
    a, b = step.operands
    if _param_element(body, a) != k:
        a, b = b, a
    s = _scalar_int_constant(b)
    if _param_element(body, a) != k or s is None or s <= 0:
        return None
    if root.attrs["direction"] == "LE":
        n += 1
    return max(0, -(-(n - c) // s))


def clone_computation(module, comp, memo=None) -> HloComputation:
    """A copy of ``comp`` (and of the computations it calls) with fresh names in ``module``."""
    memo = {} if memo is None else memo
    if comp in memo:
        return memo[comp]
    new = module.new_computation(comp.name.split(".")[0])
    mapping = {}
    for i in comp.instructions:
        mapping[i] = new.add_instruction(HloInstruction(
            i.opcode, i.shape, [mapping[o] for o in i.operands], i.attrs,
            [clone_computation(module, c, memo) for c in i.called], module.unique_name(i.name.split(".")[0]),
            i.parameter_number, i.literal, dict(i.metadata)))
    new.root = mapping[comp.root]
    memo[comp] = new
    return new


def inline(comp, at, callee, args) -> list:
    """Copy ``callee`` into ``comp`` before ``at`` with its parameter's elements ``args``;
    returns the copies of the root's elements (the root itself if it is not a tuple)."""
    module = comp.module
    param = callee.parameters[0]
    mapping, new = {}, []
    for i in callee.instructions:
        if i is param:
            continue
        if i.opcode == "get-tuple-element" and i.operands[0] is param:
            mapping[i] = args[i.attrs["index"]]
            continue
        if any(o is param for o in i.operands):  # the whole tuple: rebuild it from the args
            if param not in mapping:
                from minixla.hlo.ir import Shape
                t = HloInstruction("tuple", Shape.tuple_of([a.shape for a in args]), list(args),
                                   name=module.unique_name("tuple"))
                new.append(t)
                mapping[param] = t
        copy = HloInstruction(i.opcode, i.shape, [mapping[o] for o in i.operands], i.attrs,
                              [clone_computation(module, c) for c in i.called],
                              module.unique_name(i.name.split(".")[0]), i.parameter_number, i.literal,
                              dict(i.metadata))
        mapping[i] = copy
        new.append(copy)
    pos = comp.instructions.index(at)
    comp.instructions[pos:pos] = new
    root = callee.root
    if root is param:
        return list(args)
    if root.opcode == "tuple":
        return [mapping[o] for o in root.operands]
    return [mapping[root]]


def replace_tuple_value(comp, instr, elements) -> None:
    """Every ``get-tuple-element(instr), index=k`` now reads ``elements[k]``; any other use of
    ``instr`` reads a ``tuple`` of them."""
    from minixla.hlo.ir import Shape
    mapping = {}
    other = False
    for u in comp.instructions:
        if u.opcode == "get-tuple-element" and u.operands and u.operands[0] is instr:
            mapping[u] = elements[u.attrs["index"]]
        elif any(o is instr for o in u.operands):
            other = True
    if other or comp.root is instr:
        t = HloInstruction("tuple", Shape.tuple_of([e.shape for e in elements]), list(elements),
                           name=comp.module.unique_name("tuple"))
        comp.instructions.insert(comp.instructions.index(instr) + 1, t)
        mapping[instr] = t
    comp.replace_uses(mapping)
