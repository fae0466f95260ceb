"""One LLVM function per kernel (XLA:CPU's ``IrEmitter`` + ``LoopEmitter``).

A kernel is ``void name(ptr noalias out, ptr noalias in0, ..., ptr noalias const0, ...)``:
the output buffer, the buffers of the entry-level operands, then the array constants
used inside a fused computation. Pointers are ``noalias`` (buffer assignment never gives
a kernel's output the buffer of one of its inputs), which lets LLVM vectorize freely.

Kernel shapes:

* **loop** (kLoop fusions and lone elementwise/broadcast/transpose/... ops): a loop nest over
  the output, innermost over the last dim, the element computed by the elemental emitter.
  When no op in the expression needs a multi-dim index, it is one flat loop.
* **reduce** (lone ``reduce`` and kInput fusions rooted at one): ``out = init``, then one
  pass over the *input* in row-major order doing ``out[kept(i)] = reducer(out[kept(i)], x[i])``.
  Memory is read contiguously whichever dims are reduced; for trailing reduced dims LLVM keeps
  the accumulator in a register and (thanks to ``reassoc``) vectorizes the reduction.
* **dot** / **convolution** (lone, or kOutput fusions with an elementwise tail): the output is
  accumulated in place, innermost over a contiguous output row (the rhs free dims of a dot,
  the output features of a conv) with ``llvm.fma``; then the tail is applied to the finished row.
  A dot whose rhs rows are not contiguous (``x @ w.T``), or a tail that changes the dtype,
  uses the loop kernel instead: the elemental ``dot``/``convolution`` rule accumulates one output
  element at a time, innermost over the contracting dims (a vectorizable reduction).
  No register tiling or threads yet: that is the next step for speed.

Every kernel runs with denormals flushed to zero, as XLA:CPU does (see below).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import Index, for_loop, if_then, linearize, loop_nest, row_major_strides
from minixla.core.errors import UnsupportedError
from minixla.hlo.ir import ELEMENTWISE


@dataclass
class Kernel:
    """A kernel function and what the executable must pass to it.

    ``inputs`` are entry-level instructions whose buffers follow ``out``; ``constants`` are
    numpy arrays (array constants inside a fused computation) passed after them.
    """
    name: str
    instr: object                      # the entry-level instruction it computes
    kind: str                          # kLoop / kInput / kOutput, or the opcode of a lone op
    opcodes: list
    inputs: list = field(default_factory=list)
    constants: list = field(default_factory=list)


#: ops that read their operand at another index (so a flat linear loop is not enough).
_INDEX_CHANGING = {"broadcast", "transpose", "slice", "iota", "reduce", "dot", "convolution"}


def _expression(root, stop):
    """The instructions of the expression rooted at ``root``, not looking past ``stop``."""
    seen, order = set(), []

    def visit(i):
        if i in seen:
            return
        seen.add(i)
        if i not in stop:
            for o in i.operands:
                visit(o)
        order.append(i)
    visit(root)
    return order


def _needs_multi_index(root, stop) -> bool:
    for i in _expression(root, stop):
        if i in stop:
            continue
        if i.opcode in _INDEX_CHANGING:
            if i.opcode == "broadcast" and i.operands[0].shape.rank == 0:
                continue  # a scalar broadcast reads the same element everywhere
            return True
    return False


class _KernelBuilder:
    """Creates the function and maps the computed expression's leaves to its arguments."""

    def __init__(self, module: ir.Module, kernel: Kernel, leaves: list, fused_constants: list):
        nargs = 1 + len(leaves) + len(fused_constants)
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * nargs), name=kernel.name)
        fn.attributes.add("nounwind")
        for a in fn.args:
            a.add_attribute("noalias")
        fn.args[0].name = "out"
        self.fn = fn
        # The entry block holds only the stack slots (allocas) of accumulators, where LLVM's
        # mem2reg promotes them to registers; the code starts in ``body``.
        self._entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(fn.append_basic_block("body"))
        self._saved_fp_mode = _enter_flush_denormals(self.builder) if FLUSH_DENORMALS else None
        self.out = fn.args[0]
        self.buffers = {}
        for k, leaf in enumerate(leaves):
            fn.args[1 + k].name = f"in{k}"
            self.buffers[leaf] = fn.args[1 + k]
        for k, c in enumerate(fused_constants):
            fn.args[1 + len(leaves) + k].name = f"const{k}"
            self.buffers[c] = fn.args[1 + len(leaves) + k]

    def emitter(self, values=None):
        return E.ElementalEmitter(self.builder, self.buffers, values)

    def finish(self):
        if self._saved_fp_mode is not None:
            _x86_mxcsr(self.builder, "ldmxcsr", self._saved_fp_mode)
        self.builder.ret_void()
        ir.IRBuilder(self._entry).branch(self.fn.basic_blocks[1])


