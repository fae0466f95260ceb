"""Compile an HloModule to machine code and run it (XLA:CPU's ``CpuExecutable``).

``compile_module`` emits one kernel per entry instruction (in program order), each into an
LLVM module of its own named after a hash of its text, plus the code that calls them; of the
kernels not in the process-wide kernel cache (``kernel_cache.py``), each starts compiling in
a compile worker as soon as it is emitted (small ones bundled, ``compile_server.py``) while
the parent turns the calling code into machine code (without a ready worker, the kernels are
linked into that code, which is optimized and compiled once); one engine loads all the object
code. It then prepares everything a call needs, so
that a cached call does little Python work:

* a **buffer table**: one pointer-sized slot per distinct buffer (parameters, outputs,
  temporaries in the preallocated arena, constants). The arena and constant slots are filled
  once; a call only writes the parameter and output slots.
* an **execution plan** of steps. Consecutive small kernels form one *sequence* function
  ``void seqN(ptr table)`` that loads each kernel's pointers from the table and calls the
  kernels in order -- one ctypes call for all of them. A big kernel (estimated to run long
  enough to amortize waking a thread) is one *parallel* step: a thunk
  ``void kN.thunk(ptr table, i64 lo, i64 hi)`` that the thread pool calls on disjoint ranges
  of the kernel's units (``runtime.py``).

A program of small kernels therefore costs one foreign call; with ``MINIXLA_NUM_THREADS=1``
every program does. A result that lives in the arena (an element of a loop's state) is copied
into its fresh output array by a ``memcpy`` at the end of the last step (``_CopyOut``), not by
numpy after the call.

Not emitted as kernels: ``parameter`` and ``constant`` (their buffers are the caller's arrays
and the literals), ``tuple`` (it owns no data) and ``reshape``/``bitcast`` (a row-major
reshape is a bitcast: it aliases its operand's buffer).
"""
from __future__ import annotations

import ctypes
import re
import statistics
import threading
import time

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import compile_server, kernel_cache
from minixla.backends.llvm.control_flow import STEP_OPCODES, ControlContext, ControlStep, control_step
from minixla.backends.llvm.kernels import DENORMAL_ATTRIBUTE, FLUSH_DENORMALS, emit_kernel
from minixla.backends.llvm.loops import with_loop_ids
from minixla.backends.llvm.runtime import thread_pool
from minixla.backends.llvm.target import JitModule, optimized_assembly
from minixla.core.errors import UnsupportedError

_NO_KERNEL = {"parameter", "constant", "tuple", "reshape", "bitcast", "get-tuple-element"}
_ALIASES = {"reshape", "bitcast"}
_ARENA_ALIGN = 64
#: a kernel estimated to run at least this long (ns, one core) is split over the threads;
#: below it, waking a Python worker thread (~10 us on an idle core, far more on a busy one)
#: would not pay off.
PARALLEL_MIN_NS = 100_000
#: up to this many parameter (or output) slots, a call writes them one at a time
_FEW_SLOTS = 8


def _find_data_offset():
    """Where a numpy array object keeps its data pointer (``PyArrayObject.data``, right after
    the object header: 16 bytes on CPython), checked on a few arrays; None if not found.

    A call writes each argument's and output's *object address* (``id``, ~50 ns) into the
    pointer table and the generated code loads the data pointer from the object, because
    asking numpy for it (``a.ctypes.data``, ``__array_interface__``) costs ~1 us an array:
    most of a cached call of a small program. The caller keeps the arrays alive during the
    call. Without a verified offset the table holds data pointers as before."""
    probes = [np.zeros(3, np.float32), np.ones((4, 6), np.int8)[1:, 2:], np.arange(5.0)[::2]]
    for offset in (16, 24, 32):
        try:
            if all(ctypes.c_void_p.from_address(id(a) + offset).value == a.ctypes.data for a in probes):
                return offset
        except (ValueError, OverflowError):  # pragma: no cover
            break
    return None  # pragma: no cover - an interpreter with another object layout


