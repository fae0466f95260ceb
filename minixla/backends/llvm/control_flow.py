"""``while`` and ``conditional`` in machine code (XLA:CPU's ``WhileThunk`` / ``ConditionalThunk``,
here compiled into the program instead of interpreted by a runtime).

A ``while`` of the entry (or of any called computation) is one step of the execution plan,
emitted *inline* into the step's LLVM function as a real loop::

    copy the initial state into the state buffers (only elements not already there)
  head:
    call the condition's kernels; load its pred; branch to body or exit
  body:
    call the body's kernels; move the new state into place; branch to head
  exit:

so a loop of 10,000 trips is one foreign call, and its compile time does not depend on the trip
count. A ``conditional`` loads its ``pred``/``s32`` index and ``switch``es to one branch's kernels
(an out-of-range index runs the last branch, as XLA's).

What one iteration costs besides its kernels' work (issue 15's ``fori_loop`` of 10,000 small
updates: ~27 ns a trip before these, ~7 ns after, XLA ~6):

- The loop sets MXCSR's flush-to-zero bits once, around the whole loop; a kernel writes MXCSR
  only when they are not set yet (``kernels.enter_flush_denormals``), so inside the loop it
  does not (``ldmxcsr`` twice per kernel was a third of a small body's time).
- The small kernels of bodies, conditions and branches (``inline_in_driver``: a counter
  update, the compare, a small elementwise fusion) are defined in the calling code, without
  an MXCSR prologue, and LLVM inlines them into the loop: no call per kernel per iteration.
- The buffer pointers the loop uses are loaded from the table once, before the loop, and
  its temporaries (the state, the predicate, the body's scratch) are addressed as constant
  offsets from the arena's base (``ARENA_BASE``): LLVM's alias analysis then sees that they
  are distinct, so a small state (a counter, a carry of a few vectors) stays in registers for
  all the trips and is stored once, after the loop. (Each loaded from its own slot, they were
  pointers that might alias: stored and reloaded every trip, ~8 ns a trip instead of ~5.)
- The outermost loop is a function of its own taking one ``noalias`` pointer per allocation it
  touches (the arena, each argument, output and constant): a store into the state is then
  known not to change ``xs`` or the weights. It is emitted once, for the plan's sequence
  function and the step's thunk alike (it was compiled twice).
- A scan's ``ys[t] = y`` (a ``dynamic-update-slice`` in place) counts as the size of its update
  for ``inline_in_driver``, not of ``ys``.

Buffers (``passes/buffer_assignment.py`` gives the ``while``/``conditional`` one buffer holding
its whole tuple; ``get-tuple-element`` names an element inside it):

- The loop's **state** lives in that one buffer set for all iterations: the condition and the
  body read their parameter elements straight from it (XLA colocates the while's operand,
  the computations' parameters, the body's root and the result). An element the body passes
  through unchanged (a ``scan``'s ``xs``, closed-over weights) is read where the operand is,
  never copied. The body may update an element in place at its last use (its parameters are
  "donated" to it): a ``scan``'s ``dynamic-update-slice`` of ``ys`` writes one row per step.
- Each called computation is *flattened* (its one tuple parameter split into one parameter per
  element) and gets a buffer assignment of its own; its temporaries live in a region of the
  arena appended after the caller's (a loop body's temporaries are reused by every iteration).
- A body output computed by a kernel is written **directly into its state element** when no
  kernel of the body reads that element's old value afterwards; otherwise (``h = f(h)`` read
  by a later kernel, or elements permuted) into a scratch buffer copied into place at the end
  of the iteration -- the copies XLA's copy insertion adds, and only those.
- Branch outputs are written directly into the conditional's result elements.
"""
from __future__ import annotations

import itertools

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import kernels as K
from minixla.core.errors import UnsupportedError
from minixla.hlo.ir import HloInstruction, HloModule, Shape
from minixla.passes.buffer_assignment import TUPLE_BUFFERS, _align, _leaves, assign_buffers, tuple_offsets

CONTROL_OPCODES = {"while", "conditional"}
#: opcodes compiled as plan steps of their own rather than kernels: control flow, and the
#: collectives and ``partition-id`` of an SPMD program (``minixla/backends/spmd/steps.py``)
SPMD_OPCODES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                "partition-id"}
STEP_OPCODES = CONTROL_OPCODES | SPMD_OPCODES
#: instructions that launch no kernel in a flattened computation
_VIEWS = {"parameter", "constant", "tuple", "reshape", "bitcast", "get-tuple-element"}

