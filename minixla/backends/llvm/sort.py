"""The ``sort`` kernel: a stable LSD radix sort of each row, in LLVM IR.

A ``sort`` instruction (``minixla.hlo.lowering._sort``) sorts its operands together along one
dimension by the lexicographic order of the first ``num_keys`` and returns operand
``result_index`` in that order. XLA:CPU calls ``std::stable_sort`` with a compiled comparator;
this kernel instead turns every key element into an unsigned integer whose order is the
comparator's (the same map as ``minixla.hlo.evaluator.sort_keys_as_uint``: floats with
``-0.0 = 0.0``, one NaN above inf, denormals as zero; signed integers offset by ``2**(bits-1)``)
and sorts a permutation by them, least significant digit first:

1. ``perm[i] = i`` for the row;
2. for each key, from the last to the first: ``key[i] = ordered(op_key[row, perm[i]])``,
   then one counting pass per byte of the key, low byte first: a 256-bucket histogram, its
   prefix sums, and a stable scatter of the ``(key, perm)`` pairs into the other buffer. A pass
   whose byte is the same for the whole row is skipped (small integers, the high bytes of
   floats of one sign and exponent range);
3. ``out[row, i] = op_result[row, perm[i]]``.

Each counting pass is stable, so a pass sorts by its byte keeping the order of the earlier
ones: after all of them the row is sorted by the whole key, ties kept in input order (every
``sort`` is stable here, which ``is_stable=False`` also allows). The work is
``O(n * bytes)`` per row, sequential reads and 256 streams of writes; the scratch buffers
(``2 * (8 + 4)`` bytes per row element) come from ``malloc`` once per call.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import Index, for_loop, if_then
from minixla.core.errors import UnsupportedError

I8, I32, I64 = T.I8, T.I32, T.I64


def _libc(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    return fn


def _element(kb, operand, linear):
    """Operand element ``linear`` in its memory type: loaded from the operand's buffer, or, for
    an expression fused into the sort (an ``iota``, a ``not``), computed by the elemental emitter."""
    b, dtype = kb.builder, operand.shape.dtype
    mem = T.mem_type(dtype)
    if operand in kb.buffers:
        return b.load(T.element_ptr(b, kb.buffers[operand], dtype, linear), typ=mem)
    value = kb.emitter().emit(operand, Index(b, operand.shape.dims, linear=linear))
    return T.to_memory(b, value, dtype)


def _raw_bits(kb, operand, linear):
    """The element's bits as an integer of its width (bool: i8)."""
    v = _element(kb, operand, linear)
    if isinstance(v.type, ir.IntType):
        return v
    return kb.builder.bitcast(v, ir.IntType(8 * np.dtype(operand.shape.dtype).itemsize))


def ordered_key(b, bits, dtype):
    """``bits`` (the element's raw bits) as an i64 ordered as JAX's sort comparator orders the
    elements (see the module docstring)."""
    dtype = np.dtype(dtype)
    if T.is_pred(dtype) or dtype.kind == "u":
        return b.zext(bits, I64)
    width = 8 * dtype.itemsize
    ty = ir.IntType(width)
    sign = ir.Constant(ty, 1 << (width - 1))
    if dtype.kind == "i":
        return b.zext(b.xor(bits, sign), I64)
    nexp = 5 if dtype == np.float16 else {2: 8, 4: 8, 8: 11}[dtype.itemsize]
    nmant = width - 1 - nexp
    mag = b.and_(bits, ir.Constant(ty, (1 << (width - 1)) - 1))
    exp_all = ((1 << nexp) - 1) << nmant
    # ±0 (and, as XLA:CPU compares with denormals read as zero, f32/f64/bf16 denormals) -> +0
    small = (b.icmp_unsigned("==", mag, ir.Constant(ty, 0)) if dtype == np.float16
             else b.icmp_unsigned("<", mag, ir.Constant(ty, 1 << nmant)))
    bits = b.select(small, ir.Constant(ty, 0), bits)
    is_nan = b.icmp_unsigned(">", mag, ir.Constant(ty, exp_all))
    bits = b.select(is_nan, ir.Constant(ty, exp_all | (1 << (nmant - 1))), bits)
    negative = b.icmp_unsigned(">=", bits, sign)
    key = b.select(negative, b.not_(bits), b.or_(bits, sign))
    return b.zext(key, I64)


