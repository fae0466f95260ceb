"""Sharding remover (XLA's ``xla/service/sharding_remover.cc``).

Rule: a ``custom-call`` with ``custom_call_target="Sharding"`` (``with_sharding_constraint``)
is replaced by its operand. A backend that runs the program on one device, without an SPMD
partitioner, runs it this way: the constraint says how the value is laid out over devices and
does not change it. (The ``sharding=`` annotations of parameters and the root stay: they
print, and mean nothing to a one-device run.)
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass


def is_sharding_custom_call(instr) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding"


class ShardingRemover(HloPass):
    name = "sharding-remover"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            mapping = {i: i.operands[0] for i in comp.instructions if is_sharding_custom_call(i)}
            if mapping:
                comp.replace_uses(mapping)
                comp.instructions = [i for i in comp.instructions if i not in mapping]
                changed = True
        return changed