# ---------------------------------------------------------------------------------------
# Denormals. XLA:CPU runs every computation with denormals flushed to zero (x86 MXCSR's
# FTZ and DAZ bits: subnormal results become ±0, subnormal inputs read as ±0), so JAX eager
# gives ``1e-40 + 0 == 0``. To be bit-identical with it, each kernel sets those bits on entry
# and restores the caller's MXCSR on exit (per kernel, so it also holds on worker threads).
# The ``denormal-fp-math`` function attribute tells LLVM's constant folder the same thing.

FLUSH_DENORMALS = llvm_binding.get_process_triple().startswith("x86_64")
DENORMAL_ATTRIBUTE = '"denormal-fp-math"="preserve-sign,preserve-sign"'
_FTZ_DAZ = 0x8040  # MXCSR bit 15 (flush to zero) | bit 6 (denormals are zero)


def _x86_mxcsr(builder, op, slot):
    name = f"llvm.x86.sse.{op}"
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), [T.PTR]), name=name)
    builder.call(fn, [slot])


def _enter_flush_denormals(builder):
    i32 = ir.IntType(32)
    saved, mode = builder.alloca(i32, name="mxcsr.saved"), builder.alloca(i32, name="mxcsr.ftz")
    _x86_mxcsr(builder, "stmxcsr", saved)
    builder.store(builder.or_(builder.load(saved, typ=i32), ir.Constant(i32, _FTZ_DAZ)), mode)
    _x86_mxcsr(builder, "ldmxcsr", mode)
    return saved


# ---------------------------------------------------------------------------------------
# Loop kernels.

def emit_loop(kb: _KernelBuilder, root, out_dtype=None):
    """``out[i] = root[i]`` for every output index ``i``."""
    b = kb.builder
    dims = root.shape.dims
    dtype = root.shape.dtype if out_dtype is None else out_dtype
    if math.prod(dims) == 0:
        return
    if _needs_multi_index(root, kb.buffers):
        with loop_nest(b, dims) as ivs:
            index = Index(b, dims, multi=ivs)
            T.store_element(b, kb.emitter().emit(root, index), kb.out, dtype, index.linear)
    else:
        with for_loop(b, 0, math.prod(dims), "i") as i:
            index = Index(b, dims, linear=i)
            T.store_element(b, kb.emitter().emit(root, index), kb.out, dtype, i)


# ---------------------------------------------------------------------------------------
# Reduce kernels.

def emit_reduce(kb: _KernelBuilder, reduce):
    b = kb.builder
    operand, init, reduced, kept = E.reduce_parts(reduce)
    dtype = T.check_dtype(reduce.shape.dtype, "reduce")
    out_dims, in_dims = reduce.shape.dims, operand.shape.dims
    n_out = math.prod(out_dims)
    if n_out == 0:
        return
    init_value = kb.emitter().emit(init, Index(b, (), multi=[]))
    with for_loop(b, 0, n_out, "o") as o:
        T.store_element(b, init_value, kb.out, dtype, o)
    if math.prod(in_dims) == 0:
        return
    with loop_nest(b, in_dims) as ivs:
        x = kb.emitter().emit(operand, Index(b, in_dims, multi=ivs))
        o = linearize(b, [ivs[d] for d in kept], out_dims)
        acc = T.load_element(b, kb.out, dtype, o)
        T.store_element(b, E.emit_reducer(b, reduce.called[0], acc, x), kb.out, dtype, o)


# ---------------------------------------------------------------------------------------
# Dot and convolution kernels, optionally with a fused elementwise tail (kOutput).

def _apply_tail(kb, root, core, row_positions):
    """After a row of ``core`` is accumulated in ``out``: ``out[i] = tail(out[i])`` over the row."""
    if root is core:
        return
    b = kb.builder
    dims = core.shape.dims
    dtype = core.shape.dtype
    with row_positions() as multi:
        index = Index(b, dims, multi=multi)
        acc = T.load_element(b, kb.out, dtype, index.linear)
        value = kb.emitter(values={core: acc}).emit(root, index)
        T.store_element(b, value, kb.out, root.shape.dtype, index.linear)


