"""Collectives and ``partition-id`` in generated code: plan steps of the LLVM backend
(XLA:CPU's ``AllReduceThunk``, ``AllGatherThunk``, ... and the in-process "collectives"
implementation its CPU client uses for several host devices).

A per-device SPMD program is compiled **once**; every virtual device runs the same machine
code on its own thread with its own pointer table and arena (``virtual_mesh.py``). The devices
meet in one shared **mesh** struct, an array of 64-bit words::

    word 0            arrival counter of the barrier
    word 8            barrier generation (bumped when the last device arrives)
    word 16           abort flag: non-zero releases every waiting device (error or timeout)
    word 24 + 4*d     device d's record: [input pointer, output pointer, barrier tag, spare]

A collective is one call from the step function into a function of its own (compiled and
optimized like a kernel, ``kernel_cache``-d by its text)::

    i32 collective(ptr mesh, i64 device, ptr in, ptr out, i64 tag)

1. publish ``in`` and ``out`` in the device's record;
2. **barrier** (every input is computed and published);
3. move this device's part of the data, reading and writing the other devices' buffers
   through their published pointers (pure loads, stores and ``memcpy``: no NumPy);
4. **barrier** (every transfer is done: the buffers may be reused by the next kernels).

The barrier is a generation barrier on LLVM atomics (``atomicrmw add`` on the counter,
``seq_cst`` loads of the generation), yielding the core (``sched_yield``) while it waits, so 8
virtual devices also run on 2 cores. It returns 1 instead of waiting forever when the abort
flag is set; the step then returns from the step function at once (from inside a loop too),
and the device's runtime reports which barrier it was waiting at (``tag``). The barrier spans
all devices of the mesh, also for a collective over smaller groups: every device runs every
collective of the program, so this only synchronizes more than needed.

What each device moves (``g`` = group size, ``k`` = the device's position in its group,
``M(m)`` = the group's ``m``-th device):

- ``all-reduce``: elements ``[k*E/g, (k+1)*E/g)`` of the result, reduced in group order
  ``((x_M0 op x_M1) op x_M2) ...`` into its own output, then copied into the other members'
  outputs -- each element is reduced once, so all members get identical bits;
- ``all-gather``: ``memcpy`` of every member's operand into its slot of its own output;
- ``reduce-scatter``: its slice ``k`` along ``dimensions``, reduced over the group in order;
- ``all-to-all``: chunk ``k`` of every member's operand into slot ``m`` of its own output;
- ``collective-permute``: a copy of its source's operand, or zeros if nothing is sent to it.

With one partition the mesh is never touched (each collective is a group of one: a copy).
The buffer assignment never places a collective's output over its operand (they are not
elementwise), which step 3 relies on.
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.control_flow import ControlStep, _load_slot
from minixla.backends.llvm.elemental import emit_reducer
from minixla.backends.llvm.kernel_cache import PLACEHOLDER
from minixla.backends.llvm.loops import for_loop, if_then
from minixla.core.errors import UnsupportedError

#: table keys holding the mesh struct's address and the device number (set per device)
MESH_KEY = ("mesh",)
DEVICE_KEY = ("device",)

COUNT, GENERATION, ABORT = 0, 8, 16
RECORDS, RECORD_WORDS = 24, 4
IN, OUT, TAG = 0, 1, 2


def mesh_words(num_partitions: int) -> int:
    """Length of the mesh struct (64-bit words) for ``num_partitions`` devices."""
    return RECORDS + RECORD_WORDS * num_partitions


#: ``sched_yield`` under a name of our own, registered with LLVM's JIT linker
_YIELD = "minixla_sched_yield"


def _register_yield():
    libc = ctypes.CDLL(None)
    llvm.add_symbol(_YIELD, ctypes.cast(libc.sched_yield, ctypes.c_void_p).value)


_register_yield()


def replica_groups(instr, num_partitions: int) -> tuple:
    """The groups of ``instr`` (``{}`` means all devices), checked to partition the mesh."""
    groups = tuple(tuple(g) for g in instr.attrs.get("replica_groups", ()))
    if not groups or groups == ((),):
        return (tuple(range(num_partitions)),)
    if len({len(g) for g in groups}) != 1:
        raise ValueError(f"{instr.opcode} %{instr.name}: replica_groups={_fmt(groups)} must all have the "
                         "same size")
    flat = sorted(d for g in groups for d in g)
    if flat != list(range(num_partitions)):
        raise ValueError(f"{instr.opcode} %{instr.name}: replica_groups={_fmt(groups)} must list every "
                         f"partition 0..{num_partitions - 1} exactly once (the program runs on "
                         f"{num_partitions} partitions)")
    return groups


def _store_atomic(b: ir.IRBuilder, value, ptr, ordering: str):
    # (llvmlite 0.50's ``IRBuilder.store_atomic`` still checks a typed pointer's pointee)
    from llvmlite.ir import instructions
    b._insert(instructions.StoreAtomicInstr(b.block, value, ptr, ordering, 8))


def _fmt(groups) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def _permute_sources(instr, num_partitions: int) -> list:
    """Device -> the device sending to it, or -1 (it receives zeros)."""
    source = [-1] * num_partitions
    for s, t in instr.attrs["source_target_pairs"]:
        if not (0 <= s < num_partitions and 0 <= t < num_partitions):
            raise ValueError(f"collective-permute %{instr.name}: pair {{{s},{t}}} names a partition "
                             f"outside 0..{num_partitions - 1}")
        if source[t] != -1:
            raise ValueError(f"collective-permute %{instr.name}: partition {t} receives from both "
                             f"{source[t]} and {s}")
        source[t] = s
    return source


class _Emitter:
    """Builds the collective's function in a module of its own."""

    def __init__(self, instr, num_partitions: int):
        self.instr, self.n = instr, num_partitions
        self.module = ir.Module(name=PLACEHOLDER)
        fnty = ir.FunctionType(T.I32, [T.PTR, T.I64, T.PTR, T.PTR, T.I64])
        self.fn = ir.Function(self.module, fnty, name=PLACEHOLDER)
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("noinline")
        self.mesh, self.dev, self.inp, self.out, self.tag = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.dtype = np.dtype(instr.shape.dtype)
        self.itemsize = self.dtype.itemsize

    # -- the mesh struct ---------------------------------------------------------------------
    def word(self, index):
        index = T.i64(index) if isinstance(index, int) else index
        return self.b.gep(self.mesh, [index], inbounds=True, source_etype=T.I64)

    def record(self, device, field):
        b = self.b
        at = b.add(b.mul(device, T.i64(RECORD_WORDS)), T.i64(RECORDS + field))
        return self.word(at)

    def peer(self, device, field):
        """The input/output pointer device ``device`` published."""
        return self.b.load(self.record(device, field), typ=T.PTR)

    def table(self, name, values):
        """A constant ``i64`` array global; returns a loader ``index -> value``."""
        ty = ir.ArrayType(T.I64, len(values))
        g = ir.GlobalVariable(self.module, ty, name=f"{PLACEHOLDER}.{name}")
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(ty, [int(v) for v in values])

        def load(i):
            p = self.b.gep(g, [T.i64(0), i], inbounds=True, source_etype=ty)
            return self.b.load(p, typ=T.I64)
        return load

    def barrier_function(self):
        """``i32 barrier(ptr mesh, i64 device, i64 tag)``: 0 when all devices arrived, 1 if aborted."""
        fn = ir.Function(self.module, ir.FunctionType(T.I32, [T.PTR, T.I64, T.I64]),
                         name=f"{PLACEHOLDER}.barrier")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        mesh, dev, tag = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        word = lambda i: b.gep(mesh, [T.i64(i)], inbounds=True, source_etype=T.I64)  # noqa: E731
        rec = b.gep(mesh, [b.add(b.mul(dev, T.i64(RECORD_WORDS)), T.i64(RECORDS + TAG))],
                    inbounds=True, source_etype=T.I64)
        _store_atomic(b, tag, rec, "monotonic")  # where this device waits (for the error message)
        gen = b.load_atomic(word(GENERATION), "seq_cst", 8, typ=T.I64)
        ok, fail = fn.append_basic_block("ok"), fn.append_basic_block("aborted")
        arrive = fn.append_basic_block("arrive")
        aborted = b.load_atomic(word(ABORT), "seq_cst", 8, typ=T.I64)
        b.cbranch(b.icmp_unsigned("!=", aborted, T.i64(0)), fail, arrive)
        b.position_at_end(arrive)
        before = b.atomic_rmw("add", word(COUNT), T.i64(1), "seq_cst")
        last, wait = fn.append_basic_block("last"), fn.append_basic_block("wait")
        b.cbranch(b.icmp_unsigned("==", before, T.i64(self.n - 1)), last, wait)
        b.position_at_end(last)  # the last to arrive resets the counter, then releases the others
        _store_atomic(b, T.i64(0), word(COUNT), "seq_cst")
        b.atomic_rmw("add", word(GENERATION), T.i64(1), "seq_cst")
        b.branch(ok)
        b.position_at_end(wait)
        now = b.load_atomic(word(GENERATION), "seq_cst", 8, typ=T.I64)
        spin = fn.append_basic_block("spin")
        b.cbranch(b.icmp_unsigned("!=", now, gen), ok, spin)
        b.position_at_end(spin)
        aborted = b.load_atomic(word(ABORT), "seq_cst", 8, typ=T.I64)
        yield_ = fn.append_basic_block("yield")
        b.cbranch(b.icmp_unsigned("!=", aborted, T.i64(0)), fail, yield_)
        b.position_at_end(yield_)
        sched = ir.Function(self.module, ir.FunctionType(T.I32, []), name=_YIELD)
        b.call(sched, [])
        b.branch(wait)
        b.position_at_end(ok)
        b.ret(ir.Constant(T.I32, 0))
        b.position_at_end(fail)
        b.ret(ir.Constant(T.I32, 1))
        return fn

    def barrier(self, barrier_fn, phase: int):
        b = self.b
        tag = b.add(b.mul(self.tag, T.i64(2)), T.i64(phase + 1))
        status = b.call(barrier_fn, [self.mesh, self.dev, tag])
        fail, cont = self.fn.append_basic_block(f"fail{phase}"), self.fn.append_basic_block(f"cont{phase}")
        b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(T.I32, 0)), fail, cont)
        b.position_at_end(fail)
        b.ret(ir.Constant(T.I32, 1))
        b.position_at_end(cont)

    # -- data movement -----------------------------------------------------------------------
    def memcpy(self, dst, src, nbytes):
        name = "llvm.memcpy.p0.p0.i64"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(ir.VoidType(), [T.PTR, T.PTR, T.I64, T.I1]), name=name)
        self.b.call(fn, [dst, src, nbytes, ir.Constant(T.I1, 0)])

    def memset0(self, dst, nbytes):
        name = "llvm.memset.p0.i64"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(ir.VoidType(), [T.PTR, T.I8, T.I64, T.I1]), name=name)
        self.b.call(fn, [dst, ir.Constant(T.I8, 0), nbytes, ir.Constant(T.I1, 0)])

    def byte_ptr(self, base, byte_offset):
        return self.b.gep(base, [byte_offset], inbounds=True, source_etype=T.I8)

    def reduce_into(self, dst, srcs_at, count, dst_at, reducer):
        """``dst[dst_at(i)] = reduce_m srcs_at(m)(i)`` for ``i < count``, in member order."""
        b, dt = self.b, self.dtype
        g = len(self.groups[0])
        first_ptr, first_at = srcs_at(T.i64(0))
        with for_loop(b, 0, count, "i") as i:
            T.store_element(b, T.load_element(b, first_ptr, dt, first_at(i)), dst, dt, dst_at(i))
        with for_loop(b, 1, g, "m") as m:
            ptr, at = srcs_at(m)
            with for_loop(b, 0, count, "j") as j:
                acc = T.load_element(b, dst, dt, dst_at(j))
                x = T.load_element(b, ptr, dt, at(j))
                T.store_element(b, emit_reducer(b, reducer, acc, x, reassoc=False), dst, dt, dst_at(j))

    def emit(self) -> ir.Module:
        instr, b = self.instr, self.b
        op = instr.opcode
        single = self.n == 1
        if op == "collective-permute":
            sources = _permute_sources(instr, self.n)
            self.groups = ((0,),)
        else:
            self.groups = replica_groups(instr, self.n)
        g = len(self.groups[0])
        if not single:
            for field, ptr in ((IN, self.inp), (OUT, self.out)):
                b.store(b.ptrtoint(ptr, T.I64), self.record(self.dev, field))
            barrier_fn = self.barrier_function()
            self.barrier(barrier_fn, 0)
        members = [0] * (self.n * g)
        position = [0] * self.n
        for grp in self.groups:
            for k, d in enumerate(grp):
                position[d] = k
                members[d * g:(d + 1) * g] = grp
        member_of = self.table("members", members)
        k = self.table("position", position)(self.dev)
        if single:
            member = lambda m: self.dev  # noqa: E731
            in_of = lambda d: self.inp  # noqa: E731
            out_of = lambda d: self.out  # noqa: E731
        else:
            member = lambda m: member_of(b.add(b.mul(self.dev, T.i64(g)), m))  # noqa: E731
            in_of = lambda d: self.peer(d, IN)  # noqa: E731
            out_of = lambda d: self.peer(d, OUT)  # noqa: E731
        operand = instr.operands[0].shape
        size = operand.size
        dim = instr.attrs.get("dimensions", (0,))[0] if operand.rank else 0
        outer = int(np.prod(operand.dims[:dim], dtype=np.int64))
        isz = self.itemsize

        if op == "all-reduce":
            lo = b.udiv(b.mul(k, T.i64(size)), T.i64(g))
            hi = b.udiv(b.mul(b.add(k, T.i64(1)), T.i64(size)), T.i64(g))
            count = b.sub(hi, lo)
            self.reduce_into(self.out, lambda m: (in_of(member(m)), lambda i: b.add(lo, i)), count,
                             lambda i: b.add(lo, i), instr.called[0])
            if not single:
                mine = self.byte_ptr(self.out, b.mul(lo, T.i64(isz)))
                with for_loop(b, 0, g, "c") as m:
                    d = member(m)
                    with if_then(b, b.icmp_unsigned("!=", d, self.dev)):
                        self.memcpy(self.byte_ptr(out_of(d), b.mul(lo, T.i64(isz))), mine,
                                    b.mul(count, T.i64(isz)))
        elif op == "all-gather":
            inner = size // max(outer, 1) * isz
            with for_loop(b, 0, g, "m") as m:
                src = in_of(member(m))
                with for_loop(b, 0, outer, "o") as o:
                    dst_at = b.mul(b.add(b.mul(o, T.i64(g)), m), T.i64(inner))
                    self.memcpy(self.byte_ptr(self.out, dst_at), self.byte_ptr(src, b.mul(o, T.i64(inner))),
                                T.i64(inner))
        elif op == "reduce-scatter":
            c = size // max(outer, 1) // g  # elements of one slice of one outer row
            total = outer * c

            def src_at(m):
                ptr = in_of(member(m))

                def at(i):  # i = o*c + r -> (o*g + k)*c + r
                    o, r = b.udiv(i, T.i64(c)), b.urem(i, T.i64(c))
                    return b.add(b.mul(b.add(b.mul(o, T.i64(g)), k), T.i64(c)), r)
                return ptr, at
            self.reduce_into(self.out, src_at, T.i64(total), lambda i: i, instr.called[0])
        elif op == "all-to-all":
            chunk = size // max(outer, 1) // g * isz
            with for_loop(b, 0, g, "m") as m:
                src = in_of(member(m))
                with for_loop(b, 0, outer, "o") as o:
                    row = b.mul(o, T.i64(g))
                    dst_at = b.mul(b.add(row, m), T.i64(chunk))
                    src_at = b.mul(b.add(row, k), T.i64(chunk))
                    self.memcpy(self.byte_ptr(self.out, dst_at), self.byte_ptr(src, src_at), T.i64(chunk))
        elif op == "collective-permute":
            src = self.table("source", sources)(self.dev)
            nbytes = T.i64(size * isz)
            has = b.icmp_signed(">=", src, T.i64(0))
            with b.if_else(has) as (then, otherwise):
                with then:
                    self.memcpy(self.out, self.inp if single else in_of(src), nbytes)
                with otherwise:
                    self.memset0(self.out, nbytes)
        else:  # pragma: no cover - spmd_step dispatches only the collectives above
            raise AssertionError(op)
        if not single:
            self.barrier(barrier_fn, 1)
        b.ret(ir.Constant(T.I32, 0))
        return self.module


