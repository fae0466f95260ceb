"""HLO graphs as pictures (XLA's ``--xla_dump_hlo_as_dot``, ``hlo_graph_dumper.cc``).

``hlo_graph(module)`` draws the entry computation's dataflow graph in Graphviz's DOT language:
one node per instruction (``%name``, opcode, shape), an edge from each operand to its user,
and each ``fusion`` drawn as a *cluster* (a labelled box, coloured by fusion kind) holding the
instructions of its fused computation, so you see which ops became one kernel. Given a
``BufferAssignment`` the nodes also say where each value lives (``temp @offset``, ``output 0``,
``in place of %x``).

The returned ``HloGraph`` is the DOT text (``.source``, ``str()``); when Graphviz's ``dot``
program is installed it also renders to SVG/PNG (``.svg()``, ``.render(path)``) and shows
itself inline in Jupyter (``_repr_mimebundle_``). Without ``dot`` the notebook shows the DOT
text, which any Graphviz viewer (or https://dreampuf.github.io/GraphvizOnline) draws.
"""
from __future__ import annotations

import shutil
import subprocess

#: fill colours by fusion kind (and for unfused kernels / buffers).
KIND_COLORS = {"kLoop": "#e3f2fd", "kInput": "#fff3e0", "kOutput": "#e8f5e9"}
_NODE_COLORS = {"parameter": "#eeeeee", "constant": "#f5f5f5", "tuple": "#ffffff",
                "dot": "#c8e6c9", "convolution": "#c8e6c9", "reduce": "#ffe0b2"}


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` program is on ``PATH``."""
    return shutil.which("dot") is not None


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class HloGraph:
    """An HLO graph in DOT form. ``str(g)``/``g.source`` is the DOT text."""

    def __init__(self, source: str, name: str = "hlo"):
        self.source = source
        self.name = name

    def __str__(self):
        return self.source

    def __repr__(self):
        return f"<HloGraph {self.name}: {self.source.count(' -> ')} edges>"

    def pipe(self, format: str = "svg") -> bytes:  # noqa: A002 (graphviz's own argument name)
        """Render with ``dot -T<format>`` and return the bytes.

        Raises:
          RuntimeError: when Graphviz's ``dot`` is not installed, or it fails.
        """
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError("Graphviz's 'dot' program is not installed (e.g. apt-get install graphviz); "
                               "use .source for the DOT text")
        r = subprocess.run([exe, f"-T{format}"], input=self.source.encode(), capture_output=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"dot -T{format} failed: {r.stderr.decode(errors='replace')}")
        return r.stdout

    def svg(self) -> str:
        """The picture as SVG text (needs ``dot``)."""
        return self.pipe("svg").decode()

    def render(self, path: str, format: str | None = None) -> str:  # noqa: A002
        """Write the graph to ``path``. The format comes from ``format`` or the file extension
        (``.svg``, ``.png``, ``.pdf`` need ``dot``; ``.dot``/``.gv`` write the DOT text).
        Returns the path."""
        fmt = (format or path.rsplit(".", 1)[-1]).lower()
        if fmt in ("dot", "gv", "txt"):
            with open(path, "w") as f:
                f.write(self.source)
        else:
            with open(path, "wb") as f:
                f.write(self.pipe(fmt))
        return path

    def _repr_svg_(self):
        return self.svg() if dot_available() else None

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": self.source}
        if dot_available():
            bundle["image/svg+xml"] = self.svg()
        return bundle


def _buffer_note(instr, assignment) -> str:
    if assignment is None or instr.opcode == "tuple":
        return ""
    sl = assignment.slices.get(instr)
    if sl is None:
        return ""
    positions = assignment.in_place.get(instr)
    if positions:
        return f"in place of %{instr.operands[positions[0]].name}"
    if sl.kind == "temp":
        where = f" in output {sl.index}" if sl.index >= 0 else ""
        return f"temp{where} @{sl.offset}, {sl.size} B"
    if sl.kind in ("output", "parameter") and instr.opcode != "parameter":
        return f"{sl.kind} {sl.index}"
    return ""


def _label(instr, note="") -> str:
    head = f"%{instr.name}"
    body = instr.opcode
    if instr.opcode == "reduce" and instr.called:
        body += f" ({instr.called[0].root.opcode})"
    if instr.opcode == "constant" and instr.shape.rank == 0 and instr.literal is not None:
        body += f"({instr.literal.item()!r})"
    lines = [head, f"{body} {instr.shape}"]
    if note:
        lines.append(note)
    return "\n".join(lines)


def hlo_graph(module, assignment=None, computation=None) -> HloGraph:
    """Draw ``computation`` (default: the entry) of ``module`` with fusions as clusters.

    Args:
      module: an HloModule. assignment: optional BufferAssignment to annotate buffers.
    Returns:
      an ``HloGraph`` (DOT text; renders to SVG when ``dot`` is installed).
    """
    comp = computation or module.entry
    lines = [f"digraph {_quote(module.name)} {{",
             '  rankdir=TB; node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [color="#555555"]; compound=true;']
    out_node = {}  # entry instruction -> the node id its value comes from

    def node(instr, indent, fill, note="", root=False):
        attrs = f"label={_quote(_label(instr, note))}, fillcolor={_quote(fill)}"
        if root:
            attrs += ", penwidth=2"
        lines.append(f"{indent}{_quote(instr.name)} [{attrs}];")

    for instr in comp.instructions:
        if instr.opcode == "fusion":
            fc = instr.fused_computation
            kind = instr.attrs.get("kind", "kLoop")
            note = _buffer_note(instr, assignment)
            title = f"%{instr.name} (fusion, {kind})" + (f"\n{note}" if note else "")
            lines.append(f"  subgraph {_quote('cluster_' + instr.name)} {{")
            lines.append(f"    label={_quote(title)}; style=filled; fillcolor={_quote(KIND_COLORS.get(kind, '#f3e5f5'))};"
                         ' color="#90a4ae"; fontname="Helvetica"; fontsize=10;')
            params = fc.parameters
            for m in fc.instructions:
                if m.opcode != "parameter":
                    node(m, "    ", _NODE_COLORS.get(m.opcode, "#ffffff"), root=m is fc.root)
            lines.append("  }")
            for m in fc.instructions:
                for o in m.operands:
                    if o.opcode == "parameter" and o in params:
                        src = out_node[instr.operands[o.parameter_number]]
                    else:
                        src = o.name
                    lines.append(f"  {_quote(src)} -> {_quote(m.name)};")
            out_node[instr] = fc.root.name
        else:
            node(instr, "  ", _NODE_COLORS.get(instr.opcode, "#ffffff"), _buffer_note(instr, assignment),
                 root=instr is comp.root)
            for o in instr.operands:
                lines.append(f"  {_quote(out_node[o])} -> {_quote(instr.name)};")
            out_node[instr] = instr.name
    lines.append("}")
    return HloGraph("\n".join(lines) + "\n", module.name)
