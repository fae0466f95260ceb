"""Loops and multi-dim indices (XLA's ``llvm_ir::ForLoop``, ``ForLoopNest`` and ``IrArray::Index``).

Loops are emitted in the canonical form LLVM's loop passes expect (a header with an ``i64``
induction phi, the exit test at the top so a trip count of 0 runs nothing, one latch); LLVM
rotates, vectorizes and unrolls them. Indices are ``i64``.
"""
from __future__ import annotations

import contextlib
import math
import re

from llvmlite import ir

from minixla.backends.llvm.ir_types import I64, i64


@contextlib.contextmanager
def for_loop(builder: ir.IRBuilder, start, stop, name: str = "i", step=1, interleave: int | None = None):
    """``for (i = start; i < stop; i += step) { <body> }``; yields the induction variable.

    ``start``/``stop`` are ints or i64 values. On exit the builder is after the loop.
    ``interleave``: the most vector iterations LLVM's loop vectorizer may interleave
    (``llvm.loop.interleave.count``; default: its cost model, up to 4). Each interleaved copy of
    a body with inline ``exp``/``log``/... is as much code again to compile, for little speed:
    out-of-order execution already overlaps consecutive iterations of a long body.
    """
    start = i64(start) if isinstance(start, int) else start
    stop = i64(stop) if isinstance(stop, int) else stop
    preheader = builder.block
    header = builder.append_basic_block(f"{name}.header")
    body = builder.append_basic_block(f"{name}.body")
    exit_ = builder.append_basic_block(f"{name}.exit")
    builder.branch(header)
    builder.position_at_end(header)
    iv = builder.phi(I64, name=name)
    iv.add_incoming(start, preheader)
    builder.cbranch(builder.icmp_signed("<", iv, stop), body, exit_)
    builder.position_at_end(body)
    yield iv
    nxt = builder.add(iv, i64(step), name=f"{name}.next", flags=("nsw", "nuw"))
    iv.add_incoming(nxt, builder.block)
    latch = builder.branch(header)
    if interleave is not None:
        _set_loop_hint(builder.module, latch, "llvm.loop.interleave.count", interleave)
    builder.position_at_end(exit_)


# LLVM wants a loop's ID to be a distinct node whose first operand is itself, which llvmlite
# cannot build: we emit ``!{!"minixla.loop_id", !"<n>", <hint>}`` and ``with_loop_ids`` rewrites
# it to ``distinct !{<self>, <hint>}`` in the module text.
_LOOP_ID = "minixla.loop_id"
_LOOP_ID_RE = re.compile(r'^(!\d+) = !\{ ?!"' + re.escape(_LOOP_ID) + r'", !"\d+", ', re.MULTILINE)


def _set_loop_hint(module: ir.Module, latch, key: str, value: int) -> None:
    hint = module.add_metadata([ir.MetaDataString(module, key), ir.Constant(ir.IntType(32), value)])
    count = getattr(module, "_minixla_loop_ids", 0)
    module._minixla_loop_ids = count + 1
    loop_id = module.add_metadata([ir.MetaDataString(module, _LOOP_ID), ir.MetaDataString(module, str(count)), hint])
    latch.set_metadata("llvm.loop", loop_id)


def with_loop_ids(text: str) -> str:
    """The module text with its loop IDs made distinct and self-referential (see above)."""
    return _LOOP_ID_RE.sub(lambda m: f"{m.group(1)} = distinct !{{{m.group(1)}, ", text)


@contextlib.contextmanager
def loop_nest(builder: ir.IRBuilder, dims, name: str = "d"):
    """Nested loops over ``dims`` (outermost first); yields the list of induction variables."""
    with contextlib.ExitStack() as stack:
        ivs = [stack.enter_context(for_loop(builder, 0, int(n), f"{name}{k}")) for k, n in enumerate(dims)]
        yield ivs


@contextlib.contextmanager
def if_then(builder: ir.IRBuilder, cond, name: str = "if"):
    """``if (cond) { <body> }``."""
    then = builder.append_basic_block(f"{name}.then")
    done = builder.append_basic_block(f"{name}.done")
    builder.cbranch(cond, then, done)
    builder.position_at_end(then)
    yield
    builder.branch(done)
    builder.position_at_end(done)


def row_major_strides(dims) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def linearize(builder: ir.IRBuilder, multi, dims):
    """Row-major linear index of a multi-dim index: ``sum(multi[k] * stride[k])``."""
    total = None
    for v, s, d in zip(multi, row_major_strides(dims), dims):
        if d == 1:
            continue  # the only valid index is 0
        term = v if s == 1 else builder.mul(v, i64(s), flags=("nsw", "nuw"))
        total = term if total is None else builder.add(total, term, flags=("nsw", "nuw"))
    return i64(0) if total is None else total


def delinearize(builder: ir.IRBuilder, linear, dims):
    """The multi-dim index of a row-major linear index (udiv/urem by constant strides)."""
    multi = []
    for s, d in zip(row_major_strides(dims), dims):
        if d == 1:
            multi.append(i64(0))
            continue
        q = linear if s == 1 else builder.udiv(linear, i64(s))
        multi.append(q if s * d >= math.prod(dims) else builder.urem(q, i64(d)))
    return multi


class Index:
    """A position in an array of ``dims``: multi-dim (list of i64) and/or linear (i64).

    Either form is computed from the other on first use. Elementwise ops pass their output
    index to their operands unchanged, so a fused chain of elementwise ops over same-shape
    arrays only ever needs the linear index of one flat loop. A rule that opens a nested
    region (a loop) must call ``materialize()`` first, so no form is first computed inside
    the region and then reused outside it.
    """

    def __init__(self, builder: ir.IRBuilder, dims, multi=None, linear=None):
        assert multi is not None or linear is not None
        self.builder = builder
        self.dims = tuple(int(d) for d in dims)
        self._multi = list(multi) if multi is not None else None
        self._linear = linear
        if self._multi is not None:
            assert len(self._multi) == len(self.dims), (self._multi, self.dims)

    @property
    def multi(self) -> list:
        if self._multi is None:
            self._multi = delinearize(self.builder, self._linear, self.dims)
        return self._multi

    @property
    def linear(self):
        if self._linear is None:
            self._linear = linearize(self.builder, self._multi, self.dims)
        return self._linear

    def materialize(self):
        self.multi, self.linear  # noqa: B018 (computed for their side effect)
        return self
