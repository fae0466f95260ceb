"""Blocked accumulation: how every reduction loop of the backend sums (XLA:CPU's tree reduction).

A float sum accumulated in one running register loses accuracy in proportion to its length:
once the total is large, each new element is rounded to the total's precision, so
``sum(full(2**24, 0.1f))`` drifts by ~4e-3. ``reassoc`` lets LLVM vectorize the loop into
``VF * interleave`` accumulators, but each of them still adds ``n / (VF * interleave)``
elements in sequence. XLA:CPU avoids this with its ``TreeReductionRewriter`` (a reduction
becomes a reduce-window of 32 elements, reduced again). Here, in the kernel itself:

* the reduced positions are cut into **blocks** of ``BLOCK`` elements (fewer when the
  reduced dims do not divide evenly). Each block is one vectorized inner loop into a fresh
  accumulator starting at the reducer's identity (``-0.0``);
* the block partials are combined **pairwise** as they come, with a binary counter (a small
  stack on the function's stack frame: block ``q`` merges with the partials of the trailing
  one bits of ``q``), and the final stack entries are combined from the oldest;
* ``init`` is applied once, before everything: ``reducer(init, total)``.

Each vector lane adds ``BLOCK / (VF * interleave)`` elements in sequence and the partials
meet in a tree of depth ``log2(n / BLOCK)``, so the rounding error grows like
``(BLOCK / lanes + log2(n)) * eps`` instead of ``n / lanes * eps`` (NumPy's pairwise sum is
the same idea with blocks of 128). The block structure depends only on the static shape, never
on how the executable splits the kernel's units over threads (a unit never splits a sum),
so results stay bit-identical for every ``MINIXLA_NUM_THREADS``.

Only float ``add`` needs it. ``max``/``min``/``and``/``or`` and integer reductions are exact
in any order (but for which NaN a float max/min returns: ``ordered_nan``). A product's relative error is, to first order, the sum of the relative errors of
its roundings *whatever the order*, so blocks do not make it smaller; worse, block partials
start at 1.0 and stay near it, where each rounding drops the small second-order term
``a*b`` of ``(1+a)(1+b)`` with the same sign: the product of 2**24 factors ``exp(1e-4 z)`` is
off by 1e-1 in blocks (JAX's value is as far off) and by 4e-3 with one running product per
vector lane. So products, like custom reducers (whose identity is
unknown), keep one running accumulator.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import delinearize, for_loop

#: elements per block: a multiple of every vector width (times LLVM's interleave of 4),
#: large enough that the pairwise merge after each block costs nothing next to the block.
BLOCK = 1024
#: a block is at most this many minor rows when the minor dim is shorter than BLOCK / 32
SHORT_ROW_BLOCKS = 32

#: the identity of the reducers accumulated in blocks (``-0.0 + x`` is ``x`` for ``x = +0.0`` too).
_IDENTITY = {"add": -0.0}


def block_identity(computation, dtype):
    """The identity (register constant) of a reduce's ``to_apply`` when its partials are worth
    combining in blocks (a float ``add`` of its two parameters), else None."""
    if computation is None:
        return None
    root, params = computation.root, computation.parameters
    if not T.is_float(np.dtype(dtype)) or root.opcode not in _IDENTITY:
        return None
    if len(params) != 2 or list(root.operands) != list(params):
        return None
    return ir.Constant(T.reg_type(dtype), _IDENTITY[root.opcode])


def entry_alloca(b: ir.IRBuilder, ty, name: str, count: int = 1):
    """A stack slot (``count`` elements) in the function's entry block, where mem2reg finds it."""
    entry = b.function.entry_basic_block
    eb = ir.IRBuilder(entry)
    if entry.is_terminated:
        eb.position_before(entry.terminator)
    return eb.alloca(ty, size=None if count == 1 else T.i64(count), name=name)


def accumulate(b: ir.IRBuilder, ty, init, dims, step, combine=None, identity=None,
               name: str = "r", interleave: int | None = None, redo_nan=None):
    """``init`` reduced with every position of ``dims`` (row-major order, a loop nest).

    ``step(acc, ivs) -> acc`` accumulates the element at the loop indices ``ivs`` (one i64 per
    dim) into the register value ``acc`` of type ``ty``; ``combine(a, b)`` combines two partial
    results (``a`` holding the earlier elements) and ``identity`` is its identity constant.
    Without ``combine`` (or when the whole nest fits in one block), one running accumulator;
    with it, blocks combined pairwise (see the module docstring). ``interleave`` is the hint
    of the innermost loop (``loops.for_loop``). ``redo_nan(acc, ivs)``, for a float max/min
    (``orders_nans``), is ``step`` in order: when the result is NaN, the nest is reduced again
    with it (``ordered_nan``). Returns the result (a register value).
    """
    result = _accumulate(b, ty, init, dims, step, combine, identity, name, interleave)
    if redo_nan is None:
        return result
    return ordered_nan(b, ty, result, lambda: _accumulate(b, ty, init, dims, redo_nan, None, None,
                                                          f"{name}.nan", None))


