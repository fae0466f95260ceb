"""A ``minixla.jit`` function called inside a trace: one ``jit`` equation (JAX's ``pjit``).

``make_jaxpr`` (or an outer ``jit``) of a function that calls a jitted ``g`` records
``jit[name=g jaxpr={ ... }]`` with ``g``'s jaxpr, as jax 0.10.2 prints it. The equation is
lowered by inlining (the whole program is one HLO module, compiled once, as XLA inlines
calls); its JVP and transpose differentiate the sub-jaxpr in place (so under ``grad`` the
inner equations appear inline, where JAX keeps a ``jit`` equation per pass), and its batching
rule batches the sub-jaxpr and binds a new ``jit`` equation, as JAX's does.
"""
from __future__ import annotations

from jax import tree_util

from minixla.core.avals import get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.interpreters import calls
from minixla.interpreters.ad import backward_pass, jvp_flat, jvp_rules, partial_eval_rules, transpose_rules
from minixla.interpreters.batching import batching_rules
from minixla.interpreters.eval import eval_jaxpr

jit_p = Primitive("jit")
jit_p.multiple_results = True
shape_rules[jit_p] = calls.call_shape_rule("jaxpr")
impl_rules[jit_p] = calls.call_impl("jaxpr")
calls.register_call_lowering(jit_p, "jaxpr")


def call_jitted(name, fun, args, kwargs):
    """``fun(*args, **kwargs)`` under an active trace, bound as one ``jit`` equation."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    store = []

    def flat_fun(*xs):
        a, k = tree_util.tree_unflatten(in_tree, list(xs))
        flat_out, out_tree = tree_util.tree_flatten(fun(*a, **k))
        store.append(out_tree)
        return flat_out
    closed, consts = calls.trace_call(flat_fun, [get_aval(x) for x in flat])
    outs = jit_p.bind(*consts, *flat, name=name, jaxpr=closed)
    return tree_util.tree_unflatten(store[0], list(outs))


def _jit_jvp(primals, tangents, *, name, jaxpr):
    return jvp_flat(lambda *xs: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, list(xs)), list(primals), list(tangents))


def _jit_transpose(cts, *args, name, jaxpr):
    return backward_pass(jaxpr.jaxpr, jaxpr.consts, list(cts), args=list(args))


def _jit_batch(vals, dims, *, name, jaxpr):
    size = calls.batch_size(vals, dims)
    outs = jit_p.bind(*vals, name=name, jaxpr=calls.batch_jaxpr(jaxpr, vals, dims, size))
    return outs, [0] * len(outs)


def _jit_partial_eval(trace, args, params):
    """Called on linear values (a ``custom_jvp`` rule's tangents, ``linear_transpose``): inlined,
    so its known equations run now and only its linear ones are staged (as its JVP inlines)."""
    jaxpr = params["jaxpr"]
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, list(args))


def _jit_unknowns(in_unknown, *, name, jaxpr):
    from minixla.interpreters.partial_eval import jaxpr_unknowns
    return jaxpr_unknowns(jaxpr, in_unknown)


def _register_partial_eval():
    from minixla.interpreters.partial_eval import unknown_output_rules
    partial_eval_rules[jit_p] = _jit_partial_eval
    unknown_output_rules[jit_p] = _jit_unknowns


_register_partial_eval()
jvp_rules[jit_p] = _jit_jvp
transpose_rules[jit_p] = _jit_transpose
batching_rules[jit_p] = _jit_batch
