"""Scalar operations of the generated code: one LLVM value in, one out (XLA's
``ElementalIrEmitter::EmitFloatBinaryOp`` / ``EmitFloatUnaryOp`` / ``EmitComparison`` and their
integer siblings).

``binary_op``, ``unary_op``, ``compare`` and ``convert`` give each HLO opcode JAX/XLA's exact
semantics on one element (or one vector lane): no fast-math flags on user ops, NaN-propagating
max/min, guarded integer division and remainder, shifts by the bit width, saturating float->int
conversion, libm for the transcendentals (``math.py``'s vectorized kernels where they exist), and
the step-by-step expansions XLA:CPU uses for bf16/f16 (logistic, expm1), each rounding as XLA's
does. The elemental emitter (``elemental.py``) and the reduction kernels share them.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.core.errors import UnsupportedError


def _zero(dtype):
    return T.constant(dtype, 0)


#: constants c for which LLVM folds ``x op c`` (or ``c op x``) to x or -x: bits moved, not computed
_IDENTITIES = {"multiply": (1.0, -1.0), "divide": (1.0, -1.0), "add": (-0.0,), "subtract": (0.0,)}


def _is_identity(opcode, c, right: bool) -> bool:
    if not isinstance(c, ir.Constant) or not isinstance(c.constant, float):
        return False
    if opcode in ("divide", "subtract") and not right:
        return False
    return any(c.constant == v and math.copysign(1.0, c.constant) == math.copysign(1.0, v)
               for v in _IDENTITIES[opcode])


def _flush_identity_operand(b, opcode, x, y):
    """XLA:CPU flushes a subnormal operand of any float arithmetic (DAZ), so JAX eager's
    ``1e-40 * 1.0`` is 0.0. LLVM folds ``x * 1.0`` to ``x`` (to LLVM, flushing is allowed, not
    required), so the other operand of an identity constant is flushed explicitly. (Not with
    ``llvm.canonicalize``: LLVM 22's x86 backend aborts on it once vectorized to <2 x float>.)"""
    if _is_identity(opcode, y, right=True):
        x = _flush_subnormal(b, x)
    elif _is_identity(opcode, x, right=False):
        y = _flush_subnormal(b, y)
    return x, y


def _flush_subnormal(b, x):
    """``x``, or a zero of its sign when it is subnormal (f32 or f64 registers).

    Computed on the bits, not with an FP compare: under ``denormal-fp-math=preserve-sign``
    LLVM may turn ``fabs(x) < FLT_MIN`` into ``x == 0`` and that, for an ``x`` it sees made by
    a bitcast (every bf16 operand, widened by a shift), into an integer test of the bits, which
    a subnormal fails: the flush (or a compare, see ``_daz``) would silently not happen."""
    wide = x.type == ir.DoubleType()
    if isinstance(x, ir.Constant) and isinstance(x.constant, float):
        tiny = float(np.finfo(np.float64 if wide else np.float32).tiny)
        return ir.Constant(x.type, math.copysign(0.0, x.constant)) if 0 < abs(x.constant) < tiny else x
    ity = ir.IntType(64 if wide else 32)
    exponent, sign = (0x7FF0000000000000, 1 << 63) if wide else (0x7F800000, 1 << 31)
    bits = b.bitcast(x, ity)
    tiny = b.icmp_unsigned("==", b.and_(bits, ir.Constant(ity, exponent)), ir.Constant(ity, 0))
    return b.bitcast(b.select(tiny, b.and_(bits, ir.Constant(ity, sign)), bits), x.type)


def _daz(b, dtype, x):
    """``x`` as XLA:CPU's arithmetic reads it (denormals-are-zero): flushed if its dtype is
    f32, bf16 (widened to f32, so its subnormals are f32 subnormals) or f64, and the host
    flushes (``kernels.FLUSH_DENORMALS``). f16 is widened exactly to a normal f32: untouched.
    For the ops whose result LLVM may otherwise take from the unflushed bits: bf16 compares
    (see ``_flush_subnormal``) and the result of maximum/minimum (``xla_max_min``)."""
    from minixla.backends.llvm import kernels
    if not kernels.FLUSH_DENORMALS or np.dtype(dtype) == T.FLOAT16 or x.type not in (T.F32, ir.DoubleType()):
        return x
    return _flush_subnormal(b, x)


def xla_max_min(b, opcode, dtype, x, y):
    """XLA:CPU's elementwise maximum/minimum of two f32/f64 registers (JAX eager, all float
    dtypes): a NaN ``x`` is returned as it is; else a NaN ``y`` keeps its payload, its sign
    bit and-ed (maximum) or or-ed (minimum) with ``x``'s, so ``min(-1, +nan)`` is ``-nan`` and
    ``max(+1, -nan)`` is ``+nan``; otherwise IEEE maximum/minimum (-0.0 < +0.0), reading
    subnormal operands as ±0 (denormals-are-zero; f16 registers are f32 widened exactly, so
    f16 subnormals are kept).

    Six vector instructions, where the IEEE ``llvm.maximum``, operand flushes and NaN fix-ups
    took ~15: ``x > y ? x : y`` (x86's ``vmaxps``: ``y`` when either is NaN, and ``y`` of two
    zeros) gives ``y`` with its own sign for a NaN ``y`` and for a pair of zeros; one bitwise
    op (``vpternlog``) and-s that sign bit with ``x``'s (or-s for minimum), which is at once
    XLA's NaN sign and the IEEE zero (``max(+0, -0)`` is ``+0``), and for a number ``x``
    changes nothing (``max(x, y) >= x`` has ``x``'s sign or is positive). The *result* is then
    flushed on the bits (``_flush_subnormal``): whether LLVM keeps the hardware compare (DAZ:
    a subnormal compares as ±0) or folds it into an IEEE or integer compare (it does for a
    constant operand and for bf16 registers, made by a bitcast), the flushed result is the
    same, since the two orders differ only between a subnormal and a zero or two subnormals
    of one sign. A NaN ``x`` is selected last. Checked bit for bit against JAX over NaN
    payloads and signs, ±0, subnormals and ±inf, with constant operands
    (``tests/test_nan_minmax_bits.py``, ``tests/test_llvm_subnormals.py``)."""
    ity = ir.IntType(64 if x.type == ir.DoubleType() else 32)
    sign = ir.Constant(ity, 1 << (ity.width - 1))
    if opcode == "maximum":
        r = b.select(b.fcmp_ordered(">", x, y), x, y)
        bits = b.and_(b.bitcast(r, ity), b.or_(b.bitcast(x, ity), b.not_(sign)))
    else:
        r = b.select(b.fcmp_ordered("<", x, y), x, y)
        bits = b.or_(b.bitcast(r, ity), b.and_(b.bitcast(x, ity), sign))
    return b.select(b.fcmp_unordered("uno", x, x), x, _daz(b, dtype, b.bitcast(bits, x.type)))


def binary_op(b: ir.IRBuilder, opcode: str, dtype, x, y, fastmath=()):
    """``opcode(x, y)`` on register values of ``dtype``.

    ``fastmath`` is only ever ``("reassoc",)``, passed by reductions for their accumulation.
    """
    dtype = np.dtype(dtype)
    flt, signed, pred = T.is_float(dtype), T.is_signed(dtype), T.is_pred(dtype)
    if flt and opcode in _IDENTITIES:
        x, y = _flush_identity_operand(b, opcode, x, y)
    if opcode == "add":
        return b.fadd(x, y, flags=fastmath) if flt else (b.or_(x, y) if pred else b.add(x, y))
    if opcode == "subtract":
        return b.fsub(x, y) if flt else b.sub(x, y)
    if opcode == "multiply":
        return b.fmul(x, y, flags=fastmath) if flt else (b.and_(x, y) if pred else b.mul(x, y))
    if opcode == "divide":
        return b.fdiv(x, y) if flt else _int_divide(b, dtype, x, y)
    if opcode in ("maximum", "minimum"):
        if flt:  # IEEE-754 2019 maximum/minimum: NaN propagates, -0.0 < +0.0; XLA:CPU's
            # reads subnormal operands as ±0 (JAX eager: max(1e-45, -1e-45) is +0.0). Not in
            # reductions (``fastmath``): their accumulation keeps LLVM's maximum as it is.
            if fastmath:
                return T.intrinsic(b, opcode, x.type, [x, y], fastmath=fastmath)
            return xla_max_min(b, opcode, dtype, x, y)
        op = ">" if opcode == "maximum" else "<"
        cmp = b.icmp_signed(op, x, y) if signed else b.icmp_unsigned(op, x, y)
        return b.select(cmp, x, y)
    if opcode == "and":
        return b.and_(x, y)
    if opcode == "or":
        return b.or_(x, y)
    if opcode == "xor":
        return b.xor(x, y)
    if opcode == "remainder":
        return b.frem(x, y) if flt else _int_remainder(b, dtype, x, y)
    if opcode in ("power", "atan2") and flt:
        return libm_call(b, "pow" if opcode == "power" else "atan2", [x, y])
    if opcode.startswith("shift-") and not flt and not pred:
        return _shift(b, opcode, x, y)
    raise UnsupportedError(f"the LLVM backend does not support the HLO opcode '{opcode}' on {dtype.name}")


def _safe_divisor(b, dtype, opname, x, y):
    """``(by_zero, safe)``: ``y`` with 1 in the lanes where LLVM's integer division or remainder
    is undefined (y == 0, and INT_MIN / -1 for signed types), so no lane traps; the caller then
    selects XLA's defined answer there. No branch, so the loop still vectorizes."""
    if T.is_pred(dtype):
        raise UnsupportedError(f"the LLVM backend does not support '{opname}' on bool")
    ty = x.type
    by_zero = b.icmp_unsigned("==", y, ir.Constant(ty, 0))
    undefined = by_zero
    if T.is_signed(dtype):
        int_min = ir.Constant(ty, -(1 << (ty.width - 1)))
        overflow = b.and_(b.icmp_signed("==", x, int_min), b.icmp_signed("==", y, ir.Constant(ty, -1)))
        undefined = b.or_(by_zero, overflow)
    return by_zero, b.select(undefined, ir.Constant(ty, 1), y)


def _int_remainder(b, dtype, x, y):
    """Truncating remainder (sign of the dividend) with XLA's answers where LLVM's ``srem``/``urem``
    are undefined: x % 0 = x and INT_MIN % -1 = 0 (the safe divisor 1 gives that 0)."""
    by_zero, safe = _safe_divisor(b, dtype, "remainder", x, y)
    r = b.srem(x, safe) if T.is_signed(dtype) else b.urem(x, safe)
    return b.select(by_zero, x, r)


def _shift(b, opcode, x, y):
    """XLA's shifts: the amount is read as unsigned, and an amount >= the bit width gives 0
    (or the sign fill for an arithmetic right shift) where LLVM would give poison."""
    ty = x.type
    in_range = b.icmp_unsigned("<", y, ir.Constant(ty, ty.width))
    amount = b.select(in_range, y, ir.Constant(ty, 0))
    if opcode == "shift-left":
        return b.select(in_range, b.shl(x, amount), ir.Constant(ty, 0))
    if opcode == "shift-right-logical":
        return b.select(in_range, b.lshr(x, amount), ir.Constant(ty, 0))
    fill = b.ashr(x, ir.Constant(ty, ty.width - 1))
    return b.select(in_range, b.ashr(x, amount), fill)


def libm_call(b: ir.IRBuilder, name: str, args):
    """``name(*args)`` from the C math library: for f32 registers (f32, and f16/bf16, which are
    computed in f32) the float function ``namef`` -- the one XLA:CPU calls for ``sine``,
    ``cosine``, ``tan``, ``atan2``, ``power`` (its IR has ``llvm.sin.v8f32`` etc., lowered to one
    ``sinf`` call per lane), so the bits are JAX's; f64 calls ``name``. Used for the less common
    transcendentals; a scalar call per element (it does not vectorize), unlike the inline
    ``math`` emitters. (Arguments are passed as they are: libm sees a subnormal as XLA's call
    does, with the kernel's denormals-are-zero mode.)"""
    ty, dbl = args[0].type, ir.DoubleType()
    if ty == ir.FloatType() and name in _LIBM_F32:
        fn = b.module.globals.get(name + "f")
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), name=name + "f")
        return b.call(fn, list(args))
    xs = [a if a.type == dbl else b.fpext(a, dbl) for a in args]
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(dbl, [dbl] * len(xs)), name=name)
    r = b.call(fn, xs)
    return r if ty == dbl else b.fptrunc(r, ty)


