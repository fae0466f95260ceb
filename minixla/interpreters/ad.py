"""Forward- and reverse-mode automatic differentiation (``jax/_src/interpreters/ad.py``).

Three pieces, as Autodidax builds them:

* **JVP** — a ``JVPTrace`` on the trace stack carries a (primal, tangent) pair per value; each
  primitive's ``jvp_rules`` row computes the output pair. A tangent may be the symbolic
  ``Zero`` (integer and bool values always have one, as ``float0`` in JAX), so nothing is
  computed for values that do not depend on the inputs being differentiated.
* **linearize** = JVP + partial evaluation: the primals are known (concrete arrays, or tracers of
  an outer trace), the tangents are unknown. The tangents are tracers of a ``JaxprTrace`` pushed
  *below* the JVP trace, so every tangent operation is staged into a jaxpr that is linear in the
  tangent inputs, while the primal operations run (or are staged by the outer trace) right away.
  Known values that the tangent equations use (``cos x`` for ``sin``) become the linear jaxpr's
  constants: the residuals. This is JAX's partial evaluation (known vs unknown values); a loop
  or branch that mixes both inside one equation is split by its ``partial_eval_rules`` row
  (:mod:`minixla.interpreters.partial_eval`), so the linear jaxpr holds only linear values.
* **transpose** — ``backward_pass`` runs the linear jaxpr backwards with each linear primitive's
  ``transpose_rules`` row, turning output cotangents into input cotangents. ``vjp`` and ``grad``
  are linearize + transpose.

Per-primitive rules live in :mod:`minixla.interpreters.ad_rules`.
"""
from __future__ import annotations

import numpy as np
from jax import dtypes as jax_dtypes

from minixla.core import errors
from minixla.core.avals import ShapedArray, WeakScalar, get_aval, weak_array
from minixla.core.jaxpr import Literal
from minixla.core.tracing import JaxprTrace, Tracer, new_trace, trace_to_jaxpr

#: primitive -> fn(primals, tangents, **params) -> (primal_out, tangent_out); tangents may be ``Zero``
jvp_rules: dict = {}
#: linear primitive -> fn(ct, *args, **params) -> one cotangent (or None) per arg; linear args
#: are ``UndefinedPrimal``
transpose_rules: dict = {}
#: primitive -> fn(trace, args, params) -> outputs: how a ``LinearJaxprTrace`` stages an equation
#: whose operands are partly known (JAX's ``partial_eval_jaxpr_custom_rules``): the rows of the
#: control-flow primitives split them so the linear jaxpr holds only their unknown part
#: (:mod:`minixla.interpreters.partial_eval`)
partial_eval_rules: dict = {}

float0 = jax_dtypes.float0


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "fc" or dtype.name == "bfloat16"


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent space of ``aval``: itself for floats, ``float0`` for integers and bools (as JAX)."""
    if is_float(aval.dtype):
        return ShapedArray(aval.shape, aval.dtype, aval.weak_type)
    return ShapedArray(aval.shape, float0)


class Zero:
    """A symbolic zero tangent or cotangent of abstract value ``aval`` (``ad_util.Zero``)."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short() if self.aval.dtype != float0 else 'float0'})"


def zeros_like_aval(aval: ShapedArray):
    """A concrete (or, inside a jaxpr trace, staged) array of zeros of ``aval``."""
    from minixla import lax
    if aval.dtype == float0:
        return np.zeros(aval.shape, float0)
    if aval.shape == ():  # (weakly typed as the aval: JAX's zero gradient of a Python float)
        return weak_array(np.zeros((), aval.dtype)) if aval.weak_type else np.zeros((), aval.dtype)[()]
    return lax.full(aval.shape, 0, aval.dtype)


def instantiate(t):
    """``t`` with a symbolic ``Zero`` replaced by real zeros."""
    return zeros_like_aval(t.aval) if isinstance(t, Zero) else t


def add_tangents(a, b):
    """``a + b`` where either may be a symbolic ``Zero``: an ``add_any`` equation, as JAX
    accumulates tangents and cotangents (``add_jaxvals``)."""
    from minixla.lax.base import _scalar_like
    from minixla.lax.elementwise import add_any_p
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return add_any_p.bind(_scalar_like(a, b), _scalar_like(b, a))


# ---------------------------------------------------------------------------------------
# The JVP interpreter.

