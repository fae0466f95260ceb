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
see all its inputs. Errors follow JAX's: branch outputs or loop carries of different types name
the pytree path and what differs; a non-scalar predicate, a non-integer index and inconsistent
``scan`` lengths are errors at the user's line.
"""
from __future__ import annotations

import inspect

import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.core.tracing import JaxprTrace, Tracer, trace_to_jaxpr

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


def _prim(name):
    p = Primitive(name)
    p.multiple_results = True
    return p


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
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


def _difference(a, b) -> str | None:
    """Why avals ``a`` and ``b`` are not the same type for a branch/carry (weak types aside)."""
    if a.shape != b.shape:
        return "the shapes do not match"
    if a.dtype != b.dtype:
        return "the dtypes do not match"
    return None


def _paths(tree) -> list[str]:
    leaves = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    return [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(leaves)[0]]


def _join_weak(avals_list):
    """The output avals of branches that agree in shape and dtype: weak only if all are weak."""
    return [a.update(weak_type=all(x.weak_type for x in group)) for a, *group in
            zip(avals_list[0], *avals_list)]


def _strong_if(avals, outs):
    """Input carry avals made strongly typed where the body returns a strong value of the same
    dtype (JAX promotes a weakly typed initial carry such as ``0.0`` instead of failing)."""
    return [a.update(weak_type=False) if a.weak_type and not o.weak_type and a.dtype == o.dtype
            and a.shape == o.shape else a for a, o in zip(avals, outs)]


def _check_carry(what, carry_name, in_tree, out_tree, in_avals, out_avals):
    if in_tree != out_tree:
        raise errors.ShapeError(
            f"{what} function carry input and carry output must have the same pytree structure, "
            f"but they differ: the input carry {carry_name} is a {in_tree} but the output is a "
            f"{out_tree}.")
    for path, a, b in zip(_paths(in_tree), in_avals, out_avals):
        why = _difference(a, b)
        if why:
            raise errors.DTypeError(
                f"{what} function carry input and carry output must have equal types, but they "
                f"differ:\n\nThe input carry component {carry_name}{path} has type {_type_str(a)} "
                f"but the corresponding output carry component has type {_type_str(b)}, so {why}."
                f"\n\nRevise the function so that all output types match the corresponding input "
                f"types.")


def _carry_name(fun, default="carry") -> str:
    try:
        params = list(inspect.signature(fun).parameters)
        return params[0] if params else default
    except (TypeError, ValueError):
        return default


def _index_scalar_check(index):
    aval = get_aval(index)
    if aval.shape != ():
        raise errors.ShapeError(f"Branch index must be scalar, got {aval.str_short()} of shape "
                                f"{aval.shape}.")
    if aval.dtype.kind not in "iub":
        raise errors.DTypeError(f"Index type must be an integer, got {index!r} as {aval.dtype.name}")


# ---------------------------------------------------------------------------------------
# cond / switch

def _cond_shape_rule(index, *ops, branches):
    if index.shape != () or index.dtype != np.int32:
        raise errors.DTypeError(f"cond index must be an int32 scalar, got {index.str_short()}")
    for b in branches:
        ins = b.in_avals
        if len(ins) != len(ops) or any(i.shape != o.shape or i.dtype != o.dtype for i, o in zip(ins, ops)):
            raise errors.DTypeError("cond branch inputs do not match its operands")
    return _join_weak([b.out_avals for b in branches])


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


def _bind_branches(index, funs, operands, names, order=None):
    """Trace every branch on ``operands``, check their outputs agree (reporting in the order of
    ``names``), bind ``cond`` with the branches in ``order`` (default: as given)."""
    ops, in_tree = tree_util.tree_flatten(operands)
    in_avals = _avals_of(ops)
    traced = [_trace_fun(f, in_tree, in_avals) for f in funs]
    trees = [t[2][0] for t in traced]
    for k in range(1, len(funs)):
        if trees[k] != trees[0]:
            o0, ok = traced[0][2][1], traced[k][2][1]
            why = (f"{names[0]} output is a {type(o0)} but {names[k]} output is a {type(ok)}, so "
                   "their Python types differ." if type(o0) is not type(ok) else
                   f"{names[0]} output has structure {trees[0]} but {names[k]} output has "
                   f"structure {trees[k]}.")
            raise errors.ShapeError(
                "cond branch outputs must have the same pytree structure, but they differ:\n\n"
                + "".join(f"{n} is {_fun_name(f)}\n" for n, f in zip(names, funs))
                + f"\n{why}\n\nRevise {' and/or '.join(names[:2]) if len(names) == 2 else 'the branches'}"
                " so that they have the same pytree structure.")
        for path, a, b in zip(_paths(trees[0]), traced[0][0].out_avals, traced[k][0].out_avals):
            why = _difference(a, b)
            if why:
                raise errors.DTypeError(
                    "cond branches must have equal output types but they differ.\n\n"
                    + "".join(f"{n} is {_fun_name(f)}\n" for n, f in zip(names, funs))
                    + f"\nThe output of {names[0]} at path {path} has type {_type_str(a)} but the "
                    f"corresponding output of {names[k]} has type {_type_str(b)}, so {why}.\n\n"
                    f"Revise {' and/or '.join(names[:2]) if len(names) == 2 else 'the branches'} so "
                    "that all output types match.")
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
    outs = cond_p.bind(index, *all_consts, *ops, branches=tuple(branches))
    return tree_util.tree_unflatten(trees[0], outs)


def switch(index, branches, *operands, operand=None):
    """Run ``branches[index](*operands)`` (``jax.lax.switch``).

    ``index`` is an integer scalar, clamped to ``[0, len(branches) - 1]`` (an out-of-range index
    runs the first or last branch, as JAX). Every branch must return the same pytree of arrays
    of the same shapes and dtypes. Raises ``ValueError`` for no branches, ``DTypeError`` for a
    non-integer index or branches whose outputs differ (naming the pytree path).
    """
    from minixla import lax
    if operand is not None:
        operands = (operand,)
    branches = list(branches)
    if not branches:
        raise errors.ShapeError("Empty branch sequence")
    _index_scalar_check(index)
    if len(branches) == 1:
        return branches[0](*operands)
    index = lax.convert_element_type(index, np.int32)
    index = lax.clamp(np.int32(0), index, np.int32(len(branches) - 1))
    names = [f"branch {k}" for k in range(len(branches))]
    return _bind_branches(index, branches, operands, names)


def cond(pred, true_fun, false_fun, *operands, operand=None):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (``jax.lax.cond``).

    ``pred`` is a scalar (bool, or a number compared with 0). Both functions are traced and
    must return the same pytree of arrays with equal shapes and dtypes (a weak type joins the
    other's). Raises ``ShapeError`` (a ``TypeError``) for a non-scalar ``pred`` and
    ``DTypeError``/``ShapeError`` for branches whose outputs differ, naming the path.
    """
    from minixla import lax
    if operand is not None:
        operands = (operand,)
    aval = get_aval(pred)
    if aval.shape != ():
        raise errors.ShapeError(f"Pred must be a scalar, got {aval.str_short()} of shape {aval.shape}.")
    if aval.dtype.kind not in "biuf":
        raise errors.DTypeError(f"Pred type must be either boolean or number, got {aval.dtype.name}.")
    if aval.dtype != np.bool_:
        pred = lax.ne(pred, lax.convert_element_type(0, aval.dtype))
    index = lax.convert_element_type(pred, np.int32)
    return _bind_branches(index, [true_fun, false_fun], operands, ["true_fun", "false_fun"], order=(1, 0))