def _int_divide(b, dtype, x, y):
    """Truncating division with XLA's answers where LLVM's ``sdiv``/``udiv`` are undefined:
    x/0 = -1 (all ones) and INT_MIN/-1 = INT_MIN (INT_MIN / the safe divisor 1)."""
    by_zero, safe = _safe_divisor(b, dtype, "divide", x, y)
    q = b.sdiv(x, safe) if T.is_signed(dtype) else b.udiv(x, safe)
    return b.select(by_zero, ir.Constant(x.type, -1), q)


_FCMP = {"EQ": ("==", True), "NE": ("!=", False), "LT": ("<", True), "LE": ("<=", True),
         "GT": (">", True), "GE": (">=", True)}


def compare(b: ir.IRBuilder, direction: str, dtype, x, y):
    """``compare`` -> i1. Floats: ordered, except NE which is unordered (NaN != NaN)."""
    op, ordered = _FCMP[direction]
    if T.is_float(dtype):
        # Subnormals compare as ±0, as XLA:CPU's, whatever LLVM makes of the compare: flushed on
        # the bits for every float dtype (relying on the hardware's DAZ for f32/f64 compares
        # broke jnp.frexp of f32 subnormals under jit: tests/test_numpy_more_names.py).
        x, y = _daz(b, dtype, x), _daz(b, dtype, y)
        return b.fcmp_ordered(op, x, y) if ordered else b.fcmp_unordered(op, x, y)
    if T.is_signed(dtype):
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)  # unsigned ints and pred (false < true)


