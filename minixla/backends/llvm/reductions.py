"""Blocked accumulation: how every reduction loop of the backend sums (XLA:CPU's tree reduction).

A float sum accumulated in one running register loses accuracy in proportion to its length:
once the total is large, each new element is rounded to the total's precision, so
``sum(full(2**24, 0.1f))`` drifts by ~4e-3. ``reassoc`` lets LLVM vectorize the loop into
``VF * interleave`` accumulators, but each of them still adds ``n / (VF * interleave)``
elements in sequence. XLA:CPU avoids this with its ``TreeReductionRewriter`` (a reduction
becomes a reduce-window of 32 elements, reduced again). Here, in the kernel itself:

* the reduced positions are cut into **blocks** of ``BLOCK`` elements (fewer when the
  reduced dims do not divide evenly). Each block is one vectorized inner loop into a fresh
  accumulator starting at the reducer's identity (``-0.0`` for add, ``1.0`` for multiply);
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

Only float ``add`` and ``multiply`` need it; ``max``/``min``/``and``/``or`` and integer
reductions are exact in any order and keep one running accumulator (as do custom reducers,
whose identity is unknown).
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

#: the identity of the reducers accumulated in blocks (``-0.0 + x`` is ``x`` for ``x = +0.0`` too).
_IDENTITY = {"add": -0.0, "multiply": 1.0}


def block_identity(computation, dtype):
    """The identity (register constant) of a reduce's ``to_apply`` when its partials are worth
    combining in blocks (a float ``add``/``multiply`` of its two parameters), else None."""
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
               name: str = "r", interleave: int | None = None):
    """``init`` reduced with every position of ``dims`` (row-major order, a loop nest).

    ``step(acc, ivs) -> acc`` accumulates the element at the loop indices ``ivs`` (one i64 per
    dim) into the register value ``acc`` of type ``ty``; ``combine(a, b)`` combines two partial
    results (``a`` holding the earlier elements) and ``identity`` is its identity constant.
    Without ``combine`` (or when the whole nest fits in one block), one running accumulator;
    with it, blocks combined pairwise (see the module docstring). ``interleave`` is the hint
    of the innermost loop (``loops.for_loop``). Returns the result (a register value).
    """
    dims = [int(d) for d in dims]
    n = math.prod(dims)
    acc = entry_alloca(b, ty, f"{name}.acc")
    if combine is None or identity is None or n <= BLOCK:
        b.store(init, acc)
        _nest(b, acc, [(0, d) for d in dims], [], step, name, interleave)
        return b.load(acc)
    # The block: the smallest suffix of dims with BLOCK elements or more, its first dim cut
    # into chunks so that a block has at most BLOCK elements.
    k = max(j for j in range(len(dims)) if math.prod(dims[j:]) >= BLOCK)
    inner = math.prod(dims[k + 1:])
    chunk = max(1, BLOCK // inner)
    outer = dims[:k] + [-(-dims[k] // chunk)]
    blocks = math.prod(outer)
    levels = blocks.bit_length()
    stack = entry_alloca(b, ty, f"{name}.partials", count=levels)
    with for_loop(b, 0, blocks, f"{name}.blk") as q:
        qv = delinearize(b, q, outer)
        lo = b.mul(qv[-1], T.i64(chunk), flags=("nsw", "nuw"))
        hi = b.add(lo, T.i64(chunk), flags=("nsw", "nuw"))
        if dims[k] % chunk:
            hi = b.select(b.icmp_signed("<", hi, T.i64(dims[k])), hi, T.i64(dims[k]))
        b.store(identity, acc)
        _nest(b, acc, [(lo, hi)] + [(0, d) for d in dims[k + 1:]], qv[:-1], step, name, interleave)
        _push_pairwise(b, stack, ty, q, b.load(acc), combine, name)
    total = None
    for j in reversed(range(levels)):  # bit j of ``blocks``: a partial of 2**j blocks, oldest first
        if blocks >> j & 1:
            part = b.load(b.gep(stack, [T.i64(j)], inbounds=True, source_etype=ty))
            total = part if total is None else combine(total, part)
    return combine(init, total)


def _nest(b, acc, ranges, prefix, step, name, interleave):
    """``acc = step(acc, prefix + ivs)`` over the loop nest of ``ranges`` ((lo, hi) per dim)."""
    if not ranges:
        b.store(step(b.load(acc), list(prefix)), acc)
        return
    lo, hi = ranges[0]
    last = len(ranges) == 1
    with for_loop(b, lo, hi, f"{name}{len(prefix)}", interleave=interleave if last else None) as iv:
        _nest(b, acc, ranges[1:], list(prefix) + [iv], step, name, interleave)


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
