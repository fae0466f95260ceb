"""The elemental emitter (XLA's ``ElementalIrEmitter``).

Given an instruction of a (fused) computation and an output ``Index``, ``emit`` produces the
LLVM value of that one element. Every opcode has a rule in ``emit_rules``; a rule computes
its element from its operands' elements, asking for them at the index it needs:
an elementwise op at the same index, ``broadcast`` at the projected index, ``transpose`` at
the permuted index, and so on. Parameters (and any instruction whose value already lives in
memory) are *loads* from their buffer. This is what makes fusion work: a fused computation
is emitted as one expression per output element, with no intermediate arrays.

Semantics follow JAX/XLA exactly (see DESIGN.md): no fast-math flags on user ops, NaN
propagating max/min, guarded integer division, saturating float->int conversion; the scalar
operations that implement them are in ``scalar_ops.py``.
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import reductions as R
from minixla.backends.llvm.loops import Index, for_loop, if_then, linearize, loop_nest
from minixla.backends.llvm.scalar_ops import EXACT_OPCODES, _zero, binary_op, compare, convert, unary_op  # noqa: F401 (E.binary_op)
from minixla.core.errors import UnsupportedError
from minixla.hlo.lowering import parse_dim_labels

#: opcode -> rule(emitter, instr, index) -> llvm value (register type of instr's dtype)
emit_rules: dict = {}


def _scalar_index(builder) -> Index:
    return Index(builder, (), multi=[])


class ElementalEmitter:
    """Emits element values of the instructions of one computation, at one insertion point.

    Args:
      builder: where the code goes.
      buffers: instruction -> pointer of an array already in memory (kernel arguments);
        such an instruction is loaded, not computed.
      values: instruction -> llvm value to use for it at whatever index is asked (the
        parameters of a reducer, or a dot/conv accumulator substituted into a fused tail).

    Values are memoized per (instruction, index object) so a value used twice in a fused
    computation is computed once. A rule that opens a loop or branch emits the region's
    body inside ``nested_region()``, which forgets what was memoized inside (it does not
    dominate the code after the region).
    """

    def __init__(self, builder: ir.IRBuilder, buffers=None, values=None):
        self.builder = builder
        self.buffers = dict(buffers or {})
        self.values = dict(values or {})
        self._memo: dict = {}

    def emit(self, instr, index: Index):
        if instr in self.values:
            return self.values[instr]
        key = (id(instr), id(index))
        hit = self._memo.get(key)
        if hit is not None:
            return hit[0]
        if instr.shape.is_tuple:
            raise UnsupportedError(f"the LLVM backend cannot emit tuple-shaped '{instr.opcode}' elementally")
        dtype = T.check_dtype(instr.shape.dtype, instr.opcode)
        if instr in self.buffers:
            value = T.load_element(self.builder, self.buffers[instr], dtype, index.linear)
        else:
            rule = emit_rules.get(instr.opcode)
            if rule is None:
                raise UnsupportedError(f"the LLVM backend does not support the HLO opcode '{instr.opcode}'")
            value = rule(self, instr, index)
            if T.is_narrow_float(dtype) and instr.opcode not in EXACT_OPCODES:
                # f16/bf16 are computed in f32: round every op's result, as JAX eager does.
                value = T.round_narrow(self.builder, value, dtype)
        self._memo[key] = (value, instr, index)  # keep instr/index alive so ids stay unique
        return value

    def operand(self, instr, k: int, index: Index):
        return self.emit(instr.operands[k], index)

    @contextlib.contextmanager
    def nested_region(self):
        saved = dict(self._memo)
        yield
        self._memo = saved

    def alloca(self, ty, name="acc"):
        """A stack slot in the function's entry block (mem2reg turns it into SSA values)."""
        entry = self.builder.function.entry_basic_block
        if self.builder.block is entry:
            return self.builder.alloca(ty, name=name)
        # (Never insert into the block the builder is in: it would shift the builder's position.)
        b = ir.IRBuilder(entry)
        if entry.is_terminated:
            b.position_before(entry.terminator)
        return b.alloca(ty, name=name)


# ---------------------------------------------------------------------------------------
# Rules.

def _unary_rule(em, instr, index):
    x = em.operand(instr, 0, index)
    return unary_op(em.builder, instr.opcode, instr.shape.dtype, x)