def convert(b: ir.IRBuilder, x, src, dst):
    """``convert`` from ``src`` to ``dst`` dtype, with XLA's semantics:
    float->int truncates toward zero and saturates, NaN -> 0 (``llvm.fpto[su]i.sat``);
    int->int wraps; bool->x is 0/1; x->bool is x != 0 (NaN -> true).
    To f16/bf16 the value is made in f32 and rounded (so f64 -> bf16 rounds twice)."""
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
        if x.type != to:
            x = b.fpext(x, to) if isinstance(to, ir.DoubleType) else b.fptrunc(x, to)
        return T.round_narrow(b, x, dst)
    if T.is_float(src):
        name = "fptosi.sat" if T.is_signed(dst) else "fptoui.sat"
        return T.intrinsic(b, name, to, [x], overload_types=[to, x.type])
    if T.is_float(dst):
        y = b.sitofp(x, to) if T.is_signed(src) else b.uitofp(x, to)
        return T.round_narrow(b, y, dst)
    if dst.itemsize < src.itemsize:
        return b.trunc(x, to)
    if dst.itemsize > src.itemsize:
        return b.sext(x, to) if T.is_signed(src) else b.zext(x, to)
    return x  # same width, other signedness: same bits


#: rsqrt's estimate instruction is x86's (``rsqrtps``); elsewhere rsqrt stays ``1 / sqrt(x)``
_X86 = __import__("llvmlite.binding", fromlist=["get_process_triple"]).get_process_triple().startswith(("x86_64", "i686", "i386"))


