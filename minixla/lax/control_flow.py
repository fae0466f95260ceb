"""Structured control flow: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``
(``jax/_src/lax/control_flow``).

Python ``if``/``for`` on traced values cannot be staged (the value is unknown while tracing).
These functions take the branch and loop bodies as Python functions, trace each once into a
*closed sub-jaxpr* and bind one primitive that carries it:

- ``cond[branches=(...)] index *operands``: branch ``index`` (an ``int32`` clamped to the
  branches) runs; ``lax.cond(pred, true_fun, false_fun)`` is ``branches=(false_fun, true_fun)``
  with ``index = convert(pred, int32)``, as in JAX.
- ``while[cond_jaxpr cond_nconsts body_jaxpr body_nconsts] *cond_consts *body_consts *carry``.
- ``scan[jaxpr length num_carry num_consts reverse unroll] *consts *carry *xs`` -> ``*carry *ys``.

As in JAX, the values a body closes over (outer tracers, arrays) are *closure-converted*: they
become the leading inputs of the sub-jaxpr and operands of the equation (its ``*consts``), so
every sub-jaxpr is closed over nothing and its stages (lowering, evaluation, transformations)
see all its inputs.

Types follow JAX's rules. A weakly typed leaf of a loop's initial carry (``0``, ``0.0``)
whose type the body's output does not match is first converted to ``result_type(leaf, body
output)`` and the body traced again (JAX's ``_promote_weak_typed_input``); a loop's results
have its body's output types and a ``cond``'s those of branch 0, weak types included (JAX's
abstract evaluation). ``fori_loop``'s bounds follow JAX's rule (one dtype, or two signed
integers one of them weakly typed). Errors are JAX's messages: branch outputs or loop carries
of a different pytree structure or types name each path and what differs (the same bullet
lists, ``pytree leaf`` and ``so the dtypes do not match`` wording); a non-scalar predicate, a
non-integer index, a ``scan`` body that returns no pair, unequal bound dtypes and inconsistent
``scan`` lengths are errors at the user's line, with tracers named by their avals.
"""
from __future__ import annotations

import inspect

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.core.tracing import JaxprTrace, Tracer, trace_to_jaxpr

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


def _prim(name):
    p = Primitive(name)
    p.multiple_results = True
    return p


_NO_OPERAND = object()  # (``operand=None`` is an operand, as in JAX)

cond_p = _prim("cond")
while_p = _prim("while")
scan_p = _prim("scan")

# ---------------------------------------------------------------------------------------
# Tracing a body into a closed sub-jaxpr.

def _fun_name(f) -> str:
    """``'<lambda> at file.py:12'``, as JAX's messages name a branch or body function."""
    name = getattr(f, "__name__", type(f).__name__)
    try:
        return f"{name} at {inspect.getsourcefile(f)}:{inspect.getsourcelines(f)[1]}"
    except (TypeError, OSError):
        return name


def _avals_of(leaves):
    return [get_aval(x) for x in leaves]


def _trace_fun(fun, in_tree, in_avals, stage_constants=False):
    """Trace ``fun`` (taking the pytree ``in_tree`` of ``in_avals``'s leaves as positional
    arguments) into a closure-converted ``ClosedJaxpr``; returns ``(jaxpr, consts, out_tree)``:
    the jaxpr's inputs are ``consts`` (the values it closes over) followed by ``in_avals``.
    ``stage_constants`` stages operations on literals only too (``core.tracing.find_trace``)."""
    store = []

    def flat(*xs):
        args = tree_util.tree_unflatten(in_tree, xs)
        out = fun(*args)
        leaves, tree = tree_util.tree_flatten(out)
        store.append((tree, out))
        return leaves
    trace = JaxprTrace()
    trace.stage_everything = True  # (see ``core.tracing.find_trace``)
    trace.stage_constants = stage_constants
    closed = trace_to_jaxpr(flat, list(in_avals), trace)
    jaxpr = closed.jaxpr
    converted = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(converted, []), list(closed.consts), store[0]


def _type_str(aval) -> str:
    """``float32[3]``: JAX's ``str_short`` of an aval, as its control-flow messages print it."""
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


class _AvalText:
    """An aval as JAX's messages print it: ``~float32[]`` on its own (``~``: weakly typed),
    ``ShapedArray(float32[], weak_type=True)`` inside a container."""

    def __init__(self, aval):
        self.aval = aval

    def __str__(self):
        return ("~" if self.aval.weak_type else "") + _type_str(self.aval)

    def __repr__(self):
        return f"ShapedArray({_type_str(self.aval)}{', weak_type=True' if self.aval.weak_type else ''})"


def _value_str(x) -> str:
    """A value as JAX's messages print it: a concrete value as itself, a tracer as its class
    and aval (JAX: ``JitTracer(~float32[])``), never a bare ``Tracer``."""
    if isinstance(x, Tracer):
        return f"{type(x).__name__}({_AvalText(x.aval)})"
    return str(x)