def dot_row_strategy_ok(dot) -> bool:
    """In-place row accumulation pays off when the rhs's last dim is a free dim (contiguous rows)."""
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    rhs = dot.operands[1]
    return bool(rf) and rf[-1] == rhs.shape.rank - 1


def emit_dot(kb: _KernelBuilder, dot, root):
    """``out[b, m, :] = sum_k lhs[b, m, k] * rhs[b, k, :]``, innermost over the rhs free dims."""
    b = kb.builder
    lhs, rhs = dot.operands
    dtype = T.check_dtype(dot.shape.dtype, "dot")
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    dims = dot.shape.dims
    if math.prod(dims) == 0:
        return
    nb, nl = len(lb), len(lf)
    row_dims = dims[nb + nl:]
    zero = T.constant(dtype, 0)
    with loop_nest(b, dims[:nb + nl], "m") as outer:
        bv, lv = outer[:nb], outer[nb:]
        row_start = linearize(b, outer + [T.i64(0)] * len(row_dims), dims)

        @contextlib.contextmanager
        def row_positions():
            with loop_nest(b, row_dims, "n") as ns:
                yield outer + ns

        with for_loop(b, 0, math.prod(row_dims), "z") as j:
            T.store_element(b, zero, kb.out, dtype, b.add(row_start, j))
        with loop_nest(b, [lhs.shape.dims[d] for d in lc], "k") as ks:
            x = E.load_converted(kb.emitter(), lhs, E.dot_operand_index(b, lhs, lb, bv, lc, ks, lf, lv), dtype)
            with loop_nest(b, row_dims, "n") as ns:
                y = E.load_converted(kb.emitter(), rhs, E.dot_operand_index(b, rhs, rb, bv, rc, ks, rf, ns), dtype)
                o = b.add(row_start, linearize(b, ns, row_dims))
                acc = T.load_element(b, kb.out, dtype, o)
                T.store_element(b, E.multiply_accumulate(b, dtype, acc, x, y), kb.out, dtype, o)
        _apply_tail(kb, root, dot, row_positions)


def emit_convolution(kb: _KernelBuilder, conv, root):
    """For each (batch, output position): zero the row of output features, then for each
    window offset inside the input and each input feature ``c`` of a group,
    ``out[..., f] += lhs[..., c] * rhs[k, c, f]`` over the group's output features ``f``."""
    b = kb.builder
    lhs, rhs = conv.operands
    dtype = T.check_dtype(conv.shape.dtype, "convolution")
    dn, cg, og, groups, window = E.conv_parts(conv)
    dims = conv.shape.dims
    if math.prod(dims) == 0:
        return
    fdim = dn.out_spec[1]
    fstride = row_major_strides(dims)[fdim]
    outer_dims = [d for d in range(len(dims)) if d != fdim]  # in memory order
    nsp = len(dims) - 2
    zero = T.constant(dtype, 0)

    def full_index(outer_ivs, f):
        multi = [None] * len(dims)
        for d, v in zip(outer_dims, outer_ivs):
            multi[d] = v
        multi[fdim] = f
        return multi

    with loop_nest(b, [dims[d] for d in outer_dims], "o") as outer:
        multi0 = full_index(outer, T.i64(0))
        row_start = linearize(b, multi0, dims)
        batch = multi0[dn.out_spec[0]]
        out_pos = [multi0[dn.out_spec[2 + s]] for s in range(nsp)]

        def row_offset(f):
            return b.add(row_start, f if fstride == 1 else b.mul(f, T.i64(fstride)))

        @contextlib.contextmanager
        def row_positions():
            with for_loop(b, 0, dims[fdim], "f") as f:
                yield full_index(outer, f)

        with for_loop(b, 0, dims[fdim], "z") as f:
            T.store_element(b, zero, kb.out, dtype, row_offset(f))
        with for_loop(b, 0, groups, "g") as g, loop_nest(b, window["size"], "w") as ks:
            positions, valid = [], ir.Constant(T.I1, 1)
            for s in range(nsp):
                p, v = E.conv_input_position(b, conv, dn, window, s, out_pos[s], ks[s])
                positions.append(p)
                valid = b.and_(valid, v)
            with if_then(b, valid, "inside"), for_loop(b, 0, cg, "c") as c:
                lm = [None] * lhs.shape.rank
                lm[dn.lhs_spec[0]] = batch
                lm[dn.lhs_spec[1]] = b.add(b.mul(g, T.i64(cg)), c)
                for s in range(nsp):
                    lm[dn.lhs_spec[2 + s]] = positions[s]
                x = E.load_converted(kb.emitter(), lhs, Index(b, lhs.shape.dims, multi=lm), dtype)
                with for_loop(b, 0, og, "f") as fo:
                    f = b.add(b.mul(g, T.i64(og)), fo)
                    rm = [None] * rhs.shape.rank
                    rm[dn.rhs_spec[0]], rm[dn.rhs_spec[1]] = f, c
                    for s in range(nsp):
                        rm[dn.rhs_spec[2 + s]] = ks[s]
                    y = E.load_converted(kb.emitter(), rhs, Index(b, rhs.shape.dims, multi=rm), dtype)
                    o = row_offset(f)
                    acc = T.load_element(b, kb.out, dtype, o)
                    T.store_element(b, E.multiply_accumulate(b, dtype, acc, x, y), kb.out, dtype, o)
        _apply_tail(kb, root, conv, row_positions)


