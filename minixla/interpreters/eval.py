"""Evaluating a jaxpr by binding its primitives again (``jax.core.eval_jaxpr``).

Binding (rather than calling ``impl_rules``) lets every active trace see the equations: a
linear jaxpr evaluated under an outer ``jit``, ``grad`` or ``vmap`` is traced by it.
"""
from __future__ import annotations

from minixla.core.jaxpr import Literal


def eval_jaxpr(jaxpr, consts, args):
    """Values of ``jaxpr.outvars`` given values for its constvars and invars (flat lists)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x

    def read(a):
        return a.value if isinstance(a, Literal) else env[a.id]

    for eqn in jaxpr.eqns:
        out = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        for v, o in zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]):
            env[v.id] = o
    return [read(a) for a in jaxpr.outvars]