#: offset of the data pointer in a numpy array object, or None (see ``_find_data_offset``);
#: part of the generated code, so of the persistent cache's key
ARRAY_DATA_OFFSET = _find_data_offset()
_address_of = id if ARRAY_DATA_OFFSET is not None else (lambda a: a.ctypes.data)


def _source(instr):
    """The instruction whose buffer ``instr`` uses (looks through reshapes/bitcasts)."""
    while instr.opcode in _ALIASES:
        instr = instr.operands[0]
    return instr


def _kernel_name(n: int, instr) -> str:
    return f"k{n}_" + re.sub(r"[^A-Za-z0-9_]", "_", instr.name or instr.opcode)


def buffer_key(instr, assignment):
    """Where the buffer of ``instr`` lives: ``("param", k)``, ``("output", k)``,
    ``("temp", offset)`` (in the arena), ``("output_at", k, offset)`` (a temporary in output
    ``k``'s bytes, before that output is written: ``buffer_assignment`` rule 5) or
    ``("literal", constant instr)``."""
    src = _source(instr)
    if src.opcode == "parameter":
        return ("param", src.parameter_number)
    if src.opcode == "constant":
        return ("literal", src)
    sl = assignment.slices[src]
    if sl.kind == "output":
        return ("output", sl.index)
    if sl.kind == "parameter":  # computed in place of a donated parameter
        return ("param", sl.index)
    if sl.kind == "temp" and sl.index >= 0:  # in an output's bytes before it is written
        return ("output_at", sl.index, sl.offset)
    if sl.kind == "temp":
        if sl.offset < 0 or sl.offset + src.shape.nbytes > assignment.arena_size:
            raise ValueError(f"buffer of '{src.name}' lies outside the arena")
        return ("temp", sl.offset)
    raise ValueError(f"unexpected buffer kind '{sl.kind}' for '{src.name}'")


class _Plan:
    """Kernel argument keys, table slots and execution steps (built before JIT compilation)."""

    def __init__(self, kernels, assignment, threads: int, sub_constants=None):
        self.kernels = [k for k in kernels if k.instr.shape.size != 0]  # nothing to compute
        self.slots: dict = {}
        self.arg_keys = []
        self.sub_constants = sub_constants or {}  # (control_flow.py) kernels inside loops/branches
        for n, k in enumerate(self.kernels):
            if getattr(k, "is_control", False):  # a while/conditional: its kernels' buffers
                for key in k.keys():
                    self.slots.setdefault(key, len(self.slots))
                self.arg_keys.append([])
                continue
            out = buffer_key(k.instr, assignment)
            if out[0] == "param" and out[1] not in getattr(assignment, "donated", ()):
                raise ValueError(f"kernel '{k.name}' would write into a parameter or constant")
            keys = [out] + [buffer_key(i, assignment) for i in k.inputs]
            _check_no_alias(k, keys)
            keys += [("kconst", n, j) for j in range(len(k.constants))]
            for key in keys:
                self.slots.setdefault(_slot_key(key), len(self.slots))
            self.arg_keys.append(keys)
        # Steps: ("seq", [kernel numbers]) or ("par", kernel number).
        self.steps = []
        for n, k in enumerate(self.kernels):
            if threads > 1 and k.units >= 2 and k.cost_ns >= PARALLEL_MIN_NS:
                self.steps.append(("par", n))
            elif self.steps and self.steps[-1][0] == "seq":
                self.steps[-1][1].append(n)
            else:
                self.steps.append(("seq", [n]))

    def emit(self, module: ir.Module):
        """The sequence functions and one thunk per kernel (for the parallel steps and for
        ``LlvmExecutable.profile``); returns the step list with function names."""
        thunks = []
        for n, k in enumerate(self.kernels):
            fn = self._function(module, f"{k.name}.thunk", [T.PTR, T.I64, T.I64])
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            self._call(b, n, *fn.args)
            b.ret_void()
            thunks.append(fn.name)
        named = []
        for s, (how, what) in enumerate(self.steps):
            if how == "seq":
                fn = self._function(module, f"minixla.seq{s}", [T.PTR])
                b = ir.IRBuilder(fn.append_basic_block("entry"))
                for n in what:
                    self._call(b, n, fn.args[0], T.i64(0), T.i64(self.kernels[n].units))
                b.ret_void()
                named.append((how, fn.name, what))
            else:
                named.append((how, thunks[what], what))
        return named, thunks

    @staticmethod
    def _function(module, name, arg_types):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name=name)
        fn.attributes.add("nounwind")
        return fn

    def _call(self, b, n, table, lo, hi):
        k = self.kernels[n]
        if getattr(k, "is_control", False):
            k.emit(self, b, table)  # the loop or branch, inline (backends/llvm/control_flow.py)
            return
        args = []
        for key in self.arg_keys[n]:
            slot = b.gep(table, [T.i64(self.slots[_slot_key(key)])], inbounds=True, source_etype=T.PTR)
            ptr = b.load(slot, typ=T.PTR)
            if key[0] in ("param", "output", "output_at") and ARRAY_DATA_OFFSET is not None:
                # the slot holds the numpy array object: its data pointer is a field of it
                field = b.gep(ptr, [T.i64(ARRAY_DATA_OFFSET)], inbounds=True, source_etype=ir.IntType(8))
                ptr = b.load(field, typ=T.PTR)
            if key[0] == "output_at" and key[2]:
                ptr = b.gep(ptr, [T.i64(key[2])], inbounds=True, source_etype=ir.IntType(8))
            args.append(ptr)
        b.call(b.module.globals[k.symbol], args + [lo, hi])


