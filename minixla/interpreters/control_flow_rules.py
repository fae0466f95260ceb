"""JVP and transpose rules of ``cond``, ``while`` and ``scan`` (JAX's ``lax/control_flow``
``_cond_jvp``/``_cond_transpose``, ``_scan_jvp``/``_scan_transpose``, ``_while_loop_jvp``).

**JVP.** Each rule binds the primitive twice: once on the primals alone (the primal outputs,
known values even under ``linearize``), and once with the body *JVP-transformed* (its jaxpr
traced through ``jvp_flat``), which takes the primals and the tangents and returns only the
tangents. The second equation is linear in the tangent operands, so ``linearize`` stages
exactly it into the linear jaxpr (JAX gets the same split from partial evaluation). For a
``scan`` the primal scan also returns the carry at every step (the *residuals*), and the
tangent scan reads them as ``xs``: its carry is the tangent carry only.

The tangent carries are found by a fixpoint, as in JAX: a float carry whose initial tangent
is zero and whose update reads no non-zero tangent (a carry computed from constants) keeps a
symbolic ``Zero`` tangent and is not carried by the tangent scan.

**Partial evaluation.** Under ``linearize`` a loop or branch equation may mix known values (a
counter, a primal value a ``custom_jvp`` rule carries next to its tangent) with linear ones;
``control_flow_partial_eval.py`` splits it into a known equation, run forward, and an unknown
one, the only part staged into the linear jaxpr. So every carry a transpose rule sees is linear.

**Transpose** (reverse mode). A ``cond`` transposes branch by branch (``backward_pass`` of
each branch, the known operands as constants); a ``scan`` (all of whose carries are linear)
transposes to a scan in the other direction whose carry is the cotangent of the carry plus
the accumulated cotangents of its linear consts, and whose ``ys`` are the cotangents of its
linear ``xs``: the backward pass is a reverse scan over the saved residuals. A ``while`` has no
transpose (its trip count is unknown): JAX's error, pointing to ``scan`` or a static ``fori_loop``.
A re-traced body that returns a constant (an instantiated zero tangent or cotangent) closes
over it, and it becomes one more operand of the new equation.
"""
from __future__ import annotations

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from minixla.interpreters.ad import (Zero, backward_pass, instantiate, is_undefined, jvp_flat, jvp_rules,
                                     tangent_aval, transpose_rules)
from minixla.interpreters.partial_eval import dce_jaxpr, jaxpr_unknowns
from minixla.lax.control_flow import _trace_fun, cond_p, scan_p, while_p


def _eval(closed):
    from minixla.interpreters.eval import eval_jaxpr
    return lambda *args: eval_jaxpr(closed.jaxpr, [], list(args))


def _flat_trace(fun, avals):
    """``fun`` (flat args -> flat list) traced into a closure-converted jaxpr: ``(jaxpr,
    consts)``, the jaxpr's leading inputs being ``consts``, the values it closes over (e.g. a
    constant output, such as an instantiated zero tangent or cotangent): the caller passes
    them as leading operands (a loop's consts). Equations no output needs are dropped (JAX's
    ``dce_jaxpr`` of a re-traced body: a tangent or transposed body re-evaluates primal
    values, e.g. a loop's next counter, that it does not return); every input is kept."""
    from jax import tree_util
    tree = tree_util.tree_structure(tuple(range(len(avals))))
    # (re-evaluating a body's equations must stage its literal-only ones: see find_trace)
    jaxpr, consts, _ = _trace_fun(lambda *xs: list(fun(*xs)), tree, avals, stage_constants=True)
    jaxpr, _ = dce_jaxpr(jaxpr, [True] * len(jaxpr.out_avals))
    return jaxpr, consts


def _branches(funs, avals):
    """Each of ``funs`` traced on ``avals`` as a branch of one ``cond``: ``(branches, consts)``.
    The constants any branch closes over become leading operands that every branch takes
    (each reads only its own), so all branches keep one signature."""
    traced = [_flat_trace(f, avals) for f in funs]
    const_avals = [[get_aval(c) for c in cs] for _, cs in traced]

    def fresh(groups):
        return [Var(a) for g in groups for a in g]
    new = []
    for b, (j, cs) in enumerate(traced):
        own, ops = j.jaxpr.invars[:len(cs)], j.jaxpr.invars[len(cs):]
        invars = fresh(const_avals[:b]) + list(own) + fresh(const_avals[b + 1:]) + list(ops)
        new.append(ClosedJaxpr(Jaxpr([], invars, j.jaxpr.eqns, j.jaxpr.outvars), []))
    return tuple(new), [c for _, cs in traced for c in cs]


