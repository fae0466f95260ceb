"""Partial evaluation of ``scan``, ``cond`` and ``while``: their known and unknown parts
(JAX's ``_scan_partial_eval``, ``_cond_partial_eval``, ``_while_partial_eval``).

A loop staged into a linear jaxpr (``linearize``, ``grad``, ``linear_transpose``) may carry
known values next to its linear ones: a ``fori_loop`` counter, a primal value that a
``custom_jvp`` rule's loop updates next to its tangent, a carry computed from constants only.
Transposing such a loop as a whole would treat the counter as a tangent. So each row here
splits the equation (``partial_eval_rules``, used by ``LinearJaxprTrace``):

* **scan.** A carry is *unknown* if its initial value is, or if the body's output for it
  depends on an unknown input, iterated to a fixpoint over the carries (``_scan_unknowns``).
  The *known scan* runs the body's known equations over the known consts, carries and xs, and
  also returns each known carry the unknown part reads, stacked per step (its residuals). The
  *unknown scan*, staged into the linear jaxpr, carries only the unknown carries; it reads the
  stacked known carries as ``xs`` and recomputes the known values it needs from them (the same
  save-the-carries, recompute-the-rest policy as the JVP rule's residuals), so its transpose
  only ever sees linear carries.
* **cond.** An output is unknown if it depends on an unknown operand in some branch. A
  *known cond* computes the known outputs from the known operands, an *unknown cond* (the
  known operands as residuals) the others; an unknown index makes every output unknown.
* **while.** Carries split by the same fixpoint. A *known while* computes the known carries;
  if any carry is unknown, the whole loop is staged too, whose transpose raises JAX's error (reverse mode
  needs a trip count), while ``linearize``'s forward map still evaluates it. A loop with no
  unknown carry (its linear operands unused) is known, as in JAX.

Each part's body is traced again with ``eval_partially``, so a loop or branch nested inside
splits the same way; the known part runs (or is staged by an outer ``jit``) right away.
"""
from __future__ import annotations

from minixla.core.jaxpr import ClosedJaxpr, Jaxpr
from minixla.core.tracing import JaxprTrace
from minixla.interpreters.ad import partial_eval_rules
from minixla.interpreters.control_flow_rules import _branches, _fixpoint, _flat_trace
from minixla.interpreters.eval import eval_jaxpr
from minixla.interpreters.partial_eval import (dce_jaxpr, eval_partially, has_split_rule, is_unknown,
                                               jaxpr_unknowns, unknown_output_rules)
from minixla.lax.control_flow import cond_p, scan_p, while_p


def _split_eval(closed, vals, in_unknown, unknown_vals):
    """The outputs of ``closed`` given the known ``vals`` (``None`` where unused) and the
    ``unknown_vals``, traced so that a nested loop splits: its known equations first, then its
    unknown ones (inlined from the linear jaxpr ``eval_partially`` built)."""
    _, lin = eval_partially(closed, vals, in_unknown, list(range(len(closed.jaxpr.outvars))))
    return eval_jaxpr(lin.jaxpr, lin.consts, list(unknown_vals))


# ---------------------------------------------------------------------------------------
# scan

def _scan_unknowns(in_unknown, *, jaxpr, num_consts, num_carry, **_):
    nk, nc = num_consts, num_carry
    k, x = list(in_unknown[:nk]), list(in_unknown[nk + nc:])
    c, out = _fixpoint(in_unknown[nk:nk + nc], lambda c: jaxpr_unknowns(jaxpr, k + c + x))
    return c + out[nc:]


