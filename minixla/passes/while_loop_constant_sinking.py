"""Constant sinking (XLA's ``while_loop_constant_sinking.cc``).

A state element the body passes through unchanged whose initial value is a ``constant`` holds
that constant in every iteration: the condition and the body read a copy of the constant
instead of the element, so constant folding and the simplifier can use its value inside the
loop (a ``fori_loop`` bound, a scale factor). The element itself is then dead and the
while-loop simplifier removes it.
"""
from __future__ import annotations

from minixla.hlo.ir import HloInstruction
from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements


class WhileLoopConstantSinking(HloPass):
    name = "while-loop-constant-sinking"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._sink(comp.module, loop)
        return changed

    @staticmethod
    def _sink(module, loop) -> bool:
        init = init_elements(loop)
        cond, body = loop.called
        if init is None or body.root.opcode != "tuple":
            return False
        p = body.parameters[0]
        constant = {k for k, (e, r) in enumerate(zip(init, body.root.operands))
                    if e.opcode == "constant" and r.opcode == "get-tuple-element" and r.operands[0] is p
                    and r.attrs["index"] == k}
        changed = False
        for c in (cond, body):
            param = c.parameters[0]
            mapping = {}
            for i in c.instructions:
                if i.opcode == "get-tuple-element" and i.operands[0] is param and i.attrs["index"] in constant:
                    users = [u for u in c.instructions if i in u.operands and not (c is body and u is c.root)]
                    if not users:
                        continue
                    k = i.attrs["index"]
                    mapping[i] = HloInstruction("constant", init[k].shape, literal=init[k].literal,
                                                name=module.unique_name("constant"))
            if not mapping:
                continue
            root_ops = list(c.root.operands) if c is body else None
            c.instructions[0:0] = list(mapping.values())
            c.replace_uses(mapping)
            if c is body:  # the pass-through itself stays (the element is still the state's)
                c.root.operands = root_ops
            changed = True
        return changed
