"""The jaxpr: a typed, first-order program in A-normal form, as in ``jax/_src/core.py``.

A ``Jaxpr`` has input variables, constant variables (closed-over arrays), a list of
equations ``outvars = primitive[params] invars`` and output atoms. ``ClosedJaxpr`` pairs a
jaxpr with the values of its constvars. The printer follows JAX's layout:
``{ lambda ; a:f32[8,3] b:f32[3]. let c:f32[8,3] = add a b in (c,) }``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from minixla.core.avals import ShapedArray, short_dtype_name


class Var:
    """A jaxpr variable: an abstract value and an identity (its name is given when printed)."""
    _ids = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.id = next(Var._ids)

    def __repr__(self):
        return f"Var({self.id}:{self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in an equation, e.g. ``1.0:f32[]``."""

    def __init__(self, value, aval: ShapedArray):
        self.value = value
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.value})"

    def pretty(self) -> str:
        v = np.asarray(self.value).item()
        if isinstance(v, bool):
            text = str(v)
        elif isinstance(v, float):
            text = repr(v)
        else:
            text = str(v)
        return f"{text}:{self.aval.str_short()}"


@dataclass
class SourceInfo:
    """Where in the user's program an equation came from (file, line, function), and the
    ``named_scope`` names active when it was traced ("a/b"; ``core/name_stack.py``)."""
    filename: str
    lineno: int
    function: str
    name_stack: str = ""

    def __str__(self):
        return f"{self.filename}:{self.lineno} ({self.function})"


@dataclass
class JaxprEqn:
    """One equation: ``outvars = primitive[params] invars``."""
    primitive: "Primitive"  # noqa: F821 (defined in primitive.py)
    invars: list
    outvars: list
    params: dict
    source_info: SourceInfo | None = None


@dataclass
class Jaxpr:
    """``{ lambda constvars ; invars. let eqns in (outvars,) }``."""
    constvars: list
    invars: list
    eqns: list
    outvars: list

    def __str__(self):
        return pp_jaxpr(self)

    def pretty_print(self) -> str:
        return pp_jaxpr(self)


@dataclass
class ClosedJaxpr:
    """A jaxpr together with the values of its constvars (``consts``)."""
    jaxpr: Jaxpr
    consts: list = field(default_factory=list)

    @property
    def in_avals(self):
        return [v.aval for v in self.jaxpr.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.jaxpr.outvars]

    @property
    def eqns(self):
        return self.jaxpr.eqns

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    def __repr__(self):
        return str(self)


# ---------------------------------------------------------------------------------------
# Printing, in JAX's layout.

