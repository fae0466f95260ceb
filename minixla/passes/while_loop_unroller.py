"""Full unrolling of short loops (XLA's ``while_loop_unroller.cc``), behind an option.

A ``while`` with a known trip count of at most ``max_trip_count`` is replaced by that many
copies of its body, one after the other, on the initial state. This trades compile time (and
code size) for no loop overhead and freedom for the other passes across iterations; it is
not in the default pipeline (``minixla.jit`` keeps loops loops, so compile time does not grow
with the trip count). Add it with ``PassPipeline``/``optimization_pipeline`` edits or use it
directly: ``WhileLoopUnroller(8).run(module)``.
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements, inline, replace_tuple_value, trip_count


class WhileLoopUnroller(HloPass):
    name = "while-loop-unroller"

    def __init__(self, max_trip_count: int = 8):
        self.max_trip_count = max_trip_count

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                init = init_elements(loop)
                n = trip_count(loop)
                if init is None or n is None or n > self.max_trip_count:
                    continue
                state = init
                for _ in range(n):
                    state = inline(comp, loop, loop.called[1], state)
                replace_tuple_value(comp, loop, state)
                comp.remove_dead()
                changed = True
        return changed