_uids = itertools.count()
#: the arena's first byte: a loop addresses its temporaries from it (see ``WhileStep.emit``)
ARENA_BASE = ("temp", 0)
#: buffer kinds whose pointers a loop function takes as ``noalias`` arguments (each its own
#: allocation: the arena, an argument, an output, a constant)
_NOALIAS_KINDS = ("temp", "param", "output", "literal", "kconst", "sconst")


class ControlContext:
    """What building control steps needs from ``compile_module``: a function emitting one
    kernel, the key function of the entry, the arena (grown by each computation's region) and
    the array constants of kernels inside called computations (``("sconst", uid, j)`` keys).

    For the collectives of an SPMD program (``minixla/backends/spmd``): ``register`` turns an
    LLVM module emitted under ``kernel_cache.PLACEHOLDER`` into a compiled, declared symbol (as
    a kernel's), ``num_partitions`` is the mesh size the program is compiled for, and
    ``collectives`` lists the collective instructions in the order their steps were built
    (a step's index there names it in errors)."""

    def __init__(self, make_kernel, arena_size: int, register=None, num_partitions: int = 1,
                 make_inline_kernel=None):
        self.make_kernel = make_kernel
        self.make_inline_kernel = make_inline_kernel
        self.arena_size = _align(arena_size)
        self.constants: dict = {}
        self.register = register
        self.num_partitions = num_partitions
        self.collectives: list = []

    def __getstate__(self):
        # The plan's control steps keep their context; the compile-time callables (closures
        # over the module being compiled) are not needed to run or persist it (minixla.cache).
        state = dict(self.__dict__)
        state.update(make_kernel=None, make_inline_kernel=None, register=None)
        return state

    def reserve(self, nbytes: int) -> int:
        base = self.arena_size
        self.arena_size += _align(max(nbytes, 1))
        return base


def flatten_computation(comp):
    """``comp`` (one tuple parameter) as the entry of a new module with one parameter per
    tuple element; ``get-tuple-element`` of the parameter becomes that parameter. Called
    computations (fusions, reducers, nested loops) are shared with ``comp``'s module."""
    params = comp.parameters
    if len(params) != 1 or not params[0].shape.is_tuple:
        raise UnsupportedError(f"LLVM backend: %{comp.name} must take one tuple parameter")
    param = params[0]
    module = HloModule(comp.name)
    flat = module.new_computation(comp.name)
    module.entry = flat
    elems = []
    for k, s in enumerate(param.shape.tuple_shapes):
        if s.is_tuple:
            raise UnsupportedError(f"LLVM backend: nested tuple in the state of %{comp.name}")
        elems.append(flat.add_instruction(HloInstruction(
            "parameter", s, name=f"{param.name}.{k}", parameter_number=k)))
    mapping = {}
    for instr in comp.instructions:
        if instr is param:
            continue
        if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
            mapping[instr] = elems[instr.attrs["index"]]
            continue
        if any(o is param for o in instr.operands) and param not in mapping:
            # the whole state (a nested loop started from it): a tuple of the element parameters
            mapping[param] = flat.add_instruction(HloInstruction("tuple", param.shape, elems,
                                                                 name=f"{param.name}.t"))
        mapping[instr] = flat.add_instruction(HloInstruction(
            instr.opcode, instr.shape, [mapping[o] for o in instr.operands], instr.attrs,
            instr.called, instr.name, instr.parameter_number, instr.literal, instr.metadata))
    if comp.root is param:
        flat.root = mapping.get(param) or flat.add_instruction(
            HloInstruction("tuple", param.shape, elems, name=f"{param.name}.t"))
    else:
        flat.root = mapping[comp.root]
    return module


def element_keys(tup, keyfn) -> list:
    """The buffer keys of the elements of a tuple-valued operand."""
    if tup.opcode == "tuple":
        return [keyfn(e) for e in tup.operands]
    if tup.opcode in TUPLE_BUFFERS:
        base = keyfn(tup)
        return [("temp", base[1] + off) for off in tuple_offsets(tup.shape)]
    raise UnsupportedError(f"LLVM backend: tuple operand %{tup.name} ({tup.opcode}) is not supported")


