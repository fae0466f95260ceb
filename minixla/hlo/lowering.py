"""Lowering a jaxpr to an ``HloModule`` (what ``jax/_src/interpreters/mlir.py`` does for JAX).

One rule per primitive in ``lowering_rules``: it receives a ``LoweringContext`` (to add
instructions), the HLO operands, the input avals, the output aval and the equation's params,
and returns the instruction holding the result. The jaxpr's implicit scalar broadcasting is
made explicit here: every HLO elementwise operand has the result's dims.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.jaxpr import ClosedJaxpr, Literal
from minixla.core.avals import ShapedArray
from minixla.lax.base import reduction_identity
from minixla.hlo.ir import HloComputation, HloInstruction, HloModule, Shape

#: primitive -> rule(ctx, operands, in_avals, out_aval, **params) -> HloInstruction
lowering_rules: dict = {}


class LoweringContext:
    """Adds instructions to one computation; carries the equation's metadata onto them."""

    def __init__(self, module: HloModule, comp: HloComputation):
        self.module = module
        self.comp = comp
        self.metadata: dict = {}

    def add(self, opcode, shape, operands=(), called=(), **attrs) -> HloInstruction:
        instr = HloInstruction(opcode, shape, operands, attrs, called, metadata=dict(self.metadata))
        return self.comp.add_instruction(instr)

    def constant(self, value, dtype) -> HloInstruction:
        value = np.asarray(value, dtype=dtype)
        instr = HloInstruction("constant", Shape(dtype, value.shape), literal=value)
        return self.comp.add_instruction(instr)

    def broadcast_to(self, x: HloInstruction, dims) -> HloInstruction:
        """Broadcast a rank-0 instruction to ``dims`` (no-op when the dims already match)."""
        if x.shape.dims == tuple(dims):
            return x
        assert x.shape.rank == 0, (x, dims)
        return self.add("broadcast", Shape(x.shape.dtype, dims), [x], dimensions=())

    def region(self, opcode, dtype) -> HloComputation:
        """A scalar reducer computation ``(a, b) -> opcode(a, b)``, the ``to_apply`` of a reduce."""
        comp = self.module.new_computation(f"region_{opcode}")
        s = Shape(dtype, ())
        a = comp.add_instruction(HloInstruction("parameter", s, name=self.module.unique_name("Arg_0"),
                                                parameter_number=0))
        b = comp.add_instruction(HloInstruction("parameter", s, name=self.module.unique_name("Arg_1"),
                                                parameter_number=1))
        comp.root = comp.add_instruction(HloInstruction(opcode, s, [a, b], name=self.module.unique_name(opcode)))
        return comp


def shape_of(aval) -> Shape:
    return Shape(aval.dtype, aval.shape)


def lower_jaxpr(closed: ClosedJaxpr, name: str = "jit_fn") -> HloModule:
    """Lower a ``ClosedJaxpr`` to an ``HloModule`` whose entry takes the jaxpr's inputs.

    Constvars become ``constant`` instructions; several outputs become a ``tuple`` root.
    Raises ``UnsupportedError`` for a primitive with no lowering rule.
    """
    module = HloModule(name)
    comp = module.new_computation("main")
    module.entry = comp
    ctx = LoweringContext(module, comp)
    jaxpr = closed.jaxpr
    params = []
    for i, v in enumerate(jaxpr.invars):
        p = HloInstruction("parameter", shape_of(v.aval), name=f"p{i}", parameter_number=i)
        module._names.add(p.name)
        params.append(comp.add_instruction(p))
    consts = [ctx.constant(np.asarray(value), v.aval.dtype) for v, value in zip(jaxpr.constvars, closed.consts)]
    outs = lower_jaxpr_body(ctx, jaxpr, consts, params)
    if len(outs) == 1:
        comp.root = outs[0]
    else:
        comp.root = ctx.add("tuple", Shape.tuple_of([o.shape for o in outs]), outs)
    comp.remove_dead()
    return module


def lower_jaxpr_body(ctx: LoweringContext, jaxpr, consts, args) -> list:
    """Lower ``jaxpr``'s equations into ``ctx.comp`` given HLO instructions for its constvars
    and invars; returns the instructions of its outputs. Control-flow rules call it for their
    sub-jaxprs, each into a computation of its own."""
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    _lower_eqns(ctx, jaxpr, env)
    ctx.metadata = {}
    return [_read(ctx, env, a) for a in jaxpr.outvars]


def _read(ctx, env, atom):
    if isinstance(atom, Literal):
        return ctx.constant(atom.value, atom.aval.dtype)
    return env[atom]