class LlvmExecutable:
    """A compiled HloModule. ``exe(*arrays)`` -> list of numpy outputs (one per root value).

    Thread-safe: a call's mutable state -- the arena of temporaries and the pointer table --
    is an *execution context*. Contexts are kept in a free list: a call takes one (or makes
    a new one when several threads call at once) and gives it back, so sequential calls
    always reuse the same preallocated memory and concurrent calls never share it.
    """

    def __init__(self, module, assignment, kernels, jit: JitModule, plan: _Plan, steps, pool):
        self.module = module
        self.assignment = assignment
        self._kernels = kernels
        self._jit = jit
        self._pool = pool
        entry = module.entry
        self._params = entry.parameters
        root = entry.root
        self._roots = list(root.operands) if root.opcode == "tuple" else [root]
        self._arena = self._aligned_arena(int(assignment.arena_size))
        self._literals = {}  # constant instr -> contiguous numpy array (kept alive here)
        self._compile_ms = 0.0
        self._param_specs = [(p.shape.dtype, tuple(p.shape.dims)) for p in self._params]

        # Fresh outputs: one per output index that some buffer is assigned to.
        self._out_specs = {}
        for instr, sl in assignment.slices.items():
            if sl.kind == "output":
                r = self._roots[sl.index] if sl.index < len(self._roots) else None
                if r is None or _source(r) is not _source(instr):
                    raise ValueError(f"buffer assignment puts '{instr.name}' in output {sl.index}, "
                                     f"which is not that root value")
                self._out_specs[sl.index] = (tuple(r.shape.dims), r.shape.dtype)
        copied_out = {k.index for k in plan.kernels if isinstance(k, _CopyOut)}
        for j in copied_out:
            self._out_specs[j] = (tuple(self._roots[j].shape.dims), self._roots[j].shape.dtype)

        # The table: fixed slots now, parameter/output slots per call.
        self._table = np.zeros(max(1, len(plan.slots)), np.uint64)
        self._table_addr = self._table.ctypes.data
        self._keepalive = []  # fused array constants: their addresses are in the table
        self._param_slots, self._out_slots, self._temp_slots = [], [], []
        for key, slot in plan.slots.items():
            if key[0] == "param":
                self._param_slots.append((slot, key[1]))
            elif key[0] == "output":
                self._out_slots.append((slot, key[1]))
            else:
                if key[0] == "temp":
                    self._temp_slots.append((slot, key[1]))
                self._table[slot] = self._fixed_address(key, plan)
        self._free_contexts = [(self._table, self._arena, self._table_addr)]
        # (slot numbers as index arrays: a call writes all parameter / output slots at once)
        self._param_slot_index = np.array([slot for slot, _ in self._param_slots], np.intp)
        self._param_order = [k for _, k in self._param_slots]
        self._out_slot_index = np.array([slot for slot, _ in self._out_slots], np.intp)
        self._out_order = [j for _, j in self._out_slots]
        self._out_list = sorted(self._out_specs.items())
        # A few slots are written one by one (~0.1 us each); a numpy fancy-index assignment
        # costs ~0.7 us however few, and pays off only for many arguments or outputs.
        self._few_params = len(self._param_slots) <= _FEW_SLOTS
        self._few_outs = len(self._out_slots) <= _FEW_SLOTS
        self._context_lock = threading.Lock()
        seq_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        par_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
        self._steps = []
        for how, name, what in steps:
            if how == "seq":
                self._steps.append((seq_type(jit.addresses[name]), 0))
            else:
                self._steps.append((par_type(jit.addresses[name]), plan.kernels[what].units))
        self._parallel = {plan.kernels[what].name for how, _, what in steps if how == "par"}

        # How to produce each output: fresh array, the donated parameter, or a copy.
        self._results = []
        taken = set()
        for j, r in enumerate(self._roots):
            src = _source(r)
            sl = assignment.slices.get(src) if src.opcode not in ("parameter", "constant") else None
            if (j in copied_out or sl is not None and sl.kind == "output" and sl.index == j) and j not in taken:
                taken.add(j)
                self._results.append(("fresh", j, r))
            elif sl is not None and sl.kind == "parameter" and (sl.index, j) not in taken:
                taken.add((sl.index, j))  # computed in place of a donated parameter: hand it back
                self._results.append(("donated", sl.index, r))
            else:
                self._results.append(("copy", buffer_key(r, assignment), r))
        self._all_fresh = all(how == "fresh" for how, _, _ in self._results)
        self._fresh_order = [j for _, j, _ in self._results]
        # call_trusted's fast path (None: ``_run``)
        self._fast = None
        if (self._all_fresh and self._few_params and self._few_outs and len(self._steps) == 1
                and not self._steps[0][1]):
            self._fast = self._steps[0][0]
            position = {j: p for p, (j, _) in enumerate(self._out_list)}
            self._fast_out_shapes = [spec for _, spec in self._out_list]
            self._fast_out_slots = [(slot, position[j]) for slot, j in self._out_slots]
            order = [position[j] for j in self._fresh_order]
            self._fast_results = None if order == list(range(len(self._out_list))) else order

    def _fixed_address(self, key, plan) -> int:
        kind = key[0]
        if kind == "temp":
            return self._arena.ctypes.data + key[1]
        if kind == "literal":
            return self._literal(key[1]).ctypes.data
        if kind == "kconst":
            c = np.ascontiguousarray(plan.kernels[key[1]].constants[key[2]])
            self._keepalive.append(c)
            return c.ctypes.data
        if kind == "sconst":
            c = np.ascontiguousarray(plan.sub_constants[key[1:]])
            self._keepalive.append(c)
            return c.ctypes.data
        if kind in ("mesh", "device"):  # an SPMD program's: set per device (backends/spmd)
            return 0
        raise AssertionError(key)

    @staticmethod
    def _aligned_arena(size: int) -> np.ndarray:
        raw = np.zeros(size + _ARENA_ALIGN, np.uint8)
        skip = (-raw.ctypes.data) % _ARENA_ALIGN
        return raw[skip:skip + size]

    def _literal(self, instr) -> np.ndarray:
        if instr not in self._literals:
            self._literals[instr] = np.ascontiguousarray(np.asarray(instr.literal, dtype=instr.shape.dtype))
        return self._literals[instr]

    def _check_params(self, arrays):
        if len(arrays) != len(self._params):
            raise TypeError(f"expected {len(self._params)} arguments, got {len(arrays)}")
        params = []
        for k, ((dtype, dims), a) in enumerate(zip(self._param_specs, arrays)):
            if type(a) is not np.ndarray or not a.flags.c_contiguous:
                a = np.asarray(a)
                if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
                    a = a.copy(order="C")
            if a.dtype != dtype or a.shape != dims:
                raise TypeError(f"argument {k}: expected {np.dtype(dtype)}{list(dims)}, "
                                f"got {a.dtype}{list(a.shape)}")
            params.append(a)
        return params

    def _new_context(self):
        """A private pointer table and arena for a call that overlaps another one."""
        arena = self._aligned_arena(int(self.assignment.arena_size))
        table = self._table.copy()
        for slot, offset in self._temp_slots:
            table[slot] = arena.ctypes.data + offset
        return table, arena, table.ctypes.data

    def __call__(self, *arrays):
        return self.call_trusted(self._check_params(arrays))

    def call_trusted(self, params):
        """Run on ``params``: C-contiguous numpy arrays of exactly the parameters' dtypes and
        shapes (``jit`` checked them through its cache key; ``__call__`` checks them)."""
        # (list.pop/append are atomic: no lock needed on this path)
        try:
            context = self._free_contexts.pop()
        except IndexError:  # another thread's call holds it: a context of our own
            context = self._new_context()
        try:
            if self._fast is None:
                return self._run(params, *context)
            # (``_run`` for the common program: a few arguments and outputs, one sequence
            # step, every result a fresh output -- ~1 us less Python per call)
            table = context[0]
            for slot, k in self._param_slots:
                table[slot] = _address_of(params[k])
            outs = [np.empty(dims, dtype) for dims, dtype in self._fast_out_shapes]
            for slot, pos in self._fast_out_slots:
                table[slot] = _address_of(outs[pos])
            self._fast(context[2])
            return outs if self._fast_results is None else [outs[p] for p in self._fast_results]
        finally:
            self._free_contexts.append(context)

    def _run(self, params, table, arena, addr, should_stop=None):
        # (``params`` and ``outs`` keep the arrays alive while the code reads the table)
        # ``should_stop()``, asked after each step, ends the run early (returns None): a
        # device of a virtual mesh whose peers failed (backends/spmd/virtual_mesh.py).
        if self._few_params:
            for slot, k in self._param_slots:
                table[slot] = _address_of(params[k])
        else:
            table[self._param_slot_index] = [_address_of(params[k]) for k in self._param_order]
        outs = {j: np.empty(dims, dtype) for j, (dims, dtype) in self._out_list}
        if self._few_outs:
            for slot, j in self._out_slots:
                table[slot] = _address_of(outs[j])
        else:
            table[self._out_slot_index] = [_address_of(outs[j]) for j in self._out_order]
        for fn, units in self._steps:
            if units:
                self._pool.parallel_for(fn, addr, units)
            else:
                fn(addr)
            if should_stop is not None and should_stop():
                return None
        if self._all_fresh:  # (the common case: each result is a fresh output array)
            return [outs[j] for j in self._fresh_order]
        results = []
        for how, where, r in self._results:
            if how == "fresh":
                results.append(outs[where])
            elif how == "donated":
                results.append(params[where].reshape(r.shape.dims))
            else:
                results.append(self._copy_from(where, r, params, outs, arena))
        return results

    def profile(self, *arrays, repeat: int = 5) -> list[dict]:
        """Run the program kernel by kernel (each split over the pool as in a call) and time
        each: ``[{"name", "kind", "strategy", "units", "parallel", "ms"}]``, the median of
        ``repeat`` runs (XLA's HLO profile, per kernel)."""
        times = {k.name: [] for k, _ in self._thunks}
        table, _arena, _ = self._new_context()  # private: safe next to concurrent calls
        for _ in range(repeat + 1):
            params = self._check_params(arrays)
            for slot, k in self._param_slots:
                table[slot] = _address_of(params[k])
            outs = {j: np.empty(dims, dtype) for j, (dims, dtype) in self._out_specs.items()}
            for slot, j in self._out_slots:
                table[slot] = _address_of(outs[j])
            for k, fn in self._thunks:
                t0 = time.perf_counter()
                if k.name in self._parallel:
                    self._pool.parallel_for(fn, table.ctypes.data, k.units)
                else:
                    fn(table.ctypes.data, 0, k.units)
                times[k.name].append(time.perf_counter() - t0)
        info = {d["name"]: d for d in self.kernels()}
        return [dict(info[name], ms=statistics.median(t[1:]) * 1e3) for name, t in times.items()]

    def _copy_from(self, key, r, params, outs, arena=None):
        kind = key[0]
        dims, dtype = r.shape.dims, r.shape.dtype
        if kind == "param":
            return params[key[1]].reshape(dims).copy()
        if kind == "output":
            return outs[key[1]].reshape(dims).copy()
        if kind == "literal":
            return self._literal(key[1]).reshape(dims).copy()
        off = key[1]
        arena = self._arena if arena is None else arena
        return arena[off:off + r.shape.nbytes].view(dtype).reshape(dims).copy()

    # -- introspection ---------------------------------------------------------------------
    def kernels(self) -> list[dict]:
        """Per kernel: ``name``, ``kind`` (fusion kind or opcode), ``opcodes``, ``strategy``
        (loop/reduce/gemm/...), ``units`` and ``parallel`` (split over the thread pool)."""
        return [{"name": k.name, "kind": k.kind, "opcodes": list(k.opcodes), "strategy": k.strategy,
                 "units": k.units, "parallel": k.name in self._parallel} for k in self._kernels]

    @property
    def num_threads(self) -> int:
        return self._pool.size

    # (Kernels found in the kernel cache were compiled with another program: their IR and
    # assembly are appended to this program's own.)
    def _cached(self):
        return getattr(self._jit, "cached_kernels", {}).values()

    @property
    def llvm_ir(self) -> str:
        return "\n".join([self._jit.llvm_ir] + [c.llvm_ir for c in self._cached()])

    @property
    def optimized_llvm_ir(self) -> str:
        return "\n".join([self._jit.optimized_llvm_ir] + [c.jit.function_ir(c.symbol) for c in self._cached()])

    @property
    def asm(self) -> str:
        return "\n".join([self._jit.asm] + [optimized_assembly(c.llvm_ir) for c in self._cached()])

    @property
    def compile_ms(self) -> float:
        return self._compile_ms


