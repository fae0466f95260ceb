"""A weight gradient's strided lhs copied row-major first (XLA:CPU's layout assignment, which
gives a dot's operands the layouts its GEMM wants and inserts a ``copy`` -- a transpose --
where the producer's layout differs: ``xla/service/cpu/cpu_layout_assignment.cc``).

Reverse mode writes a weight gradient as ``dot(x, g)`` contracting dim 0 of both: the GEMM's
lhs ``A[m, k] = x[k, m]`` is read down the columns of ``x``. The GEMM packs such an A per
unit and K block (``gemm.Gemm.pack_a``), but its units then cover several column panels each,
with the K blocks outside the panels, and on the MLP training step's 1024x1024 gradient
(``h1.T @ g``, K = 256) that ran ~1.25x the time of the same dot with a contiguous A. A
transpose kernel first (a 1 MiB copy, ~0.2-0.4 ms on one core) and the contiguous GEMM after
it took 0.91-0.92x the time of the packed GEMM (one pinned core, interleaved, two runs). The
copy's cost grows with ``M x K`` and the gain with ``M x N x K``: for the 1024x256 gradient
(N = 256) the copy made it 1.16x slower, so it is made only for ``N >= MIN_COLUMNS``.

Rule: a ``dot`` with no batch dims whose rank-2 float lhs is contracted along its dim 0 and
whose output has at least ``MIN_COLUMNS`` columns and ``MIN_LHS_ELEMENTS`` lhs elements reads
``transpose(lhs)`` (dims ``{1, 0}``) contracted along dim 1 instead. The products and their
order are the GEMM's either way (the same K blocks and tiles), so the result is bit-identical.
The pass runs after transpose folding (which would fold the transpose back) and before fusion
(which fuses nothing into a dot, so the transpose stays a kernel of its own).
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.pipeline import HloPass

#: the fewest output columns for which the copy pays (measured: 1024 yes, 256 no)
MIN_COLUMNS = 1024
#: fewer lhs elements (x.T of a 256-feature input, 256 KiB): the copy measured no gain (0.999x)
MIN_LHS_ELEMENTS = 1 << 18


def wants_row_major_lhs(dot) -> bool:
    """Whether ``dot`` gets its lhs copied row-major (the module docstring's rule)."""
    if dot.opcode != "dot":
        return False
    a, lhs = dot.attrs, dot.operands[0]
    return (not a.get("lhs_batch_dims") and lhs.shape.rank == 2
            and tuple(a.get("lhs_contracting_dims", ())) == (0,) and dot.shape.rank == 2
            and lhs.shape.dtype in (np.dtype(np.float32), np.dtype(np.float64))
            and dot.shape.dims[1] >= MIN_COLUMNS and lhs.shape.size >= MIN_LHS_ELEMENTS)


class DotLhsRowMajor(HloPass):
    """Copy the strided lhs of a wide weight-gradient dot into row-major order first."""
    name = "dot-lhs-row-major"

    def run(self, module) -> bool:
        comp = module.entry
        out, changed = [], False
        for instr in comp.instructions:
            if wants_row_major_lhs(instr):
                lhs = instr.operands[0]
                k, m = lhs.shape.dims
                t = HloInstruction("transpose", Shape(lhs.shape.dtype, (m, k)), [lhs], {"dimensions": (1, 0)},
                                   name=module.unique_name("transpose"), metadata=dict(instr.metadata))
                out.append(t)
                instr.operands = [t] + list(instr.operands[1:])
                instr.attrs = dict(instr.attrs, lhs_contracting_dims=(1,))
                changed = True
            out.append(instr)
        comp.instructions = out
        return changed