class SubProgram:
    """A called computation, flattened, with its buffer assignment and its calls.

    ``param_keys[k]``: the caller's buffer holding element ``k`` of the parameter."""

    def __init__(self, comp, param_keys, ctx: ControlContext, writable_params: bool = False):
        from minixla.backends.llvm.executable import buffer_key
        self._buffer_key = buffer_key
        self.module = flatten_computation(comp)
        self.entry = self.module.entry
        # A loop body may overwrite a state element at its last use (an update in place, as a
        # donated argument): the state is the body's to change. Branches and conditions may not.
        donated = range(len(self.entry.parameters)) if writable_params else ()
        self.assignment = assign_buffers(self.module, donated=donated)
        self.param_keys = list(param_keys)
        self.base = ctx.reserve(self.assignment.arena_size)
        self.ctx = ctx
        self.out_keys: list = []
        root = self.entry.root
        self.roots = list(root.operands) if root.opcode == "tuple" else [root]

    def raw_key(self, instr):
        return self._buffer_key(instr, self.assignment)

    def key(self, instr):
        kind, *rest = self.raw_key(instr)
        if kind == "param":
            return self.param_keys[rest[0]]
        if kind == "temp":
            return ("temp", self.base + rest[0])
        if kind == "output":
            return self.out_keys[rest[0]]
        return (kind, *rest)

    def output_definers(self) -> dict:
        """Output buffer index -> the instruction that writes it."""
        return {sl.index: v for v, sl in self.assignment.slices.items()
                if sl.kind == "output" and v.opcode not in ("reshape", "bitcast", "get-tuple-element")}

    def last_reads(self) -> dict:
        """Parameter number -> the last schedule step reading it (the root tuple included)."""
        last = {}
        for n, instr in enumerate(self.assignment.schedule):
            for o in instr.operands:
                for leaf in _leaves(o):
                    key = self.raw_key(leaf) if leaf.opcode != "while" else None
                    if key is not None and key[0] == "param":
                        last[key[1]] = n
        return last

    def build(self, out_keys):
        """Fix where the outputs go and emit the kernels (``calls``)."""
        self.out_keys = list(out_keys)
        self.calls = []
        for instr in self.entry.instructions:
            if instr.opcode in _VIEWS or instr.shape.size == 0:
                continue
            if instr.opcode in STEP_OPCODES:
                self.calls.append(control_step(instr, self.key, self.ctx, self.entry))
                continue
            make = self.ctx.make_kernel
            if self.ctx.make_inline_kernel is not None and inline_in_driver(instr):
                make = self.ctx.make_inline_kernel
            kernel = make(instr, self.assignment.in_place.get(instr, ()))
            keys = [self.key(instr)] + [self.key(i) for i in kernel.inputs]
            uid = next(_uids)
            for j, c in enumerate(kernel.constants):
                self.ctx.constants[(uid, j)] = c
                keys.append(("sconst", uid, j))
            self.calls.append((kernel, keys))
        return self

    def keys(self):
        for c in self.calls:
            yield from (c.keys() if isinstance(c, ControlStep) else c[1])

    def emit(self, plan, b, table):
        for c in self.calls:
            if isinstance(c, ControlStep):
                c.emit(plan, b, table)
                continue
            kernel, keys = c
            args = [_load_slot(plan, b, table, key) for key in keys]
            b.call(b.module.globals[kernel.symbol], args + [T.i64(0), T.i64(kernel.units)])


#: a kernel of a loop body or branch computing at most this many elements is defined in the
#: calling code and inlined into the loop (``inline_in_driver``)
INLINE_MAX_ELEMENTS = 4096
#: ops whose kernels call library routines or are big loop nests: never inlined
_NOT_INLINED = {"dot", "convolution", "sort", "custom-call", "reduce-window", "select-and-scatter",
                "gather", "scatter", "fft", "rng", "rng-bit-generator"}


def inline_in_driver(instr) -> bool:
    """Whether the kernel of ``instr`` (in a loop body, condition or branch) is small enough to
    be inlined into the loop: a scalar counter update, a compare, a small elementwise fusion.
    A call of such a kernel (and its MXCSR read) costs as much as its work; inlined, LLVM keeps
    the loop's scalars in registers across the kernels of one iteration."""
    if instr.shape.is_tuple:
        return False
    root = instr.fused_computation.root if instr.opcode == "fusion" else instr
    # (a scan's ``ys[t] = y``, updated in place, computes only its update's elements)
    work = root.operands[1].shape.size if root.opcode == "dynamic-update-slice" else instr.shape.size
    if work > INLINE_MAX_ELEMENTS:
        return False
    ops = ([i.opcode for i in instr.fused_computation.instructions] if instr.opcode == "fusion"
           else [instr.opcode])
    return not any(op in _NOT_INLINED for op in ops) and instr.attrs.get("kind", "kLoop") in ("kLoop", "kInput")


