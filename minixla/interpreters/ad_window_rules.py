"""JVP and transpose rules of the window reductions (pooling): ``reduce_window_sum`` is linear
(its transpose spreads each cotangent over the window it came from); ``reduce_window_max`` and
``reduce_window_min`` give each output's tangent from the one window element they chose.

JAX computes the chooser's tangent with ``select_and_gather_add`` (a reduce-window over
(value, tangent) pairs) and its cotangent with ``select_and_scatter_add`` (XLA's
``SelectAndScatter``). minixla builds the selection from primitives it has: the window's taps as
strided slices of the operand padded with the reducer's identity (one array per tap, shaped
like the output), then a running select over the taps in row-major window order with XLA's
``SelectAndScatter`` rule, select ``ge`` (``le`` for min): the first tap is selected, and a later
tap replaces the selection unless ``selected >= tap``. So ties go to the first tap, a NaN is
replaced by the next tap (``NaN >= x`` is false), and a padding tap is a candidate holding the
identity (-inf for max): in a window ``[NaN, padding]`` or ``[padding, -inf]`` the padding is
selected and the cotangent dropped -- ``jax.grad`` of max pooling, bit for bit. Everything on the
tangent is pad/slice/select, so the rule transposes (``grad``) and batches with no new rule.

JAX's forward-mode rule differs from the transpose of its reverse-mode one in two corners, which
one linear map cannot both reproduce: ``select_and_gather_add`` starts from the identity and
skips padding, so ``jax.jvp`` gives 0 for a window whose elements all equal the identity (where
``jax.grad`` credits the first) and keeps a NaN's tangent when only padding follows it (where
``jax.grad`` drops it). minixla's ``jvp`` follows the reverse-mode selection there.
The cost is one slice per tap: fine for pooling windows (2x2, 3x3), linear in the window size.
"""
from __future__ import annotations

import itertools

from minixla import lax as L
from minixla.core.avals import get_aval
from minixla.interpreters.ad import Zero, jvp_rules, tangent_aval
from minixla.interpreters.ad_rules import _const, _shape, deflinear
from minixla.lax.windows import identity, window_output_shape

def _reduce_window_sum_t(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    # JAX's rule: each input element receives the cotangents of the windows that cover it -- a
    # window sum over the cotangent, strided apart by interior padding (stride - 1) and padded
    # so the window slides over every position (the conv VJP's lhs padding).
    if any(b != 1 for b in base_dilation):
        raise NotImplementedError("transpose of reduce_window_sum with base_dilation (as in JAX)")
    in_shape, ct_shape = x.aval.shape, _shape(ct)
    config = []
    for n, w, s, (lo, _hi), wd, m in zip(in_shape, window_dimensions, window_strides, padding,
                                         window_dilation, ct_shape):
        span = (w - 1) * wd + 1
        before = span - lo - 1
        after = n + span - 1 - ((m - 1) * s + 1 if m else 0) - before
        config.append((before, after, s - 1))
    padded = L.pad_p.bind(ct, _const(ct, 0), padding_config=tuple(config))
    ones = (1,) * len(in_shape)
    return [L.reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions, window_strides=ones,
                                       padding=((0, 0),) * len(in_shape), base_dilation=ones,
                                       window_dilation=window_dilation)]


deflinear(L.reduce_window_sum_p, _reduce_window_sum_t)


def _taps(x, fill, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """For each tap of the window (row-major), the operand element it reads for every output
    position: a list of arrays shaped like the output. ``fill`` fills padding and holes."""
    config = tuple((lo, hi, bd - 1) for (lo, hi), bd in zip(padding, base_dilation))
    padded = L.pad_p.bind(x, _const(x, fill), padding_config=config)
    out = window_output_shape(_shape(x), window_dimensions, window_strides, padding,
                              base_dilation, window_dilation)
    taps = []
    for offsets in itertools.product(*[range(w) for w in window_dimensions]):
        start = tuple(o * wd for o, wd in zip(offsets, window_dilation))
        limit = tuple(s + (m - 1) * st + 1 for s, m, st in zip(start, out, window_strides))
        taps.append(L.slice_p.bind(padded, start_indices=start, limit_indices=limit,
                                   strides=tuple(window_strides)))
    return taps


def _window_chooser_jvp(prim, keep):
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, **params)
        if isinstance(t, Zero):
            return ans, Zero(tangent_aval(get_aval(ans)))
        if 0 in _shape(ans):
            return ans, L.full(_shape(ans), 0, get_aval(ans).dtype)
        xs = _taps(x, identity(prim.name, get_aval(x).dtype), **params)
        ts = _taps(t, 0, **params)
        best_x, best_t = xs[0], ts[0]
        for xk, tk in zip(xs[1:], ts[1:]):
            take = L.bitwise_not(keep(best_x, xk))  # (SelectAndScatter: replace unless select(best, x))
            best_x = L.select(take, xk, best_x)
            best_t = L.select(take, tk, best_t)
        return ans, best_t
    jvp_rules[prim] = rule


_window_chooser_jvp(L.reduce_window_max_p, L.ge)
_window_chooser_jvp(L.reduce_window_min_p, L.le)