def _slot_key(key):
    """The table slot a buffer key reads: a temporary in an output's bytes uses that output's."""
    return ("output", key[1]) if key[0] == "output_at" else key


def _span(key, nbytes):
    """``(memory, first byte, end)`` of a buffer key in the arena or an output (None: other)."""
    if key[0] == "temp":
        return "arena", key[1], key[1] + nbytes
    if key[0] == "output_at":
        return ("output", key[1]), key[2], key[2] + nbytes
    if key[0] == "output":
        return ("output", key[1]), 0, nbytes
    return None


def _check_no_alias(kernel, keys):
    """Kernel pointers are ``noalias``: the output may not share bytes with an input, except an
    input computed in place (the kernel reads it through ``out``, see ``emit_kernel``)."""
    out = keys[0]
    span = _span(out, kernel.instr.shape.nbytes)
    for key, inp in zip(keys[1:], kernel.inputs):
        if key == out and any(inp is i for i in kernel.in_place):
            continue
        other = _span(key, inp.shape.nbytes)
        if span is not None and other is not None:
            clash = span[0] == other[0] and other[1] < span[2] and span[1] < other[2]
        else:
            clash = key == out
        if clash:
            raise ValueError(f"buffer assignment gives kernel '{kernel.name}' an output buffer that "
                             "overlaps one of its inputs (kernels assume noalias)")


