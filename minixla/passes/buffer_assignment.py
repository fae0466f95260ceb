"""Buffer assignment (``xla/service/buffer_assignment.cc``, ``hlo_dataflow_analysis.cc``,
``heap_simulator.cc``).

Every array *value* of the entry computation (the result of one instruction) needs memory.
Buffer assignment decides which *buffer* holds each value and where each buffer lives:

- a **parameter**'s value lives in the caller's array; a **constant**'s in the executable;
- the program's **outputs** are written straight into fresh result arrays (no final copy);
- everything else is a **temporary**, and all temporaries share one preallocated *arena*.

The steps, each a rule a reader can check on the printed plan (``to_string()``):

1. **Dataflow.** A ``reshape``/``bitcast`` of a row-major array is a bitcast: it defines no new
   value, it is another name for its operand's value. ``uses`` of a value are the instructions
   reading it under any of its names.
2. **Live ranges.** The schedule is the order the instructions are listed in. A value is live
   from the step that defines it to the last step that reads it, inclusive: a kernel reads its
   operands while it writes its output, so by default they must not share bytes.
3. **In-place reuse.** Rule 2's exception: a kernel may write its output over an operand's
   buffer when (a) it is that operand's last use, (b) the two have the same size and dtype,
   (c) the kernel reads the operand only at the index it is writing (an elementwise op, or a
   kLoop fusion in which every path from that operand to the root is elementwise at the
   root's shape) so element ``i`` is read before it is overwritten and never read again, and
   (d) the operand's buffer may be written: a temporary, or a parameter the caller *donated*
   (``minixla.jit(f, donate_argnums=...)``, as in JAX) and does not get back as an output;
   never a constant, and never another output's array. The output then *is* the operand's
   buffer; the backend reads the operand through the output pointer (so a kernel never sees
   two pointers to the same bytes). An output computed in place of a donated parameter
   is returned in the caller's array (``alias_size_in_bytes`` in ``memory_analysis``).
4. **Heap simulation.** Temporary buffers are placed largest first, each at the offset that
   leaves the smallest gap among the already-placed buffers whose live ranges overlap its own
   ("global decreasing-size best fit"). Buffers whose lifetimes are disjoint reuse the same
   bytes. The arena is the highest byte used.

5. **Temporaries in the outputs' bytes** (``temps_in_outputs``; what XLA's buffer assignment
   does when it colours a temporary into a ``maybe-live-out`` allocation). The result arrays
   exist before the program runs, but output ``j`` holds a value only from the step that
   writes it. Before rule 4, each temporary (largest first) whose live range ends before
   that step and that fits goes into output ``j``'s bytes instead (best fit among those
   already placed there that overlap it in time; the largest ``MAX_OUTPUT_REGIONS`` outputs
   are tried, smallest first), so it costs no arena bytes. A training step's activations die
   before its weight gradients are written: XLA keeps them in those outputs; so does this.
   Not done in a module with control flow (a loop's kernels address the arena directly).

``naive_bytes`` (every temporary value in its own allocation) versus ``arena_size`` shows the
reuse; ``minixla.memory.memory_analysis`` adds the live-bytes lower bound the heap can be judged by.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: every temporary starts at a multiple of this (a cache line, and aligned vector loads).
ALIGNMENT = 64

#: opcodes that rename their operand's value instead of defining a new one.
_BITCASTS = {"reshape", "bitcast"}
_ELEMENTWISE_EXTRA = {"clamp", "select", "convert"}


#: rule 5: how many of the largest outputs may hold temporaries (bounds the placement's cost)
MAX_OUTPUT_REGIONS = 16


@dataclass
class BufferSlice:
    """Where one value lives. ``kind`` is ``parameter``/``constant``/``output``/``temp``;
    ``index`` is the parameter or output number (-1 otherwise; for a temp, the output whose
    bytes hold it under rule 5, -1 for the arena); ``offset`` the byte offset of a temp in the
    arena (or in that output); ``size`` the size in bytes."""
    kind: str
    index: int = -1
    offset: int = 0
    size: int = 0


@dataclass
class LiveRange:
    """A buffer and the schedule steps ``[start, end]`` during which it holds a live value.

    ``definer`` is the first value placed in the buffer; ``values`` all the values that share it
    (later ones computed in place over earlier ones), in schedule order.
    """
    definer: object
    start: int
    end: int
    size: int
    offset: int = 0
    values: list = field(default_factory=list)
    output: int = -1   # rule 5: the output whose bytes hold this buffer (-1: the arena)


@dataclass
class BufferAssignment:
    """Result of buffer assignment: a slice per entry instruction and the arena layout.

    Attributes:
      slices: HloInstruction -> BufferSlice (reshapes share their operand's slice; tuples have none).
      arena_size: bytes of the one temporary arena.
      naive_bytes: bytes the temporary values would take with no reuse at all.
      live_ranges: the temporary buffers in the arena with their live ranges and offsets.
      output_ranges: the temporary buffers placed in an output's bytes (rule 5; ``output``
        names it, ``offset`` is inside it).
      in_place: HloInstruction -> tuple of operand positions whose buffer it overwrites (rule 3).
      donated: parameter numbers the caller donated.
      aliases: (output index, parameter number) pairs: outputs returned in a donated parameter.
      schedule: the entry instructions in execution order; step: instruction -> its position.
      value_live: every value that is not a parameter or constant -> (start, end) steps
        (outputs stay live to the end of the program).
    """
    slices: dict
    arena_size: int
    naive_bytes: int
    live_ranges: list = field(default_factory=list)
    in_place: dict = field(default_factory=dict)
    donated: tuple = ()
    aliases: list = field(default_factory=list)
    schedule: list = field(default_factory=list)
    value_live: dict = field(default_factory=dict)
    output_ranges: list = field(default_factory=list)

    def to_string(self) -> str:
        lines = [f"arena: {self.arena_size} bytes (no reuse: {self.naive_bytes} bytes)"]
        for lr in sorted(self.live_ranges + self.output_ranges, key=lambda r: r.start):
            shared = "".join(f", then %{v.name} in place" for v in lr.values[1:])
            where = f"in output {lr.output} at offset" if lr.output >= 0 else "offset"
            lines.append(f"  %{lr.definer.name}: {where} {lr.offset}, {lr.size} bytes, "
                         f"live [{lr.start}, {lr.end}]{shared}")
        for instr, positions in self.in_place.items():
            sl = self.slices[instr]
            if sl.kind != "temp":
                lines.append(f"  %{instr.name}: in place of operand {list(positions)} "
                             f"({sl.kind} {sl.index})")
        return "\n".join(lines)

    def __str__(self):
        return self.to_string()


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


#: tuple-valued instructions that own one buffer holding all their elements (a loop's state,
#: a conditional's results); ``get-tuple-element`` of them names an element inside it.
TUPLE_BUFFERS = {"while", "conditional"}


def tuple_offsets(shape) -> list:
    """Byte offset of each element of a tuple ``shape`` in its one buffer (each aligned)."""
    offsets, at = [], 0
    for s in shape.tuple_shapes:
        offsets.append(at)
        at += _align(s.nbytes)
    return offsets


def value_nbytes(instr) -> int:
    """Bytes of the buffer a value needs: a ``while``/``conditional`` holds its whole tuple."""
    if instr.opcode in TUPLE_BUFFERS and instr.shape.is_tuple:
        return sum(_align(s.nbytes) for s in instr.shape.tuple_shapes)
    return instr.shape.nbytes


def _leaves(instr):
    """The array values a use of ``instr`` reads: a ``tuple`` (no buffer of its own) reads its elements."""
    if instr.opcode != "tuple":
        return [instr]
    return [leaf for o in instr.operands for leaf in _leaves(o)]


def reads_only_at_output_index(instr, position: int) -> bool:
    """Rule 3(c): does kernel ``instr`` read operand ``position`` only at the index it writes?"""
    if instr.opcode in _BITCASTS:
        return False
    if instr.opcode == "dynamic-update-slice":  # its operand, where no update lands, index for index
        return position == 0 and not any(o is instr.operands[0] for o in instr.operands[1:])
    if instr.is_elementwise() or instr.opcode in _ELEMENTWISE_EXTRA:
        return all(o.shape.dims == instr.shape.dims for o in instr.operands)
    if instr.opcode != "fusion" or instr.attrs.get("kind") != "kLoop":
        return False  # a reduce/dot/conv reads each operand element many times
    comp = instr.fused_computation
    root = comp.root
    users = comp.users()
    if root.opcode == "dynamic-update-slice":  # written in place over that operand (only)
        param = comp.parameters[position]
        return root.operands[0] is param and users[param] == [root]

    memo = {}  # each instruction once: a fusion of diamonds has exponentially many paths

    def same_index(m):
        if m is root:
            return True
        if m not in memo:
            memo[m] = all((u.is_elementwise() or u.opcode in _ELEMENTWISE_EXTRA)
                          and u.shape.dims == root.shape.dims and same_index(u) for u in users[m])
        return memo[m]
    param = comp.parameters[position]
    return param.shape.dims == root.shape.dims and same_index(param)


def assign_buffers(module, donated=(), temps_in_outputs=False) -> BufferAssignment:
    """Assign a ``BufferSlice`` to every array-valued instruction of ``module.entry``.

    Args:
      module: an HloModule (normally after fusion); its entry instruction order is the schedule.
      donated: parameter numbers whose buffers the program may overwrite (rule 3d).
      temps_in_outputs: rule 5 (the caller's backend can address a temporary inside an output;
        ignored for a module with control flow).
    Returns:
      a ``BufferAssignment``.
    """
    comp = module.entry
    schedule = list(comp.instructions)
    step = {instr: n for n, instr in enumerate(schedule)}
    donated = tuple(sorted(set(donated)))
    end_of_program = len(schedule)

    # 1. Dataflow: the value each instruction names.
    value = {}
    for instr in schedule:
        names_operand = instr.opcode in _BITCASTS or (
            instr.opcode == "get-tuple-element" and instr.operands[0].opcode in TUPLE_BUFFERS)
        value[instr] = value[instr.operands[0]] if names_operand else instr
    last_use = {}
    for instr in schedule:
        for o in instr.operands:
            for leaf in _leaves(o):  # (a while reads its operand tuple's elements)
                last_use[value[leaf]] = step[instr]

    outputs = comp.root.operands if comp.root.opcode == "tuple" else [comp.root]
    output_index = {}  # value -> the output it is written into
    returned = set()   # every value the caller gets back (parameters and constants are copied)
    for k, out in enumerate(outputs):
        v = value[out]
        returned.add(v)
        if v.opcode not in ("parameter", "constant") and v not in output_index and not v.shape.is_tuple:
            output_index[v] = k

    # A buffer is (kind, index, [values]); ``buffer_of`` maps a value to it.
    buffer_of: dict = {}
    buffers: list = []
    slices: dict = {}
    in_place: dict = {}
    aliases: list = []

    def writable(buf, consumer) -> bool:
        kind, index, vals = buf["kind"], buf["index"], buf["values"]
        if kind == "temp":
            return consumer not in output_index
        if kind == "parameter":  # donated, not handed back, and consumed by its last reader
            return index in donated and vals[0] not in returned
        return False

    for instr in schedule:
        if instr.opcode == "tuple" or value[instr] is not instr:
            continue
        if instr.opcode == "parameter":
            buf = {"kind": "parameter", "index": instr.parameter_number, "values": [instr]}
        elif instr.opcode == "constant":
            buf = {"kind": "constant", "index": -1, "values": [instr]}
        else:
            buf = None
            # 3. In-place reuse of an operand buffer at its last use.
            for k, o in enumerate(instr.operands):
                v = value[o]
                donor = buffer_of.get(v)
                if (donor is None or last_use.get(v) != step[instr] or donor["values"][-1] is not v
                        or v.shape.nbytes != instr.shape.nbytes or v.shape.dtype != instr.shape.dtype
                        or not writable(donor, instr)):
                    continue
                positions = tuple(j for j, oj in enumerate(instr.operands) if value[oj] is v)
                if all(reads_only_at_output_index(instr, j) for j in positions):
                    buf = donor
                    in_place[instr] = positions
                    break
            if buf is None:
                if instr in output_index:
                    buf = {"kind": "output", "index": output_index[instr], "values": []}
                else:
                    buf = {"kind": "temp", "index": -1, "values": []}
                    buffers.append(buf)
            elif instr in output_index:
                aliases.append((output_index[instr], buf["index"]))
            buf["values"].append(instr)
        buffer_of[instr] = buf

    # 2. Live ranges of the values and of the temporary buffers.
    value_live = {}
    for v, buf in buffer_of.items():
        if buf["kind"] in ("parameter", "constant") and v.opcode in ("parameter", "constant"):
            continue
        end = end_of_program if v in returned else max(last_use.get(v, step[v]), step[v])
        value_live[v] = (step[v], end)
    ranges = []
    for buf in buffers:
        vals = buf["values"]
        lr = LiveRange(vals[0], step[vals[0]], max(value_live[v][1] for v in vals),
                       value_nbytes(vals[0]), values=list(vals))
        buf["range"] = lr
        ranges.append(lr)

    # 5. Temporaries in the outputs' bytes, then 4. heap simulation of the rest.
    in_outputs = []
    if temps_in_outputs and not any(i.opcode in TUPLE_BUFFERS for i in schedule):
        regions = [(step[b["values"][0]], b["index"], value_nbytes(b["values"][0]))
                   for b in buffer_of.values() if b["kind"] == "output" and b["values"][0] in step]
        in_outputs = _place_in_outputs(ranges, {r[1]: r for r in regions}.values())
    arena_size = _heap_simulate([lr for lr in ranges if lr.output < 0])

    for v, buf in buffer_of.items():
        kind = buf["kind"]
        offset = buf["range"].offset if kind == "temp" else 0
        index = buf["range"].output if kind == "temp" else buf["index"]
        slices[v] = BufferSlice(kind, index, offset, value_nbytes(v))
    for instr in schedule:
        if instr.opcode != "tuple" and value[instr] is not instr:
            base = slices[instr.operands[0]]
            if instr.opcode == "get-tuple-element":  # an element inside the tuple's buffer
                at = tuple_offsets(instr.operands[0].shape)[instr.attrs["index"]]
                base = BufferSlice(base.kind, base.index, base.offset + at, instr.shape.nbytes)
            slices[instr] = base
    naive = sum(value_nbytes(v) for lr in ranges for v in lr.values)
    return BufferAssignment(slices, arena_size, naive, [lr for lr in ranges if lr.output < 0], in_place,
                            donated, aliases, schedule, value_live, in_outputs)


def _place_in_outputs(ranges, regions) -> list:
    """Rule 5: put temporaries, largest first, into the bytes of outputs not yet written.

    ``regions``: ``(step, output index, bytes)`` per output buffer; output ``j`` is free in
    steps ``[0, step)``. Each temporary goes to the smallest of the largest
    ``MAX_OUTPUT_REGIONS`` outputs where it fits (best-fit gap among the temporaries placed there
    that overlap it in time); the rest stay for the arena. Returns the placed ranges."""
    regions = sorted(regions, key=lambda r: -r[2])[:MAX_OUTPUT_REGIONS]
    if not regions:
        return []
    steps = max((lr.start for lr in ranges), default=0) + 1
    placed = {j: _PlacedIndex(steps) for _, j, _ in regions}
    regions.sort(key=lambda r: r[2])
    out = []
    for lr in sorted(ranges, key=lambda r: (-r.size, r.start)):
        need = _align(lr.size)
        for start, j, size in regions:
            if start <= lr.end or size < lr.size:
                continue
            offset = _best_fit(placed[j], lr, need)
            if offset + lr.size <= size:
                lr.offset, lr.output = offset, j
                placed[j].add(lr)
                out.append(lr)
                break
    return out


def _best_fit(placed, lr, need) -> int:
    """The offset of the smallest gap of ``need`` bytes among the ``placed`` buffers that
    overlap ``lr`` in time (or the end of the highest one)."""
    busy = sorted((p.offset, p.offset + _align(p.size)) for p in placed.overlapping(lr.start, lr.end))
    best, best_gap, cursor = None, None, 0
    for lo, hi in busy:
        gap = lo - cursor
        if gap >= need and (best_gap is None or gap < best_gap):
            best, best_gap = cursor, gap
        cursor = max(cursor, hi)
    return best if best is not None else cursor


def _heap_simulate(ranges) -> int:
    """Place buffers largest first at the best-fitting gap among overlapping live buffers.

    The placed buffers overlapping a new one in time come from ``_PlacedIndex`` in
    O((k + 1) log n) for k of them, so a program of many short-lived temporaries costs
    O(n log n), not a scan of every placed buffer per buffer (quadratic)."""
    placed = _PlacedIndex(max((lr.start for lr in ranges), default=0) + 1)
    arena = 0
    for lr in sorted(ranges, key=lambda r: (-r.size, r.start)):
        need = _align(lr.size)
        lr.offset = _best_fit(placed, lr, need)
        placed.add(lr)
        arena = max(arena, lr.offset + need)
    return arena


class _PlacedIndex:
    """Live ranges keyed by their start step (at most one per step: a temporary buffer starts
    at its first value's step), in a segment tree whose nodes hold the latest end below them.
    ``overlapping(s, e)`` walks down only into subtrees that start at or before ``e`` and hold
    a range ending at or after ``s``: the interval-tree query of XLA's heap simulator.
    ``visited`` counts the tree nodes the queries looked at (a clock-free measure of the cost)."""

    def __init__(self, steps: int):
        self.width = 1
        while self.width < steps:
            self.width *= 2
        self.max_end = [-1] * (2 * self.width)
        self.at = {}  # start step -> live range
        self.visited = 0

    def add(self, lr) -> None:
        if lr.start in self.at:
            raise AssertionError(f"two temporary buffers start at step {lr.start}")
        self.at[lr.start] = lr
        node = self.width + lr.start
        while node and self.max_end[node] < lr.end:
            self.max_end[node] = lr.end
            node //= 2

    def overlapping(self, start: int, end: int):
        """The ranges with ``r.start <= end`` and ``r.end >= start``."""
        stack = [(1, 0, self.width - 1)]  # (node, first step, last step)
        while stack:
            node, lo, hi = stack.pop()
            self.visited += 1
            if lo > end or self.max_end[node] < start:
                continue
            if lo == hi:
                yield self.at[lo]
            else:
                mid = (lo + hi) // 2
                stack.append((2 * node + 1, mid + 1, hi))
                stack.append((2 * node, lo, mid))
