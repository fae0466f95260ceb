"""Vectorization: ``vmap``'s interpreter and the ``batching_rules`` table (``batching.py`` in JAX).

A ``BatchTracer`` is a value with one extra axis, ``batch_dim`` (or ``None``: the same for
every example). Each primitive's ``batching_rules`` row maps (values, batch dims) to
(value, batch dim) by rewriting the primitive to work on the whole batch at once: elementwise
ops broadcast their unbatched operands, structural ops shift their dimension parameters,
``dot_general`` turns the batch axis into a batch dimension of the contraction.
"""
from __future__ import annotations

import numpy as np

from minixla import lax as L
from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.core.tracing import Tracer

#: primitive -> fn(vals, dims, **params) -> (out, out_dim); dims[i] is an int or None
batching_rules: dict = {}

not_mapped = None


class BatchTracer(Tracer):
    """A batch of values: ``val`` holds them all, stacked along ``batch_dim``."""

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        a = get_aval(self.val)
        if self.batch_dim is None:
            return a
        shape = a.shape[:self.batch_dim] + a.shape[self.batch_dim + 1:]
        return ShapedArray(shape, a.dtype, a.weak_type)

    def __repr__(self):
        return f"BatchTracer<{self.aval}, batch_dim={self.batch_dim}>"


class BatchTrace:
    """Processes each primitive with its ``batching_rules`` row; ``axis_size`` is the batch size."""
    level = None

    def __init__(self, axis_size):
        self.axis_size = axis_size

    def lift(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.batch_dim
        return x, not_mapped

    def process_primitive(self, prim, args, params):
        vals, dims = zip(*[self.lift(x) for x in args]) if args else ((), ())
        if all(d is None for d in dims):
            return prim.bind(*vals, **params)
        rule = batching_rules.get(prim)
        if rule is None:
            raise errors.UnsupportedError(
                f"Batching rule for '{prim.name}' not implemented\n  at: {errors.user_source_line()}")
        out, out_dim = rule(list(vals), list(dims), **params)
        if prim.multiple_results:
            return [self._wrap(o, d) for o, d in zip(out, out_dim)]
        return self._wrap(out, out_dim)

    def _wrap(self, val, dim):
        return val if dim is None else BatchTracer(self, val, dim)


# ---------------------------------------------------------------------------------------
# Helpers.

def moveaxis(x, src, dst):
    """``x`` with axis ``src`` moved to position ``dst``."""
    nd = get_aval(x).ndim
    if src == dst:
        return x
    perm = [d for d in range(nd) if d != src]
    perm.insert(dst, src)
    return L.transpose_p.bind(x, permutation=tuple(perm))


def bdim_at_front(x, dim, size):
    """``x`` with its batch axis first; an unbatched ``x`` is broadcast to ``size`` examples."""
    if dim is None:
        shape = get_aval(x).shape
        return L.broadcast_in_dim_p.bind(x, shape=(size,) + shape,
                                         broadcast_dimensions=tuple(range(1, len(shape) + 1)))
    return moveaxis(x, dim, 0)


def _size(vals, dims):
    return next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)


# ---------------------------------------------------------------------------------------
# Rule families.

def defvectorized(prim):
    """Unary elementwise (and any op acting on each element on its own): batch dim unchanged."""
    def rule(vals, dims, **params):
        return prim.bind(*vals, **params), dims[0]
    batching_rules[prim] = rule


def defbroadcasting(prim, full=False):
    """N-ary elementwise with lax's rule (equal shapes, or rank-0 operands): batched operands
    get their batch axis first; unbatched non-scalar operands, and batched operands of a
    scalar example next to non-scalar ones, are broadcast to the full batched shape. ``full``:
    every operand is broadcast (``select_n``/``clamp`` need equal shapes once one is batched)."""
    def rule(vals, dims, **params):
        size = _size(vals, dims)
        ex_shapes = [get_aval(v).shape if d is None else
                     get_aval(v).shape[:d] + get_aval(v).shape[d + 1:] for v, d in zip(vals, dims)]
        ex_shape = max(ex_shapes, key=len)
        out = []
        for v, d, s in zip(vals, dims, ex_shapes):
            if d is None:
                out.append(v if s == () and not full else L.broadcast_in_dim_p.bind(
                    v, shape=(size,) + ex_shape, broadcast_dimensions=tuple(range(1, len(s) + 1))))
            else:
                v = moveaxis(v, d, 0)
                if s != ex_shape:
                    v = L.broadcast_in_dim_p.bind(v, shape=(size,) + ex_shape, broadcast_dimensions=(0,))
                out.append(v)
        return prim.bind(*out, **params), 0
    batching_rules[prim] = rule