# ---------------------------------------------------------------------------------------
# Entry point: one entry-level instruction -> one kernel.

def _array_constants(comp):
    return [i for i in comp.instructions if i.opcode == "constant" and i.shape.rank > 0]


def emit_kernel(module: ir.Module, instr, name: str) -> Kernel:
    """Emit the kernel computing entry-level ``instr`` into ``module``.

    Raises ``UnsupportedError`` (naming the opcode/dtype) for anything the backend cannot emit.
    """
    if instr.shape.is_tuple:
        raise UnsupportedError(f"the LLVM backend does not support tuple-shaped '{instr.opcode}' "
                               "(multi-output fusion)")
    T.check_dtype(instr.shape.dtype, instr.opcode)
    if instr.opcode == "fusion":
        comp = instr.fused_computation
        kind = instr.attrs.get("kind", "kLoop")
        params = comp.parameters
        if len(params) != len(instr.operands):
            raise ValueError(f"fusion '{instr.name}' has {len(instr.operands)} operands "
                             f"but its computation has {len(params)} parameters")
        consts = _array_constants(comp)
        kernel = Kernel(name, instr, kind, [i.opcode for i in comp.instructions if i.opcode != "parameter"],
                        inputs=list(instr.operands), constants=[np.asarray(c.literal) for c in consts])
        kb = _KernelBuilder(module, kernel, params, consts)
        _emit_body(kb, comp.root)
    else:
        # A lone op: its operands' buffers are the leaves (scalar constants become immediates).
        leaves = []
        for o in instr.operands:
            if o not in leaves and not (o.opcode == "constant" and o.shape.rank == 0):
                leaves.append(o)
        kernel = Kernel(name, instr, instr.opcode, [instr.opcode], inputs=leaves)
        kb = _KernelBuilder(module, kernel, leaves, [])
        _emit_body(kb, instr)
    kb.finish()
    return kernel


def _emit_body(kb: _KernelBuilder, root):
    if root.opcode == "reduce":
        emit_reduce(kb, root)
        return
    core = _find_core(kb, root)
    if core is not None and core.shape.dtype == root.shape.dtype:
        if core.opcode == "convolution":
            emit_convolution(kb, core, root)
            return
        if dot_row_strategy_ok(core):
            emit_dot(kb, core, root)
            return
    emit_loop(kb, root)


def _find_core(kb, root):
    """The dot/conv of a kOutput-shaped expression rooted at ``root`` (None if not that shape)."""
    expr = [i for i in _expression(root, kb.buffers) if i not in kb.buffers]
    cores = [i for i in expr if i.opcode in ("dot", "convolution")]
    if len(cores) != 1:
        return None
    core = cores[0]
    # Every instruction depending on the core must be elementwise with the core's dims.
    depends = {core}
    for i in expr:  # topological order
        if i is not core and any(o in depends for o in i.operands):
            if i.opcode not in ELEMENTWISE or i.shape.dims != core.shape.dims:
                return None
            depends.add(i)
    return core
