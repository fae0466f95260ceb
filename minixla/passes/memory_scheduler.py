"""Memory-aware scheduling (XLA's ``xla/service/hlo_memory_scheduler.cc``, its list scheduler).

Buffer assignment takes the order of the entry's instructions as the schedule: a value is
live from the kernel that writes it to the last kernel that reads it. The order the program
was traced in is rarely the one that keeps the fewest bytes live. A training step is the
clearest case: reverse mode emits every weight gradient, and the optimizer emits every
update, after the whole backward pass, so each forward activation stays live until the end
although its last reader (the weight gradient of its layer, fused with the update) could
run as soon as the layer's output gradient exists.

Rule (greedy list scheduling, as XLA's ``ListScheduler``): repeatedly run, among the
instructions whose operands are all computed, the one with the largest *gain* = bytes of
temporaries it frees (operands whose last reader it is) minus bytes of the temporary it
writes; ties keep the program's order. The new order is kept only if its peak of live
temporary bytes is lower than the program order's (XLA likewise runs several schedulers and
keeps the best): the arena that buffer assignment makes of each order, then the peak. Reshapes and bitcasts (another name for their
operand's buffer) run as soon as they can and are seen through: a buffer is freed by the last
reader of any of its names. Parameters, constants and the program's outputs own no arena
bytes. The root stays last.

Legality: the new order is a topological order of the dataflow graph, and every instruction
is a pure function of its operands, so every value is bit-identical; only live ranges (and
so the arena size, and which kernels may run in place) change.

Cost: O(n log n): a heap of ready instructions; an instruction's gain is recomputed only when
it becomes the last reader of one of its operands.
"""
from __future__ import annotations

import heapq

from minixla.passes.buffer_assignment import assign_buffers
from minixla.passes.pipeline import HloPass

_BITCASTS = {"reshape", "bitcast"}
_NO_ARENA = {"parameter", "constant", "tuple"}


class MemoryScheduler(HloPass):
    """Reorder the entry computation to lower the peak of live temporary bytes."""
    name = "memory-scheduler"

    def run(self, module) -> bool:
        comp = module.entry
        instrs = list(comp.instructions)
        if len(instrs) < 3:
            return False
        pos = {i: n for n, i in enumerate(instrs)}
        root = comp.root
        outputs = set(root.operands) if root.opcode == "tuple" else {root}

        def base(i):
            while i.opcode in _BITCASTS:
                i = i.operands[0]
            return i

        def owned(b):  # arena bytes of the buffer whose defining instruction is ``b``
            if b.opcode in _NO_ARENA or b in outputs or b.shape.is_tuple:
                return 0
            return b.shape.nbytes

        reads = {i: ({base(o) for o in i.operands} if i.opcode not in _BITCASTS else set()) for i in instrs}
        readers = {i: set() for i in instrs}
        for i in instrs:
            for b in reads[i]:
                readers[b].add(i)
        waiting = {i: len(set(i.operands)) for i in instrs}
        users = {i: [] for i in instrs}
        for i in instrs:
            for o in set(i.operands):
                users[o].append(i)

        def gain(i):
            if i is root:
                return -float("inf")
            if i.opcode in _BITCASTS:
                return float("inf")
            freed = sum(owned(b) for b in reads[i] if len(readers[b]) == 1)
            return freed - owned(i)

        heap, version = [], {}

        def push(i):
            version[i] = version.get(i, 0) + 1
            heapq.heappush(heap, (-gain(i), pos[i], version[i], i))

        for i in instrs:
            if waiting[i] == 0:
                push(i)
        order, done = [], set()
        while heap:
            _, _, v, i = heapq.heappop(heap)
            if i in done or v != version[i]:
                continue
            done.add(i)
            order.append(i)
            for b in reads[i]:
                readers[b].discard(i)
                if len(readers[b]) == 1:
                    (last,) = readers[b]
                    if waiting[last] == 0 and last not in done:
                        push(last)  # it now frees ``b``: a higher gain
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    push(u)
        if len(order) != len(instrs):  # (a cycle: never for a valid computation)
            return False
        # As XLA's DefaultMemoryScheduler: keep whichever order needs the smaller arena (greedy
        # is a heuristic; the program's own order is often good already). The arena is the
        # buffer assignment's, whose rule 5 puts temporaries in outputs not yet written: an
        # order that writes the outputs late can leave more room there than a lower peak saves.
        if order == instrs:
            return False
        cost = {}
        for name, o in (("greedy", order), ("program", instrs)):
            comp.instructions = o
            cost[name] = (_arena(module), _peak(o, reads, owned))
        if cost["greedy"] >= cost["program"]:
            return False
        comp.instructions = order
        return True


def _arena(module) -> int:
    """Arena bytes of ``module``'s entry in its current order (``buffer_assignment``, rule 5 on)."""
    return assign_buffers(module, temps_in_outputs=True).arena_size


def _peak(order, reads, owned) -> int:
    """The most temporary bytes live at one step of ``order`` (each buffer live from its
    writer to its last reader, inclusive)."""
    last = {}
    for n, i in enumerate(order):
        for b in reads[i]:
            last[b] = n
    free_at = [0] * (len(order) + 1)
    live = peak = 0
    for n, i in enumerate(order):
        size = owned(i)
        if size:
            live += size
            free_at[last.get(i, n)] += size
        peak = max(peak, live)
        live -= free_at[n]
    return peak
