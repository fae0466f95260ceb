"""The thread pool's hand-off in native code (``runtime.ThreadPool``; XLA:CPU's Eigen pool does
the same in C++): posting a parallel call, claiming its chunks, running them and waiting for
them never takes the GIL.

With the hand-off in Python (a queue per worker, a Python counter to claim chunks, an event
to wait on), every chunk of a parallel call passed the GIL between the threads, and a worker
blocked on its queue took 20-130 us to wake on this 2-vCPU VM: a 16-unit kernel of 7 us cost
~20 us as a parallel call back to back and ~100 us after a pause (``parallel_for`` timed per
thread: the caller's own chunks took 100 us, waiting for the GIL between them).

One *job* word array per pool (``JOB_WORDS`` int64, 64-byte aligned):

* ``TICKET``: ``(seq << 32) | next chunk``. A thread claims chunk ``c`` of call ``seq`` by a
  compare-and-swap of the ticket from ``(seq, c)`` to ``(seq, c + 1)``; the fields it read
  between loading the ticket and the swap are that call's (the caller writes them before it
  publishes the ticket and does not post the next call before every chunk is done).
* ``FN``, ``TABLE``, ``UNITS``, ``CHUNKS``: the call; chunk ``c`` is units
  ``[units * c // chunks, units * (c + 1) // chunks)``. ``DONE``: chunks finished.
* ``SLEEPERS``: workers about to sleep (the caller swaps it to 0 after publishing ``WAKE`` and
  wakes them if it was not 0; a worker counts itself in before it reads ``WAKE``, both
  sequentially consistent, so a call is never missed). ``WAKE``: the last call's ``seq`` (its
  low 32 bits are the futex word). ``STOP``: set by ``stop``.

Functions (``NativePool``): ``call(job, fn, table, units, chunks, seq)`` (the caller: post the call, wake the sleeping
workers through a futex on ``WAKE``, claim and run chunks, then spin -- yielding the core now
and then -- until all are done), ``worker(job, seen, polls)`` (a worker's whole life, one
foreign call: poll the ticket up to ``polls`` times for a call other than the last one served,
run its chunks; else count itself in ``SLEEPERS`` and sleep on ``WAKE`` unless a call came
meanwhile; return once ``STOP`` is set), ``stop(job)`` and ``spin`` (the poll loop alone, timed
once to turn ``runtime.SPIN_US`` into polls). Linux on x86-64 and AArch64 (the futex system
call); elsewhere ``runtime`` keeps its Python hand-off.
"""
from __future__ import annotations

import ctypes
import sys
import time

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir

TICKET, FN, TABLE, UNITS, CHUNKS, DONE, SLEEPERS, WAKE, STOP = range(9)
JOB_WORDS = 16  # (two cache lines: the fields in the first)

_I64, _PTR = ir.IntType(64), ir.PointerType()


def new_job() -> np.ndarray:
    """A zeroed job array, 64-byte aligned."""
    raw = np.zeros(JOB_WORDS + 8, np.int64)
    start = (-raw.ctypes.data % 64) // 8
    return raw[start:start + JOB_WORDS]


def _field(b, job, k):
    return b.gep(job, [ir.Constant(_I64, k)], inbounds=True, source_etype=_I64)


def _load(b, job, k, ordering="monotonic"):
    return b.load_atomic(_field(b, job, k), ordering, 8, typ=_I64)


def _claim_loop(b, fn, job, seq, name):
    """Claim and run chunks of call ``seq`` until none is left (or another call is posted)."""
    thunk_type = ir.FunctionType(ir.VoidType(), [_PTR, _I64, _I64])
    head, claim, run, out = (fn.append_basic_block(f"{name}.{n}") for n in ("head", "claim", "run", "out"))
    b.branch(head)
    b.position_at_end(head)
    ticket = _load(b, job, TICKET, "acquire")
    chunk = b.and_(ticket, ir.Constant(_I64, 0xFFFFFFFF))
    chunks = _load(b, job, CHUNKS)
    live = b.and_(b.icmp_unsigned("==", b.lshr(ticket, ir.Constant(_I64, 32)), seq),
                  b.icmp_unsigned("<", chunk, chunks))
    b.cbranch(live, claim, out)
    b.position_at_end(claim)
    target, table, units = _load(b, job, FN), _load(b, job, TABLE), _load(b, job, UNITS)
    pair = b.cmpxchg(_field(b, job, TICKET), ticket, b.add(ticket, ir.Constant(_I64, 1)), "acq_rel", "acquire")
    b.cbranch(b.extract_value(pair, 1), run, head)
    b.position_at_end(run)
    lo = b.udiv(b.mul(units, chunk), chunks)
    hi = b.udiv(b.mul(units, b.add(chunk, ir.Constant(_I64, 1))), chunks)
    b.call(b.inttoptr(target, thunk_type.as_pointer()), [b.inttoptr(table, _PTR), lo, hi])
    b.atomic_rmw("add", _field(b, job, DONE), ir.Constant(_I64, 1), "release")
    b.branch(head)
    b.position_at_end(out)


