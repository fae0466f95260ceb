"""Buffer assignment (``xla/service/buffer_assignment.cc``, ``heap_simulator.cc``).

Every array value of the entry computation needs memory. Parameters live in the caller's
arrays, constants in the executable, and the program's outputs are written straight into
fresh result arrays. Everything else is a *temporary*, and all temporaries share one *arena*:

1. **Aliasing.** A ``reshape`` of a row-major array is a bitcast: it shares its operand's buffer.
2. **Live ranges.** With the instructions run in their listed order (the schedule), a buffer
   is live from the step that defines it to the last step that reads it (inclusive: a kernel
   reads its operands while it writes its output, so they must not overlap).
3. **Heap simulation.** Buffers are placed largest first, each at the offset that leaves the
   smallest gap among the buffers whose live ranges overlap its own ("global decreasing-size
   best fit"). Buffers whose lifetimes are disjoint end up reusing the same bytes.

``naive_bytes`` (every temporary in its own allocation) versus ``arena_size`` shows the reuse.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: every temporary starts at a multiple of this (a cache line, and aligned vector loads).
ALIGNMENT = 64


@dataclass
class BufferSlice:
    """Where one value lives. ``kind`` is ``parameter``/``constant``/``output``/``temp``;
    ``index`` is the parameter or output number (-1 otherwise); ``offset`` the byte offset in
    the arena for temps; ``size`` the size in bytes."""
    kind: str
    index: int = -1
    offset: int = 0
    size: int = 0


@dataclass
class LiveRange:
    """A temporary buffer and the schedule steps ``[start, end]`` during which it is live."""
    definer: object
    start: int
    end: int
    size: int
    offset: int = 0


@dataclass
class BufferAssignment:
    """Result of buffer assignment: a slice per entry instruction and the arena layout.

    Attributes:
      slices: HloInstruction -> BufferSlice (reshapes share their operand's slice; tuples have none).
      arena_size: bytes of the one temporary arena.
      naive_bytes: bytes the temporaries would take with no reuse.
      live_ranges: the temporaries with their live ranges and offsets.
    """
    slices: dict
    arena_size: int
    naive_bytes: int
    live_ranges: list = field(default_factory=list)

    def to_string(self) -> str:
        lines = [f"arena: {self.arena_size} bytes (no reuse: {self.naive_bytes} bytes)"]
        for lr in sorted(self.live_ranges, key=lambda r: r.start):
            lines.append(f"  %{lr.definer.name}: offset {lr.offset}, {lr.size} bytes, "
                         f"live [{lr.start}, {lr.end}]")
        return "\n".join(lines)


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def assign_buffers(module) -> BufferAssignment:
    """Assign a ``BufferSlice`` to every array-valued instruction of ``module.entry``."""
    comp = module.entry
    schedule = comp.instructions
    step = {instr: n for n, instr in enumerate(schedule)}

    definer = {}
    for instr in schedule:
        definer[instr] = definer[instr.operands[0]] if instr.opcode == "reshape" else instr

    slices: dict = {}
    outputs = comp.root.operands if comp.root.opcode == "tuple" else [comp.root]
    for k, out in enumerate(outputs):
        d = definer[out]
        # A parameter, constant or value already returned once is copied by the executable.
        if d.opcode not in ("parameter", "constant") and d not in slices:
            slices[d] = BufferSlice("output", k, 0, d.shape.nbytes)

    last_use = {}
    for instr in schedule:
        for o in instr.operands:
            last_use[definer[o]] = step[instr]

    ranges = []
    for instr in schedule:
        if instr.opcode == "tuple" or definer[instr] is not instr or instr in slices:
            continue
        if instr.opcode == "parameter":
            slices[instr] = BufferSlice("parameter", instr.parameter_number, 0, instr.shape.nbytes)
        elif instr.opcode == "constant":
            slices[instr] = BufferSlice("constant", -1, 0, instr.shape.nbytes)
        else:
            end = max(last_use.get(instr, step[instr]), step[instr])
            ranges.append(LiveRange(instr, step[instr], end, instr.shape.nbytes))

    arena_size = _heap_simulate(ranges)
    for lr in ranges:
        slices[lr.definer] = BufferSlice("temp", -1, lr.offset, lr.size)
    for instr in schedule:
        if instr.opcode != "tuple" and definer[instr] is not instr:
            slices[instr] = slices[definer[instr]]
    naive = sum(lr.size for lr in ranges)
    return BufferAssignment(slices, arena_size, naive, ranges)


def _heap_simulate(ranges) -> int:
    """Place buffers largest first at the best-fitting gap among overlapping live buffers."""
    placed: list[LiveRange] = []
    arena = 0
    for lr in sorted(ranges, key=lambda r: (-r.size, r.start)):
        busy = sorted((p.offset, p.offset + _align(p.size)) for p in placed
                      if p.start <= lr.end and lr.start <= p.end)
        need = _align(lr.size)
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= need and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        lr.offset = best if best is not None else cursor
        placed.append(lr)
        arena = max(arena, lr.offset + need)
    return arena
