"""The transformations' public API, with ``jax``'s names, signatures, semantics and errors.

``jvp``, ``linearize``, ``vjp``, ``grad``, ``value_and_grad``, ``jacfwd``, ``jacrev``,
``hessian``, ``vmap``, ``eval_shape`` and ``stop_gradient``. Inputs and outputs are pytrees
(``jax.tree_util``). Each works eagerly (op by op) and inside ``minixla.jit``, and they nest.
"""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax import tree_util

from minixla.core import errors
from minixla.core.avals import WeakScalar, get_aval, weak_array
from minixla.core.tracing import Tracer, new_trace, staging_constant_ops, trace_to_jaxpr
from minixla.core.tracing import flatten_fun as _flatten_fun_kw
from minixla.interpreters import ad, ad_rules, ad_scatter_rules, jit_call, sharding_rules  # noqa: F401 (they register rules)
from minixla.interpreters import barrier_rules, precision_rules, linear_vjp  # noqa: F401 (optimization_barrier, reduce_precision, linear custom_vjp)
from minixla.interpreters.ad import Zero, float0, is_float, tangent_aval, zeros_like_aval
from minixla.interpreters.batching import BatchTrace, BatchTracer, moveaxis


def _wraps(fun):
    """``functools.wraps`` without copying ``fun.__dict__`` (a ``Jitted`` keeps its cache there)."""
    return functools.wraps(fun, updated=())


def _leaf_out(x):
    """An output leaf: tracers unchanged, concrete values as numpy arrays of their minixla dtype;
    a Python scalar (or a ``WeakScalar``) becomes a weakly typed array (``WeakArray``), as
    JAX's outputs are weak there."""
    if isinstance(x, Tracer) or isinstance(x, np.ndarray):
        return x
    aval = get_aval(x)
    return weak_array(np.asarray(x, aval.dtype), aval.weak_type)


def _instantiate_out(t, primal):
    return zeros_like_aval(tangent_aval(get_aval(primal))) if isinstance(t, Zero) else t


def flatten_fun(fun, in_tree):
    """``fun`` of positional pytrees as a flat function; its output treedef lands in ``store[0]``."""
    store = []

    def flat_fun(*flat_args):
        out = fun(*tree_util.tree_unflatten(in_tree, list(flat_args)))
        flat_out, out_tree = tree_util.tree_flatten(out)
        store.append(out_tree)
        return flat_out
    return flat_fun, store


def _type_error(msg: str):
    """JAX's TypeError message for a misused transformation, as a minixla error with the user's line."""
    return errors.TransformTypeError(f"{msg}\n  at: {errors.user_source_line()}")


def _value_error(msg: str):
    """JAX's ValueError message for a misused transformation, with the user's line."""
    return errors.TransformValueError(f"{msg}\n  at: {errors.user_source_line()}")


def _fun_name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


# ---------------------------------------------------------------------------------------
# Forward mode.

