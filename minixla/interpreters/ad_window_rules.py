"""JVP and transpose rules of the window reductions (pooling): ``reduce_window_sum`` is linear
(its transpose spreads each cotangent over the window it came from); ``reduce_window_max`` and
``reduce_window_min`` give each output's tangent from the one window element they chose.

JAX computes the chooser's tangent with ``select_and_gather_add`` (a linear primitive,
``minixla.lax.windows_select``) and the transpose of that with ``select_and_scatter_add``
(XLA's ``SelectAndScatter``); so does minixla. The two selections differ in two corners (a
window whose elements all equal the identity; a NaN followed only by padding): ``jax.jvp``
gives the gather's answer there and ``jax.grad`` the scatter's, and minixla's ``jvp`` and
``grad`` give the same ones. The scatter is the transpose of the scatter selection written as
a gather (``windows_select.scatter_selection``: pad/slice/select), so it transposes back and
batches with no rule of its own.
"""
from __future__ import annotations

from minixla import lax as L
from minixla.core.avals import get_aval
from minixla.interpreters.ad import Zero, is_undefined, jvp_rules, tangent_aval, transpose_rules
from minixla.interpreters.ad_rules import _const, _shape, deflinear
from minixla.lax.windows_select import scatter_selection, taps

def _reduce_window_sum_t(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    # JAX's rule: each input element receives the cotangents of the windows that cover it -- a
    # window sum over the cotangent, strided apart by interior padding (stride - 1) and padded
    # so the window slides over every position of the base-dilated operand (the conv VJP's lhs
    # padding); striding that sum by ``base_dilation`` steps over the holes, back to the operand.
    in_shape, ct_shape = x.aval.shape, _shape(ct)
    config = []
    for n, w, s, (lo, _hi), b, wd, m in zip(in_shape, window_dimensions, window_strides, padding,
                                            base_dilation, window_dilation, ct_shape):
        span = (w - 1) * wd + 1
        before = span - lo - 1
        after = ((n - 1) * b + 1 if n else 0) + span - 1 - ((m - 1) * s + 1 if m else 0) - before
        config.append((before, after, s - 1))
    padded = L.pad_p.bind(ct, _const(ct, 0), padding_config=tuple(config))
    ones = (1,) * len(in_shape)
    return [L.reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions,
                                       window_strides=tuple(base_dilation),
                                       padding=((0, 0),) * len(in_shape), base_dilation=ones,
                                       window_dilation=window_dilation)]


deflinear(L.reduce_window_sum_p, _reduce_window_sum_t)


def _taps(x, fill, **window):
    """For each tap of the window (row-major), the operand element it reads for every output
    position (``minixla.lax.windows_select.taps``)."""
    return taps(x, fill, **window)


def _window_chooser_jvp(prim, select_prim):
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        if isinstance(t, Zero):
            return ans, Zero(tangent_aval(get_aval(ans)))
        return ans, L.select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)
    jvp_rules[prim] = rule


_window_chooser_jvp(L.reduce_window_max_p, "ge")
_window_chooser_jvp(L.reduce_window_min_p, "le")


def _select_and_gather_add_jvp(primals, tangents, **params):
    (t, x), (dt, _dx) = primals, tangents  # (the selection is piecewise constant in the operand)
    ans = L.select_and_gather_add_p.bind(t, x, **params)
    if isinstance(dt, Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.select_and_gather_add_p.bind(dt, x, **params)


def _select_and_gather_add_t(ct, t, x, *, select_prim, **window):
    # JAX's rule: the transpose is XLA's SelectAndScatter selection (not the gather's own).
    # (JAX raises NotImplementedError with window dilation; the taps handle it, so minixla's
    # grad of a dilated max pool works, tests/test_pooling_grad.py checks it against jacfwd.)
    if is_undefined(x):
        raise ValueError("select_and_gather_add: transpose with respect to the operand (not linear)")
    if isinstance(ct, Zero):
        return [Zero(t.aval), None]
    from minixla.interpreters.api import linear_transpose
    zeros = L.full(tuple(t.aval.shape), 0, t.aval.dtype)
    scatter = linear_transpose(lambda tt: scatter_selection(tt, x, select_prim=select_prim, **window), zeros)
    return [scatter(ct)[0], None]


jvp_rules[L.select_and_gather_add_p] = _select_and_gather_add_jvp
transpose_rules[L.select_and_gather_add_p] = _select_and_gather_add_t