def _var_names():
    """a, b, ..., z, ba, bb, ... : the naming scheme JAX's printer uses."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            if n > 1 and combo[0] == "a":
                continue
            yield "".join(combo)


def _pp_param(v) -> str:
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    if isinstance(v, tuple):
        inner = ", ".join(_pp_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(_pp_param(x) for x in v) + "]"
    return str(v)


def pp_jaxpr(jaxpr: Jaxpr, width: int = 80) -> str:
    names: dict[int, str] = {}
    return _pp_jaxpr(jaxpr, names, _var_names(), 0, width, 0)


#: call-like primitives (their sub-jaxpr is inlined when lowered), printed as JAX prints them
_CALLS = {"custom_jvp_call", "custom_vjp_call", "remat2", "jit"}


def _jaxpr_of(v):
    """The ``Jaxpr`` inside a param value (a sub-jaxpr of a call or control-flow equation), or None."""
    if isinstance(v, ClosedJaxpr):
        return v.jaxpr
    return v if isinstance(v, Jaxpr) else None


def _share_names(sub, eqn, names) -> None:
    """jax 0.10.2 prints a ``jit`` equation's sub-jaxpr with the names of the equation's own
    operands for its inputs and of its results for its outputs."""
    for inner, outer in list(zip(sub.invars[len(sub.invars) - len(eqn.invars):], eqn.invars)) + list(
            zip(sub.outvars, eqn.outvars)):
        if isinstance(inner, Var) and isinstance(outer, Var) and inner.id not in names and outer.id in names:
            names[inner.id] = names[outer.id]


def _has_jaxpr(v) -> bool:
    return isinstance(v, (ClosedJaxpr, Jaxpr)) or (
        isinstance(v, tuple) and any(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v))


def _pp_jaxpr(jaxpr, names, gen, indent: int, width: int, lead: int, joined: bool = False) -> str:
    """``jaxpr`` with its body lines indented by ``indent + 4`` (``in`` by ``indent + 2``); the
    variable names continue ``names``/``gen`` so that sub-jaxprs (the branches of ``cond``, the
    bodies of ``while``/``scan``) use fresh letters, as JAX prints them; ``lead`` is the column
    the text starts at (a one-line jaxpr must end by ``width``). An equation output no
    one reads prints as ``_``. ``joined``: the sub-jaxpr of a call primitive, printed on one line
    with its equations "; "-separated when it fits (as JAX prints them)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    used = {a.id for e in jaxpr.eqns for a in e.invars if isinstance(a, Var)}
    used |= {a.id for a in jaxpr.outvars if isinstance(a, Var)}

    def name(atom) -> str:
        if isinstance(atom, Literal):
            return atom.pretty()
        if atom.id not in names:
            names[atom.id] = next(gen)
        return names[atom.id]

    def binder(v: Var, drop=False) -> str:
        if drop and v.id not in used:
            return f"_:{v.aval.str_short()}"
        return f"{name(v)}:{v.aval.str_short()}"

    consts = " ".join(binder(v) for v in jaxpr.constvars)
    ins = " ".join(binder(v) for v in jaxpr.invars)
    pad = " " * (indent + 4)
    eqn_lines = []
    for eqn in jaxpr.eqns:
        lhs = " ".join(binder(v, drop=True) for v in eqn.outvars)
        params = ""
        if eqn.params and any(_has_jaxpr(v) for v in eqn.params.values()):
            lines = []
            keys = list(eqn.params)
            if eqn.primitive.name in _CALLS:  # (JAX: ``name`` first, then the others sorted)
                keys = sorted(keys, key=lambda k: (k != "name", k))
            if eqn.primitive.name == "jit":
                _share_names(_jaxpr_of(eqn.params["jaxpr"]), eqn, names)
            for k in keys:
                v = eqn.params[k]
                if isinstance(v, tuple) and _has_jaxpr(v):
                    lines.append(f"{pad}  {k}=(")
                    lines += [f"{pad}    " + _pp_jaxpr(j, names, gen, indent + 8, width, len(pad) + 4) for j in v]
                    lines.append(f"{pad}  )")
                elif _has_jaxpr(v):
                    lines.append(f"{pad}  {k}=" + _pp_jaxpr(v, names, gen, indent + 6, width, len(pad) + 3 + len(k),
                                                            joined=eqn.primitive.name in _CALLS))
                else:
                    lines.append(f"{pad}  {k}={_pp_param(v)}")
            params = "[\n" + "\n".join(lines) + f"\n{pad}]"
        elif eqn.params:
            params = "[" + " ".join(f"{k}={_pp_param(v)}" for k, v in eqn.params.items()) + "]"
        rhs = " ".join(name(a) for a in eqn.invars)
        eqn_lines.append(f"{lhs} = {eqn.primitive.name}{params} {rhs}".rstrip())
    outs = ", ".join(name(a) for a in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    head = f"{{ lambda {consts}; {ins}. let"
    sep = "; " if joined else " "
    one_line = f"{head} {sep.join(eqn_lines)} in {outs} }}" if eqn_lines else f"{head} in {outs} }}"
    if (len(eqn_lines) <= 1 or joined) and "\n" not in one_line and len(one_line) + lead <= width:
        return one_line
    body = "\n".join(pad + line for line in eqn_lines)
    return f"{head}\n{body}\n{' ' * (indent + 2)}in {outs} }}"
