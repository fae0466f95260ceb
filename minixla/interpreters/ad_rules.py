"""The ``jvp_rules`` and ``transpose_rules`` rows of every differentiable primitive.

Rule families, as in JAX's ``ad.py``: ``defjvp`` (one tangent contribution per argument,
summed), ``deflinear`` (the primitive applied to the tangents, for linear primitives, with a
transpose rule beside it), ``defbilinear`` (``mul``, ``dot_general``, ``conv``: one operand's
tangent times the other's primal) and ``defzero`` (integer/bool results, rounding: zero tangent).
The derivative formulas are JAX's (so ties of ``max``/``reduce_max`` split the gradient, ``abs``
has slope +1 at 0 and ``pow``'s d/dy is 0 at x = 0), written here against ``minixla.lax``.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.interpreters.ad import (Zero, add_tangents, instantiate, is_undefined, jvp_rules,
                                     tangent_aval, transpose_rules, zeros_like_aval)

L = lax


def _const(x, v):
    """The scalar ``v`` in ``x``'s dtype (a rank-0 operand, which every lax binary op accepts)."""
    return np.asarray(v, get_aval(x).dtype)[()]


def _shape(x):
    return get_aval(x).shape


def _bcast(t, shape):
    """``t`` broadcast to ``shape`` when it is a rank-0 value (lax ops allow scalar operands)."""
    return L.broadcast_in_dim_p.bind(t, shape=tuple(shape), broadcast_dimensions=()) \
        if _shape(t) != tuple(shape) else t


def _unbcast(ct, aval):
    """The cotangent of a rank-0 operand that was combined with an array: summed over it."""
    if aval.shape == () and _shape(ct) != ():
        ct = L.reduce_sum_p.bind(ct, axes=tuple(range(len(_shape(ct)))))
    return ct


# ---------------------------------------------------------------------------------------
# Rule families.

def defjvp(prim, *jvps):
    """``jvps[i](g, ans, *primals, **params)``: the tangent contribution of argument i (None:
    not differentiable in it). Contributions are summed."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        shape = _shape(ans)
        out = Zero(tangent_aval(get_aval(ans)))
        for fn, t in zip(jvps, tangents):
            if fn is not None and not isinstance(t, Zero):
                out = add_tangents(out, _bcast(fn(t, ans, *primals, **params), shape))
        return ans, out
    jvp_rules[prim] = rule


def deflinear(prim, transpose):
    """A primitive linear in all its (float) operands: its tangent is itself applied to the tangents."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, prim.bind(*[instantiate(t) for t in tangents], **params)
    jvp_rules[prim] = rule
    transpose_rules[prim] = transpose


def defbilinear(prim, lhs_transpose, rhs_transpose):
    """``prim(x, y)`` linear in each operand: tangent ``prim(tx, y) + prim(x, ty)``."""
    def rule(primals, tangents, **params):
        x, y = primals
        tx, ty = tangents
        ans = prim.bind(x, y, **params)
        out = Zero(tangent_aval(get_aval(ans)))
        if not isinstance(tx, Zero):
            out = add_tangents(out, _bcast(prim.bind(tx, y, **params), _shape(ans)))
        if not isinstance(ty, Zero):
            out = add_tangents(out, _bcast(prim.bind(x, ty, **params), _shape(ans)))
        return ans, out
    jvp_rules[prim] = rule

    def transpose(ct, x, y, **params):
        if is_undefined(x) and is_undefined(y):
            raise ValueError(f"{prim.name}: transpose of a product of two linear values (not linear)")
        if is_undefined(x):
            return [lhs_transpose(ct, x, y, **params), None]
        return [None, rhs_transpose(ct, x, y, **params)]
    transpose_rules[prim] = transpose