def jvp(fun, primals, tangents, has_aux=False):
    """``(fun(*primals), d fun(primals) . tangents)``, as ``jax.jvp``.

    ``primals`` and ``tangents`` are tuples (or lists) of pytrees of equal structure, shapes and
    dtypes; an integer or bool primal takes a ``float0`` tangent. Integer outputs get ``float0``
    zero tangents. Raises ``TypeError``/``ValueError`` with JAX's messages on a mismatch.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise _type_error("primal and tangent arguments to jax.jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    flat_p, tree_p = tree_util.tree_flatten(tuple(primals))
    flat_t, tree_t = tree_util.tree_flatten(tuple(tangents))
    if tree_p != tree_t:
        raise _type_error("primal and tangent arguments to jax.jvp must have the same tree structure; "
                        f"primals have tree structure {tree_p} whereas tangents have tree structure {tree_t}.")
    tans = []
    for p, t in zip(flat_p, flat_t):
        pa, ta = get_aval(p), get_aval(t)
        if pa.shape != ta.shape:
            raise _value_error(f"jvp called with different primal and tangent shapes;Got primal shape "
                             f"{pa.shape} and tangent shape as {ta.shape}")
        want = tangent_aval(pa).dtype
        if np.dtype(t.dtype if hasattr(t, "dtype") else ta.dtype) != want and ta.dtype != want:
            raise _type_error("primal and tangent arguments to jax.jvp do not match; dtypes must be equal, "
                            "or in case of int/bool primal dtype the tangent dtype must be float0."
                            f"Got primal dtype {pa.dtype.name} and so expected tangent dtype {want}, but "
                            f"got tangent dtype {ta.dtype.name} instead.")
        # (a tangent takes its primal's weak type, as in JAX: jvp at a Python float with a
        # float32 tangent gives weakly typed tangents)
        tans.append(Zero(tangent_aval(pa)) if want == float0 else _cast_like(t, tangent_aval(pa)))
    flat_fun, out_store = flatten_fun(_aux_fun(fun, has_aux), tree_p)
    p_out, t_out = ad.jvp_flat(lambda *xs: flat_fun(*xs), flat_p, tans)
    out_tree = out_store[0]
    t_out = [_instantiate_out(t, p) for t, p in zip(t_out, p_out)]
    if has_aux:
        (po, aux), (to, _) = _split_aux(out_tree, p_out, t_out)
        return po, to, aux
    return (tree_util.tree_unflatten(out_tree, [_leaf_out(x) for x in p_out]),
            tree_util.tree_unflatten(out_tree, [_leaf_out(x) for x in t_out]))


def _aux_fun(fun, has_aux):
    """``fun`` returning ``(out, aux)``: aux is carried as extra outputs marked in the tree."""
    if not has_aux:
        return fun

    @_wraps(fun)
    def wrapped(*args, **kwargs):
        res = fun(*args, **kwargs)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise _type_error("expected function with aux output to return a two-element tuple, but got "
                            f"type {type(res)} with value {res!r}")
        return (res[0], _stop_all(res[1]))
    return wrapped


def _stop_all(tree):
    return tree_util.tree_map(lambda x: stop_gradient(x) if isinstance(x, Tracer) else x, tree)


def _split_aux(out_tree, *flats):
    """Split flat outputs of an ``(out, aux)`` function into (out pytree, aux pytree) per list."""
    outs = []
    for flat in flats:
        out, aux = tree_util.tree_unflatten(out_tree, [_leaf_out(x) for x in flat])
        outs.append((out, aux))
    return outs


def linearize(fun, *primals, has_aux=False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP at ``primals``, as
    ``jax.linearize``: the primal computation runs once, the tangent map is a linear jaxpr
    (``f_jvp.jaxpr``) evaluated on each call."""
    flat_p, in_tree = tree_util.tree_flatten(primals)
    flat_fun, out_store = flatten_fun(_aux_fun(fun, has_aux), in_tree)
    p_out, lin = ad.linearize_flat(lambda *xs: flat_fun(*xs), flat_p)
    out_tree = out_store[0]
    n_out = len(p_out)
    if has_aux:
        out_sub, aux_sub = tree_util.tree_unflatten(out_tree, list(range(n_out)))
        n_main = len(tree_util.tree_leaves(out_sub))
        main_tree = tree_util.tree_structure(out_sub)
    else:
        n_main, main_tree = n_out, out_tree

    def f_jvp(*tangents):
        flat_t, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != in_tree:
            raise _type_error(f"linearized function called on tangent values inconsistent with the original "
                            f"primal values: expected tree structure {in_tree}, got {t_tree}")
        for t, p in zip(flat_t, flat_p):
            _check_linearized_tangent(t, get_aval(p))
        outs = lin(*flat_t)
        return tree_util.tree_unflatten(main_tree, [_leaf_out(x) for x in outs[:n_main]])
    f_jvp.jaxpr = lin.closed
    primal_out = tree_util.tree_unflatten(out_tree, [_leaf_out(x) for x in p_out])
    if has_aux:
        return primal_out[0], f_jvp, primal_out[1]
    return primal_out, f_jvp


