"""Register-tiled matrix-multiply micro-kernels for ``dot`` and ``convolution`` (XLA:CPU hands
these to Eigen's or its own tiled GEMM; this is ours).

Both ops are seen as one GEMM per batch element::

    out[bb, m, n] = sum_{t < T, c < C} A(bb, m, t)[c] * B(bb, t, c, n)         (K = T * C)

A dot has one tap (``T = 1``, ``C = K``); a convolution has one tap per window offset
(``T = kh * kw``), ``C`` input features, ``m`` ranges over the output positions (batch, y, x)
and ``A(bb, m, t)`` is the input feature row under tap ``t`` of output position ``m`` -- or a
row of zeros when that tap falls into the padding. ``out`` is ``[batch, M, N]`` with
contiguous rows.

Why it is written this way (measured; LLVM does not tile loops by itself):

* **Register tile.** ``MR`` rows x ``NV`` vectors of ``LANES`` columns of accumulators stay in
  registers over a block of K: per step, ``NV`` vector loads of B, ``MR`` broadcasts of A and
  ``MR * NV`` ``llvm.fma`` -- with 4 x 4 ``<16 x float>`` (21 of 32 zmm registers) that is
  about one load per two FMAs: one core runs a 256x1024x1024 matmul at ~93% of its FMA peak
  on a Zen 4. On the Intel AVX-512 host (``rocketlake`` to LLVM) the tile alone, its data in
  L1, runs at ~85-100 GFLOP/s per core and whole GEMMs at 55-65 (XLA's Eigen: 53-72), per
  CPU-second, one thread. 6 x 4, 8 x 2 and 12 x 2 tiles measured no faster than 4 x 4, nor
  did 512-bit vectors in the kernel's own loops (``PREFER_VECTOR_WIDTH``).
  **The tile follows the target's registers** (``VECTOR_REGISTERS``): AVX2 has 16 ``ymm``,
  so there the tiles are 4 x 3, 6 x 2 and 8 x 1 ``<8 x float>`` (at most 16 registers with
  B's vectors and the broadcast; no stack access in the FMA loop, which a test checks in the
  assembly). Measured on the ``rocketlake`` host restricted to ``haswell``, one pinned
  thread, per CPU-second (FMA peak 74 GFLOP/s): in L1 the tiles run at 70 (4 x 3), 71
  (6 x 2) and 50 (8 x 1) GFLOP/s, the former 4 x 2 at 61; the former 8 x 2 spilled 14 stack
  accesses into every step, and every full panel of AVX2 (then two vectors wide) used it;
  with the new tiles the forward MLP runs 1.55x faster: 27.6 -> 17.8 ms of CPU time (medians of three
  processes each, alternating, under load 25). The tile height changes no arithmetic: a
  target's results do not depend on it.
* **Packing.** Per K block, the ``KC x NR`` panel of B is copied into a contiguous,
  64-byte-aligned stack buffer (32 KiB for f32: it stays in L1). This also makes a transposed
  B (``q @ k.T``) as fast as a plain one, and avoids the 4 KiB-stride cache-set conflicts
  of walking down a column of a wide row-major matrix.
* **Packing a strided A.** A weight gradient ``x.T @ dy`` reads its lhs down the columns
  (``a_stride`` = a row of x): per unit and K block, that block of A is copied into
  ``MR``-row panels (``c``-major, ``MR`` rows side by side: one vector load of x's row gives
  ``lanes / MR`` panels' pieces), shared by a group of column panels, and the tile reads it
  as ``MR`` contiguous elements per ``c``. Measured 8-10% on the MLP's 1024x1024 and
  1024x256 weight gradients (K = 256), bit-identical.
* **K blocking for accuracy.** Each K block of ``KC`` starts from zero accumulators and is
  then added to the output, so the rounding error grows like ``KC + K / KC`` rather than
  ``K``: on a 2048-long dot it is 2-4x smaller than one running sum, in line with
  XLA:CPU's blocked GEMM.
* **Prefetch.** The next tile's strip of A is prefetched in software: a dot reads A as short
  row strips the hardware prefetcher does not follow (2x on attention's ``p @ v``).
* **Parallel units.** The work is cut into ``batch x row chunks x column panels`` units; a
  kernel computes units ``[lo, hi)``, so the executable can hand disjoint ranges to threads.
* A fused elementwise tail (kOutput: bias, activation, ...) is applied to each finished tile
  while it is still in L1.

The edge tiles (``M % MR`` rows, ``N % NR`` columns) are instances of the same code with
smaller static sizes; partial vectors use masked loads and stores.

**The micro-kernel is a library routine** (as XLA:CPU calls precompiled Eigen for its dots):
the register tile -- the hot loop over a K block and the update of the output tile -- does not
depend on the program, only on the dtype and the tile shape, so it is JIT-compiled once per
process on first use (``micro_kernel``) and every dot/convolution kernel calls it. A kernel
keeps what is specific to it: the unit loop, packing B (which may compute a fused producer),
the row pointers of A (a convolution's padding taps point at a row of zeros), the prefetch and
the fused tail. Measured: a GEMM kernel cost 30-40 ms of LLVM time with the tile inlined,
15-20 ms calling the routine (the tail and prefetch are loops too, not ``MR`` unrolled copies);
the call, once per ~1000-cycle tile, showed no slowdown in the benchmarks. The library is
compiled with ``-O3`` (``JitModule(optimize=True)``): without it, every accumulator went
through the stack (a load and a store around each FMA) and every GEMM ran at a third of its speed.

A dot whose operands are both kernel arguments gets a kernel that is a single call of
``dot_library.py``'s routine: this same algorithm with every size and stride a run-time
argument, compiled once per process (XLA:CPU's runtime matmul). A fused tail (bias,
activation, a relu mask, an SGD update) is then a small function of the kernel that the
routine calls per finished tile. What stays specialised to its shapes (this module's
``emit_gemm``): convolutions, and dots with a fused producer of an operand.

* **The tail's operands are prefetched.** An array the tail reads at the output's own index
  (``Gemm.tail_streams``: the weights ``w`` of ``w - lr * (x.T @ dy)``) is read 256 bytes of
  each row per tile, a pattern the hardware prefetchers do not follow: each tile prefetches
  its rows of them before its last K block, and its rows of ``out`` before the first.
"""
from __future__ import annotations

