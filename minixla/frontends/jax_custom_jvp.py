"""Import of JAX's ``custom_jvp_call`` with its rule: a ``minixla.custom_jvp`` whose primal is
the imported ``call_jaxpr`` and whose JVP is JAX's own rule, imported too.

JAX's rule is a Python function behind ``jvp_jaxpr_fun``; rather than call it (an internal
interface), the importer asks JAX for the jaxpr of ``jax.jvp`` of the same equation (JAX applies
its rule there) and interprets that jaxpr on minixla's primals and tangents. So ``minixla.grad``
of an imported ``jax.nn.relu`` is 0 at 0, as ``jax.grad``, instead of ``max``'s tie split 0.5;
likewise ``softplus``/``logaddexp`` ties, ``sinc`` at 0 and every other ``custom_jvp`` in JAX.
The JVP jaxpr is traced only when minixla differentiates the call (``jit``, ``vmap`` and
evaluation use the primal); a call with an integer operand keeps the primal only (its
derivative is then minixla's of the primal).
"""
from __future__ import annotations

import jax
import numpy as np

from minixla.frontends import jax_importer as imp
from minixla.interpreters.custom_derivatives import custom_jvp


def _is_float(aval):
    return np.issubdtype(aval.dtype, np.inexact) or aval.dtype.name == "bfloat16"


def rebind(prim, params, xs):
    """The JAX equation ``prim`` with ``params`` bound again on ``xs``, as
    ``jax.core.eval_jaxpr`` binds it (shared with ``jax_custom_vjp``)."""
    bind_params = prim.get_bind_params(params)
    if isinstance(bind_params, tuple):  # (older jax: subfuns first, then the params)
        subfuns, bind_params = bind_params
        return prim.bind(*subfuns, *xs, **bind_params)
    return prim.bind(*xs, **bind_params)


def _names(params):
    """The custom function's and its rule's names as JAX's debug info records them."""
    fun = getattr(getattr(params["call_jaxpr"].jaxpr, "debug_info", None), "func_name", None) or "custom_jvp_call"
    src = getattr(getattr(params.get("jvp_jaxpr_fun"), "debug_info", None), "func_src_info", None) or ""
    return str(fun), (src.split(" ")[0] if src else f"{fun}_jvp")


def _custom_jvp_call(*args, **params):
    sub = params["call_jaxpr"]
    stack = imp._where_stack()
    where = stack[-1] if stack else None

    def primal(*xs):
        return imp.eval_jax_jaxpr(sub.jaxpr, sub.consts, list(xs), where)
    if where is None or not all(_is_float(a) for a in sub.in_avals):
        return primal(*args)
    prim = where.eqn.primitive
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in sub.in_avals]

    def jax_call(*xs):
        return rebind(prim, params, xs)

    def rule(primals, tangents):
        closed = jax.make_jaxpr(lambda p, t: jax.jvp(jax_call, tuple(p), tuple(t)))(structs, structs)
        outs = imp.eval_jax_jaxpr(closed.jaxpr, closed.consts, [*primals, *tangents], where)
        n = len(outs) // 2
        return list(outs[:n]), list(outs[n:])
    primal.__name__, rule.__name__ = _names(params)
    f = custom_jvp(primal)
    f.defjvp(rule)
    return f(*args)


imp.import_rules["custom_jvp_call"] = _custom_jvp_call