def _kernel_text(kmod: ir.Module) -> str:
    """A kernel module's IR text, with what llvmlite cannot emit patched in."""
    text = with_loop_ids(str(kmod))
    # llvmlite cannot add string attributes: put them on each kernel's ``define`` line
    if FLUSH_DENORMALS:
        attrs = DENORMAL_ATTRIBUTE
        # (llvmlite prints the attributes sorted: ``noinline nounwind``; either order matches)
        text = re.sub(r"\) (noinline nounwind|nounwind noinline)\n\{", lambda m: f") {m.group(1)} {attrs}\n{{",
                      text)
    return text


def _main_text(module: ir.Module) -> str:
    """The calling code's IR text. It may define the small kernels of loop bodies (see
    ``make_inline_kernel``): their loop IDs are made distinct as a kernel module's, and every
    function gets the kernels' denormal attribute (LLVM inlines only between functions that
    agree on it; the calling code itself does no arithmetic)."""
    text = with_loop_ids(str(module))
    if FLUSH_DENORMALS:
        text = re.sub(r"^(define [^\n]*\) )((?:[a-z]+ )*nounwind(?: [a-z]+)*)\n\{",
                      lambda m: f"{m.group(1)}{m.group(2)} {DENORMAL_ATTRIBUTE}\n{{", text, flags=re.M)
    return text