def _jvp_of(closed, nz, instantiate_out=None):
    """A function ``(*primals, *nonzero tangents) -> tangents of the outputs`` for ``closed``:
    its outputs' tangents, with float outputs' Zeros instantiated (every branch/step must
    return the same types)."""
    in_avals = closed.in_avals
    n = len(in_avals)

    def f(*args):
        primals, ts = list(args[:n]), iter(args[n:])
        tangents = [next(ts) if z else Zero(tangent_aval(a)) for a, z in zip(in_avals, nz)]
        _, touts = jvp_flat(_eval(closed), primals, tangents)
        return [instantiate(t) for t, a in zip(touts, closed.out_avals) if _is_float(a)]
    return f


def _fixpoint(carry_unknown, step):
    """Carries that become unknown (or get a non-zero tangent): ``step(carry_unknown) ->
    the body outputs' flags`` is iterated until no more carries turn (one pass per carry at most)."""
    carry_unknown = list(carry_unknown)
    while True:
        out = step(carry_unknown)
        new = [a or b for a, b in zip(carry_unknown, out)]
        if new == carry_unknown:
            return carry_unknown, out
        carry_unknown = new


def _is_float(aval) -> bool:
    d = np.dtype(aval.dtype)
    return d.kind == "f" or d.name == "bfloat16"


def _pruned_scan_body(closed, num_consts, num_carry):
    """A re-traced scan body without its dead equations (JAX's ``dce_jaxpr`` of the scan's
    jaxpr): e.g. the primal outputs a tangent or transposed body recomputes but does not
    return. Returns ``(body, used)``: ``used`` has one bool per input, False for a const or
    ``xs`` input nothing reads any more (the caller drops it and its operand: a residual the
    forward scan then need not save); carries are always kept."""
    pruned, used = dce_jaxpr(closed, [True] * len(closed.out_avals))
    used = [u or num_consts <= i < num_consts + num_carry for i, u in enumerate(used)]
    j = pruned.jaxpr
    body = Jaxpr(j.constvars, [v for v, u in zip(j.invars, used) if u], j.eqns, j.outvars)
    return ClosedJaxpr(body, pruned.consts), used


# ---------------------------------------------------------------------------------------
# cond

def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    nz = [not isinstance(t, Zero) for t in tangents[1:]]
    outs = cond_p.bind(index, *ops, branches=branches)
    op_avals = [get_aval(o) for o in ops]
    t_avals = [tangent_aval(a) for a, z in zip(op_avals, nz) if z]
    new, consts = _branches([_jvp_of(b, nz) for b in branches], op_avals + t_avals)
    touts = cond_p.bind(index, *consts, *ops, *[t for t in tangents[1:] if not isinstance(t, Zero)], branches=new)
    it = iter(touts)
    return outs, [next(it) if _is_float(a) else Zero(tangent_aval(a)) for a in branches[0].out_avals]


def _transpose_jaxpr(closed, linear, out_cts_avals):
    """``(*known, *cts) -> cotangents of the linear inputs`` for ``closed``, linear in its
    inputs at ``linear`` positions given the others."""
    j = closed.jaxpr
    known_vars = [v for v, lin in zip(j.invars, linear) if not lin]
    lin_vars = [v for v, lin in zip(j.invars, linear) if lin]
    bj = Jaxpr(known_vars, lin_vars, j.eqns, j.outvars)
    n_known = len(known_vars)

    def f(*args):
        known, cts = list(args[:n_known]), list(args[n_known:])
        in_cts = backward_pass(bj, known, cts)
        return [instantiate(c) for c in in_cts]
    return f


def _cond_transpose(cts, index, *ops, branches):
    linear = [is_undefined(o) for o in ops]
    known = [o for o in ops if not is_undefined(o)]
    cts = [instantiate(c) for c in cts]
    avals = [get_aval(k) for k in known] + [get_aval(c) for c in cts]
    new, consts = _branches([_transpose_jaxpr(b, linear, None) for b in branches], avals)
    in_cts = iter(cond_p.bind(index, *consts, *known, *cts, branches=new))
    return [None] + [next(in_cts) if lin else None for lin in linear]