def _lower_eqns(ctx, jaxpr, env) -> None:
    """Lower each equation of ``jaxpr`` into ``ctx``'s computation; ``env``: Var -> instruction.
    A rule of a ``multiple_results`` primitive gets the list of output avals and returns a list."""
    outer = dict(ctx.metadata)
    for eqn in jaxpr.eqns:
        rule = lowering_rules.get(eqn.primitive)
        if rule is None:
            raise errors.UnsupportedError(f"no HLO lowering rule for primitive '{eqn.primitive.name}'")
        ctx.metadata = {**outer, "op_name": eqn.primitive.name}
        if eqn.source_info is not None:
            ctx.metadata.update(source_file=eqn.source_info.filename, source_line=eqn.source_info.lineno)
            if eqn.source_info.name_stack:  # (named_scope: "scope/prim", as JAX's op_name)
                ctx.metadata["op_name"] = f"{eqn.source_info.name_stack}/{eqn.primitive.name}"
        operands = [_read(ctx, env, a) for a in eqn.invars]
        in_avals = [a.aval for a in eqn.invars]
        if eqn.primitive.multiple_results:
            outs = rule(ctx, operands, in_avals, [v.aval for v in eqn.outvars], **eqn.params)
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = rule(ctx, operands, in_avals, eqn.outvars[0].aval, **eqn.params)
    ctx.metadata = outer


def inline_jaxpr(ctx, closed: ClosedJaxpr, operands, metadata=None) -> list:
    """Lower the sub-jaxpr of a call-like equation (``custom_jvp_call``, ``remat2``, ...) in
    place: its inputs are ``operands`` and its instructions join ``ctx``'s computation (XLA
    inlines such calls too). ``metadata`` is added to every instruction it emits. Returns
    the instructions of its outputs."""
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.invars, operands))
    saved = ctx.metadata
    ctx.metadata = {**saved, **(metadata or {})}
    for v, value in zip(jaxpr.constvars, closed.consts):
        env[v] = ctx.constant(np.asarray(value), v.aval.dtype)
    _lower_eqns(ctx, jaxpr, env)
    outs = [_read(ctx, env, a) for a in jaxpr.outvars]
    ctx.metadata = saved
    return outs


# ---------------------------------------------------------------------------------------
# Rules.

# stop_gradient only matters to autodiff: in HLO it is its operand (as in JAX's lowering)
lowering_rules[lax.stop_gradient_p] = lambda ctx, operands, in_avals, out_aval: operands[0]

def _elementwise(opcode, **attrs):
    def rule(ctx, operands, in_avals, out_aval, **params):
        dims = out_aval.shape
        ops = [ctx.broadcast_to(o, dims) for o in operands]
        return ctx.add(opcode, shape_of(out_aval), ops, **attrs)
    return rule


for _prim, _opcode in [
    (lax.neg_p, "negate"), (lax.abs_p, "abs"), (lax.sign_p, "sign"), (lax.floor_p, "floor"),
    (lax.ceil_p, "ceil"), (lax.exp_p, "exponential"), (lax.log_p, "log"), (lax.tanh_p, "tanh"),
    (lax.logistic_p, "logistic"), (lax.sqrt_p, "sqrt"), (lax.rsqrt_p, "rsqrt"), (lax.not_p, "not"),
    (lax.add_p, "add"), (lax.add_any_p, "add"), (lax.sub_p, "subtract"), (lax.mul_p, "multiply"), (lax.div_p, "divide"),
    (lax.max_p, "maximum"), (lax.min_p, "minimum"), (lax.and_p, "and"), (lax.or_p, "or"),
]:
    lowering_rules[_prim] = _elementwise(_opcode)

for _prim, _dir in [(lax.eq_p, "EQ"), (lax.ne_p, "NE"), (lax.lt_p, "LT"), (lax.le_p, "LE"),
                    (lax.gt_p, "GT"), (lax.ge_p, "GE")]:
    lowering_rules[_prim] = _elementwise("compare", direction=_dir)


def _integer_pow(ctx, operands, in_avals, out_aval, *, y):
    # x**y by repeated squaring, as JAX lowers it: the same multiplies, so the same rounding.
    x, = operands
    shape = shape_of(out_aval)
    if y == 0:
        return ctx.add("broadcast", shape, [ctx.constant(1, out_aval.dtype)], dimensions=())
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else ctx.add("multiply", shape, [acc, base])
        n >>= 1
        if n:
            base = ctx.add("multiply", shape, [base, base])
    if y < 0:
        one = ctx.add("broadcast", shape, [ctx.constant(1, out_aval.dtype)], dimensions=())
        acc = ctx.add("divide", shape, [one, acc])
    return acc


lowering_rules[lax.integer_pow_p] = _integer_pow


def _select_n(ctx, operands, in_avals, out_aval, **_):
    which, *cases = operands
    shape = shape_of(out_aval)
    which = ctx.broadcast_to(which, out_aval.shape)
    if len(cases) == 1:
        return cases[0]
    if which.shape.dtype == np.bool_:
        return ctx.add("select", shape, [which, cases[1], cases[0]])
    # Integer selector: cases[i] where which == i; out-of-range selectors pick the last case.
    pred_shape = Shape(np.bool_, out_aval.shape)
    result = cases[-1]
    for i in reversed(range(len(cases) - 1)):
        idx = ctx.add("broadcast", which.shape, [ctx.constant(i, which.shape.dtype)], dimensions=())
        pred = ctx.add("compare", pred_shape, [which, idx], direction="EQ")
        result = ctx.add("select", shape, [pred, cases[i], result])
    return result


lowering_rules[lax.select_n_p] = _select_n


def _convert(ctx, operands, in_avals, out_aval, **_):
    x, = operands
    if x.shape.dtype == out_aval.dtype:
        return x
    return ctx.add("convert", shape_of(out_aval), [x])