def compile_module(module, assignment, num_threads: int | None = None,
                   num_partitions: int = 1) -> LlvmExecutable:
    """Compile ``module`` (an optimized HloModule) with buffer ``assignment`` for the host CPU.

    ``num_threads``: split big kernels over this many threads (default: the process-wide pool,
    sized by ``MINIXLA_NUM_THREADS``). ``num_partitions``: the mesh an SPMD per-device program
    (with collectives) runs on -- ``minixla.backends.spmd`` runs it on virtual devices. Raises
    ``UnsupportedError`` naming the opcode/dtype for anything the backend cannot emit.
    """
    t0 = time.perf_counter()
    pool = thread_pool()
    if num_threads is not None and num_threads != pool.size:
        from minixla.backends.llvm.runtime import ThreadPool
        pool = ThreadPool(num_threads)
    llvm_module = ir.Module(name=module.name)
    kernels, new_kernels, used = [], {}, {}
    split = compile_server.Split()  # new kernels start compiling in the workers as soon as emitted
    count = iter(range(1 << 62))

    def register(kmod) -> str:
        # Each kernel is a module of its own, named after a hash of its text (kernel_cache.py).
        symbol, text = kernel_cache.symbol_for(_kernel_text(kmod))
        if symbol not in used and symbol not in new_kernels:
            cached = kernel_cache.lookup(symbol)
            if cached is None:
                new_kernels[symbol] = text
                split.offer(symbol, text)
            else:
                used[symbol] = cached
        fn = kmod.globals[kernel_cache.PLACEHOLDER]
        if symbol not in llvm_module.globals:  # declared; defined by a linked module or the cache
            ir.Function(llvm_module, fn.function_type, name=symbol)
        return symbol

    def make_kernel(instr, in_place):
        kmod = ir.Module(name=kernel_cache.PLACEHOLDER)
        kernel = emit_kernel(kmod, instr, kernel_cache.PLACEHOLDER, in_place=in_place, threads=pool.size)
        kernel.name = _kernel_name(next(count), instr)
        kernel.symbol = register(kmod)
        return kernel

    inlined = []

    def make_inline_kernel(instr, in_place):
        # A small kernel of a loop body or branch, defined in the calling code itself, where
        # LLVM inlines it into the loop (control_flow.py): no call, no MXCSR read per iteration.
        name = f"minixla.inline{next(count)}"
        kernel = emit_kernel(llvm_module, instr, name, in_place=in_place, threads=1, set_fp_mode=False)
        fn = llvm_module.globals[name]
        fn.attributes.discard("noinline")
        fn.attributes.add("alwaysinline")
        fn.linkage = "internal"
        kernel.name = _kernel_name(next(count), instr)
        kernel.symbol = name
        inlined.append(name)
        return kernel

    control = ControlContext(make_kernel, assignment.arena_size, register, num_partitions,
                             make_inline_kernel=make_inline_kernel)
    for instr in module.entry.instructions:
        if instr.opcode in _NO_KERNEL:
            continue
        if instr.opcode in STEP_OPCODES:  # a loop or branch (kernels of its computations), a collective
            kernels.append(control_step(instr, lambda i: buffer_key(i, assignment), control, module.entry))
            continue
        kernels.append(make_kernel(instr, getattr(assignment, "in_place", {}).get(instr, ())))
    kernels += _copy_outs(module, assignment)
    if control.arena_size > assignment.arena_size and control.constants is not None:
        assignment.arena_size = control.arena_size  # the called computations' regions
    plan = _Plan(kernels, assignment, pool.size, control.constants)
    steps, thunks = plan.emit(llvm_module)
    names = sorted({name for _, name, _ in steps} | set(thunks))
    main = _main_text(llvm_module)
    split.finish()
    local = [text for symbol, text in new_kernels.items() if symbol not in split.remote]
    def build():
        # (the calling code needs LLVM's optimizer when kernels are linked or defined in it)
        j = JitModule(main, names + list(new_kernels), local, objects=split.objects(),
                      optimize=True if inlined else None)
        # The cached kernels it links to: keeps their code alive, and a dump appends their IR.
        # (Set only here: on a program hit ``used`` names the JitModule's own kernels, which
        # a dump would then print twice.)
        j.cached_kernels = dict(used)
        return j
    jit = kernel_cache.program(main, names, build)
    for symbol, text in new_kernels.items():
        kernel_cache.insert(symbol, text, jit)
    exe = build_executable(module, assignment, kernels, jit, plan, steps, thunks, pool)
    exe.collectives = control.collectives
    exe._compile_ms = (time.perf_counter() - t0) * 1e3
    return exe


