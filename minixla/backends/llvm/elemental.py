"""The elemental emitter (XLA's ``ElementalIrEmitter``).

Given an instruction of a (fused) computation and an output ``Index``, ``emit`` produces the
LLVM value of that one element. Every opcode has a rule in ``emit_rules``; a rule computes
its element from its operands' elements, asking for them at the index it needs:
an elementwise op at the same index, ``broadcast`` at the projected index, ``transpose`` at
the permuted index, and so on. Parameters (and any instruction whose value already lives in
memory) are *loads* from their buffer. This is what makes fusion work: a fused computation
is emitted as one expression per output element, with no intermediate arrays.

Semantics follow JAX/XLA exactly (see DESIGN.md): no fast-math flags on user ops, NaN
propagating max/min, guarded integer division, saturating float->int conversion.
"""
from __future__ import annotations

import contextlib

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import Index, for_loop, if_then, loop_nest
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
# Scalar operations, shared by the rules and by the reduction kernels.

def _zero(dtype):
    return T.constant(dtype, 0)


def binary_op(b: ir.IRBuilder, opcode: str, dtype, x, y, fastmath=()):
    """``opcode(x, y)`` on register values of ``dtype``.

    ``fastmath`` is only ever ``("reassoc",)``, passed by reductions for their accumulation.
    """
    dtype = np.dtype(dtype)
    flt, signed, pred = T.is_float(dtype), T.is_signed(dtype), T.is_pred(dtype)
    if opcode == "add":
        return b.fadd(x, y, flags=fastmath) if flt else (b.or_(x, y) if pred else b.add(x, y))
    if opcode == "subtract":
        return b.fsub(x, y) if flt else b.sub(x, y)
    if opcode == "multiply":
        return b.fmul(x, y, flags=fastmath) if flt else (b.and_(x, y) if pred else b.mul(x, y))
    if opcode == "divide":
        return b.fdiv(x, y) if flt else _int_divide(b, dtype, x, y)
    if opcode in ("maximum", "minimum"):
        if flt:  # IEEE-754 2019 maximum/minimum: NaN propagates, -0.0 < +0.0
            return T.intrinsic(b, opcode, x.type, [x, y], fastmath=fastmath)
        op = ">" if opcode == "maximum" else "<"
        cmp = b.icmp_signed(op, x, y) if signed else b.icmp_unsigned(op, x, y)
        return b.select(cmp, x, y)
    if opcode == "and":
        return b.and_(x, y)
    if opcode == "or":
        return b.or_(x, y)
    raise UnsupportedError(f"the LLVM backend does not support the HLO opcode '{opcode}' on {dtype.name}")


def _int_divide(b, dtype, x, y):
    """Truncating division with XLA's answers where LLVM's ``sdiv``/``udiv`` are undefined:
    x/0 = -1 (all ones) and INT_MIN/-1 = INT_MIN. We divide by a safe divisor (1) in those
    lanes and select the defined answer: no branch, so the loop still vectorizes."""
    if T.is_pred(dtype):
        raise UnsupportedError("the LLVM backend does not support 'divide' on bool")
    ty = x.type
    by_zero = b.icmp_unsigned("==", y, ir.Constant(ty, 0))
    one, all_ones = ir.Constant(ty, 1), ir.Constant(ty, -1)
    if T.is_signed(dtype):
        int_min = ir.Constant(ty, -(1 << (ty.width - 1)))
        overflow = b.and_(b.icmp_signed("==", x, int_min), b.icmp_signed("==", y, all_ones))
        safe = b.select(b.or_(by_zero, overflow), one, y)
        q = b.sdiv(x, safe)  # INT_MIN / 1 == INT_MIN: the overflow answer
    else:
        q = b.udiv(x, b.select(by_zero, one, y))
    return b.select(by_zero, all_ones, q)


_FCMP = {"EQ": ("==", True), "NE": ("!=", False), "LT": ("<", True), "LE": ("<=", True),
         "GT": (">", True), "GE": (">=", True)}


def compare(b: ir.IRBuilder, direction: str, dtype, x, y):
    """``compare`` -> i1. Floats: ordered, except NE which is unordered (NaN != NaN)."""
    op, ordered = _FCMP[direction]
    if T.is_float(dtype):
        return b.fcmp_ordered(op, x, y) if ordered else b.fcmp_unordered(op, x, y)
    if T.is_signed(dtype):
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)  # unsigned ints and pred (false < true)