def _typematch(a, b) -> bool:
    """JAX's ``core.typematch``: the same shape and dtype, weak types aside."""
    return a.shape == b.shape and a.dtype == b.dtype


def _difference(a, b) -> str | None:
    """Why avals ``a`` and ``b`` are not the same type for a branch/carry (weak types aside)."""
    return _mismatch(a, b)[len(", so "):] or None


def _mismatch(a, b) -> str:
    """JAX's ``core.aval_mismatch_extra``: ``', so the dtypes do not match'`` (and/or the
    shapes), ``''`` when the types match."""
    why = (["the dtypes do not match"] if a.dtype != b.dtype else []) + \
        (["the shapes do not match"] if a.shape != b.shape else [])
    if not why:
        return ""
    return ", so " + (why[0] if len(why) == 1 else ", ".join(why[:-1]) + ", and " + why[-1])


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def _listed(diffs, capitalize=True, tight=False) -> str:
    """One difference as a sentence, several as JAX's bullet list (``tight``: cond's layout,
    without a blank line between bullets)."""
    if len(diffs) == 1:
        return f"{_capitalize(diffs[0]) if capitalize else diffs[0]}.\n"
    if tight:
        return "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}.\n"
    return "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"


try:  # JAX's own account of how two pytrees differ (which path, which node types, why)
    from jax._src.tree_util import equality_errors as _equality_errors
except ImportError:  # pragma: no cover (an older jax: the structures alone)
    def _equality_errors(t1, t2):
        yield (), str(tree_util.tree_structure(t1)), str(tree_util.tree_structure(t2)), \
            "the pytree structures differ"


class _LeafType(type):
    def __repr__(cls):
        return "pytree leaf"


# A pytree leaf standing in for any value, its type printed as JAX's
# ``equality_errors_pytreedef`` prints it (``pytree leaf``).
_Leaf = _LeafType("Leaf", (), {})


def _tree_diffs(tree1, tree2):
    """``(path, thing1, thing2, explanation)`` for each place two tree structures differ."""
    def filled(tree):
        return tree_util.tree_unflatten(tree, [_Leaf() for _ in range(tree.num_leaves)])
    return list(_equality_errors(filled(tree1), filled(tree2)))


def _paths(tree) -> list:
    """The key path of each leaf of ``tree`` (a tuple of keys; ``()`` for a lone leaf)."""
    leaves = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    return [p for p, _ in tree_util.tree_flatten_with_path(leaves)[0]]


def _promote_weak_typed_inputs(leaves, in_avals, out_avals):
    """JAX's ``_promote_weak_typed_input`` for a loop's initial carry: a weakly typed leaf
    (a Python scalar such as ``0`` or ``0.0``, or a weak tracer) whose type the body's output
    does not match (weak types aside) becomes ``result_type(leaf, body output)`` (``0`` with
    an f16 body is f16; ``0`` with a bool body stays int32 and fails the carry check).
    Returns ``(leaves, changed)``."""
    from minixla import lax
    from minixla.core.avals import promote_types
    new, changed = [], False
    for x, a, o in zip(leaves, in_avals, out_avals):
        if a.weak_type and not _typematch(a, o):
            x = lax.convert_element_type(x, promote_types(a, o)[0])
            changed = True
        new.append(x)
    return new, changed


def _check_carry(what, carry_name, in_tree, out_tree, in_avals, out_avals):
    """JAX's ``_check_carry_type``: the carry output has the input carry's pytree structure
    and, leaf by leaf, its shape and dtype (weak types aside); else a ``ShapeError``
    (structure) or ``DTypeError`` (types) naming each differing component."""
    def component(path):
        if carry_name:
            return f"the input carry component {carry_name}{tree_util.keystr(path)}" if path \
                else f"the input carry {carry_name}"
        return f"the input carry at path {tree_util.keystr(path)}" if path else "the input carry"
    if in_tree != out_tree:
        diffs = [f"{component(path)} is a {t1} but the corresponding component of the carry "
                 f"output is a {t2}, so {why}"
                 for path, t1, t2, why in _equality_errors(
                     tree_util.tree_unflatten(in_tree, in_avals),
                     tree_util.tree_unflatten(out_tree, out_avals))]
        if diffs:
            raise errors.ShapeError(
                f"{what} function carry input and carry output must have the same pytree "
                f"structure, but they differ:\n\n{_listed(diffs)}\nRevise the function so that "
                "the carry output has the same pytree structure as the carry input.")
    diffs = [f"{component(path)} has type {_type_str(a)} but the corresponding output carry "
             f"component has type {_type_str(b)}{_mismatch(a, b)}"
             for path, a, b in zip(_paths(in_tree), in_avals, out_avals) if not _typematch(a, b)]
    if diffs:
        raise errors.DTypeError(
            f"{what} function carry input and carry output must have equal types, but they "
            f"differ:\n\n{_listed(diffs)}\nRevise the function so that all output types match "
            "the corresponding input types.")