class JVPTracer(Tracer):
    """A value under ``jvp``: its ``primal`` and its ``tangent`` (an array, a tracer or ``Zero``)."""

    def __init__(self, trace: "JVPTrace", primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def __repr__(self):
        return f"JVPTracer<{self.aval}>"


class JVPTrace:
    """Forward mode: processes each primitive with its ``jvp_rules`` row."""
    level = None

    def lift(self, x):
        """``(primal, tangent)`` of ``x``: a value from outside this trace has a zero tangent."""
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        return x, Zero(tangent_aval(get_aval(x)))

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*[self.lift(x) for x in args]) if args else ((), ())
        if all(isinstance(t, Zero) for t in tangents):
            return prim.bind(*primals, **params)  # nothing to differentiate: the plain value
        rule = jvp_rules.get(prim)
        if rule is None:
            raise errors.UnsupportedError(
                f"Differentiation rule for '{prim.name}' not implemented\n  at: {errors.user_source_line()}")
        out = rule(list(primals), list(tangents), **params)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise errors.TransformTypeError(
                f"the jvp rule of '{prim.name}' must return a pair (primal_out, tangent_out), got "
                f"{_describe(out)}\n  at: {errors.user_source_line()}")
        primal_out, tangent_out = out
        if prim.multiple_results:
            return [self._wrap(p, t, prim) for p, t in zip(primal_out, tangent_out)]
        return self._wrap(primal_out, tangent_out, prim)

    def _wrap(self, primal, tangent, prim=None):
        aval = get_aval(primal)
        if not is_float(aval.dtype) or isinstance(tangent, Zero):
            return primal  # an integer/bool result, or one with a zero tangent: a constant here
        # a rule's mistake (a swapped pair, a reduced tangent) would otherwise surface far away
        if prim is not None and np.shape(tangent) != aval.shape:
            raise errors.TransformTypeError(
                f"the jvp rule of '{prim.name}' returned a tangent of shape {np.shape(tangent)} for a "
                f"primal output {aval.str_short()}: a tangent has its primal's shape\n"
                f"  at: {errors.user_source_line()}")
        return JVPTracer(self, primal, tangent)