def _check_linearized_tangent(t, primal):
    """JAX's ValueError for a tangent passed to ``linearize``'s ``f_jvp`` whose shape or dtype
    is not the primal's tangent type (``float0`` for an integer primal); weak types may differ."""
    got, want = get_aval(t), tangent_aval(primal)
    if got.shape == want.shape and got.dtype == want.dtype:
        return

    def typ(a, weak):
        name = "float0" if a.dtype == float0 else a.dtype.name
        return f"{'~' if weak else ''}{name}[{','.join(map(str, a.shape))}]"
    raise _value_error(
        "linearized function called on tangent values inconsistent with the original primal values:\n"
        f"Got tangent aval {typ(got, got.weak_type)} for primal aval {typ(primal, primal.weak_type)} but "
        f"expected {typ(want, primal.weak_type)}.")


# ---------------------------------------------------------------------------------------
# Reverse mode.

def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), vjp_fun)`` as ``jax.vjp``: ``vjp_fun(ct)`` (``ct`` shaped like the output)
    returns a tuple with one cotangent pytree per primal (``float0`` zeros for integer ones)."""
    flat_p, in_tree = tree_util.tree_flatten(primals)
    flat_fun, out_store = flatten_fun(_aux_fun(fun, has_aux), in_tree)
    p_out, lin = ad.linearize_flat(lambda *xs: flat_fun(*xs), flat_p)
    out_tree = out_store[0]
    if has_aux:
        out_sub, aux_sub = tree_util.tree_unflatten(out_tree, list(p_out))
        main_flat, main_tree = tree_util.tree_flatten(out_sub)
    else:
        main_flat, main_tree = p_out, out_tree
    n_main = len(main_flat)

    def vjp_fun(ct):
        flat_ct, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != main_tree:
            raise _value_error("unexpected tree structure.\n\nThe argument to a VJP function returned by "
                             "`jax.vjp` must match the pytree\nstructure of the differentiated function "
                             f"{_fun_name(fun)}.\n\nBut the tree structures differ: expected {main_tree}, "
                             f"got {ct_tree}")
        cts = []
        for c, p in zip(flat_ct, main_flat):
            want = tangent_aval(get_aval(p))
            got = get_aval(c)
            if want.dtype == float0:
                cts.append(Zero(want))
                continue
            if got.shape != want.shape or got.dtype != want.dtype:
                raise _value_error(
                    "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                    f"{got.dtype.name}{list(got.shape)}, but expected {want.dtype.name}{list(want.shape)} "
                    "because the corresponding output of the differentiated function had JAX type "
                    f"{want.dtype.name}{list(want.shape)}".replace(", ", ","))
            cts.append(c)
        cts += [Zero(a) for a in lin.out_avals[n_main:]]  # aux outputs get no cotangent
        in_cts = lin.transpose(cts)
        in_cts = [zeros_like_aval(c.aval) if isinstance(c, Zero) else c for c in in_cts]
        return tree_util.tree_unflatten(in_tree, [_leaf_out(x) for x in in_cts])

    if has_aux:
        return _leaf_tree(out_sub), vjp_fun, _leaf_tree(aux_sub)
    return tree_util.tree_unflatten(out_tree, [_leaf_out(x) for x in p_out]), vjp_fun


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun`` (``jax.linear_transpose``): ``primals`` only
    give the input shapes and dtypes; the returned function maps output cotangents to a tuple
    of input cotangents. ``fun`` is traced once into a jaxpr that is transposed equation by
    equation; a non-linear ``fun`` raises (no transpose rule, or a product of two inputs)."""
    flat, in_tree = tree_util.tree_flatten(primals)
    in_avals = [get_aval(x) for x in flat]
    for a in in_avals:
        if not is_float(a.dtype):
            raise _type_error(f"linear_transpose only supports [float or complex] -> [float or complex], "
                            f"and integer -> integer functions, but got {a.dtype.name} input")
    flat_fun, out_store = flatten_fun(fun, in_tree)
    # Traced by partial evaluation, as JAX does: what does not depend on the inputs (a loop's
    # counter, constants) is computed now; the jaxpr holds only the linear part.
    closed = trace_to_jaxpr(flat_fun, in_avals, trace=ad.LinearJaxprTrace())
    out_tree = out_store[0]
    out_dtypes = [a.dtype for a in closed.out_avals]
    if not all(is_float(d) for d in out_dtypes):
        raise _type_error("linear_transpose only supports [float or complex] -> [float or complex], and "
                          f"integer -> integer functions, but got {[a.dtype for a in in_avals]} -> "
                          f"{out_dtypes}.")

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        flat_ct, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise _type_error(f"cotangent tree does not match function output, expected {out_tree} but got {ct_tree}")
        for c, a in zip(flat_ct, closed.out_avals):
            if get_aval(c).shape != a.shape or get_aval(c).dtype != a.dtype:
                raise _type_error(f"cotangent type does not match function output, expected {a.str_short()} "
                                f"but got {get_aval(c).str_short()}")
        in_cts = ad.backward_pass(closed.jaxpr, closed.consts, flat_ct)
        in_cts = [zeros_like_aval(a) if isinstance(c, Zero) else c for c, a in zip(in_cts, in_avals)]
        return tree_util.tree_unflatten(in_tree, [_leaf_out(c) for c in in_cts])
    return transposed


