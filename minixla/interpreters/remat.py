"""Rematerialization: ``checkpoint`` / ``remat`` (``jax/_src/ad_checkpoint.py``).

``checkpoint(f)`` binds one ``remat2`` equation carrying ``f``'s jaxpr. Its JVP rule is where
the memory is saved: the JVP jaxpr of ``f`` is split by partial evaluation into

* a *known* part, the primal computation, which runs (or is staged) right away, and
* a *differentiated* part, bound as ``remat2[differentiated=True]``: it takes only the
  residuals the ``policy`` allows to be saved (by default none: just ``f``'s inputs) and the
  tangents, and recomputes every other primal value it needs from them.

Under ``linearize``/``vjp``/``grad`` that differentiated equation is what lands in the linear
jaxpr, so the forward pass hands the backward pass ``f``'s inputs instead of every
intermediate (``tests/test_checkpoint.py`` counts them). Its transpose rule is another
``remat2[differentiated=True]``: recomputation and transposed tangent ops together, which is
what ``make_jaxpr(grad(checkpoint(f)))`` prints, as JAX does.

**CSE.** Inlined into one HLO module, the recomputed ``sin x`` of the backward pass is the same
expression as the forward's ``sin x``: common-subexpression elimination would merge them and
undo the rematerialization. JAX stops XLA with an ``optimization_barrier`` on the recomputation's
inputs. minixla marks every instruction inlined from a ``remat2[differentiated=True,
prevent_cse=True]`` with an HLO metadata key ``remat_scope`` (one id per equation), and its CSE
pass only merges instructions of the same scope (``minixla.passes.cse``): the recomputation is
kept, while fusion may still fuse it into the backward kernels that consume it.
``prevent_cse=False`` lets CSE merge (useful inside a scan/loop body, as in JAX).
"""
from __future__ import annotations

import functools
import itertools

from jax import tree_util

from minixla import lax as L
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, Literal
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.core.tracing import trace_to_jaxpr
from minixla.interpreters import calls
from minixla.interpreters.ad import (UndefinedPrimal, Zero, backward_pass, instantiate, is_undefined, jvp_flat,
                                     jvp_rules, tangent_aval, transpose_rules)
from minixla.interpreters.batching import batching_rules
from minixla.interpreters.eval import eval_jaxpr

remat_p = Primitive("remat2")
remat_p.multiple_results = True
shape_rules[remat_p] = calls.call_shape_rule("jaxpr")
impl_rules[remat_p] = calls.call_impl("jaxpr")

_scope_ids = itertools.count(1)


def _remat_metadata(params):
    if params["differentiated"] and params["prevent_cse"]:
        return {"remat_scope": next(_scope_ids)}
    return None


calls.register_call_lowering(remat_p, "jaxpr", _remat_metadata)


# ---------------------------------------------------------------------------------------
# Policies: which primal values the forward pass may save for the backward pass.
# ``policy(prim, *avals, **params) -> bool`` is asked about each equation's outputs.

class _Policy:
    """A named policy, printed as JAX prints its policies in ``remat2[policy=...]``."""

    def __init__(self, name, fn, text=None):
        self.__name__ = name
        self.fn = fn
        self.text = text or f"<function {name} at 0xXXXXXXXXXXXX>"

    def __call__(self, prim, *avals, **params):
        return self.fn(prim, *avals, **params)

    def __repr__(self):
        return self.text


class checkpoint_policies:
    """``jax.checkpoint_policies``: what ``checkpoint(f, policy=...)`` saves. ``nothing_saveable``
    (the default, ``policy=None``): only ``f``'s inputs; ``everything_saveable``: every residual
    (no recomputation); ``dots_saveable`` (alias ``checkpoint_dots``): outputs of
    ``dot_general``; ``dots_with_no_batch_dims_saveable``: those without batch dimensions."""
    nothing_saveable = _Policy("nothing_saveable", lambda *_, **__: False)
    everything_saveable = _Policy("everything_saveable", lambda *_, **__: True)
    dots_saveable = _Policy("dots_saveable", lambda prim, *_, **__: prim is L.dot_general_p,
                            "DotsSaveable(only_if_no_batch_dims=False)")
    checkpoint_dots = dots_saveable
    dots_with_no_batch_dims_saveable = _Policy(
        "dots_with_no_batch_dims_saveable",
        lambda prim, *_, **params: prim is L.dot_general_p and not params["dimension_numbers"][1][0],
        "DotsSaveable(only_if_no_batch_dims=True)")