for _p in (L.neg_p, L.abs_p, L.sign_p, L.floor_p, L.ceil_p, L.round_p, L.exp_p, L.exp2_p, L.expm1_p, L.log_p,
           L.log1p_p, L.sqrt_p, L.rsqrt_p, L.cbrt_p, L.tanh_p, L.logistic_p, L.sin_p, L.cos_p, L.tan_p, L.erf_p,
           L.erfc_p, L.is_finite_p, L.not_p, L.integer_pow_p, L.convert_element_type_p, L.bitcast_convert_type_p,
           L.asin_p, L.acos_p, L.atan_p, L.sinh_p, L.cosh_p, L.asinh_p, L.acosh_p, L.atanh_p,
           L.stop_gradient_p):
    defvectorized(_p)

for _p in (L.add_p, L.add_any_p, L.sub_p, L.mul_p, L.div_p, L.rem_p, L.pow_p, L.atan2_p, L.max_p, L.min_p, L.and_p, L.or_p,
           L.xor_p, L.eq_p, L.ne_p, L.lt_p, L.le_p, L.gt_p, L.ge_p, L.shift_left_p, L.shift_right_logical_p,
           L.shift_right_arithmetic_p):
    defbroadcasting(_p)
defbroadcasting(L.clamp_p, full=True)
defbroadcasting(L.select_n_p, full=True)


# ---------------------------------------------------------------------------------------
# Structural.

