"""Optimization barrier expander (XLA's ``xla/service/optimization_barrier_expander.cc``).

Rule: once the optimization passes have run, every ``opt-barrier`` is replaced by its operand
(``get-tuple-element(opt-barrier(tuple(a, b)), 0)`` then simplifies to ``a``). Until then the
barrier keeps CSE, fusion, the simplifiers, constant folding and loop-invariant code motion from
working across it; after them nothing moves code any more, and the LLVM backend's buffers and
schedule follow the program order the passes left. XLA:CPU runs the same expansion before
code generation. The JAX hand-off keeps the barrier (XLA expands it itself).
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass

#: the opcodes this pass removes before the LLVM backend generates code
EXPANDED_OPCODES = frozenset({"opt-barrier"})


class OptimizationBarrierExpander(HloPass):
    name = "optimization-barrier-expander"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            barriers = {i: i.operands[0] for i in comp.instructions if i.opcode == "opt-barrier"}
            if not barriers:
                continue
            for instr in comp.instructions:  # gte(barrier(tuple(...)), k) -> the k-th element
                if instr.opcode == "get-tuple-element" and instr.operands[0] in barriers:
                    tup = barriers[instr.operands[0]]
                    if tup.opcode == "tuple":
                        barriers.setdefault(instr, tup.operands[instr.attrs["index"]])
            comp.replace_uses(barriers)  # (each maps to an earlier instruction: the order holds)
            comp.remove_dead()  # (the barriers and their get-tuple-elements have no users now)
            changed = True
        return changed