def _saveable(policy, eqn) -> bool:
    if policy is None:
        return False
    return bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))


# ---------------------------------------------------------------------------------------
# The public function.

def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """``fun`` whose reverse-mode derivative recomputes its intermediates instead of saving
    them (``jax.checkpoint``, alias ``remat``).

    Values, shapes and dtypes are ``fun``'s; under ``grad``/``vjp`` only ``fun``'s inputs (and
    what ``policy`` saves, see ``checkpoint_policies``) are kept from the forward pass, and the
    backward pass recomputes the rest. ``prevent_cse``: keep CSE from merging the recomputation
    with the forward computation (see the module docstring). ``static_argnums``: arguments that
    are Python values, passed to ``fun`` unchanged.
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        n = len(args)
        nums = {i % n for i in static if -n <= i < n}
        dyn = (tuple(a for i, a in enumerate(args) if i not in nums), kwargs)
        flat, in_tree = tree_util.tree_flatten(dyn)
        for x in flat:  # (JAX's TypeError, eagerly too: a non-static argument must be an array)
            try:
                get_aval(x)
            except errors.MinixlaError:
                raise errors.TransformTypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type"
                                                f"\n  at: {errors.user_source_line()}") from None
        if not calls.tracing_active(flat):
            return fun(*args, **kwargs)
        store = []

        def flat_fun(*xs):
            d_args, d_kwargs = tree_util.tree_unflatten(in_tree, list(xs))
            it = iter(d_args)
            full = [args[i] if i in nums else next(it) for i in range(n)]
            out = fun(*full, **d_kwargs)
            flat_out, out_tree = tree_util.tree_flatten(out)
            store.append(out_tree)
            return flat_out
        closed, consts = calls.trace_call(flat_fun, [get_aval(x) for x in flat])
        outs = remat_p.bind(*consts, *flat, differentiated=False, jaxpr=closed, policy=policy,
                            prevent_cse=prevent_cse)
        return tree_util.tree_unflatten(store[0], list(outs))
    return remat_f


remat = checkpoint


# ---------------------------------------------------------------------------------------
# JVP: partial evaluation of the JVP jaxpr with the policy.

def _jvp_jaxpr(closed, primals, nonzero):
    """``closed``'s JVP as a jaxpr ``(primals, non-zero tangents) -> (primal outs, non-zero
    tangent outs)``, and which tangent outputs are non-zero."""
    in_avals = [get_aval(p) for p in primals]
    t_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzero) if nz]
    info = {}

    def fun(*xs):
        ps, ts = list(xs[:len(primals)]), iter(xs[len(primals):])
        tans = [next(ts) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzero, in_avals)]
        po, to = jvp_flat(lambda *ys: eval_jaxpr(closed.jaxpr, closed.consts, list(ys)), ps, tans)
        info["out_nonzero"] = [not isinstance(t, Zero) for t in to]
        return list(po) + [t for t in to if not isinstance(t, Zero)]
    return trace_to_jaxpr(fun, in_avals + t_avals), info["out_nonzero"]


def _partial_eval(closed, n_primals, n_out, policy):
    """Split a JVP jaxpr (its first ``n_primals`` inputs known, the rest tangents; its first
    ``n_out`` outputs primal) into the known jaxpr ``primals -> (primal outs, residuals)`` and
    the differentiated one ``(residuals, tangents) -> tangent outs``.

    A known value the differentiated part needs is a residual when it is an input or the
    policy saves it; otherwise the equations computing it are copied into the differentiated
    part (recomputed there)."""
    jaxpr = closed.jaxpr
    known_ids = {v.id for v in jaxpr.constvars} | {v.id for v in jaxpr.invars[:n_primals]}
    producer = {}
    known_eqns, unknown_eqns = [], []
    for eqn in jaxpr.eqns:
        if all(isinstance(a, Literal) or a.id in known_ids for a in eqn.invars):
            known_eqns.append(eqn)
            known_ids.update(v.id for v in eqn.outvars)
            for v in eqn.outvars:
                producer[v.id] = eqn
        else:
            unknown_eqns.append(eqn)
    primal_in = {v.id for v in jaxpr.invars[:n_primals]}
    const_ids = {v.id for v in jaxpr.constvars}
    residuals, res_ids, recompute = [], set(), set()

    def need(v):
        """Make known var ``v`` available to the differentiated part."""
        if v.id in res_ids or id(producer.get(v.id)) in recompute:
            return
        if v.id in const_ids:
            return  # a constant: the differentiated jaxpr keeps it as its own const
        eqn = producer.get(v.id)
        if v.id in primal_in or _saveable(policy, eqn):
            res_ids.add(v.id)
            residuals.append(v)
            return
        recompute.add(id(eqn))
        for a in eqn.invars:
            if not isinstance(a, Literal):
                need(a)

    tangent_outs = jaxpr.outvars[n_out:]
    for eqn in unknown_eqns:
        for a in eqn.invars:
            if not isinstance(a, Literal) and a.id in known_ids:
                need(a)
    for v in tangent_outs:
        if not isinstance(v, Literal) and v.id in known_ids:
            need(v)
    used_consts = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts)]
    unknown_ids = {id(e) for e in unknown_eqns}
    diff_eqns = [e for e in jaxpr.eqns if id(e) in recompute or id(e) in unknown_ids]
    diff = Jaxpr([v for v, _ in used_consts], residuals + list(jaxpr.invars[n_primals:]), diff_eqns,
                 list(tangent_outs))
    known_outs = list(jaxpr.outvars[:n_out]) + residuals
    known = Jaxpr(list(jaxpr.constvars), list(jaxpr.invars[:n_primals]), _dce(known_eqns, known_outs),
                  known_outs)
    return ClosedJaxpr(known, list(closed.consts)), ClosedJaxpr(diff, [c for _, c in used_consts])


def _dce(eqns, outvars):
    """The equations needed for ``outvars`` (the known part must not compute the tangent
    side's primal factors, which the differentiated part recomputes)."""
    live = {v.id for v in outvars if not isinstance(v, Literal)}
    kept = []
    for eqn in reversed(eqns):
        if any(v.id in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(a.id for a in eqn.invars if not isinstance(a, Literal))
    return kept[::-1]


def _remat_jvp(primals, tangents, *, differentiated, jaxpr, policy, prevent_cse):
    nonzero = [not isinstance(t, Zero) for t in tangents]
    jvp_closed, out_nonzero = _jvp_jaxpr(jaxpr, primals, nonzero)
    n_out = len(jaxpr.out_avals)
    known, diff = _partial_eval(jvp_closed, len(primals), n_out, policy)
    vals = eval_jaxpr(known.jaxpr, known.consts, list(primals))
    outs, res = vals[:n_out], vals[n_out:]
    lin = [t for t in tangents if not isinstance(t, Zero)]
    tans = iter(remat_p.bind(*res, *lin, differentiated=True, jaxpr=diff, policy=policy,
                             prevent_cse=prevent_cse))
    return outs, [next(tans) if nz else Zero(tangent_aval(get_aval(o))) for o, nz in zip(outs, out_nonzero)]


def _remat_transpose(cts, *args, differentiated, jaxpr, policy, prevent_cse):
    """A ``remat2[differentiated=True]`` of the backward pass: recompute from the residuals,
    then transpose, all inside one equation (so it stays recomputed once inlined)."""
    known = [a for a in args if not is_undefined(a)]
    cts = [instantiate(c) for c in cts]

    def transposed(*xs):
        it = iter(xs[:len(known)])
        full = [UndefinedPrimal(a.aval) if is_undefined(a) else next(it) for a in args]
        in_cts = backward_pass(jaxpr.jaxpr, jaxpr.consts, list(xs[len(known):]), args=full)
        return [instantiate(c) for c, a in zip(in_cts, args) if is_undefined(a)]
    t_closed = trace_to_jaxpr(transposed, [get_aval(k) for k in known] + [get_aval(c) for c in cts])
    outs = iter(remat_p.bind(*known, *cts, differentiated=True, jaxpr=t_closed, policy=policy,
                             prevent_cse=prevent_cse))
    return [next(outs) if is_undefined(a) else None for a in args]


def _remat_batch(vals, dims, *, differentiated, jaxpr, policy, prevent_cse):
    size = calls.batch_size(vals, dims)
    batched = calls.batch_jaxpr(jaxpr, vals, dims, size)
    outs = remat_p.bind(*vals, differentiated=differentiated, jaxpr=batched, policy=policy,
                        prevent_cse=prevent_cse)
    return outs, [0] * len(outs)


jvp_rules[remat_p] = _remat_jvp
transpose_rules[remat_p] = _remat_transpose
batching_rules[remat_p] = _remat_batch
