"""Conditional simplification (XLA's ``conditional_simplifier.cc``).

A ``conditional`` whose index (``pred`` or ``s32``) is a constant, or that has one branch,
always runs the same branch: that branch's instructions are inlined in its place (an ``s32``
out of range picks the last branch, as the ``conditional`` itself would). The results that
were read with ``get-tuple-element`` are then the inlined branch's root elements.
"""
from __future__ import annotations

import numpy as np

from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import inline, replace_tuple_value


def taken_branch(instr) -> int | None:
    """The branch a ``conditional`` surely runs, or None."""
    n = len(instr.called)
    if n == 1:
        return 0
    index = instr.operands[0]
    if index.opcode != "constant":
        return None
    v = np.asarray(index.literal)
    if v.dtype == np.bool_:
        return 0 if bool(v) else 1  # true_computation, false_computation
    k = int(v)
    return k if 0 <= k < n else n - 1


class ConditionalSimplifier(HloPass):
    name = "conditional-simplifier"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for instr in [i for i in comp.instructions if i.opcode == "conditional"]:
                k = taken_branch(instr)
                if k is None:
                    continue
                op = instr.operands[1 + k]
                if op.opcode != "tuple":
                    continue
                outs = inline(comp, instr, instr.called[k], list(op.operands))
                replace_tuple_value(comp, instr, outs)
                comp.remove_dead()
                changed = True
        return changed
