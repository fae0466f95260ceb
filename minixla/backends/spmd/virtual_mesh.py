"""A mesh of *virtual* devices in one process: run a partitioned (per-device) HloModule on
the LLVM backend, one thread and one buffer set per device (what XLA:CPU does when a
process has several host devices, ``--xla_force_host_platform_device_count``).

The per-device program is compiled once (``compile_module(..., num_partitions=n)``). Device
``d`` gets its own execution context of that executable -- a pointer table and an arena of
temporaries -- whose table also holds the address of the shared mesh struct and the number
``d`` (``partition-id`` reads it). Each device runs the program's steps on a thread of its
own (``ctypes`` releases the GIL, so they run in parallel; the threads start with the first
call and wait for the next); the collectives meet in the mesh (``steps.py``).

Never hangs: the caller waits at most ``timeout_s`` for the devices. Past it (a device that
never reaches a collective the others wait at), or as soon as one device fails (a bad
argument, an error in its thread), the runtime raises the mesh's abort flag: every device
waiting at a barrier leaves it, returns from its step function and stops, and the call
raises ``CollectiveError`` naming the collective and the devices waiting at it.
"""
from __future__ import annotations

import queue
import threading
import time

import numpy as np

from minixla.backends.spmd import steps as S
from minixla.core.errors import MinixlaError

#: seconds a call waits for its devices by default
DEFAULT_TIMEOUT_S = 60.0
_ABORT_ERROR, _ABORT_TIMEOUT = 1, 2


class CollectiveError(MinixlaError, RuntimeError):
    """A virtual mesh could not finish a program: a device failed or timed out at a collective."""


class SpmdExecutable:
    """A per-device program compiled for a mesh of ``num_partitions`` virtual devices.

    ``exe(per_device_args)`` -> per-device results: ``per_device_args[d]`` is the list of
    device ``d``'s arguments (numpy arrays of the entry parameters' per-device shapes and
    dtypes); the result is a list, per device, of that device's outputs (one per root value).

    Calls are serialized (one mesh struct and one context per device, reused by every call).
    ``num_partitions``: None takes ``module.num_partitions`` (set by the partitioner).
    ``timeout_s``: how long a call waits for the devices before aborting the mesh.
    ``num_threads``: threads each device splits its big kernels over (default 1: a device
    is one thread, like one core). ``optimize``: run ``minixla.jit``'s pass pipeline (fusion,
    simplification...) on a copy of ``module`` first; collectives and ``partition-id`` are
    never fused.
    """

    def __init__(self, module, num_partitions: int | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 num_threads: int = 1, optimize: bool = False, assignment=None):
        from minixla.backends.llvm.executable import compile_module
        from minixla.passes.buffer_assignment import assign_buffers
        if num_partitions is None:
            num_partitions = getattr(module, "num_partitions", None)
            if num_partitions is None:
                raise TypeError("num_partitions is not given and the module has no num_partitions")
        if int(num_partitions) < 1:
            raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
        from minixla.passes.rng_bit_generator_expander import EXPANDED_OPCODES, RngBitGeneratorExpander
        expand = any(i.opcode in EXPANDED_OPCODES for c in module.computations for i in c.instructions)
        if optimize or expand:
            module = module.clone()
            assignment = None
        if expand:  # (as minixla.jit's LLVM backend and XLA:CPU: no kernel for rng-bit-generator)
            RngBitGeneratorExpander().run(module)
        if optimize:
            from minixla.jit import optimization_pipeline  # (jit.py wires the passes)
            optimization_pipeline().run(module)
        from minixla.passes.optimization_barrier_expander import OptimizationBarrierExpander
        if any(i.opcode == "opt-barrier" for c in module.computations for i in c.instructions):
            module = module.clone() if not (optimize or expand) else module
            assignment = None
            OptimizationBarrierExpander().run(module)
        self.module = module
        self.num_partitions = n = int(num_partitions)
        self.timeout_s = float(timeout_s)
        assignment = assign_buffers(module) if assignment is None else assignment
        t0 = time.perf_counter()
        self.executable = exe = compile_module(module, assignment, num_threads=num_threads, num_partitions=n)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.collectives = list(getattr(exe, "collectives", []))
        self._mesh = np.zeros(S.mesh_words(n), np.uint64)
        slots = exe._plan.slots
        self._contexts = []
        for d in range(n):
            table, arena, addr = exe._new_context()
            if S.MESH_KEY in slots:
                table[slots[S.MESH_KEY]] = self._mesh.ctypes.data
            if S.DEVICE_KEY in slots:
                table[slots[S.DEVICE_KEY]] = d
            self._contexts.append((table, arena, addr))
        self._lock = threading.Lock()
        self._threads = None  # one per device, started by the first call
        self._broken = False

    def _where(self, tag: int) -> str:
        """The barrier a device's ``tag`` names (see ``steps.py``: 2*index + phase + 1)."""
        if tag <= 0:
            return "no collective yet"
        index, phase = divmod(int(tag) - 1, 2)
        instr = self.collectives[index]
        return f"{instr.opcode} %{instr.name} ({'before' if phase == 0 else 'after'} its transfer)"

    def __call__(self, per_device_args):
        n = self.num_partitions
        per_device_args = list(per_device_args)
        if len(per_device_args) != n:
            raise TypeError(f"expected the arguments of {n} devices, got {len(per_device_args)}")
        with self._lock:
            if self._broken:  # pragma: no cover
                raise CollectiveError("this virtual mesh has a device that never returned")
            return self._call(per_device_args)

    def _call(self, per_device_args):
        n, exe, mesh = self.num_partitions, self.executable, self._mesh
        mesh[:] = 0
        results: list = [None] * n
        errors: dict = {}
        done = [False] * n
        all_done = threading.Event()
        count_lock = threading.Lock()
        stop = lambda: mesh[S.ABORT] != 0  # noqa: E731

        def device(d):
            try:
                params = exe._check_params(list(per_device_args[d]))
                results[d] = exe._run(params, *self._contexts[d], should_stop=stop)
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors[d] = e
                mesh[S.ABORT] = _ABORT_ERROR  # release the others
            finally:
                with count_lock:
                    done[d] = True
                    if all(done):
                        all_done.set()

        if n == 1:  # (no barrier to wait at: run it here)
            device(0)
        else:
            if self._threads is None:
                self._threads = _DeviceThreads(n)
            for d in range(n):
                self._threads.queues[d].put((lambda d: lambda: device(d))(d))
            if not all_done.wait(self.timeout_s):
                waiting = {d: int(mesh[S.RECORDS + S.RECORD_WORDS * d + S.TAG]) for d in range(n)}
                finished = list(done)
                mesh[S.ABORT] = _ABORT_TIMEOUT
                if not all_done.wait(5.0):  # pragma: no cover - a device stuck outside a barrier
                    self._broken = True
                raise CollectiveError(self._timeout_message(waiting, finished))
        if errors:
            d = min(errors)
            e = errors[d]
            if isinstance(e, (TypeError, ValueError)):
                raise type(e)(f"device {d}: {e}") from e
            raise CollectiveError(f"device {d} failed: {type(e).__name__}: {e}") from e
        if mesh[S.ABORT]:  # pragma: no cover - an abort without an error or a timeout
            raise CollectiveError("the mesh was aborted")
        return results

    def _timeout_message(self, waiting, done) -> str:
        by_place: dict = {}
        for d, tag in waiting.items():
            by_place.setdefault("finished" if done[d] else self._where(tag), []).append(d)
        parts = [f"devices {ds} at {place}" if place != "finished" else f"devices {ds} finished"
                 for place, ds in by_place.items()]
        return (f"virtual mesh of {self.num_partitions} devices: no progress within {self.timeout_s:g} s "
                f"({'; '.join(parts)}); the mesh was aborted")