def convert(b: ir.IRBuilder, x, src, dst):
    """``convert`` from ``src`` to ``dst`` dtype, with XLA's semantics:
    float->int truncates toward zero and saturates, NaN -> 0 (``llvm.fpto[su]i.sat``);
    int->int wraps; bool->x is 0/1; x->bool is x != 0 (NaN -> true)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return x
    to = T.reg_type(dst)
    if T.is_pred(dst):
        if T.is_float(src):
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if T.is_pred(src):
        return b.uitofp(x, to) if T.is_float(dst) else b.zext(x, to)
    if T.is_float(src) and T.is_float(dst):
        return b.fpext(x, to) if dst.itemsize > src.itemsize else b.fptrunc(x, to)
    if T.is_float(src):
        name = "fptosi.sat" if T.is_signed(dst) else "fptoui.sat"
        return T.intrinsic(b, name, to, [x], overload_types=[to, x.type])
    if T.is_float(dst):
        return b.sitofp(x, to) if T.is_signed(src) else b.uitofp(x, to)
    if dst.itemsize < src.itemsize:
        return b.trunc(x, to)
    if dst.itemsize > src.itemsize:
        return b.sext(x, to) if T.is_signed(src) else b.zext(x, to)
    return x  # same width, other signedness: same bits


def _math(opcode):
    try:
        from minixla.backends.llvm.math import MATH_EMITTERS
    except ModuleNotFoundError as e:  # pragma: no cover - only while math.py is being written
        if e.name != "minixla.backends.llvm.math":
            raise
        raise UnsupportedError(f"'{opcode}': minixla.backends.llvm.math is not available") from e
    return MATH_EMITTERS[opcode]


def unary_op(b: ir.IRBuilder, opcode: str, dtype, x):
    dtype = np.dtype(dtype)
    flt, signed, pred = T.is_float(dtype), T.is_signed(dtype), T.is_pred(dtype)
    ty = x.type
    if opcode == "negate" and not pred:
        return b.fneg(x) if flt else b.neg(x)
    if opcode == "abs" and not pred:
        if flt:
            return T.intrinsic(b, "fabs", ty, [x])
        if signed:  # abs(INT_MIN) wraps to INT_MIN, as in XLA
            return b.select(b.icmp_signed("<", x, ir.Constant(ty, 0)), b.neg(x), x)
        return x
    if opcode == "sign" and not pred:
        if flt:  # sign(±0) = ±0 and sign(NaN) = NaN. The zero test is an FP compare, so with
            # denormals flushed (see kernels.py) a subnormal x gives ±0, as in XLA.
            one = T.intrinsic(b, "copysign", ty, [ir.Constant(ty, 1.0), x])
            zero = T.intrinsic(b, "copysign", ty, [ir.Constant(ty, 0.0), x])
            r = b.select(b.fcmp_ordered("==", x, ir.Constant(ty, 0.0)), zero, one)
            return b.select(b.fcmp_unordered("uno", x, x), x, r)
        if signed:
            pos = b.zext(b.icmp_signed(">", x, ir.Constant(ty, 0)), ty)
            neg = b.zext(b.icmp_signed("<", x, ir.Constant(ty, 0)), ty)
            return b.sub(pos, neg)
        return b.zext(b.icmp_unsigned("!=", x, ir.Constant(ty, 0)), ty)
    if opcode in ("floor", "ceil"):
        return T.intrinsic(b, opcode, ty, [x]) if flt else x
    if opcode == "not" and not flt:
        return b.not_(x)
    if flt:
        if opcode == "sqrt":
            return T.intrinsic(b, "sqrt", ty, [x])
        if opcode == "rsqrt":  # correctly rounded 1/sqrt(x), like XLA's eager result
            return b.fdiv(ir.Constant(ty, 1.0), T.intrinsic(b, "sqrt", ty, [x]))
        if opcode in ("exponential", "log", "tanh", "logistic"):
            return _math(opcode)(b, x)
    raise UnsupportedError(f"the LLVM backend does not support the HLO opcode '{opcode}' on {dtype.name}")


# ---------------------------------------------------------------------------------------
# Rules.

def _unary_rule(em, instr, index):
    x = em.operand(instr, 0, index)
    return unary_op(em.builder, instr.opcode, instr.shape.dtype, x)


def _binary_rule(em, instr, index):
    x, y = em.operand(instr, 0, index), em.operand(instr, 1, index)
    return binary_op(em.builder, instr.opcode, instr.shape.dtype, x, y)


for _op in ("negate", "abs", "sign", "floor", "ceil", "exponential", "log", "tanh", "logistic",
            "sqrt", "rsqrt", "not"):
    emit_rules[_op] = _unary_rule
for _op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "and", "or"):
    emit_rules[_op] = _binary_rule


def _compare_rule(em, instr, index):
    x, y = em.operand(instr, 0, index), em.operand(instr, 1, index)
    return compare(em.builder, instr.attrs["direction"], instr.operands[0].shape.dtype, x, y)


def _select_rule(em, instr, index):
    p, t, f = (em.operand(instr, k, index) for k in range(3))
    return em.builder.select(p, t, f)


def _clamp_rule(em, instr, index):  # clamp(lo, x, hi) = min(max(x, lo), hi)
    lo, x, hi = (em.operand(instr, k, index) for k in range(3))
    dtype = instr.shape.dtype
    return binary_op(em.builder, "minimum", dtype, binary_op(em.builder, "maximum", dtype, x, lo), hi)


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
# Reductions, dot and convolution as elements: one inner loop per output element.
# Used when these ops sit inside a fusion (or as a fallback); the kernels in ``kernels.py``
# emit faster loop orders for the common cases.

#: reducers the kernels emit as one instruction (with ``reassoc`` so the loop vectorizes).
SIMPLE_REDUCERS = {"add", "multiply", "maximum", "minimum", "and", "or"}


def emit_reducer(builder, computation, acc, value):
    """Apply a reduce's ``to_apply`` computation to (accumulator, element)."""
    root, params = computation.root, computation.parameters
    dtype = T.check_dtype(root.shape.dtype, "reduce")
    if (root.opcode in SIMPLE_REDUCERS and len(params) == 2
            and [o for o in root.operands] == params):
        return binary_op(builder, root.opcode, dtype, acc, value, fastmath=("reassoc",))
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
    acc = em.alloca(T.reg_type(dtype))
    b.store(em.emit(init, _scalar_index(b)), acc)
    in_dims = operand.shape.dims
    with em.nested_region(), loop_nest(b, [in_dims[d] for d in reduced], "r") as ivs:
        multi = [None] * len(in_dims)
        for d, v in zip(kept, index.multi):
            multi[d] = v
        for d, v in zip(reduced, ivs):
            multi[d] = v
        x = em.emit(operand, Index(b, in_dims, multi=multi))
        b.store(emit_reducer(b, instr.called[0], b.load(acc), x), acc)
    return b.load(acc)


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
    acc = em.alloca(T.reg_type(dtype))
    b.store(_zero(dtype), acc)
    with em.nested_region(), loop_nest(b, [lhs.shape.dims[d] for d in lc], "k") as ks:
        x = load_converted(em, lhs, dot_operand_index(b, lhs, lb, bv, lc, ks, lf, lv), dtype)
        y = load_converted(em, rhs, dot_operand_index(b, rhs, rb, bv, rc, ks, rf, rv), dtype)
        b.store(multiply_accumulate(b, dtype, b.load(acc), x, y, fastmath=("reassoc",)), acc)
    return b.load(acc)


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
    b.store(_zero(dtype), acc)
    nsp = len(dn.out_spec) - 2
    with em.nested_region(), loop_nest(b, window["size"], "w") as ks:
        positions, valid = [], None
        for s in range(nsp):
            p, v = conv_input_position(b, instr, dn, window, s, out[dn.out_spec[2 + s]], ks[s])
            positions.append(p)
            valid = v if valid is None else b.and_(valid, v)
        with if_then(b, valid if valid is not None else ir.Constant(T.I1, 1), "inside"):
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
                y = load_converted(em, rhs, Index(b, rhs.shape.dims, multi=rm), dtype)
                b.store(multiply_accumulate(b, dtype, b.load(acc), x, y, fastmath=("reassoc",)), acc)
    return b.load(acc)


emit_rules.update(reduce=_reduce_rule, dot=_dot_rule, convolution=_conv_rule)
