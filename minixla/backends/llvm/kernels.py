"""One LLVM function per kernel (XLA:CPU's ``IrEmitter`` + ``LoopEmitter``).

A kernel is ``void name(ptr noalias out, ptr noalias in0, ..., ptr noalias const0, ..., i64 lo, i64 hi)``:
the output buffer, the buffers of the entry-level operands, the array constants used inside
a fused computation, and the range ``[lo, hi)`` of *parallel units* to compute. Pointers are
``noalias`` (buffer assignment never gives a kernel's output the buffer of one of its inputs),
which lets LLVM vectorize freely.

Units are what the executable splits over its thread pool (XLA:CPU's "parallel task
assignment" cuts the outer loop the same way). Every kernel computes a disjoint part of its
output per unit: the rows of the outer loop nest, the kept leading rows of a reduction, the
(batch, row chunk, column panel) blocks of a dot. ``Kernel.units`` is their count and
``Kernel.cost_ns`` a rough single-core time, from which the executable decides whether a
kernel is worth splitting.

Kernel shapes:

* **loop** (kLoop fusions and lone elementwise/broadcast/transpose/... ops): a loop nest over
  the output, innermost over the last dim, the element computed by the elemental emitter.
  When no op in the expression needs a multi-dim index, it is one flat loop.
* **reduce** (lone ``reduce`` and kInput fusions rooted at one): ``out = init``, then one
  pass over the *input* doing ``out[kept(i)] = reducer(out[kept(i)], x[i])``, each contiguous
  run of the input read in order. For trailing reduced dims each output element is accumulated in a register, vectorized
  (thanks to ``reassoc``), in blocks combined pairwise (``reductions.accumulate``); for
  trailing kept dims (a column reduction) a row of accumulators is added to along each input
  row, in blocks of rows combined pairwise (``reductions.accumulate_columns``).
* **gemm** (float ``dot``/``convolution``, lone or kOutput fusions with an elementwise tail):
  register-tiled micro-kernels over packed panels of the rhs, see ``gemm.py``.
* **dot** / **convolution** rows (the rest: integer dots, grouped/dilated convolutions,
  layouts the micro-kernel does not take): the output is accumulated in place, innermost over
  a contiguous output row with ``llvm.fma``, then the tail is applied to the finished row.
  A dot whose rhs rows are not contiguous and that the micro-kernel cannot take, or a tail
  that changes the dtype, uses the loop kernel: the elemental ``dot``/``convolution`` rule
  accumulates one output element at a time (a vectorizable reduction).

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
from minixla.backends.llvm import reductions as R
from minixla.backends.llvm.loops import Index, delinearize, for_loop, if_then, linearize, loop_nest
from minixla.backends.llvm.kernels_transpose import emit_transpose, transpose_groups
from minixla.backends.llvm.scan import emit_scan
from minixla.backends.llvm.kernels_dot import (  # noqa: E402 (the dot/convolution kernels)
    dot_library_params, dot_row_strategy_ok, emit_convolution, emit_dot, emit_gemm, emit_library_dot,
    gemm_for_convolution, gemm_for_dot, library_tail_pays)
from minixla.core.errors import UnsupportedError
from minixla.hlo.ir import ELEMENTWISE
from minixla.hlo.scan import scan_axis


@dataclass
class Kernel:
    """A kernel function and what the executable must pass to it.

    ``inputs`` are entry-level instructions whose buffers follow ``out``; ``constants`` are
    numpy arrays (array constants inside a fused computation) passed after them; then the
    unit range ``lo, hi`` (``0 <= lo <= hi <= units``).
    """
    name: str
    instr: object                      # the entry-level instruction it computes
    kind: str                          # kLoop / kInput / kOutput, or the opcode of a lone op
    opcodes: list
    inputs: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    units: int = 1                     # parallel units (see the module docstring)
    cost_ns: float = 0.0               # rough single-core time of all units
    strategy: str = ""                 # loop / reduce / gemm / dot-rows / conv-rows / ...
    in_place: list = field(default_factory=list)   # inputs whose buffer is ``out`` (read through it)
    symbol: str = ""                   # the function's name in the JIT (see ``kernel_cache.py``)


#: ops that read their operand at another index (so a flat linear loop is not enough).
_INDEX_CHANGING = {"broadcast", "transpose", "slice", "iota", "reduce", "dot", "convolution"}
#: ops whose element costs far more than a load (for the cost estimate).
_EXPENSIVE = {"exponential", "log", "tanh", "logistic", "divide", "sqrt", "rsqrt", "power",
              "exponential-minus-one", "log-plus-one", "sine", "cosine", "atan2", "erf"}


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

    def __init__(self, module: ir.Module, kernel: Kernel, leaves: list, fused_constants: list,
                 threads: int = 1, set_fp_mode: bool = True):
        nargs = 1 + len(leaves) + len(fused_constants)
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * nargs + [T.I64, T.I64]),
                         name=kernel.name)
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")  # called from several entry thunks: compile it once
        for a in fn.args[:nargs]:
            a.add_attribute("noalias")
        fn.args[0].name = "out"
        self.fn = fn
        self.kernel = kernel
        self.threads = threads
        # The entry block holds only the stack slots (allocas) of accumulators, where LLVM's
        # mem2reg promotes them to registers; the code starts in ``body``.
        self._entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(fn.append_basic_block("body"))
        self._saved_fp_mode = (enter_flush_denormals(self.builder, self.alloca)
                               if FLUSH_DENORMALS and set_fp_mode else None)
        self.out = fn.args[0]
        self.lo, self.hi = fn.args[nargs], fn.args[nargs + 1]
        self.lo.name, self.hi.name = "lo", "hi"
        self.buffers = {}
        for k, leaf in enumerate(leaves):
            fn.args[1 + k].name = f"in{k}"
            self.buffers[leaf] = fn.args[1 + k]
        for k, c in enumerate(fused_constants):
            fn.args[1 + len(leaves) + k].name = f"const{k}"
            self.buffers[c] = fn.args[1 + len(leaves) + k]

    def emitter(self, values=None):
        return E.ElementalEmitter(self.builder, self.buffers, values)

    def alloca(self, ty, name="slot", count=1):
        """``count`` elements of ``ty`` on the stack, allocated in the entry block."""
        size = None if count == 1 else T.i64(count)
        return ir.IRBuilder(self._entry).alloca(ty, size=size, name=name)

    @contextlib.contextmanager
    def units(self, dims, name="u"):
        """Loop over the units ``[lo, hi)``, units being the row-major positions of ``dims``;
        yields their multi-dim index. Sets ``kernel.units``."""
        self.kernel.units = max(1, math.prod(dims))
        b = self.builder
        with for_loop(b, self.lo, self.hi, name) as u:
            yield delinearize(b, u, dims)

    def finish(self):
        if self._saved_fp_mode is not None:
            exit_flush_denormals(self.builder, self._saved_fp_mode)
        self.builder.ret_void()
        ir.IRBuilder(self._entry).branch(self.fn.basic_blocks[1])


# ---------------------------------------------------------------------------------------
# Denormals. XLA:CPU runs every computation with denormals flushed to zero (x86 MXCSR's
# FTZ and DAZ bits: subnormal results become ±0, subnormal inputs read as ±0), so JAX eager
# gives ``1e-40 + 0 == 0``. To be bit-identical with it, each kernel sets those bits on entry
# and restores the caller's MXCSR on exit (per kernel, so it also holds on worker threads).
# The ``denormal-fp-math-f32`` function attribute tells LLVM the same for f32 (and bf16, which
# is computed in f32). For every other type the attribute says "dynamic" (LLVM assumes neither
# IEEE nor flushing): f16 is widened exactly to a normal f32 (``vcvtph2ps`` ignores DAZ), so its
# subnormals are never flushed, and a "preserve-sign" for half let LLVM shrink an f32 compare
# of a widened f16 to a half compare and fold ``|x| < 6.1035e-05`` to ``x == 0``; f64 does
# flush, but with "ieee" LLVM turns an integer test of the bits (``x & 0x7fff.. == 0``) into
# ``x == 0.0``, which DAZ makes true for a subnormal. (bf16 compares flush their operands on
# the bits, ``scalar_ops._daz``: LLVM folds a bf16 ``x == 0`` into a bit test; max/min flush
# their result, ``scalar_ops.xla_max_min``.)
# Writing MXCSR (``ldmxcsr``) costs ~20 cycles and stalls the FP pipeline, so a kernel writes
# it only when the bits are not set yet: a loop's driver (``control_flow.py``) sets them once
# around the whole loop, and the kernels it calls every iteration then only read MXCSR
# (measured: the two writes were a third of a small loop body's time).

FLUSH_DENORMALS = llvm_binding.get_process_triple().startswith("x86_64")
DENORMAL_ATTRIBUTE = ('"denormal-fp-math"="dynamic,dynamic" '
                      '"denormal-fp-math-f32"="preserve-sign,preserve-sign"')
_FTZ_DAZ = 0x8040  # MXCSR bit 15 (flush to zero) | bit 6 (denormals are zero)


def _x86_mxcsr(builder, op, slot):
    name = f"llvm.x86.sse.{op}"
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), [T.PTR]), name=name)
    builder.call(fn, [slot])


def enter_flush_denormals(builder, alloca):
    """Set MXCSR's FTZ and DAZ bits unless they are set already; ``alloca(type, name)`` makes
    a stack slot in the function's entry block. Returns what ``exit_flush_denormals`` needs."""
    i32 = ir.IntType(32)
    saved, mode = alloca(i32, name="mxcsr.saved"), alloca(i32, name="mxcsr.ftz")
    _x86_mxcsr(builder, "stmxcsr", saved)
    old = builder.load(saved, typ=i32)
    ftz = ir.Constant(i32, _FTZ_DAZ)
    changed = builder.icmp_unsigned("!=", builder.and_(old, ftz), ftz, name="mxcsr.changed")
    with if_then(builder, changed, "mxcsr.set"):
        builder.store(builder.or_(old, ftz), mode)
        _x86_mxcsr(builder, "ldmxcsr", mode)
    return saved, changed


