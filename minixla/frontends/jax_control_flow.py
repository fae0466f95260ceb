"""Import rules for JAX's structured control flow (``cond``, ``while``, ``scan``) and ``top_k``.

A JAX control-flow equation holds its bodies as JAX jaxprs. Each rule calls minixla's own
``lax.switch`` / ``lax.while_loop`` / ``lax.scan`` with Python bodies that *interpret* JAX's body
jaxprs (``eval_jax_jaxpr``), so minixla traces them into its own sub-jaxprs: the imported program
is minixla's control flow, with all its passes, transformations and backends. The operands JAX
passes as constants (``num_consts``, ``cond_nconsts``/``body_nconsts``, a cond's operands) are
closed over by the bodies; minixla's tracer turns them back into operands.
"""
from __future__ import annotations

from minixla import lax
from minixla.core.avals import get_aval
from minixla.frontends.jax_importer import _is_key as is_key_aval
from minixla.frontends.jax_importer import _where_stack, eval_jax_jaxpr, import_rules
from minixla.random.keys import PRNGKeyArray


def _body(closed, consts=()):
    """A Python function running JAX's closed jaxpr ``closed`` on ``consts + args``. Typed
    PRNG keys cross into and out of minixla's control flow as their ``uint32[..., 2]`` data
    (``_unkey``), and are keys again inside (``_rekey``, by the jaxpr's own types)."""
    stack = _where_stack()
    where = stack[-1] if stack else None
    n = len(consts)

    def run(*args):
        args = _rekey(closed.jaxpr.invars[n:], args)
        return _unkey(eval_jax_jaxpr(closed.jaxpr, closed.consts, list(consts) + list(args), where))
    return run


def _unkey(values):
    return [v._base if type(v) is PRNGKeyArray else v for v in values]


def _rekey(jvars, values):
    from minixla.frontends.jax_random import key_of
    return [key_of(j.aval, v) if is_key_aval(j.aval) and type(v) is not PRNGKeyArray else v
            for j, v in zip(jvars, values)]


def _cond(index, *operands, branches, **_):
    outs = lax.switch(index, [_body(b) for b in branches], *_unkey(operands))
    return _rekey(branches[0].jaxpr.outvars, list(outs))


def _while(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    return _rekey(body_jaxpr.jaxpr.outvars, _while_data(
        *_unkey(args), cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
        body_nconsts=body_nconsts))


def _while_data(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cond_consts = args[:cond_nconsts]
    body_consts = args[cond_nconsts:cond_nconsts + body_nconsts]
    init = list(args[cond_nconsts + body_nconsts:])
    cond, body = _body(cond_jaxpr, cond_consts), _body(body_jaxpr, body_consts)
    if not get_aval(cond(*init)[0]).shape:
        return list(lax.while_loop(lambda carry: cond(*carry)[0], lambda carry: list(body(*carry)), init))

    # A batched predicate (jax.vmap of a loop whose condition depends on the example): JAX's
    # lowering runs the loop while any example goes on and updates only the examples whose
    # predicate holds (the predicate's shape is a prefix of every carry's).
    def any_example(carry):
        pred = cond(*carry)[0]
        return lax.reduce_or(pred, tuple(range(get_aval(pred).ndim)))

    def masked_body(carry):
        pred = cond(*carry)[0]
        pshape = get_aval(pred).shape
        out = []
        for old, new in zip(carry, body(*carry)):
            shape = get_aval(old).shape
            mask = lax.broadcast_in_dim(pred, shape, tuple(range(len(pshape))))
            out.append(lax.select(mask, new, old))
        return out
    return list(lax.while_loop(any_example, masked_body, init))


def _scan(*args, jaxpr, num_consts, num_carry, length, reverse, unroll, **_):
    args = _unkey(args)
    consts, init = args[:num_consts], list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    body = _body(jaxpr, consts)

    def step(carry, x):
        outs = body(*carry, *x)
        return list(outs[:num_carry]), list(outs[num_carry:])
    carry, ys = lax.scan(step, init, xs, length=length, reverse=reverse,
                         unroll=unroll if isinstance(unroll, int) else 1)
    return _rekey(jaxpr.jaxpr.outvars, list(carry) + list(ys))


def _empty(*, dtype, **_):
    # (``empty2``: the uninitialized value JAX's partial evaluation of ``cond`` puts in the
    # branches that do not compute a residual; any value will do, zeros are deterministic)
    return lax.full((), 0, dtype)


def _top_k(operand, *, k, axis=-1, **_):
    return list(lax.top_k(operand, k, axis=axis))


import_rules.update({"cond": _cond, "while": _while, "scan": _scan, "top_k": _top_k,
                     "empty2": _empty, "empty": _empty})
