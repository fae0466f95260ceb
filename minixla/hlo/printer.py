"""HLO text in XLA's layout (``HloModule::ToString``)::

    HloModule jit_f

    ENTRY %main.4 (p0: f32[8,3], p1: f32[3]) -> f32[8,3] {
      %p0 = f32[8,3]{1,0} parameter(0)
      ...
      ROOT %add.3 = f32[8,3]{1,0} add(%p0, %broadcast.2)
    }
"""
from __future__ import annotations

import numpy as np

#: constants larger than this are printed as ``{...}``, as XLA does by default.
MAX_PRINTED_CONSTANT = 64


def _fmt_scalar(v) -> str:
    v = np.asarray(v).item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(v)


def format_literal(value: np.ndarray, print_large_constants: bool = False) -> str:
    value = np.asarray(value)
    if value.ndim == 0:
        return _fmt_scalar(value)
    if value.size > MAX_PRINTED_CONSTANT and not print_large_constants:
        return "{...}"

    def rec(a):
        if a.ndim == 1:
            return "{" + ", ".join(_fmt_scalar(x) for x in a) + "}"
        return "{ " + ", ".join(rec(x) for x in a) + " }"
    return rec(value)


def _fmt_dims(dims) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


def format_window(w: dict) -> str:
    parts = [f"size={'x'.join(map(str, w['size']))}"]
    if any(s != 1 for s in w["stride"]):
        parts.append(f"stride={'x'.join(map(str, w['stride']))}")
    if any(p != (0, 0) for p in w["pad"]):
        parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in w["pad"]))
    if any(d != 1 for d in w["lhs_dilate"]):
        parts.append(f"lhs_dilate={'x'.join(map(str, w['lhs_dilate']))}")
    if any(d != 1 for d in w["rhs_dilate"]):
        parts.append(f"rhs_dilate={'x'.join(map(str, w['rhs_dilate']))}")
    return "{" + " ".join(parts) + "}"


def format_attr(key, value) -> str:
    if key in ("dimensions", "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
               "rhs_contracting_dims"):
        return f"{key}={_fmt_dims(value)}"
    if key == "slice":
        return "slice={" + ", ".join(f"[{s}:{l}:{st}]" for s, l, st in value) + "}"
    if key == "window":
        return f"window={format_window(value)}"
    if key in ("replica_groups", "source_target_pairs"):
        from minixla.hlo.collectives import format_groups
        return f"{key}={format_groups(value)}"
    if key == "sharding":  # an HloSharding: prints itself in braces, as XLA
        return f"sharding={value}"
    if key == "custom_call_target":  # a string, quoted as XLA prints it
        return f'{key}="{value}"'
    return f"{key}={value}"


def print_instruction(instr, is_root=False, print_metadata=False, print_large_constants=False) -> str:
    if instr.opcode == "parameter":
        args = str(instr.parameter_number)
    elif instr.opcode == "constant":
        args = format_literal(instr.literal, print_large_constants)
    else:
        args = ", ".join(f"%{o.name}" for o in instr.operands)
    text = f"{'ROOT ' if is_root else ''}%{instr.name} = {instr.shape} {instr.opcode}({args})"
    extras = [format_attr(k, v) for k, v in instr.attrs.items()]
    if instr.opcode == "fusion":
        extras.append(f"calls=%{instr.called[0].name}")
    elif instr.opcode == "while":
        extras.append(f"condition=%{instr.called[0].name}, body=%{instr.called[1].name}")
    elif instr.opcode == "conditional" and instr.operands[0].shape.dtype == np.bool_:
        extras.append(f"true_computation=%{instr.called[0].name}, false_computation=%{instr.called[1].name}")
    elif instr.opcode == "conditional":
        extras.append("branch_computations={" + ", ".join(f"%{c.name}" for c in instr.called) + "}")
    elif instr.called:
        extras.append(f"to_apply=%{instr.called[0].name}")
    if print_metadata and instr.metadata:
        md = " ".join(f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}" for k, v in instr.metadata.items())
        extras.append(f"metadata={{{md}}}")
    return text + "".join(", " + e for e in extras)


def print_computation(comp, is_entry=False, print_metadata=False, print_large_constants=False) -> str:
    params = ", ".join(f"{p.name}: {_no_layout(p.shape)}" for p in comp.parameters)
    head = f"{'ENTRY ' if is_entry else ''}%{comp.name} ({params}) -> {_no_layout(comp.root.shape)} {{"
    lines = [head]
    for instr in comp.instructions:
        lines.append("  " + print_instruction(instr, instr is comp.root, print_metadata,
                                              print_large_constants))
    lines.append("}")
    return "\n".join(lines)


def _no_layout(shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(_no_layout(s) for s in shape.tuple_shapes) + ")"
    return str(shape).split("{")[0]


def print_module(module, print_metadata=False, print_large_constants=False) -> str:
    """The module's text. ``print_large_constants`` prints every constant's values instead of
    ``{...}`` for those over ``MAX_PRINTED_CONSTANT`` elements (dumps use it, so the text parses
    back to the same program)."""
    header = f"HloModule {module.name}"
    if getattr(module, "num_partitions", 1) > 1:  # an SPMD program, as XLA's header says it
        header += f", num_partitions={module.num_partitions}"
    parts = [header, ""]
    for comp in module.computations:
        parts.append(print_computation(comp, comp is module.entry, print_metadata,
                                       print_large_constants))
        parts.append("")
    return "\n".join(parts)