def orders_nans(computation, dtype) -> bool:
    """Whether a reduce's ``to_apply`` is a float ``maximum``/``minimum`` of its two parameters,
    whose NaN result depends on the order (XLA:CPU's reduce is an ordered loop of its max/min:
    the first NaN, its sign bit and-ed (max) or or-ed (min) with the sign of the partial result
    before it -- ``scalar_ops._xla_nan_sign``). Every other result is the same in any order."""
    if computation is None or not T.is_float(np.dtype(dtype)):
        return False
    root, params = computation.root, computation.parameters
    return (root.opcode in ("maximum", "minimum") and len(params) == 2
            and list(root.operands) == list(params))


def ordered_nan(b: ir.IRBuilder, ty, result, ordered):
    """``result`` of a vectorized (reassociated) max/min, or where it is NaN, ``ordered()``:
    the same reduction emitted again in order with XLA's NaN rule. The NaN is rare, so the
    vector loop keeps its speed and the second loop runs only for such rows. The ordered
    loop is emitted inside the branch (its own blocks); returns the phi of the two."""
    pre = b.block
    slow = b.append_basic_block("nan.ordered")
    done = b.append_basic_block("nan.done")
    b.cbranch(b.fcmp_unordered("uno", result, result), slow, done)
    b.position_at_end(slow)
    again = ordered()
    slow_end = b.block
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(ty, name="nan.result")
    phi.add_incoming(result, pre)
    phi.add_incoming(again, slow_end)
    return phi


def _accumulate(b, ty, init, dims, step, combine, identity, name, interleave):
    dims = [int(d) for d in dims]
    n = math.prod(dims)
    acc = entry_alloca(b, ty, f"{name}.acc")
    # A short minor dim is not split over vector lanes: its block accumulates in sequence.
    minor = next((d for d in reversed(dims) if d != 1), 1)
    target = min(BLOCK, SHORT_ROW_BLOCKS * minor)
    if combine is None or identity is None or n <= target:
        b.store(init, acc)
        _nest(b, [(0, d) for d in dims], [], lambda ivs: b.store(step(b.load(acc), ivs), acc), name, interleave)
        return b.load(acc)
    blocking = _Blocking(dims, target)
    stack = entry_alloca(b, ty, f"{name}.partials", count=blocking.levels)
    with for_loop(b, 0, blocking.blocks, f"{name}.blk") as q:
        b.store(identity, acc)
        _nest(b, blocking.ranges(b, q), [], lambda ivs: b.store(step(b.load(acc), ivs), acc), name, interleave)
        _push_pairwise(b, stack, ty, q, b.load(acc), combine, name)
    total = None
    for j in blocking.final_levels():
        part = b.load(b.gep(stack, [T.i64(j)], inbounds=True, source_etype=ty))
        total = part if total is None else combine(total, part)
    return combine(init, total)