def _carry_name(fun):
    """The name of ``fun``'s first parameter (JAX's messages call the carry by it), or None."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


def _index_scalar_check(index):
    aval = get_aval(index)
    if aval.shape != ():
        raise errors.ShapeError(f"Branch index must be scalar, got {_value_str(index)} of shape "
                                f"{aval.shape}.")
    if aval.dtype.kind not in "iu":
        raise errors.DTypeError(f"Index type must be an integer, got {_value_str(index)} as "
                                f"{aval.dtype.name}")


# ---------------------------------------------------------------------------------------
# cond / switch

def _cond_shape_rule(index, *ops, branches):
    if index.shape != () or index.dtype != np.int32:
        raise errors.DTypeError(f"cond index must be an int32 scalar, got {index.str_short()}")
    for b in branches:
        ins = b.in_avals
        if len(ins) != len(ops) or any(i.shape != o.shape or i.dtype != o.dtype for i, o in zip(ins, ops)):
            raise errors.DTypeError("cond branch inputs do not match its operands")
    # As JAX's ``_cond_abstract_eval``: the outputs have branch 0's types, weak types included
    # (``cond``'s false_fun: ``cond(p, lambda: f32(2), lambda: 1.0)`` is weakly typed).
    return list(branches[0].out_avals)


def _concrete(xs, avals):
    """Eager values as arrays of their avals' dtypes (a Python ``1.0`` operand is f32)."""
    return [np.asarray(x, a.dtype) for x, a in zip(xs, avals)]


def _cond_impl(index, *ops, branches):
    from minixla.interpreters.eval import eval_jaxpr
    i = int(np.clip(int(np.asarray(index)), 0, len(branches) - 1))
    b = branches[i]
    return _concrete(eval_jaxpr(b.jaxpr, [], _concrete(ops, b.in_avals)), b.out_avals)


shape_rules[cond_p] = _cond_shape_rule
impl_rules[cond_p] = _cond_impl


def _check_branch_outputs(api, name1, name2, f1, f2, tree1, tree2, avals1, avals2):
    """JAX's ``_check_branch_outputs``: branch ``name2``'s outputs have branch ``name1``'s
    pytree structure (``ShapeError``) and types (``DTypeError``), naming each difference."""
    def component(path):
        return f" at path {tree_util.keystr(path)}" if path else ""
    head = f"{name1} is {_fun_name(f1)}\n{name2} is {_fun_name(f2)}\n\n"
    if tree1 != tree2:
        diffs = [f"{name1} output{component(p)} is a {t1} but {name2} output{component(p)} is a "
                 f"{t2}, so {why}" for p, t1, t2, why in _tree_diffs(tree1, tree2)]
        if diffs:
            raise errors.ShapeError(
                f"{api} branch outputs must have the same pytree structure, but they differ:\n\n"
                f"{head}{_listed(diffs, capitalize=False)}\nRevise {name1} and/or {name2} so that "
                "they have the same pytree structure.")
    diffs = [f"the output of {name1}{component(p)} has type {_type_str(a)} but the corresponding "
             f"output of {name2} has type {_type_str(b)}{_mismatch(a, b)}"
             for p, a, b in zip(_paths(tree1), avals1, avals2) if not _typematch(a, b)]
    if diffs:
        raise errors.DTypeError(
            f"{api} branches must have equal output types but they differ.\n\n{head}"
            f"{_listed(diffs, tight=True)}\nRevise {name1} and/or {name2} so that all output "
            "types match.")


def _bind_branches(api, index, funs, operands, names, order=None):
    """Trace every branch on ``operands``, check each one's outputs against the first's (as
    JAX, naming the pair), bind ``cond`` with the branches in ``order`` (default: as given)."""
    ops, in_tree = tree_util.tree_flatten(operands)
    in_avals = _avals_of(ops)
    traced = [_trace_fun(f, in_tree, in_avals) for f in funs]
    trees = [t[2][0] for t in traced]
    for k in range(1, len(funs)):
        _check_branch_outputs(api, names[0], names[k], funs[0], funs[k], trees[0], trees[k],
                              traced[0][0].out_avals, traced[k][0].out_avals)
    # Every branch takes every branch's consts (JAX's joined consts), then the operands.
    traced = [traced[k] for k in (order or range(len(funs)))]
    all_consts, keys = [], {}
    for _, consts, _ in traced:
        for c in consts:
            if id(c) not in keys:
                keys[id(c)] = len(all_consts)
                all_consts.append(c)
    const_avals = _avals_of(all_consts)
    branches = []
    for jaxpr, consts, _ in traced:
        own = {id(c): v for c, v in zip(consts, jaxpr.jaxpr.invars)}
        cvars = [own.get(id(c)) or Var(a) for c, a in zip(all_consts, const_avals)]
        j = jaxpr.jaxpr
        branches.append(ClosedJaxpr(Jaxpr([], cvars + j.invars[len(consts):], j.eqns, j.outvars), []))
    # An output every branch returns as the same input unchanged is that input (JAX's pruning
    # of passthrough outputs): the cond neither computes nor, under grad, saves it.
    fwd = [{_forward_index(b.jaxpr, k) for b in branches} for k in range(len(branches[0].out_avals))]
    fwd = [f.pop() if len(f) == 1 else None for f in fwd]
    keep = [f is None for f in fwd]
    inputs = all_consts + ops
    outs = iter(())
    if any(keep):
        branches = [ClosedJaxpr(Jaxpr(b.jaxpr.constvars, b.jaxpr.invars, b.jaxpr.eqns,
                                      [v for v, k in zip(b.jaxpr.outvars, keep) if k]), b.consts)
                    for b in branches]
        outs = iter(cond_p.bind(index, *inputs, branches=tuple(branches)))
    from minixla import numpy as mnp
    return tree_util.tree_unflatten(trees[0], [next(outs) if f is None else _unaliased(mnp.asarray(inputs[f]))
                                               for f in fwd])


