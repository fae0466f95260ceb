"""The HLO text parser (XLA's ``xla/hlo/parser/hlo_parser.cc``): text -> ``HloModule``.

``parse(text)`` accepts everything ``minixla.hlo.printer`` prints: the ``HloModule`` line,
computations (``ENTRY`` or called ones, in any order), instructions with layouts, tuple shapes,
``ROOT``, constants (``nan``, ``inf``, nested ``{...}`` arrays), every attribute the printer
writes (``dimensions={..}``, ``slice={[s:l:st], ...}``, ``window={size=3x3 ...}``,
``dim_labels=``, ``direction=``, ``kind=``, ``calls=%c``, ``to_apply=%c``, ...), and
``metadata={...}``. Printing the parsed module gives the same text back (a tested round trip).

Like XLA's parser, an elided large constant ``{...}`` parses to zeros of its shape (the text
does not hold its values); print with ``print_large_constants=True`` to round-trip values.
Malformed text raises ``HloParseError`` (a ``ValueError``) naming the line.
"""
from __future__ import annotations

import ast
import re

import numpy as np

from minixla.core.errors import MinixlaError
from minixla.hlo.ir import HloComputation, HloInstruction, HloModule, Shape

_DTYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "s64": "int64", "s32": "int32", "s16": "int16", "s8": "int8",
    "u64": "uint64", "u32": "uint32", "u16": "uint16", "u8": "uint8", "pred": "bool",
}

#: attributes whose value is ``{i,j,...}``, parsed to a tuple of ints.
_DIMS_ATTRS = {"dimensions", "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
               "rhs_contracting_dims"}


class HloParseError(MinixlaError, ValueError):
    """The text is not HLO that minixla can read."""


def _dtype(name: str) -> np.dtype:
    if name not in _DTYPES:
        raise HloParseError(f"unknown element type '{name}'")
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_DTYPES[name])


# ---------------------------------------------------------------------------------------
# Small helpers on text.

def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets, braces, parentheses and quotes."""
    parts, depth, cur, quoted = [], 0, [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == sep and depth == 0:
                parts.append("".join(cur).strip())
                cur = []
                continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]``."""
    opening = text[start]
    closing = {"(": ")", "{": "}", "[": "]"}[opening]
    depth, quoted = 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == opening:
            depth += 1
        elif not quoted and ch == closing:
            depth -= 1
            if depth == 0:
                return i
    raise HloParseError(f"unbalanced '{opening}' in: {text}")


def parse_shape(text: str) -> Shape:
    """``f32[8,3]{1,0}``, ``pred[]`` or a tuple ``(f32[2]{0}, s32[])`` -> ``Shape``."""
    text = text.strip()
    if text.startswith("("):
        return Shape.tuple_of([parse_shape(s) for s in _split_top(text[1:-1])])
    m = re.fullmatch(r"(\w+)\[([\d,\s]*)\](\{[\d,]*\})?", text)
    if not m:
        raise HloParseError(f"bad shape '{text}'")
    dims = tuple(int(d) for d in m.group(2).split(",") if d.strip())
    if m.group(3):
        layout = tuple(int(d) for d in m.group(3)[1:-1].split(",") if d)
        if layout != tuple(reversed(range(len(dims)))):
            raise HloParseError(f"shape '{text}': only the row-major layout is supported")
    return Shape(_dtype(m.group(1)), dims)


def _scalar(token: str, dtype: np.dtype):
    token = token.strip()
    if dtype == np.bool_:
        if token not in ("true", "false"):
            raise HloParseError(f"bad pred literal '{token}'")
        return token == "true"
    if dtype.kind in "iu":
        return int(token)
    return float(token)  # float() reads nan, inf, -inf and repr() output exactly


