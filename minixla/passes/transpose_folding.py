"""Transpose folding (XLA's ``xla/service/transpose_folding.cc``).

Rule: ``dot(transpose(x), y)`` computes the same values as a ``dot`` that reads ``x`` directly
with its dimension numbers renamed through the permutation: the transposed operand's dim ``d``
is ``x``'s dim ``perm[d]``. A ``dot`` only ever indexes its operands, so moving the
permutation into the indexing changes no arithmetic: the result is bit-identical.

Condition: the output of a ``dot`` lists the operand's free (neither batch nor contracting)
dims in increasing order. After folding they are listed in ``x``'s order, so the fold is done
only when the permutation keeps the free dims in the same relative order; otherwise the
result would come out transposed. Batch and contracting dims are paired explicitly, so any
permutation of them is fine.

Why it matters: attention's ``q @ k.T`` no longer materializes ``k.T`` (one kernel and one
buffer fewer); the dot kernel reads ``k`` with the right strides.
"""
from __future__ import annotations

from minixla.passes.pipeline import HloPass

_DIMS = {0: ("lhs_batch_dims", "lhs_contracting_dims"), 1: ("rhs_batch_dims", "rhs_contracting_dims")}


def fold_operand(dot, i) -> bool:
    """Fold a ``transpose`` operand ``i`` (0 = lhs, 1 = rhs) of ``dot`` into it, if legal."""
    t = dot.operands[i]
    if t.opcode != "transpose":
        return False
    perm = t.attrs["dimensions"]
    batch_key, contract_key = _DIMS[i]
    batch, contract = dot.attrs[batch_key], dot.attrs[contract_key]
    free = [d for d in range(t.shape.rank) if d not in batch and d not in contract]
    source_free = [perm[d] for d in free]
    if source_free != sorted(source_free):
        return False
    dot.attrs[batch_key] = tuple(perm[d] for d in batch)
    dot.attrs[contract_key] = tuple(perm[d] for d in contract)
    dot.operands[i] = t.operands[0]
    return True


class TransposeFolding(HloPass):
    """Fold transposes into the dots that read them (the transposes then die in DCE)."""
    name = "transpose-folding"

    def run(self, module) -> bool:
        changed = False
        for instr in module.entry.instructions:
            if instr.opcode == "dot":
                for i in (0, 1):
                    changed |= fold_operand(instr, i)
        return changed