def _param_number(instr):
    """The parameter ``instr`` is (through bitcasts), or None: not a value computed in place of one."""
    while instr.opcode in ("reshape", "bitcast"):
        instr = instr.operands[0]
    return instr.parameter_number if instr.opcode == "parameter" else None


def _load_slot(plan, b, table, key):
    """The data pointer of slot ``key``: a parameter's or output's slot holds its numpy array
    object, whose data pointer is a field of it (``executable.ARRAY_DATA_OFFSET``), as in
    ``_Plan._call``; the others hold the pointer itself."""
    from minixla.backends.llvm.executable import ARRAY_DATA_OFFSET
    loaded = getattr(plan, "loop_slot_values", None)
    if loaded is not None and key in loaded:
        return loaded[key]
    slot = b.gep(table, [T.i64(plan.slots[key])], inbounds=True, source_etype=T.PTR)
    ptr = b.load(slot, typ=T.PTR)
    if key[0] in ("param", "output") and ARRAY_DATA_OFFSET is not None:
        field = b.gep(ptr, [T.i64(ARRAY_DATA_OFFSET)], inbounds=True, source_etype=ir.IntType(8))
        ptr = b.load(field, typ=T.PTR)
    return ptr


def _entry_alloca(b):
    """``alloca(type, name)`` in the entry block of ``b``'s function (a stack slot made inside
    a loop would be made again every iteration)."""
    def alloca(ty, name):
        if b.block is b.function.entry_basic_block:  # (a second builder there would confuse b's)
            return b.alloca(ty, name=name)
        entry = ir.IRBuilder()
        entry.position_at_start(b.function.entry_basic_block)
        return entry.alloca(ty, name=name)
    return alloca


def _memcpy(plan, b, table, dst, src, nbytes):
    if nbytes == 0 or dst == src:
        return
    name = "llvm.memcpy.p0.p0.i64"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ir.VoidType(), [T.PTR, T.PTR, T.I64, T.I1]), name=name)
    b.call(fn, [_load_slot(plan, b, table, dst), _load_slot(plan, b, table, src), T.i64(nbytes),
                ir.Constant(T.I1, 0)])


class ControlStep:
    """A ``while``/``conditional`` as one step of the plan (``executable._Plan`` calls ``emit``
    where it would call a kernel). Has the fields ``LlvmExecutable.kernels()`` reports."""
    is_control = True
    units = 1
    cost_ns = 0.0
    inputs: list = []
    constants: list = []
    in_place: list = []
    symbol = ""

    def __init__(self, instr):
        self.instr = instr
        self.kind = instr.opcode
        self.opcodes = [instr.opcode]
        self.name = f"{instr.opcode}_{instr.name}".replace(".", "_").replace("-", "_")