def _unaliased(x):
    """A forwarded input as a loop's or branch's result: a concrete NumPy array is copied (an
    eager result must not alias the caller's mutable array, as JAX's immutable ones cannot)."""
    return x.copy() if isinstance(x, np.ndarray) else x


def _forward_index(jaxpr, k):
    """The position of the input that ``jaxpr``'s output ``k`` is (unchanged), else None."""
    v = jaxpr.outvars[k]
    return next((i for i, u in enumerate(jaxpr.invars) if u is v), None)


def _minixla_keys(tree, api):
    """``tree`` with each JAX typed key (``jax.random.key``) as minixla's ``PRNGKeyArray``: the
    control-flow primitives take pytrees of arrays, and a key of JAX's extended dtype has no
    minixla aval; its ``uint32`` data flows through the loop or the branches instead, as it does
    through ``jit`` and ``vmap`` (which convert their arguments the same way)."""
    from minixla.random.keys import jax_keys_to_minixla  # (minixla.random builds on minixla.lax)
    return jax_keys_to_minixla(tree, f"lax.{api}")


def _one_operand(operand, operands):
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise errors.DTypeError(f"if 'operand' keyword is passed then no positional operands can be "
                                f"passed, got {operand=} and positional operands {operands}")
    return (operand,)


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """Run ``branches[index](*operands)`` (``jax.lax.switch``).

    ``index`` is an integer scalar, clamped to ``[0, len(branches) - 1]`` (an out-of-range index
    runs the first or last branch, as JAX). Every branch must return the same pytree of arrays
    of the same shapes and dtypes as branch 0; the result has branch 0's types (its weak types
    too, as JAX). Raises ``ValueError`` for no branches, ``ShapeError`` (a ``TypeError``) for a
    non-scalar index or a branch whose output structure differs, ``DTypeError`` for a
    non-integer index or a branch whose output types differ (JAX's messages, naming the pytree
    path; JAX's ``branch 0``/``branch1`` names included).
    """
    from minixla import lax
    branches = list(branches)
    if not all(callable(b) for b in branches):
        raise errors.DTypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _minixla_keys(_one_operand(operand, operands), "switch")
    _index_scalar_check(index)
    if not branches:
        raise errors.ShapeError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    index = lax.convert_element_type(index, np.int32)
    index = lax.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    names = ["branch 0"] + [f"branch{k}" for k in range(1, len(branches))]  # (sic: JAX's names)
    return _bind_branches("switch", index, branches, operands, names)


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (``jax.lax.cond``).

    ``pred`` is a scalar (bool, or a number compared with 0). Both functions are traced and
    must return the same pytree of arrays with equal shapes and dtypes; the result has
    ``false_fun``'s types, weak types included (JAX's branch 0). Raises ``ShapeError`` (a
    ``TypeError``) for a non-scalar ``pred`` or outputs of different pytree structures and
    ``DTypeError`` for outputs of different types, with JAX's messages naming the path.
    """
    from minixla import lax
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            # JAX's deprecated form: cond(pred, true_operand, true_fun, false_operand, false_fun)
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
        raise errors.DTypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _minixla_keys(_one_operand(operand, operands), "cond")
    if pred is None:
        raise errors.DTypeError("cond predicate is None")
    if isinstance(pred, (str, bytes, list, tuple, dict)):
        raise errors.ShapeError(f"Pred must be a scalar, got {pred} of type {type(pred)}")
    aval = get_aval(pred)
    if aval.shape != ():
        raise errors.ShapeError(f"Pred must be a scalar, got {_value_str(pred)} of shape "
                                f"{aval.shape}.")
    if aval.dtype.kind not in "biuf":
        raise errors.DTypeError(f"Pred type must be either boolean or number, got {aval.dtype.name}.")
    if aval.dtype != np.bool_:
        pred = lax.ne(pred, lax.convert_element_type(0, aval.dtype))
    index = lax.convert_element_type(pred, np.int32)
    return _bind_branches("cond", index, [true_fun, false_fun], operands, ["true_fun", "false_fun"],
                          order=(1, 0))


# ---------------------------------------------------------------------------------------
# while_loop / fori_loop

def _while_shape_rule(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = args[cond_nconsts + body_nconsts:]
    outs = body_jaxpr.out_avals
    if len(outs) != len(carry) or any(_difference(a, b) for a, b in zip(carry, outs)):
        raise errors.DTypeError("while body output does not match its carry")
    return list(outs)  # (the body's weak types, as JAX's ``_while_loop_abstract_eval``)


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from minixla.interpreters.eval import eval_jaxpr
    args = _concrete(args, cond_jaxpr.in_avals[:cond_nconsts] + body_jaxpr.in_avals)
    cc, rest = args[:cond_nconsts], args[cond_nconsts:]
    bc, carry = rest[:body_nconsts], rest[body_nconsts:]
    carry_avals = body_jaxpr.out_avals
    while bool(np.asarray(eval_jaxpr(cond_jaxpr.jaxpr, [], cc + carry)[0])):
        carry = _concrete(eval_jaxpr(body_jaxpr.jaxpr, [], bc + carry), carry_avals)
    return carry


shape_rules[while_p] = _while_shape_rule
impl_rules[while_p] = _while_impl


def _trace_while(cond_fun, body_fun, in_tree, in_avals):
    """Trace ``cond_fun`` and ``body_fun`` on the carry ``in_avals`` and check the condition
    returns a boolean scalar (JAX's ``_create_jaxpr`` of ``while_loop``, which checks it first)."""
    cond_j, cond_consts, (c_tree, _) = _trace_fun(cond_fun, in_tree, in_avals)
    body, body_consts, (out_tree, _) = _trace_fun(body_fun, in_tree, in_avals)
    if c_tree.num_leaves != 1 or c_tree.num_nodes != 1:
        raise errors.DTypeError(f"cond_fun must return a boolean scalar, but got pytree {c_tree}.")
    c_out = cond_j.out_avals[0]
    if c_out.shape != () or c_out.dtype != np.bool_:
        raise errors.DTypeError("cond_fun must return a boolean scalar, but got output type(s) "
                                f"{[_AvalText(c_out)]}.")
    return cond_j, cond_consts, body, body_consts, out_tree


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``; returns ``val`` (``jax.lax.while_loop``).

    ``init_val`` is any pytree of arrays; ``body_fun`` must return the same pytree with the same
    shapes and dtypes. As in JAX, a weakly typed leaf of ``init_val`` (a Python scalar such as
    ``0``) whose type the body's output does not match first becomes ``result_type(leaf, that
    output)`` (so ``0`` with an f16 body is an f16 carry), and the result has the body's output
    types (weak types included). ``ShapeError``/``DTypeError`` name each carry component whose
    structure/type still differs, as JAX's messages; ``cond_fun`` must return a boolean scalar
    (``DTypeError`` otherwise). Not reverse-mode differentiable (the trip count is unknown), as
    in JAX; a carry the body returns unchanged and ``cond_fun`` does not read becomes a body
    const (JAX's forwarding), so carrying a linear value along does not stop reverse mode.
    """
    if not (callable(body_fun) and callable(cond_fun)):
        raise errors.DTypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    init_val = _minixla_keys(init_val, "while_loop")
    leaves, carry_tree = tree_util.tree_flatten(init_val)
    in_tree = tree_util.tree_structure((init_val,))
    in_avals = _avals_of(leaves)
    name = _carry_name(body_fun)
    cond_j, cond_consts, body, body_consts, out_tree = _trace_while(cond_fun, body_fun, in_tree, in_avals)
    if out_tree.num_leaves == len(leaves):
        leaves, changed = _promote_weak_typed_inputs(leaves, in_avals, body.out_avals)
        if changed:
            in_avals = _avals_of(leaves)
            cond_j, cond_consts, body, body_consts, out_tree = _trace_while(cond_fun, body_fun, in_tree,
                                                                            in_avals)
    _check_carry("while_loop body", name, carry_tree, out_tree, in_avals, body.out_avals)
    body, cond_j, body_consts, leaves, moved = _forwarded_to_consts(body, cond_j, body_consts, leaves,
                                                                     len(cond_consts))
    outs = iter(while_p.bind(*cond_consts, *body_consts, *leaves, body_jaxpr=body, body_nconsts=len(body_consts),
                             cond_jaxpr=cond_j, cond_nconsts=len(cond_consts)))
    outs = [_unaliased(m) if m is not None else next(outs) for m in moved]
    return tree_util.tree_unflatten(out_tree, outs)


def _forwarded_to_consts(body, cond_j, body_consts, leaves, n_cond_consts):
    """A carry the body returns unchanged and the condition does not read is a loop
    invariant: it becomes a leading body const and the loop's result for it is its initial
    value, as JAX's ``while_loop`` does (so e.g. reverse mode of a loop whose linear value is
    only carried along works). Returns the new body, cond, body consts, carries, and per
    original carry its initial value if moved (else ``None``)."""
    bj, cj = body.jaxpr, cond_j.jaxpr
    nb = len(body_consts)
    read = {a.id for e in cj.eqns for a in e.invars if isinstance(a, Var)}
    read |= {v.id for v in cj.outvars if isinstance(v, Var)}
    carry_in = bj.invars[nb:]
    move = [bj.outvars[j] is v and cj.invars[n_cond_consts + j].id not in read for j, v in enumerate(carry_in)]
    if not any(move):
        return body, cond_j, body_consts, leaves, [None] * len(leaves)
    stay = [not m for m in move]
    new_body = Jaxpr(bj.constvars, [v for v, m in zip(carry_in, move) if m] + list(bj.invars[:nb])
                     + [v for v, k in zip(carry_in, stay) if k], bj.eqns,
                     [v for v, k in zip(bj.outvars, stay) if k])
    new_cond = Jaxpr(cj.constvars, list(cj.invars[:n_cond_consts])
                     + [v for v, k in zip(cj.invars[n_cond_consts:], stay) if k], cj.eqns, cj.outvars)
    moved_vals = [x for x, m in zip(leaves, move) if m]
    return (ClosedJaxpr(new_body, body.consts), ClosedJaxpr(new_cond, cond_j.consts),
            moved_vals + list(body_consts), [x for x, k in zip(leaves, stay) if k],
            [x if m else None for x, m in zip(leaves, move)])


def _concrete_int(x):
    """``int(x)`` for a bound known in Python (JAX's ``core.is_concrete`` then ``int``), else
    None (a tracer, or a value ``int`` rejects with a ``TypeError``, e.g. a shape-(1,) array)."""
    if isinstance(x, Tracer):
        return None
    try:
        return int(x if isinstance(x, (bool, int, float)) else np.asarray(x))
    except TypeError:
        return None


def _fori_dtype(lower, upper):
    """JAX's rule for ``fori_loop``'s bounds: equal dtypes (any kind, float and bool too), or
    two signed integer dtypes of which exactly one is weakly typed (a Python int), which takes
    the other's; else ``DTypeError`` (a ``TypeError``), as JAX."""
    la, ua = get_aval(lower), get_aval(upper)
    if la.dtype == ua.dtype:
        return la.dtype
    if la.dtype.kind == "i" and ua.dtype.kind == "i" and la.weak_type != ua.weak_type:
        return ua.dtype if la.weak_type else la.dtype
    raise errors.DTypeError("lower and upper arguments to fori_loop must have equal types, got "
                            f"{la.dtype.name} and {ua.dtype.name}")


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)`` (``jax.lax.fori_loop``).

    The bounds follow JAX's rule: the same dtype (float and bool bounds included), or two
    signed integers of which one is a Python int (weakly typed), which takes the other's dtype;
    anything else (``int8`` with ``int32``, ``uint8`` with a Python int) raises ``DTypeError``.
    Bounds known in Python (``int()`` of each works) make it a ``scan`` of ``upper - lower``
    steps (reverse-mode differentiable, as in JAX) whose index ``i`` is a weakly typed int32,
    as JAX's Python-int counter; traced bounds make it a ``while_loop`` over ``(i, upper,
    val)`` with ``i`` of the bounds' dtype (a bound of another dtype is converted; a Python int
    lower bound stays weakly typed). ``unroll`` other than None/False/1 with traced bounds is
    a ``ValueError``. A weakly typed ``init_val`` is promoted to the body's type as in
    ``scan``/``while_loop``.
    """
    from minixla import lax
    if not callable(body_fun):
        raise errors.DTypeError("lax.fori_loop: body_fun argument should be callable.")
    dtype = _fori_dtype(lower, upper)
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    if lo is not None and hi is not None:
        def step(loop_carry, _):
            i, x = loop_carry
            return (i + 1, body_fun(i, x)), None
        (_, out), _ = _scan(step, (lo, init_val), None, max(hi - lo, 0), False,
                            False if unroll is None else unroll, "loop_carry")
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise errors.StaticArgumentError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                                "statically known.")

    def body(loop_carry):
        i, u, x = loop_carry
        return lax.add(i, np.dtype(dtype).type(1)), u, body_fun(i, x)
    if get_aval(lower).dtype != dtype:
        lower = lax.convert_element_type(lower, dtype)
    if get_aval(upper).dtype != dtype:
        upper = lax.convert_element_type(upper, dtype)
    return while_loop(lambda c: lax.lt(c[0], c[1]), body, (lower, upper, init_val))[2]


# ---------------------------------------------------------------------------------------
# scan / map

def _scan_shape_rule(*args, jaxpr, length, num_carry, num_consts, reverse, unroll):
    carry = args[num_consts:num_consts + num_carry]
    outs = jaxpr.out_avals
    if any(_difference(a, b) for a, b in zip(carry, outs[:num_carry])):
        raise errors.DTypeError("scan body output does not match its carry")
    for x in args[num_consts + num_carry:]:
        if not x.shape or x.shape[0] != length:
            raise errors.ShapeError(f"scan xs {x.str_short()} do not have leading size {length}")
    # (the carry has the body's output types, weak types included, as JAX's abstract eval)
    return list(outs[:num_carry]) + [a.update(shape=(length,) + a.shape) for a in outs[num_carry:]]


def _scan_impl(*args, jaxpr, length, num_carry, num_consts, reverse, unroll):
    from minixla.interpreters.eval import eval_jaxpr
    in_avals = jaxpr.in_avals
    args = _concrete(args[:num_consts + num_carry], in_avals) + [np.asarray(x) for x in args[num_consts + num_carry:]]
    consts = args[:num_consts]
    carry = args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.zeros((length,) + a.shape, a.dtype) for a in y_avals]
    for t in (reversed(range(length)) if reverse else range(length)):
        out = eval_jaxpr(jaxpr.jaxpr, [], consts + carry + [x[t] for x in xs])
        carry = _concrete(out[:num_carry], jaxpr.out_avals)
        for y, v in zip(ys, out[num_carry:]):
            y[t] = np.asarray(v)
    return carry + ys


shape_rules[scan_p] = _scan_shape_rule
impl_rules[scan_p] = _scan_impl


def _scan_length(x_leaves, x_avals, length):
    """JAX's ``_infer_scan_length``: the common leading size of ``xs`` (or ``length``), with
    its messages."""
    flat = [x for x, a in zip(x_leaves, x_avals) if a.ndim == 0]
    if flat:
        raise errors.ShapeError("scan got value with no leading axis to scan over: "
                                f"{', '.join(_value_str(x) for x in flat)}.")
    sizes = [a.shape[0] for a in x_avals]
    if length is not None:
        if isinstance(length, Tracer):
            raise errors.ConcretizationTypeError(
                "The `length` argument to `scan` expects a concrete `int` value. For scan-like "
                "iteration with a dynamic length, use `while_loop` or `fori_loop`.")
        length = int(length)
        if any(n != length for n in sizes):
            raise errors.ShapeError(f"scan got `length` argument of {length} which disagrees with "
                                    f"leading axis sizes {sizes}.")
        return length
    if len(set(sizes)) > 1:
        raise errors.ShapeError("scan got values with different leading axis sizes: "
                                + ", ".join(str(n) for n in sizes) + ".")
    if not sizes:
        raise errors.ShapeError("scan got no values to scan over and `length` not provided.")
    return sizes[0]


def _scan(f, init, xs, length, reverse, unroll, carry_name):
    init, xs = _minixla_keys((init, xs), "scan")  # (fori_loop, map)
    carry_leaves, carry_tree = tree_util.tree_flatten(init)
    x_leaves, x_tree = tree_util.tree_flatten(xs)
    x_avals = _avals_of(x_leaves)
    length = _scan_length(x_leaves, x_avals, length)
    if isinstance(unroll, bool):
        unroll = max(length, 1) if unroll else 1
    if unroll < 0:
        raise errors.StaticArgumentError("`unroll` must be a `bool` or a non-negative `int`.")
    carry_avals = _avals_of(carry_leaves)
    slice_avals = [a.update(shape=a.shape[1:]) for a in x_avals]
    in_tree = tree_util.tree_structure((init, xs))
    n_carry = len(carry_leaves)
    trees = []

    def body(c, x):
        out = f(c, x)
        # JAX splits the output's top node in two, whatever its type: a tuple, a list
        # ``[carry, y]``, a two-entry dict (the result keeps that container).
        pair, top = tree_util.tree_flatten(out, is_leaf=lambda n: n is not out)
        if len(pair) != 2 or tree_util.treedef_is_leaf(top):
            leaves, tree = tree_util.tree_flatten(out)
            got = tree_util.tree_unflatten(tree, [_AvalText(get_aval(v)) for v in leaves])
            raise errors.ShapeError(f"scan body output must be a pair, got {got}.")
        new_c, y = pair
        trees[:] = [top, tree_util.tree_structure(new_c), tree_util.tree_structure(y)]
        return (new_c, y)

    def trace(c_avals):
        jaxpr, consts, _ = _trace_fun(body, in_tree, list(c_avals) + slice_avals)
        return (jaxpr, consts, *trees)
    jaxpr, consts, top, c_tree, y_tree = trace(carry_avals)
    if c_tree.num_leaves == n_carry:  # (else the structures differ: the check below says how)
        carry_leaves, changed = _promote_weak_typed_inputs(carry_leaves, carry_avals,
                                                           jaxpr.out_avals[:n_carry])
        if changed:
            carry_avals = _avals_of(carry_leaves)
            jaxpr, consts, top, c_tree, y_tree = trace(carry_avals)
    _check_carry("scan body", carry_name, carry_tree, c_tree, carry_avals,
                 jaxpr.out_avals[:c_tree.num_leaves])
    res = _bind_scan_forwarded(jaxpr, consts, carry_leaves, x_leaves, length, bool(reverse), int(unroll))
    carry_out = tree_util.tree_unflatten(c_tree, res[:n_carry])
    ys = tree_util.tree_unflatten(y_tree, res[n_carry:])
    return tree_util.tree_unflatten(top, [carry_out, ys])


def _bind_scan_forwarded(jaxpr, consts, carry, xs, length, reverse, unroll):
    """Bind ``scan`` as JAX's front end does: a carry the body returns unchanged is read-only,
    so it becomes a leading const (its result is its initial value), and a ``y`` that is an
    ``x`` unchanged is not stacked again (its result is ``xs`` itself). So neither is carried
    or copied per step, nor saved per step as a residual under ``grad``. Returns the carries
    then the ``ys``, as the scan would."""
    j = jaxpr.jaxpr
    nk, nc = len(consts), len(carry)
    c_in, x_in = j.invars[nk:nk + nc], j.invars[nk + nc:]
    move = [j.outvars[i] is v for i, v in enumerate(c_in)]
    x_ids = {v.id: k for k, v in enumerate(x_in)}
    y_fwd = [x_ids.get(v.id) if isinstance(v, Var) else None for v in j.outvars[nc:]]
    if not any(move) and all(f is None for f in y_fwd):
        return scan_p.bind(*consts, *carry, *xs, jaxpr=jaxpr, length=length, num_carry=nc, num_consts=nk,
                           reverse=reverse, unroll=unroll)
    keep = [not m for m in move]
    invars = ([v for v, m in zip(c_in, move) if m] + list(j.invars[:nk])
              + [v for v, k in zip(c_in, keep) if k] + list(x_in))
    outvars = ([v for v, k in zip(j.outvars[:nc], keep) if k]
               + [v for v, f in zip(j.outvars[nc:], y_fwd) if f is None])
    body = ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, outvars), jaxpr.consts)
    moved = [c for c, m in zip(carry, move) if m]
    out = iter(scan_p.bind(*moved, *consts, *[c for c, k in zip(carry, keep) if k], *xs, jaxpr=body,
                           length=length, num_carry=sum(keep), num_consts=len(moved) + nk, reverse=reverse,
                           unroll=unroll))
    carry_out = [next(out) if k else _unaliased(c) for c, k in zip(carry, keep)]
    return carry_out + [next(out) if f is None else _unaliased(xs[f]) for f in y_fwd]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs`` (``jax.lax.scan``).

    Returns ``(final_carry, ys)`` with ``ys`` the per-step ``y`` stacked along a new leading
    axis of size ``length``. ``xs`` is a pytree of arrays with the same leading size (or
    ``None`` with ``length`` given); ``reverse=True`` runs from the last element (``ys`` keep
    their positions); ``unroll`` is recorded as JAX does (backends may unroll). As in JAX, a
    weakly typed leaf of ``init`` (a Python scalar such as ``0`` or ``0.0``) whose type the
    body's output carry does not match first becomes ``result_type(leaf, that output)`` (``0``
    with an f16 body is an f16 carry; ``0`` with a bool body stays int32 and is an error), and
    the final carry has the body's output types (weak types included). ``f`` may return any
    two-child container (a tuple, ``[carry, y]``, ...): the result has that container, as JAX's.
    Raises ``ShapeError`` (a ``ValueError``) for a leaf of ``xs`` with no leading axis,
    inconsistent leading sizes, a ``length`` that disagrees with them or no length at all, or
    a body output that is not a pair, and ``ShapeError``/``DTypeError`` (``TypeError``s) when
    ``f`` changes the carry's pytree structure/types, with JAX's messages naming each
    component.
    """
    return _scan(f, init, xs, length, reverse, unroll, _carry_name(f))


def map(f, xs, *, batch_size=None):  # noqa: A001 (jax.lax.map)
    """``jnp.stack([f(x) for x in xs])`` as a ``scan`` without carry (``jax.lax.map``); with
    ``batch_size``, ``vmap(f)`` over batches of that many rows (``lax/batched_map.py``; 0 or
    None: one row at a time, as JAX)."""
    if batch_size:
        from minixla.lax.batched_map import map_in_batches
        return map_in_batches(f, xs, batch_size, scan)
    _, ys = _scan(lambda c, x: ((), f(x)), (), xs, None, False, 1, None)
    return ys