class _CopyOut(ControlStep):
    """A plan step copying a result that lives in the arena (an element of a loop's state,
    ``get-tuple-element`` of a ``while``) into a fresh output array, in the generated code:
    numpy's slice-view-reshape-copy of it cost ~2 us a call, a memcpy at the end of the
    program's last step a few ns. A ``ControlStep``: ``_Plan`` emits it inline."""
    kind = strategy = "copy"

    def __init__(self, root, index, src):
        self.instr = root
        self.index = index
        self.opcodes = ["copy"]
        self.name = f"copy_out_{index}"
        self.dst, self.src, self.nbytes = ("output", index), src, root.shape.nbytes

    def keys(self):
        return [self.dst, self.src]

    def emit(self, plan, b, table):
        from minixla.backends.llvm.control_flow import _memcpy
        _memcpy(plan, b, table, self.dst, self.src, self.nbytes)


def _copy_outs(module, assignment) -> list:
    """A ``_CopyOut`` for each root value whose buffer is a temporary (not its own output)."""
    root = module.entry.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    out = []
    for j, r in enumerate(roots):
        if r.shape.is_tuple or r.shape.size == 0 or _source(r).opcode in ("parameter", "constant"):
            continue
        key = buffer_key(r, assignment)
        if key[0] == "temp":
            out.append(_CopyOut(r, j, key))
    return out


def build_executable(module, assignment, kernels, jit, plan, steps, thunks, pool) -> LlvmExecutable:
    """The executable of compiled code ``jit`` (a ``JitModule``, or object code loaded by the
    persistent cache, ``serialization.py``) and its plan. Keeps what serialization needs."""
    exe = LlvmExecutable(module, assignment, kernels, jit, plan, steps, pool)
    par_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    exe._thunks = [(k, par_type(jit.addresses[name])) for k, name in zip(plan.kernels, thunks)]
    exe._plan, exe._named_steps, exe._thunk_names = plan, steps, thunks
    return exe