class WhileStep(ControlStep):
    strategy = "loop"

    def __init__(self, instr, keyfn, ctx, used=None):
        super().__init__(instr)
        shapes = instr.shape.tuple_shapes
        base = keyfn(instr)
        self.result = [("temp", base[1] + off) for off in tuple_offsets(instr.shape)]
        self.state = list(self.result)
        self.sizes = [s.nbytes for s in shapes]
        self.init = element_keys(instr.operands[0], keyfn)
        cond_comp, body_comp = instr.called
        body = SubProgram(body_comp, self.state, ctx, writable_params=True)
        # An element the body passes through unchanged (consts, a scan's xs) is read in place
        # of the operand, never copied; it is copied to the result only if the caller reads it.
        self.exit_copies = []
        for k, r in enumerate(body.roots):
            if _param_number(r) == k:
                self.state[k] = self.init[k]
                if used is None or k in used:
                    self.exit_copies.append((self.result[k], self.init[k], self.sizes[k]))
        body.param_keys = self.state
        self.cond = SubProgram(cond_comp, self.state, ctx)
        self.cond.build([("temp", ctx.reserve(1))])
        self.pred = self.cond.key(self.cond.entry.root)
        definers, last = body.output_definers(), body.last_reads()
        step = {i: n for n, i in enumerate(body.assignment.schedule)}
        out_keys = []
        for k in range(len(shapes)):
            d = definers.get(k)
            if d is not None and body.roots[k] is d and last.get(k, -1) < step[d]:
                out_keys.append(self.state[k])  # written in place: nobody reads the old value after
            else:
                out_keys.append(("temp", ctx.reserve(self.sizes[k])))
        body.build(out_keys)
        self.body = body
        # The moves at the end of an iteration: old state elements that are read at another
        # position go through a scratch buffer first (phase 1), then everything not already in
        # place is copied into its state element (phase 2).
        self.phase1, self.phase2 = [], []
        for k, r in enumerate(body.roots):
            src = body.key(r)
            if src == self.state[k]:
                continue
            if src in self.state:
                scratch = ("temp", ctx.reserve(self.sizes[k]))
                self.phase1.append((scratch, src, self.sizes[k]))
                src = scratch
            self.phase2.append((self.state[k], src, self.sizes[k]))

    def __getstate__(self):  # (the loop's LLVM function is only needed while emitting)
        state = dict(self.__dict__)
        state.pop("_loop_fn", None)
        return state

    def keys(self):
        yield ARENA_BASE
        yield from self.state
        yield from self.init
        for dst, src, _ in self.exit_copies:
            yield dst
            yield src
        yield from self.cond.keys()
        yield self.pred
        yield from self.body.keys()
        for dst, src, _ in self.phase1 + self.phase2:
            yield dst
            yield src

    def emit(self, plan, b, table):
        if getattr(plan, "loop_slot_values", None) is not None:  # a loop nested in another one
            self._emit_loop(plan, b, table)
            return
        # The outermost loop is a function of its own, called with one ``noalias`` pointer per
        # distinct allocation it touches: the arena (every temporary is a constant offset from
        # it), each argument's and output's array, each constant. LLVM then knows that a
        # store into the state does not change what the body reads from ``xs`` or the
        # weights, and keeps a small state in registers across the trips. (The allocations
        # are distinct; two arguments may be one array, but only read: an argument the
        # program writes, a donated one, is copied when it shares memory with another.)
        # Emitted once, for the plan's sequence function and the thunk alike.
        fn = getattr(self, "_loop_fn", None)
        if fn is None or fn.module is not b.module:
            fn = self._loop_fn = self._loop_function(plan, b.module)
        bases = [_load_slot(plan, b, table, base) for base in self._bases]
        b.call(fn, [table] + bases)

    def _loop_function(self, plan, module):
        keys = list(dict.fromkeys(self.keys()))
        self._bases = list(dict.fromkeys(ARENA_BASE if k[0] == "temp" else k for k in keys
                                         if k[0] in _NOALIAS_KINDS))
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * (1 + len(self._bases))),
                         name=f"minixla.{self.name}.{next(_uids)}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        for arg in fn.args[1:]:
            arg.add_attribute("noalias")
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        loaded = dict(zip(self._bases, fn.args[1:]))
        for k in keys:
            if k[0] == "temp" and k != ARENA_BASE:
                loaded[k] = fb.gep(loaded[ARENA_BASE], [T.i64(k[1])], inbounds=True, source_etype=ir.IntType(8))
        plan.loop_slot_values = loaded
        try:
            self._emit_loop(plan, fb, fn.args[0])
        finally:
            plan.loop_slot_values = None
        fb.ret_void()
        return fn

    def _emit_loop(self, plan, b, table):
        # FTZ/DAZ once around the loop: the kernels called every iteration then find them set
        # and leave MXCSR alone (``kernels.enter_flush_denormals``)
        fp_mode = K.enter_flush_denormals(b, _entry_alloca(b)) if K.FLUSH_DENORMALS else None
        # Every buffer pointer the loop uses, loaded from the table once, before it: LLVM cannot
        # hoist those loads itself (a store of the body might alias the table), and with them
        # in registers it forwards the predicate and the counter between the inlined kernels.
        outer = getattr(plan, "loop_slot_values", None)
        loaded = dict(outer or {})
        base = loaded.get(ARENA_BASE) or _load_slot(plan, b, table, ARENA_BASE)
        loaded[ARENA_BASE] = base
        for key in dict.fromkeys(self.keys()):
            if key not in loaded:
                if key[0] == "temp":
                    loaded[key] = b.gep(base, [T.i64(key[1])], inbounds=True, source_etype=ir.IntType(8))
                else:
                    loaded[key] = _load_slot(plan, b, table, key)
        plan.loop_slot_values = loaded
        for dst, src, n in zip(self.state, self.init, self.sizes):
            _memcpy(plan, b, table, dst, src, n)
        fn = b.function
        head, body, done = (fn.append_basic_block(f"{self.name}.{s}") for s in ("head", "body", "exit"))
        b.branch(head)
        b.position_at_end(head)
        self.cond.emit(plan, b, table)
        flag = b.load(_load_slot(plan, b, table, self.pred), typ=T.I8)
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(T.I8, 0)), body, done)
        b.position_at_end(body)
        self.body.emit(plan, b, table)
        for dst, src, n in self.phase1 + self.phase2:
            _memcpy(plan, b, table, dst, src, n)
        b.branch(head)
        b.position_at_end(done)
        for dst, src, n in self.exit_copies:
            _memcpy(plan, b, table, dst, src, n)
        plan.loop_slot_values = outer
        if fp_mode is not None:
            K.exit_flush_denormals(b, fp_mode)


