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
    """Where in the user's program an equation came from (file, line, function)."""
    filename: str
    lineno: int
    function: str

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


def _jaxpr_of(v):
    """The ``Jaxpr`` inside a param value (a sub-jaxpr of a call or control-flow equation), or None."""
    if isinstance(v, ClosedJaxpr):
        return v.jaxpr
    return v if isinstance(v, Jaxpr) else None


def pp_jaxpr(jaxpr: Jaxpr, width: int = 80) -> str:
    """``jaxpr`` in JAX's layout. An equation with a sub-jaxpr param (``custom_jvp_call``,
    ``remat2``, ...) is printed as JAX prints it: one param a line, ``name`` first then the
    others sorted, the sub-jaxpr indented under its param, its variables named on from the
    outer ones."""
    gen = _var_names()
    return _pp_jaxpr(jaxpr, 0, {}, gen, width)


def _pp_jaxpr(jaxpr: Jaxpr, indent: int, names: dict, gen, width: int, nested: bool = False) -> str:
    def name(atom) -> str:
        if isinstance(atom, Literal):
            return atom.pretty()
        if atom.id not in names:
            names[atom.id] = next(gen)
        return names[atom.id]

    def binder(v: Var) -> str:
        return f"{name(v)}:{v.aval.str_short()}"

    consts = " ".join(binder(v) for v in jaxpr.constvars)
    ins = " ".join(binder(v) for v in jaxpr.invars)
    eqn_lines = []
    for eqn in jaxpr.eqns:
        lhs = " ".join(binder(v) for v in eqn.outvars)
        if any(_jaxpr_of(v) is not None for v in eqn.params.values()):
            eqn_lines.append(_pp_call_eqn(eqn, lhs, indent + 4, names, gen, width, name))
            continue
        params = ""
        if eqn.params:
            params = "[" + " ".join(f"{k}={_pp_param(v)}" for k, v in eqn.params.items()) + "]"
        rhs = " ".join(name(a) for a in eqn.invars)
        eqn_lines.append(f"{lhs} = {eqn.primitive.name}{params} {rhs}".rstrip())
    outs = ", ".join(name(a) for a in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    head = f"{{ lambda {consts}; {ins}. let"
    single = all("\n" not in line for line in eqn_lines)
    if nested:  # JAX's nested jaxprs go on one line, "; "-separated, when they fit
        one_line = f"{head} {'; '.join(eqn_lines)} in {outs} }}" if eqn_lines else f"{head} in {outs} }}"
        if single and indent + len(one_line) <= width:
            return one_line
    else:
        one_line = f"{head} {' '.join(eqn_lines)} in {outs} }}" if eqn_lines else f"{head} in {outs} }}"
        if len(eqn_lines) <= 1 and single and len(one_line) <= width:
            return one_line
    pad = " " * indent
    body = "\n".join(pad + "    " + line for line in eqn_lines)
    return f"{head}\n{body}\n{pad}  in {outs} }}"


def _share_names(sub, eqn, names) -> None:
    """jax 0.10.2 prints a ``jit`` equation's sub-jaxpr with the names of the equation's own
    operands for its inputs and of its results for its outputs."""
    for inner, outer in list(zip(sub.invars[len(sub.invars) - len(eqn.invars):], eqn.invars)) + list(
            zip(sub.outvars, eqn.outvars)):
        if isinstance(inner, Var) and isinstance(outer, Var) and inner.id not in names and outer.id in names:
            names[inner.id] = names[outer.id]


def _pp_call_eqn(eqn, lhs, indent, names, gen, width, name) -> str:
    """``outs = prim[`` one ``key=value`` a line ``] ins``, sub-jaxprs printed nested."""
    keys = sorted(eqn.params, key=lambda k: (k != "name", k))
    pad = " " * (indent + 2)
    lines = [f"{lhs} = {eqn.primitive.name}["]
    for k in keys:
        v = eqn.params[k]
        sub = _jaxpr_of(v)
        if sub is not None:
            if eqn.primitive.name == "jit":
                _share_names(sub, eqn, names)
            text = _pp_jaxpr(sub, indent + 2, names, gen, width - len(k) - 1, nested=True)
        else:
            text = _pp_param(v)
        lines.append(f"{pad}{k}={text}")
    rhs = " ".join(name(a) for a in eqn.invars)
    lines.append(f"{' ' * indent}] {rhs}".rstrip())
    return "\n".join(lines)