def emit_sort(kb, instr):
    b = kb.builder
    (dim,), num_keys, result = (instr.attrs["dimensions"], instr.attrs["num_keys"],
                                instr.attrs["result_index"])
    dims = instr.shape.dims
    n = dims[dim]
    outer, inner = math.prod(dims[:dim]), math.prod(dims[dim + 1:])
    if outer * n * inner == 0:
        return
    if n >= 2 ** 31:
        raise UnsupportedError(f"sort of a dimension of {n} >= 2**31 elements")
    ops = instr.operands
    for o in ops:
        T.check_dtype(o.shape.dtype, "sort")
    out_dtype = instr.shape.dtype
    module = b.module
    malloc = _libc(module, "malloc", T.PTR, [I64])
    free = _libc(module, "free", ir.VoidType(), [T.PTR])
    scratch = b.call(malloc, [T.i64(n * 24)])
    keys = [scratch, b.gep(scratch, [T.i64(n)], source_etype=I64)]
    perm0 = b.gep(scratch, [T.i64(2 * n)], source_etype=I64)
    perms = [perm0, b.gep(perm0, [T.i64(n)], source_etype=I32)]
    hist = kb.alloca(I32, "hist", count=256)
    cur = kb.alloca(I64, "cur")  # which of the two (key, perm) buffers holds the current order

    def pick(pair, which):
        return b.select(b.icmp_signed("==", which, T.i64(0)), pair[0], pair[1])

    def linear(o, i, j):  # element (o, i, j) of the row-major (outer, n, inner) view
        return b.add(b.mul(b.add(b.mul(o, T.i64(n)), i), T.i64(inner)), j)

    with for_loop(b, 0, outer, "sort.o") as o, for_loop(b, 0, inner, "sort.j") as j:
        b.store(T.i64(0), cur)
        with for_loop(b, 0, n, "sort.init") as i:
            b.store(b.trunc(i, I32), b.gep(perms[0], [i], inbounds=True, source_etype=I32))
        for k in reversed(range(num_keys)):
            dtype = np.dtype(ops[k].shape.dtype)
            c = b.load(cur)
            kc, pc = pick(keys, c), pick(perms, c)
            with for_loop(b, 0, n, "sort.key") as i:
                p = b.zext(b.load(b.gep(pc, [i], inbounds=True, source_etype=I32), typ=I32), I64)
                raw = _raw_bits(kb, ops[k], linear(o, p, j))
                b.store(ordered_key(b, raw, dtype), b.gep(kc, [i], inbounds=True, source_etype=I64))
            for byte in range(1 if T.is_pred(dtype) else dtype.itemsize):
                _radix_pass(b, kb, keys, perms, cur, hist, n, 8 * byte)
        c = b.load(cur)
        pc = pick(perms, c)
        with for_loop(b, 0, n, "sort.out") as i:
            p = b.zext(b.load(b.gep(pc, [i], inbounds=True, source_etype=I32), typ=I32), I64)
            v = _element(kb, ops[result], linear(o, p, j))
            b.store(v, T.element_ptr(b, kb.out, out_dtype, linear(o, i, j)))
    b.call(free, [scratch])


def _radix_pass(b, kb, keys, perms, cur, hist, n, shift):
    """One stable counting pass on the byte at ``shift`` of the current keys."""
    c = b.load(cur)
    zero = T.i64(0)
    is0 = b.icmp_signed("==", c, zero)
    k_src, k_dst = b.select(is0, keys[0], keys[1]), b.select(is0, keys[1], keys[0])
    p_src, p_dst = b.select(is0, perms[0], perms[1]), b.select(is0, perms[1], perms[0])

    def digit(i):
        key = b.load(b.gep(k_src, [i], inbounds=True, source_etype=I64), typ=I64)
        return key, b.and_(b.lshr(key, T.i64(shift)), T.i64(255))
    with for_loop(b, 0, 256, "hist.zero") as d:
        b.store(ir.Constant(I32, 0), b.gep(hist, [d], inbounds=True, source_etype=I32))
    with for_loop(b, 0, n, "hist.count") as i:
        _, d = digit(i)
        slot = b.gep(hist, [d], inbounds=True, source_etype=I32)
        b.store(b.add(b.load(slot, typ=I32), ir.Constant(I32, 1)), slot)
    _, d0 = digit(T.i64(0))
    first = b.load(b.gep(hist, [d0], inbounds=True, source_etype=I32), typ=I32)
    # a byte shared by the whole row orders nothing: skip the scatter
    with if_then(b, b.icmp_unsigned("!=", first, ir.Constant(I32, n)), "radix.pass"):
        acc = kb.alloca(I32, "hist.acc")
        b.store(ir.Constant(I32, 0), acc)
        with for_loop(b, 0, 256, "hist.scan") as d:
            slot = b.gep(hist, [d], inbounds=True, source_etype=I32)
            count = b.load(slot, typ=I32)
            total = b.load(acc, typ=I32)
            b.store(total, slot)
            b.store(b.add(total, count), acc)
        with for_loop(b, 0, n, "radix.scatter") as i:
            key, d = digit(i)
            slot = b.gep(hist, [d], inbounds=True, source_etype=I32)
            pos = b.load(slot, typ=I32)
            b.store(b.add(pos, ir.Constant(I32, 1)), slot)
            pos64 = b.zext(pos, I64)
            b.store(key, b.gep(k_dst, [pos64], inbounds=True, source_etype=I64))
            perm = b.load(b.gep(p_src, [i], inbounds=True, source_etype=I32), typ=I32)
            b.store(perm, b.gep(p_dst, [pos64], inbounds=True, source_etype=I32))
        b.store(b.select(is0, T.i64(1), zero), cur)