import math
import platform
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import for_loop, if_then
from minixla.backends.llvm.target import vector_register_bytes



#: bytes of one vector register
VECTOR_BYTES = vector_register_bytes()
#: vector registers the register tile may use: 32 with AVX-512 (zmm0-31) and on AArch64
#: (v0-v31), 16 with AVX/AVX2 (ymm0-15) and SSE (xmm0-15)
VECTOR_REGISTERS = 32 if VECTOR_BYTES == 64 or platform.machine().lower() in ("aarch64", "arm64") else 16
#: rows of the register tile
MR = 4
#: vectors per row of the register tile. A tile of ``rows x nv`` accumulators needs ``nv``
#: registers for B's vectors and one for A's broadcast besides: with 32 registers, 4 x 4
#: (21 in use); with 16 (AVX2), 4 x 3 (all 16: 12 FMAs per 3 loads of B and 4 broadcasts).
#: AVX2's former 4 x 2 (8 FMAs per 6 loads) ran the tile at 61 GFLOP/s of a 74 GFLOP/s FMA peak
#: in L1 (one core of the ``rocketlake`` host restricted to ``haswell``), 4 x 3 at 70.
NV = 4 if VECTOR_REGISTERS >= 32 else 3
#: rows of the register tile of a one-vector-wide panel (N <= lanes: a conv with 16 output
#: features, a 10-class dense layer): 4 x 1 accumulators are 4 dependent FMA chains, fewer
#: than the FMA units' latency x throughput (2 units x 4 cycles), so such a tile ran at half
#: speed; 8 rows keep 8 chains in flight for the same 1 load of B per step
TALL_MR = 8
#: ... and of a two-vector panel (a conv with 32 output features): 8 x 2 accumulators, 0.62
#: loads per FMA instead of 0.75 (measured 0.76-0.92x the time of 4 x 2). 8 x 2 needs 19
#: registers: with 16 it spilled 14 stack accesses into every step of the loop (AVX2's whole
#: GEMMs, whose full panels were two vectors wide, ran at a third of the FMA peak), so
#: there 6 x 2 (15 registers)
TALL_MR2 = 8 if VECTOR_REGISTERS >= 32 else 6
#: K elements per block (the packed B panel is KC x NR elements)
KC = 128
#: the most rows a parallel unit covers (A block and output panel stay in L2)
MAX_ROWS_PER_UNIT = 256
#: software-prefetch the next tile's A strip (see ``emit_prefetch_next_tile``)
PREFETCH = True
#: the vector width (bits) LLVM's vectorizers use in a GEMM kernel's own loops (packing B,
#: the fused tail); None: the host's preference (256 on Intel AVX-512 hosts). The register
#: tile uses explicit ``LANES``-wide vectors either way.
PREFER_VECTOR_WIDTH = None
#: pack a strided A (a dot's lhs contracted along its major dim: ``x.T @ dy``) per K block
#: into contiguous ``MR``-row panels shared by a group of column panels (see ``Gemm.pack_a``)
PACK_A = True
#: pack A's block along x's rows (``c`` outer), not down its columns
PACK_A_ALONG_ROWS = True
#: the most column panels that share one packed A block
MAX_PANEL_GROUP = 8
#: prefetch the tail's operand rows of a tile before its last K block (``Gemm.tail_streams``)
TAIL_PREFETCH = True
OUT_PREFETCH = True


def lanes(dtype) -> int:
    return VECTOR_BYTES // np.dtype(dtype).itemsize


def panel_columns(dtype) -> int | None:
    """``NR``, the columns of one packed B panel (``NV`` vectors) for ``dtype``, or None if the
    GEMM does not take it: the width ``while-loop-gemm-packing`` packs a loop-invariant rhs to
    (``[P, K, NR]``, read in place: ``Gemm.b_panels``)."""
    return NV * lanes(dtype) if supported_dtype(dtype) else None