def _binary_rule(em, instr, index):
    x, y = em.operand(instr, 0, index), em.operand(instr, 1, index)
    return binary_op(em.builder, instr.opcode, instr.shape.dtype, x, y)


for _op in ("negate", "abs", "sign", "floor", "ceil", "exponential", "log", "tanh", "logistic",
            "sqrt", "rsqrt", "not", "exponential-minus-one", "log-plus-one", "round-nearest-afz",
            "round-nearest-even", "sine", "cosine", "tan", "cbrt", "erf", "erfc"):
    emit_rules[_op] = _unary_rule
for _op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "and", "or", "xor",
            "remainder", "power", "atan2", "shift-left", "shift-right-logical", "shift-right-arithmetic"):
    emit_rules[_op] = _binary_rule


def _is_finite_rule(em, instr, index):
    x = em.operand(instr, 0, index)
    ax = T.intrinsic(em.builder, "fabs", x.type, [x])
    return em.builder.fcmp_ordered("<", ax, ir.Constant(x.type, float("inf")))


def _int_bits(b, x, dtype):
    """The bits of a register value of ``dtype`` as an integer of the same width."""
    dtype = np.dtype(dtype)
    if dtype == T.BFLOAT16 or dtype == T.FLOAT16:
        bits = T.to_memory(b, x, dtype)
        return bits if dtype == T.BFLOAT16 else b.bitcast(bits, T.I16)
    if T.is_float(dtype):
        return b.bitcast(x, ir.IntType(8 * dtype.itemsize))
    return x


def _bitcast_convert_rule(em, instr, index):
    b = em.builder
    src, dst = np.dtype(instr.operands[0].shape.dtype), np.dtype(instr.shape.dtype)
    bits = _int_bits(b, em.operand(instr, 0, index), src)
    if dst == T.FLOAT16:
        return T.from_memory(b, b.bitcast(bits, ir.HalfType()), dst)
    if dst == T.BFLOAT16:
        return T.from_memory(b, bits, dst)
    if T.is_float(dst):
        return b.bitcast(bits, T.reg_type(dst))
    return bits


emit_rules.update({"is-finite": _is_finite_rule, "bitcast-convert": _bitcast_convert_rule})


def _compare_rule(em, instr, index):
    x, y = em.operand(instr, 0, index), em.operand(instr, 1, index)
    return compare(em.builder, instr.attrs["direction"], instr.operands[0].shape.dtype, x, y)


def _select_rule(em, instr, index):
    p, t, f = (em.operand(instr, k, index) for k in range(3))
    return em.builder.select(p, t, f)


def _clamp_rule(em, instr, index):  # clamp(lo, x, hi) = min(max(lo, x), hi), in XLA:CPU's
    lo, x, hi = (em.operand(instr, k, index) for k in range(3))  # operand order (NaN bits)
    dtype = instr.shape.dtype
    return binary_op(em.builder, "minimum", dtype, binary_op(em.builder, "maximum", dtype, lo, x), hi)


def _convert_rule(em, instr, index):
    x = em.operand(instr, 0, index)
    return convert(em.builder, x, T.check_dtype(instr.operands[0].shape.dtype, "convert"), instr.shape.dtype)


emit_rules.update(compare=_compare_rule, select=_select_rule, clamp=_clamp_rule, convert=_convert_rule,
                  copy=lambda em, instr, index: em.operand(instr, 0, index))


def _constant_rule(em, instr, index):
    if instr.shape.rank == 0:
        return T.constant(instr.shape.dtype, instr.literal)
    # Array constants are kernel arguments (they are in ``buffers``); reaching here is a bug.
    raise UnsupportedError(f"array constant '{instr.name}' has no buffer in this kernel")


def _parameter_rule(em, instr, index):
    raise UnsupportedError(f"parameter '{instr.name}' has no buffer in this kernel")


def _broadcast_rule(em, instr, index):
    operand = instr.operands[0]
    dims = tuple(instr.attrs.get("dimensions", ()))
    if operand.shape.dims == instr.shape.dims and dims == tuple(range(instr.shape.rank)):
        return em.operand(instr, 0, index)  # an identity broadcast keeps the (linear) index
    sub = Index(em.builder, operand.shape.dims, multi=[index.multi[d] for d in dims])
    return em.operand(instr, 0, sub)


def _reshape_rule(em, instr, index):
    # Same elements in the same row-major order: only the dims of the index change.
    return em.operand(instr, 0, Index(em.builder, instr.operands[0].shape.dims, linear=index.linear))


