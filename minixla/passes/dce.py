"""Dead-code elimination (``xla/hlo/transforms/simplifiers/hlo_dce.cc``).

Rule: an instruction is dead when the computation's root does not depend on it. Parameters
are never removed (they are the computation's signature); nothing in minixla has side effects
yet, so liveness is plain reachability to the root in the dataflow graph. Computations that no
live instruction calls any more simply stop being printed (the module lists what the entry calls).
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass


class DeadCodeElimination(HloPass):
    name = "dce"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            changed |= comp.remove_dead()
        return changed