jvp_rules[cond_p] = _cond_jvp
transpose_rules[cond_p] = _cond_transpose


# ---------------------------------------------------------------------------------------
# while

def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, rest = primals[:cond_nconsts], primals[cond_nconsts:]
    bc, carry = rest[:body_nconsts], rest[body_nconsts:]
    outs = while_p.bind(*primals, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                        body_nconsts=body_nconsts)
    bt = tangents[cond_nconsts:cond_nconsts + body_nconsts]
    ct = tangents[cond_nconsts + body_nconsts:]
    c_avals = [get_aval(c) for c in carry]
    # The tangent carry: every float carry (a tangent that starts at zero may not stay zero).
    t_carry = [_is_float(a) for a in c_avals]
    bc_nz = [not isinstance(t, Zero) for t in bt]
    bc_avals = [get_aval(x) for x in bc]
    nb = len(bc)

    def body(*args):
        b_primals = list(args[:nb])
        b_t = list(args[nb:nb + sum(bc_nz)])
        c = list(args[nb + sum(bc_nz):nb + sum(bc_nz) + len(carry)])
        c_t = iter(args[nb + sum(bc_nz) + len(carry):])
        it = iter(b_t)
        tangents_in = [next(it) if z else Zero(tangent_aval(a)) for a, z in zip(bc_avals, bc_nz)]
        tangents_in += [next(c_t) if f else Zero(tangent_aval(a)) for a, f in zip(c_avals, t_carry)]
        p_out, t_out = jvp_flat(_eval(body_jaxpr), b_primals + c, tangents_in)
        return list(p_out) + [instantiate(t) for t, f in zip(t_out, t_carry) if f]

    t_avals = [tangent_aval(a) for a, f in zip(c_avals, t_carry) if f]
    b_avals = bc_avals + [tangent_aval(a) for a, z in zip(bc_avals, bc_nz) if z]
    new_body, b_consts = _flat_trace(body, b_avals + c_avals + t_avals)
    nc = len(cc)

    def cond(*args):
        return _eval(cond_jaxpr)(*args[:nc], *args[nc:nc + len(carry)])
    new_cond, c_consts = _flat_trace(cond, [get_aval(x) for x in cc] + c_avals + t_avals)
    t_init = [instantiate(t) for t, f in zip(ct, t_carry) if f]
    res = while_p.bind(*c_consts, *cc, *b_consts, *bc, *[t for t in bt if not isinstance(t, Zero)], *carry,
                       *t_init, cond_jaxpr=new_cond, body_jaxpr=new_body, cond_nconsts=len(c_consts) + nc,
                       body_nconsts=len(b_consts) + nb + sum(bc_nz))
    it = iter(res[len(carry):])
    return outs, [next(it) if f else Zero(tangent_aval(a)) for a, f in zip(c_avals, t_carry)]


def _while_transpose(cts, *args, **params):
    raise errors.TransformValueError(
        "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
        "dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop.\n"
        f"  at: {errors.user_source_line()}")


jvp_rules[while_p] = _while_jvp
transpose_rules[while_p] = _while_transpose


# ---------------------------------------------------------------------------------------
# scan