def _transpose_rule(em, instr, index):
    perm = instr.attrs["dimensions"]  # output dim i is operand dim perm[i]
    multi = [None] * len(perm)
    for i, p in enumerate(perm):
        multi[p] = index.multi[i]
    return em.operand(instr, 0, Index(em.builder, instr.operands[0].shape.dims, multi=multi))


def _slice_rule(em, instr, index):
    b = em.builder
    multi = []
    for v, (start, _limit, stride) in zip(index.multi, instr.attrs["slice"]):
        if stride != 1:
            v = b.mul(v, T.i64(stride), flags=("nsw", "nuw"))
        if start:
            v = b.add(v, T.i64(start), flags=("nsw", "nuw"))
        multi.append(v)
    return em.operand(instr, 0, Index(b, instr.operands[0].shape.dims, multi=multi))


def _iota_rule(em, instr, index):
    b = em.builder
    v = index.multi[instr.attrs["iota_dimension"]]
    dtype = np.dtype(instr.shape.dtype)
    to = T.reg_type(dtype)
    if T.is_float(dtype):
        return b.sitofp(v, to)
    if T.is_pred(dtype):
        return b.icmp_unsigned("!=", v, T.i64(0))
    return b.trunc(v, to) if to.width < 64 else v


emit_rules.update(constant=_constant_rule, parameter=_parameter_rule, broadcast=_broadcast_rule,
                  reshape=_reshape_rule, bitcast=_reshape_rule, transpose=_transpose_rule,
                  slice=_slice_rule, iota=_iota_rule)


# ---------------------------------------------------------------------------------------
# Data-movement ops that read their operands at computed positions. Generated code has no
# bounds checks, so every position we load from is made valid first (clamped, or replaced
# by 0 in lanes whose value is then not selected): the load itself may never be out of range.

def index_value(b, x, dtype):
    """An index operand's register value as i64 (signed or unsigned by its dtype)."""
    dtype = np.dtype(dtype)
    if x.type == T.I64:
        return x
    return b.sext(x, T.I64) if T.is_signed(dtype) else b.zext(x, T.I64)


def clamp_i64(b, v, lo: int, hi: int):
    """``min(max(v, lo), hi)`` on signed i64 values."""
    v = b.select(b.icmp_signed("<", v, T.i64(lo)), T.i64(lo), v)
    return b.select(b.icmp_signed(">", v, T.i64(hi)), T.i64(hi), v)


def clamp_index(b, v, dtype, hi: int):
    """An index value (``index_value``'s i64) clamped to ``[0, hi]`` as XLA clamps a start
    index: by its dtype's order, so a uint64 index >= 2**63 is large, not negative."""
    if T.is_signed(np.dtype(dtype)):
        return clamp_i64(b, v, 0, hi)
    return b.select(b.icmp_unsigned(">", v, T.i64(hi)), T.i64(hi), v)


def _scalar_operand_i64(em, instr, k):
    op = instr.operands[k]
    return index_value(em.builder, em.emit(op, _scalar_index(em.builder)), op.shape.dtype)


def _clamped_start(em, instr, k, hi: int):
    return clamp_index(em.builder, _scalar_operand_i64(em, instr, k), instr.operands[k].shape.dtype, hi)


def _reverse_rule(em, instr, index):
    b = em.builder
    dims = instr.shape.dims
    multi = [b.sub(T.i64(dims[d] - 1), v) if d in instr.attrs["dimensions"] else v
             for d, v in enumerate(index.multi)]
    return em.operand(instr, 0, Index(b, dims, multi=multi))


def _pad_rule(em, instr, index):
    """XLA ``pad``: ``(low, high, interior)`` per dim; low/high may be negative (cropping)."""
    b = em.builder
    operand = instr.operands[0]
    pad_value = em.emit(instr.operands[1], _scalar_index(b))
    if operand.shape.size == 0:
        return pad_value
    valid, multi = None, []
    for v, n, (lo, _hi, interior) in zip(index.multi, operand.shape.dims, instr.attrs["padding_config"]):
        p = b.sub(v, T.i64(lo)) if lo else v
        step = interior + 1
        # 0 <= p <= (n-1)*step (one unsigned compare), and p on the grid of real elements.
        ok = b.icmp_unsigned("<=", p, T.i64((n - 1) * step))
        if step != 1:
            ok = b.and_(ok, b.icmp_unsigned("==", b.urem(p, T.i64(step)), T.i64(0)))
            p = b.udiv(p, T.i64(step))
        multi.append(p)
        valid = ok if valid is None else b.and_(valid, ok)
    if valid is None:
        return em.operand(instr, 0, index)
    safe = [b.select(valid, p, T.i64(0)) for p in multi]
    x = em.operand(instr, 0, Index(b, operand.shape.dims, multi=safe))
    return b.select(valid, x, pad_value)