lowering_rules[lax.convert_element_type_p] = _convert


def _broadcast_in_dim(ctx, operands, in_avals, out_aval, *, shape, broadcast_dimensions):
    x, = operands
    # XLA's broadcast never stretches a dim: drop the size-1 dims that get stretched first.
    keep = [i for i, d in enumerate(broadcast_dimensions) if x.shape.dims[i] == shape[d]]
    if len(keep) != x.shape.rank:
        x = ctx.add("reshape", Shape(x.shape.dtype, [x.shape.dims[i] for i in keep]), [x])
    dims = tuple(broadcast_dimensions[i] for i in keep)
    if x.shape.dims == tuple(shape):
        return x
    return ctx.add("broadcast", shape_of(out_aval), [x], dimensions=dims)


lowering_rules[lax.broadcast_in_dim_p] = _broadcast_in_dim


def _reshape(ctx, operands, in_avals, out_aval, *, new_sizes, dimensions=None):
    x, = operands
    return x if x.shape.dims == tuple(new_sizes) else ctx.add("reshape", shape_of(out_aval), [x])


lowering_rules[lax.reshape_p] = _reshape
lowering_rules[lax.transpose_p] = lambda ctx, ops, ia, oa, *, permutation: ctx.add(
    "transpose", shape_of(oa), ops, dimensions=tuple(permutation))