def _scan_partial_eval(trace, args, params):
    jaxpr, nk, nc = params["jaxpr"], params["num_consts"], params["num_carry"]
    in_uk = [is_unknown(trace, a) for a in args]
    out_uk = _scan_unknowns(in_uk, **params)
    if all(out_uk) and not has_split_rule(jaxpr):  # nothing known comes out: the scan as it is
        return JaxprTrace.process_primitive(trace, scan_p, args, params)
    c_uk = out_uk[:nc]
    body_uk = in_uk[:nk] + c_uk + in_uk[nk + nc:]
    avals = jaxpr.in_avals
    n_in = len(avals)
    loop = {k: params[k] for k in ("length", "reverse", "unroll")}
    uk_body, uk_reads = dce_jaxpr(jaxpr, out_uk)
    saved = [j for j in range(nc) if not c_uk[j] and uk_reads[nk + j]]  # known carries read
    outs = [None] * len(out_uk)

    # 1. The known scan: known carries and ys, and the known carries the unknown part reads.
    if not all(out_uk) or saved:
        k_body, _ = dce_jaxpr(jaxpr, [not u for u in out_uk])
        kpos = [i for i in range(n_in) if not body_uk[i]]

        def known_fn(*vals):
            o, _ = eval_partially(k_body, vals, body_uk, [])
            assert all(v is not None for v in o), "a known output came out unknown"
            return list(o) + [vals[kpos.index(nk + j)] for j in saved]
        kj, kc = _flat_trace(known_fn, [avals[i] for i in kpos])
        n_kc = sum(1 for j in range(nc) if not c_uk[j])
        res = scan_p.bind(*kc, *[args[i] for i in kpos], jaxpr=kj, num_consts=len(kc) + sum(
            1 for i in range(nk) if not in_uk[i]), num_carry=n_kc, **loop)
        n_known = len(out_uk) - sum(out_uk)
        it = iter(res[:n_known])
        outs = [None if u else next(it) for u in out_uk]
        stacks = res[n_known:]
    else:
        stacks = []
    if not any(out_uk):
        return outs

    # 2. The unknown scan: consts (known ones read, unknown ones), the unknown carries, xs
    #    (the saved known carries, known xs read, unknown xs).
    kk = [i for i in range(nk) if not in_uk[i] and uk_reads[i]]
    ku = [i for i in range(nk) if in_uk[i]]
    cu = [nk + j for j in range(nc) if c_uk[j]]
    xk = [i for i in range(nk + nc, n_in) if not in_uk[i] and uk_reads[i]]
    xu = [i for i in range(nk + nc, n_in) if in_uk[i]]
    order = kk + ku + cu + [nk + j for j in saved] + xk + xu  # body inputs, as the new scan's

    def unknown_fn(*vals):
        full = [None] * n_in
        for i, v in zip(order, vals):
            full[i] = v
        known = [full[i] for i in range(n_in) if not body_uk[i]]
        return _split_eval(uk_body, known, body_uk, [full[i] for i in range(n_in) if body_uk[i]])
    uj, uc = _flat_trace(unknown_fn, [avals[i] for i in order])
    operands = list(uc) + [args[i] for i in kk + ku + cu] + list(stacks) + [args[i] for i in xk + xu]
    new = dict(params, jaxpr=uj, num_consts=len(uc) + len(kk) + len(ku), num_carry=len(cu))
    res = JaxprTrace.process_primitive(trace, scan_p, operands, new)
    it = iter(res)
    return [next(it) if u else o for u, o in zip(out_uk, outs)]


# ---------------------------------------------------------------------------------------
# cond

def _cond_unknowns(in_unknown, *, branches):
    if in_unknown[0]:
        return [True] * len(branches[0].out_avals)
    per_branch = [jaxpr_unknowns(b, list(in_unknown[1:])) for b in branches]
    return [any(col) for col in zip(*per_branch)]