def _broadcast_in_dim_b(vals, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    return L.broadcast_in_dim_p.bind(x, shape=(size,) + tuple(shape),
                                     broadcast_dimensions=(0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


def _reshape_b(vals, dims, *, new_sizes, dimensions=None):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    return L.reshape_p.bind(x, new_sizes=(size,) + tuple(new_sizes), dimensions=None), 0


def _transpose_b(vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    return L.transpose_p.bind(x, permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def _squeeze_b(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    return L.squeeze_p.bind(x, dimensions=tuple(a + 1 for a in dimensions)), 0


def _rev_b(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    return L.rev_p.bind(x, dimensions=tuple(a + 1 for a in dimensions)), 0


def _slice_b(vals, dims, *, start_indices, limit_indices, strides=None):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    return L.slice_p.bind(x, start_indices=(0,) + tuple(start_indices), limit_indices=(size,) + tuple(limit_indices),
                          strides=(1,) + tuple(strides) if strides is not None else None), 0


def _pad_b(vals, dims, *, padding_config):
    (x, pv), (dx, dpv) = vals, dims
    if dpv is not None:
        # a batched padding value: pad with zeros, then select the padding value where no
        # operand element landed (a mask padded the same way)
        size = _size(vals, dims)
        x = bdim_at_front(x, dx, size)
        ex_shape = get_aval(x).shape[1:]
        zero = np.zeros((), get_aval(x).dtype)[()]
        padded = L.pad_p.bind(x, zero, padding_config=((0, 0, 0),) + tuple(padding_config))
        mask = L.pad_p.bind(np.ones(ex_shape, np.bool_), np.bool_(False), padding_config=tuple(padding_config))
        out_shape = get_aval(padded).shape
        mask = L.broadcast_in_dim_p.bind(mask, shape=out_shape, broadcast_dimensions=tuple(range(1, len(out_shape))))
        pv = L.broadcast_in_dim_p.bind(moveaxis(pv, dpv, 0), shape=out_shape, broadcast_dimensions=(0,))
        return L.select_n_p.bind(mask, pv, padded), 0
    x = moveaxis(x, dx, 0)
    return L.pad_p.bind(x, pv, padding_config=((0, 0, 0),) + tuple(padding_config)), 0


def _concatenate_b(vals, dims, *, dimension):
    size = _size(vals, dims)
    return L.concatenate_p.bind(*[bdim_at_front(v, d, size) for v, d in zip(vals, dims)],
                                dimension=dimension + 1), 0


def _reduce_b(prim):
    def rule(vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        x = moveaxis(x, d, 0)
        return prim.bind(x, axes=tuple(a + 1 for a in axes), **params), 0
    batching_rules[prim] = rule


def _cumulative_b(prim):
    def rule(vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        x = moveaxis(x, d, 0)
        return prim.bind(x, axis=axis + 1, reverse=reverse), 0
    batching_rules[prim] = rule


batching_rules.update({
    L.broadcast_in_dim_p: _broadcast_in_dim_b, L.reshape_p: _reshape_b, L.transpose_p: _transpose_b,
    L.squeeze_p: _squeeze_b, L.rev_p: _rev_b, L.slice_p: _slice_b, L.pad_p: _pad_b,
    L.concatenate_p: _concatenate_b,
})
for _p in (L.reduce_sum_p, L.reduce_max_p, L.reduce_min_p, L.reduce_prod_p, L.reduce_and_p, L.reduce_or_p,
           L.argmax_p, L.argmin_p):
    _reduce_b(_p)
for _p in (L.cumsum_p, L.cumprod_p, L.cummax_p, L.cummin_p):
    _cumulative_b(_p)


def _index_vector(idx, didx, size):
    """Per-example scalar start indices as one batched index vector ``[B, K]`` (int32)."""
    cols = []
    for i, d in zip(idx, didx):
        i = L.convert_element_type_p.bind(i, new_dtype=np.dtype(np.int32), weak_type=False) \
            if get_aval(i).dtype != np.int32 else i
        i = bdim_at_front(i, d, size)
        cols.append(L.broadcast_in_dim_p.bind(i, shape=(size, 1), broadcast_dimensions=(0,)))
    return L.concatenate_p.bind(*cols, dimension=1)


def _dynamic_slice_b(vals, dims, *, slice_sizes):
    """Batched start indices make it a gather (whose clamping is dynamic_slice's)."""
    x, *idx = vals
    dx, *didx = dims
    if any(d is not None for d in didx):
        size = _size(vals, dims)
        nd = len(slice_sizes)
        gdn = L.GatherDimensionNumbers(tuple(range(nd)), (), tuple(range(nd)))
        return _gather_b([x, _index_vector(idx, didx, size)], [dx, 0], dimension_numbers=gdn,
                         slice_sizes=tuple(slice_sizes), mode=L.GatherScatterMode.CLIP, fill_value=None)
    x = moveaxis(x, dx, 0)
    size = get_aval(x).shape[0]
    zero = np.zeros((), get_aval(idx[0]).dtype)[()] if idx else np.int32(0)
    return L.dynamic_slice_p.bind(x, zero, *idx, slice_sizes=(size,) + tuple(slice_sizes)), 0


def _dynamic_update_slice_b(vals, dims):
    """Batched start indices make it a scatter, after clamping the starts so the update fits
    (dynamic_update_slice clamps; scatter would drop the window)."""
    x, upd, *idx = vals
    dx, du, *didx = dims
    size = _size(vals, dims)
    if any(d is not None for d in didx):
        vec = _index_vector(idx, didx, size)
        ex_x = get_aval(x).shape if dx is None else get_aval(x).shape[:dx] + get_aval(x).shape[dx + 1:]
        ex_u = get_aval(upd).shape if du is None else get_aval(upd).shape[:du] + get_aval(upd).shape[du + 1:]
        hi = np.array([a - b for a, b in zip(ex_x, ex_u)], np.int32)
        vec = L.min(L.max(vec, np.int32(0)), L.broadcast_in_dim_p.bind(hi, shape=(size, len(hi)),
                                                                       broadcast_dimensions=(1,)))
        nd = len(ex_x)
        sdn = L.ScatterDimensionNumbers(tuple(range(nd)), (), tuple(range(nd)))
        return batching_rules[L.scatter_p]([x, vec, upd], [dx, 0, du], dimension_numbers=sdn,
                                           indices_are_sorted=True, unique_indices=True,
                                           mode=L.GatherScatterMode.PROMISE_IN_BOUNDS)
    x, upd = bdim_at_front(x, dx, size), bdim_at_front(upd, du, size)
    zero = np.zeros((), get_aval(idx[0]).dtype)[()] if idx else np.int32(0)
    return L.dynamic_update_slice_p.bind(x, upd, zero, *idx), 0


batching_rules[L.dynamic_slice_p] = _dynamic_slice_b
batching_rules[L.dynamic_update_slice_p] = _dynamic_update_slice_b


# ---------------------------------------------------------------------------------------
# Contractions.

def _dot_general_b(vals, dims, *, dimension_numbers, precision=None, preferred_element_type=None):
    """Both batched: the batch axes become a new leading batch dimension of the contraction.
    One batched: its batch axis is a free dimension; find where it lands in the output."""
    (x, y), (dx, dy) = vals, dims
    (xc, yc), (xb, yb) = dimension_numbers
    params = dict(precision=precision, preferred_element_type=preferred_element_type)
    if dx is not None and dy is not None:
        x, y = moveaxis(x, dx, 0), moveaxis(y, dy, 0)
        inc = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
        dn = ((inc(xc), inc(yc)), ((0,) + inc(xb), (0,) + inc(yb)))
        return L.dot_general_p.bind(x, y, dimension_numbers=dn, **params), 0
    # One batched: its batch axis stays where it is, as one more free dim (no transpose); the
    # dimension numbers skip over it, and it lands in the output after the batch dims, x's
    # free dims before it (and, for y, all of x's free dims).
    def skip(ds, b):
        return tuple(d + (d >= b) for d in ds)

    def free_before(b, contracting, batch):
        return sum(1 for d in range(b) if d not in contracting and d not in batch)
    if dx is not None:
        xc, xb = skip(xc, dx), skip(xb, dx)
        out = L.dot_general_p.bind(x, y, dimension_numbers=((xc, tuple(yc)), (xb, tuple(yb))), **params)
        return out, len(xb) + free_before(dx, xc, xb)
    yc, yb = skip(yc, dy), skip(yb, dy)
    out = L.dot_general_p.bind(x, y, dimension_numbers=((tuple(xc), yc), (tuple(xb), yb)), **params)
    x_free = get_aval(x).ndim - len(xc) - len(xb)
    return out, len(xb) + x_free + free_before(dy, yc, yb)


batching_rules[L.dot_general_p] = _dot_general_b


# ---------------------------------------------------------------------------------------
# Gather, convolution.

def _gather_b(vals, dims, *, dimension_numbers, slice_sizes, **modes):
    """Operand batched: the batch is one more (leading) window dim. Indices batched: one more
    leading index batch dim. Both: an iota joins the index vector to pick each example's slice."""
    (x, idx), (dx, di) = vals, dims
    dn = dimension_numbers
    inc = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if di is None:
        x = moveaxis(x, dx, 0)
        size = get_aval(x).shape[0]
        gdn = L.GatherDimensionNumbers((0,) + inc(dn.offset_dims), inc(dn.collapsed_slice_dims),
                                       inc(dn.start_index_map))
        return L.gather_p.bind(x, idx, dimension_numbers=gdn, slice_sizes=(size,) + tuple(slice_sizes), **modes), 0
    idx = moveaxis(idx, di, 0)
    if dx is None:
        gdn = L.GatherDimensionNumbers(inc(dn.offset_dims), tuple(dn.collapsed_slice_dims),
                                       tuple(dn.start_index_map))
        return L.gather_p.bind(x, idx, dimension_numbers=gdn, slice_sizes=tuple(slice_sizes), **modes), 0
    x = moveaxis(x, dx, 0)
    ishape = get_aval(idx).shape
    dtype = get_aval(idx).dtype
    if ishape[0] == 0:  # (an empty batch: no example's slice of size 1 exists to pick, and none is needed)
        xa = get_aval(x)
        out = L.gather_p.abstract_eval(ShapedArray(xa.shape[1:], xa.dtype), ShapedArray(ishape[1:], dtype),
                                       dimension_numbers=dn, slice_sizes=slice_sizes, **modes)
        return L.full((0,) + out.shape, 0, xa.dtype), 0
    counts = L.broadcasted_iota(dtype, ishape[:-1] + (1,), 0)
    idx = L.concatenate_p.bind(counts, idx, dimension=len(ishape) - 1)
    gdn = L.GatherDimensionNumbers(inc(dn.offset_dims), (0,) + inc(dn.collapsed_slice_dims),
                                   (0,) + inc(dn.start_index_map))
    return L.gather_p.bind(x, idx, dimension_numbers=gdn, slice_sizes=(1,) + tuple(slice_sizes), **modes), 0


batching_rules[L.gather_p] = _gather_b


def _merge_into(x, bdim, axis):
    """Fold the batch axis ``bdim`` of ``x`` into the example axis ``axis`` (given in the
    example's numbering), batch-major: returns an array of the example's rank."""
    x = moveaxis(x, bdim, 0)
    shape = get_aval(x).shape
    x = moveaxis(x, 0, axis)  # now [.., B, A, ..] with B at ``axis``
    shape = get_aval(x).shape
    return L.reshape_p.bind(x, new_sizes=shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:],
                            dimensions=None)


def _split_axis(x, axis, sizes):
    shape = get_aval(x).shape
    return L.reshape_p.bind(x, new_sizes=shape[:axis] + tuple(sizes) + shape[axis + 1:], dimensions=None)


def _example_shape(x, bdim):
    shape = get_aval(x).shape
    return shape[:bdim] + shape[bdim + 1:]


def _conv_b(vals, dims, **params):
    """Batched input: the batch joins the input's batch dim N. Batched kernel: the batch joins
    the out-feature dim (inside each feature group). Both: the batch becomes extra feature
    groups. The output's matching dim is split again; its batch axis is returned."""
    (lhs, rhs), (dl, dr) = vals, dims
    dn = params["dimension_numbers"]
    G = params["feature_group_count"]
    if params.get("batch_group_count", 1) != 1:
        raise errors.UnsupportedError("vmap of conv_general_dilated with batch_group_count != 1")
    o_ax = dn.out_spec[1]
    # (the per-example sizes are read off the operands, never divided out of the merged output:
    # a batch of 0 examples merges into a 0-sized dim)
    if dr is None:
        size = get_aval(lhs).shape[dl]
        n = _example_shape(lhs, dl)[dn.lhs_spec[0]]
        lhs = _merge_into(lhs, dl, dn.lhs_spec[0])
        out = L.conv_general_dilated_p.bind(lhs, rhs, **params)
        return _split_axis(out, dn.out_spec[0], (size, n)), dn.out_spec[0]
    size = get_aval(rhs).shape[dr]
    o_r = dn.rhs_spec[0]
    if size == 0 and dl is not None:  # no example (and no 0 feature groups): any kernel of the
        # example's shape gives the empty result
        kernel = L.broadcast_in_dim_p.bind(np.zeros((), get_aval(rhs).dtype)[()], shape=_example_shape(rhs, dr),
                                           broadcast_dimensions=())
        return _conv_b([lhs, kernel], [dl, None], **params)
    if dl is None:
        rhs = moveaxis(rhs, dr, 0)
        O = get_aval(rhs).shape[1 + o_r]
        rhs = _split_axis(rhs, 1 + o_r, (G, O // G))  # [B, .., G, Og, ..]
        rhs = _merge3(moveaxis(rhs, 0, 1 + o_r), o_r)  # [.., G, B, Og, ..] merged
        out = L.conv_general_dilated_p.bind(lhs, rhs, **params)
        out = _split_axis(out, o_ax, (G, size, O // G))
        out = moveaxis(out, o_ax + 1, 0)  # the batch first, then (G, Og) merged back
        return _split_merge(out, 1 + o_ax), 0
    O = _example_shape(rhs, dr)[o_r]
    rhs = _merge_into(rhs, dr, o_r)  # out features (B, G, Og), batch-major
    lhs = _merge_into(lhs, dl, dn.lhs_spec[1])  # in features (B, G, Cg)
    out = L.conv_general_dilated_p.bind(lhs, rhs, **{**params, "feature_group_count": size * G})
    return _split_axis(out, o_ax, (size, O)), o_ax


def _merge3(x, axis):
    shape = get_aval(x).shape
    n = shape[axis] * shape[axis + 1] * shape[axis + 2]
    return L.reshape_p.bind(x, new_sizes=shape[:axis] + (n,) + shape[axis + 3:], dimensions=None)


def _split_merge(x, axis):
    shape = get_aval(x).shape
    return L.reshape_p.bind(x, new_sizes=shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:],
                            dimensions=None)


batching_rules[L.conv_general_dilated_p] = _conv_b


def _scatter_b(prim):
    """Unbatched indices: the batch is one more (leading) update window dim of the operand.
    Batched indices: an iota joins the index vector so each example writes its own slice."""
    def rule(vals, dims, *, dimension_numbers, **params):
        (x, idx, upd), (dx, di, du) = vals, dims
        dn = dimension_numbers
        size = _size(vals, dims)
        inc = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
        x, upd = bdim_at_front(x, dx, size), bdim_at_front(upd, du, size)
        if di is None:
            sdn = L.ScatterDimensionNumbers((0,) + inc(dn.update_window_dims), inc(dn.inserted_window_dims),
                                            inc(dn.scatter_dims_to_operand_dims))
            return prim.bind(x, idx, upd, dimension_numbers=sdn, **params), 0
        idx = moveaxis(idx, di, 0)
        ishape = get_aval(idx).shape
        counts = L.broadcasted_iota(get_aval(idx).dtype, ishape[:-1] + (1,), 0)
        idx = L.concatenate_p.bind(counts, idx, dimension=len(ishape) - 1)
        sdn = L.ScatterDimensionNumbers(inc(dn.update_window_dims), (0,) + inc(dn.inserted_window_dims),
                                        (0,) + inc(dn.scatter_dims_to_operand_dims))
        return prim.bind(x, idx, upd, dimension_numbers=sdn, **params), 0
    batching_rules[prim] = rule


for _p in (L.scatter_p, L.scatter_add_p, L.scatter_mul_p, L.scatter_min_p, L.scatter_max_p):
    _scatter_b(_p)


def _window_b(prim):
    def rule(vals, dims, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        (x,), (d,) = vals, dims
        x = moveaxis(x, d, 0)  # the batch dim gets a window of one element
        return prim.bind(x, window_dimensions=(1,) + tuple(window_dimensions),
                         window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding),
                         base_dilation=(1,) + tuple(base_dilation),
                         window_dilation=(1,) + tuple(window_dilation)), 0
    batching_rules[prim] = rule


for _p in (L.reduce_window_sum_p, L.reduce_window_max_p, L.reduce_window_min_p):
    _window_b(_p)


def _select_and_gather_add_b(vals, dims, *, select_prim, window_dimensions, window_strides, padding,
                             base_dilation, window_dilation):
    # JAX's rule: both operands batched first, the batch dim a window of one element
    size = _size(vals, dims)
    t, x = (bdim_at_front(v, d, size) for v, d in zip(vals, dims))
    return L.select_and_gather_add_p.bind(
        t, x, select_prim=select_prim, window_dimensions=(1,) + tuple(window_dimensions),
        window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding),
        base_dilation=(1,) + tuple(base_dilation), window_dilation=(1,) + tuple(window_dilation)), 0


batching_rules[L.select_and_gather_add_p] = _select_and_gather_add_b


# minixla.random's special functions (issue 14).
defvectorized(L.erf_inv_p)
defbroadcasting(L.fma_p, full=True)


def _sort_b(vals, dims, *, dimension, is_stable, num_keys):  # (issue 14)
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    ops = []
    for v, d in zip(vals, dims):
        if d is None:
            shape = get_aval(v).shape
            v = L.broadcast_in_dim_p.bind(v, shape=(size,) + shape, broadcast_dimensions=tuple(range(1, len(shape) + 1)))
        else:
            v = moveaxis(v, d, 0)
        ops.append(v)
    outs = L.sort_p.bind(*ops, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return outs, [0] * len(outs)


batching_rules[L.sort_p] = _sort_b


def _rng_bit_generator_b(vals, dims, *, shape, dtype, algorithm):  # (issue 14)
    # JAX's rule: the first key makes the bits of the whole batch (one more leading dim) and
    # alone advances; the other keys come back unchanged
    (keys,), (d,) = vals, dims
    keys = moveaxis(keys, d, 0)
    n, kshape = get_aval(keys).shape[0], get_aval(keys).shape[1:]
    first = L.reshape(L.slice(keys, (0,) * (1 + len(kshape)), (1,) + kshape), kshape)
    new_key, bits = L.rng_bit_generator_p.bind(first, shape=(n,) + tuple(shape), dtype=dtype, algorithm=algorithm)
    rest = L.slice(keys, (1,) + (0,) * len(kshape), (n,) + kshape)
    new_keys = L.concatenate([L.reshape(new_key, (1,) + kshape), rest], 0)
    return [new_keys, bits], [0, 0]


batching_rules[L.rng_bit_generator_p] = _rng_bit_generator_b