def _math(opcode):
    try:
        from minixla.backends.llvm.math import MATH_EMITTERS
    except ModuleNotFoundError as e:  # pragma: no cover - only while math.py is being written
        if e.name != "minixla.backends.llvm.math":
            raise
        raise UnsupportedError(f"'{opcode}': minixla.backends.llvm.math is not available") from e
    return MATH_EMITTERS[opcode]


#: unary ops whose XLA:CPU result for a subnormal (f32, or bf16 widened to f32) input is not what
#: the computation with denormals flushed gives: tanh, sin and tan return x itself (XLA tests
#: |x| against a threshold and passes x through; the compare sees a zero, the select the bits),
#: log1p returns a zero of x's sign (its arithmetic flushes x).
_SUBNORMAL_INPUT = {"tanh": "x", "sine": "x", "tan": "x", "log-plus-one": "zero"}


def unary_op(b: ir.IRBuilder, opcode: str, dtype, x):
    y = _unary_op(b, opcode, dtype, x)
    if opcode in _SUBNORMAL_INPUT and x.type == ir.FloatType():
        tiny = ir.Constant(x.type, float(np.finfo(np.float32).tiny))
        small = b.fcmp_ordered("<", T.intrinsic(b, "fabs", x.type, [x]), tiny)  # (and ±0)
        keep = x if _SUBNORMAL_INPUT[opcode] == "x" else T.intrinsic(
            b, "copysign", x.type, [ir.Constant(x.type, 0.0), x])
        y = b.select(small, keep, y)
    return y