def _scan_jvp(primals, tangents, *, jaxpr, length, num_carry, num_consts, reverse, unroll):
    nk, nc = num_consts, num_carry
    consts, carry, xs = primals[:nk], primals[nk:nk + nc], primals[nk + nc:]
    tk, tc, tx = tangents[:nk], tangents[nk:nk + nc], tangents[nk + nc:]
    in_avals = jaxpr.in_avals
    k_avals, c_avals, x_avals = in_avals[:nk], in_avals[nk:nk + nc], in_avals[nk + nc:]
    body = _eval(jaxpr)
    # 1. The tangent scan: consts (primal consts, their tangents), carry (the float carries'
    #    tangents), xs (primal xs, residual carries, xs tangents). It is traced first, so
    #    that the primal scan saves only the residuals its pruned body reads.
    k_nz = [not isinstance(t, Zero) for t in tk]
    x_nz = [not isinstance(t, Zero) for t in tx]
    # A carry's tangent is non-zero if its initial tangent is, or if the body's output for it
    # depends on a non-zero tangent (a fixpoint, as JAX's): a float carry computed from
    # constants keeps a symbolic zero tangent instead of a carried array of zeros.
    c_float = [_is_float(a) for a in c_avals]
    c_t, out_nz = _fixpoint([f and not isinstance(t, Zero) for f, t in zip(c_float, tc)],
                            lambda c: jaxpr_unknowns(jaxpr, k_nz + c + x_nz))
    c_t = [f and z for f, z in zip(c_float, c_t)]
    y_avals = jaxpr.out_avals[nc:]
    y_t = [_is_float(a) and z for a, z in zip(y_avals, out_nz[nc:])]
    nkt, nct, nxt = sum(k_nz), sum(c_t), sum(x_nz)

    def tangent_body(*args):
        i = 0
        kp = list(args[i:i + nk]); i += nk  # noqa: E702
        kt = iter(args[i:i + nkt]); i += nkt  # noqa: E702
        ct_ = iter(args[i:i + nct]); i += nct  # noqa: E702
        xp = list(args[i:i + len(xs)]); i += len(xs)  # noqa: E702
        cp = list(args[i:i + nc]); i += nc  # noqa: E702
        xt = iter(args[i:i + nxt])
        tin = [next(kt) if z else Zero(tangent_aval(a)) for a, z in zip(k_avals, k_nz)]
        tin += [next(ct_) if f else Zero(tangent_aval(a)) for a, f in zip(c_avals, c_t)]
        tin += [next(xt) if z else Zero(tangent_aval(a)) for a, z in zip(x_avals, x_nz)]
        _, tout = jvp_flat(body, kp + cp + xp, tin)
        return ([instantiate(t) for t, f in zip(tout[:nc], c_t) if f]
                + [instantiate(t) for t, f in zip(tout[nc:], y_t) if f])

    t_avals = (list(k_avals) + [tangent_aval(a) for a, z in zip(k_avals, k_nz) if z]
               + [tangent_aval(a) for a, f in zip(c_avals, c_t) if f]
               + list(x_avals) + list(c_avals) + [tangent_aval(a) for a, z in zip(x_avals, x_nz) if z])
    tj, t_consts = _flat_trace(tangent_body, t_avals)
    n_tk = len(t_consts) + nk + nkt
    tj, used = _pruned_scan_body(tj, n_tk, nct)
    res_used = used[n_tk + nct + len(xs):n_tk + nct + len(xs) + nc]
    # 2. The primal scan, also returning the carries each step starts from that the tangent
    #    body reads (the residuals).

    def primal_body(*args):
        out = body(*args)
        return list(out) + [c for c, u in zip(args[nk:nk + nc], res_used) if u]
    pj, p_consts = _flat_trace(primal_body, in_avals)
    res = scan_p.bind(*p_consts, *primals, jaxpr=pj, length=length, num_carry=nc, num_consts=len(p_consts) + nk,
                      reverse=reverse, unroll=unroll)
    n_out = len(jaxpr.out_avals)
    outs, saved = res[:n_out], iter(res[n_out:])
    residuals = [next(saved) if u else None for u in res_used]
    operands = (list(t_consts) + list(consts) + [t for t in tk if not isinstance(t, Zero)]
                + [instantiate(t) for t, f in zip(tc, c_t) if f]
                + list(xs) + residuals + [t for t in tx if not isinstance(t, Zero)])
    operands = [x for x, u in zip(operands, used) if u]
    touts = scan_p.bind(*operands, jaxpr=tj, length=length, num_carry=nct, num_consts=sum(used[:n_tk]),
                        reverse=reverse, unroll=unroll)
    it = iter(touts)
    t_carry = [next(it) if f else Zero(tangent_aval(a)) for a, f in zip(c_avals, c_t)]
    t_ys = [next(it) if f else Zero(tangent_aval(a.update(shape=(length,) + a.shape))) for a, f in zip(y_avals, y_t)]
    return outs, t_carry + t_ys