def parse_literal(text: str, shape: Shape) -> np.ndarray:
    """A constant's text (``1.5``, ``{1, 2}``, ``{ {1, 2}, {3, 4} }``, ``{...}``) -> array."""
    text = text.strip()
    if text == "{...}":
        return np.zeros(shape.dims, shape.dtype)
    flat = [t for t in re.split(r"[{},\s]+", text) if t]
    if len(flat) != shape.size:
        raise HloParseError(f"constant '{text}' has {len(flat)} values, shape {shape} needs {shape.size}")
    values = [_scalar(t, shape.dtype) for t in flat]
    if shape.dtype.kind in "iu":  # build through Python ints: exact for every width
        return np.array(values, dtype=object).astype(shape.dtype).reshape(shape.dims)
    return np.array(values, dtype=np.float64 if shape.dtype != np.bool_ else np.bool_) \
        .astype(shape.dtype).reshape(shape.dims)


def _parse_dims(text: str) -> tuple:
    inner = text.strip()[1:-1]
    return tuple(int(d) for d in inner.split(",") if d.strip())


def _parse_window(text: str, rank_hint: int | None = None) -> dict:
    fields = dict(part.split("=", 1) for part in text.strip()[1:-1].split())
    size = tuple(int(s) for s in fields["size"].split("x"))
    n = len(size)

    def ints(key, default):
        return tuple(int(s) for s in fields[key].split("x")) if key in fields else (default,) * n
    pad = (tuple(tuple(int(v) for v in p.split("_")) for p in fields["pad"].split("x"))
           if "pad" in fields else ((0, 0),) * n)
    return dict(size=size, stride=ints("stride", 1), pad=pad, lhs_dilate=ints("lhs_dilate", 1),
                rhs_dilate=ints("rhs_dilate", 1))


def _parse_slice(text: str) -> tuple:
    return tuple(tuple(int(v) for v in part.strip()[1:-1].split(":"))
                 for part in _split_top(text.strip()[1:-1]))