def _slice(ctx, operands, in_avals, out_aval, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * len(start_indices)
    return ctx.add("slice", shape_of(out_aval), operands,
                   slice=tuple(zip(start_indices, limit_indices, strides)))


lowering_rules[lax.slice_p] = _slice
lowering_rules[lax.iota_p] = lambda ctx, ops, ia, oa, *, dtype, shape, dimension: ctx.add(
    "iota", shape_of(oa), [], iota_dimension=dimension)


reduction_init = reduction_identity  # (lax.base: shared with reduce-windows and where= masks)


def _reduce(opcode):
    def rule(ctx, operands, in_avals, out_aval, *, axes):
        x, = operands
        if not axes:
            return x
        init = ctx.constant(reduction_init(opcode, x.shape.dtype), x.shape.dtype)
        return ctx.add("reduce", shape_of(out_aval), [x, init],
                       called=[ctx.region(opcode, x.shape.dtype)], dimensions=tuple(axes))
    return rule


lowering_rules[lax.reduce_sum_p] = _reduce("add")
lowering_rules[lax.reduce_max_p] = _reduce("maximum")
lowering_rules[lax.reduce_min_p] = _reduce("minimum")


_NARROW = ("float16", "bfloat16")


def _dot_general(ctx, operands, in_avals, out_aval, *, dimension_numbers, precision=None,
                 preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    # f16/bf16 products accumulate in f32 and round once at the end (as XLA:CPU does).
    narrow = out_aval.dtype.name in _NARROW
    shape = Shape(np.float32, out_aval.shape) if narrow else shape_of(out_aval)
    dot = ctx.add("dot", shape, operands, lhs_batch_dims=tuple(lb),
                  lhs_contracting_dims=tuple(lc), rhs_batch_dims=tuple(rb),
                  rhs_contracting_dims=tuple(rc))
    return ctx.add("convert", shape_of(out_aval), [dot]) if narrow else dot


lowering_rules[lax.dot_general_p] = _dot_general


def conv_dim_labels(dn, rank) -> str:
    """ConvDimensionNumbers -> XLA's ``dim_labels`` text, e.g. NHWC/HWIO/NHWC -> ``b01f_01io->b01f``."""
    def labels(spec, first, second):
        out = [""] * rank
        out[spec[0]], out[spec[1]] = first, second
        for i, d in enumerate(spec[2:]):
            out[d] = str(i)
        return "".join(out)
    return (f"{labels(dn.lhs_spec, 'b', 'f')}_{labels(dn.rhs_spec, 'o', 'i')}"
            f"->{labels(dn.out_spec, 'b', 'f')}")


def parse_dim_labels(text: str) -> lax.ConvDimensionNumbers:
    """Inverse of ``conv_dim_labels``: ``'b01f_01io->b01f'`` -> ConvDimensionNumbers."""
    lhs_rhs, out = text.split("->")
    lhs, rhs = lhs_rhs.split("_")

    def spec(s, first, second):
        nsp = len(s) - 2
        return (s.index(first), s.index(second)) + tuple(s.index(str(i)) for i in range(nsp))
    return lax.ConvDimensionNumbers(spec(lhs, "b", "f"), spec(rhs, "o", "i"), spec(out, "b", "f"))


def _conv(ctx, operands, in_avals, out_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
          dimension_numbers, feature_group_count=1, batch_group_count=1, precision=None,
          preferred_element_type=None):
    dn = dimension_numbers
    rhs_shape = in_avals[1].shape
    window = dict(size=tuple(rhs_shape[d] for d in dn.rhs_spec[2:]), stride=tuple(window_strides),
                  pad=tuple(tuple(p) for p in padding), lhs_dilate=tuple(lhs_dilation),
                  rhs_dilate=tuple(rhs_dilation))
    narrow = out_aval.dtype.name in _NARROW
    shape = Shape(np.float32, out_aval.shape) if narrow else shape_of(out_aval)
    conv = ctx.add("convolution", shape, operands, window=window,
                   dim_labels=conv_dim_labels(dn, len(rhs_shape)),
                   feature_group_count=feature_group_count)
    return ctx.add("convert", shape_of(out_aval), [conv]) if narrow else conv


lowering_rules[lax.conv_general_dilated_p] = _conv


# ---------------------------------------------------------------------------------------
# The rest of the lax surface (issue 3).

for _prim, _opcode in [
    (lax.expm1_p, "exponential-minus-one"), (lax.log1p_p, "log-plus-one"), (lax.cbrt_p, "cbrt"),
    (lax.sin_p, "sine"), (lax.cos_p, "cosine"), (lax.tan_p, "tan"), (lax.erf_p, "erf"), (lax.erfc_p, "erfc"),
    (lax.is_finite_p, "is-finite"), (lax.rem_p, "remainder"),
    (lax.atan2_p, "atan2"), (lax.xor_p, "xor"), (lax.shift_left_p, "shift-left"),
    (lax.shift_right_logical_p, "shift-right-logical"),
    (lax.shift_right_arithmetic_p, "shift-right-arithmetic"), (lax.clamp_p, "clamp"),
    (lax.bitcast_convert_type_p, "bitcast-convert"),
]:
    lowering_rules[_prim] = _elementwise(_opcode)


def _pow(ctx, operands, in_avals, out_aval):
    # XLA's power takes one dtype: an integer exponent is converted to the base's (as JAX lowers it).
    x, y = operands
    if in_avals[1].dtype != out_aval.dtype:
        y = ctx.add("convert", Shape(out_aval.dtype, in_avals[1].shape), [y])
    return _elementwise("power")(ctx, [x, y], in_avals, out_aval)


lowering_rules[lax.pow_p] = _pow


def _exp2(ctx, operands, in_avals, out_aval):
    # As JAX lowers it: exp(x * log(2)), with log(2) rounded to the operand's dtype.
    x, = operands
    shape = shape_of(out_aval)
    ln2 = ctx.broadcast_to(ctx.constant(np.log(2), out_aval.dtype), out_aval.shape)
    return ctx.add("exponential", shape, [ctx.add("multiply", shape, [ln2, x])])


lowering_rules[lax.exp2_p] = _exp2
lowering_rules[lax.round_p] = lambda ctx, ops, ia, oa, *, rounding_method: ctx.add(
    "round-nearest-afz" if rounding_method == 0 else "round-nearest-even", shape_of(oa), ops)
lowering_rules[lax.squeeze_p] = lambda ctx, ops, ia, oa, *, dimensions: _reshape(
    ctx, ops, ia, oa, new_sizes=oa.shape)
lowering_rules[lax.rev_p] = lambda ctx, ops, ia, oa, *, dimensions: ops[0] if not dimensions else ctx.add(
    "reverse", shape_of(oa), ops, dimensions=tuple(dimensions))
lowering_rules[lax.pad_p] = lambda ctx, ops, ia, oa, *, padding_config: ctx.add(
    "pad", shape_of(oa), ops, padding_config=tuple(tuple(c) for c in padding_config))
lowering_rules[lax.concatenate_p] = lambda ctx, ops, ia, oa, *, dimension: ops[0] if len(ops) == 1 else ctx.add(
    "concatenate", shape_of(oa), ops, dimensions=(dimension,))
lowering_rules[lax.dynamic_slice_p] = lambda ctx, ops, ia, oa, *, slice_sizes: ctx.add(
    "dynamic-slice", shape_of(oa), ops, dynamic_slice_sizes=tuple(slice_sizes))
lowering_rules[lax.dynamic_update_slice_p] = lambda ctx, ops, ia, oa: ctx.add(
    "dynamic-update-slice", shape_of(oa), ops)


def _gather(ctx, operands, in_avals, out_aval, *, dimension_numbers, slice_sizes, mode=None,
            fill_value=None):
    dn = dimension_numbers
    x, idx = operands
    fill = mode is lax.GatherScatterMode.FILL_OR_DROP
    if fill:
        # As JAX lowers FILL_OR_DROP: the indices as signed ints wide enough for the operand
        # (so a uint32 index >= 2**31 wraps negative, as in JAX), a window is in bounds iff
        # 0 <= start <= dim - size for each component, and the native (clamping) gather's
        # result is replaced by the fill where it is not.
        itype = np.dtype(np.int64 if any(d > np.iinfo(np.int32).max for d in x.shape.dims) else np.int32)
        itype = np.dtype(lax.canonicalize_dtype(itype))
        if idx.shape.dtype != itype:
            idx = ctx.add("convert", Shape(itype, idx.shape.dims), [idx])
    out = ctx.add("gather", shape_of(out_aval), [x, idx], offset_dims=tuple(dn.offset_dims),
                  collapsed_slice_dims=tuple(dn.collapsed_slice_dims),
                  start_index_map=tuple(dn.start_index_map),
                  index_vector_dim=in_avals[1].ndim - 1, slice_sizes=tuple(slice_sizes))
    if not fill:
        return out
    idims, k = idx.shape.dims, idx.shape.rank - 1
    upper = np.array([x.shape.dims[d] - slice_sizes[d] for d in dn.start_index_map], itype)
    pred = Shape(np.dtype(np.bool_), idims)
    ge = ctx.add("compare", pred, [idx, ctx.broadcast_to(ctx.constant(0, itype), idims)], direction="GE")
    le = ctx.add("compare", pred, [idx, ctx.add("broadcast", Shape(itype, idims), [ctx.constant(upper, itype)],
                                                dimensions=(k,))], direction="LE")
    ok = ctx.add("and", pred, [ge, le])
    mask = ctx.add("reduce", Shape(np.dtype(np.bool_), idims[:-1]), [ok, ctx.constant(True, np.bool_)],
                   called=[ctx.region("and", np.dtype(np.bool_))], dimensions=(k,))
    batch_dims = tuple(d for d in range(out_aval.ndim) if d not in dn.offset_dims)
    mask = ctx.add("broadcast", Shape(np.dtype(np.bool_), out_aval.shape), [mask], dimensions=batch_dims)
    filled = ctx.broadcast_to(ctx.constant(fill_value, out_aval.dtype), out_aval.shape)
    return ctx.add("select", shape_of(out_aval), [mask, out, filled])


lowering_rules[lax.gather_p] = _gather


def scatter_region(ctx, combiner, dtype) -> HloComputation:
    """The scatter's ``to_apply``: ``(old, update) -> combiner(old, update)``; for a plain
    scatter it returns the update."""
    if combiner is not None:
        return ctx.region(combiner, dtype)
    comp = ctx.module.new_computation("region_set")
    s = Shape(dtype, ())
    comp.add_instruction(HloInstruction("parameter", s, name=ctx.module.unique_name("Arg_0"),
                                        parameter_number=0))
    comp.root = comp.add_instruction(HloInstruction("parameter", s, name=ctx.module.unique_name("Arg_1"),
                                                    parameter_number=1))
    return comp


def _clamp_scatter_indices(ctx, operand, idx, updates, dn):
    """CLIP mode: each start index clamped to [0, dim - window size] in the indices' dtype."""
    a = iter(dn.update_window_dims)
    window = [1 if d in dn.inserted_window_dims else updates.shape.dims[next(a)]
              for d in range(operand.shape.rank)]
    upper = [operand.shape.dims[d] - window[d] for d in dn.scatter_dims_to_operand_dims]
    if min(upper, default=0) < 0:  # an empty operand: every window is dropped anyway
        return idx
    dt = idx.shape.dtype
    upper = np.array([min(u, np.iinfo(dt).max) for u in upper], dt)
    dims = idx.shape.dims
    hi = ctx.add("broadcast", Shape(dt, dims), [ctx.constant(upper, dt)], dimensions=(len(dims) - 1,))
    return ctx.add("clamp", Shape(dt, dims), [ctx.broadcast_to(ctx.constant(0, dt), dims), idx, hi])


def _scatter(combiner):
    def rule(ctx, operands, in_avals, out_aval, *, dimension_numbers, indices_are_sorted=False,
             unique_indices=False, mode=None):
        dn = dimension_numbers
        x, idx, upd = operands
        if mode is lax.GatherScatterMode.CLIP:
            idx = _clamp_scatter_indices(ctx, x, idx, upd, dn)
        # FILL_OR_DROP and PROMISE_IN_BOUNDS are HLO scatter's own semantics: out-of-bounds
        # windows are skipped.
        return ctx.add("scatter", shape_of(out_aval), [x, idx, upd],
                       called=[scatter_region(ctx, combiner, out_aval.dtype)],
                       update_window_dims=tuple(dn.update_window_dims),
                       inserted_window_dims=tuple(dn.inserted_window_dims),
                       scatter_dims_to_operand_dims=tuple(dn.scatter_dims_to_operand_dims),
                       index_vector_dim=in_avals[1].ndim - 1)
    return rule


for _prim, _comb in [(lax.scatter_p, None), (lax.scatter_add_p, "add"), (lax.scatter_mul_p, "multiply"),
                     (lax.scatter_min_p, "minimum"), (lax.scatter_max_p, "maximum")]:
    lowering_rules[_prim] = _scatter(_comb)

lowering_rules[lax.reduce_prod_p] = _reduce("multiply")
lowering_rules[lax.reduce_and_p] = _reduce("and")
lowering_rules[lax.reduce_or_p] = _reduce("or")


def _argminmax(which):
    def rule(ctx, operands, in_avals, out_aval, *, axes, index_dtype):
        # As single-operand reduces (both backends' reduce kernels handle them; XLA uses one
        # variadic reduce): m = max(x) along the axis, NaN-propagating; the answer is the
        # smallest index i with x[i] == m, or with x[i] NaN (then m is NaN: the first NaN).
        x, = operands
        dims = x.shape.dims
        axis = axes[0]
        kept = tuple(d for d in range(len(dims)) if d != axis)
        m = _reduce(which)(ctx, [x], in_avals, out_aval.update(dtype=x.shape.dtype), axes=axes)
        m = ctx.add("broadcast", x.shape, [m], dimensions=kept) if kept or dims else m
        pred = Shape(np.bool_, dims)
        hit = ctx.add("compare", pred, [x, m], direction="EQ")
        if x.shape.dtype.kind == "f" or x.shape.dtype.name == "bfloat16":
            hit = ctx.add("or", pred, [hit, ctx.add("compare", pred, [x, x], direction="NE")])
        idx_shape = Shape(index_dtype, dims)
        iota = ctx.add("iota", idx_shape, [], iota_dimension=axis)
        n = ctx.add("broadcast", idx_shape, [ctx.constant(dims[axis], index_dtype)], dimensions=())
        candidates = ctx.add("select", idx_shape, [hit, iota, n])
        return _reduce("minimum")(ctx, [candidates], in_avals, out_aval, axes=axes)
    return rule


lowering_rules[lax.argmax_p] = _argminmax("maximum")
lowering_rules[lax.argmin_p] = _argminmax("minimum")


def _keeps_trivial_window(dtype) -> bool:
    """Whether XLA:CPU keeps a reduce-window of one-element windows: for bfloat16, which it
    computes in f32 (a convert around the window, added before its simplifier runs), so the
    window is ``init . x`` -- a bf16 ``cumsum([-0.0])`` is +0.0 in JAX, the f16/f32 one -0.0."""
    return np.dtype(dtype).name == "bfloat16"


def _cumulative(opcode):
    def rule(ctx, operands, in_avals, out_aval, *, axis, reverse):
        # A reduce-window whose window spans the whole axis, padded so that output i sees
        # elements 0..i (or i..n-1 when reversed), as JAX lowers cumulative reductions.
        x, = operands
        dims = x.shape.dims
        n = dims[axis]
        size = tuple(n if d == axis else 1 for d in range(len(dims)))
        pad = tuple(((0, n - 1) if reverse else (n - 1, 0)) if d == axis else (0, 0)
                    for d in range(len(dims)))
        ones = (1,) * len(dims)
        if n == 0 or (n == 1 and not _keeps_trivial_window(x.shape.dtype)):
            # Nothing to accumulate: x itself (XLA also drops a size-1 reduce-window, so JAX
            # eager returns x unchanged: cumsum(-0.0) is -0.0, not 0.0 + -0.0).
            return x
        init = ctx.constant(reduction_init(opcode, x.shape.dtype), x.shape.dtype)
        window = dict(size=size, stride=ones, pad=pad, lhs_dilate=ones, rhs_dilate=ones)
        return ctx.add("reduce-window", shape_of(out_aval), [x, init],
                       called=[ctx.region(opcode, x.shape.dtype)], window=window)
    return rule


for _prim, _opcode in [(lax.cumsum_p, "add"), (lax.cumprod_p, "multiply"), (lax.cummax_p, "maximum"),
                       (lax.cummin_p, "minimum")]:
    lowering_rules[_prim] = _cumulative(_opcode)


# ---------------------------------------------------------------------------------------
# Inverse trigonometric and hyperbolic functions: JAX lowers them to CHLO ops, which XLA
# decomposes into plain HLO before it optimizes; these are the same decompositions, op for
# op, so every backend computes JAX's values (including its roundings: sinh/cosh of large
# arguments are within ~25 ulp, as XLA's, because exp(x - log 2) rounds x - log 2 first).

class _Elementwise:
    """Builds elementwise HLO of one shape and dtype: constants broadcast, compares, selects."""

    def __init__(self, ctx, aval):
        self.ctx, self.dims, self.dtype = ctx, aval.shape, np.dtype(aval.dtype)
        self.shape = shape_of(aval)

    def c(self, value):
        return self.ctx.broadcast_to(self.ctx.constant(value, self.dtype), self.dims)

    def __call__(self, opcode, *xs):
        return self.ctx.add(opcode, self.shape, list(xs))

    def compare(self, a, b, direction):
        return self.ctx.add("compare", Shape(np.bool_, self.dims), [a, b], direction=direction)

    def select(self, pred, on_true, on_false):
        return self.ctx.add("select", self.shape, [pred, on_true, on_false])


def _decomposed(build, upcast=False):
    """The rule emitting ``build``; with ``upcast``, f16/bf16 are computed in f32 and rounded
    once at the end (XLA's decomposition of sinh/cosh does that)."""
    def rule(ctx, operands, in_avals, out_aval):
        x, = operands
        if upcast and out_aval.dtype.name in _NARROW:
            wide = ShapedArray(out_aval.shape, np.dtype(np.float32))
            up = ctx.add("convert", shape_of(wide), [x])
            return ctx.add("convert", shape_of(out_aval), [build(_Elementwise(ctx, wide), up)])
        return build(_Elementwise(ctx, out_aval), x)
    return rule


def _asin(e, x):  # 2 atan2(x, 1 + sqrt((1 - x)(1 + x)))
    one = e.c(1)
    root = e("sqrt", e("multiply", e("subtract", one, x), e("add", x, one)))
    return e("multiply", e.c(2), e("atan2", x, e("add", one, root)))


def _acos(e, x):  # atan2(sqrt((1 - x)(1 + x)), x)
    one = e.c(1)
    return e("atan2", e("sqrt", e("multiply", e("subtract", one, x), e("add", x, one))), x)


def _sinh(e, x):  # |x| < 1: (expm1(x) + expm1(x) / (expm1(x) + 1)) / 2; else exp(x - ln 2) - exp(-x - ln 2)
    one, neg_ln2 = e.c(1), e.c(-np.log(2))
    em1 = e("exponential-minus-one", x)
    small = e("multiply", e("add", em1, e("divide", em1, e("add", em1, one))), e.c(0.5))
    large = e("subtract", e("exponential", e("add", x, neg_ln2)), e("exponential", e("subtract", neg_ln2, x)))
    return e.select(e.compare(e("abs", x), one, "LT"), small, large)


def _cosh(e, x):  # exp(x - ln 2) + exp(-x - ln 2)
    neg_ln2 = e.c(-np.log(2))
    return e("add", e("exponential", e("add", x, neg_ln2)), e("exponential", e("subtract", neg_ln2, x)))


def _asinh(e, x):  # sign(x) * (|x| >= sqrt(max) ? log|x| + ln 2 : log1p(|x| + x^2 / (1 + sqrt(1 + x^2))))
    one, ax = e.c(1), e("abs", x)
    big = e.compare(ax, e.c(np.sqrt(np.float64(ml_dtypes.finfo(e.dtype).max))), "GE")
    sq = e("multiply", ax, ax)
    near = e("log-plus-one", e("add", ax, e("divide", sq, e("add", e("sqrt", e("add", sq, one)), one))))
    far = e("add", e("log", ax), e.c(np.log(2)))
    return e("multiply", e("sign", x), e.select(big, far, near))


def _acosh(e, x):  # x >= max/2 ? log x + ln 2 : log1p(sqrt(x - 1) (sqrt(x + 1) + sqrt(x - 1)))
    one = e.c(1)
    big = e.compare(x, e.c(np.float64(ml_dtypes.finfo(e.dtype).max) / 2), "GE")
    below = e("sqrt", e("subtract", x, one))
    near = e("log-plus-one", e("multiply", below, e("add", e("sqrt", e("add", x, one)), below)))
    return e.select(big, e("add", e("log", x), e.c(np.log(2))), near)


def _atanh(e, x):  # |x| > 1 ? NaN : (log1p(x) - log1p(-x)) / 2
    half_log = e("multiply", e("subtract", e("log-plus-one", x), e("log-plus-one", e("negate", x))), e.c(0.5))
    return e.select(e.compare(e("abs", x), e.c(1), "GT"), e.c(np.nan), half_log)


lowering_rules[lax.asin_p] = _decomposed(_asin)
lowering_rules[lax.acos_p] = _decomposed(_acos)
lowering_rules[lax.atan_p] = _decomposed(lambda e, x: e("atan2", x, e.c(1)))
lowering_rules[lax.sinh_p] = _decomposed(_sinh, upcast=True)
lowering_rules[lax.cosh_p] = _decomposed(_cosh, upcast=True)
lowering_rules[lax.asinh_p] = _decomposed(_asinh)
lowering_rules[lax.acosh_p] = _decomposed(_acosh)
lowering_rules[lax.atanh_p] = _decomposed(_atanh)


def _window_reduction(name):
    opcode = lax.windows.REDUCERS[name][0]

    def rule(ctx, operands, in_avals, out_aval, *, window_dimensions, window_strides, padding,
             base_dilation, window_dilation):
        x, = operands
        trivial = (all(w == 1 for w in window_dimensions) and all(s == 1 for s in window_strides)
                   and all(tuple(p) == (0, 0) for p in padding) and all(b == 1 for b in base_dilation))
        if trivial and not _keeps_trivial_window(x.shape.dtype):
            # Each window is one element: x itself (as XLA's simplifier drops a trivial
            # reduce-window, so JAX eager gives x: a sum keeps -0.0, not 0.0 + -0.0)
            return x
        dtype = x.shape.dtype
        init = ctx.constant(lax.windows.identity(name, dtype), dtype)
        window = dict(size=tuple(window_dimensions), stride=tuple(window_strides),
                      pad=tuple(tuple(p) for p in padding), lhs_dilate=tuple(base_dilation),
                      rhs_dilate=tuple(window_dilation))
        return ctx.add("reduce-window", shape_of(out_aval), [x, init], called=[ctx.region(opcode, dtype)],
                       window=window)
    return rule


for _name in lax.windows.REDUCERS:
    lowering_rules[lax.windows._PRIMS[_name]] = _window_reduction(_name)


def _select_and_gather_add(ctx, operands, in_avals, out_aval, **params):
    """Pooling's tangent (issue 14) inlines its expansion in lax ops
    (``minixla.lax.windows_select.gather_selected``: pad, slice, compare, select), as JAX's
    ``mlir.lower_fun`` lowers it to a reduce-window over pairs."""
    closed = _traced_gather(tuple((tuple(a.shape), np.dtype(a.dtype)) for a in in_avals),
                            tuple(sorted(params.items())))
    out, = inline_jaxpr(ctx, closed, operands)
    return out


@functools.lru_cache(maxsize=64)
def _traced_gather(avals, params):
    from minixla.core.tracing import trace_to_jaxpr
    return trace_to_jaxpr(lambda t, x: [lax.windows_select.gather_selected(t, x, **dict(params))],
                          [ShapedArray(s, d) for s, d in avals])


lowering_rules[lax.select_and_gather_add_p] = _select_and_gather_add


# minixla.random's special functions (issue 14).

lowering_rules[lax.fma_p] = _elementwise("fma")


def _erf_inv(ctx, operands, in_avals, out_aval):
    """XLA's float32 decomposition of ``chlo.erf_inv`` (see ``minixla.lax.special``), with the
    Horner steps as ``fma`` s; float16/bfloat16 are computed in float32, as XLA does."""
    x, = operands
    dtype, dims = np.dtype(out_aval.dtype), out_aval.shape
    if dtype.itemsize == 8:
        raise errors.UnsupportedError("erf_inv of float64 under jit is not supported (eager only)")
    f32 = np.dtype(np.float32)
    s = Shape(f32, dims)
    if dtype != f32:
        x = ctx.add("convert", s, [x])

    def c(v):
        return ctx.broadcast_to(ctx.constant(v, f32), dims)

    def op(opcode, *xs, **attrs):
        return ctx.add(opcode, Shape(np.bool_, dims) if opcode == "compare" else s, list(xs), **attrs)
    w = op("negate", op("log-plus-one", op("multiply", op("negate", x), x)))
    small = op("compare", w, c(5.0), direction="LT")
    w = op("select", small, op("subtract", w, c(2.5)), op("subtract", op("sqrt", w), c(3.0)))
    lo, hi = lax.special.ERF_INV_F32
    p = op("select", small, c(lo[0]), c(hi[0]))
    for a, b in zip(lo[1:], hi[1:]):
        p = op("fma", p, w, op("select", small, c(a), c(b)))
    at_one = op("compare", op("abs", x), c(1.0), direction="EQ")
    out = op("select", at_one, op("multiply", x, c(np.inf)), op("multiply", p, x))
    return out if dtype == f32 else ctx.add("convert", shape_of(out_aval), [out])


lowering_rules[lax.erf_inv_p] = _erf_inv


def _expanded(expand):
    """Lower by tracing ``expand`` (minixla lax ops, ``minixla.lax.special_expansions``) on
    operands broadcast to the result's shape and inlining its jaxpr, as JAX's
    ``mlir.lower_fun``; float16/bfloat16 run it in float32, as XLA and JAX do."""
    import functools

    from minixla.core.tracing import trace_to_jaxpr

    @functools.lru_cache(maxsize=64)  # (igamma's expansion holds lgamma, digamma, two loops)
    def traced(dims, dtype, n):
        return trace_to_jaxpr(lambda *xs: [expand(*xs)], [ShapedArray(dims, dtype)] * n)

    def rule(ctx, operands, in_avals, out_aval, **params):
        dims, dtype = tuple(out_aval.shape), np.dtype(out_aval.dtype)
        wide = np.dtype(np.float32) if dtype.name in _NARROW else dtype
        ops = [ctx.broadcast_to(o, dims) for o in operands]
        if wide != dtype:
            ops = [ctx.add("convert", Shape(wide, dims), [o]) for o in ops]
        out, = inline_jaxpr(ctx, traced(dims, wide, len(ops)), ops)
        return out if wide == dtype else ctx.add("convert", shape_of(out_aval), [out])
    return rule


for _name, _expand in lax.special_expansions.EXPANSIONS.items():
    lowering_rules[getattr(lax.special, _name + "_p")] = _expanded(_expand)


# ---------------------------------------------------------------------------------------
# Sorting (issue 14). XLA's ``sort`` has one tuple-shaped result for several operands; minixla's
# backends have no tuples, so each result is its own ``sort`` instruction of all the operands
# with ``result_index`` naming the one it returns (a ``get-tuple-element`` fused into the sort).
# The comparator is implicit: JAX's (``minixla.lax.sorting``), lexicographic on the first
# ``num_keys`` operands.

def _sort(ctx, operands, in_avals, out_avals, *, dimension, is_stable, num_keys):
    return [ctx.add("sort", shape_of(a), operands, dimensions=(dimension,), is_stable=is_stable,
                    num_keys=num_keys, result_index=j) for j, a in enumerate(out_avals)]


lowering_rules[lax.sort_p] = _sort


from minixla.hlo import control_flow as _control_flow  # noqa: E402,F401 (its rows: while, conditional)
from minixla.hlo import rng as _rng  # noqa: E402,F401 (its rows: rng-bit-generator)


# ---------------------------------------------------------------------------------------
# Sharding constraints (issue 17): XLA's ``custom-call`` with target "Sharding", as JAX lowers
# ``with_sharding_constraint``. Its ``sharding`` numbers devices by their position in the
# program's device assignment (``module.config["device_assignment"]``): the first mesh seen
# sets it, and a constraint over another arrangement of the same devices is renumbered.

def _sharding_constraint(ctx, operands, in_avals, out_aval, *, sharding):
    from minixla.sharding.api import constraint_sharding
    hlo = constraint_sharding(ctx.module, sharding, in_avals[0].shape)
    return ctx.add("custom-call", shape_of(out_aval), [operands[0]], custom_call_target="Sharding",
                   sharding=hlo)


lowering_rules[lax.sharding_constraint_p] = _sharding_constraint

from minixla.hlo import barrier as _barrier  # noqa: E402,F401 (its row: opt-barrier)
from minixla.hlo import bits as _bits  # noqa: E402,F401 (its row: reduce_precision)