class _DeviceThreads:
    """One daemon thread per virtual device, reused by every call (starting 8 threads a call
    would cost more than a small program's run)."""

    def __init__(self, n: int):
        self.queues = [queue.SimpleQueue() for _ in range(n)]
        for d, q in enumerate(self.queues):
            threading.Thread(target=_device_loop, args=(q,), daemon=True, name=f"minixla-device-{d}").start()

    def __del__(self):  # the threads hold only their queues: stop them with the mesh
        for q in self.queues:
            q.put(None)


def _device_loop(q):
    while True:
        job = q.get()
        if job is None:
            return
        job()
        del job  # (a finished job must not keep its executable alive)


def compile_llvm(module, num_partitions: int | None = None, **options) -> SpmdExecutable:
    """Compile per-device HloModule ``module`` for ``num_partitions`` virtual devices (see
    ``SpmdExecutable`` for ``options``). Raises ``ValueError`` for replica groups or
    source-target pairs that do not fit the mesh, ``UnsupportedError`` for what the LLVM
    backend cannot emit."""
    return SpmdExecutable(module, num_partitions, **options)


def run_llvm(module, num_partitions: int | None, per_device_args, **options) -> list:
    """Compile ``module`` for a mesh of ``num_partitions`` virtual devices and run it once:
    ``per_device_args[d]`` are device ``d``'s arguments; returns, per device, its list of
    outputs. Like XLA's SPMD execution: every device runs the same program on its own
    shard; ``partition-id`` is the device number."""
    return compile_llvm(module, num_partitions, **options)(per_device_args)


def llvm_executor(module, num_partitions: int):
    """An executor for ``minixla.sharding.spmd_jit`` (``executor(module, n)`` -> a function
    of the per-device argument lists): the virtual LLVM mesh, optimized, returning per device
    the root value as the HLO evaluator's ``evaluate_spmd`` does (a tuple for a tuple root)."""
    exe = compile_llvm(module, num_partitions, optimize=True)
    tuple_root = module.entry.root.opcode == "tuple"
    return lambda per_device: [tuple(outs) if tuple_root else outs[0] for outs in exe(per_device)]
