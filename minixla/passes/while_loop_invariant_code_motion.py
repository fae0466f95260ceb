"""Loop-invariant code motion (XLA's ``while_loop_invariant_code_motion.cc``).

A body instruction is *invariant* when every operand is: a constant, or an element of the
state the body passes through unchanged (root element ``k`` is ``get-tuple-element(param, k)``:
the loop's consts, a ``scan``'s weights). Such an instruction computes the same value every
iteration, so it is computed once before the loop instead: its invariant operands are copied
into the caller (state elements replaced by the loop's initial values), the result is
appended to the state as one more pass-through element, and the body reads that element.

Hoisted: the invariant instructions with a non-invariant user (or used by the root), not
constants, parameters or ``get-tuple-element`` s (nothing to gain), nor loops/branches.
Like XLA's default, a ``broadcast``/``iota`` of constants alone is left in the body (hoisting
it would only make the state bigger).
"""
from __future__ import annotations

from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements

_NOT_HOISTED = {"parameter", "constant", "get-tuple-element", "tuple", "while", "conditional", "opt-barrier"}
_CHEAP = {"broadcast", "iota", "reshape"}


class WhileLoopInvariantCodeMotion(HloPass):
    name = "while-loop-invariant-code-motion"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._hoist(comp, loop)
        return changed

    def _hoist(self, comp, loop) -> bool:
        init = init_elements(loop)
        cond, body = loop.called
        root = body.root
        if init is None or root.opcode != "tuple":
            return False
        param = body.parameters[0]
        passthrough = {k for k, r in enumerate(root.operands)
                       if r.opcode == "get-tuple-element" and r.operands[0] is param and r.attrs["index"] == k}
        invariant, from_constants = set(), set()
        for i in body.instructions:
            if i.opcode == "constant":
                invariant.add(i)
                from_constants.add(i)
            elif i.opcode == "get-tuple-element" and i.operands[0] is param and i.attrs["index"] in passthrough:
                invariant.add(i)
            elif i.opcode not in _NOT_HOISTED and i.operands and all(o in invariant for o in i.operands):
                invariant.add(i)
                if all(o in from_constants for o in i.operands):
                    from_constants.add(i)
        users = body.users()
        hoist = [i for i in body.instructions if i in invariant and i.opcode not in _NOT_HOISTED
                 and not (i in from_constants and i.opcode in _CHEAP)
                 and (i is root or any(u not in invariant for u in users[i]) or i in root.operands)]
        if not hoist:
            return False
        # Copy what the hoisted instructions need into the caller, before the loop.
        module = comp.module
        mapping, new = {}, []

        def copy(i):
            if i in mapping:
                return mapping[i]
            if i.opcode == "get-tuple-element" and i.operands[0] is param:
                mapping[i] = init[i.attrs["index"]]
                return mapping[i]
            ops = [copy(o) for o in i.operands]
            c = HloInstruction(i.opcode, i.shape, ops, i.attrs, i.called, module.unique_name(i.name.split(".")[0]),
                               None, i.literal, dict(i.metadata))
            new.append(c)
            mapping[i] = c
            return c
        hoisted = [copy(h) for h in hoist]
        at = comp.instructions.index(loop.operands[0])
        comp.instructions[at:at] = new
        n = len(init)
        shape = Shape.tuple_of(list(loop.shape.tuple_shapes) + [h.shape for h in hoist])
        loop.operands[0].operands = list(init) + hoisted
        loop.operands[0].shape = shape
        loop.shape = shape
        for c in (cond, body):
            c.parameters[0].shape = shape
        reads = {}
        for m, h in enumerate(hoist):
            reads[h] = body.add_instruction(HloInstruction(
                "get-tuple-element", h.shape, [param], {"index": n + m}, name=module.unique_name("get-tuple-element")))
        # (the new reads go right after the parameter, before their users)
        body.instructions = [param] + list(reads.values()) + [i for i in body.instructions
                                                              if i is not param and i not in reads.values()]
        body.replace_uses(reads)
        new_root = HloInstruction("tuple", shape, list(root.operands) + list(reads.values()),
                                  name=module.unique_name("tuple"))
        body.instructions.append(new_root)
        body.root = new_root
        body.remove_dead()
        return True