def _cond_partial_eval(trace, args, params):
    branches = params["branches"]
    in_uk = [is_unknown(trace, a) for a in args]
    out_uk = _cond_unknowns(in_uk, branches=branches)
    if in_uk[0] or (all(out_uk) and not any(has_split_rule(b) for b in branches)):
        return JaxprTrace.process_primitive(trace, cond_p, args, params)
    index, ops, ops_uk = args[0], args[1:], in_uk[1:]
    avals = branches[0].in_avals
    n = len(ops)
    outs = [None] * len(out_uk)
    if not all(out_uk):  # the known cond
        kpos = [i for i in range(n) if not ops_uk[i]]

        def known_fn(b):
            pruned, _ = dce_jaxpr(b, [not u for u in out_uk])
            return lambda *vals: eval_partially(pruned, vals, ops_uk, [])[0]
        new, consts = _branches([known_fn(b) for b in branches], [avals[i] for i in kpos])
        it = iter(cond_p.bind(index, *consts, *[ops[i] for i in kpos], branches=new))
        outs = [None if u else next(it) for u in out_uk]
    if not any(out_uk):
        return outs
    pruned = [dce_jaxpr(b, out_uk) for b in branches]
    kpos = [i for i in range(n) if not ops_uk[i] and any(reads[i] for _, reads in pruned)]
    upos = [i for i in range(n) if ops_uk[i]]

    def unknown_fn(b):
        def f(*vals):
            full = [None] * n
            for i, v in zip(kpos + upos, vals):
                full[i] = v
            return _split_eval(b, [full[i] for i in range(n) if not ops_uk[i]], ops_uk, [full[i] for i in upos])
        return f
    new, consts = _branches([unknown_fn(b) for b, _ in pruned], [avals[i] for i in kpos + upos])
    res = JaxprTrace.process_primitive(trace, cond_p, [index, *consts, *[ops[i] for i in kpos + upos]],
                                       dict(params, branches=new))
    it = iter(res)
    return [next(it) if u else o for u, o in zip(out_uk, outs)]


# ---------------------------------------------------------------------------------------
# while

def _while_unknowns(in_unknown, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cn, bn = cond_nconsts, body_nconsts
    cc, bc = list(in_unknown[:cn]), list(in_unknown[cn:cn + bn])
    c, _ = _fixpoint(in_unknown[cn + bn:], lambda c: jaxpr_unknowns(body_jaxpr, bc + c))
    if any(cc) or jaxpr_unknowns(cond_jaxpr, cc + c)[0]:  # an unknown trip count
        return [True] * len(c)
    return c


def _while_partial_eval(trace, args, params):
    cn, bn = params["cond_nconsts"], params["body_nconsts"]
    cond_j, body_j = params["cond_jaxpr"], params["body_jaxpr"]
    in_uk = [is_unknown(trace, a) for a in args]
    out_uk = _while_unknowns(in_uk, **params)
    kc = [j for j, u in enumerate(out_uk) if not u]
    if not kc:  # (reverse mode of it is JAX's error; linearize's forward map evaluates it)
        return JaxprTrace.process_primitive(trace, while_p, args, params)
    cc = args[:cn]
    # The known loop: the condition reads only known carries (else every carry is unknown).
    cj = cond_j.jaxpr
    k_cond = ClosedJaxpr(Jaxpr(cj.constvars, list(cj.invars[:cn]) + [cj.invars[cn + j] for j in kc],
                               cj.eqns, cj.outvars), cond_j.consts)
    body_uk = in_uk[cn:cn + bn] + list(out_uk)
    pruned, reads = dce_jaxpr(body_j, [not u for u in out_uk])
    kpos = [i for i in range(bn) if not body_uk[i] and reads[i]] + [bn + j for j in kc]

    def known_fn(*vals):
        full = [None] * len(body_uk)
        for i, v in zip(kpos, vals):
            full[i] = v
        o, _ = eval_partially(pruned, [full[i] for i in range(len(body_uk)) if not body_uk[i]], body_uk, [])
        assert all(v is not None for v in o), "a known carry came out unknown"
        return o
    kb, kconsts = _flat_trace(known_fn, [body_j.in_avals[i] for i in kpos])
    res = while_p.bind(*cc, *kconsts, *[args[cn + i] for i in kpos], cond_jaxpr=k_cond, body_jaxpr=kb,
                       cond_nconsts=cn, body_nconsts=len(kconsts) + len(kpos) - len(kc))
    it = iter(res)
    outs = [None if u else next(it) for u in out_uk]
    # Some carry is linear: the loop as it is (its known outputs come from the known loop).
    full = JaxprTrace.process_primitive(trace, while_p, args, params)
    return [f if u else o for u, f, o in zip(out_uk, full, outs)]


# ---------------------------------------------------------------------------------------

unknown_output_rules[scan_p] = _scan_unknowns
unknown_output_rules[cond_p] = _cond_unknowns
unknown_output_rules[while_p] = _while_unknowns
partial_eval_rules[scan_p] = _scan_partial_eval
partial_eval_rules[cond_p] = _cond_partial_eval
partial_eval_rules[while_p] = _while_partial_eval