def jvp_flat(fun, primals, tangents):
    """Run flat ``fun`` on ``JVPTracer`` s; returns (primal outputs, tangent outputs or ``Zero``)."""
    trace = JVPTrace()
    with new_trace(trace):
        ins = [JVPTracer(trace, p, t) if not isinstance(t, Zero) else p for p, t in zip(primals, tangents)]
        outs = fun(*ins)
        pairs = [trace.lift(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


# ---------------------------------------------------------------------------------------
# Linearize: JVP with the tangents staged into a linear jaxpr.

class LinearJaxprTrace(JaxprTrace):
    """The jaxpr trace that records the tangent (linear) half of a JVP: JAX's partial evaluation,
    where its tracers are the *unknown* values and everything else is *known*. An equation with
    an unknown operand is staged; one with only known operands runs (or goes to an outer trace)
    right away. It is never where operand-less values are staged (``current_jaxpr_trace`` skips
    it): those are primal values. A control-flow equation with both kinds of operands is split
    by its ``partial_eval_rules`` row (a loop's counter is known, its tangent carry unknown)."""
    tangent_only = True

    def process_primitive(self, prim, args, params):
        rule = partial_eval_rules.get(prim)
        if rule is not None:  # (even on unknown operands only: a nested loop may have known carries)
            return rule(self, args, params)
        return JaxprTrace.process_primitive(self, prim, args, params)


class LinearFunction:
    """The linear map ``linearize`` returns: a jaxpr from tangent inputs to tangent outputs,
    its residuals as constants, and the avals of both ends."""

    def __init__(self, closed, in_avals, out_avals, in_nonzero, out_parts):
        self.closed = closed            # ClosedJaxpr over the non-zero tangent inputs
        self.in_avals = in_avals        # tangent avals of every flat input (float0 for ints)
        self.out_avals = out_avals      # tangent avals of every flat output
        self.in_nonzero = in_nonzero    # which flat inputs are jaxpr inputs
        self.out_parts = out_parts      # per output: ("var", k) jaxpr output k or ("zero", None)

    def __call__(self, *tangents):
        """Evaluate the linear map forward (``f_jvp`` of ``jax.linearize``)."""
        from minixla.interpreters.eval import eval_jaxpr
        ins = [t for t, nz in zip(tangents, self.in_nonzero) if nz]
        outs = eval_jaxpr(self.closed.jaxpr, self.closed.consts, ins)
        return [outs[k] if kind == "var" else zeros_like_aval(aval)
                for (kind, k), aval in zip(self.out_parts, self.out_avals)]

    def transpose(self, cts):
        """Cotangents of the inputs from cotangents of the outputs (``Zero`` allowed); a Zero
        cotangent is returned for an input the outputs do not depend on."""
        ct_of = {}
        for (kind, k), ct in zip(self.out_parts, cts):
            if kind == "var":
                ct_of[k] = add_tangents(ct_of.get(k, Zero(self.closed.out_avals[k])), ct)
        jaxpr_cts = [ct_of.get(k, Zero(a)) for k, a in enumerate(self.closed.out_avals)]
        in_cts = iter(backward_pass(self.closed.jaxpr, self.closed.consts, jaxpr_cts))
        return [next(in_cts) if nz else Zero(aval) for nz, aval in zip(self.in_nonzero, self.in_avals)]


def linearize_flat(fun, primals):
    """``(primal outputs, LinearFunction)`` of flat ``fun`` at flat ``primals``."""
    in_avals = [tangent_aval(get_aval(p)) for p in primals]
    in_nonzero = [a.dtype != float0 for a in in_avals]
    lin = LinearJaxprTrace()
    store = {}

    def tangent_fun(*tangent_tracers):
        it = iter(tangent_tracers)
        tangents = [next(it) if nz else Zero(a) for nz, a in zip(in_nonzero, in_avals)]
        primals_out, tangents_out = jvp_flat(fun, primals, tangents)
        store["primals_out"] = primals_out
        store["zero"] = [isinstance(t, Zero) for t in tangents_out]
        store["out_avals"] = [tangent_aval(get_aval(p)) for p in primals_out]
        return [t for t in tangents_out if not isinstance(t, Zero)]

    closed = trace_to_jaxpr(tangent_fun, [a for a, nz in zip(in_avals, in_nonzero) if nz], trace=lin)
    parts, k = [], 0
    for z in store["zero"]:
        parts.append(("zero", None) if z else ("var", k))
        k += 0 if z else 1
    return store["primals_out"], LinearFunction(closed, in_avals, store["out_avals"], in_nonzero, parts)


# ---------------------------------------------------------------------------------------
# Transposition.

class UndefinedPrimal:
    """A linear input of an equation being transposed: only its aval is known."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval})"


def is_undefined(x) -> bool:
    return isinstance(x, UndefinedPrimal)


def _describe(x) -> str:
    shape = getattr(x, "shape", None)
    return f"{type(x).__name__} of shape {tuple(shape)}" if shape is not None else type(x).__name__


def _check_cotangents(eqn, args, ct_in):
    """A transpose rule returns one cotangent per operand (``None`` or ``Zero`` where there is
    none), each of its ``UndefinedPrimal``'s shape: a bare array would be iterated row by row
    into wrong gradients, so say which rule broke the contract."""
    name = eqn.primitive.name
    if not isinstance(ct_in, (list, tuple)) or len(ct_in) != len(args):
        raise errors.TransformTypeError(
            f"the transpose rule of '{name}' must return a list of {len(args)} cotangent(s), one per "
            f"operand (None for a known operand), got {_describe(ct_in)}")
    for n, (a, c) in enumerate(zip(args, ct_in)):
        if is_undefined(a) and c is not None and not isinstance(c, Zero) and np.shape(c) != a.aval.shape:
            raise errors.TransformTypeError(
                f"the transpose rule of '{name}' returned a cotangent of shape {np.shape(c)} for its "
                f"operand {n}, {a.aval.str_short()}: a cotangent has its operand's shape")


def backward_pass(jaxpr, consts, cts_out, args=None, split=True):
    """Transpose the linear ``jaxpr`` (inputs: its invars; constvars: ``consts``, the residuals).

    Walks the equations in reverse, accumulating a cotangent per linear variable; returns one
    cotangent per invar (``Zero`` where none reached it). ``args`` (optional, one per invar):
    ``UndefinedPrimal`` for a linear input, a value for a known one; the equations that use
    only known values run forward first (a rematerialized primal computation, ``remat2``).
    A jaxpr with an equation that reads linear values but has known outputs (a loop counter
    next to a tangent carry, in a ``checkpoint``'s differentiated part) is partially evaluated
    first (``split``), so that only linear values reach the transpose rules.
    """
    args = args if args is not None else [UndefinedPrimal(v.aval) for v in jaxpr.invars]
    if split and _mixes_known_and_linear(jaxpr, [is_undefined(a) for a in args]):
        return _backward_pass_split(jaxpr, consts, cts_out, args)
    linear = {v.id for v, a in zip(jaxpr.invars, args) if is_undefined(a)}
    for eqn in jaxpr.eqns:
        if any(not isinstance(a, Literal) and a.id in linear for a in eqn.invars):
            linear.update(v.id for v in eqn.outvars)
    env = {v.id: c for v, c in zip(jaxpr.constvars, consts)}
    env.update((v.id, a) for v, a in zip(jaxpr.invars, args) if not is_undefined(a))
    # non-linear equations (none are staged by linearize, but a linear jaxpr may have them)
    for eqn in jaxpr.eqns:
        if not any(not isinstance(a, Literal) and a.id in linear for a in eqn.invars):
            vals = [_literal(a) if isinstance(a, Literal) else env[a.id] for a in eqn.invars]
            out = eqn.primitive.bind(*vals, **eqn.params)
            for v, o in zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]):
                env[v.id] = o
    ct_env: dict = {}

    def write(v, ct):
        if isinstance(v, Literal) or v.id not in linear or ct is None or isinstance(ct, Zero):
            return
        ct_env[v.id] = add_tangents(ct_env[v.id], ct) if v.id in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        write(v, ct)
    for eqn in reversed(jaxpr.eqns):
        if not any(not isinstance(a, Literal) and a.id in linear for a in eqn.invars):
            continue
        cts = [ct_env.pop(v.id, Zero(v.aval)) for v in eqn.outvars]
        if all(isinstance(c, Zero) for c in cts):
            continue
        args = [_literal(a) if isinstance(a, Literal) else
                UndefinedPrimal(a.aval) if a.id in linear else env[a.id] for a in eqn.invars]
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            raise errors.UnsupportedError(f"Transpose rule (for reverse-mode differentiation) for "
                                          f"'{eqn.primitive.name}' not implemented")
        ct_in = rule(cts if eqn.primitive.multiple_results else cts[0], *args, **eqn.params)
        _check_cotangents(eqn, args, ct_in)
        for a, c in zip(eqn.invars, ct_in):
            write(a, c)
    return [ct_env.get(v.id, Zero(v.aval)) for v in jaxpr.invars]


def _literal(a):
    """A literal operand of an equation being transposed, keeping its weak type (``ct * 2`` of
    a weakly typed cotangent stays weak, as in JAX)."""
    return WeakScalar(a.value) if a.aval.weak_type else a.value


def _mixes_known_and_linear(jaxpr, linear_in) -> bool:
    """Whether an equation of ``jaxpr`` reads linear values and yet has known outputs (a loop
    counter next to a tangent carry): a jaxpr not staged by partial evaluation, such as the
    differentiated part of a ``checkpoint``."""
    from minixla.interpreters.partial_eval import unknown_output_rules
    linear = {v.id for v, lin in zip(jaxpr.invars, linear_in) if lin}
    for eqn in jaxpr.eqns:
        ins = [not isinstance(a, Literal) and a.id in linear for a in eqn.invars]
        if not any(ins):
            continue
        rule = unknown_output_rules.get(eqn.primitive)
        if rule is not None and not all(rule(ins, **eqn.params)):
            return True
        linear.update(v.id for v in eqn.outvars)
    return False


def _backward_pass_split(jaxpr, consts, cts_out, args):
    """``backward_pass`` of a jaxpr that mixes known and linear values in one equation: it is
    evaluated by partial evaluation first (the known parts run, each such equation is split),
    and the purely linear jaxpr that results is transposed."""
    from minixla.interpreters.eval import eval_jaxpr
    lin_avals = [a.aval for a in args if is_undefined(a)]

    def fun(*lin):
        it = iter(lin)
        return eval_jaxpr(jaxpr, consts, [next(it) if is_undefined(a) else a for a in args])
    closed = trace_to_jaxpr(fun, lin_avals, trace=LinearJaxprTrace())
    # (once: a while loop with a linear carry stays whole, and its transpose raises JAX's error)
    cts = iter(backward_pass(closed.jaxpr, closed.consts, cts_out, split=False))
    return [next(cts) if is_undefined(a) else Zero(v.aval) for v, a in zip(jaxpr.invars, args)]