def _concatenate_rule(em, instr, index):
    b = em.builder
    dim = instr.attrs["dimensions"][0]
    parts, offset = [], 0
    for op in instr.operands:
        if op.shape.dims[dim]:
            parts.append((op, offset))
        offset += op.shape.dims[dim]
    v = index.multi[dim]
    result = None
    for k, (op, off) in reversed(list(enumerate(parts))):
        n = op.shape.dims[dim]
        inside = b.and_(b.icmp_signed(">=", v, T.i64(off)), b.icmp_signed("<", v, T.i64(off + n)))
        local = b.select(inside, b.sub(v, T.i64(off)), T.i64(0))
        multi = list(index.multi)
        multi[dim] = local
        x = em.emit(op, Index(b, op.shape.dims, multi=multi))
        result = x if result is None else b.select(inside, x, result)
    return result


def _dynamic_slice_rule(em, instr, index):
    """Start indices are clamped so the whole slice is inside the operand (XLA semantics)."""
    b = em.builder
    operand = instr.operands[0]
    sizes = instr.attrs["dynamic_slice_sizes"]
    multi = []
    for d, (v, n, size) in enumerate(zip(index.multi, operand.shape.dims, sizes)):
        start = _clamped_start(em, instr, 1 + d, n - size)
        multi.append(b.add(start, v))
    return em.operand(instr, 0, Index(b, operand.shape.dims, multi=multi))


def _dynamic_update_slice_rule(em, instr, index):
    b = em.builder
    operand, update = instr.operands[:2]
    if update.shape.size == 0:
        return em.operand(instr, 0, index)
    inside, rel = None, []
    for d, (v, n, u) in enumerate(zip(index.multi, operand.shape.dims, update.shape.dims)):
        start = _clamped_start(em, instr, 2 + d, n - u)
        r = b.sub(v, start)
        ok = b.icmp_unsigned("<", r, T.i64(u))
        rel.append(r)
        inside = ok if inside is None else b.and_(inside, ok)
    if inside is None:  # rank 0: the update replaces the operand
        return em.operand(instr, 1, index)
    safe = [b.select(inside, r, T.i64(0)) for r in rel]
    new = em.emit(update, Index(b, update.shape.dims, multi=safe))
    return b.select(inside, new, em.operand(instr, 0, index))


def gather_operand_index(em, instr, out_multi):
    """XLA ``gather``: the operand position read for output position ``out_multi``.

    Output dims are the batch dims (positions not in ``offset_dims``, indexing the start
    indices, whose last dim is the index vector) and the offset dims (positions within
    the slice). Each start index is clamped so the whole slice is inside the operand.
    """
    b = em.builder
    a = instr.attrs
    operand, indices = instr.operands
    offset_dims, collapsed = a["offset_dims"], a["collapsed_slice_dims"]
    start_map, sizes = a["start_index_map"], a["slice_sizes"]
    batch = [v for d, v in enumerate(out_multi) if d not in offset_dims]
    offsets = [out_multi[d] for d in offset_dims]
    start = [T.i64(0)] * operand.shape.rank
    for k, d in enumerate(start_map):
        iv = em.emit(indices, Index(b, indices.shape.dims, multi=batch + [T.i64(k)]))
        v = index_value(b, iv, indices.shape.dtype)
        start[d] = clamp_index(b, v, indices.shape.dtype, operand.shape.dims[d] - sizes[d])
    window_dims = [d for d in range(operand.shape.rank) if d not in collapsed]
    multi = list(start)
    for d, off in zip(window_dims, offsets):
        multi[d] = b.add(start[d], off)
    return Index(b, operand.shape.dims, multi=multi)


def _gather_rule(em, instr, index):
    return em.operand(instr, 0, gather_operand_index(em, instr, index.multi))