class CollectiveStep(ControlStep):
    """A collective as one step of the plan: a call of its function (see the module docstring),
    returning from the step function if the mesh was aborted."""
    strategy = "collective"

    def __init__(self, instr, keyfn, ctx):
        super().__init__(instr)
        if instr.shape.is_tuple or len(instr.operands) != 1:
            raise UnsupportedError(f"LLVM backend: {instr.opcode} %{instr.name} with several operands "
                                   "(a tuple-shaped collective) is not supported")
        T.check_dtype(instr.shape.dtype, instr.opcode)
        if ctx.register is None:  # pragma: no cover - compile_module always passes it
            raise UnsupportedError(f"LLVM backend: {instr.opcode} needs compile_module's kernel registry")
        self.out = keyfn(instr)
        self.inp = keyfn(instr.operands[0])
        self.index = len(ctx.collectives)
        ctx.collectives.append(instr)
        self.symbol = ctx.register(_Emitter(instr, ctx.num_partitions).emit())
        self.single = ctx.num_partitions == 1

    def keys(self):
        yield self.out
        yield self.inp
        yield MESH_KEY
        yield DEVICE_KEY

    def emit(self, plan, b, table):
        mesh = _load_slot(plan, b, table, MESH_KEY)
        dev = b.ptrtoint(_load_slot(plan, b, table, DEVICE_KEY), T.I64)
        args = [mesh, dev, _load_slot(plan, b, table, self.inp), _load_slot(plan, b, table, self.out),
                T.i64(self.index)]
        status = b.call(b.module.globals[self.symbol], args)
        fn = b.function
        fail = fn.append_basic_block(f"{self.name}.aborted")
        cont = fn.append_basic_block(f"{self.name}.done")
        b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(T.I32, 0)), fail, cont)
        b.position_at_end(fail)
        b.ret_void()  # the mesh was aborted: the runtime reports why
        b.position_at_end(cont)


class PartitionIdStep(ControlStep):
    """``partition-id``: the device number of the table (0 outside a mesh), as ``u32``."""
    strategy = "partition-id"

    def __init__(self, instr, keyfn, ctx):
        super().__init__(instr)
        self.out = keyfn(instr)

    def keys(self):
        yield self.out
        yield DEVICE_KEY

    def emit(self, plan, b, table):
        dev = b.ptrtoint(_load_slot(plan, b, table, DEVICE_KEY), T.I64)
        b.store(b.trunc(dev, T.I32), _load_slot(plan, b, table, self.out))


def spmd_step(instr, keyfn, ctx) -> ControlStep:
    """The plan step of a collective or ``partition-id`` (``control_flow.control_step``)."""
    if instr.opcode == "partition-id":
        return PartitionIdStep(instr, keyfn, ctx)
    return CollectiveStep(instr, keyfn, ctx)
