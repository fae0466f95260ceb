"""While-loop simplification (XLA's ``while_loop_simplifier.cc``).

Rules, for a ``while`` whose operand is a ``tuple`` (how every loop is lowered):

1. **Zero trips** (``trip_count`` is 0, or the condition is a constant ``false``): the loop is
   its initial state; its ``get-tuple-element`` s read the operand's elements.
2. **One trip**: the body is inlined once on the initial state (the condition needs no check).
3. **Dead state elements**: element ``k`` is removed from the state (operand, condition,
   body, result) when the caller never reads it, the condition does not read it and the body
   reads it only to compute element ``k`` itself (a ``scan`` output nobody uses, a counter
   left over from inlining). The body's work for it then goes with DCE.

Trip counts come from ``while_loop_analysis.trip_count``; an unknown count changes nothing.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements, inline, replace_tuple_value, trip_count


def _always_false(cond) -> bool:
    r = cond.root
    return r.opcode == "constant" and not bool(np.asarray(r.literal))


class WhileLoopSimplifier(HloPass):
    name = "while-loop-simplifier"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                if loop in comp.instructions:  # (not removed as dead by an earlier loop's rewrite)
                    changed |= self._simplify(comp, loop)
        return changed

    def _simplify(self, comp, loop) -> bool:
        init = init_elements(loop)
        if init is None:
            return False
        trips = 0 if _always_false(loop.called[0]) else trip_count(loop)
        if trips == 0:
            replace_tuple_value(comp, loop, init)
            comp.remove_dead()
            return True
        if trips == 1:
            outs = inline(comp, loop, loop.called[1], init)
            replace_tuple_value(comp, loop, outs)
            comp.remove_dead()
            return True
        return self._remove_dead_elements(comp, loop, init)

    def _remove_dead_elements(self, comp, loop, init) -> bool:
        cond, body = loop.called
        if body.root.opcode != "tuple":
            return False
        users = [u for u in comp.instructions if any(o is loop for o in u.operands)]
        if comp.root is loop or any(u.opcode != "get-tuple-element" for u in users):
            return False
        read_outside = {u.attrs["index"] for u in users}
        read_by_cond = _elements_read(cond)
        if read_by_cond is None:
            return False
        import networkx as nx  # (here: ~0.2 s to import, and most programs have no loop)
        g = body.graph()
        param = body.parameters[0]
        gtes = {}
        for i in body.instructions:
            if i.opcode == "get-tuple-element" and i.operands[0] is param:
                gtes.setdefault(i.attrs["index"], []).append(i)
            elif param in i.operands:
                return False  # the whole state is used: keep it as it is
        n = len(init)
        # which root elements each element's reads flow into: one ancestors walk per root
        # element (walking all the others' for every element was quadratic: ~3 s of an rbg
        # gamma's compile, whose Philox loops carry dozens of elements)
        feeds = {}
        for j, r in enumerate(body.root.operands):
            for x in nx.ancestors(g, r) | {r}:
                feeds.setdefault(x, set()).add(j)
        dead = []
        for k in range(n):
            if k in read_outside or k in read_by_cond:
                continue
            if not any(feeds.get(x, set()) - {k} for x in gtes.get(k, [])):
                dead.append(k)
        if not dead:
            return False
        keep = [k for k in range(n) if k not in dead]
        new_index = {k: m for m, k in enumerate(keep)}
        shape = Shape.tuple_of([loop.shape.tuple_shapes[k] for k in keep])
        body.root = body.add_instruction(HloInstruction(
            "tuple", shape, [body.root.operands[k] for k in keep], name=comp.module.unique_name("tuple")))
        for c in (cond, body):
            c.remove_dead()
            p = c.parameters[0]
            p.shape = shape
            for i in c.instructions:
                if i.opcode == "get-tuple-element" and i.operands[0] is p:
                    i.attrs = dict(i.attrs, index=new_index[i.attrs["index"]])
        operand = HloInstruction("tuple", shape, [init[k] for k in keep], name=comp.module.unique_name("tuple"))
        comp.instructions.insert(comp.instructions.index(loop), operand)
        loop.operands = [operand]
        loop.shape = shape
        for u in users:
            u.attrs = dict(u.attrs, index=new_index[u.attrs["index"]])
        comp.remove_dead()
        return True


def _elements_read(comp):
    """The tuple elements a computation reads from its parameter (None: it uses the whole tuple)."""
    param = comp.parameters[0]
    read = set()
    for i in comp.instructions:
        if i.opcode == "get-tuple-element" and i.operands[0] is param:
            read.add(i.attrs["index"])
        elif param in i.operands:
            return None
    import networkx as nx
    live = set(nx.ancestors(comp.graph(), comp.root)) | {comp.root}
    return {i.attrs["index"] for i in comp.instructions if i in live and i.opcode == "get-tuple-element"
            and i.operands[0] is param} if read else read