def _scan_transpose(cts, *args, jaxpr, length, num_carry, num_consts, reverse, unroll):
    nk, nc = num_consts, num_carry
    consts, carry, xs = args[:nk], args[nk:nk + nc], args[nk + nc:]
    k_lin = [is_undefined(a) for a in consts]
    x_lin = [is_undefined(a) for a in xs]
    # (every carry is linear: partial evaluation moved the known ones to a scan of their own; a
    #  known initial value is an instantiated zero tangent, whose cotangent is dropped)
    in_avals = jaxpr.in_avals
    linear = k_lin + [True] * nc + x_lin
    kk = [a for a in consts if not is_undefined(a)]
    kx = [a for a in xs if not is_undefined(a)]
    ct_carry = [instantiate(c) for c in cts[:nc]]
    ct_ys = [instantiate(c) for c in cts[nc:]]
    lk_avals = [a for a, lin in zip(in_avals[:nk], k_lin) if lin]
    f_t = _transpose_jaxpr(jaxpr, linear, None)
    nkk, nlk, nkx = len(kk), len(lk_avals), len(kx)

    def body(*a):
        i = 0
        known_k = list(a[i:i + nkk]); i += nkk  # noqa: E702
        acc = list(a[i:i + nlk]); i += nlk  # noqa: E702
        c_ct = list(a[i:i + nc]); i += nc  # noqa: E702
        known_x = list(a[i:i + nkx]); i += nkx  # noqa: E702
        y_ct = list(a[i:])
        from minixla import lax
        in_cts = f_t(*known_k, *known_x, *c_ct, *y_ct)  # (known order: consts then xs)
        k_ct, c_new, x_ct = in_cts[:nlk], in_cts[nlk:nlk + nc], in_cts[nlk + nc:]
        return [lax.add(s, t) for s, t in zip(acc, k_ct)] + list(c_new) + list(x_ct)

    ys_avals = [get_aval(c).update(shape=get_aval(c).shape[1:]) for c in ct_ys]
    avals = ([get_aval(k) for k in kk] + lk_avals + [get_aval(c) for c in ct_carry]
             + [get_aval(x).update(shape=get_aval(x).shape[1:]) for x in kx] + ys_avals)
    tj, t_consts = _flat_trace(body, avals)
    tj, used = _pruned_scan_body(tj, len(t_consts) + nkk, nlk + nc)
    zeros = [instantiate(Zero(a)) for a in lk_avals]
    operands = [x for x, u in zip([*t_consts, *kk, *zeros, *ct_carry, *kx, *ct_ys], used) if u]
    res = scan_p.bind(*operands, jaxpr=tj, length=length, num_carry=nlk + nc,
                      num_consts=sum(used[:len(t_consts) + nkk]), reverse=not reverse, unroll=unroll)
    k_cts, c_cts, x_cts = iter(res[:nlk]), res[nlk:nlk + nc], iter(res[nlk + nc:])
    return ([next(k_cts) if lin else None for lin in k_lin]
            + [c if is_undefined(a) else None for c, a in zip(c_cts, carry)]
            + [next(x_cts) if lin else None for lin in x_lin])


jvp_rules[scan_p] = _scan_jvp
transpose_rules[scan_p] = _scan_transpose


# ---------------------------------------------------------------------------------------
# vmap (``batching_rules``). Every operand is given the batch axis in front (an unbatched one
# is broadcast), each sub-jaxpr is vmapped over all its inputs, and every output is batched:
# simple and always correct (JAX tracks which carries stay unbatched; here they are just
# computed per example).

def _vmapped(closed, size):
    from minixla.interpreters.api import vmap
    return vmap(lambda *a: list(_eval(closed)(*a)), in_axes=0, out_axes=0, axis_size=size)


def _front(vals, dims, size):
    from minixla.interpreters.batching import bdim_at_front
    return [bdim_at_front(v, d, size) for v, d in zip(vals, dims)]


def _batched_avals(vals):
    return [get_aval(v) for v in vals]


def _size(vals, dims):
    return next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)


