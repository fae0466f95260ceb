"""Evaluating a jaxpr by binding its primitives again (``jax.core.eval_jaxpr``).

Binding (rather than calling ``impl_rules``) lets every active trace see the equations: a
linear jaxpr evaluated under an outer ``jit``, ``grad`` or ``vmap`` is traced by it.
"""
from __future__ import annotations

import functools

import numpy as np
from jax import tree_util

from minixla.core.avals import WeakScalar, get_aval
from minixla.core.jaxpr import Literal


def eval_jaxpr(jaxpr, consts, args):
    """Values of ``jaxpr.outvars`` given values for its constvars and invars (flat lists)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x

    def read(a):
        if isinstance(a, Literal):  # (a weak literal stays weak: eager binds type by it)
            return WeakScalar(a.value) if a.aval.weak_type else a.value
        return env[a.id]

    for eqn in jaxpr.eqns:
        out = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        for v, o in zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]):
            env[v.id] = o
    return [read(a) for a in jaxpr.outvars]


def op_by_op(fun):
    """``fun``, a library function written with ``minixla.numpy`` ops and Python operators,
    evaluated eagerly as JAX evaluates it: traced to a jaxpr, whose equations then run one by one
    (each primitive's eager implementation, ``jax.lax`` op by op), so each op rounds in the
    operands' dtype (bf16/f16) as in JAX. Called eagerly, its Python operators would otherwise be
    NumPy's on NumPy arrays (``x * sigmoid(x)`` differed from ``jax.nn.silu`` in 508 of the
    65,536 bf16 values). Array arguments (and a Python scalar first argument, weakly typed, as
    the ``x`` of ``jax.nn``'s jitted functions) are traced; other arguments stay static. With a
    traced argument it is ``fun`` itself (the outer trace records its ops)."""
    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        import jax
        from minixla.core.tracing import Tracer, flatten_fun, trace_to_jaxpr
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if any(isinstance(x, Tracer) for x in leaves):
            return fun(*args, **kwargs)
        first = args[0] if args else None
        traced = [i for i, x in enumerate(leaves)
                  if isinstance(x, (np.ndarray, jax.Array)) and not jax.dtypes.issubdtype(
                      x.dtype, jax.dtypes.extended)
                  or (x is first and isinstance(x, (int, float)) and not isinstance(x, bool)
                      and i == 0)]
        if not traced:
            return fun(*args, **kwargs)
        values = [leaves[i] for i in traced]

        def flat_fun(*tracers):
            full = list(leaves)
            for i, t in zip(traced, tracers):
                full[i] = t
            a, k = tree_util.tree_unflatten(tree, full)
            out = fun(*a, **k)
            flat_out, out_tree = tree_util.tree_flatten(out)
            store.append(out_tree)
            return flat_out
        store = []
        closed = trace_to_jaxpr(flat_fun, [get_aval(v) for v in values])
        outs = eval_jaxpr(closed.jaxpr, closed.consts, values)
        return tree_util.tree_unflatten(store[0], outs)
    return wrapped