def _unary_op(b: ir.IRBuilder, opcode: str, dtype, x):
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
        if opcode == "rsqrt":  # f32 (f16/bf16 computed in f32) on x86: XLA's estimate + Newton step
            if ty == ir.FloatType() and _X86:
                return _math(opcode)(b, x)
            return b.fdiv(ir.Constant(ty, 1.0), T.intrinsic(b, "sqrt", ty, [x]))
        if opcode == "logistic" and T.is_narrow_float(dtype):
            return _narrow_logistic(b, dtype, x)
        if opcode in ("exponential", "log", "tanh", "logistic"):
            return _math(opcode)(b, x)
        if opcode in ("erf", "erfc") and ty == ir.FloatType():  # f32, f16, bf16: XLA's f32
            return _math(opcode)(b, x)
        if opcode == "exponential-minus-one" and dtype == np.float16:
            return _f16_expm1(b, x)
        if opcode in ("exponential-minus-one", "log-plus-one"):
            return _math({"exponential-minus-one": "expm1", "log-plus-one": "log1p"}[opcode])(b, x)
        if opcode == "round-nearest-afz":
            return T.intrinsic(b, "round", ty, [x])
        if opcode == "round-nearest-even":
            return T.intrinsic(b, "roundeven", ty, [x])
        if opcode in _LIBM_UNARY:
            return libm_call(b, _LIBM_UNARY[opcode], [x])
    raise UnsupportedError(f"the LLVM backend does not support the HLO opcode '{opcode}' on {dtype.name}")


def _narrow_logistic(b: ir.IRBuilder, dtype, x):
    """f16/bf16 ``logistic`` as XLA:CPU computes it, and so JAX eager: XLA expands it
    (``LogisticExpander``) into ``1 / (1 + exp(-x))`` of the narrow type before code generation,
    so ``exp`` and ``1 + e`` are each rounded to ``dtype`` (the caller rounds the division).
    A once-rounded f32 logistic is closer but 1 ulp off JAX for about a sixth of the values."""
    one = ir.Constant(x.type, 1.0)
    e = T.round_narrow(b, _math("exponential")(b, b.fneg(x)), dtype)
    return b.fdiv(one, T.round_narrow(b, b.fadd(one, e), dtype))


def _f16_expm1(b: ir.IRBuilder, x):
    """f16 ``expm1`` as XLA:CPU computes it (JAX eager): unlike bf16 it is not widened to f32
    first, and XLA's elemental expm1 is ``x`` where ``x/2`` underflows, ``exp(x) - 1`` where
    ``|x| > 0.5`` and ``tanh(x/2) * (exp(x) + 1)`` elsewhere, each op rounded to f16 (the caller
    rounds the last). An f32 expm1 rounded once differs from it for 11,381 of the 65,536 values."""
    f16 = np.dtype(np.float16)
    one, half = ir.Constant(x.type, 1.0), ir.Constant(x.type, 0.5)
    x_half = T.round_narrow(b, b.fmul(x, half), f16)
    tanh = T.round_narrow(b, _math("tanh")(b, x_half), f16)
    e = T.round_narrow(b, _math("exponential")(b, x), f16)
    small = b.fmul(tanh, T.round_narrow(b, b.fadd(e, one), f16))
    large = T.round_narrow(b, b.fsub(e, one), f16)
    y = b.select(b.fcmp_ordered(">", T.intrinsic(b, "fabs", x.type, [x]), half), large, small)
    return b.select(b.fcmp_ordered("==", x_half, ir.Constant(x.type, 0.0)), x, y)


#: the functions XLA:CPU calls as libm's float versions (sinf, ...) for f32 (f16/bf16 widened)
_LIBM_F32 = {"sin", "cos", "tan", "atan2", "pow", "cbrt"}

_LIBM_UNARY = {"sine": "sin", "cosine": "cos", "tan": "tan", "cbrt": "cbrt", "erf": "erf", "erfc": "erfc"}

#: opcodes whose f16/bf16 result is already exactly representable (no rounding after them).
EXACT_OPCODES = {"parameter", "constant", "broadcast", "reshape", "bitcast", "transpose", "slice",
                 "copy", "select", "clamp", "maximum", "minimum", "negate", "abs", "sign", "floor",
                 "ceil", "round-nearest-afz", "round-nearest-even", "convert", "reverse", "pad",
                 "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "bitcast-convert",
                 "remainder"}