def defzero(prim):
    """No tangent: the result is integer/bool, or piecewise constant (floor, sign, round...)."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        outs = ans if prim.multiple_results else [ans]
        zeros = [Zero(tangent_aval(get_aval(o))) for o in outs]
        return ans, (zeros if prim.multiple_results else zeros[0])
    jvp_rules[prim] = rule


# ---------------------------------------------------------------------------------------
# Elementwise.

for _p in (L.sign_p, L.floor_p, L.ceil_p, L.round_p, L.is_finite_p, L.not_p, L.and_p, L.or_p, L.xor_p,
           L.eq_p, L.ne_p, L.lt_p, L.le_p, L.gt_p, L.ge_p, L.shift_left_p, L.shift_right_logical_p,
           L.shift_right_arithmetic_p, L.iota_p, L.argmax_p, L.argmin_p, L.bitcast_convert_type_p,
           L.reduce_and_p, L.reduce_or_p, L.stop_gradient_p):
    defzero(_p)
defzero(L.rng_bit_generator_p)  # (issue 14: integer key and bits)


def _neg_t(ct, x):
    return [L.neg(ct)]


deflinear(L.neg_p, _neg_t)


def _add_t(ct, x, y):
    return [_unbcast(ct, x.aval) if is_undefined(x) else None, _unbcast(ct, y.aval) if is_undefined(y) else None]


def _sub_t(ct, x, y):
    return [_unbcast(ct, x.aval) if is_undefined(x) else None,
            _unbcast(L.neg(ct), y.aval) if is_undefined(y) else None]


defjvp(L.add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
transpose_rules[L.add_p] = _add_t
defjvp(L.add_any_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
transpose_rules[L.add_any_p] = _add_t
defjvp(L.sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: L.neg(g))
transpose_rules[L.sub_p] = _sub_t

defbilinear(L.mul_p, lambda ct, x, y: _unbcast(L.mul(ct, y), x.aval),
            lambda ct, x, y: _unbcast(L.mul(x, ct), y.aval))

defjvp(L.div_p, lambda g, ans, x, y: L.div(g, y),
       lambda g, ans, x, y: L.mul(L.mul(L.neg(g), x), L.integer_pow(y, -2)))


def _div_t(ct, x, y):
    if is_undefined(y):
        raise ValueError("div: transpose with respect to the divisor (not linear)")
    return [_unbcast(L.div(ct, y), x.aval), None]


transpose_rules[L.div_p] = _div_t


def _balanced_eq(x, z, y):
    """1 where ``x == z`` (halved where ``y == z`` too: a tie splits the gradient), else 0."""
    dtype = get_aval(z).dtype
    hit = L.convert_element_type(L.eq(x, z), dtype)
    both = L.add(_const(z, 1), L.convert_element_type(L.eq(y, z), dtype))
    return L.div(hit, both)


defjvp(L.max_p, lambda g, ans, x, y: L.mul(g, _balanced_eq(x, ans, y)),
       lambda g, ans, x, y: L.mul(g, _balanced_eq(y, ans, x)))
defjvp(L.min_p, lambda g, ans, x, y: L.mul(g, _balanced_eq(x, ans, y)),
       lambda g, ans, x, y: L.mul(g, _balanced_eq(y, ans, x)))

defjvp(L.abs_p, lambda g, ans, x: L.select_n(L.ge(x, _const(x, 0)), L.neg(g), g))
defjvp(L.exp_p, lambda g, ans, x: L.mul(g, ans))
defjvp(L.exp2_p, lambda g, ans, x: L.mul(_const(x, np.log(2)), L.mul(g, ans)))
defjvp(L.expm1_p, lambda g, ans, x: L.mul(g, L.add(ans, _const(ans, 1))))
defjvp(L.log_p, lambda g, ans, x: L.div(g, x))
defjvp(L.log1p_p, lambda g, ans, x: L.div(g, L.add(x, _const(x, 1))))
defjvp(L.sqrt_p, lambda g, ans, x: L.mul(g, L.div(_const(x, 0.5), ans)))
defjvp(L.rsqrt_p, lambda g, ans, x: L.mul(g, L.mul(_const(x, -0.5), L.div(ans, x))))
defjvp(L.cbrt_p, lambda g, ans, x: L.mul(g, L.mul(_const(x, 1 / 3), L.integer_pow(ans, -2))))
defjvp(L.tanh_p, lambda g, ans, x: L.mul(L.add(g, L.mul(g, ans)), L.sub(_const(x, 1), ans)))
defjvp(L.logistic_p, lambda g, ans, x: L.mul(g, L.mul(ans, L.sub(_const(ans, 1), ans))))
defjvp(L.sin_p, lambda g, ans, x: L.mul(g, L.cos(x)))
defjvp(L.cos_p, lambda g, ans, x: L.neg(L.mul(g, L.sin(x))))
defjvp(L.asin_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.sub(_const(x, 1), L.mul(x, x)))))
defjvp(L.acos_p, lambda g, ans, x: L.neg(L.mul(g, L.rsqrt(L.sub(_const(x, 1), L.mul(x, x))))))
defjvp(L.atan_p, lambda g, ans, x: L.div(g, L.add(_const(x, 1), L.mul(x, x))))
defjvp(L.sinh_p, lambda g, ans, x: L.mul(g, L.cosh(x)))
defjvp(L.cosh_p, lambda g, ans, x: L.mul(g, L.sinh(x)))
defjvp(L.asinh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.add(L.mul(x, x), _const(x, 1)))))
defjvp(L.acosh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.sub(L.mul(x, x), _const(x, 1)))))
defjvp(L.atanh_p, lambda g, ans, x: L.mul(L.div(_const(x, 1), L.add(_const(x, 1), x)),
                                          L.div(g, L.sub(_const(x, 1), x))))
defjvp(L.tan_p, lambda g, ans, x: L.mul(g, L.add(_const(x, 1), L.integer_pow(ans, 2))))
defjvp(L.erf_p, lambda g, ans, x: L.mul(_const(x, 2 / np.sqrt(np.pi)),
                                        L.mul(g, L.exp(L.neg(L.integer_pow(x, 2))))))
defjvp(L.erfc_p, lambda g, ans, x: L.mul(_const(x, -2 / np.sqrt(np.pi)),
                                         L.mul(g, L.exp(L.neg(L.integer_pow(x, 2))))))
defjvp(L.integer_pow_p, lambda g, ans, x, *, y: (  # (x**0: zeros, as JAX's -- not g * 0, NaN for a NaN g)
    L.full_like(g, 0) if y == 0 else
    g if y == 1 else L.mul(g, L.mul(_const(x, y), L.integer_pow(x, y - 1)))))
defjvp(L.atan2_p, lambda g, ans, x, y: L.mul(g, L.div(y, L.add(L.integer_pow(x, 2), L.integer_pow(y, 2)))),
       lambda g, ans, x, y: L.mul(g, L.div(L.neg(x), L.add(L.integer_pow(x, 2), L.integer_pow(y, 2)))))
defjvp(L.rem_p, lambda g, ans, x, y: g,
       lambda g, ans, x, y: L.mul(L.neg(g), L.mul(L.sign(L.div(x, y)), L.floor(L.abs(L.div(x, y))))))


def _replace_zero(x):
    """``x`` with zeros replaced by ones (so ``log`` and ``pow`` stay finite where unused)."""
    shape = _shape(x)
    return L.select_n(L.eq(x, _const(x, 0)), x, _bcast(_const(x, 1), shape) if shape else _const(x, 1))


def _pow_jvp_x(g, ans, x, y):
    if get_aval(y).dtype.kind in "iu":
        # An integer exponent (JAX's rule): y * x**(y-1) in x's dtype, but exactly 0 where y == 0,
        # so d/dx x**0 is 0 at x = 0 too (a float exponent gives NaN there: 0 * 0**-1).
        shape = _shape(ans)
        x = _bcast(x, shape)
        y = _bcast(L.convert_element_type(y, get_aval(x).dtype), shape)
        zero = _bcast(_const(y, 0), shape)
        jac = L.mul(_replace_zero(y), L.pow(x, L.sub(y, _const(y, 1))))
        return L.mul(g, L.select_n(L.eq(y, zero), jac, zero))
    return L.mul(g, L.mul(y, L.pow(x, L.sub(y, _const(y, 1)))))


def _pow_jvp_y(g, ans, x, y):
    return L.mul(g, L.mul(L.log(_replace_zero(_bcast(x, _shape(ans)))), ans))


defjvp(L.pow_p, _pow_jvp_x, _pow_jvp_y)


def _clamp_jvp_min(g, ans, lo, x, hi):
    g = _bcast(g, _shape(ans))
    return L.select_n(L.bitwise_and(L.gt(lo, x), L.lt(lo, hi)), zeros_like_aval(get_aval(g)), g)


def _clamp_jvp_x(g, ans, lo, x, hi):
    return L.select_n(L.bitwise_and(L.gt(x, lo), L.lt(x, hi)), zeros_like_aval(get_aval(g)), g)


def _clamp_jvp_max(g, ans, lo, x, hi):
    g = _bcast(g, _shape(ans))
    return L.select_n(L.lt(hi, x), zeros_like_aval(get_aval(g)), g)


defjvp(L.clamp_p, _clamp_jvp_min, _clamp_jvp_x, _clamp_jvp_max)


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    ans = L.select_n_p.bind(which, *cases)
    ts = tangents[1:]
    if all(isinstance(t, Zero) for t in ts):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.select_n_p.bind(which, *[instantiate(t) for t in ts])


def _select_n_t(ct, which, *cases):
    if is_undefined(which):
        raise ValueError("select_n: transpose with respect to the selector (not linear)")
    zeros = zeros_like_aval(get_aval(ct))
    return [None] + [L.select_n_p.bind(which, *[ct if j == i else zeros for j in range(len(cases))])
                     if is_undefined(c) else None for i, c in enumerate(cases)]


jvp_rules[L.select_n_p] = _select_n_jvp
transpose_rules[L.select_n_p] = _select_n_t


def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False):
    (x,), (t,) = primals, tangents
    ans = L.convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if isinstance(t, Zero) or not (tangent_aval(get_aval(ans)).dtype == new_dtype):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_t(ct, x, *, new_dtype, weak_type=False):
    return [L.convert_element_type_p.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]


jvp_rules[L.convert_element_type_p] = _convert_jvp
transpose_rules[L.convert_element_type_p] = _convert_t


# ---------------------------------------------------------------------------------------
# Structural (all linear).

def _broadcast_in_dim_t(ct, x, *, shape, broadcast_dimensions):
    in_shape = x.aval.shape
    summed = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for i, d in enumerate(broadcast_dimensions) if in_shape[i] == 1 and shape[d] != 1)
    out = L.reduce_sum_p.bind(ct, axes=tuple(sorted(summed + expanded))) if summed + expanded else ct
    return [L.reshape_p.bind(out, new_sizes=in_shape, dimensions=None) if _shape(out) != in_shape else out]


deflinear(L.broadcast_in_dim_p, _broadcast_in_dim_t)
deflinear(L.reshape_p, lambda ct, x, **_: [L.reshape_p.bind(ct, new_sizes=x.aval.shape, dimensions=None)])
deflinear(L.squeeze_p, lambda ct, x, **_: [L.reshape_p.bind(ct, new_sizes=x.aval.shape, dimensions=None)])
deflinear(L.transpose_p, lambda ct, x, *, permutation: [
    L.transpose_p.bind(ct, permutation=tuple(int(i) for i in np.argsort(permutation)))])
deflinear(L.rev_p, lambda ct, x, *, dimensions: [L.rev_p.bind(ct, dimensions=dimensions)])


def _reduce_sum_t(ct, x, *, axes):
    shape = x.aval.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    return [L.broadcast_in_dim_p.bind(ct, shape=shape, broadcast_dimensions=kept)]


deflinear(L.reduce_sum_p, _reduce_sum_t)
deflinear(L.cumsum_p, lambda ct, x, *, axis, reverse: [L.cumsum_p.bind(ct, axis=axis, reverse=not reverse)])


def _slice_t(ct, x, *, start_indices, limit_indices, strides=None):
    shape = x.aval.shape
    strides = strides or (1,) * len(shape)
    out_shape = _shape(ct)
    config = tuple((lo, n - (lo + (m - 1) * s + 1) if m else n - lo, s - 1 if m else 0)
                   for lo, n, m, s in zip(start_indices, shape, out_shape, strides))
    # an empty slice (m == 0) pads nothing in: its cotangent is all zeros
    if any(m == 0 for m in out_shape):
        return [zeros_like_aval(x.aval)]
    return [L.pad_p.bind(ct, _const(ct, 0), padding_config=config)]


deflinear(L.slice_p, _slice_t)


def _pad_t(ct, x, padding_value, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    # undo the negative low/high pads (crops) by padding with zeros, then drop the pads
    unpadded = L.pad_p.bind(ct, _const(ct, 0), padding_config=tuple((-a, -b, 0) for a, b in zip(lo, hi)))
    shape = _shape(unpadded)
    t_x = L.slice_p.bind(unpadded, start_indices=(0,) * len(shape), limit_indices=shape,
                         strides=tuple(i + 1 for i in interior)) if shape else unpadded
    axes = tuple(range(len(_shape(ct))))
    t_pv = None
    if is_undefined(padding_value):
        total = L.reduce_sum_p.bind(ct, axes=axes)
        t_pv = L.sub(total, L.reduce_sum_p.bind(t_x, axes=axes))
    return [t_x if is_undefined(x) else None, t_pv]


deflinear(L.pad_p, _pad_t)


def _concatenate_t(ct, *xs, dimension):
    out, start = [], 0
    shape = _shape(ct)
    for x in xs:
        n = (x.aval if is_undefined(x) else get_aval(x)).shape[dimension]
        if is_undefined(x):
            lo = [0] * len(shape)
            hi = list(shape)
            lo[dimension], hi[dimension] = start, start + n
            out.append(L.slice_p.bind(ct, start_indices=tuple(lo), limit_indices=tuple(hi), strides=None))
        else:
            out.append(None)
        start += n
    return out


deflinear(L.concatenate_p, _concatenate_t)


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *idx = primals
    ans = L.dynamic_slice_p.bind(x, *idx, slice_sizes=slice_sizes)
    if isinstance(tangents[0], Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.dynamic_slice_p.bind(tangents[0], *idx, slice_sizes=slice_sizes)


def _dynamic_slice_t(ct, x, *idx, slice_sizes):
    zeros = zeros_like_aval(x.aval)
    return [L.dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)


jvp_rules[L.dynamic_slice_p] = _dynamic_slice_jvp
transpose_rules[L.dynamic_slice_p] = _dynamic_slice_t


def _dynamic_update_slice_jvp(primals, tangents):
    x, upd, *idx = primals
    ans = L.dynamic_update_slice_p.bind(x, upd, *idx)
    tx, tu = tangents[:2]
    if isinstance(tx, Zero) and isinstance(tu, Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.dynamic_update_slice_p.bind(instantiate(tx), instantiate(tu), *idx)


def _dynamic_update_slice_t(ct, x, upd, *idx):
    upd_aval = upd.aval if is_undefined(upd) else get_aval(upd)
    t_x = L.dynamic_update_slice_p.bind(ct, zeros_like_aval(upd_aval), *idx) if is_undefined(x) else None
    t_u = L.dynamic_slice_p.bind(ct, *idx, slice_sizes=upd_aval.shape) if is_undefined(upd) else None
    return [t_x, t_u] + [None] * len(idx)


jvp_rules[L.dynamic_update_slice_p] = _dynamic_update_slice_jvp
transpose_rules[L.dynamic_update_slice_p] = _dynamic_update_slice_t


# ---------------------------------------------------------------------------------------
# Reductions.

def _reduce_chooser_jvp(prim):
    """``reduce_max``/``reduce_min``: the tangent averaged over the positions that attain the
    extremum (JAX's rule: ties share the gradient equally)."""
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        shape = _shape(x)
        kept = tuple(d for d in range(len(shape)) if d not in axes)
        loc = L.convert_element_type(L.eq(x, L.broadcast_in_dim_p.bind(
            ans, shape=shape, broadcast_dimensions=kept)), get_aval(x).dtype)
        counts = L.reduce_sum_p.bind(loc, axes=axes)
        return ans, L.div(L.reduce_sum_p.bind(L.mul(t, loc), axes=axes), counts)
    jvp_rules[prim] = rule


_reduce_chooser_jvp(L.reduce_max_p)
_reduce_chooser_jvp(L.reduce_min_p)


# ---------------------------------------------------------------------------------------
# Contractions.

def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _dot_transpose_operand(ct, other, x_ndim, x_contract, x_batch, y_contract, y_batch, x_is_lhs,
                           precision, x_dtype):
    """The cotangent of one operand ``x`` of ``dot_general(x, y)`` (or ``(y, x)``) given ``ct``.

    ``ct`` has dims [batch, lhs free, rhs free]. Contract ct's ``y``-free dims with ``y``'s
    free dims and batch over the batch dims: the result has x's dims in the order
    (batch, x free, x contracting sorted by y's contracting dims); transpose back.
    """
    y_ndim = get_aval(other).ndim
    x_kept = [d for d in range(x_ndim) if d not in x_contract and d not in x_batch]
    y_kept = [d for d in range(y_ndim) if d not in y_contract and d not in y_batch]
    if x_is_lhs:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    else:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    order = list(x_batch) + x_kept + [x_contract[i] for i in np.argsort(y_contract)]
    out = L.dot_general_p.bind(ct, other, dimension_numbers=dims, precision=precision,
                               preferred_element_type=None)
    out = L.transpose_p.bind(out, permutation=tuple(int(i) for i in np.argsort(order))) \
        if order != sorted(order) else out
    if get_aval(out).dtype != x_dtype:
        out = L.convert_element_type_p.bind(out, new_dtype=x_dtype, weak_type=False)
    return out


def _dot_lhs_t(ct, x, y, *, dimension_numbers, precision=None, preferred_element_type=None):
    (xc, yc), (xb, yb) = dimension_numbers
    return _dot_transpose_operand(ct, y, x.aval.ndim, list(xc), list(xb), list(yc), list(yb), True,
                                  precision, x.aval.dtype)


def _dot_rhs_t(ct, x, y, *, dimension_numbers, precision=None, preferred_element_type=None):
    (xc, yc), (xb, yb) = dimension_numbers
    return _dot_transpose_operand(ct, x, y.aval.ndim, list(yc), list(yb), list(xc), list(xb), False,
                                  precision, y.aval.dtype)


defbilinear(L.dot_general_p, _dot_lhs_t, _dot_rhs_t)


# ---------------------------------------------------------------------------------------
# Convolution. Both transposes are convolutions again (the "transposed convolution" for the
# input, the weight gradient for the kernel); derivations in the docstrings.

def _dilated(n, d):
    return 0 if n == 0 else (n - 1) * d + 1


def _conv_bind(lhs, rhs, dn, strides, padding, lhs_dil, rhs_dil, groups, precision):
    return L.conv_general_dilated_p.bind(
        lhs, rhs, window_strides=tuple(strides), padding=tuple(tuple(int(v) for v in p) for p in padding),
        lhs_dilation=tuple(lhs_dil), rhs_dilation=tuple(rhs_dil), dimension_numbers=dn,
        feature_group_count=groups, batch_group_count=1, precision=precision, preferred_element_type=None)


def _conv_lhs_t(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count=1, batch_group_count=1, precision=None, preferred_element_type=None):
    """d lhs = conv(ct, kernel flipped in space with its in/out features swapped), strides and
    lhs dilation exchanged. The kernel's out features (G groups of Og) move into its in-feature
    axis group-major so the same ``feature_group_count`` applies. Padding: ``K_d - 1 - lo`` before
    and whatever makes the result the input's size after (K_d, L_d, O_d: dilated sizes). An
    empty output's cotangent is zeros (the padding arithmetic assumes an output window)."""
    if 0 in _shape(ct):
        return zeros_like_aval(lhs.aval)
    dn = dimension_numbers
    G = feature_group_count
    lhs_shape = lhs.aval.shape
    nsp = len(lhs_shape) - 2
    rhs_c = L.transpose_p.bind(rhs, permutation=tuple(dn.rhs_spec))  # [O, I, *K]
    O, I, *K = _shape(rhs_c)
    if G > 1:
        rhs_c = L.reshape_p.bind(rhs_c, new_sizes=(G, O // G, I, *K), dimensions=None)
        rhs_c = L.transpose_p.bind(rhs_c, permutation=(1, 0) + tuple(range(2, nsp + 3)))
        rhs_c = L.reshape_p.bind(rhs_c, new_sizes=(O // G, G * I, *K), dimensions=None)
    rhs_c = L.rev_p.bind(rhs_c, dimensions=tuple(range(2, nsp + 2)))
    ct_sp = [_shape(ct)[d] for d in dn.out_spec[2:]]
    pads = []
    for i in range(nsp):
        l_d = _dilated(lhs_shape[dn.lhs_spec[2 + i]], lhs_dilation[i])
        k_d = _dilated(K[i], rhs_dilation[i])
        o_d = _dilated(ct_sp[i], window_strides[i])
        before = k_d - 1 - padding[i][0]
        pads.append((before, l_d + k_d - 1 - o_d - before))
    t_dn = L.ConvDimensionNumbers(tuple(dn.out_spec), (1, 0) + tuple(range(2, nsp + 2)), tuple(dn.lhs_spec))
    out = _conv_bind(ct, rhs_c, t_dn, lhs_dilation, pads, window_strides, rhs_dilation, G, precision)
    return out


def _conv_rhs_t(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count=1, batch_group_count=1, precision=None, preferred_element_type=None):
    """d rhs[o, c, k] = sum over n, y of ct[n, o, y] * lhs_padded[n, c, y*s + k*r]: a convolution of
    ``lhs`` (its batch and feature roles swapped) with ``ct`` as the kernel (contracting the
    batch), window stride r and kernel dilation s exchanged; the result comes out in the
    kernel's own layout. Feature groups are done one at a time (no batch_group_count yet). An
    empty output gives zeros (as JAX: ``ct`` would be a kernel of spatial size 0, which XLA refuses)."""
    if 0 in _shape(ct):
        return zeros_like_aval(rhs.aval)
    dn = dimension_numbers
    G = feature_group_count
    rhs_shape = rhs.aval.shape
    nsp = len(rhs_shape) - 2
    K = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    ct_sp = [_shape(ct)[d] for d in dn.out_spec[2:]]
    lhs_sp = [_shape(lhs)[d] for d in dn.lhs_spec[2:]]
    pads = []
    for i in range(nsp):
        l_d = _dilated(lhs_sp[i], lhs_dilation[i])
        k_d = _dilated(K[i], rhs_dilation[i])
        o_d = _dilated(ct_sp[i], window_strides[i])
        lo = padding[i][0]
        pads.append((lo, k_d - 1 + o_d - l_d - lo))
    t_dn = L.ConvDimensionNumbers((dn.lhs_spec[1], dn.lhs_spec[0]) + tuple(dn.lhs_spec[2:]),
                                  (dn.out_spec[1], dn.out_spec[0]) + tuple(dn.out_spec[2:]),
                                  (dn.rhs_spec[1], dn.rhs_spec[0]) + tuple(dn.rhs_spec[2:]))
    if G == 1:
        return _conv_bind(lhs, ct, t_dn, rhs_dilation, pads, lhs_dilation, window_strides, 1, precision)
    parts = []
    C, O = _shape(lhs)[dn.lhs_spec[1]], _shape(ct)[dn.out_spec[1]]
    for k in range(G):
        lhs_k = _slice_axis(lhs, dn.lhs_spec[1], k * (C // G), (k + 1) * (C // G))
        ct_k = _slice_axis(ct, dn.out_spec[1], k * (O // G), (k + 1) * (O // G))
        parts.append(_conv_bind(lhs_k, ct_k, t_dn, rhs_dilation, pads, lhs_dilation, window_strides, 1,
                                precision))
    return L.concatenate_p.bind(*parts, dimension=dn.rhs_spec[0])


def _slice_axis(x, axis, lo, hi):
    shape = _shape(x)
    start, limit = [0] * len(shape), list(shape)
    start[axis], limit[axis] = lo, hi
    return L.slice_p.bind(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)


defbilinear(L.conv_general_dilated_p, _conv_lhs_t, _conv_rhs_t)


# ---------------------------------------------------------------------------------------
# Gather / scatter-add (both linear in their array operands; indices have no tangent).
# Each transpose keeps the primal's out-of-bounds mode (``lax.GatherScatterMode``): a clamped
# gather (CLIP, or PROMISE_IN_BOUNDS, which HLO clamps) scatters its cotangent at the clamped
# starts; a filling gather (FILL_OR_DROP) drops the cotangent of a filled window, since the fill
# does not depend on the operand. A scatter's update gets the cotangent gathered the same way:
# zero (a fill of 0) where the scatter dropped the window.

_M = L.GatherScatterMode


def _gather_jvp(primals, tangents, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    x, idx = primals
    ans = L.gather_p.bind(x, idx, dimension_numbers=dimension_numbers, slice_sizes=slice_sizes,
                          mode=mode, fill_value=fill_value)
    if isinstance(tangents[0], Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    t_fill = None if fill_value is None else np.zeros((), get_aval(ans).dtype)[()]
    return ans, L.gather_p.bind(tangents[0], idx, dimension_numbers=dimension_numbers,
                                slice_sizes=slice_sizes, mode=mode, fill_value=t_fill)


def _gather_t(ct, x, idx, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    dn = dimension_numbers
    sdn = L.ScatterDimensionNumbers(tuple(dn.offset_dims), tuple(dn.collapsed_slice_dims), tuple(dn.start_index_map))
    # The scatter-add in the gather's own mode, as JAX transposes it: so for PROMISE_IN_BOUNDS
    # (x[i]'s default) the forward clamps an out-of-bounds start (HLO gather) while the cotangent
    # of that window is dropped (HLO scatter) -- JAX's gradient is 0 there.
    scatter_mode = _M.PROMISE_IN_BOUNDS if mode is None else mode
    out = L.scatter_add_p.bind(zeros_like_aval(x.aval), idx, ct, dimension_numbers=sdn,
                               indices_are_sorted=False, unique_indices=False, mode=scatter_mode)
    return [out, None]


jvp_rules[L.gather_p] = _gather_jvp
transpose_rules[L.gather_p] = _gather_t


def _scatter_add_jvp(primals, tangents, **params):
    x, idx, upd = primals
    ans = L.scatter_add_p.bind(x, idx, upd, **params)
    tx, _, tu = tangents
    if isinstance(tx, Zero) and isinstance(tu, Zero):
        return ans, Zero(tangent_aval(get_aval(ans)))
    return ans, L.scatter_add_p.bind(instantiate(tx), idx, instantiate(tu), **params)


def _scatter_add_t(ct, x, idx, upd, *, dimension_numbers, mode=None, **_):
    dn = dimension_numbers
    t_x = ct if is_undefined(x) else None
    t_u = None
    if is_undefined(upd):  # (the gather in the scatter's mode, as JAX's transpose)
        from minixla.interpreters.ad_scatter_rules import _inverse_gather
        t_u = _inverse_gather(_shape(ct), idx, upd.aval.shape, dn, mode, ct)
    return [t_x, None, t_u]


jvp_rules[L.scatter_add_p] = _scatter_add_jvp
transpose_rules[L.scatter_add_p] = _scatter_add_t


# ---------------------------------------------------------------------------------------
# Products and running extrema: their JVP is the JVP of the same reduction written with
# ``mul``/``max``/``min`` (a pairwise tree, or a Hillis-Steele scan), so every derivative
# order and the zero cases (a product with zeros in it) come from those primitives' rules.

def _jvp_of(fun, x, t):
    from minixla.interpreters.ad import jvp_flat
    _, (t_out,) = jvp_flat(lambda a: [fun(a)], [x], [t])
    return t_out


def _reduce_prod_jvp(primals, tangents, *, axes):
    (x,), (t,) = primals, tangents
    ans = L.reduce_prod_p.bind(x, axes=axes)
    shape = _shape(x)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        return ans, Zero(tangent_aval(get_aval(ans)))
    kept = [d for d in range(len(shape)) if d not in axes]
    out_shape = _shape(ans)

    def tree(a):
        a = L.transpose_p.bind(a, permutation=tuple(axes) + tuple(kept)) if list(axes) + kept != list(
            range(len(shape))) else a
        a = L.reshape_p.bind(a, new_sizes=(n,) + tuple(out_shape), dimensions=None)
        while _shape(a)[0] > 1:
            m = _shape(a)[0]
            if m % 2:
                one = L.broadcast_in_dim_p.bind(_const(a, 1), shape=(1,) + tuple(out_shape), broadcast_dimensions=())
                a = L.concatenate_p.bind(a, one, dimension=0)
                m += 1
            rest = (0,) * len(out_shape)
            lim = tuple(out_shape)
            a = L.mul(L.slice_p.bind(a, start_indices=(0,) + rest, limit_indices=(m,) + lim, strides=(2,) + (1,) * len(lim)),
                      L.slice_p.bind(a, start_indices=(1,) + rest, limit_indices=(m,) + lim, strides=(2,) + (1,) * len(lim)))
        return L.reshape_p.bind(a, new_sizes=tuple(out_shape), dimensions=None)
    return ans, _jvp_of(tree, x, t)


jvp_rules[L.reduce_prod_p] = _reduce_prod_jvp


def _cumulative_jvp(prim, combine):
    # JAX differentiates cumprod/cummax/cummin as the JVP of its associative_scan (whatever the
    # forward implementation), so the tangent follows that scan's tree of combines: which element
    # of a tie gets half the tangent, and that a NaN or an infinity passes through the first
    # position unchanged. A scan padded with the identity (+-inf for min/max) would tie with an
    # infinite element and halve its tangent; lax.associative_scan has JAX's tree exactly.
    def rule(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axis=axis, reverse=reverse)
        scan = lambda a: lax.associative_scan(combine, a, reverse=reverse, axis=axis)
        return ans, _jvp_of(scan, x, t)
    jvp_rules[prim] = rule


_cumulative_jvp(L.cumprod_p, L.mul)
_cumulative_jvp(L.cummax_p, L.max)
_cumulative_jvp(L.cummin_p, L.min)




# minixla.random's special functions (issue 14): d erf_inv(x) = sqrt(pi)/2 exp(erf_inv(x)^2) dx
# (JAX's rule); fma is a*b + c.
defjvp(L.erf_inv_p, lambda g, ans, x: L.mul(_const(x, np.sqrt(np.pi) / 2), L.mul(g, L.exp(L.integer_pow(ans, 2)))))
defjvp(L.fma_p, lambda g, ans, a, b, c: L.mul(_bcast(g, _shape(ans)), _bcast(b, _shape(ans))),
       lambda g, ans, a, b, c: L.mul(_bcast(a, _shape(ans)), _bcast(g, _shape(ans))),
       lambda g, ans, a, b, c: _bcast(g, _shape(ans)))


# sort (issue 14): the tangent of each operand is carried through the sort as one more operand
# sorted by the same keys (the sort is stable, so the permutation is the primal's); that sort is
# linear in its carried operand, and its transpose puts the cotangent back in place by sorting
# it by the permutation (``perm = sort(keys, iota)``: sorting by ``perm`` inverts it).

def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    outs = L.sort_p.bind(*primals, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    keys = primals[:num_keys]
    touts = []
    for o, t in zip(outs, tangents):
        if isinstance(t, Zero):
            touts.append(Zero(tangent_aval(get_aval(o))))
        else:
            touts.append(L.sort_p.bind(*keys, instantiate(t), dimension=dimension, is_stable=is_stable,
                                       num_keys=num_keys)[-1])
    return outs, touts


def _sort_t(cts, *args, dimension, is_stable, num_keys):
    if any(is_undefined(a) for a in args[:num_keys]):
        raise ValueError("sort: transpose with respect to a sort key (not linear)")
    keys = args[:num_keys]
    shape = get_aval(keys[0]).shape
    perm = None
    out = []
    for a, ct in zip(args, cts):
        if not is_undefined(a) or isinstance(ct, Zero):
            out.append(None)
            continue
        if perm is None:
            iota = L.broadcasted_iota(np.int32, shape, dimension)
            perm = L.sort_p.bind(*keys, iota, dimension=dimension, is_stable=True, num_keys=num_keys)[-1]
        out.append(L.sort_p.bind(perm, ct, dimension=dimension, is_stable=True, num_keys=1)[1])
    return out


jvp_rules[L.sort_p] = _sort_jvp
transpose_rules[L.sort_p] = _sort_t


from minixla.interpreters import control_flow_rules  # noqa: E402,F401 (cond, while, scan)
from minixla.interpreters import ad_window_rules  # noqa: E402,F401 (pooling)
from minixla.interpreters import special_rules  # noqa: E402,F401 (lgamma, igamma, ...: issue 14)
