"""What every call-like primitive shares (``custom_jvp_call``, ``custom_vjp_call``, ``remat2``):
an equation that carries a closed sub-jaxpr, as in JAX.

* ``trace_call`` traces a user function to the sub-jaxpr and closure-converts it: the arrays
  and outer tracers it closes over become leading operands (``num_consts`` of them), so the
  equation's params never hold a tracer and the outer traces see those values as inputs.
* ``batch_jaxpr`` is ``vmap`` of a closed jaxpr (every output batched along axis 0), the piece
  each call primitive's batching rule needs.
* ``register_call_lowering`` lowers a call by inlining its sub-jaxpr (XLA inlines such calls).
"""
from __future__ import annotations

import numpy as np

from minixla.core.avals import ShapedArray, get_aval
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr
from minixla.core.tracing import Tracer, _trace_stack, new_trace, trace_to_jaxpr
from minixla.interpreters.eval import eval_jaxpr


def tracing_active(flat_args) -> bool:
    """Whether a call must be bound (some trace is active or an argument is a tracer); with
    neither, the user function simply runs eagerly, which is what its impl rule would do."""
    return bool(_trace_stack) or any(isinstance(x, Tracer) for x in flat_args)


def trace_call(flat_fun, in_avals):
    """``(closed jaxpr with no consts, consts)``: ``flat_fun`` traced on ``in_avals`` with its
    closed-over values turned into leading inputs (JAX's ``closure_convert``)."""
    closed = trace_to_jaxpr(flat_fun, in_avals)
    jaxpr = closed.jaxpr
    converted = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(converted, []), list(closed.consts)


def call_shape_rule(param):
    """A call's output avals are its sub-jaxpr's (``param`` names the jaxpr param)."""
    def rule(*avals, **params):
        return list(params[param].out_avals)
    return rule


def call_impl(param):
    """Eager evaluation of a call: its sub-jaxpr evaluated op by op."""
    def impl(*args, **params):
        closed = params[param]
        return eval_jaxpr(closed.jaxpr, closed.consts, list(args))
    return impl


def example_aval(x, d) -> ShapedArray:
    """The aval of one example of ``x`` batched along ``d`` (None: unbatched)."""
    a = get_aval(x)
    if d is None:
        return a
    return ShapedArray(a.shape[:d] + a.shape[d + 1:], a.dtype, a.weak_type)


def example_aval_of(a: ShapedArray, d) -> ShapedArray:
    """``example_aval`` from an aval."""
    return a if d is None else ShapedArray(a.shape[:d] + a.shape[d + 1:], a.dtype, a.weak_type)


def batch_size(vals, dims) -> int:
    return next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)


def run_batched(fun, vals, dims, size):
    """``fun`` (flat values -> flat values) applied to each example of ``vals`` (batched along
    ``dims``) as one batched computation; every output is batched along axis 0."""
    from minixla.interpreters.batching import BatchTrace, BatchTracer, bdim_at_front
    trace = BatchTrace(size)
    with new_trace(trace):
        ins = [BatchTracer(trace, v, d) if d is not None else v for v, d in zip(vals, dims)]
        outs = fun(*ins)
        pairs = [trace.lift(o) for o in outs]
    return [bdim_at_front(v, d, size) for v, d in pairs]


def batch_jaxpr(closed: ClosedJaxpr, vals, dims, size) -> ClosedJaxpr:
    """``closed`` vmapped: its inputs get the shapes of ``vals`` (batched along ``dims``), every
    output is batched along axis 0 (JAX's ``batch_jaxpr`` with all outputs forced batched)."""
    def fun(*xs):
        return run_batched(lambda *ys: eval_jaxpr(closed.jaxpr, closed.consts, list(ys)), xs, dims, size)
    return trace_to_jaxpr(fun, [get_aval(v) for v in vals])


def register_call_lowering(prim, param, metadata=None):
    """Lower ``prim`` by inlining the sub-jaxpr ``params[param]``; ``metadata(params)`` gives
    extra HLO metadata for the inlined instructions (or None)."""
    from minixla.hlo.lowering import inline_jaxpr, lowering_rules

    def rule(ctx, operands, in_avals, out_avals, **params):
        extra = metadata(params) if metadata is not None else None
        return inline_jaxpr(ctx, params[param], operands, extra)
    lowering_rules[prim] = rule


class FunctionName:
    """A user function held in an equation's params, printed by its name as JAX prints
    ``jvp=f_jvp`` (the object itself carries what the rules need)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name

    __str__ = __repr__


def fun_name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def definition_site(fun) -> str:
    """``file:line`` where a user function was defined (for errors about what it returned)."""
    code = getattr(fun, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<unknown>"


def zeros_of(aval):
    from minixla.interpreters.ad import zeros_like_aval
    return zeros_like_aval(aval)


def np_float0_zeros(shape):
    from minixla.interpreters.ad import float0
    return np.zeros(shape, float0)
