"""Partial evaluation: known and unknown values (``jax/_src/interpreters/partial_eval.py``).

Under ``linearize``, ``vjp``, ``grad`` and ``linear_transpose`` a value is *unknown* when it
depends on the tangent (linear) inputs, and *known* otherwise: primal values, loop counters,
constants. The unknown values are the tracers of a ``LinearJaxprTrace`` (``ad.py``); an
equation with an unknown operand is staged into the linear jaxpr, one without runs right away.
The linear jaxpr must hold only unknown (linear) values, because ``backward_pass`` transposes
every equation that reads one: a ``fori_loop`` counter staged in it would be "transposed" as
if it were a tangent (``mul: transpose of a product of two linear values``).

A control-flow equation is where both kinds meet inside one equation (a loop whose counter is
known and whose tangent carry is not), so its ``partial_eval_rules`` row splits it, as JAX's
``_scan_partial_eval`` does (``control_flow_partial_eval.py``). This module has what those rows
share:

* ``jaxpr_unknowns`` — which outputs of a jaxpr are unknown given which inputs are: a forward
  dependency walk, with ``unknown_output_rules`` rows for equations that are finer than "any
  unknown input makes every output unknown" (a scan's known carry stays known).
* ``dce_jaxpr`` — the equations needed for some outputs, and which inputs they read.
* ``eval_partially`` — evaluate a jaxpr with some inputs unknown: the known equations go to
  the current trace, the unknown ones into a fresh linear jaxpr (nested loops split again).
"""
from __future__ import annotations

from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, Literal
from minixla.core.tracing import Tracer, trace_to_jaxpr

#: primitive -> fn(in_unknown, **params) -> out_unknown (one bool per output); without a row,
#: an equation with an unknown operand has only unknown outputs
unknown_output_rules: dict = {}


def is_unknown(trace, x) -> bool:
    """Whether ``x`` is an unknown value of the partial-evaluation ``trace``."""
    return isinstance(x, Tracer) and x._trace is trace


def jaxpr_unknowns(closed, in_unknown) -> list:
    """One bool per output of ``closed`` (a ``Jaxpr`` or ``ClosedJaxpr``): whether it depends
    on an input marked in ``in_unknown`` (constvars are known)."""
    jaxpr = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
    unknown = {v.id for v, u in zip(jaxpr.invars, in_unknown) if u}
    for eqn in jaxpr.eqns:
        ins = [not isinstance(a, Literal) and a.id in unknown for a in eqn.invars]
        if not any(ins):
            continue
        rule = unknown_output_rules.get(eqn.primitive)
        outs = rule(ins, **eqn.params) if rule is not None else [True] * len(eqn.outvars)
        unknown.update(v.id for v, u in zip(eqn.outvars, outs) if u)
    return [not isinstance(v, Literal) and v.id in unknown for v in jaxpr.outvars]


def dce_jaxpr(closed, used_outputs):
    """``(pruned, used_inputs)``: ``closed`` with only the outputs in ``used_outputs`` and the
    equations they need (all invars kept), and one bool per invar saying whether one is read."""
    jaxpr = closed.jaxpr
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v.id for v in outvars if not isinstance(v, Literal)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v.id in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(a.id for a in eqn.invars if not isinstance(a, Literal))
    pruned = Jaxpr(jaxpr.constvars, jaxpr.invars, kept[::-1], outvars)
    return ClosedJaxpr(pruned, closed.consts), [v.id in live for v in jaxpr.invars]


def eval_partially(closed, known, in_unknown, wanted):
    """Evaluate ``closed`` on ``known`` values (one per input not marked in ``in_unknown``,
    in order) with the marked inputs unknown.

    Returns ``(outs, lin)``: ``outs`` has one entry per output, its known value (of the
    current trace) or ``None`` where it is unknown; ``lin`` is a ``ClosedJaxpr`` from the
    unknown inputs to the outputs listed in ``wanted`` (a known one comes out as a constant),
    whose constants are the known values its equations read (the *residuals*)."""
    from minixla.interpreters.ad import LinearJaxprTrace
    from minixla.interpreters.eval import eval_jaxpr
    trace = LinearJaxprTrace()
    store = []

    def fun(*unknown):
        it_u, it_k = iter(unknown), iter(known)
        ins = [next(it_u) if u else next(it_k) for u in in_unknown]
        outs = eval_jaxpr(closed.jaxpr, closed.consts, ins)
        store[:] = [None if is_unknown(trace, o) else o for o in outs]
        return [outs[k] for k in wanted]
    lin = trace_to_jaxpr(fun, [a for a, u in zip(closed.in_avals, in_unknown) if u], trace=trace)
    return store, lin


def has_split_rule(closed) -> bool:
    """Whether ``closed`` has an equation that partial evaluation may split (a nested loop or
    branch, a call): re-tracing its body under partial evaluation can then move work out of
    the linear part."""
    from minixla.interpreters.ad import partial_eval_rules
    return any(e.primitive in partial_eval_rules for e in closed.jaxpr.eqns)
