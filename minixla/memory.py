"""Memory analysis of a compiled program (``jax.stages.Compiled.memory_analysis()``, XLA's
``CompiledMemoryStats``), plus the figures that say how good the buffer plan is.

JAX's four fields, with the same meaning:

- ``argument_size_in_bytes``: the parameters' arrays;
- ``output_size_in_bytes``: the result arrays (including those returned in a donated argument);
- ``alias_size_in_bytes``: output bytes that live in a donated argument's buffer;
- ``temp_size_in_bytes``: the arena of temporaries (the heap simulator's result).

And, to judge the heap simulator:

- ``temp_lower_bound_in_bytes``: the most temporary bytes live at any one step of the schedule.
  No placement can use less arena than this for this schedule, so
  ``temp_size_in_bytes - temp_lower_bound_in_bytes`` is what the placement lost to fragmentation.
- ``peak_live_bytes``: the most bytes live at any one step, everything counted (arguments,
  outputs computed so far, live temporaries; a value computed in place is not counted twice).
- ``peak_memory_in_bytes``: what a call holds at most with this plan: arguments + outputs −
  aliased + the whole arena.
- ``live_bytes``: the per-step curve behind ``peak_live_bytes`` (for plots).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MemoryAnalysis:
    """Byte counts of a compiled program; see the module docstring for each field."""
    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    temp_lower_bound_in_bytes: int
    peak_live_bytes: int
    peak_memory_in_bytes: int
    intermediate_size_in_bytes: int
    live_bytes: list = field(default_factory=list, repr=False)

    def __str__(self):
        rows = [("arguments", self.argument_size_in_bytes), ("outputs", self.output_size_in_bytes),
                ("aliased (donated)", self.alias_size_in_bytes),
                ("temporaries (arena)", self.temp_size_in_bytes),
                ("  lower bound for this schedule", self.temp_lower_bound_in_bytes),
                ("  all intermediates, no reuse", self.intermediate_size_in_bytes),
                ("peak live bytes", self.peak_live_bytes), ("peak memory", self.peak_memory_in_bytes)]
        return "\n".join(f"{name:<32} {value:>12,d} B" for name, value in rows)


def memory_analysis(module, assignment) -> MemoryAnalysis:
    """``MemoryAnalysis`` of an optimized ``module`` under its ``BufferAssignment``."""
    entry = module.entry
    args = sum(p.shape.nbytes for p in entry.parameters)
    root = entry.root
    outputs = root.operands if root.opcode == "tuple" else [root]
    out_bytes = sum(o.shape.nbytes for o in outputs)
    alias = sum(outputs[k].shape.nbytes for k, _ in assignment.aliases)

    n = len(assignment.schedule)
    temp_live = [0] * (n + 1)
    all_live = [args] * (n + 1)
    for lr in assignment.live_ranges:
        for t in range(lr.start, lr.end + 1):
            temp_live[t] += lr.size
    counted = set()  # a buffer holding several values in turn (in place) is counted once
    for v, (start, end) in assignment.value_live.items():
        sl = assignment.slices[v]
        if sl.kind == "parameter":
            continue  # lives in an argument's bytes, already counted
        key = (sl.kind, sl.index, sl.offset) if sl.kind == "temp" else (sl.kind, sl.index)
        for t in range(start, end + 1):
            if (key, t) not in counted:
                counted.add((key, t))
                all_live[t] += v.shape.nbytes
    intermediates = sum(v.shape.nbytes for v in assignment.value_live
                        if assignment.slices[v].kind not in ("output",) and v not in outputs)
    return MemoryAnalysis(
        argument_size_in_bytes=args, output_size_in_bytes=out_bytes, alias_size_in_bytes=alias,
        temp_size_in_bytes=assignment.arena_size, temp_lower_bound_in_bytes=max(temp_live),
        peak_live_bytes=max(all_live), peak_memory_in_bytes=args + out_bytes - alias + assignment.arena_size,
        intermediate_size_in_bytes=intermediates, live_bytes=all_live[:n])


def kernel_traffic(module) -> int:
    """Bytes the kernels of ``module``'s entry computation move: for every instruction that
    launches a kernel, the bytes of its distinct operands plus its output (reshapes and
    tuples are free, parameters and constants launch nothing). Run it on a module before and
    after fusion to see what fusion saves."""
    from minixla.passes.fusion import NOT_KERNELS
    total = 0
    for instr in module.entry.instructions:
        if instr.opcode in NOT_KERNELS:
            continue
        seen = []
        for o in instr.operands:
            if not any(o is s for s in seen):
                seen.append(o)
        total += sum(o.shape.nbytes for o in seen) + instr.shape.nbytes
    return total