def _reduce_window_rule(em, instr, index):
    """XLA ``reduce-window`` (one operand): the reducer over each window, from the init value;
    window positions in the padding are skipped."""
    b = em.builder
    operand, init = instr.operands
    w = instr.attrs["window"]
    index.materialize()
    dtype = instr.shape.dtype
    acc = em.alloca(T.reg_type(dtype))
    b.store(em.emit(init, _scalar_index(b)), acc)
    in_dims = operand.shape.dims
    if operand.shape.size == 0:
        return b.load(acc)

    def tap(ks):
        """(valid, position in the operand) of the window tap at offsets ``ks``."""
        valid, multi = None, []
        for v, k, n, stride, (lo, _hi), bd, wd in zip(index.multi, ks, in_dims, w["stride"], w["pad"],
                                                      w["lhs_dilate"], w["rhs_dilate"]):
            # the tap's position in the padded, base-dilated operand; a tap in the padding or in
            # a hole between dilated elements is skipped (unsigned compare: p < 0 wraps high)
            p = b.add(v if stride == 1 else b.mul(v, T.i64(stride)), k if wd == 1 else b.mul(k, T.i64(wd)))
            if lo:
                p = b.sub(p, T.i64(lo))
            ok = b.icmp_unsigned("<", p, T.i64((n - 1) * bd + 1))
            if bd != 1:
                ok = b.and_(ok, b.icmp_unsigned("==", b.urem(p, T.i64(bd)), T.i64(0)))
                p = b.udiv(p, T.i64(bd))
            multi.append(p)
            valid = ok if valid is None else b.and_(valid, ok)
        return valid, multi

    # (in window order, no reassociation: pooling windows are short, and JAX eager's XLA
    # reduces each window in order)
    if math.prod(w["size"]) <= _UNROLLED_WINDOW_TAPS:
        # A pooling window: its taps unrolled, straight-line code with a select for a tap in
        # the padding (read at a clamped position, not used), so the loop over the output's
        # minor dim is innermost and branch-free -- the loop vectorizer takes it.
        value = b.load(acc)
        for ks in np.ndindex(*w["size"]):
            valid, multi = tap([T.i64(int(k)) for k in ks])
            safe = multi if valid is None else [b.select(valid, p, T.i64(0)) for p in multi]
            new = emit_reducer(b, instr.called[0], value, em.emit(operand, Index(b, in_dims, multi=safe)),
                               reassoc=False)
            value = new if valid is None else b.select(valid, new, value)
        return value
    with em.nested_region(), loop_nest(b, w["size"], "rw") as ks:
        valid, multi = tap(ks)
        with if_then(b, valid if valid is not None else ir.Constant(T.I1, 1), "inwindow"):
            x = em.emit(operand, Index(b, in_dims, multi=multi))
            b.store(emit_reducer(b, instr.called[0], b.load(acc), x, reassoc=False), acc)
    return b.load(acc)


#: windows of at most this many taps are unrolled (3x3 pooling is 9)
_UNROLLED_WINDOW_TAPS = 16


emit_rules.update({"reverse": _reverse_rule, "pad": _pad_rule, "concatenate": _concatenate_rule,
                   "dynamic-slice": _dynamic_slice_rule, "dynamic-update-slice": _dynamic_update_slice_rule,
                   "gather": _gather_rule, "reduce-window": _reduce_window_rule})


# ---------------------------------------------------------------------------------------
# Reductions, dot and convolution as elements: one inner loop per output element.
# Used when these ops sit inside a fusion (or as a fallback); the kernels in ``kernels.py``
# emit faster loop orders for the common cases.

#: reducers the kernels emit as one instruction (with ``reassoc`` so the loop vectorizes).
SIMPLE_REDUCERS = {"add", "multiply", "maximum", "minimum", "and", "or"}


def emit_reducer(builder, computation, acc, value, reassoc=True):
    """Apply a reduce's ``to_apply`` computation to (accumulator, element). ``reassoc=False``
    keeps the order of the accumulation (a reduce-window's window, summed in order as XLA does)."""
    root, params = computation.root, computation.parameters
    dtype = T.check_dtype(root.shape.dtype, "reduce")
    if (root.opcode in SIMPLE_REDUCERS and len(params) == 2
            and [o for o in root.operands] == params):
        return binary_op(builder, root.opcode, dtype, acc, value, fastmath=("reassoc",) if reassoc else ())
    if len(params) != 2:
        raise UnsupportedError("the LLVM backend supports only single-operand reduce")
    em = ElementalEmitter(builder, values={params[0]: acc, params[1]: value})
    return em.emit(root, _scalar_index(builder))