class ConditionalStep(ControlStep):
    strategy = "branch"

    def __init__(self, instr, keyfn, ctx):
        super().__init__(instr)
        base = keyfn(instr)
        self.results = [("temp", base[1] + off) for off in tuple_offsets(instr.shape)]
        self.sizes = [s.nbytes for s in instr.shape.tuple_shapes]
        self.index = keyfn(instr.operands[0])
        self.is_pred = instr.operands[0].shape.dtype == np.bool_
        self.branches, self.copies = [], []
        for comp, op in zip(instr.called, instr.operands[1:]):
            sub = SubProgram(comp, element_keys(op, keyfn), ctx).build(self.results)
            copies = [(dst, sub.key(r), n) for dst, r, n in zip(self.results, sub.roots, self.sizes)
                      if sub.key(r) != dst]
            self.branches.append(sub)
            self.copies.append(copies)

    def keys(self):
        yield from self.results
        yield self.index
        for sub, copies in zip(self.branches, self.copies):
            yield from sub.keys()
            for dst, src, _ in copies:
                yield dst
                yield src

    def emit(self, plan, b, table):
        fp_mode = K.enter_flush_denormals(b, _entry_alloca(b)) if K.FLUSH_DENORMALS else None
        fn = b.function
        blocks = [fn.append_basic_block(f"{self.name}.b{k}") for k in range(len(self.branches))]
        done = fn.append_basic_block(f"{self.name}.exit")
        ptr = _load_slot(plan, b, table, self.index)
        if self.is_pred:  # true_computation, false_computation
            flag = b.load(ptr, typ=T.I8)
            b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(T.I8, 0)), blocks[0], blocks[1])
        else:  # s32: out-of-range indices take the default, the last branch
            idx = b.load(ptr, typ=T.I32)
            sw = b.switch(idx, blocks[-1])
            for k in range(len(blocks) - 1):
                sw.add_case(ir.Constant(T.I32, k), blocks[k])
        for block, sub, copies in zip(blocks, self.branches, self.copies):
            b.position_at_end(block)
            sub.emit(plan, b, table)
            for dst, src, n in copies:
                _memcpy(plan, b, table, dst, src, n)
            b.branch(done)
        b.position_at_end(done)
        if fp_mode is not None:
            K.exit_flush_denormals(b, fp_mode)


def control_step(instr, keyfn, ctx, comp=None) -> ControlStep:
    """The plan step of a ``while``, ``conditional``, collective or ``partition-id`` of
    computation ``comp`` whose own buffer is ``keyfn(instr)``."""
    if instr.opcode in SPMD_OPCODES:
        from minixla.backends.spmd.steps import spmd_step
        return spmd_step(instr, keyfn, ctx)
    key = keyfn(instr)
    if key[0] != "temp":
        raise UnsupportedError(f"LLVM backend: %{instr.name} must have a temporary buffer, got {key}")
    if instr.opcode == "while":
        used = None if comp is None else {
            u.attrs["index"] for u in comp.instructions if u.opcode == "get-tuple-element" and u.operands[0] is instr}
        return WhileStep(instr, keyfn, ctx, used)
    return ConditionalStep(instr, keyfn, ctx)


__all__ = ["CONTROL_OPCODES", "STEP_OPCODES", "ControlContext", "control_step", "flatten_computation", "Shape"]
