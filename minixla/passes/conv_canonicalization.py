"""Convolution canonicalization (XLA:CPU's ``xla/service/cpu/conv_canonicalization.cc``).

Rule: a ``convolution`` whose input features are not the input's minor-most dim, or whose
output features are not the output's minor-most dim, is rewritten as
``transpose(convolution'(transpose(lhs), rhs))``: the lhs transpose moves the input features
to the end (the other dims keep their order), ``convolution'`` writes its output features last,
and the output transpose restores the original layout. Only dimension numbers change and the
transposes only move data: the rewrite is legal for every value (NaN, inf, -0.0).

Why: the LLVM backend runs a convolution as a register-tiled GEMM (``backends/llvm/gemm.py``)
only when each output position's input features are one contiguous row and its output
features are contiguous too; any other layout fell back to a scalar loop nest ("conv-rows")
that reads the input features at a large stride. The layout that matters most is the one
reverse mode creates: the **weight gradient** of an NHWC convolution is a convolution whose
lhs is the activations read as ``f01b`` (the batch is the contracted "feature") -- in the
digits CNN's training step it took 76 of 120 ms. NCHW convolutions are the other case. The
transposes are cheap, memory-bound kernels (or fuse with the producer of the lhs); the rhs is
left as it is, since the GEMM packs it through the elemental emitter in any layout.

Conditions (what the GEMM supports, otherwise the rewrite buys nothing): float32/float64, one
feature group, one batch group, no lhs dilation.
"""
from __future__ import annotations

from minixla.hlo.ir import HloInstruction, Shape
from minixla.hlo.lowering import conv_dim_labels, parse_dim_labels
from minixla.lax import ConvDimensionNumbers
from minixla.passes.pipeline import HloPass

_DTYPES = {"float32", "float64"}


def _features_last(rank: int, feature: int) -> list[int]:
    """The dims in order with ``feature`` moved to the end."""
    return [d for d in range(rank) if d != feature] + [feature]


def _renamed(spec, perm) -> tuple:
    """A dimension-number spec after the transpose ``perm`` (new dim i is old dim perm[i])."""
    return tuple(perm.index(d) for d in spec)


def canonicalize(comp, conv) -> list[HloInstruction] | None:
    """The instructions replacing ``conv`` (the last one computes its value), or None."""
    lhs, rhs = conv.operands
    if str(conv.shape.dtype) not in _DTYPES or str(lhs.shape.dtype) != str(conv.shape.dtype):
        return None
    a, window = conv.attrs, conv.attrs["window"]
    if (int(a.get("feature_group_count", 1)) != 1 or int(a.get("batch_group_count", 1)) != 1
            or any(d != 1 for d in window["lhs_dilate"])):
        return None
    dn = parse_dim_labels(a["dim_labels"])
    rank = conv.shape.rank
    if dn.lhs_spec[1] == rank - 1 and dn.out_spec[1] == rank - 1:
        return None
    module = comp.module
    new = []
    lhs_spec = dn.lhs_spec
    if dn.lhs_spec[1] != rank - 1:
        perm = _features_last(rank, dn.lhs_spec[1])
        lhs = HloInstruction("transpose", Shape(lhs.shape.dtype, [lhs.shape.dims[d] for d in perm]), [lhs],
                             {"dimensions": tuple(perm)}, name=module.unique_name("transpose"),
                             metadata=dict(conv.metadata))
        new.append(lhs)
        lhs_spec = _renamed(dn.lhs_spec, perm)
    out_perm = _features_last(rank, dn.out_spec[1])
    out_spec = _renamed(dn.out_spec, out_perm)
    dims = [conv.shape.dims[d] for d in out_perm]
    attrs = dict(a, dim_labels=conv_dim_labels(ConvDimensionNumbers(lhs_spec, dn.rhs_spec, out_spec), rank))
    core = HloInstruction("convolution", Shape(conv.shape.dtype, dims), [lhs, rhs], attrs,
                          name=module.unique_name("convolution"), metadata=dict(conv.metadata))
    new.append(core)
    if out_perm != list(range(rank)):
        # out dim d is the core's dim out_perm.index(d)
        new.append(HloInstruction("transpose", conv.shape, [core],
                                  {"dimensions": tuple(out_perm.index(d) for d in range(rank))},
                                  name=module.unique_name("transpose"), metadata=dict(conv.metadata)))
    return new


class ConvCanonicalization(HloPass):
    """Give every GEMM-able convolution its input and output features as minor-most dims."""
    name = "conv-canonicalization"

    def run(self, module) -> bool:
        comp = module.entry
        out, mapping = [], {}
        for instr in comp.instructions:
            new = canonicalize(comp, instr) if instr.opcode == "convolution" else None
            if new is None:
                out.append(instr)
                continue
            out.extend(new)
            mapping[instr] = new[-1]
        if not mapping:
            return False
        comp.instructions = out
        comp.replace_uses(mapping)
        return True