class _Blocking:
    """The blocks of a loop nest over ``dims``: the smallest suffix of dims with ``target``
    positions or more, its first dim cut into chunks so that a block has at most ``target``."""

    def __init__(self, dims, target):
        self.dims = dims
        self.k = max(j for j in range(len(dims)) if math.prod(dims[j:]) >= target)
        self.chunk = max(1, target // math.prod(dims[self.k + 1:]))
        self.outer = dims[:self.k] + [-(-dims[self.k] // self.chunk)]
        self.blocks = math.prod(self.outer)
        self.levels = self.blocks.bit_length()

    def ranges(self, b, q):
        """The loop ranges ((lo, hi) per dim) of block ``q`` (an i64 value)."""
        qv = delinearize(b, q, self.outer)
        size = self.dims[self.k]
        lo = b.mul(qv[-1], T.i64(self.chunk), flags=("nsw", "nuw"))
        hi = b.add(lo, T.i64(self.chunk), flags=("nsw", "nuw"))
        if size % self.chunk:
            hi = b.select(b.icmp_signed("<", hi, T.i64(size)), hi, T.i64(size))
        return [(v, b.add(v, T.i64(1))) for v in qv[:-1]] + [(lo, hi)] + [(0, d) for d in self.dims[self.k + 1:]]

    def final_levels(self):
        """The stack levels holding a partial once every block is pushed, oldest first
        (bit ``j`` of the block count: a partial of 2**j blocks)."""
        return [j for j in reversed(range(self.levels)) if self.blocks >> j & 1]


def _nest(b, ranges, prefix, body, name, interleave=None):
    """``body(prefix + ivs)`` over the loop nest of ``ranges`` ((lo, hi) per dim)."""
    if not ranges:
        body(list(prefix))
        return
    lo, hi = ranges[0]
    last = len(ranges) == 1
    with for_loop(b, lo, hi, f"{name}{len(prefix)}", interleave=interleave if last else None) as iv:
        _nest(b, ranges[1:], list(prefix) + [iv], body, name, interleave)


#: columns of a column reduction accumulated side by side (one row of partials on the stack)
COLUMN_TILE = 1024
#: rows of a column reduction per block (each column adds them in sequence)
COLUMN_BLOCK_ROWS = 64


def accumulate_columns(b: ir.IRBuilder, ty, cols: int, row_dims, step, combine, identity, finish,
                       name: str = "rc"):
    """A column reduction in blocks: for every column ``c < cols``, the rows (positions of
    the loop nest over ``row_dims``) are summed like ``accumulate`` sums a nest, but
    ``COLUMN_TILE`` columns side by side, so the inner loop runs (vectorized) along a row:

        for each tile of columns:
            for each block of COLUMN_BLOCK_ROWS rows:
                part[:] = identity;  for row in block: part[c] = step(part[c], row_ivs, c)
                push part onto the pairwise stack (a row of partials per level)
            finish(c, total[c]) for c in the tile

    ``step(acc, row_ivs, col) -> acc`` accumulates one element (``col`` an i64 value);
    ``finish(col, total)`` consumes a column's total (it applies ``init`` itself).
    """
    row_dims = [int(d) for d in row_dims]
    tile = min(cols, COLUMN_TILE)
    tiles = -(-cols // tile)
    blocking = _Blocking(row_dims, COLUMN_BLOCK_ROWS)
    part = entry_alloca(b, ty, f"{name}.part", count=tile)
    stack = entry_alloca(b, ty, f"{name}.partials", count=blocking.levels * tile)

    def slot(base, j):
        return b.gep(base, [j], inbounds=True, source_etype=ty)

    def level_slot(level, j):
        return slot(stack, b.add(b.mul(level, T.i64(tile), flags=("nsw", "nuw")), j, flags=("nsw", "nuw")))

    with for_loop(b, 0, tiles, f"{name}.tile") as t:
        c0 = b.mul(t, T.i64(tile), flags=("nsw", "nuw"))
        width = T.i64(tile)
        if cols % tile:
            width = b.select(b.icmp_signed("<", b.add(c0, width), T.i64(cols)), width, b.sub(T.i64(cols), c0))
        with for_loop(b, 0, blocking.blocks, f"{name}.blk") as q:
            with for_loop(b, 0, width, f"{name}.zero") as j:
                b.store(identity, slot(part, j))

            def row(ivs):
                with for_loop(b, 0, width, f"{name}.col") as j:
                    p = slot(part, j)
                    b.store(step(b.load(p), ivs, b.add(c0, j, flags=("nsw", "nuw"))), p)
            _nest(b, blocking.ranges(b, q), [], row, name)
            # the binary counter of ``_push_pairwise``, on rows of partials
            pre = b.block
            header = b.append_basic_block(f"{name}.carry")
            body = b.append_basic_block(f"{name}.carry.body")
            done = b.append_basic_block(f"{name}.carry.done")
            b.branch(header)
            b.position_at_end(header)
            level = b.phi(T.I64, name=f"{name}.level")
            level.add_incoming(T.i64(0), pre)
            bit = b.and_(b.lshr(q, level), T.i64(1))
            b.cbranch(b.icmp_unsigned("!=", bit, T.i64(0)), body, done)
            b.position_at_end(body)
            with for_loop(b, 0, width, f"{name}.merge") as j:
                p = slot(part, j)
                b.store(combine(b.load(level_slot(level, j)), b.load(p)), p)
            level.add_incoming(b.add(level, T.i64(1), flags=("nsw", "nuw")), b.block)
            b.branch(header)
            b.position_at_end(done)
            with for_loop(b, 0, width, f"{name}.push") as j:
                b.store(b.load(slot(part, j)), level_slot(level, j))
        with for_loop(b, 0, width, f"{name}.total") as j:
            total = None
            for lv in blocking.final_levels():
                v = b.load(level_slot(T.i64(lv), j))
                total = v if total is None else combine(total, v)
            finish(b.add(c0, j, flags=("nsw", "nuw")), total)


def _push_pairwise(b, stack, ty, q, value, combine, name):
    """Block ``q``'s partial onto the binary counter: while bit ``j`` of ``q`` is set, combine
    with ``stack[j]`` (the partial of the 2**j blocks before) and carry; store at the first 0 bit."""
    pre = b.block
    header = b.append_basic_block(f"{name}.carry")
    body = b.append_basic_block(f"{name}.carry.body")
    done = b.append_basic_block(f"{name}.carry.done")
    b.branch(header)
    b.position_at_end(header)
    j = b.phi(T.I64, name=f"{name}.level")
    v = b.phi(ty, name=f"{name}.carried")
    j.add_incoming(T.i64(0), pre)
    v.add_incoming(value, pre)
    bit = b.and_(b.lshr(q, j), T.i64(1))
    b.cbranch(b.icmp_unsigned("!=", bit, T.i64(0)), body, done)
    b.position_at_end(body)
    older = b.load(b.gep(stack, [j], inbounds=True, source_etype=ty))
    merged = combine(older, v)
    j.add_incoming(b.add(j, T.i64(1), flags=("nsw", "nuw")), b.block)
    v.add_incoming(merged, b.block)
    b.branch(header)
    b.position_at_end(done)
    b.store(v, b.gep(stack, [j], inbounds=True, source_etype=ty))
