"""The tangent of max/min pooling: ``select_and_gather_add`` (JAX's ``select_and_gather_add_p``).

``select_and_gather_add(tangents, operand, select_prim, window...)`` is linear in ``tangents``:
each output is the tangent of the element its window of ``operand`` selects. It is what
``jax.jvp`` of ``reduce_window_max`` (``select_prim="ge"``) and ``reduce_window_min`` (``"le"``)
computes, and its transpose -- ``select_and_scatter_add``, XLA's ``SelectAndScatter`` -- is what
``jax.grad`` computes (``minixla.interpreters.ad_window_rules``).

The two selections differ in two corners, and JAX keeps both, so minixla does too:

- the gather (this primitive; JAX lowers it to a reduce-window over ``(value, tangent)`` pairs)
  starts from ``(identity, 0)`` and folds only the operand's own elements in XLA:CPU's window
  order (``fold_order``: row-major, but for a padded dim whose window is 2 wide), keeping
  the accumulated pair when ``select_prim(acc, x)``: a window whose elements all equal the
  identity (all -inf for max) gives 0, and a NaN followed only by padding keeps its tangent;
- the scatter (its transpose) selects the first tap of the window padded with the identity, a
  later tap replacing it unless ``select_prim(selected, tap)``: padding is a candidate, so the
  first -inf gets the cotangent and ``[NaN, padding]`` drops it.

Both are written with primitives minixla has: the window's taps as strided slices of the
operand padded with a fill value (``taps``), one array per tap shaped like the output, and a
running select over them. The lowering inlines that expansion (pad, slice, compare, select), so
the evaluator, the LLVM backend and the hand-off see ordinary HLO; the cost is one slice per
tap, linear in the window size (2x2, 3x3 pooling windows).
"""
from __future__ import annotations

import itertools

import numpy as np

from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.lax import elementwise as ew
from minixla.lax import structural as st
from minixla.lax.windows import identity, window_output_shape

#: select_prim name -> (the comparison, the window reduction it chooses like)
SELECT = {"ge": (ew.ge, "reduce_window_max"), "le": (ew.le, "reduce_window_min")}


def _const(x, v):
    return np.asarray(v, get_aval(x).dtype)[()]


