"""Collective HLO instructions (XLA's ``kAllReduce``, ``kAllGather``, ``kReduceScatter``,
``kAllToAll``, ``kCollectivePermute``, ``kPartitionId``): the instructions the SPMD partitioner
writes into a per-device program so its devices exchange data.

Every device runs the same per-device program. A collective names the *groups* of devices
(``replica_groups``, lists of partition ids) that exchange data with each other; with
``use_global_device_ids``/SPMD the ids are partition ids 0..n-1 of the mesh. Attributes, as
XLA prints them::

  %ar = f32[8]{0} all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%add
  %ag = f32[8,4]{1,0} all-gather(%x), replica_groups={{0,1}}, dimensions={0}
  %rs = f32[2,4]{1,0} reduce-scatter(%x), replica_groups={{0,1}}, dimensions={0}, to_apply=%add
  %aa = f32[4,4]{1,0} all-to-all(%x), replica_groups={{0,1}}, dimensions={0}
  %cp = f32[4]{0} collective-permute(%x), source_target_pairs={{0,1},{1,0}}
  %id = u32[] partition-id()

``all-to-all`` here is XLA's array form: the operand is split along ``dimensions`` into one
chunk per group member, chunk ``j`` goes to member ``j``, and the received chunks are
concatenated along the same dimension (the partitioner reshapes/transposes around it to move
a sharded dim, as XLA does). These builders compute the result shape; the HLO evaluator and
the backends give them semantics.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import HloInstruction, Shape

COLLECTIVE_OPCODES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                      "collective-permute"}


def _groups(replica_groups) -> tuple:
    groups = tuple(tuple(int(d) for d in g) for g in replica_groups)
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"replica groups {groups} must all have the same size")
    return groups


def group_size(instr: HloInstruction) -> int:
    return len(instr.attrs["replica_groups"][0])


def all_reduce(x: HloInstruction, replica_groups, reducer) -> HloInstruction:
    """Every member of a group gets the elementwise reduction (``reducer``: a scalar
    ``HloComputation`` such as add) of the group's operands; shape unchanged."""
    return HloInstruction("all-reduce", x.shape, [x],
                          attrs={"replica_groups": _groups(replica_groups)}, called=[reducer])


def all_gather(x: HloInstruction, dim: int, replica_groups) -> HloInstruction:
    """Concatenate the group's operands along ``dim`` in group order."""
    groups = _groups(replica_groups)
    dims = list(x.shape.dims)
    dims[dim] *= len(groups[0])
    return HloInstruction("all-gather", Shape(x.shape.dtype, tuple(dims)), [x],
                          attrs={"replica_groups": groups, "dimensions": (dim,)})


def reduce_scatter(x: HloInstruction, dim: int, replica_groups, reducer) -> HloInstruction:
    """All-reduce, then member ``k`` of a group keeps the ``k``-th of ``len(group)`` equal
    slices along ``dim``."""
    groups = _groups(replica_groups)
    dims = list(x.shape.dims)
    if dims[dim] % len(groups[0]):
        raise ValueError(f"reduce-scatter of {x.shape} along dim {dim} over groups of "
                         f"{len(groups[0])}: not divisible")
    dims[dim] //= len(groups[0])
    return HloInstruction("reduce-scatter", Shape(x.shape.dtype, tuple(dims)), [x],
                          attrs={"replica_groups": groups, "dimensions": (dim,)},
                          called=[reducer])


def all_to_all(x: HloInstruction, dim: int, replica_groups) -> HloInstruction:
    """Split along ``dim`` into ``len(group)`` chunks, send chunk ``j`` to member ``j``,
    concatenate what arrives along ``dim`` (shape unchanged)."""
    groups = _groups(replica_groups)
    if x.shape.dims[dim] % len(groups[0]):
        raise ValueError(f"all-to-all of {x.shape} along dim {dim} over groups of "
                         f"{len(groups[0])}: not divisible")
    return HloInstruction("all-to-all", x.shape, [x],
                          attrs={"replica_groups": groups, "dimensions": (dim,)})


def collective_permute(x: HloInstruction, source_target_pairs) -> HloInstruction:
    """Device ``s`` sends its operand to device ``t`` for each pair; a device that receives
    nothing gets zeros (XLA's semantics)."""
    pairs = tuple((int(s), int(t)) for s, t in source_target_pairs)
    return HloInstruction("collective-permute", x.shape, [x],
                          attrs={"source_target_pairs": pairs})


def partition_id() -> HloInstruction:
    """This device's partition id (``u32[]``) in the SPMD program."""
    return HloInstruction("partition-id", Shape(np.dtype(np.uint32), ()))


def format_groups(groups) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def parse_groups(text: str) -> tuple:
    inner = text.strip()[1:-1].strip()
    if not inner:
        return ()
    return tuple(tuple(int(v) for v in g.strip().strip("{}").split(",") if v.strip())
                 for g in inner.split("},"))