@dataclass
class Gemm:
    """A GEMM to emit. The callables emit IR at the builder's position.

    Attributes:
      dtype: float32 or float64 (operands are already that dtype).
      batch, M, N, T, C: sizes (see the module docstring).
      a_row: ``a_row(b, bb, m, t)`` -> pointer to ``A(bb, m, t)[0]`` (a zero row if padding).
      a_stride: element stride of A along ``c``.
      b_elem: ``b_elem(b, bb, t, c, n)`` -> the B element (register value), for packing.
      tail: None, or ``tail(b, bb, m, n, acc)`` -> the fused tail's value for one output element.
      threads: how many threads the units should feed.
      a_row_stride: element stride of A along ``m`` when it is one (None: unknown), which
        lets a strided A be packed (``pack_a``).
      tail_streams: ``[(pointer, element type, bytes)]`` of the arrays the tail reads at the output
        element's own index (``out``'s ``[batch, M, N]`` layout); each tile prefetches its
        rows of them before its last K block (``TAIL_PREFETCH``).
      b_panels: None, or a pointer to B already packed (``T == 1``, ``batch == 1``): ``[P, C, NR]``
        with ``B(c, j0 + n)`` at ``(j0 / NR * C + c) * NR + n``, as ``while-loop-gemm-packing``
        lays out a loop-invariant rhs once before the loop. Each K block's ``[cb, NR]`` piece of
        a panel is then contiguous: the micro-kernel reads it in place instead of a copy
        (``_Emitter.emit_panel_block``; bit-identical: the same blocks, tiles and order).
    """
    dtype: np.dtype
    batch: int
    M: int
    N: int
    T: int
    C: int
    a_row: Callable
    a_stride: int
    b_elem: Callable
    tail: Callable | None
    threads: int = 1
    a_row_stride: int | None = None
    tail_streams: list = ()
    b_panels: object = None

    def __post_init__(self):
        self.lanes = lanes(self.dtype)
        self.NR = NV * self.lanes
        self.panels = -(-self.N // self.NR)
        # K blocks: whole taps when C is small (conv), C cut into KC pieces otherwise (dot).
        self.cb = min(self.C, KC)
        self.c_blocks = -(-self.C // self.cb)
        self.tb = max(1, KC // self.C) if self.C <= KC else 1
        self.t_blocks = -(-self.T // self.tb)
        # Row chunks: at most MAX_ROWS_PER_UNIT rows, and enough units to feed the threads.
        # (a multiple of every tile height, so only the last chunk has a partial tile)
        step = math.lcm(MR, TALL_MR, TALL_MR2)
        rows = -(-self.M // step) * step
        chunk = min(rows, MAX_ROWS_PER_UNIT // step * step)
        want = 4 * self.threads
        smallest = -(-8 * MR // step) * step
        while self.batch * self.panels * (-(-self.M // chunk)) < want and chunk > smallest:
            chunk = max(smallest, -(-(chunk // 2) // step) * step)
        self.rows_per_unit = chunk
        self.row_chunks = -(-self.M // chunk)
        # A strided A (``a_stride != 1``: a weight gradient ``x.T @ dy`` reads x down its
        # columns) is packed per unit and K block into ``MR``-row panels (``emit_pack_a``):
        # a tile otherwise walks KC rows of x a whole row apart (for a 4 KiB row, the same L1
        # set). The packed block serves ``panel_group`` column panels (as many as leave enough
        # units for the threads), so the copy costs a few percent of the FMAs. Every panel then
        # uses ``MR``-row tiles (the packing's interleave), a narrow edge panel included (its
        # taller tile would change no arithmetic, only speed); A's rows must be contiguous, and
        # there must be a full panel (a GEMM of one narrow panel keeps its tall tiles).
        self.pack_a = False
        self.pack_a = (PACK_A and self.T == 1 and self.a_stride != 1 and self.a_row_stride == 1
                       and self.N >= self.NR and self.tile_rows(self.NR) == MR)
        group = 1
        if self.pack_a:
            base = self.batch * self.row_chunks
            while (group * 2 <= min(self.panels, MAX_PANEL_GROUP)
                   and base * -(-self.panels // (group * 2)) >= want):
                group *= 2
        self.panel_group = group
        self.panel_groups = -(-self.panels // group)

    def tile_rows(self, width: int) -> int:
        """The register tile's rows for a panel of ``width`` columns (``MR`` for every panel
        when A is packed: see ``pack_a``)."""
        if self.pack_a:
            return MR
        if width <= self.lanes:
            return TALL_MR
        return TALL_MR2 if width <= 2 * self.lanes else MR

    @property
    def units(self) -> int:
        return self.batch * self.row_chunks * self.panel_groups

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.T * self.C


def _vector_type(g: Gemm):
    return ir.VectorType(T.reg_type(g.dtype), g.lanes)


def _splat(b, x, vty):
    undef = ir.Constant(vty, ir.Undefined)
    v = b.insert_element(undef, x, T.i64(0))
    return b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count))


def _mask(n_valid: int, count: int):
    return ir.Constant(ir.VectorType(T.I1, count), [1 if i < n_valid else 0 for i in range(count)])


def _masked_intrinsic(b, op, ret, args, vty):
    """``llvm.masked.load``/``store`` on ``vty`` (the name carries the pointer type ``p0``)."""
    name = f"llvm.masked.{op}.v{vty.count}{'f32' if isinstance(vty.element, ir.FloatType) else 'f64'}.p0"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    return b.call(fn, args)


def _load_vec(b, ptr, vty, n_valid, align):
    if n_valid >= vty.count:
        v = b.load(ptr, typ=vty)
        v.align = align
        return v
    return _masked_intrinsic(b, "load", vty, [ptr, ir.Constant(ir.IntType(32), align), _mask(n_valid, vty.count),
                                              ir.Constant(vty, None)], vty)


def _store_vec(b, value, ptr, n_valid, align):
    vty = value.type
    if n_valid >= vty.count:
        st = b.store(value, ptr)
        st.align = align
        return
    _masked_intrinsic(b, "store", ir.VoidType(), [value, ptr, ir.Constant(ir.IntType(32), align),
                                                  _mask(n_valid, vty.count)], vty)


# ---------------------------------------------------------------------------------------
# The micro-kernel library: one routine per (dtype, rows, vectors, masked last vector).
#
#   void minixla_gemm_<f32|f64>_<mr>x<nv>[m](ptr rows, i64 a_stride, ptr pack, i64 tb, i64 cb,
#                                            ptr out, i64 ldo, i1 first, i64 n_last)
#
# ``rows`` holds ``tb * mr`` pointers: for tap ``t`` and row ``r``, A's row at the block's first
# ``c`` (``rows[t * mr + r]``); A's element ``c`` of it is at ``c * a_stride``. ``pack`` is the
# 64-byte-aligned packed B block (``(t * cb + c) * NR + n``). The ``mr x nv`` tile of
# accumulators starts from zero, runs over the ``tb x cb`` block, then row ``r`` of the tile is
# stored to (``first``) or added to ``out + r * ldo``; with ``masked``, only the first
# ``n_last`` lanes of the last vector are touched.

_library: dict = {}
_library_lock = threading.Lock()


def micro_kernel_type(dtype):
    return ir.FunctionType(ir.VoidType(), [T.PTR, T.I64, T.PTR, T.I64, T.I64, T.PTR, T.I64, T.I1, T.I64])


def micro_kernel_name(dtype, mr: int, nv: int, masked: bool) -> str:
    short = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[np.dtype(dtype)]
    return f"minixla_gemm_{short}_{mr}x{nv}{'m' if masked else ''}"


def micro_kernel(dtype, mr: int, nv: int, masked: bool) -> str:
    """The name of the micro-kernel routine for this tile (``library_routine``)."""
    name = micro_kernel_name(dtype, mr, nv, masked)
    return library_routine(name, lambda module: _emit_micro_kernel(module, name, np.dtype(dtype), mr, nv, masked))


def library_routine(name: str, emit) -> str:
    """``name``, compiled on first use in this process (``emit(module)`` writes it) and
    registered with LLVM's symbol table, so JIT-compiled kernels that declare it link to it.
    The compiled code lives as long as the process; its object file is kept on disk for the
    next process (``library_cache.py``: loaded instead of compiled when it matches)."""
    with _library_lock:
        if name not in _library:
            from minixla.backends.llvm import library_cache

            def text():
                module = ir.Module(name=name)
                emit(module)
                return str(module)
            jit = library_cache.compile_routine(name, text)
            llvm_binding.add_symbol(name, jit.addresses[name])
            _library[name] = jit
    return name


def library_compile_ms() -> float:
    """Milliseconds spent so far compiling library routines (micro-kernels, the dot routine)."""
    return sum(j.compile_ms for j in _library.values())


def _emit_micro_kernel(module, name, dtype, mr, nv, masked):
    fn = ir.Function(module, micro_kernel_type(dtype), name=name)
    fn.attributes.add("nounwind")
    rows, a_stride, pack, tb, cb, out, ldo, first, n_last = fn.args
    for a in (rows, pack, out):
        a.add_attribute("noalias")
    entry = ir.IRBuilder(fn.append_basic_block("entry"))
    b = ir.IRBuilder(fn.append_basic_block("body"))
    nlanes = lanes(dtype)
    NR = NV * nlanes
    vty = ir.VectorType(T.reg_type(dtype), nlanes)
    ety = T.reg_type(dtype)
    item = dtype.itemsize
    acc = [[entry.alloca(vty, name=f"acc{r}_{v}") for v in range(nv)] for r in range(mr)]
    entry.branch(b.block)
    add = lambda x, y: b.add(x, y, flags=("nsw", "nuw"))  # noqa: E731
    mul = lambda x, y: b.mul(x, y, flags=("nsw", "nuw"))  # noqa: E731

    def gep(base, index, ty=ety):
        return b.gep(base, [index], inbounds=True, source_etype=ty)

    zero = ir.Constant(vty, None)
    for r in range(mr):
        for v in range(nv):
            b.store(zero, acc[r][v])
    with for_loop(b, 0, tb, "kt") as t:
        row_ptrs = [b.load(gep(rows, add(mul(t, T.i64(mr)), T.i64(r)), T.PTR), typ=T.PTR) for r in range(mr)]
        kbase = mul(t, cb)
        with for_loop(b, 0, cb, "kc") as c:
            prow = mul(add(kbase, c), T.i64(NR))
            bv = [_load_vec(b, gep(pack, add(prow, T.i64(v * nlanes))), vty, nlanes, 64) for v in range(nv)]
            ci = mul(c, a_stride)
            for r in range(mr):
                a = _splat(b, b.load(gep(row_ptrs[r], ci), typ=ety), vty)
                for v in range(nv):
                    value = b.load(acc[r][v], typ=vty)
                    b.store(T.intrinsic(b, "fma", vty, [a, bv[v], value]), acc[r][v])
    mask = None
    if masked:
        lane = ir.Constant(ir.VectorType(T.I64, nlanes), list(range(nlanes)))
        mask = b.icmp_unsigned("<", lane, _splat(b, n_last, ir.VectorType(T.I64, nlanes)))
    for r in range(mr):
        row = gep(out, mul(T.i64(r), ldo))
        for v in range(nv):
            ptr = gep(row, T.i64(v * nlanes))
            value = b.load(acc[r][v], typ=vty)
            if masked and v == nv - 1:
                old = _masked_intrinsic(b, "load", vty, [ptr, ir.Constant(ir.IntType(32), item), mask,
                                                         ir.Constant(vty, None)], vty)
                new = b.select(first, value, b.fadd(old, value))
                _masked_intrinsic(b, "store", ir.VoidType(), [new, ptr, ir.Constant(ir.IntType(32), item), mask],
                                  vty)
            else:
                old = _load_vec(b, ptr, vty, nlanes, item)
                _store_vec(b, b.select(first, value, b.fadd(old, value)), ptr, nlanes, item)
    b.ret_void()


class _Emitter:
    def __init__(self, builder: ir.IRBuilder, g: Gemm, out, alloca):
        self.b, self.g, self.out = builder, g, out
        self.vty = _vector_type(g)
        self.ety = T.reg_type(g.dtype)
        self.item = np.dtype(g.dtype).itemsize
        # One 64-byte-aligned pack buffer (B's K-block panel) and the accumulators, in the
        # entry block so they are allocated once and promoted to registers.
        self.pack = alloca(self.ety, "pack", KC * g.NR)
        self.pack.align = 64
        # A's row pointers for one tile and K block (taps x rows), the micro-kernel's argument.
        self.rows = alloca(T.PTR, "rows", g.tb * max(MR, TALL_MR))
        self.apack = None
        if g.pack_a:
            self.apack = alloca(self.ety, "apack", g.rows_per_unit * KC)
            self.apack.align = 64
        self.b_mul = lambda x, y: self.b.mul(x, y, flags=("nsw", "nuw"))
        self.b_add = lambda x, y: self.b.add(x, y, flags=("nsw", "nuw"))

    def gep(self, base, index, ty=None):
        return self.b.gep(base, [index], inbounds=True, source_etype=ty or self.ety)

    # -- packing ------------------------------------------------------------------------
    def emit_pack(self, bb, t0, tb, c0, cb, j0, width: int):
        """pack[(t*cb + c) * NR + n] = B(bb, t0+t, c0+c, j0+n), zero past ``width`` columns."""
        b, g = self.b, self.g
        zero = T.constant(g.dtype, 0)
        with for_loop(b, 0, tb, "pt") as t:
            with for_loop(b, 0, cb, "pc") as c:
                row = self.b_mul(self.b_add(self.b_mul(t, cb), c), T.i64(g.NR))
                tt, cc = self.b_add(t0, t), self.b_add(c0, c)
                with for_loop(b, 0, width, "pn") as n:
                    v = g.b_elem(b, bb, tt, cc, self.b_add(j0, n))
                    b.store(v, self.gep(self.pack, self.b_add(row, n)))
                for n in range(width, -(-width // g.lanes) * g.lanes):
                    b.store(zero, self.gep(self.pack, self.b_add(row, T.i64(n))))

    # -- the register tile --------------------------------------------------------------
    def emit_tile(self, bb, m0, mr: int, t0, tb, c0, cb, j0, width: int, first, last, row_lo=None):
        """Accumulate the ``mr x width`` tile at (m0, j0) over one K block, add it to ``out``
        (or store it, on the first block) -- a call of the library micro-kernel -- and apply
        the tail after the last block."""
        b, g = self.b, self.g
        nv = -(-width // g.lanes)
        n_last = width - (nv - 1) * g.lanes
        name = micro_kernel(g.dtype, mr, nv, n_last < g.lanes)
        fn = b.module.globals.get(name)
        if fn is None:
            fn = ir.Function(b.module, micro_kernel_type(g.dtype), name=name)
        if PREFETCH and g.T == 1 and g.a_stride == 1 and mr == g.tile_rows(width):
            self.emit_prefetch_next_tile(bb, m0, c0, mr)
        if self.apack is not None:  # (T == 1, mr <= MR) the tile's panel of the packed block
            panel = self.gep(self.apack, self.b_mul(b.udiv(b.sub(m0, row_lo), T.i64(MR)), T.i64(KC * MR)))
            for r in range(mr):
                b.store(self.gep(panel, T.i64(r)), self.gep(self.rows, T.i64(r), T.PTR))
            a_stride = T.i64(MR)
        else:
            with for_loop(b, 0, tb, "kt") as t:
                tt = self.b_add(t0, t)
                slot = self.b_mul(t, T.i64(mr))
                for r in range(mr):
                    row = self.gep(g.a_row(b, bb, self.b_add(m0, T.i64(r)), tt),
                                   self.b_mul(c0, T.i64(g.a_stride)))
                    b.store(row, self.gep(self.rows, self.b_add(slot, T.i64(r)), T.PTR))
            a_stride = T.i64(g.a_stride)
        row0 = self.b_mul(self.b_add(self.b_mul(bb, T.i64(g.M)), m0), T.i64(g.N))
        tile = self.gep(self.out, self.b_add(row0, j0))
        if TAIL_PREFETCH and g.tail is not None and g.tail_streams:
            with if_then(b, last, "tpf"):
                self.emit_prefetch_streams(self.b_add(row0, j0), mr, width)
        if OUT_PREFETCH:
            with if_then(b, first, "opf"):
                self.emit_prefetch_streams(self.b_add(row0, j0), mr, width, [(self.out, self.ety, self.item)], 1)
        b.call(fn, [self.rows, a_stride, self.pack, tb, cb, tile, T.i64(g.N), first, T.i64(n_last)])
        if g.tail is not None:
            # (one loop over the rows, not ``mr`` copies: a copy of the vectorized tail each
            # cost compile time and ran no faster)
            with if_then(b, last, "tail"), for_loop(b, 0, mr, "tr") as r:
                m = self.b_add(m0, r)
                row_start = self.b_mul(self.b_add(self.b_mul(bb, T.i64(g.M)), m), T.i64(g.N))
                with for_loop(b, 0, width, "tn") as n:
                    nn = self.b_add(j0, n)
                    ptr = self.gep(self.out, self.b_add(row_start, nn))
                    value = g.tail(b, bb, m, nn, b.load(ptr, typ=self.ety))
                    T.store_element(b, value, self.out, g.dtype, self.b_add(row_start, nn))

    def emit_prefetch_streams(self, start, mr: int, width: int, streams=None, rw: int = 0):
        """Prefetch the ``mr x width`` block at linear index ``start`` (rows ``N`` apart) of
        each of the tail's streams, while the micro-kernel computes the tile's last K block.

        Measured on the MLP's weight gradient with its SGD update fused (``w - lr * dw``,
        1024x1024): the tail's reads of ``w`` -- 256 bytes of each 4 KiB row per tile, a
        pattern the hardware prefetchers do not follow -- cost 1.6 of its 8 ms (one thread)."""
        b, g = self.b, self.g
        fn = _prefetch_fn(b.module)
        for base, ety, item in g.tail_streams if streams is None else streams:
            per_line = max(1, 64 // item)
            with for_loop(b, 0, mr, "tpr") as r:
                row = b.gep(base, [self.b_add(start, self.b_mul(r, T.i64(g.N)))], source_etype=ety)
                for n in range(0, width, per_line):
                    b.call(fn, [b.gep(row, [T.i64(n)], source_etype=ety), ir.Constant(ir.IntType(32), rw),
                                ir.Constant(ir.IntType(32), 3), ir.Constant(ir.IntType(32), 1)])

    def emit_prefetch_next_tile(self, bb, m0, c0, mr):
        """Prefetch the A strip (``mr`` rows x one K block) of the next row tile.

        A dot's A block is read as ``MR`` short strips of one row each (``KC`` elements,
        then a jump of a whole row): too short for the hardware prefetcher to lock on, so
        without this the FMAs wait for memory (measured: attention's ``p @ v``, with 2 KiB
        rows, ran at 40% of the FMA peak). One tile computes for ~1000 cycles: enough to
        hide a DRAM access. (A prefetch never faults, so past the last row it is harmless.)
        """
        b, g = self.b, self.g
        fn = b.module.globals.get("llvm.prefetch.p0")
        if fn is None:
            i32 = ir.IntType(32)
            fn = ir.Function(b.module, ir.FunctionType(ir.VoidType(), [T.PTR, i32, i32, i32]), name="llvm.prefetch.p0")
        per_line = max(1, 64 // self.item)
        # (loops, not ``MR x KC / per_line`` unrolled calls: a third of the kernel's IR)
        with for_loop(b, 0, mr, "pfr") as r:
            row = g.a_row(b, bb, self.b_add(m0, self.b_add(r, T.i64(mr))), T.i64(0))
            with for_loop(b, 0, g.cb, "pfk", step=per_line) as k:
                ptr = b.gep(row, [self.b_add(c0, k)], source_etype=self.ety)  # (not inbounds)
                b.call(fn, [ptr, ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 3),
                            ir.Constant(ir.IntType(32), 1)])

    # -- one unit -------------------------------------------------------------------------
    def emit_k_blocks(self):
        """A loop over the K blocks; yields ``(t0, tb, c0, cb, first, last)`` of each."""
        b, g = self.b, self.g
        last_t, last_c = T.i64(g.t_blocks - 1), T.i64(g.c_blocks - 1)
        with for_loop(b, 0, g.t_blocks, "bt") as bt, for_loop(b, 0, g.c_blocks, "bc") as bc:
            t0, c0 = self.b_mul(bt, T.i64(g.tb)), self.b_mul(bc, T.i64(g.cb))
            tb = _min(b, T.i64(g.tb), b.sub(T.i64(g.T), t0))
            cb = _min(b, T.i64(g.cb), b.sub(T.i64(g.C), c0))
            first = b.and_(b.icmp_unsigned("==", bt, T.i64(0)), b.icmp_unsigned("==", bc, T.i64(0)))
            last = b.and_(b.icmp_unsigned("==", bt, last_t), b.icmp_unsigned("==", bc, last_c))
            yield t0, tb, c0, cb, first, last

    def emit_panel_block(self, bb, row_lo, row_hi, j0, width: int, t0, tb, c0, cb, first, last):
        """One K block of the column panel at ``j0`` for rows ``[row_lo, row_hi)``: pack B, the tiles."""
        b, g = self.b, self.g
        stack_pack = self.pack
        if g.b_panels is not None and width == g.NR:
            # B comes packed (``Gemm.b_panels``): this block's piece is read in place. The
            # micro-kernel's B loads are 64-byte aligned: a buffer that is not (a user's
            # array in that layout, not one of the arena's) is copied as before.
            piece = self.gep(g.b_panels, self.b_mul(self.b_add(self.b_mul(b.udiv(j0, T.i64(g.NR)), T.i64(g.C)),
                                                               c0), T.i64(g.NR)))
            aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(g.b_panels, T.I64), T.i64(63)), T.i64(0))
            with if_then(b, b.not_(aligned), "bpack"):
                self.emit_pack(bb, t0, tb, c0, cb, j0, width)
            self.pack = b.select(aligned, piece, stack_pack)
        else:
            self.emit_pack(bb, t0, tb, c0, cb, j0, width)
        try:
            self._emit_block_tiles(bb, row_lo, row_hi, j0, width, t0, tb, c0, cb, first, last)
        finally:
            self.pack = stack_pack

    def _emit_block_tiles(self, bb, row_lo, row_hi, j0, width: int, t0, tb, c0, cb, first, last):
        b, g = self.b, self.g
        mr = g.tile_rows(width)
        n_full = b.udiv(b.sub(row_hi, row_lo), T.i64(mr))
        with for_loop(b, 0, n_full, "mt") as i:
            self.emit_tile(bb, self.b_add(row_lo, self.b_mul(i, T.i64(mr))), mr, t0, tb, c0, cb, j0, width,
                           first, last, row_lo)
        rest = g.M % mr
        if rest:
            with if_then(b, b.icmp_unsigned("==", row_hi, T.i64(g.M)), "mrest"):
                self.emit_tile(bb, T.i64(g.M - rest), rest, t0, tb, c0, cb, j0, width, first, last, row_lo)

    def emit_panel(self, bb, row_lo, row_hi, j0, width: int):
        """All K blocks of the column panel at ``j0`` for rows ``[row_lo, row_hi)``."""
        for blk in self.emit_k_blocks():
            self.emit_panel_block(bb, row_lo, row_hi, j0, width, *blk)

    def emit_pack_a(self, bb, row_lo, row_hi, c0, cb):
        """Pack A's block for the unit's rows and one K block, in ``MR``-row panels:
        ``apack[i * KC * MR + c * MR + r] = A(bb, row_lo + i * MR + r)[c0 + c]`` (``T == 1``).

        A is strided along ``c`` and contiguous along ``m`` (``a_row_stride == 1``): for each
        ``c``, one vector load of ``lanes`` consecutive rows is split into ``lanes / MR``
        stores of ``MR`` elements, one per panel. (An element-wise copy into a row-major block
        cost ~10 cycles an element: 2.6 of the 14 ms of a 1024x1024x256 weight gradient.)"""
        b, g = self.b, self.g
        nl = g.lanes
        vty = self.vty
        sub = ir.VectorType(self.ety, MR)
        per = nl // MR
        panel_of = lambda m: self.b_mul(b.udiv(b.sub(m, row_lo), T.i64(MR)), T.i64(KC * MR))  # noqa: E731
        n_vec = b.udiv(b.sub(row_hi, row_lo), T.i64(nl))
        # (c outer: each c reads a stretch of one row of x in order, which the hardware
        # prefetcher follows; with m outer the loads walked down columns a whole row apart)
        loops = (("ac", 0, cb), ("as", 0, n_vec)) if PACK_A_ALONG_ROWS else (("as", 0, n_vec), ("ac", 0, cb))
        with for_loop(b, loops[0][1], loops[0][2], loops[0][0]) as i0, \
                for_loop(b, loops[1][1], loops[1][2], loops[1][0]) as i1:
            c, si = (i0, i1) if PACK_A_ALONG_ROWS else (i1, i0)
            m0 = self.b_add(row_lo, self.b_mul(si, T.i64(nl)))
            src0 = g.a_row(b, bb, m0, T.i64(0))
            dst0 = self.gep(self.apack, panel_of(m0))
            v = b.load(self.gep(src0, self.b_mul(self.b_add(c0, c), T.i64(g.a_stride))), typ=vty)
            v.align = self.item
            for q in range(per):
                part = b.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                        ir.Constant(ir.VectorType(ir.IntType(32), MR),
                                                    list(range(q * MR, (q + 1) * MR))))
                dst = self.gep(dst0, self.b_add(T.i64(q * KC * MR), self.b_mul(c, T.i64(MR))))
                st = b.store(part, b.bitcast(dst, sub.as_pointer()))
                st.align = MR * self.item
        with for_loop(b, self.b_add(row_lo, self.b_mul(n_vec, T.i64(nl))), row_hi, "am") as m:
            r = b.urem(b.sub(m, row_lo), T.i64(MR))
            dst0 = self.gep(self.apack, self.b_add(panel_of(m), r))
            with for_loop(b, 0, cb, "ac") as c:
                v = b.load(self.gep(g.a_row(b, bb, m, T.i64(0)), self.b_mul(self.b_add(c0, c), T.i64(g.a_stride))),
                           typ=self.ety)
                b.store(v, self.gep(dst0, self.b_mul(c, T.i64(MR))))

    def emit_panel_group(self, bb, row_lo, row_hi, gp):
        """All K blocks of the panels of group ``gp``, A packed once per K block."""
        b, g = self.b, self.g
        full_panels = g.N // g.NR
        first_panel = self.b_mul(gp, T.i64(g.panel_group))
        end_panel = _min(b, self.b_add(first_panel, T.i64(g.panel_group)), T.i64(g.panels))
        for t0, tb, c0, cb, first, last in self.emit_k_blocks():
            self.emit_pack_a(bb, row_lo, row_hi, c0, cb)
            with for_loop(b, first_panel, end_panel, "gp") as jp:
                j0 = self.b_mul(jp, T.i64(g.NR))
                blk = (t0, tb, c0, cb, first, last)
                if full_panels == g.panels:
                    self.emit_panel_block(bb, row_lo, row_hi, j0, g.NR, *blk)
                else:
                    with b.if_else(b.icmp_unsigned("<", jp, T.i64(full_panels))) as (then, otherwise):
                        with then:
                            if full_panels:
                                self.emit_panel_block(bb, row_lo, row_hi, j0, g.NR, *blk)
                        with otherwise:
                            self.emit_panel_block(bb, row_lo, row_hi, j0, g.N - full_panels * g.NR, *blk)

    def emit_units(self, lo, hi):
        b, g = self.b, self.g
        full_panels = g.N // g.NR
        with for_loop(b, lo, hi, "u") as u:
            jp = b.urem(u, T.i64(g.panel_groups))
            rest = b.udiv(u, T.i64(g.panel_groups))
            mc = b.urem(rest, T.i64(g.row_chunks))
            bb = b.udiv(rest, T.i64(g.row_chunks))
            row_lo = self.b_mul(mc, T.i64(g.rows_per_unit))
            row_hi = _min(b, self.b_add(row_lo, T.i64(g.rows_per_unit)), T.i64(g.M))
            j0 = self.b_mul(jp, T.i64(g.NR))
            if g.pack_a:
                self.emit_panel_group(bb, row_lo, row_hi, jp)
            elif full_panels == g.panels:
                self.emit_panel(bb, row_lo, row_hi, j0, g.NR)
            else:
                is_full = b.icmp_unsigned("<", jp, T.i64(full_panels))
                with b.if_else(is_full) as (then, otherwise):
                    with then:
                        if full_panels:
                            self.emit_panel(bb, row_lo, row_hi, j0, g.NR)
                    with otherwise:
                        self.emit_panel(bb, row_lo, row_hi, j0, g.N - full_panels * g.NR)


def _prefetch_fn(module):
    fn = module.globals.get("llvm.prefetch.p0")
    if fn is None:
        i32 = ir.IntType(32)
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR, i32, i32, i32]), name="llvm.prefetch.p0")
    return fn


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def emit_gemm(builder: ir.IRBuilder, g: Gemm, out, lo, hi, alloca) -> None:
    """Emit units ``[lo, hi)`` of ``g`` writing ``out`` (see the module docstring).

    ``alloca(type, name, count=1)`` must return a stack slot in the function's entry block.
    """
    if g.batch * g.M * g.N == 0:
        return
    if g.T * g.C == 0:
        raise ValueError("emit_gemm needs K > 0 (the caller zero-fills an empty contraction)")
    if PREFER_VECTOR_WIDTH:
        set_prefer_vector_width(builder.function, PREFER_VECTOR_WIDTH)
    _Emitter(builder, g, out, alloca).emit_units(lo, hi)


def set_prefer_vector_width(fn: ir.Function, bits: int) -> None:
    """Give ``fn`` LLVM's ``"prefer-vector-width"`` attribute (the loop vectorizer's width).
    (llvmlite's attribute set only takes enum attributes: the string attribute goes in
    through ``set.add``; it prints inline in the ``define``.)"""
    set.add(fn.attributes, f'"prefer-vector-width"="{bits}"')


def supported_dtype(dtype) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))