def reduce_parts(instr):
    """(operand, init, reduced dims, kept dims) of a ``reduce``; checks it is single-operand."""
    if len(instr.operands) != 2 or instr.shape.is_tuple:
        raise UnsupportedError("the LLVM backend supports only single-operand reduce")
    operand, init = instr.operands
    reduced = tuple(instr.attrs["dimensions"])
    kept = tuple(d for d in range(operand.shape.rank) if d not in reduced)
    return operand, init, reduced, kept


def _reduce_rule(em, instr, index):
    b = em.builder
    operand, init, reduced, kept = reduce_parts(instr)
    index.materialize()
    dtype = instr.shape.dtype
    comp = instr.called[0]
    init_value = em.emit(init, _scalar_index(b))
    in_dims = operand.shape.dims

    def step(acc, ivs, reassoc=True):
        multi = [None] * len(in_dims)
        for d, v in zip(kept, index.multi):
            multi[d] = v
        for d, v in zip(reduced, ivs):
            multi[d] = v
        return emit_reducer(b, comp, acc, em.emit(operand, Index(b, in_dims, multi=multi)), reassoc=reassoc)

    with em.nested_region():  # summed in blocks, combined pairwise (``reductions.py``)
        return R.accumulate(b, T.reg_type(dtype), init_value, [in_dims[d] for d in reduced], step,
                            lambda x, y: emit_reducer(b, comp, x, y), R.block_identity(comp, dtype), "r",
                            redo_nan=ordered_step(step, comp, dtype))


def ordered_step(step, comp, dtype):
    """``step`` without reassociation, for ``reductions.accumulate``'s ``redo_nan`` (a float
    max/min: its NaN result in XLA's order), else None."""
    return functools.partial(step, reassoc=False) if R.orders_nans(comp, dtype) else None


def multiply_accumulate(b: ir.IRBuilder, dtype, acc, x, y, fastmath=()):
    """``acc + x*y`` inside dot/conv accumulation: one ``llvm.fma`` for floats (allowed there)."""
    if T.is_float(dtype):
        if fastmath:  # a reduction loop: fmuladd is what LLVM's vectorizer recognizes
            return T.intrinsic(b, "fmuladd", acc.type, [x, y, acc], fastmath=fastmath)
        return T.intrinsic(b, "fma", acc.type, [x, y, acc])
    if T.is_pred(dtype):
        raise UnsupportedError("the LLVM backend does not support dot/convolution on bool")
    return b.add(acc, b.mul(x, y))


def dot_parts(instr):
    """Dims of a ``dot``: (batch, contracting, lhs free, rhs free) as lists of dim numbers."""
    lhs, rhs = instr.operands
    lb, lc = list(instr.attrs["lhs_batch_dims"]), list(instr.attrs["lhs_contracting_dims"])
    rb, rc = list(instr.attrs["rhs_batch_dims"]), list(instr.attrs["rhs_contracting_dims"])
    lf = [d for d in range(lhs.shape.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.shape.rank) if d not in rb and d not in rc]
    return lb, lc, lf, rb, rc, rf


def dot_operand_index(b, operand, batch_dims, batch_ivs, contract_dims, contract_ivs, free_dims, free_ivs):
    multi = [None] * operand.shape.rank
    for ds, vs in ((batch_dims, batch_ivs), (contract_dims, contract_ivs), (free_dims, free_ivs)):
        for d, v in zip(ds, vs):
            multi[d] = v
    return Index(b, operand.shape.dims, multi=multi)


def load_converted(em, operand, index, dtype):
    """An operand element converted to the accumulation dtype."""
    return convert(em.builder, em.emit(operand, index), T.check_dtype(operand.shape.dtype, "dot"), dtype)


