"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (``jax/_src/custom_derivatives.py``).

A decorated function is traced to a sub-jaxpr and bound as one equation, ``custom_jvp_call`` or
``custom_vjp_call``, that carries it (``call_jaxpr``) and the user's rules. Each transformation
then has one row for it:

* evaluation, ``jit`` and ``make_jaxpr``: the primal sub-jaxpr (lowered inline to HLO);
* JVP of ``custom_jvp_call``: the user's ``jvp(primals, tangents)`` instead of differentiating
  ``call_jaxpr``. Reverse mode is linearize + transpose, so ``grad`` uses that rule too (it
  must be linear in the tangents, as in JAX);
* JVP of ``custom_vjp_call`` (only reached while linearizing, i.e. under ``vjp``/``grad``):
  the user's ``fwd`` gives the outputs and residuals, and the tangent outputs are a
  ``custom_lin`` equation whose transpose rule is the user's ``bwd`` (JAX's design). Plain
  forward mode (``jvp``) of a ``custom_vjp`` function is a TypeError, as in JAX;
* batching: ``call_jaxpr`` and the rules are all batched, and a new call is bound, so
  ``vmap`` of a custom function still differentiates with the user's rule.

Closing over a value that is being differentiated is an error (JAX raises too); pass it as an
argument instead. Closures over other tracers (of ``jit``, ``vmap``) or arrays are fine.
"""
from __future__ import annotations

import functools
import inspect

from jax import tree_util

from minixla import lax as L
from minixla.core import errors
from minixla.core.avals import WeakScalar, get_aval, weak_array
from minixla.core.primitive import Primitive, impl_rules, registry, shape_rules
from minixla.core.tracing import find_trace
from minixla.interpreters import calls
from minixla.interpreters.ad import (LinearJaxprTrace, Zero, float0, instantiate, is_float, is_undefined,
                                     jvp_rules, tangent_aval, transpose_rules)
from minixla.interpreters.batching import batching_rules, moveaxis


def _jax_type(aval) -> str:
    """An aval as JAX writes it in these messages: ``float32[2,3]``."""
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


def _type_error(msg):
    return errors.TransformTypeError(f"{msg}\n  at: {errors.user_source_line()}")


def _resolve_args(fun, args, kwargs):
    """Keyword arguments bound to their positions (JAX's ``resolve_kwargs``)."""
    if not kwargs:
        return tuple(args)
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise _type_error(f"The function {calls.fun_name(fun)} was called with arguments it does not take: "
                          f"{e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise _type_error(f"keyword-only arguments are not supported by custom_jvp/custom_vjp functions "
                          f"({calls.fun_name(fun)} got {sorted(bound.kwargs)})")
    return tuple(bound.args)


def _split_nondiff(args, nondiff_argnums):
    n = len(args)
    nums = sorted({i % n for i in nondiff_argnums if -n <= i < n})
    if len(nums) != len(nondiff_argnums):
        raise _type_error(f"nondiff_argnums={tuple(nondiff_argnums)} out of range for {n} positional arguments")
    return nums, [args[i] for i in nums], tuple(a for i, a in enumerate(args) if i not in nums)


def _merge(n, nums, nondiff, dyn):
    it_nd, it_d = iter(nondiff), iter(dyn)
    return tuple(next(it_nd) if i in nums else next(it_d) for i in range(n))


def _closure_error(kind, name):
    return errors.UnexpectedTracerError(
        f"{kind} function {name} closes over a value that is being differentiated (a tracer of an "
        "enclosing jvp/grad); JAX raises an UnexpectedTracerError here too. Pass the value as an "
        f"argument of {name} instead.\n  at: {errors.user_source_line()}")


class _Traced:
    """A decorated function's call traced once: the flat function, its sub-jaxpr and consts."""

    def __init__(self, fun, args, kwargs, nondiff_argnums):
        self.args = _resolve_args(fun, args, kwargs)
        self.nums, self.nondiff, dyn = _split_nondiff(self.args, nondiff_argnums)
        self.flat, self.in_tree = tree_util.tree_flatten(dyn)
        self.n_args = len(self.args)
        self.n_dyn = len(dyn)
        self.fun = fun

    def full_args(self, dyn):
        return _merge(self.n_args, self.nums, self.nondiff, dyn)

    def trace(self):
        store = []

        def flat_fun(*xs):
            out = self.fun(*self.full_args(tree_util.tree_unflatten(self.in_tree, list(xs))))
            flat_out, out_tree = tree_util.tree_flatten(out)
            store.append(out_tree)
            return flat_out
        closed, consts = calls.trace_call(flat_fun, [get_aval(x) for x in self.flat])
        return closed, consts, store[0]


# ---------------------------------------------------------------------------------------
# custom_jvp

custom_jvp_call_p = Primitive("custom_jvp_call")
custom_jvp_call_p.multiple_results = True
shape_rules[custom_jvp_call_p] = calls.call_shape_rule("call_jaxpr")
impl_rules[custom_jvp_call_p] = calls.call_impl("call_jaxpr")
calls.register_call_lowering(custom_jvp_call_p, "call_jaxpr")


class custom_jvp:
    """A function with a user-defined JVP (``jax.custom_jvp``)::

        @minixla.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents):   # tuples, one entry per argument
            ...
            return f(*primals), tangent_out

    ``jvp``, ``grad``, ``vjp``, ``linearize`` and the Jacobians use ``f_jvp`` instead of
    differentiating ``f`` (reverse mode transposes it, so it must be linear in the tangents);
    ``vmap`` batches both. ``nondiff_argnums``: positions of arguments that are not
    differentiated (Python values, functions, ...); they are passed first to the rule:
    ``f_jvp(*nondiff, primals, tangents)``. Integer inputs get ``float0`` tangents.

    Raises (JAX's messages): ``AttributeError`` when called before ``defjvp``; ``TypeError``
    when the rule does not return a pair, returns primal and tangent outputs of different
    pytree structures, or a tangent whose shape/dtype does not match its primal.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the JVP rule ``jvp(*nondiff, primals, tangents) -> (primal_out, tangent_out)``."""
        if symbolic_zeros:
            raise errors.UnsupportedError("custom_jvp.defjvp(symbolic_zeros=True) is not supported by minixla: "
                                          "zero tangents are passed as arrays of zeros")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, ``jvp_i(tangent_i, primal_out, *primals) -> tangent_out`` (or
        None: no dependence), summed, as ``jax.custom_jvp.defjvps``."""
        if self.nondiff_argnums:
            raise _type_error("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                term = rule(t, out, *primals)
                total = term if total is None else tree_util.tree_map(L.add, total, term)
            return out, total if total is not None else tree_util.tree_map(lambda o: o * 0, out)
        jvp.__name__ = f"{calls.fun_name(self.fun)}_jvps"
        self.defjvp(jvp)

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        name = calls.fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        t = _Traced(self.fun, args, kwargs, self.nondiff_argnums)
        if not calls.tracing_active(t.flat):
            return self.fun(*t.args)
        closed, consts, out_tree = t.trace()
        rule = _JvpRule(self, t, len(consts), out_tree, closed.out_avals)
        outs = custom_jvp_call_p.bind(*consts, *t.flat, name=name, call_jaxpr=closed, jvp=rule,
                                      symbolic_zeros=False)
        return tree_util.tree_unflatten(out_tree, list(outs))


class _JvpRule(calls.FunctionName):
    """The user's JVP rule on flat operands (consts first): ``(primals, tangents) -> (primal
    outputs, tangent outputs)``, a tangent being None for a non-float output."""

    def __init__(self, cj, traced, num_consts, out_tree, out_avals):
        super().__init__(calls.fun_name(cj.jvp))
        self.cj, self.traced, self.num_consts = cj, traced, num_consts
        self.out_tree, self.out_avals = out_tree, list(out_avals)

    def __call__(self, primals, tangents):
        t, n = self.traced, self.num_consts
        p_args = tree_util.tree_unflatten(t.in_tree, list(primals[n:]))
        t_args = tree_util.tree_unflatten(t.in_tree, list(tangents[n:]))
        res = self.cj.jvp(*t.nondiff, tuple(p_args), tuple(t_args))
        fname, jname = calls.fun_name(self.cj.fun), self.name
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise _type_error(f"Custom JVP rule {jname} for function {fname} must produce a pair (list or tuple "
                              f"of length two) representing primal and tangent outputs, but got {res}.")
        p_flat, p_tree = tree_util.tree_flatten(res[0])
        t_flat, t_tree = tree_util.tree_flatten(res[1])
        if p_tree != t_tree:
            raise _type_error(f"Custom JVP rule {jname} for function {fname} must produce primal and tangent "
                              f"outputs with equal container (pytree) structures, but got {p_tree} and {t_tree} "
                              "respectively.")
        if p_tree != self.out_tree:
            raise _type_error(f"Custom JVP rule {jname} for function {fname} must produce primal outputs with "
                              f"the container (pytree) structure of {fname}'s output, {self.out_tree}, but got "
                              f"{p_tree}.")
        tans = []
        for p, tan, want in zip(p_flat, t_flat, self.out_avals):
            pa = get_aval(p)
            if pa.shape != want.shape or pa.dtype != want.dtype:
                raise _type_error(f"Custom JVP rule {jname} for function {fname} must produce primal outputs of "
                                  f"the types of {fname}'s outputs: expected {want.str_short()} but got "
                                  f"{pa.str_short()}.")
            if not is_float(pa.dtype):
                tans.append(None)
                continue
            ta = get_aval(tan)
            if ta.shape != pa.shape or ta.dtype != pa.dtype:
                raise _type_error("Custom JVP rule must produce primal and tangent outputs with corresponding "
                                  f"shapes and dtypes. Expected {_jax_type(pa)} (tangent type of "
                                  f"{_jax_type(pa)}) but got {_jax_type(ta)}.")
            tans.append(tan)
        return p_flat, tans


class _BatchedJvp(calls.FunctionName):
    """A JVP rule vmapped along the batch dims of the call it belongs to (all outputs at 0)."""

    def __init__(self, inner, dims, size):
        super().__init__(inner.name)
        self.inner, self.dims, self.size, self.num_consts = inner, list(dims), size, inner.num_consts

    def __call__(self, primals, tangents):
        n = len(primals)
        fl = [is_float(get_aval(p).dtype) for p in primals]
        tdims = [d if f else None for d, f in zip(self.dims, fl)]
        ts = [t if f else calls.np_float0_zeros(calls.example_aval(p, d).shape)
              for t, p, d, f in zip(tangents, primals, self.dims, fl)]
        kinds = []

        def fun(*xs):
            po, to = self.inner(list(xs[:n]), list(xs[n:]))
            kinds[:] = [t is not None for t in to]
            return list(po) + [t for t in to if t is not None]
        outs = calls.run_batched(fun, list(primals) + ts, self.dims + tdims, self.size)
        po, rest = outs[:len(kinds)], iter(outs[len(kinds):])
        return po, [next(rest) if k else None for k in kinds]


def _custom_jvp_call_jvp(primals, tangents, *, name, call_jaxpr, jvp, symbolic_zeros):
    n = jvp.num_consts
    if any(not isinstance(t, Zero) for t in tangents[:n]):
        raise _closure_error("custom_jvp", name)
    po, to = jvp(list(primals), [instantiate(t) for t in tangents])
    return po, [Zero(tangent_aval(get_aval(p))) if t is None else t for p, t in zip(po, to)]


def _custom_jvp_call_batch(vals, dims, *, name, call_jaxpr, jvp, symbolic_zeros):
    size = calls.batch_size(vals, dims)
    batched = calls.batch_jaxpr(call_jaxpr, vals, dims, size)
    outs = custom_jvp_call_p.bind(*vals, name=name, call_jaxpr=batched, jvp=_BatchedJvp(jvp, dims, size),
                                  symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp
batching_rules[custom_jvp_call_p] = _custom_jvp_call_batch


# ---------------------------------------------------------------------------------------
# custom_vjp

custom_vjp_call_p = Primitive("custom_vjp_call")
custom_vjp_call_p.multiple_results = True
shape_rules[custom_vjp_call_p] = calls.call_shape_rule("call_jaxpr")
impl_rules[custom_vjp_call_p] = calls.call_impl("call_jaxpr")
calls.register_call_lowering(custom_vjp_call_p, "call_jaxpr")

#: the tangent outputs of a custom_vjp function while linearizing: linear in its tangent
#: operands, transposed by the user's ``bwd``. It only ever lives in a linear jaxpr that is
#: transposed, or in the tangent body of a loop or branch (which reverse mode transposes), so
#: it is kept out of the registry the coverage table enumerates; evaluating or lowering it (a
#: forward-mode derivative) raises JAX's error.
custom_lin_p = Primitive("custom_lin")
custom_lin_p.multiple_results = True
del registry["custom_lin"]
shape_rules[custom_lin_p] = lambda *avals, num_res, bwd, out_avals: list(out_avals)

_FORWARD_MODE = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


def _custom_lin_impl(*args, **params):
    raise _type_error(_FORWARD_MODE)


impl_rules[custom_lin_p] = _custom_lin_impl


def _register_custom_lin_lowering():
    from minixla.hlo.lowering import lowering_rules
    lowering_rules[custom_lin_p] = lambda *args, **params: _custom_lin_impl()


_register_custom_lin_lowering()


class custom_vjp:
    """A function with a user-defined VJP (``jax.custom_vjp``)::

        @minixla.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, ct): return (ct_x, ct_y)   # a tuple: one entry per argument
        f.defvjp(f_fwd, f_bwd)

    ``grad``/``vjp``/``jacrev`` run ``f_fwd`` in the forward pass and ``f_bwd`` in the backward
    pass; ``vmap`` batches ``f``, ``f_fwd`` and ``f_bwd``. A ``None`` entry of ``bwd``'s tuple is a
    zero cotangent. ``nondiff_argnums``: those arguments are passed to ``fwd`` in place and first
    to ``bwd`` (``f_bwd(*nondiff, residuals, ct)``), which returns cotangents of the others only.

    Raises (JAX's messages, plus the rule's definition line and the user's line):
    ``AttributeError`` before ``defvjp``; ``TypeError`` for forward mode (``jvp``), a ``fwd``
    that does not return a pair, or a ``bwd`` output whose structure is not the arguments'
    tuple; ``ValueError`` for a ``bwd`` cotangent whose shape does not match its argument.
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        """Set ``fwd(*args) -> (out, residuals)`` and ``bwd(*nondiff, residuals, ct) -> tuple``."""
        if symbolic_zeros:
            raise errors.UnsupportedError("custom_vjp.defvjp(symbolic_zeros=True) is not supported by minixla")
        self.fwd, self.bwd = fwd, bwd

    def __get__(self, instance, owner=None):
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        name = calls.fun_name(self.fun)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        t = _Traced(self.fun, args, kwargs, self.nondiff_argnums)
        if not calls.tracing_active(t.flat):
            return self.fun(*t.args)
        closed, consts, out_tree = t.trace()
        fwd = _FwdRule(self, t, len(consts), out_tree)
        bwd = _BwdRule(self, t, len(consts), out_tree)
        outs = custom_vjp_call_p.bind(*consts, *t.flat, name=name, bwd=bwd, call_jaxpr=closed, fwd=fwd,
                                      symbolic_zeros=False)
        return tree_util.tree_unflatten(out_tree, list(outs))


class _FwdRule(calls.FunctionName):
    """``primals (consts first) -> (flat outputs, flat residuals, residual treedef)``."""

    def __init__(self, cv, traced, num_consts, out_tree):
        super().__init__(calls.fun_name(cv.fwd))
        self.cv, self.traced, self.num_consts, self.out_tree = cv, traced, num_consts, out_tree

    def __call__(self, primals):
        t = self.traced
        dyn = tree_util.tree_unflatten(t.in_tree, list(primals[self.num_consts:]))
        res = self.cv.fwd(*t.full_args(dyn))
        fname, name = calls.fun_name(self.cv.fun), self.name
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise _type_error(
                f"Custom VJP fwd rule {name} for function {fname} must produce a pair (list or tuple of length "
                "two) where the first element represents the primal output (equal to those of the "
                f"custom_vjp-decorated function {fname}) and the second element represents residuals (i.e. "
                "values stored from the forward pass for use on the backward pass), but instead of a pair the "
                f"fwd rule {name} produced {res}.\n  fwd rule defined at {calls.definition_site(self.cv.fwd)}")
        out_flat, out_tree = tree_util.tree_flatten(res[0])
        if out_tree != self.out_tree:
            raise _type_error(
                f"Custom VJP fwd rule {name} for function {fname} must produce a pair (list or tuple of length "
                "two) where the first element represents the primal output (equal in value to the output of the "
                f"custom_vjp-decorated function {fname}, and in particular of the same container/pytree "
                f"structure), but instead the fwd rule output's first element had container/pytree structure:\n"
                f"    {out_tree}\nwhile the custom_vjp-decorated function {fname} had output container/pytree "
                f"structure:\n    {self.out_tree}.\n  fwd rule defined at {calls.definition_site(self.cv.fwd)}")
        res_flat, res_tree = tree_util.tree_flatten(res[1])
        return out_flat, res_flat, res_tree


class _BwdRule(calls.FunctionName):
    """``(flat residuals, residual treedef, flat output cotangents) -> one cotangent per
    operand (consts first)``: an array, or ``Zero``."""

    def __init__(self, cv, traced, num_consts, out_tree):
        super().__init__(calls.fun_name(cv.bwd))
        self.cv, self.traced, self.num_consts, self.out_tree = cv, traced, num_consts, out_tree

    def __call__(self, res_flat, res_tree, cts, operand_avals):
        t, n = self.traced, self.num_consts
        # (a weak scalar -- grad's seed, a weak literal residual -- as an array the rule can use)
        res_flat, cts = ([weak_array(x.value) if isinstance(x, WeakScalar) else x for x in xs] for xs in (res_flat, cts))
        out = self.cv.bwd(*t.nondiff, tree_util.tree_unflatten(res_tree, list(res_flat)),
                          tree_util.tree_unflatten(self.out_tree, list(cts)))
        site = f"\n  bwd rule {self.name} defined at {calls.definition_site(self.cv.bwd)}"
        args = tree_util.tree_unflatten(t.in_tree, list(range(len(operand_avals) - n)))

        def structure_error(got):
            return _type_error(
                "Custom VJP bwd rule must produce an output with the same container (pytree) structure as the "
                "args tuple of the primal function, and in particular must produce a tuple of length equal to "
                f"the number of arguments to the primal function, but got bwd output structure {got} for "
                f"primal input structure {tree_util.tree_structure(args)}.{site}")
        if not isinstance(out, tuple) or len(out) != len(args):
            raise structure_error(tree_util.tree_structure(out))
        result = [Zero(tangent_aval(a)) for a in operand_avals[:n]]
        for k, (ct, arg) in enumerate(zip(out, args)):
            slots = tree_util.tree_leaves(arg)
            if ct is None:
                result += [Zero(tangent_aval(operand_avals[n + i])) for i in slots]
                continue
            paths_cts, _ = tree_util.tree_flatten_with_path(ct, is_leaf=lambda x: x is None)
            if tree_util.tree_structure(ct, is_leaf=lambda x: x is None) != tree_util.tree_structure(arg):
                raise structure_error(tree_util.tree_structure(out))
            for (path, c), i in zip(paths_cts, slots):
                want = tangent_aval(operand_avals[n + i])
                if c is None or want.dtype == float0:
                    result.append(Zero(want))
                    continue
                got = get_aval(c)
                if got.shape != want.shape:
                    where = f"output[{k}]{tree_util.keystr(path)}"
                    raise errors.TransformValueError(
                        "Custom VJP bwd rule must produce an output with the same type as the args tuple of the "
                        f"primal function, but at {where} the bwd rule produced an output of type "
                        f"{_jax_type(got)} corresponding to an input of type {_jax_type(want)}, so the shapes "
                        f"do not match{site}\n  at: {errors.user_source_line()}")
                if got.dtype != want.dtype:  # JAX casts a cotangent of another float width
                    c = L.convert_element_type(c, want.dtype)
                result.append(c)
        return result


class _BatchedFwd(calls.FunctionName):
    def __init__(self, inner, dims, size):
        super().__init__(inner.name)
        self.inner, self.dims, self.size, self.num_consts = inner, list(dims), size, inner.num_consts

    def __call__(self, primals):
        info = {}

        def fun(*xs):
            outs, res, res_tree = self.inner(list(xs))
            info.update(n_out=len(outs), res_tree=res_tree)
            return list(outs) + list(res)
        flat = calls.run_batched(fun, list(primals), self.dims, self.size)
        return flat[:info["n_out"]], flat[info["n_out"]:], info["res_tree"]


class _BatchedBwd(calls.FunctionName):
    """The bwd rule vmapped: residuals and cotangents batched along 0; an operand that was not
    batched gets its per-example cotangents summed (it was broadcast to every example)."""

    def __init__(self, inner, dims, size):
        super().__init__(inner.name)
        self.inner, self.dims, self.size, self.num_consts = inner, list(dims), size, inner.num_consts

    def __call__(self, res_flat, res_tree, cts, operand_avals):
        ex_avals = [calls.example_aval_of(a, d) for a, d in zip(operand_avals, self.dims)]
        zero = []
        nres = len(res_flat)

        def fun(*xs):
            out = self.inner(list(xs[:nres]), res_tree, list(xs[nres:]), ex_avals)
            zero[:] = [isinstance(c, Zero) for c in out]
            return [c for c in out if not isinstance(c, Zero)]
        flat = iter(calls.run_batched(fun, list(res_flat) + list(cts), [0] * (nres + len(cts)), self.size))
        result = []
        for z, a, d in zip(zero, operand_avals, self.dims):
            if z:
                result.append(Zero(tangent_aval(a)))
                continue
            c = next(flat)
            result.append(L.reduce_sum(c, (0,)) if d is None else moveaxis(c, 0, d))
        return result


class _BwdCall(calls.FunctionName):
    """What a ``custom_lin`` equation transposes with: the bwd rule, the residuals' treedef and
    which operands of the call have a (non-zero) tangent."""

    def __init__(self, bwd, res_tree, nonzero, operand_avals, out_avals):
        super().__init__(bwd.name)
        self.bwd, self.res_tree, self.nonzero, self.operand_avals = bwd, res_tree, nonzero, operand_avals
        self.out_avals = out_avals  # tangent avals of every output of the call


def _custom_vjp_call_jvp(primals, tangents, *, name, bwd, call_jaxpr, fwd, symbolic_zeros):
    n = fwd.num_consts
    if any(not isinstance(t, Zero) for t in tangents[:n]):
        raise _closure_error("custom_vjp", name)
    nonzero = [not isinstance(t, Zero) for t in tangents]
    lin = [t for t in tangents if not isinstance(t, Zero)]
    trace = find_trace(lin)
    # (in a loop or branch body the JVP rule is tracing, whether it ends in reverse or forward
    #  mode is not known yet: custom_lin is staged, transposed by bwd or raising when evaluated)
    if not isinstance(trace, LinearJaxprTrace) and not getattr(trace, "stage_everything", False):
        raise _type_error(_FORWARD_MODE)
    outs, res, res_tree = fwd(list(primals))
    out_avals = [tangent_aval(get_aval(o)) for o in outs]
    float_out = [a.dtype != float0 for a in out_avals]
    call = _BwdCall(bwd, res_tree, nonzero, [get_aval(p) for p in primals], out_avals)
    tans = iter(custom_lin_p.bind(*res, *lin, num_res=len(res), bwd=call,
                                  out_avals=tuple(a for a, f in zip(out_avals, float_out) if f)))
    return outs, [next(tans) if f else Zero(a) for a, f in zip(out_avals, float_out)]


def _custom_lin_t(cts, *args, num_res, bwd, out_avals):
    """The transpose of ``custom_lin``: the user's bwd rule on the residuals and the output
    cotangents (float0 zeros for non-float outputs); cotangents go to the linear operands."""
    it = iter(instantiate(c) for c in cts)
    out_cts = [next(it) if a.dtype != float0 else calls.zeros_of(a) for a in bwd.out_avals]
    in_cts = bwd.bwd(list(args[:num_res]), bwd.res_tree, out_cts, bwd.operand_avals)
    return [None] * num_res + [c for c, nz in zip(in_cts, bwd.nonzero) if nz]


def _custom_vjp_call_batch(vals, dims, *, name, bwd, call_jaxpr, fwd, symbolic_zeros):
    size = calls.batch_size(vals, dims)
    batched = calls.batch_jaxpr(call_jaxpr, vals, dims, size)
    outs = custom_vjp_call_p.bind(*vals, name=name, bwd=_BatchedBwd(bwd, dims, size), call_jaxpr=batched,
                                  fwd=_BatchedFwd(fwd, dims, size), symbolic_zeros=symbolic_zeros)
    return outs, [0] * len(outs)


jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp
transpose_rules[custom_lin_p] = _custom_lin_t
batching_rules[custom_lin_p] = lambda *args, **params: _custom_lin_impl()  # (vmap of a forward-mode jvp)
batching_rules[custom_vjp_call_p] = _custom_vjp_call_batch