# ---------------------------------------------------------------------------------------
# while_loop / fori_loop

def _while_shape_rule(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = args[cond_nconsts + body_nconsts:]
    outs = body_jaxpr.out_avals
    if len(outs) != len(carry) or any(_difference(a, b) for a, b in zip(carry, outs)):
        raise errors.DTypeError("while body output does not match its carry")
    return list(carry)


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


def _trace_loop_body(body_fun, in_tree, in_avals, what, carry_name, make_out=lambda leaves: leaves):
    """Trace a loop body whose output carry must match its input carry; a weakly typed input
    the body returns strongly typed is made strong and the body traced again (as JAX)."""
    jaxpr, consts, (out_tree, _) = _trace_fun(body_fun, in_tree, in_avals)
    outs = make_out(jaxpr.out_avals)
    fixed = _strong_if(in_avals, outs)
    if fixed != list(in_avals):
        in_avals = fixed
        jaxpr, consts, (out_tree, _) = _trace_fun(body_fun, in_tree, in_avals)
        outs = make_out(jaxpr.out_avals)
    return jaxpr, consts, out_tree, in_avals, outs


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``; returns ``val`` (``jax.lax.while_loop``).

    ``init_val`` is any pytree of arrays; ``body_fun`` must return the same pytree with the same
    shapes and dtypes (``DTypeError``/``ShapeError`` name the carry component that differs);
    ``cond_fun`` must return a boolean scalar (``DTypeError`` otherwise). Not reverse-mode
    differentiable (the trip count is unknown), as in JAX; a carry the body returns unchanged
    and ``cond_fun`` does not read becomes a body const (JAX's forwarding), so carrying a
    linear value along does not stop reverse mode.
    """
    leaves, carry_tree = tree_util.tree_flatten(init_val)
    in_tree = tree_util.tree_structure((init_val,))
    in_avals = _avals_of(leaves)
    name = _carry_name(body_fun)
    body, body_consts, out_tree, in_avals, outs = _trace_loop_body(
        body_fun, in_tree, in_avals, "while_loop body", name)
    _check_carry("while_loop body", name, carry_tree, out_tree, in_avals, outs)
    cond_j, cond_consts, _ = _trace_fun(cond_fun, in_tree, in_avals)
    c_out = cond_j.out_avals
    if len(c_out) != 1 or c_out[0].shape != () or c_out[0].dtype != np.bool_:
        raise errors.DTypeError(f"cond_fun must return a boolean scalar, but got output type(s) {c_out}.")
    leaves = [_as_aval(x, a) for x, a in zip(leaves, in_avals)]
    body, cond_j, body_consts, leaves, moved = _forwarded_to_consts(body, cond_j, body_consts, leaves,
                                                                     len(cond_consts))
    outs = iter(while_p.bind(*cond_consts, *body_consts, *leaves, body_jaxpr=body, body_nconsts=len(body_consts),
                             cond_jaxpr=cond_j, cond_nconsts=len(cond_consts)))
    outs = [m if m is not None else next(outs) for m in moved]
    return tree_util.tree_unflatten(carry_tree, outs)


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


def _as_aval(x, aval):
    """``x`` with the (possibly strengthened) weak type of ``aval``."""
    from minixla import lax
    if get_aval(x).weak_type and not aval.weak_type:
        return lax.convert_element_type(x, aval.dtype)
    return x


def _concrete_int(x):
    if isinstance(x, Tracer):
        return None
    try:
        return int(np.asarray(x))
    except (TypeError, ValueError):
        return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)`` (``jax.lax.fori_loop``).

    With Python-known bounds it is a ``scan`` of ``upper - lower`` steps (reverse-mode
    differentiable, as in JAX); with traced bounds a ``while_loop`` over ``(i, upper, val)``.
    ``i`` has the bounds' (promoted) integer dtype.
    """
    from minixla import lax
    from minixla import numpy as mnp
    dtype = mnp.result_type(lower, upper)
    if np.dtype(dtype).kind not in "iu":
        raise errors.DTypeError(f"fori_loop bounds must be integers, got {np.dtype(dtype).name}")
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    if lo is not None and hi is not None:
        one = np.dtype(dtype).type(1)  # (a numpy scalar: a literal, as JAX's ``1:i32[]``)

        def step(carry, _):
            i, x = carry
            return (lax.add(i, one), body_fun(i, x)), None
        (_, out), _ = _scan(step, (np.dtype(dtype).type(lo), init_val), None, max(hi - lo, 0), False,
                            1 if unroll is None else unroll, "loop_carry")
        return out

    def body(c):
        i, u, x = c
        return lax.add(i, np.dtype(dtype).type(1)), u, body_fun(i, x)
    def bound(v, concrete):
        if concrete is not None:  # a numpy scalar: a literal, as JAX's ``0:i32[]``
            return np.dtype(dtype).type(concrete)
        return v if get_aval(v).dtype == dtype else lax.convert_element_type(v, dtype)
    lower, upper = bound(lower, lo), bound(upper, hi)
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
    return list(carry) + [a.update(shape=(length,) + a.shape, weak_type=a.weak_type) for a in outs[num_carry:]]


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


def _scan(f, init, xs, length, reverse, unroll, carry_name):
    carry_leaves, carry_tree = tree_util.tree_flatten(init)
    x_leaves, x_tree = tree_util.tree_flatten(xs)
    x_avals = _avals_of(x_leaves)
    for a in x_avals:
        if a.ndim == 0:
            raise errors.ShapeError(f"scan got a value of shape {a.str_short()} to scan over: "
                                    "each leaf of xs needs a leading axis")
    sizes = sorted({a.shape[0] for a in x_avals})
    if len(sizes) > 1:
        raise errors.ShapeError("scan got values with different leading axis sizes: "
                                + ", ".join(str(a.shape[0]) for a in x_avals) + ".")
    if length is not None:
        length = int(length)
        if sizes and sizes[0] != length:
            raise errors.ShapeError(f"scan got `length` argument of {length} which disagrees with "
                                    f"leading axis sizes {sizes}.")
    elif sizes:
        length = sizes[0]
    else:
        raise errors.ShapeError("scan got no values to scan over and `length` not provided.")
    if isinstance(unroll, bool):
        unroll = max(length, 1) if unroll else 1
    carry_avals = _avals_of(carry_leaves)
    slice_avals = [a.update(shape=a.shape[1:]) for a in x_avals]
    in_tree = tree_util.tree_structure((init, xs))
    n_carry = len(carry_leaves)
    y_tree_box = []

    def body(c, x):
        out = f(c, x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise errors.ShapeError("scan body function must return a pair (carry, y), got "
                                    f"{type(out).__name__}")
        new_c, y = out
        y_tree = tree_util.tree_structure(y)
        y_tree_box.append((tree_util.tree_structure(new_c), y_tree))
        return (new_c, y)

    def trace(c_avals):
        y_tree_box.clear()
        jaxpr, consts, _ = _trace_fun(body, in_tree, list(c_avals) + slice_avals)
        return jaxpr, consts
    jaxpr, consts = trace(carry_avals)
    c_tree, y_tree = y_tree_box[-1]
    outs = jaxpr.out_avals[:n_carry]
    fixed = _strong_if(carry_avals, outs) if c_tree == carry_tree else carry_avals
    if fixed != carry_avals:
        carry_avals = fixed
        jaxpr, consts = trace(carry_avals)
        c_tree, y_tree = y_tree_box[-1]
        outs = jaxpr.out_avals[:n_carry]
    _check_carry("scan body", carry_name, carry_tree, c_tree, carry_avals, outs)
    carry_leaves = [_as_aval(x, a) for x, a in zip(carry_leaves, carry_avals)]
    res = scan_p.bind(*consts, *carry_leaves, *x_leaves, jaxpr=jaxpr, length=length,
                      num_carry=n_carry, num_consts=len(consts), reverse=bool(reverse), unroll=int(unroll))
    carry_out = tree_util.tree_unflatten(carry_tree, res[:n_carry])
    ys = tree_util.tree_unflatten(y_tree, res[n_carry:])
    return carry_out, ys


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs`` (``jax.lax.scan``).

    Returns ``(final_carry, ys)`` with ``ys`` the per-step ``y`` stacked along a new leading
    axis of size ``length``. ``xs`` is a pytree of arrays with the same leading size (or
    ``None`` with ``length`` given); ``reverse=True`` runs from the last element (``ys`` keep
    their positions); ``unroll`` is recorded as JAX does (backends may unroll). Raises
    ``ShapeError`` (a ``ValueError``) for inconsistent leading sizes, a ``length`` that
    disagrees with them or no length at all, and ``DTypeError`` when ``f`` changes the carry's
    type (naming the component).
    """
    return _scan(f, init, xs, length, reverse, unroll, _carry_name(f))


def map(f, xs):  # noqa: A001 (jax.lax.map)
    """``jnp.stack([f(x) for x in xs])`` as a ``scan`` without carry (``jax.lax.map``)."""
    _, ys = _scan(lambda c, x: ((), f(x)), (), xs, None, False, 1, "carry")
    return ys
