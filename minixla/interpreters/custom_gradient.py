"""``custom_gradient`` and ``closure_convert`` (``jax.custom_gradient``, ``jax.closure_convert``).

- ``closure_convert(fun, *example_args)``: ``fun`` traced on the examples' avals, the values it
  closes over (a tracer of an enclosing trace among them) made explicit: ``(converted, consts)``
  with ``converted(*args, *consts) == fun(*args)`` -- what a ``custom_vjp`` rule needs when its
  function closes over values being differentiated.
- ``custom_gradient(fun)``: ``fun(*args)`` returns ``(value, vjp_fn)``; differentiation uses
  ``vjp_fn(ct)`` (a tuple of one cotangent per argument, or one cotangent for one argument) for
  the cotangents of the arguments. A ``custom_vjp`` whose forward pass traces ``vjp_fn`` on the
  output's avals and keeps what it closes over as the residuals, as JAX builds it; like any
  ``custom_vjp``, it has no forward-mode derivative.
"""
from __future__ import annotations

from jax import tree_util

from minixla.core.avals import get_aval
from minixla.interpreters import calls
from minixla.interpreters.custom_derivatives import custom_vjp
from minixla.interpreters.eval import eval_jaxpr

__all__ = ["closure_convert", "custom_gradient"]


def _convert(fun, avals, in_tree):
    store = []

    def flat_fun(*xs):
        flat, tree = tree_util.tree_flatten(fun(*tree_util.tree_unflatten(in_tree, list(xs))))
        store.append(tree)
        return flat
    closed, consts = calls.trace_call(flat_fun, avals)
    return closed, consts, store[0]


def closure_convert(fun, *example_args):
    """``(converted, consts)``: ``converted(*args, *consts)`` computes ``fun(*args)`` for
    arguments of the examples' pytree structure, shapes and dtypes, with the values ``fun``
    closes over passed explicitly as ``consts`` (a list of arrays or tracers). Mirrors
    ``jax.closure_convert``; every closed-over array is hoisted (JAX hoists the float ones)."""
    flat, in_tree = tree_util.tree_flatten(example_args)
    closed, consts, out_tree = _convert(fun, [get_aval(x) for x in flat], in_tree)
    n = len(consts)

    def converted(*args_and_consts):
        args, cs = args_and_consts[:len(args_and_consts) - n], args_and_consts[len(args_and_consts) - n:]
        xs, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError(f"closure_convert: the converted function takes arguments of structure {in_tree}, "
                            f"got {tree}")
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(closed.jaxpr, [], list(cs) + xs))
    converted.__name__ = getattr(fun, "__name__", "converted")
    return converted, list(consts)


def custom_gradient(fun):
    """``fun`` with the gradient its own ``vjp_fn`` gives (``jax.custom_gradient``): ``fun(*args)``
    returns ``(value, vjp_fn)``; the result returns ``value``, and ``grad``/``vjp`` call
    ``vjp_fn(ct)`` for the arguments' cotangents. Raises ``TypeError`` when ``vjp_fn`` is fed
    cotangents of another structure than ``value`` (JAX's check)."""
    import functools

    @functools.wraps(fun)
    def call(*args):
        rule_of = {}  # (this call's vjp_fn, converted by its forward pass: static, not a residual)

        def value(*args):
            return fun(*args)[0]
        value.__name__ = getattr(fun, "__name__", "custom_gradient")
        wrapped = custom_vjp(value)

        def fwd(*args):
            ans, rule = fun(*args)
            flat, out_tree = tree_util.tree_flatten((ans,))  # (rule(ct): one argument)
            closed, consts, in_tree = _convert(rule, [get_aval(x) for x in flat], out_tree)
            rule_of["rule"] = (closed, out_tree, in_tree)
            return ans, consts

        def bwd(consts, cts):
            closed, out_tree, in_tree = rule_of["rule"]
            cts_flat, tree = tree_util.tree_flatten((cts,))
            if tree != out_tree:
                raise TypeError(f"{out_tree}\n!=\n{tree}")
            out = tree_util.tree_unflatten(in_tree, eval_jaxpr(closed.jaxpr, [], list(consts) + cts_flat))
            return out if isinstance(out, tuple) else (out,)
        wrapped.defvjp(fwd, bwd)
        return wrapped(*args)
    return call
