"""Tuple simplification (XLA's ``tuple_simplifier.cc``).

Rules, each exact (tuples only move values):

- ``get-tuple-element(tuple(a_0, ..., a_n), index=k)`` -> ``a_k``;
- ``tuple(get-tuple-element(t, 0), ..., get-tuple-element(t, n))`` of every element of a
  tuple-shaped ``t``, in order -> ``t`` (not at a computation's root: the entry returns a
  ``tuple`` of its outputs, and a loop body's root stays a ``tuple`` the loop passes can edit).

The loop passes leave such pairs behind when they inline a body or a branch.
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass


class TupleSimplifier(HloPass):
    name = "tuple-simplifier"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            mapping = {}
            for instr in comp.instructions:
                if any(o in mapping for o in instr.operands):
                    instr.operands = [mapping.get(o, o) for o in instr.operands]
                if instr.opcode == "get-tuple-element" and instr.operands[0].opcode == "tuple":
                    mapping[instr] = instr.operands[0].operands[instr.attrs["index"]]
                elif instr.opcode == "tuple" and instr is not comp.root and instr.operands and all(
                        o.opcode == "get-tuple-element" and o.attrs["index"] == k
                        and o.operands[0] is instr.operands[0].operands[0]
                        for k, o in enumerate(instr.operands)):
                    src = instr.operands[0].operands[0]
                    if src.shape == instr.shape:
                        mapping[instr] = src
            if mapping:
                comp.replace_uses(mapping)
                changed = True
        return changed