def _cond_batch(vals, dims, *, branches):
    from minixla import lax
    size = _size(vals, dims)
    index, *ops = vals
    ops = _front(ops, dims[1:], size)
    avals = _batched_avals(ops)
    new = []
    for b in branches:
        j, consts = _flat_trace(_vmapped(b, size), avals)
        assert not consts
        new.append(j)
    if dims[0] is None:  # one branch for the whole batch
        return cond_p.bind(index, *ops, branches=tuple(new)), [0] * len(branches[0].out_avals)
    # A batched index: every branch runs, and each example selects its own (as JAX). Each
    # branch reads its operands through stop_gradient where another branch was taken, so the
    # branch not taken passes back no cotangent (a NaN it computes, e.g. sqrt(-1)'s, would
    # otherwise poison the gradient through the select's zero).
    index = _front([index], [dims[0]], size)[0]

    def taken_by(i, x):
        shape = get_aval(x).shape
        taken = lax.eq(index, lax.full(get_aval(index).shape, i, get_aval(index).dtype))
        taken = lax.broadcast_in_dim(taken, shape, (0,)) if len(shape) > 1 else taken
        return lax.select_n(taken, lax.stop_gradient(x), x)

    outs = [_eval(j)(*[taken_by(i, x) for x in ops]) for i, j in enumerate(new)]
    results = []
    for k in range(len(branches[0].out_avals)):
        cases = [o[k] for o in outs]
        shape = get_aval(cases[0]).shape
        which = lax.broadcast_in_dim(index, shape, (0,)) if len(shape) > 1 else index
        results.append(lax.select_n(which, *cases))
    return results, [0] * len(results)


def _while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """A batched predicate: the loop runs while any example's does; an example that is done
    keeps its carry (each step selects between the new and the old value)."""
    from minixla import lax
    size = _size(vals, dims)
    vals = _front(vals, dims, size)
    cc, bc = vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + body_nconsts]
    carry = vals[cond_nconsts + body_nconsts:]
    nc, nb = len(cc), len(bc)
    vcond, vbody = _vmapped(cond_jaxpr, size), _vmapped(body_jaxpr, size)

    def any_pred(*a):
        p = vcond(*a)[0]
        return [lax.reduce_or(p, (0,))]

    def body(*a):
        c_consts, b_consts, c = a[:nc], a[nc:nc + nb], a[nc + nb:]
        p = vcond(*c_consts, *c)[0]
        new = vbody(*b_consts, *c)
        out = []
        for n_, o in zip(new, c):
            shape = get_aval(o).shape
            which = lax.broadcast_in_dim(p, shape, (0,)) if len(shape) > 1 else p
            out.append(lax.select_n(which, o, n_))
        return list(c_consts) + out
    c_avals = _batched_avals(carry)
    new_cond, k1 = _flat_trace(any_pred, _batched_avals(cc) + c_avals)
    new_body, k2 = _flat_trace(body, _batched_avals(cc) + _batched_avals(bc) + c_avals)
    assert not k1 and not k2
    outs = while_p.bind(*cc, *cc, *bc, *carry, cond_jaxpr=new_cond, body_jaxpr=_drop_outputs(new_body, nc),
                        cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, [0] * len(outs)


def _drop_outputs(closed, n):
    """``closed`` without its first ``n`` outputs."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, j.outvars[n:]), closed.consts)


def _scan_batch(vals, dims, *, jaxpr, length, num_carry, num_consts, reverse, unroll):
    from minixla.interpreters.batching import moveaxis
    size = _size(vals, dims)
    nk, nc = num_consts, num_carry
    front = _front(vals[:nk + nc], dims[:nk + nc], size)
    xs = []
    for v, d in zip(vals[nk + nc:], dims[nk + nc:]):
        v = _front([v], [d if d is None else d], size)[0]  # batch first, then the scan axis second
        xs.append(moveaxis(v, 0, 1))
    x_avals = [get_aval(x).update(shape=(get_aval(x).shape[1:])) for x in xs]
    j, consts = _flat_trace(_vmapped(jaxpr, size), _batched_avals(front) + x_avals)
    assert not consts
    outs = scan_p.bind(*front, *xs, jaxpr=j, length=length, num_carry=nc, num_consts=nk, reverse=reverse,
                       unroll=unroll)
    return outs, [0] * nc + [1] * (len(outs) - nc)


def _register_batching():
    from minixla.interpreters.batching import batching_rules
    batching_rules[cond_p] = _cond_batch
    batching_rules[while_p] = _while_batch
    batching_rules[scan_p] = _scan_batch


_register_batching()

from minixla.interpreters import control_flow_partial_eval  # noqa: E402,F401 (their known/unknown split)