def _leaf_tree(tree):
    return tree_util.tree_map(_leaf_out, tree)


def _argnums_check(fun, argnums, n_args, what="differentiating"):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if any(not isinstance(a, int) for a in nums):
        raise _type_error(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    if nums and (max(nums) >= n_args or min(nums) < -n_args):
        raise _type_error(f"{what} with respect to argnums={argnums} requires at least {max(nums) + 1} "
                        f"positional arguments to be passed by the caller, but got only {n_args} "
                        "positional arguments.")
    return tuple(a % n_args for a in nums)


def _check_input_dtype(x, allow_int, name="grad"):
    dtype = get_aval(x).dtype
    if not is_float(dtype) and not allow_int:
        raise _type_error(f"{name} requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                        f"np.inexact), but got {dtype.name}. If you want to use Boolean- or integer-valued "
                        "inputs, use vjp or set allow_int to True.")


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """``(fun(*args), grad(fun)(*args))`` in one pass, as ``jax.value_and_grad``.

    Raises ``TypeError`` (JAX's messages) when the output is not a real scalar, when an input
    in ``argnums`` is an integer without ``allow_int``, or when ``argnums`` is out of range.
    """
    if holomorphic:
        raise errors.UnsupportedError("holomorphic=True (complex differentiation) is not supported by minixla")

    @_wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums = _argnums_check(fun, argnums, len(args))
        for i in nums:
            for leaf in tree_util.tree_leaves(args[i]):
                _check_input_dtype(leaf, allow_int)

        def partial_f(*dyn):
            full = list(args)
            for i, v in zip(nums, dyn):
                full[i] = v
            return fun(*full, **kwargs)
        res = vjp(partial_f, *[args[i] for i in nums], has_aux=has_aux)
        out, pullback = res[0], res[1]
        _check_scalar(out)
        ct = _ones_like_out(get_aval(out))
        if isinstance(out, Tracer):
            # (under jit: the operations on the constant seed are staged, as in JAX's jaxpr,
            # not evaluated one by one with JAX -- each an XLA compile)
            with staging_constant_ops():
                g = pullback(ct)
        else:
            g = pullback(ct)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        if has_aux:
            return (out, res[2]), g
        return out, g
    return value_and_grad_f


def _ones_like_out(aval):
    """The cotangent seed of a scalar output: a one of its dtype, weakly typed when the output
    is (JAX seeds ``grad`` with ``ones_like`` of the output's aval)."""
    one = np.ones((), aval.dtype)[()]
    return WeakScalar(one) if aval.weak_type else one


