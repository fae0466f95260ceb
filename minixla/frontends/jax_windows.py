"""Import rules for the window primitives of JAX's pooling derivatives and for JAX's general
``reduce`` / ``reduce_window`` (a reduction written as a body jaxpr).

``jax.jvp`` of max (min) pooling binds ``select_and_gather_add(tangents, operand)``: each
output's tangent is the tangent of the element its window selected (``select_prim`` ``ge``
for max, ``le`` for min). ``jax.grad`` of it binds its transpose,
``select_and_scatter_add(source, operand)``: each cotangent added to the element its window
selected. The gather imports as minixla's own ``select_and_gather_add`` primitive
(``minixla.lax.windows_select``: it differentiates, transposes and batches as JAX's); the
scatter imports as the transpose of XLA's ``SelectAndScatter`` selection written as a gather
over the window's taps (``minixla.lax.windows_select.scatter_selection``), minixla's ``vjp``
of it: pad/slice/select on every backend.

``reduce`` and ``reduce_window`` carry their reduction as a jaxpr (``jax.lax.reduce`` with a
Python function). A body that is one monoid -- ``add``, ``mul``, ``max``, ``min``, ``and``,
``or``, ``xor`` of its two arguments -- with that monoid's identity as the init value imports as
minixla's ``reduce_sum``/``reduce_max``/... (``reduce_window_sum``/``max``/``min``). Any other
body -- another init value, ``xor``, a variadic ``(value, index)`` argmax pair -- imports as
XLA:CPU computes it: a left fold from the init values in row-major order (a ``scan`` over the
reduced elements for ``reduce``, the window's taps for ``reduce_window``, padded with the init
value), the body jaxpr applied elementwise by minixla's ``vmap`` of its interpretation. A
``reduce_window`` with a traced init value and such a body is an
``UnsupportedJaxPrimitiveError``.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.frontends.jax_importer import UnsupportedJaxPrimitiveError, _norm, import_rules
from minixla.interpreters.ad_window_rules import _taps
from minixla.lax.windows_select import scatter_selection

_SELECT = {"ge": (lax.ge, -np.inf), "le": (lax.le, np.inf)}


def _select(name, select_prim):
    sel = _SELECT.get(getattr(select_prim, "name", str(select_prim)))
    if sel is None:
        raise UnsupportedJaxPrimitiveError(
            f"jax primitive '{name}' with select_prim={select_prim}: minixla imports the "
            "selections of max and min pooling (ge, le)")
    return sel


def _window_params(window_dimensions, window_strides, padding, base_dilation=None, window_dilation=None):
    nd = len(window_dimensions)
    return dict(window_dimensions=_norm(window_dimensions), window_strides=_norm(window_strides),
                padding=_norm(padding), base_dilation=_norm(base_dilation) if base_dilation else (1,) * nd,
                window_dilation=_norm(window_dilation) if window_dilation else (1,) * nd)


def _select_and_gather_add(tangents, operand, *, select_prim, window_dimensions, window_strides,
                           padding, base_dilation, window_dilation):
    # minixla's own primitive (minixla.lax.windows_select): it differentiates and batches as JAX's
    _select("select_and_gather_add", select_prim)
    params = _window_params(window_dimensions, window_strides, padding, base_dilation, window_dilation)
    return lax.select_and_gather_add_p.bind(tangents, operand, select_prim=getattr(select_prim, "name", str(select_prim)), **params)


def _select_and_scatter_add(source, operand, *, select_prim, window_dimensions, window_strides,
                            padding):
    """The transpose of ``scatter_selection`` in its tangents (it is linear in them): minixla's
    ``vjp`` turns its slices into pads and its selects into selects of the cotangent."""
    from minixla.interpreters.api import vjp
    params = _window_params(window_dimensions, window_strides, padding)
    zeros = lax.full(tuple(get_aval(operand).shape), 0, get_aval(source).dtype)
    _select("select_and_scatter_add", select_prim)
    _, pullback = vjp(lambda t: scatter_selection(t, operand, select_prim=getattr(select_prim, "name", str(select_prim)), **params), zeros)
    return pullback(source)[0]


import_rules.update({"select_and_gather_add": _select_and_gather_add,
                     "select_and_scatter_add": _select_and_scatter_add})


# ---------------------------------------------------------------------------------------
# reduce / reduce_window with a body jaxpr.

_MONOIDS = {"add": lax.add, "mul": lax.mul, "max": lax.max, "min": lax.min, "and": lax.bitwise_and,
            "or": lax.bitwise_or}


def _monoid_of(jaxpr):
    """The minixla function of a body ``(a, b) -> op(a, b)`` of one monoid op, else None."""
    if len(jaxpr.invars) != 2 or len(jaxpr.eqns) != 1 or len(jaxpr.outvars) != 1:
        return None
    eqn = jaxpr.eqns[0]
    if (eqn.primitive.name not in _MONOIDS or eqn.outvars[0] is not jaxpr.outvars[0]
            or set(map(id, eqn.invars)) != set(map(id, jaxpr.invars))):
        return None
    return _MONOIDS[eqn.primitive.name]


def _concrete(x):
    if isinstance(x, (np.ndarray, np.generic, int, float, bool)):
        return x
    value = getattr(x, "value", None)  # (a WeakScalar)
    return value if value is not None and not hasattr(x, "aval") else None


def _elementwise_body(closed, consts=()):
    """JAX's scalar body jaxpr applied elementwise to arrays of one shape: minixla's ``vmap`` of
    its interpretation over the flattened elements (the body's ops are scalar ops)."""
    from minixla.frontends.jax_importer import _where_stack, eval_jax_jaxpr
    from minixla.interpreters.api import vmap
    jaxpr, jconsts = (closed.jaxpr, closed.consts) if hasattr(closed, "consts") and hasattr(closed, "jaxpr") \
        else (closed, tuple(consts))
    stack = _where_stack()
    where = stack[-1] if stack else None

    def scalar(*xs):
        return eval_jax_jaxpr(jaxpr, jconsts, list(xs), where)

    def apply(*arrays):
        shape = tuple(get_aval(arrays[0]).shape)
        n = int(np.prod(shape, dtype=np.int64))
        flat = [lax.reshape(a, (n,)) for a in arrays]
        outs = vmap(lambda *xs: list(scalar(*xs)))(*flat) if n else \
            [lax.full((0,), 0, get_aval(a).dtype) for a in arrays[:len(arrays) // 2]]
        return [lax.reshape(o, shape) for o in outs]
    return apply


def _fold_reduce(apply, xs, inits, dimensions):
    """Reduce ``xs`` over ``dimensions`` as XLA:CPU does: a left fold from the init values over
    the reduced elements in row-major order (a ``scan`` over them, the body applied elementwise
    to the kept positions), so a body that is not associative for every value -- an argmax
    pair meeting a NaN -- gives JAX's result."""
    shape = tuple(get_aval(xs[0]).shape)
    keep = [d for d in range(len(shape)) if d not in dimensions]
    out_shape = tuple(shape[d] for d in keep)
    n = int(np.prod([shape[d] for d in dimensions], dtype=np.int64))
    acc = [lax.broadcast_in_dim(i, out_shape, ()) if out_shape else lax.reshape(i, ()) for i in inits]
    if n == 0:
        return acc
    perm = tuple(dimensions) + tuple(keep)
    xs = [lax.reshape(lax.transpose(x, perm), (n,) + out_shape) for x in xs]

    def step(carry, x):
        return list(_scalar_or_array(apply, list(carry) + list(x))), None
    out, _ = lax.scan(step, acc, xs)
    return list(out)


def _reduce(*args, computation=None, jaxpr, dimensions):
    k = len(args) // 2
    xs, inits = list(args[:k]), list(args[k:])
    dims = tuple(int(d) for d in dimensions)
    body = jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr
    fn = _monoid_of(body) if k == 1 else None
    if fn is not None and _concrete(inits[0]) is not None:
        try:
            return [lax.reduce(xs[0], np.asarray(_concrete(inits[0]), get_aval(xs[0]).dtype), fn, dims)]
        except NotImplementedError:
            pass  # (another init value: the general path)
    apply = _elementwise_body(jaxpr)
    return _fold_reduce(apply, xs, inits, dims)


def _scalar_or_array(apply, arrays):
    if not get_aval(arrays[0]).shape:  # (a rank-0 pair: one application of the body)
        return [lax.reshape(o, ()) for o in apply(*[lax.reshape(a, (1,)) for a in arrays])]
    return apply(*arrays)


def _reduce_window(*args, jaxpr, consts, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    k = len(args) // 2
    xs, inits = list(args[:k]), list(args[k:])
    params = _window_params(window_dimensions, window_strides, padding, base_dilation, window_dilation)
    fn = _monoid_of(jaxpr) if k == 1 and not consts else None
    if fn is not None and fn in (lax.add, lax.max, lax.min) and _concrete(inits[0]) is not None:
        try:
            return [lax.reduce_window(xs[0], _concrete(inits[0]), fn, params["window_dimensions"],
                                      params["window_strides"], params["padding"],
                                      params["base_dilation"], params["window_dilation"])]
        except NotImplementedError:
            pass
    fills = [_concrete(i) for i in inits]
    if any(f is None for f in fills):
        raise UnsupportedJaxPrimitiveError("jax primitive 'reduce_window' with a traced init value "
                                           "and a general body: minixla pads windows with constants")
    # XLA pads with the init value and folds each window from it, in row-major window order
    taps = [_taps(x, np.asarray(f, get_aval(x).dtype)[()], **params) for x, f in zip(xs, fills)]
    out_shape = tuple(get_aval(taps[0][0]).shape)
    apply = _elementwise_body(jaxpr, consts)
    acc = [lax.full(out_shape, np.asarray(f, get_aval(x).dtype)[()], get_aval(x).dtype)
           for x, f in zip(xs, fills)]
    if 0 in out_shape:
        return acc
    for j in range(len(taps[0])):
        acc = _scalar_or_array(apply, acc + [t[j] for t in taps])
    return acc


import_rules.update({"reduce": _reduce, "reduce_window": _reduce_window})
