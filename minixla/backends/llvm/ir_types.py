"""Element types, constants, memory access and intrinsics (XLA's ``llvm_ir/llvm_util``).

A dtype has two LLVM types: the *register* type values have while we compute, and the
*memory* type of array elements. They differ for ``pred`` (bool): ``i1`` in registers,
one byte (``i8``, 0 or 1, like numpy's ``bool_``) in memory; and for the narrow floats
``float16`` and ``bfloat16``, which live in memory as ``half`` / ``i16`` and are computed in
``float`` registers, as XLA:CPU does. ``round_narrow`` rounds an f32 register value to the
narrow type (and back), so every op on a narrow float rounds its result exactly as JAX eager,
which also computes each op in f32 and rounds (for + - * / and sqrt that double rounding
is harmless: f32 has more than 2p+2 bits for p = 8 or 11).

All pointers are LLVM's opaque ``ptr``; loads and GEPs name the element type.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from llvmlite import ir

from minixla.core.errors import UnsupportedError

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
F32 = ir.FloatType()

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
#: floats computed in f32 registers and rounded to their own precision after every op.
NARROW_FLOATS = {FLOAT16, BFLOAT16}
_FLOAT_TYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): ir.DoubleType(),
                FLOAT16: F32, BFLOAT16: F32}


def check_dtype(dtype, what: str) -> np.dtype:
    """The dtype if the backend supports it, else ``UnsupportedError`` naming ``what`` (the op)."""
    dtype = np.dtype(dtype)
    if dtype in _FLOAT_TYPES or dtype == np.bool_ or dtype.kind in "iu":
        return dtype
    raise UnsupportedError(f"the LLVM backend does not support dtype {dtype.name} (in '{what}')")


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == BFLOAT16


def is_narrow_float(dtype) -> bool:
    return np.dtype(dtype) in NARROW_FLOATS


def is_signed(dtype) -> bool:
    return np.dtype(dtype).kind == "i"


def is_pred(dtype) -> bool:
    return np.dtype(dtype) == np.bool_


def reg_type(dtype) -> ir.Type:
    """The type of a value of ``dtype`` in registers (pred -> i1)."""
    dtype = check_dtype(dtype, "element type")
    if dtype in _FLOAT_TYPES:
        return _FLOAT_TYPES[dtype]
    if dtype == np.bool_:
        return I1
    return ir.IntType(8 * dtype.itemsize)


def mem_type(dtype) -> ir.Type:
    """The type of an array element of ``dtype`` in memory (pred -> i8, f16 -> half, bf16 -> i16)."""
    dtype = np.dtype(dtype)
    if dtype == FLOAT16:
        return ir.HalfType()
    if dtype == BFLOAT16:
        return I16
    return I8 if is_pred(dtype) else reg_type(dtype)


def _bf16_bits(builder: ir.IRBuilder, value):
    """The bfloat16 nearest an f32 register value, as i16 bits: round to nearest even on the
    bit pattern; a NaN becomes the quiet NaN of its sign (payload dropped, as XLA:CPU's)."""
    bits = builder.bitcast(value, I32)
    lsb = builder.and_(builder.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = builder.add(bits, builder.add(ir.Constant(I32, 0x7FFF), lsb))
    quiet_nan = builder.or_(builder.and_(bits, ir.Constant(I32, 0x80000000)), ir.Constant(I32, 0x7FC00000))
    is_nan = builder.fcmp_unordered("uno", value, value)
    out = builder.select(is_nan, quiet_nan, rounded)
    return builder.trunc(builder.lshr(out, ir.Constant(I32, 16)), I16)


def _bf16_from_bits(builder: ir.IRBuilder, bits16):
    return builder.bitcast(builder.shl(builder.zext(bits16, I32), ir.Constant(I32, 16)), F32)


def to_memory(builder: ir.IRBuilder, value, dtype):
    """A register value of ``dtype`` as its memory representation (rounds narrow floats)."""
    dtype = np.dtype(dtype)
    if is_pred(dtype):
        return builder.zext(value, I8)
    if dtype == FLOAT16:
        return builder.fptrunc(value, ir.HalfType())
    if dtype == BFLOAT16:
        return _bf16_bits(builder, value)
    return value


def from_memory(builder: ir.IRBuilder, value, dtype):
    """A memory-typed element of ``dtype`` in its register type."""
    dtype = np.dtype(dtype)
    if is_pred(dtype):
        return builder.icmp_unsigned("!=", value, ir.Constant(I8, 0))
    if dtype == FLOAT16:
        return builder.fpext(value, F32)
    if dtype == BFLOAT16:
        return _bf16_from_bits(builder, value)
    return value


def round_narrow(builder: ir.IRBuilder, value, dtype):
    """Round an f32 register value to ``dtype`` if it is a narrow float (else return it as is)."""
    if not is_narrow_float(dtype):
        return value
    return from_memory(builder, to_memory(builder, value, dtype), dtype)


def constant(dtype, value) -> ir.Constant:
    """An immediate of ``dtype`` (register type) holding ``value`` (a Python or numpy scalar)."""
    dtype = np.dtype(dtype)
    ty = reg_type(dtype)
    if is_float(dtype):
        # float() of a float32 is exact; llvmlite prints the f32-rounded bit pattern.
        return ir.Constant(ty, float(np.asarray(value, dtype)))
    if is_pred(dtype):
        return ir.Constant(ty, int(bool(value)))
    # Integers: two's-complement bits, printed as the signed value LLVM expects.
    bits = 8 * dtype.itemsize
    v = int(np.asarray(value).astype(dtype)) & ((1 << bits) - 1)
    if v >= 1 << (bits - 1):
        v -= 1 << bits
    return ir.Constant(ty, v)


def i64(value: int) -> ir.Constant:
    return ir.Constant(I64, int(value))


def element_ptr(builder: ir.IRBuilder, base, dtype, linear_index):
    """``&base[linear_index]`` for an array of ``dtype``."""
    return builder.gep(base, [linear_index], inbounds=True, source_etype=mem_type(dtype))


def load_element(builder: ir.IRBuilder, base, dtype, linear_index):
    """Load ``base[linear_index]`` and return it in register type."""
    v = builder.load(element_ptr(builder, base, dtype, linear_index), typ=mem_type(dtype))
    return from_memory(builder, v, dtype)


def store_element(builder: ir.IRBuilder, value, base, dtype, linear_index):
    """Store a register value into ``base[linear_index]``."""
    builder.store(to_memory(builder, value, dtype), element_ptr(builder, base, dtype, linear_index))


def _type_suffix(ty: ir.Type) -> str:
    """LLVM's overloaded-intrinsic suffix: f32, f64, i32, v16f32, ..."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_type_suffix(ty.element)}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    return f"i{ty.width}"


def intrinsic(builder: ir.IRBuilder, name: str, ret_type: ir.Type, args, overload_types=None,
              fastmath=()):
    """Call ``llvm.<name>.<suffixes>``; the suffixes come from ``overload_types`` (default: ret type)."""
    overload_types = [ret_type] if overload_types is None else overload_types
    full = ".".join(["llvm", name] + [_type_suffix(t) for t in overload_types])
    module = builder.module
    fn = module.globals.get(full)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret_type, [a.type for a in args]), name=full)
    return builder.call(fn, list(args), fastmath=fastmath)