def exit_flush_denormals(builder, state):
    """Restore the MXCSR ``enter_flush_denormals`` changed (if it did)."""
    saved, changed = state
    with if_then(builder, changed, "mxcsr.restore"):
        _x86_mxcsr(builder, "ldmxcsr", saved)


# ---------------------------------------------------------------------------------------
# Cost estimates (single core, ns): what decides whether a kernel is split over threads.
# Calibrated on this backend's kernels (``LlvmExecutable.profile``): ~35 GB/s from DRAM and
# ~100 GB/s from cache for one core, a vectorized exp/tanh/divide ~0.05 ns per element, the
# GEMM micro-kernel ~250 GFLOP/s.

_NS_PER_BYTE_DRAM = 0.03
_NS_PER_BYTE_CACHE = 0.01
_CACHE_BYTES = 8 << 20
_NS_PER_OP = 0.005
_NS_PER_EXPENSIVE = 0.05
_NS_PER_FLOP = 0.004


def _bytes_cost(nbytes: int) -> float:
    return nbytes * (_NS_PER_BYTE_CACHE if nbytes < _CACHE_BYTES else _NS_PER_BYTE_DRAM)


def _elementwise_cost(root, stop, elements: int) -> float:
    expr = [i for i in _expression(root, stop) if i not in stop]
    expensive = sum(1 for i in expr if i.opcode in _EXPENSIVE)
    touched = sum(math.prod(i.shape.dims) * np.dtype(i.shape.dtype).itemsize
                  for i in _expression(root, stop) if i in stop and not i.shape.is_tuple)
    return _bytes_cost(touched + elements * np.dtype(root.shape.dtype).itemsize) + \
        elements * (len(expr) * _NS_PER_OP + expensive * _NS_PER_EXPENSIVE)