def _module() -> ir.Module:
    module = ir.Module(name="minixla_pool")
    module.triple = llvm_binding.get_process_triple()

    def function(name, ret, args):
        fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
        fn.attributes.add("nounwind")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    arch = module.triple.split("-")[0]
    if not sys.platform.startswith("linux") or arch not in ("x86_64", "aarch64"):
        raise NotImplementedError(f"no futex hand-off on {sys.platform}/{arch}")
    sys_futex, sys_yield = {"x86_64": (202, 24), "aarch64": (98, 124)}[arch]
    syscall = ir.Function(module, ir.FunctionType(_I64, [_I64], var_arg=True), name="syscall")

    def futex(b, job, op, value):  # FUTEX_WAIT_PRIVATE 128 / FUTEX_WAKE_PRIVATE 129 on WAKE's low half
        b.call(syscall, [ir.Constant(_I64, sys_futex), _field(b, job, WAKE), ir.Constant(_I64, op), value,
                         ir.Constant(_PTR, None)])

    def publish(b, job, value):
        """WAKE = value, then wake the sleepers (if any)."""
        b.atomic_rmw("xchg", _field(b, job, WAKE), value, "seq_cst")
        sleepers = b.atomic_rmw("xchg", _field(b, job, SLEEPERS), ir.Constant(_I64, 0), "seq_cst")
        with b.if_then(b.icmp_unsigned("!=", sleepers, ir.Constant(_I64, 0))):
            futex(b, job, 129, ir.Constant(_I64, 0x7FFFFFFF))

    # call(job, fn, table, units, chunks, seq): post, wake, run chunks, wait for all of them
    fn, b = function("minixla_pool_call", ir.VoidType(), [_PTR, _I64, _I64, _I64, _I64, _I64])
    job, target, table, units, chunks, seq = fn.args
    for k, v in ((FN, target), (TABLE, table), (UNITS, units), (CHUNKS, chunks), (DONE, ir.Constant(_I64, 0))):
        b.atomic_rmw("xchg", _field(b, job, k), v, "monotonic")  # (llvmlite's store_atomic wants typed pointers)
    b.atomic_rmw("xchg", _field(b, job, TICKET), b.shl(seq, ir.Constant(_I64, 32)), "seq_cst")
    publish(b, job, seq)
    _claim_loop(b, fn, job, seq, "c")
    # wait for the workers' chunks; every 4096 polls yield the core (a worker holding a chunk
    # may be waiting for it: a loaded host preempts threads)
    entry = b.block
    wait, poll, yield_, done = (fn.append_basic_block(n) for n in ("wait", "poll", "yield", "done"))
    b.branch(wait)
    b.position_at_end(wait)
    i = b.phi(_I64)
    i.add_incoming(ir.Constant(_I64, 0), entry)
    b.cbranch(b.icmp_unsigned("==", _load(b, job, DONE, "acquire"), _load(b, job, CHUNKS)), done, poll)
    b.position_at_end(poll)
    nxt = b.add(i, ir.Constant(_I64, 1))
    i.add_incoming(nxt, poll)
    i.add_incoming(ir.Constant(_I64, 0), yield_)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(_I64, 4096)), wait, yield_)
    b.position_at_end(yield_)
    b.call(syscall, [ir.Constant(_I64, sys_yield)])
    b.branch(wait)
    b.position_at_end(done)
    b.ret_void()

    # stop(job): the workers return from ``worker``
    fn, b = function("minixla_pool_stop", ir.VoidType(), [_PTR])
    (job,) = fn.args
    b.atomic_rmw("xchg", _field(b, job, STOP), ir.Constant(_I64, 1), "seq_cst")
    b.atomic_rmw("xchg", _field(b, job, SLEEPERS), ir.Constant(_I64, 1), "seq_cst")  # (so publish wakes)
    publish(b, job, b.add(_load(b, job, WAKE, "seq_cst"), ir.Constant(_I64, 1)))
    b.ret_void()

    # worker(job, seen, polls): serve calls until stopped -- spin up to ``polls`` polls of the
    # ticket, else count itself a sleeper and sleep on WAKE (futex) unless a call came meanwhile
    fn, b = function("minixla_pool_worker", ir.VoidType(), [_PTR, _I64, _I64])
    job, seen0, polls = fn.args
    seen = b.alloca(_I64)
    b.store(seen0, seen)
    top, spin, again, got, sleep, wait_blk, out = (fn.append_basic_block(n) for n in
                                                   ("top", "spin", "again", "got", "sleep", "wait", "out"))
    b.branch(top)
    b.position_at_end(top)
    b.cbranch(b.icmp_unsigned("!=", _load(b, job, STOP, "acquire"), ir.Constant(_I64, 0)), out, spin)
    b.position_at_end(spin)
    i = b.phi(_I64)
    i.add_incoming(ir.Constant(_I64, 0), top)
    cur = b.lshr(_load(b, job, TICKET, "acquire"), ir.Constant(_I64, 32))
    b.cbranch(b.icmp_unsigned("!=", cur, b.load(seen)), got, again)
    b.position_at_end(again)
    # (no ``pause``: on this VM a loop of them exits to the hypervisor, ~0.8 us each)
    nxt = b.add(i, ir.Constant(_I64, 1))
    i.add_incoming(nxt, again)
    b.cbranch(b.icmp_unsigned("<", nxt, polls), spin, sleep)
    b.position_at_end(got)
    b.store(cur, seen)
    _claim_loop(b, fn, job, cur, "w")
    b.branch(top)
    b.position_at_end(sleep)
    b.atomic_rmw("add", _field(b, job, SLEEPERS), ir.Constant(_I64, 1), "seq_cst")
    low = ir.Constant(_I64, 0xFFFFFFFF)
    expected = b.and_(b.load(seen), low)
    b.cbranch(b.icmp_unsigned("==", b.and_(_load(b, job, WAKE, "seq_cst"), low), expected), wait_blk, top)
    b.position_at_end(wait_blk)
    futex(b, job, 128, expected)  # (returns at once if WAKE moved since: no lost wake-up)
    b.branch(top)
    b.position_at_end(out)
    b.ret_void()

    # spin(job, seen, polls) -> whether the ticket's call moved off ``seen`` (the worker's spin
    # loop alone: ``NativePool`` times it to turn ``SPIN_US`` into polls)
    fn, b = function("minixla_pool_spin", _I64, [_PTR, _I64, _I64])
    job, seen, polls = fn.args
    entry = b.block
    loop, again, moved, timeout = (fn.append_basic_block(n) for n in ("loop", "again", "moved", "timeout"))
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(_I64)
    i.add_incoming(ir.Constant(_I64, 0), entry)
    cur = b.lshr(_load(b, job, TICKET, "acquire"), ir.Constant(_I64, 32))
    b.cbranch(b.icmp_unsigned("!=", cur, seen), moved, again)
    b.position_at_end(again)
    nxt = b.add(i, ir.Constant(_I64, 1))
    i.add_incoming(nxt, again)
    b.cbranch(b.icmp_unsigned("<", nxt, polls), loop, timeout)
    b.position_at_end(moved)
    b.ret(ir.Constant(_I64, 1))
    b.position_at_end(timeout)
    b.ret(ir.Constant(_I64, 0))
    return module


class NativePool:
    """The compiled functions (ctypes) and ``polls_per_us``, the spin loop's calibrated rate."""

    def __init__(self):
        from minixla.backends.llvm.target import JitModule
        names = ["minixla_pool_call", "minixla_pool_stop", "minixla_pool_worker", "minixla_pool_spin"]
        self._jit = JitModule(str(_module()), names, optimize=True)  # (keeps the code alive)
        a = self._jit.addresses
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        self.call = ctypes.CFUNCTYPE(None, vp, i64, i64, i64, i64, i64)(a["minixla_pool_call"])
        self.stop = ctypes.CFUNCTYPE(None, vp)(a["minixla_pool_stop"])
        self.worker = ctypes.CFUNCTYPE(None, vp, i64, i64)(a["minixla_pool_worker"])
        spin = ctypes.CFUNCTYPE(i64, vp, i64, i64)(a["minixla_pool_spin"])
        probe, job = 20000, new_job()
        t0 = time.perf_counter()
        spin(job.ctypes.data, 0, probe)  # (the ticket stays 0: all ``probe`` polls)
        self.polls_per_us = probe / max((time.perf_counter() - t0) * 1e6, 1e-3)
