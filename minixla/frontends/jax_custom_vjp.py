"""Import of JAX's ``custom_vjp_call`` with its rules: a ``minixla.custom_vjp`` whose primal is
the imported ``call_jaxpr`` and whose backward pass is JAX's, imported too.

As for ``custom_jvp_call`` (``jax_custom_jvp``), JAX's ``fwd``/``bwd`` are Python functions
behind internal interfaces; the importer instead asks JAX for the jaxpr of ``jax.vjp`` of the
same equation bound again (JAX runs the user's ``fwd`` and ``bwd`` there) and interprets it on
minixla's values. minixla's ``fwd`` keeps the call's operands as the residuals, and its ``bwd``
runs that jaxpr on them and the output cotangents: the forward computation is repeated in the
backward pass (the values are JAX's; a gradient-clipping identity clips, as ``jax.grad``
does). The jaxpr is traced only when minixla differentiates the call. Integer operands get no
cotangent (JAX's ``float0``); a call with a non-float output keeps the primal only (its
derivative is then minixla's of the primal).
"""
from __future__ import annotations

import jax

from minixla.frontends import jax_importer as imp
from minixla.frontends.jax_custom_jvp import _is_float, rebind
from minixla.interpreters.custom_derivatives import custom_vjp


def _struct(aval):
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _names(params, fun):
    """The custom function's and its bwd rule's names as JAX's debug info records them."""
    name = getattr(getattr(fun.jaxpr, "debug_info", None), "func_name", None) or "custom_vjp_call"
    bwd = params.get("bwd")
    src = getattr(getattr(bwd, "debug_info", None), "func_src_info", None) or ""
    return str(name), (src.split(" ")[0] if src else f"{name}_bwd")


def _custom_vjp_call(*args, **params):
    sub = params.get("call_jaxpr") or params["fun_jaxpr"]
    stack = imp._where_stack()
    where = stack[-1] if stack else None

    def primal(*xs):
        return imp.eval_jax_jaxpr(sub.jaxpr, sub.consts, list(xs), where)
    if where is None or not all(_is_float(a) for a in sub.out_avals) or not any(_is_float(a) for a in sub.in_avals):
        return primal(*args)
    prim = where.eqn.primitive
    diff = [i for i, a in enumerate(sub.in_avals) if _is_float(a)]

    def jax_call(*xs):
        return rebind(prim, params, xs)

    def jax_bwd(xs, cts):  # JAX's cotangents of the float operands
        def of_floats(*fs):
            full = list(xs)
            for i, f in zip(diff, fs):
                full[i] = f
            return jax_call(*full)
        return jax.vjp(of_floats, *[xs[i] for i in diff])[1](list(cts))

    def fwd(*xs):
        return primal(*xs), list(xs)

    def bwd(res, cts):
        closed = jax.make_jaxpr(jax_bwd)([_struct(a) for a in sub.in_avals], [_struct(a) for a in sub.out_avals])
        outs = imp.eval_jax_jaxpr(closed.jaxpr, closed.consts, [*res, *cts], where)
        grads = [None] * len(res)
        for i, g in zip(diff, outs):
            grads[i] = g
        return tuple(grads)
    primal.__name__, bwd.__name__ = _names(params, sub)
    fwd.__name__ = primal.__name__ + "_fwd"
    f = custom_vjp(primal)
    f.defvjp(fwd, bwd)
    return f(*args)


imp.import_rules["custom_vjp_call"] = _custom_vjp_call
imp.import_rules["custom_vjp_call_jaxpr"] = _custom_vjp_call