# ---------------------------------------------------------------------------------------
# Loop kernels.

def emit_loop(kb: _KernelBuilder, root, out_dtype=None):
    """``out[i] = root[i]`` for every output index ``i``; units are the rows (all dims but
    the last) of the output, or chunks of 1024 elements of a flat loop."""
    b = kb.builder
    dims = root.shape.dims
    dtype = root.shape.dtype if out_dtype is None else out_dtype
    n = math.prod(dims)
    kb.kernel.strategy = "loop"
    kb.kernel.cost_ns = _elementwise_cost(root, kb.buffers, n)
    if n == 0:
        return
    if _needs_multi_index(root, kb.buffers):
        outer, inner = (dims[:-1], dims[-1:]) if len(dims) > 1 else (dims, ())
        with kb.units(outer) as head, loop_nest(b, inner) as tail:
            index = Index(b, dims, multi=head + tail)
            T.store_element(b, kb.emitter().emit(root, index), kb.out, dtype, index.linear)
    else:
        chunk = 1024
        kb.kernel.units = -(-n // chunk)
        start = b.mul(kb.lo, T.i64(chunk), flags=("nsw", "nuw"))
        hi = b.mul(kb.hi, T.i64(chunk), flags=("nsw", "nuw"))
        stop = b.select(b.icmp_signed("<", hi, T.i64(n)), hi, T.i64(n))
        with for_loop(b, start, stop, "i") as i:
            index = Index(b, dims, linear=i)
            T.store_element(b, kb.emitter().emit(root, index), kb.out, dtype, i)


def emit_update_in_place(kb: _KernelBuilder, dus):
    """A ``dynamic-update-slice`` whose operand is its output buffer (buffer assignment put it
    in place): only the update window is written, ``out[start + j] = update[j]`` -- O(update),
    not O(operand). A loop writing one row of ``ys`` per step stays linear in the trip count
    (XLA's in-place ``DynamicUpdateSliceFusion`` emitter)."""
    b = kb.builder
    operand, update = dus.operands[:2]
    kb.kernel.strategy = "update-in-place"
    kb.kernel.cost_ns = _elementwise_cost(update, kb.buffers, update.shape.size)
    if update.shape.size == 0:
        return
    em = kb.emitter()
    with if_then(b, b.icmp_signed("<", kb.lo, kb.hi), "run"), loop_nest(b, update.shape.dims) as j:
        dims = operand.shape.dims
        starts = [E._clamped_start(em, dus, 2 + d, n - u) for d, (n, u) in enumerate(zip(dims, update.shape.dims))]
        at = Index(b, dims, multi=[b.add(s, v) for s, v in zip(starts, j)])
        value = em.emit(update, Index(b, update.shape.dims, multi=list(j)))
        T.store_element(b, value, kb.out, dus.shape.dtype, at.linear)


# ---------------------------------------------------------------------------------------
# Reduce kernels.

def emit_reduce(kb: _KernelBuilder, reduce):
    """Units are the leading *kept* dims of the input (rows of a last-axis reduction); a
    reduction of the leading dim is one unit."""
    b = kb.builder
    operand, init, reduced, kept = E.reduce_parts(reduce)
    dtype = T.check_dtype(reduce.shape.dtype, "reduce")
    out_dims, in_dims = reduce.shape.dims, operand.shape.dims
    n_out = math.prod(out_dims)
    kb.kernel.strategy = "reduce"
    kb.kernel.cost_ns = _elementwise_cost(operand, kb.buffers, math.prod(in_dims))
    if n_out == 0:
        return
    lead = 0
    while lead < len(in_dims) and lead not in reduced:
        lead += 1
    # (the kept leading dims are the first ``lead`` dims of the output, in order)
    init_value = kb.emitter().emit(init, Index(b, (), multi=[]))
    rest_out = math.prod(out_dims[lead:])
    with kb.units(in_dims[:lead]) as head:
        o_start = linearize(b, head + [T.i64(0)] * (len(out_dims) - lead), out_dims)
        with for_loop(b, 0, rest_out, "o") as o:
            T.store_element(b, init_value, kb.out, dtype, b.add(o_start, o))
        if math.prod(in_dims) == 0:
            return
        comp = reduce.called[0]
        identity = R.block_identity(comp, dtype)

        def combine(x, y):
            return T.round_narrow(b, E.emit_reducer(b, comp, x, y), dtype)

        def element(acc, multi=None, linear=None, reassoc=True):
            x = kb.emitter().emit(operand, Index(b, in_dims, multi=multi, linear=linear))
            return T.round_narrow(b, E.emit_reducer(b, comp, acc, x, reassoc=reassoc), dtype)

        # The minor run: the minor dims all reduced, or all kept (dims of size 1 go with either).
        nonunit = [d for d in range(lead, len(in_dims)) if in_dims[d] != 1]
        minor_reduced = not nonunit or nonunit[-1] in reduced
        run = len(in_dims)
        while run > lead and (in_dims[run - 1] == 1 or ((run - 1 in reduced) == minor_reduced)):
            run -= 1
        outer_reduced = [d for d in range(lead, run) if d in reduced]
        outer_kept = [d for d in range(lead, run) if d not in reduced]

        def out_index(kivs):
            pos = dict(zip(range(lead), head)) | dict(zip(outer_kept, kivs))
            return linearize(b, [pos.get(d, T.i64(0)) for d in kept], out_dims)

        if minor_reduced:
            # Each output element sums the positions of the reduced dims, in blocks combined
            # pairwise (``reductions.accumulate``), in one register, vectorized along the run.
            dims = outer_reduced + list(range(run, len(in_dims)))
            with loop_nest(b, [in_dims[d] for d in outer_kept]) as kivs:
                o = out_index(kivs)

                def step(acc, ivs, kivs=kivs, reassoc=True):
                    pos = dict(zip(range(lead), head)) | dict(zip(outer_kept, kivs)) | dict(zip(dims, ivs))
                    return element(acc, multi=[pos[d] for d in range(len(in_dims))], reassoc=reassoc)
                total = R.accumulate(b, T.reg_type(dtype), T.load_element(b, kb.out, dtype, o),
                                     [in_dims[d] for d in dims], step, combine, identity, "r",
                                     redo_nan=E.ordered_step(step, comp, dtype))
                T.store_element(b, total, kb.out, dtype, o)
            return
        rows = math.prod(in_dims[d] for d in outer_reduced)
        if identity is not None and rows > R.COLUMN_BLOCK_ROWS:
            # A long column reduction: blocks of rows combined pairwise, a tile of columns at a time.
            cols = math.prod(in_dims[run:])
            with loop_nest(b, [in_dims[d] for d in outer_kept]) as kivs:
                o = out_index(kivs)
                base = dict(zip(range(lead), head)) | dict(zip(outer_kept, kivs))

                def step(acc, rivs, col, base=base):
                    pos = base | dict(zip(outer_reduced, rivs))
                    start = linearize(b, [pos.get(d, T.i64(0)) for d in range(len(in_dims))], in_dims)
                    return element(acc, linear=b.add(start, col, flags=("nsw", "nuw")))

                def finish(col, total, o=o):
                    at = b.add(o, col, flags=("nsw", "nuw"))
                    T.store_element(b, combine(T.load_element(b, kb.out, dtype, at), total), kb.out, dtype, at)
                R.accumulate_columns(b, T.reg_type(dtype), cols, [in_dims[d] for d in outer_reduced],
                                     step, combine, identity, finish)
            return
        # A short column reduction (or an exact reducer): ``out[kept]`` is a row of
        # accumulators, each element of an input row added to its own, vectorized along the row
        # (each in order: a float max/min with XLA's NaN rule, ``reductions.orders_nans``).
        ordered = R.orders_nans(comp, dtype)
        with loop_nest(b, in_dims[lead:]) as ivs:
            multi = head + ivs
            x = kb.emitter().emit(operand, Index(b, in_dims, multi=multi))
            o = linearize(b, [multi[d] for d in kept], out_dims)
            acc = T.load_element(b, kb.out, dtype, o)
            T.store_element(b, E.emit_reducer(b, comp, acc, x, reassoc=not ordered), kb.out, dtype, o)


#: a dot with a fused tail whose operands are kernel arguments calls the library routine with
#: the tail as a function (``emit_library_dot``) instead of a GEMM kernel of its own, when an
#: operand is read transposed (``library_tail_pays``)
LIBRARY_TAILS = True
#: a lone dot (no tail) calls the library routine -- one routine per process, so no GEMM
#: kernel to compile per shape -- unless it reads both operands in place and does at least
#: this many flops: then a kernel specialised to its shapes (constant loop bounds) pays for
#: its ~100 ms of compile time. Measured one pinned core, interleaved, bit-identical: the MLP
#: step's forward 256x1024x1024 dot 0.96x the library's time (0.97-0.98x for 256x1024x256,
#: 256x256x1024 and 1024^3); below 2^29 flops (a ~5 ms dot) the gain is under ~0.1 ms a call.
LONE_DOT_SPECIALIZE_FLOPS = 1 << 29


# ---------------------------------------------------------------------------------------
# Entry point: one entry-level instruction -> one kernel.

def _array_constants(comp):
    return [i for i in comp.instructions if i.opcode == "constant" and i.shape.rank > 0]


def emit_kernel(module: ir.Module, instr, name: str, in_place=(), threads: int = 1,
                set_fp_mode: bool = True) -> Kernel:
    """Emit the kernel computing entry-level ``instr`` into ``module``.

    ``in_place``: operand positions whose buffer buffer assignment gave to the output (it proved
    the kernel reads them only at the index it writes). Those operands are read through the
    ``out`` pointer, so every pointer stays ``noalias``: no two arguments are used for the same bytes.

    ``threads`` is how many threads the executable will split big kernels over (a dot cuts
    itself into enough units to keep them busy). ``set_fp_mode=False``: the caller runs it with
    denormals flushed already (a kernel inlined into a loop's driver, ``control_flow.py``).
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
        kb = _KernelBuilder(module, kernel, params, consts, threads, set_fp_mode)
        _read_in_place_through_out(kb, kernel, [params[k] for k in in_place], [instr.operands[k] for k in in_place])
        _emit_body(kb, comp.root)
    else:
        # A lone op: its operands' buffers are the leaves (scalar constants become immediates).
        leaves = []
        for o in instr.operands:
            if o not in leaves and not (o.opcode == "constant" and o.shape.rank == 0):
                leaves.append(o)
        kernel = Kernel(name, instr, instr.opcode, [instr.opcode], inputs=leaves)
        kb = _KernelBuilder(module, kernel, leaves, [], threads, set_fp_mode)
        shared = [instr.operands[k] for k in in_place]
        _read_in_place_through_out(kb, kernel, shared, shared)
        _emit_body(kb, instr)
    kb.finish()
    return kernel


def _read_in_place_through_out(kb, kernel, leaves, inputs):
    for leaf, inp in zip(leaves, inputs):
        kb.buffers[leaf] = kb.out
        kernel.in_place.append(inp)


def _emit_body(kb: _KernelBuilder, root):
    from minixla.backends.llvm.kernels_extra import KERNELS as EXTRA_KERNELS  # scatter, ...
    if root.opcode in EXTRA_KERNELS:
        kb.kernel.strategy = root.opcode
        kb.kernel.cost_ns = 0.0  # one unit: never split
        with if_then(kb.builder, kb.builder.icmp_signed("<", kb.lo, kb.hi), "run"):  # one unit
            EXTRA_KERNELS[root.opcode](kb, root)
        return
    if root.opcode == "reduce":
        emit_reduce(kb, root)
        return
    if root.opcode == "dynamic-update-slice" and kb.buffers.get(root.operands[0]) is kb.out:
        emit_update_in_place(kb, root)
        return
    groups = transpose_groups(root)
    if groups is not None and root.operands[0] in kb.buffers and kb.buffers[root.operands[0]] is not kb.out:
        emit_transpose(kb, root, groups)  # a lone transpose: a tiled copy (kernels_transpose.py)
        return
    if scan_axis(root) is not None:  # cumsum & co.: a running accumulator, not window by window
        emit_scan(kb, root, _elementwise_cost(root, kb.buffers, root.shape.size))
        return
    from minixla.backends.llvm.kernels_rows import emit_rows_if_row_fusion  # fusion rule 8
    if emit_rows_if_row_fusion(kb, root):
        return
    core = _find_core(kb, root)
    if core is not None and core.shape.dtype == root.shape.dtype:
        if core.opcode == "convolution":
            g = gemm_for_convolution(kb, core, root)
            if g is not None:
                emit_gemm(kb, g)
            else:
                emit_convolution(kb, core, root)
            return
        g = gemm_for_dot(kb, core, root)
        if g is not None:
            params = dot_library_params(kb, core) if root is core or LIBRARY_TAILS else None
            if params is not None and not library_tail_pays(params) and (
                    root is not core or g.flops >= LONE_DOT_SPECIALIZE_FLOPS):
                params = None
            if params is not None:
                emit_library_dot(kb, g, params, core, root)
            else:
                emit_gemm(kb, g)
            return
        if dot_row_strategy_ok(core):
            emit_dot(kb, core, root)
            return
    red = _reduce_with_tail(kb, root)
    if red is not None:
        emit_reduce_with_tail(kb, red, root)
        return
    emit_loop(kb, root)


def _reduce_with_tail(kb, root):
    """The column ``reduce`` under an elementwise ``root`` of its shape (the bias update
    ``b - lr * sum(g, axis=0)`` of a training step), or None.

    Emitted as a loop, each output element would compute its whole column, reading the
    operand a row apart (on the MLP's 256x1024 bias gradients ~2 GB/s); as a reduce kernel
    (``emit_reduce``: rows added into a row of accumulators) then the tail over its output,
    it streams the operand. Only when the reduce leads with a reduced dim (one unit: the tail
    runs after the whole reduction) and no operand is read through ``out``."""
    if root.opcode not in ELEMENTWISE or any(ptr is kb.out for ptr in kb.buffers.values()):
        return None
    expr = [i for i in _expression(root, kb.buffers) if i not in kb.buffers]
    reds = [i for i in expr if i.opcode == "reduce"]
    if len(reds) != 1 or reds[0].shape.dims != root.shape.dims or reds[0].shape.dtype != root.shape.dtype:
        return None
    red = reds[0]
    operand, init, reduced, kept = E.reduce_parts(red)
    if 0 not in reduced or not kept or red.shape.dtype not in (np.float32, np.float64):
        return None
    depends = {red}
    for i in expr:  # topological order
        if i is not red and any(o in depends for o in i.operands):
            if i.opcode not in ELEMENTWISE or i.shape.dims != red.shape.dims:
                return None
            depends.add(i)
    return red


def emit_reduce_with_tail(kb: _KernelBuilder, red, root):
    """``out = reduce(...)`` (``emit_reduce``, one unit), then ``out[i] = root[i]`` with the
    reduce's value read back from ``out[i]``."""
    emit_reduce(kb, red)
    b = kb.builder
    dims = root.shape.dims
    dtype = root.shape.dtype
    kb.kernel.strategy = "reduce"
    with if_then(b, b.icmp_signed("<", kb.lo, kb.hi), "tail"):
        with for_loop(b, 0, math.prod(dims), "t") as i:
            index = Index(b, dims, linear=i)
            acc = T.load_element(b, kb.out, dtype, i)
            T.store_element(b, kb.emitter(values={red: acc}).emit(root, index), kb.out, dtype, i)


def _find_core(kb, root):
    """The dot/conv of a kOutput-shaped expression rooted at ``root`` (None if not that shape)."""
    expr = [i for i in _expression(root, kb.buffers) if i not in kb.buffers]
    cores = [i for i in expr if i.opcode in ("dot", "convolution")]
    if len(cores) != 1:
        return None
    core = cores[0]
    # Every instruction depending on the core must be elementwise with as many elements, or a
    # (row-major, so bitcast) reshape: the tail then reads the core's element at the same
    # linear index as the output's, which is where the GEMM stores it (``_root_index``).
    depends = {core}
    for i in expr:  # topological order
        if i is not core and any(o in depends for o in i.operands):
            if i.opcode not in ELEMENTWISE | {"reshape"} or i.shape.size != core.shape.size:
                return None
            depends.add(i)
    return core