def _parse_metadata(text: str) -> dict:
    md = {}
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', text.strip()[1:-1]):
        key, value = m.group(1), m.group(2)
        if value.startswith('"'):
            md[key] = value[1:-1]
        else:
            try:
                md[key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                md[key] = value
    return md


def _parse_attr_value(key: str, text: str):
    if key in _DIMS_ATTRS:
        return _parse_dims(text)
    if key == "slice":
        return _parse_slice(text)
    if key == "window":
        return _parse_window(text)
    if key in ("replica_groups", "source_target_pairs"):
        from minixla.hlo.collectives import parse_groups
        return parse_groups(text)
    if key == "sharding":
        from minixla.sharding.hlo_sharding import HloSharding
        return HloSharding.parse(text)
    # Any other attribute was printed with ``f"{key}={value}"``: numbers, tuples and bools come
    # back through ``literal_eval``; identifiers (kLoop, LT, b01f_01io->b01f) stay strings.
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# ---------------------------------------------------------------------------------------
# Module structure.

_HEADER = re.compile(r"(ENTRY\s+)?%([\w.\-]+)\s*\((.*)\)\s*->\s*(.+?)\s*\{$")
_INSTR_NAME = re.compile(r"(ROOT\s+)?%([\w.\-]+)\s*=\s*")
_ARRAY_SHAPE = re.compile(r"\w+\[[\d,]*\](?:\{[\d,]*\})?")
_OPCODE = re.compile(r"\s+([\w\-]+)\(")


def parse(text: str) -> HloModule:
    """Parse HLO text (as ``HloModule.to_string()`` prints it) into an ``HloModule``.

    Raises ``HloParseError`` for malformed text, an undefined operand or computation, or a
    module with no ``ENTRY`` computation.
    """
    lines = [(n + 1, line.rstrip()) for n, line in enumerate(text.splitlines())]
    lines = [(n, line) for n, line in lines if line.strip() and not line.strip().startswith("//")]
    if not lines or not lines[0][1].startswith("HloModule "):
        raise HloParseError("HLO text must start with 'HloModule <name>'")
    module = HloModule(lines[0][1].split()[1].rstrip(","))
    partitions = re.search(r"num_partitions=(\d+)", lines[0][1])
    if partitions:
        module.num_partitions = int(partitions.group(1))
    computations: dict[str, HloComputation] = {}
    pending_calls = []  # (instr, [computation names]) resolved once every computation is read
    comp = None
    for lineno, line in lines[1:]:
        stripped = line.strip()
        try:
            if comp is None:
                m = _HEADER.fullmatch(stripped)
                if not m:
                    raise HloParseError("expected a computation header '%name (params) -> shape {'")
                comp = HloComputation(m.group(2))
                comp.module = module
                module._names.add(comp.name)
                if comp.name in computations:
                    raise HloParseError(f"computation %{comp.name} defined twice")
                computations[comp.name] = comp
                if m.group(1):
                    if module.entry is not None:
                        raise HloParseError("more than one ENTRY computation")
                    module.entry = comp
                env: dict[str, HloInstruction] = {}
            elif stripped == "}":
                if comp.root is None:
                    raise HloParseError(f"computation %{comp.name} has no ROOT instruction")
                comp = None
            else:
                instr, is_root, calls = _parse_instruction(stripped, env)
                if instr.name in module._names:
                    raise HloParseError(f"name %{instr.name} defined twice")
                module._names.add(instr.name)
                env[instr.name] = instr
                comp.instructions.append(instr)
                if is_root:
                    if comp.root is not None:
                        raise HloParseError(f"computation %{comp.name} has two ROOT instructions")
                    comp.root = instr
                if calls:
                    pending_calls.append((instr, calls, lineno))
        except HloParseError as e:
            raise HloParseError(f"line {lineno}: {e}\n  {stripped}") from None
        except (ValueError, KeyError, IndexError) as e:
            raise HloParseError(f"line {lineno}: {type(e).__name__}: {e}\n  {stripped}") from None
    if comp is not None:
        raise HloParseError(f"computation %{comp.name} is not closed with '}}'")
    if module.entry is None:
        raise HloParseError("no ENTRY computation")
    for instr, calls, lineno in pending_calls:
        for name in calls:
            if name not in computations:
                raise HloParseError(f"line {lineno}: %{instr.name} calls undefined computation %{name}")
            instr.called.append(computations[name])
    return module


def _parse_instruction(text: str, env: dict):
    bad = HloParseError("expected '%name = shape opcode(operands), attrs'")
    m = _INSTR_NAME.match(text)
    if not m:
        raise bad
    is_root, name = m.groups()
    pos = m.end()
    if text[pos:pos + 1] == "(":  # a tuple shape, possibly nested
        end = _matching(text, pos) + 1
    else:
        sm = _ARRAY_SHAPE.match(text, pos)
        if not sm:
            raise bad
        end = sm.end()
    shape = parse_shape(text[pos:end])
    om = _OPCODE.match(text, end)
    if not om:
        raise bad
    opcode, rest = om.group(1), text[om.end():]
    close = _matching("(" + rest, 0) - 1
    args, tail = rest[:close], rest[close + 1:].strip()
    instr = HloInstruction(opcode, shape, name=name)
    if opcode == "parameter":
        instr.parameter_number = int(args)
    elif opcode == "constant":
        instr.literal = parse_literal(args, shape)
    else:
        for a in _split_top(args):
            if not a.startswith("%") or a[1:] not in env:
                raise HloParseError(f"operand '{a}' of %{name} is not defined before it")
            instr.operands.append(env[a[1:]])
    calls = []
    if tail:
        if not tail.startswith(","):
            raise HloParseError(f"unexpected text after the operands: '{tail}'")
        for attr in _split_top(tail[1:]):
            key, _, value = attr.partition("=")
            key, value = key.strip(), value.strip()
            if key in ("calls", "to_apply", "condition", "body", "true_computation",
                       "false_computation", "branch_computations"):
                calls.extend(v.strip().lstrip("%") for v in _split_top(value.strip("{}")))
            elif key == "metadata":
                instr.metadata = _parse_metadata(value)
            else:
                instr.attrs[key] = _parse_attr_value(key, value)
    return instr, bool(is_root), calls