def _check_scalar(out):
    msg = "Gradient only defined for scalar-output functions. Output {}."
    try:
        aval = get_aval(out)
    except TypeError:
        raise _type_error(msg.format(f"was {out}")) from None
    if aval.shape != ():
        raise _type_error(msg.format(f"had shape: {aval.shape}"))
    if not is_float(aval.dtype) or aval.dtype.kind == "c":
        raise _type_error("grad requires real-valued outputs (output dtype that is a sub-dtype of np.floating), "
                        f"but got {aval.dtype.name}. For differentiation of functions with integer outputs, "
                        "use jax.vjp directly.")


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of scalar-output ``fun`` with respect to ``argnums`` (int or tuple), as
    ``jax.grad``; with ``has_aux`` ``fun`` returns ``(out, aux)`` and the result is ``(g, aux)``.

    Raises ``TypeError`` (JAX's messages): non-scalar or non-float output, integer input without
    ``allow_int`` (``allow_int=True`` gives it a ``float0`` gradient), ``argnums`` out of range,
    ``has_aux`` on a function not returning a pair.
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @_wraps(fun)
    def grad_f(*args, **kwargs):
        (_, aux), g = vg(*args, **kwargs) if has_aux else ((None, None), vg(*args, **kwargs)[1])
        return (g, aux) if has_aux else g
    return grad_f


# ---------------------------------------------------------------------------------------
# Jacobians.

def _std_basis(flat):
    """One-hot tangents: for each leaf a [n, *shape] stack (n = total size) of unit vectors, of
    the leaf's dtype and weak type (as JAX's ``_std_basis``)."""
    sizes = [int(np.prod(get_aval(x).shape, dtype=np.int64)) for x in flat]
    total = sum(sizes)
    dtype = jax.numpy.result_type(*[get_aval(x).dtype for x in flat])
    eye = np.eye(total, dtype=dtype)
    out, start = [], 0
    for x, n in zip(flat, sizes):
        a = get_aval(x)
        out.append(weak_array(eye[:, start:start + n].reshape((total,) + a.shape).astype(a.dtype), a.weak_type))
        start += n
    return out, total


def _cast_like(x, aval):
    """``x`` with ``aval``'s dtype and weak type: a Jacobian block takes the type of its
    example leaf (the output's for ``jacfwd``, the input's for ``jacrev``), as JAX's
    ``_possible_downcast``."""
    from minixla import lax
    got = get_aval(x)
    if got.dtype == aval.dtype and got.weak_type == aval.weak_type:
        return x
    if got.dtype == float0:  # (the float0 block of an integer leaf: zeros of its dtype)
        return lax.full(got.shape, 0, aval.dtype, _weak_type=aval.weak_type)
    return lax.convert_element_type_p.bind(x, new_dtype=aval.dtype, weak_type=aval.weak_type)


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian by forward mode (``jax.jacfwd``): ``vmap`` of ``jvp`` over the input basis;
    each output leaf gets shape ``out.shape + in.shape``."""
    @_wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _argnums_check(fun, argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        flat, in_tree = tree_util.tree_flatten(dyn)
        for x in flat:
            if not is_float(get_aval(x).dtype):
                raise _type_error(f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                                f"np.floating), but got {get_aval(x).dtype.name}. For holomorphic "
                                "differentiation, pass holomorphic=True. For differentiation of "
                                "non-holomorphic functions involving complex inputs or integer inputs, "
                                "use jax.jvp directly.")
        basis, n = _std_basis(flat)

        def f_flat(*xs):
            full = list(args)
            for i, v in zip(nums, tree_util.tree_unflatten(in_tree, list(xs))):
                full[i] = v
            return fun(*full, **kwargs)

        def push(*ts):
            res = jvp(f_flat, tuple(flat), tuple(ts), has_aux=has_aux)
            return (res[1], res[0], res[2]) if has_aux else (res[1], res[0])
        out = vmap(push, in_axes=0, out_axes=(0, None, None) if has_aux else (0, None))(*basis)
        jac, y, aux = out if has_aux else out + (None,)
        jac = tree_util.tree_map(lambda j: _basis_to_last(j, n), jac)
        jac = _split_jac(jac, flat, in_tree, isinstance(argnums, int), last=True, outs=y)
        return (jac, aux) if has_aux else jac
    return jacfun


def _basis_to_last(j, n):
    """``[n, *out]`` -> ``[*out, n]``."""
    nd = get_aval(j).ndim
    return moveaxis(j, 0, nd - 1) if nd > 1 else j


def _split_jac(jac, flat, in_tree, single, last, outs):
    """Per output leaf ``[*out, n]`` (or ``[n, *out]``) into per-input blocks ``[*out, *in]``,
    each of the dtype and weak type of its output leaf (``outs``, a pytree like ``jac``)."""
    from minixla import lax
    sizes = [int(np.prod(get_aval(x).shape, dtype=np.int64)) for x in flat]

    def split(j, y):
        shape = get_aval(j).shape
        out_shape = shape[:-1] if last else shape[1:]
        blocks, start = [], 0
        for x, n in zip(flat, sizes):
            ax = len(shape) - 1 if last else 0
            lo, hi = [0] * len(shape), list(shape)
            lo[ax], hi[ax] = start, start + n
            b = lax.slice(j, lo, hi) if shape else j
            in_shape = get_aval(x).shape
            new = out_shape + in_shape if last else in_shape + out_shape
            blocks.append(_cast_like(lax.reshape(b, new), get_aval(y)))
            start += n
        tree = tree_util.tree_unflatten(in_tree, [_leaf_out(b) for b in blocks])
        return tree[0] if single else tree
    return tree_util.tree_map(split, jac, outs)


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian by reverse mode (``jax.jacrev``): ``vmap`` of the ``vjp`` over the output basis;
    each output leaf gets shape ``out.shape + in.shape``."""
    @_wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _argnums_check(fun, argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        for leaf in tree_util.tree_leaves(dyn):
            _check_input_dtype(leaf, allow_int, "jacrev")

        def f_dyn(*d):
            full = list(args)
            for i, v in zip(nums, d):
                full[i] = v
            return fun(*full, **kwargs)
        res = vjp(f_dyn, *dyn, has_aux=has_aux)
        y, pullback = res[0], res[1]
        flat_y, y_tree = tree_util.tree_flatten(y)
        for yl in flat_y:
            if not is_float(get_aval(yl).dtype):
                raise _type_error(f"jacrev requires real-valued outputs (output dtype that is a sub-dtype of "
                                  f"np.floating), but got {get_aval(yl).dtype.name}. For differentiation of "
                                  "functions with integer outputs, use jax.vjp directly.")
        basis, n = _std_basis(flat_y)
        cts = vmap(lambda *ct: pullback(tree_util.tree_unflatten(y_tree, list(ct))))(*basis)
        # cts: per input (tuple over argnums), leaves [n, *in]; regroup per output leaf
        flat_in, in_tree = tree_util.tree_flatten(cts)
        sizes = [int(np.prod(get_aval(x).shape, dtype=np.int64)) for x in flat_y]
        from minixla import lax
        per_out = []
        start = 0
        for yl, m in zip(flat_y, sizes):
            blocks = []
            for c, x in zip(flat_in, tree_util.tree_leaves(dyn)):
                cshape = get_aval(c).shape
                b = lax.slice(c, [start] + [0] * (len(cshape) - 1), list((start + m,) + cshape[1:]))
                blocks.append(_leaf_out(_cast_like(lax.reshape(b, get_aval(yl).shape + cshape[1:]),
                                                   get_aval(x))))
            tree = tree_util.tree_unflatten(in_tree, blocks)
            per_out.append(tree[0] if isinstance(argnums, int) else tree)
            start += m
        jac = tree_util.tree_unflatten(y_tree, per_out)
        return (jac, res[2]) if has_aux else jac
    return jacfun


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """``jacfwd(jacrev(fun))``, as ``jax.hessian``."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


# ---------------------------------------------------------------------------------------
# vmap.

def _flatten_axes(what, tree, axes, kws=False):
    """``axes`` (an int, None, or a pytree prefix of ``tree``, Nones as leaves) broadcast to one
    entry per leaf: JAX's own ``flatten_axes``, so a mismatch reads as JAX's (its key paths)."""
    from jax._src.api_util import flatten_axes
    try:
        return flatten_axes(what, tree, axes, kws=kws)
    except ValueError as e:
        raise _value_error(e.args[0]) from None


def _check_axes_types(in_axes, out_axes):
    """JAX's TypeErrors for an ``in_axes``/``out_axes`` that is not ints and Nones (raised by
    ``vmap`` itself, before any call)."""
    leaf_ok = lambda l: type(l) is int or l is None
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise errors.TransformTypeError(
            "vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
            f"arguments passed to the function, but got {in_axes}.")
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        if not all(leaf_ok(l) for l in tree_util.tree_leaves(axes, is_leaf=lambda x: x is None)):
            raise errors.TransformTypeError(
                f"vmap {what} must be an int, None, or (nested) container with those types as leaves, "
                f"but got {axes}.")


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """Vectorize ``fun`` over a leading (or ``in_axes``) axis, as ``jax.vmap``.

    ``in_axes``: an int, None, or a tuple with one entry (int, None or a pytree prefix) per
    positional argument; ``out_axes`` likewise for the output. ``axis_size`` is needed when no
    argument is mapped. Raises JAX's errors with JAX's messages: ``TypeError`` for axes that are
    not ints and Nones; ``ValueError`` for inconsistent sizes (grouped by size, naming an
    argument of each), an axis out of range, an ``in_axes``/``out_axes`` that is no tree prefix
    of the value, and an ``out_axes`` of None for an output that is batched.
    """
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes_types(in_axes, out_axes)

    @_wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise _value_error("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                             f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        from minixla.random.keys import jax_keys_to_minixla  # (JAX typed keys: as minixla's)
        args, kwargs = jax_keys_to_minixla((args, kwargs), "vmap")
        flat, in_tree = tree_util.tree_flatten(args)
        kw_flat, kw_tree = tree_util.tree_flatten(kwargs)
        # (keyword arguments are mapped over their leading axis, as in JAX)
        axes = _flatten_axes("vmap in_axes", tree_util.tree_structure((args, kwargs)), (in_axes, 0), kws=True)
        n_pos = len(flat)
        flat = flat + kw_flat
        for x in (x for x, ax in zip(flat, axes) if ax is not None):  # (JAX's TypeError; an
            try:                                                        # unmapped one may be any)
                get_aval(x)
            except errors.MinixlaError:
                raise _type_error(f"Argument '{x}' of type {type(x)} is not a valid JAX type") from None
        size = _mapped_axis_size(fun, args, kwargs, flat, axes, axis_size)
        trace = BatchTrace(size)
        with new_trace(trace):
            ins = [BatchTracer(trace, x, ax % get_aval(x).ndim) if ax is not None else x for x, ax in zip(flat, axes)]
            out = fun(*tree_util.tree_unflatten(in_tree, ins[:n_pos]), **tree_util.tree_unflatten(kw_tree, ins[n_pos:]))
            flat_out, out_tree = tree_util.tree_flatten(out)
            pairs = [trace.lift(o) for o in flat_out]
        oaxes = _flatten_axes("vmap out_axes", out_tree, out_axes)
        for i, ((v, d), oa) in enumerate(zip(pairs, oaxes)):
            if oa is None and d is not None:
                path = tree_util.tree_flatten_with_path(tree_util.tree_unflatten(out_tree, oaxes),
                                                        is_leaf=lambda x: x is None)[0][i][0]
                raise _value_error(f"at vmap out_axes{tree_util.keystr(path)}, got axis spec None "
                                   f"but output was batched on axis {d}")
        res = [_leaf_out(_move_out(v, d, oa, size)) for (v, d), oa in zip(pairs, oaxes)]
        return tree_util.tree_unflatten(out_tree, res)
    return vmap_f


def _move_out(v, d, oa, size):
    from minixla import lax
    if oa is None:
        return v
    nd = get_aval(v).ndim + (1 if d is None else 0)
    if not -nd <= oa < nd:
        raise _value_error(f"axis {oa} is out of bounds for array of dimension {nd}")
    oa %= nd
    if d is None:
        shape = get_aval(v).shape
        dims = tuple(i for i in range(nd) if i != oa)
        return lax.broadcast_in_dim(v, shape[:oa] + (size,) + shape[oa:], dims)
    return moveaxis(v, d, oa)


def _mapped_axis_size(fun, args, kwargs, flat, axes, axis_size):
    """The batch size, or JAX's ValueError naming the mismatched arguments (``_mapped_axis_size``
    in JAX's api.py: sizes grouped by how many axes have them, most common first)."""
    import collections
    import inspect
    if not flat:
        if axis_size is not None:
            return axis_size
        raise _value_error("vmap wrapped function must be passed at least one argument containing an array "
                           f"or axis_size must be specified, got empty *args={args} and **kwargs={kwargs}")
    sizes = []
    for x, ax in zip(flat, axes):
        if ax is None:
            sizes.append(None)
            continue
        shape = get_aval(x).shape
        if not -len(shape) <= ax < len(shape):
            raise _value_error(f"vmap was requested to map its argument along axis {ax}, which implies that "
                               f"its rank should be at least {ax + 1 if ax >= 0 else -ax}, but is only "
                               f"{len(shape)} (its shape is {shape})")
        sizes.append(shape[ax])
    distinct = set(s for s in sizes if s is not None) | ({axis_size} if axis_size is not None else set())
    if len(distinct) == 1:
        return distinct.pop()
    if not distinct:
        raise _value_error("vmap must have at least one non-None value in in_axes or axis_size must be specified")
    try:
        params = list(inspect.signature(fun).bind(*args, **kwargs).signature.parameters)
    except (TypeError, ValueError):
        params = None

    def arg_name(path):
        if params is None or path[0].idx >= len(params):  # (no signature, or a *args entry)
            return f"args{tree_util.keystr(path)}"
        return f"argument {params[path[0].idx]}" + (tree_util.keystr(path[1:]) if len(path) > 1 else "")

    def typ(x):
        try:
            a = get_aval(x)
        except TypeError:  # (as JAX, for an object that is no array)
            return "unknown"
        return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
    names = [f"{arg_name(p)} of type {typ(x)}" for p, x in tree_util.tree_flatten_with_path(args)[0]]
    names += [f"kwargs{tree_util.keystr(p)} of type {typ(x)}" for p, x in tree_util.tree_flatten_with_path(kwargs)[0]]
    counts = collections.Counter(s for s in sizes if s is not None).most_common()
    lines = ["vmap got inconsistent sizes for array axes to be mapped:\n"]
    if axis_size is not None:
        lines.append(f"  * the `axis_size` argument was {axis_size};\n")
    for k, (sz, ct) in enumerate(counts):
        i = sizes.index(sz)
        if ct == 1:
            lines.append(f"  * one axis had size {sz}: axis {axes[i]} of {names[i]};\n")
        else:
            many = "most" if k == 0 else "some"
            lines.append(f"  * {many} axes ({ct} of them) had size {sz}, e.g. axis {axes[i]} of {names[i]};\n")
    raise _value_error("".join(lines)[:-2])


# ---------------------------------------------------------------------------------------
# Misc.

def stop_gradient(x):
    """``minixla.lax.stop_gradient`` (``jax.lax.stop_gradient``): a ``stop_gradient`` equation per
    traced leaf, whose JVP rule drops the tangent at every level of differentiation."""
    from minixla import lax
    return lax.stop_gradient(x)


def eval_shape(fun, *args, **kwargs):
    """The output's ``jax.ShapeDtypeStruct`` pytree, traced without computing anything (``jax.eval_shape``)."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    flat_fun, out_store = _flatten_fun_kw(fun, in_tree)
    closed = trace_to_jaxpr(flat_fun, [get_aval(x) for x in flat])
    outs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
    return tree_util.tree_unflatten(out_store[0], outs)


#: ``jax.jacobian`` is ``jax.jacrev``
jacobian = jacrev

#: the dtype of the tangents of integer and bool values (``jax.dtypes.float0``)
float0 = jax.dtypes.float0

#: the result type of ``eval_shape`` (``jax.ShapeDtypeStruct``: shape, dtype, weak_type)
ShapeDtypeStruct = jax.ShapeDtypeStruct


def typeof(x):
    """The abstract value of ``x`` (``jax.typeof``): a ``ShapedArray`` with its shape, dtype and
    weak type; for a tracer, the aval it is traced at."""
    from minixla.core.avals import get_aval
    return get_aval(x)
