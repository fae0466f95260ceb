"""``linear_custom_vjp``: a ``custom_vjp`` of a function *linear* in its arguments, whose
backward rule needs no residuals (a solve whose transpose is another solve: what
``lax.custom_linear_solve`` builds). Such a call may be applied to tangents -- it then sits in
the linear jaxpr ``grad`` transposes -- and its transpose there is the backward rule (the role
of the transpose rule of JAX's ``linear_solve_p``). A ``custom_vjp_call`` of an ordinary
``custom_vjp`` in a linear jaxpr keeps JAX's error: it has no transpose rule.
"""
from __future__ import annotations

from jax import tree_util

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.interpreters.ad import instantiate, is_undefined, transpose_rules
from minixla.interpreters.custom_derivatives import custom_vjp, custom_vjp_call_p


class linear_custom_vjp(custom_vjp):
    """A ``custom_vjp`` whose function is linear and whose ``bwd(None, ct)`` ignores residuals."""
    linear = True


def _custom_vjp_call_t(cts, *args, name, bwd, call_jaxpr, fwd, symbolic_zeros):
    if not getattr(getattr(fwd, "cv", None), "linear", False):
        raise errors.UnsupportedError("Transpose rule (for reverse-mode differentiation) for 'custom_vjp_call' "
                                      "not implemented")
    avals = [a.aval if is_undefined(a) else get_aval(a) for a in args]
    in_cts = bwd([], tree_util.tree_structure(None), [instantiate(c) for c in cts], avals)
    return [c if is_undefined(a) else None for a, c in zip(args, in_cts)]


transpose_rules[custom_vjp_call_p] = _custom_vjp_call_t