def _dot_rule(em, instr, index):
    b = em.builder
    lhs, rhs = instr.operands
    dtype = T.check_dtype(instr.shape.dtype, "dot")
    lb, lc, lf, rb, rc, rf = dot_parts(instr)
    out = index.materialize().multi
    bv, lv, rv = out[:len(lb)], out[len(lb):len(lb) + len(lf)], out[len(lb) + len(lf):]

    def step(acc, ks):
        x = load_converted(em, lhs, dot_operand_index(b, lhs, lb, bv, lc, ks, lf, lv), dtype)
        y = load_converted(em, rhs, dot_operand_index(b, rhs, rb, bv, rc, ks, rf, rv), dtype)
        return multiply_accumulate(b, dtype, acc, x, y, fastmath=("reassoc",))

    flt = T.is_float(dtype)
    init = _zero(dtype)
    nsizes = list(instr.shape.dims[len(lb) + len(lf):])
    N = math.prod(nsizes)
    if gemv_tail_starts_at_minus_zero(instr, math.prod(instr.shape.dims[len(lb):len(lb) + len(lf)]), N):
        # (XLA's scalar epilogue columns start from -0.0: ``gemv_tail_starts_at_minus_zero``)
        n = linearize(b, rv, nsizes) if rv else T.i64(0)
        init = b.select(b.icmp_unsigned(">=", n, T.i64(N - N % gemv_tile(dtype))),
                        ir.Constant(T.reg_type(dtype), -0.0), init)
    with em.nested_region():  # a long contraction in blocks, combined pairwise (``reductions.py``)
        return R.accumulate(b, T.reg_type(dtype), init, [lhs.shape.dims[d] for d in lc], step,
                            (lambda p, q: binary_op(b, "add", dtype, p, q, fastmath=("reassoc",))) if flt else None,
                            ir.Constant(T.reg_type(dtype), -0.0) if flt else None, "k")


#: XLA:CPU's vector-times-matrix emitter computes its columns in tiles of 32 bytes of its
#: arithmetic (8 f32 -- f16/bf16 are computed in f32 -- or 4 f64); the last ``N % tile`` columns
#: go through a scalar epilogue whose sum starts from its first product
GEMV_TILE_BYTES = 32


def gemv_tile(dtype) -> int:
    return GEMV_TILE_BYTES // (8 if np.dtype(dtype).itemsize == 8 else 4)


def gemv_tail_starts_at_minus_zero(dot, M, N) -> bool:
    """Whether ``dot`` is what XLA:CPU emits as a (column-major) matrix-vector product with a
    scalar epilogue: one lhs row (``M == 1``, batched or not) times a rhs whose free dims are its
    minor ones (``x @ W``), a float dtype, more than one column and a partial last tile. There a sum of only -0.0 products is -0.0 in the epilogue's
    columns and +0.0 in the tiled ones (the tiles start from +0.0, as the GEMM does). Not for
    an empty contraction (K = 0): no product, so +0.0 everywhere, as XLA's (grad fuzzer seed 10031)."""
    lhs, rhs = dot.operands
    lb, lc, lf, rb, rc, rf = dot_parts(dot)
    rank = rhs.shape.rank
    return (M == 1 and N > 1 and N % gemv_tile(dot.shape.dtype) != 0
            and math.prod(lhs.shape.dims[d] for d in lc) > 0
            and T.is_float(np.dtype(dot.shape.dtype))
            and tuple(rf) == tuple(range(rank - len(rf), rank)) and max(rc) < min(rf))


def conv_parts(instr):
    """Everything about a ``convolution`` as plain ints: the dim numbers (``lax.ConvDimensionNumbers``),
    input feature count per group (Cg), output features per group (Og), group count, window."""
    lhs, rhs = instr.operands
    dn = parse_dim_labels(instr.attrs["dim_labels"])
    groups = int(instr.attrs.get("feature_group_count", 1))
    if int(instr.attrs.get("batch_group_count", 1)) != 1:
        raise UnsupportedError("the LLVM backend does not support convolution with batch_group_count > 1")
    cg = rhs.shape.dims[dn.rhs_spec[1]]
    og = rhs.shape.dims[dn.rhs_spec[0]] // groups
    return dn, cg, og, groups, instr.attrs["window"]