def taps(x, fill, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """For each tap of the window (row-major), the operand element it reads for every output
    position: a list of arrays shaped like the output. ``fill`` fills padding and holes."""
    config = tuple((lo, hi, bd - 1) for (lo, hi), bd in zip(padding, base_dilation))
    padded = st.pad_p.bind(x, _const(x, fill), padding_config=config)
    out = window_output_shape(get_aval(x).shape, window_dimensions, window_strides, padding,
                              base_dilation, window_dilation)
    result = []
    for offsets in itertools.product(*[range(w) for w in window_dimensions]):
        start = tuple(o * wd for o, wd in zip(offsets, window_dilation))
        limit = tuple(s + (m - 1) * stp + 1 for s, m, stp in zip(start, out, window_strides))
        result.append(st.slice_p.bind(padded, start_indices=start, limit_indices=limit,
                                      strides=tuple(window_strides)))
    return result


def fold_order(window_dimensions, padding):
    """The order in which XLA:CPU folds the window's taps (indices into ``taps``'s row-major
    list), measured against ``jax.jvp`` of max pooling with NaN/-inf/tie data on 1-4-d windows:
    row-major, except that the last padded dim whose window is 2 wide becomes the outermost loop
    (the others stay row-major). Not reproduced: a window 3 wide with only high padding in the
    minor dim (``(3, 3)`` with ``((0, 0), (0, 1))``) matches no loop order; there a NaN tie may
    pick another element than XLA:CPU (eagerly minixla runs JAX's primitive and agrees)."""
    offsets = list(itertools.product(*[range(w) for w in window_dimensions]))
    moved = [d for d, ((lo, hi), w) in enumerate(zip(padding, window_dimensions)) if (lo or hi) and w == 2]
    if not moved:
        return list(range(len(offsets)))
    first = moved[-1]
    return sorted(range(len(offsets)), key=lambda k: (offsets[k][first],) + offsets[k])


def gather_selected(tangents, operand, *, select_prim, **window):
    """``select_and_gather_add`` in lax ops (its lowering): a fold from ``(identity, 0)`` over
    the operand's own elements (padding and dilation holes are skipped, as XLA:CPU's
    reduce-window over pairs skips them), keeping the accumulator when ``select_prim(acc, x)``."""
    cmp, chooser = SELECT[select_prim]
    dtype = get_aval(operand).dtype
    fill = identity(chooser, dtype)
    out_shape = window_output_shape(get_aval(operand).shape, window["window_dimensions"],
                                    window["window_strides"], window["padding"], window["base_dilation"],
                                    window["window_dilation"])
    acc_t = st.full(out_shape, 0, get_aval(tangents).dtype)
    if 0 in out_shape:
        return acc_t
    order = fold_order(window["window_dimensions"], window["padding"])
    xs = taps(operand, fill, **window)
    ts = taps(tangents, 0, **window)
    inside = taps(st.full(tuple(get_aval(operand).shape), True, np.bool_), False, **window)
    acc_x = st.full(out_shape, fill, dtype)
    for k in order:
        xk, tk, ik = xs[k], ts[k], inside[k]
        keep = ew.bitwise_or(cmp(acc_x, xk), ew.bitwise_not(ik))
        acc_x = ew.select(keep, acc_x, xk)
        acc_t = ew.select(keep, acc_t, tk)
    return acc_t


def scatter_selection(tangents, operand, *, select_prim, **window):
    """XLA's ``SelectAndScatter`` selection written as a gather of ``tangents`` (linear in them:
    its transpose is ``select_and_scatter_add``): the first tap of the window padded with the
    identity is selected, a later one replaces it unless ``select_prim(selected, tap)``."""
    cmp, chooser = SELECT[select_prim]
    fill = identity(chooser, get_aval(operand).dtype)
    out_shape = window_output_shape(get_aval(operand).shape, window["window_dimensions"],
                                    window["window_strides"], window["padding"], window["base_dilation"],
                                    window["window_dilation"])
    if 0 in out_shape:
        return st.full(out_shape, 0, get_aval(tangents).dtype)
    xs = taps(operand, fill, **window)
    ts = taps(tangents, 0, **window)
    best_x, best_t = xs[0], ts[0]
    for xk, tk in zip(xs[1:], ts[1:]):
        take = ew.bitwise_not(cmp(best_x, xk))
        best_x = ew.select(take, xk, best_x)
        best_t = ew.select(take, tk, best_t)
    return best_t


def _shape_rule(tangents, operand, *, select_prim, window_dimensions, window_strides, padding,
                base_dilation, window_dilation):
    if select_prim not in SELECT:
        raise errors.UnsupportedError(f"select_and_gather_add: select_prim must be 'ge' or 'le', got "
                                      f"{select_prim!r}")
    if tangents.shape != operand.shape:
        raise errors.ShapeError(f"select_and_gather_add tangents and operand shapes must match, got "
                                f"{tangents.shape} and {operand.shape}.")
    for what, v in [("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("padding", padding), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)]:
        if len(v) != operand.ndim:
            raise errors.ShapeError(f"select_and_gather_add: {what} {tuple(v)} must have one entry per "
                                    f"operand dim ({operand.ndim})")
    return ShapedArray(window_output_shape(operand.shape, window_dimensions, window_strides, padding,
                                           base_dilation, window_dilation), tangents.dtype)


def _impl(tangents, operand, *, select_prim, **window):
    # JAX's own primitive, eagerly: the reference (it has no public jax.lax function)
    import jax
    from jax._src.lax import windowed_reductions as jwr
    prim = jax.lax.ge_p if select_prim == "ge" else jax.lax.le_p
    return np.asarray(jwr._select_and_gather_add(
        tangents, operand, prim, window["window_dimensions"], window["window_strides"], window["padding"],
        window["base_dilation"], window["window_dilation"]))


select_and_gather_add_p = Primitive("select_and_gather_add")
shape_rules[select_and_gather_add_p] = _shape_rule
impl_rules[select_and_gather_add_p] = _impl


def select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                          base_dilation=None, window_dilation=None):
    """The tangent of the element each window of ``operand`` selects (JAX's
    ``_select_and_gather_add``): ``select_prim`` ``"ge"`` for max pooling, ``"le"`` for min
    (``jax.lax.ge_p``/``le_p`` accepted). ``tangents`` has ``operand``'s shape; the result has the
    window reduction's shape and ``tangents``' dtype. ``padding`` is n ``(low, high)`` pairs.
    Raises ShapeError for mismatched shapes or parameters of the wrong length."""
    select_prim = getattr(select_prim, "name", select_prim)
    nd = get_aval(operand).ndim
    ones = (1,) * nd
    return select_and_gather_add_p.bind(
        tangents, operand, select_prim=str(select_prim),
        window_dimensions=tuple(int(d) for d in window_dimensions),
        window_strides=tuple(int(d) for d in window_strides),
        padding=tuple((int(lo), int(hi)) for lo, hi in padding),
        base_dilation=tuple(int(d) for d in base_dilation) if base_dilation is not None else ones,
        window_dilation=tuple(int(d) for d in window_dilation) if window_dilation is not None else ones)


__all__ = ["select_and_gather_add_p"]  # (jax.lax has the primitive, not a public function)