def conv_input_position(b, instr, dn, window, s: int, out_pos, k):
    """For spatial dim ``s``: the input position read by output position ``out_pos`` at window
    offset ``k``, and whether it is a real element (not padding, not a hole of lhs dilation)."""
    in_size = instr.operands[0].shape.dims[dn.lhs_spec[2 + s]]
    stride, (pad_lo, _) = window["stride"][s], window["pad"][s]
    ldil, rdil = window["lhs_dilate"][s], window["rhs_dilate"][s]
    p = out_pos if stride == 1 else b.mul(out_pos, T.i64(stride))
    p = b.add(p, k if rdil == 1 else b.mul(k, T.i64(rdil)))
    if pad_lo:
        p = b.sub(p, T.i64(pad_lo))
    # One unsigned compare checks 0 <= p < size (a negative p is a huge unsigned number).
    valid = b.icmp_unsigned("<", p, T.i64((in_size - 1) * ldil + 1 if in_size else 0))
    if ldil != 1:
        valid = b.and_(valid, b.icmp_unsigned("==", b.urem(p, T.i64(ldil)), T.i64(0)))
        p = b.udiv(p, T.i64(ldil))
    return p, valid


def _conv_rule(em, instr, index):
    b = em.builder
    lhs, rhs = instr.operands
    dtype = T.check_dtype(instr.shape.dtype, "convolution")
    dn, cg, og, _groups, window = conv_parts(instr)
    out = index.materialize().multi
    batch, feature = out[dn.out_spec[0]], out[dn.out_spec[1]]
    group = b.udiv(feature, T.i64(og)) if og != 1 else feature
    acc = em.alloca(T.reg_type(dtype))
    # (+0.0, as XLA's convolutions: a sum of -0.0 products is +0.0; the convs XLA turns into a
    # multiply, which keep a -0.0, are multiplies here too: the algebraic simplifier's A15)
    b.store(_zero(dtype), acc)
    nsp = len(dn.out_spec) - 2
    with em.nested_region(), loop_nest(b, window["size"], "w") as ks:
        positions, valid = [], None
        for s in range(nsp):
            p, v = conv_input_position(b, instr, dn, window, s, out[dn.out_spec[2 + s]], ks[s])
            positions.append(p)
            valid = v if valid is None else b.and_(valid, v)
        # As XLA:CPU, padding is zeros that *are* multiplied (0 * inf = NaN); lhs-dilation holes are skipped.
        pad_only = valid is not None and all(d == 1 for d in window["lhs_dilate"])
        if pad_only:
            positions = [b.select(valid, p, T.i64(0)) for p in positions]
        with if_then(b, valid if valid is not None and not pad_only else ir.Constant(T.I1, 1), "inside"):
            with for_loop(b, 0, cg, "ci") as ci:
                lm = [None] * lhs.shape.rank
                lm[dn.lhs_spec[0]] = batch
                lm[dn.lhs_spec[1]] = b.add(b.mul(group, T.i64(cg)), ci) if cg != 1 else group
                rm = [None] * rhs.shape.rank
                rm[dn.rhs_spec[0]], rm[dn.rhs_spec[1]] = feature, ci
                for s in range(nsp):
                    lm[dn.lhs_spec[2 + s]] = positions[s]
                    rm[dn.rhs_spec[2 + s]] = ks[s]
                x = load_converted(em, lhs, Index(b, lhs.shape.dims, multi=lm), dtype)
                if pad_only:
                    x = b.select(valid, x, _zero(dtype))
                y = load_converted(em, rhs, Index(b, rhs.shape.dims, multi=rm), dtype)
                b.store(multiply_accumulate(b, dtype, b.load(acc), x, y, fastmath=("reassoc",)), acc)
    return b.load(acc)


emit_rules.update(reduce=_reduce_rule, dot=_dot_rule, convolution=_conv_rule)


def _fma_rule(em, instr, index):
    """minixla.lax.fma: ``a*b + c`` as XLA:CPU computes it, one rounding; for f16/bf16 only
    where XLA contracts that dtype on this host (``lax.special.xla_contracts``), else the
    product rounded to the dtype, then the add (rounded by ``emit``)."""
    a, x, c = (em.operand(instr, k, index) for k in range(3))
    dtype = instr.shape.dtype
    if T.is_narrow_float(dtype):
        from minixla.lax.special import xla_contracts
        if not xla_contracts(dtype):
            b = em.builder
            return b.fadd(T.round_narrow(b, b.fmul(a, x), dtype), c)
    return T.intrinsic(em.builder, "fma", a.type, [a, x, c])


emit_rules["fma"] = _fma_rule

# A "Sharding" custom-call (issue 17) is the identity on one device. ``jit`` removes it before
# this backend runs (passes/sharding_remover.py); the row keeps a module built by hand runnable.
emit_rules["custom-call"] = lambda em, instr, index: em.operand(instr, 0, index)
