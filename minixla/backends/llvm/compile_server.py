"""Kernels compiled in parallel in other processes (XLA:CPU's parallel codegen).

LLVM dominates minixla's compile time (a row-fused softmax kernel is ~17 ms of ``-O3`` and
codegen), and llvmlite serializes every LLVM call of a process behind one lock, so threads
cannot compile two modules at once. XLA:CPU splits a program's LLVM module and compiles the
parts on a thread pool; we get the same parallelism from a pool of *compile worker* processes
(``compile_worker.py``, two by default), started on the first compile and kept for the life of
the process (the first at once, the others on a background thread).

While ``executable.compile_module`` emits a program's kernels, each new kernel is *offered*
to a ``Split``: with a ready worker, the workers compile every new kernel -- a big one as soon
as it is emitted, small ones bundled into one module, each request given to the first worker
free (``Split``) -- and the parent only turns the program's thunks into machine code (no
optimizer run). The workers send back object files, which the ``JitModule`` loads into its
execution engine next to the parent's own; a kernel whose compile fails in a worker is
compiled by the parent. The machine code is the same either way.

Why the parent leaves all optimizing to the workers: every run of llvmlite's (0.50) pass
pipeline leaks ~50-80 KiB inside LLVM (the pass builder's instrumentation callbacks are
allocated and never freed; a pass builder reused for the next run leaks as much), so a process
that compiles thousands of programs would grow without bound, even at one optimizer run per
program. The workers take that leak, and each is replaced by a fresh one (started meanwhile,
switched to when ready) after ``RECYCLE_AFTER`` requests, which returns the memory. Without a
worker (``MINIXLA_COMPILE_WORKERS=0``, one core) the parent optimizes and the leak remains.

``MINIXLA_COMPILE_WORKERS``: the number of workers; ``0`` turns them off (everything compiles
in-process); unset or empty, it is 2 on a machine with two or more cores, none on one core.

Failure handling, per worker (the others keep compiling): the parent waits at most ``WAIT_S``
for a kernel (then compiles it itself and stops the worker, which may be stuck); a Ctrl-C waits
until the request is written whole (and a request broken off half-written any other way stops
the worker: its input cannot be parsed); a worker that exited is replaced (``MAX_RESTARTS`` in
all); a forked child closes its copy of the pipes (the parent's workers exit with the parent)
and starts its own workers.
"""
from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from minixla.backends.llvm.compile_worker import REPLY, REQUEST, _read_exact
from minixla.backends.llvm import target as llvm_target
from minixla.backends.llvm.target import BUNDLE_SEPARATOR, interrupts_deferred

#: seconds the parent waits for one kernel from the worker before compiling it itself
WAIT_S = 20.0
#: smaller kernels are bundled: linked into one module they cost ~1 ms each, while a module of
#: their own costs ~2.5 ms of fixed LLVM overhead
MIN_REMOTE_CHARS = 3000
#: workers when ``MINIXLA_COMPILE_WORKERS`` is unset (two or more cores). Two, so that the
#: parent's share of the compile (it optimizes nothing) still runs in parallel: each worker is
#: ~90 MiB resident, most of it LLVM's shared library
DEFAULT_WORKERS = 2

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_worker.py")
# (loaded by path: running the file as a script would put this folder, whose math.py would
# shadow the standard library's, on sys.path)
_BOOT = ("import importlib.util as u, sys; s = u.spec_from_file_location('minixla_compile_worker', sys.argv[1]); "
         "m = u.module_from_spec(s); s.loader.exec_module(m); m.main()")


class CompileWorkerError(RuntimeError):
    """The worker could not compile a module (or exited); the parent compiles it instead."""


def workers_requested() -> int:
    """How many compile workers to run: ``MINIXLA_COMPILE_WORKERS`` (a negative value means 0),
    else 2 when the machine has two or more cores, 0 on one core. Raises ValueError for a
    non-integer."""
    env = os.environ.get("MINIXLA_COMPILE_WORKERS", "").strip()
    if not env:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return DEFAULT_WORKERS if cores > 1 else 0
    try:
        return max(int(env), 0)
    except ValueError:
        raise ValueError(f"MINIXLA_COMPILE_WORKERS must be an integer, got {env!r}") from None


class CompileServer:
    """One worker process (of the pool, see ``servers``) and the futures of the modules it is
    compiling.

    ``submit(text)`` returns a ``Future`` of the object code (``bytes``), or None when the
    worker is not ready yet or has exited. A reader thread completes the futures; a worker
    that dies fails every pending future with ``CompileWorkerError``. The future's ``result()``
    waits at most ``WAIT_S`` and then stops the worker (``CompileWorkerError``).
    """

    def __init__(self):
        self.pid = os.getpid()
        # The worker compiles for this process's target (read once here, whatever the
        # environment says now): given as an explicit CPU name and feature string.
        cpu, features = llvm_target.host_cpu()
        env = dict(os.environ, **{llvm_target.CPU_ENV: cpu, llvm_target.FEATURES_ENV: features})
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.ready = threading.Event()
        self.alive = True
        self.retiring = False       # replaced by a fresh worker: takes no new request
        self.requests = 0           # requests sent (a worker is replaced after RECYCLE_AFTER)
        self.pending_chars = 0      # IR characters sent and not answered yet
        self._pending: dict[int, tuple[Future, int]] = {}
        self._next_id = 1
        self._state = threading.Lock()   # _pending, _next_id, pending_chars, alive, retiring
        self._write = threading.Lock()   # one request on the pipe at a time (taken before _state)
        self._reader = threading.Thread(target=self._read_replies, name="minixla-compile-server", daemon=True)
        self._reader.start()

    def submit(self, text: str) -> Future | None:
        if not self.ready.is_set():
            return None
        data = text.encode()
        future = _WorkerFuture(self)
        with interrupts_deferred(), self._write:  # (a Ctrl-C waits for the whole request:
            with self._state:                      # half of one would leave the worker waiting)
                if not self.alive or self.retiring:
                    return None
                rid, self._next_id = self._next_id, self._next_id + 1
                self._pending[rid] = (future, len(data))
                self.pending_chars += len(data)
                self.requests += 1
            try:
                self.proc.stdin.write(REQUEST.pack(rid, len(data)) + data)
                self.proc.stdin.flush()
            except (OSError, ValueError):  # the worker is gone (broken pipe, closed stdin)
                self.kill()
            except BaseException:  # anything else mid-request: the worker cannot read on
                self.kill()
                raise
        return future

    def retire(self) -> None:
        """Take no new request and close the worker's input: it answers what it was sent,
        then exits (its reader thread completes those futures and reaps it)."""
        with self._write:
            with self._state:
                self.retiring = True
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _read_replies(self) -> None:
        out = self.proc.stdout
        try:
            while (head := _read_exact(out, REPLY.size)) is not None:
                rid, status, n = REPLY.unpack(head)
                payload = _read_exact(out, n)
                if payload is None:
                    break
                if rid == 0:
                    self.ready.set()
                    continue
                with self._state:
                    entry = self._pending.pop(rid, None)
                    if entry is None:  # (a late answer, after the worker was stopped)
                        continue
                    future, size = entry
                    self.pending_chars -= size
                if status == 0:
                    future.set_result(payload)
                else:
                    future.set_exception(CompileWorkerError(payload.decode(errors="replace")))
        finally:
            self._stop()
            for pipe in (self.proc.stdout, self.proc.stdin):  # (no ResourceWarning at exit)
                try:
                    pipe.close()
                except (OSError, ValueError):
                    pass
            try:  # (reap it: no zombie while the parent lives)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def kill(self) -> None:
        """Stop the worker now; its pending futures fail (the parent compiles them)."""
        try:
            self.proc.kill()
        except OSError:
            pass
        self._stop()

    def _stop(self) -> None:
        with self._state:
            self.alive = False
            pending, self._pending, self.pending_chars = list(self._pending.values()), {}, 0
        for future, _ in pending:
            if not future.done():
                future.set_exception(CompileWorkerError("the compile worker exited"))

    def close(self) -> None:
        """Close the worker's input: it exits when done with what it has."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def _at_exit(self) -> None:
        if self.pid != os.getpid():  # (registered by the parent: not the forked child's to close)
            return
        self.close()
        try:  # (an idle worker exits at once; do not leave it running past the interpreter)
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class _WorkerFuture(Future):
    """A future of the worker's object code whose ``result`` waits at most ``WAIT_S``."""

    def __init__(self, server: CompileServer):
        super().__init__()
        self._server = server

    def result(self, timeout=None):
        try:
            return super().result(WAIT_S if timeout is None else timeout)
        except FutureTimeout:
            self._server.kill()  # stuck (or stopped): the parent compiles, a new worker starts later
            raise CompileWorkerError(f"no answer from the compile worker in {WAIT_S:.0f} s") from None


class _Slot:
    """One place in the pool of workers: the worker serving it and, while that one is being
    recycled, its successor (started meanwhile, switched to once ready)."""

    def __init__(self, server: CompileServer | None = None):
        self.server = server
        self.successor: CompileServer | None = None
        self.starting = False       # its worker is being started on a background thread


_slots: list[_Slot] = []
_server_lock = threading.Lock()
#: requests after which a worker is replaced by a fresh one. Each module a worker optimizes
#: leaks ~50-80 KiB inside LLVM (llvmlite's pass pipeline, see ``target.JitModule``); a fresh
#: worker returns that memory to the system, ~20 MiB at most per worker.
RECYCLE_AFTER = 256


def _after_fork_in_child():
    # The child must not write to the parent's workers, and must not keep their input open: a
    # worker exits when the parent closes it. (The child starts its own workers when it compiles.)
    global _slots, _server_lock
    _server_lock = threading.Lock()
    for slot in _slots:
        for s in (slot.server, slot.successor):
            if s is None:
                continue
            devnull = os.open(os.devnull, os.O_RDWR)
            for pipe in (s.proc.stdin, s.proc.stdout):
                try:  # the pipe's fd now points at /dev/null: the pipe is closed here, and the file
                    os.dup2(devnull, pipe.fileno())  # object can still be closed harmlessly later
                except (OSError, ValueError):
                    pass
            os.close(devnull)
    _slots = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
#: workers replaced after they exited (all slots together); past ``MAX_RESTARTS`` (or for a
#: slot whose worker never got ready, e.g. an interpreter without llvmlite) that slot stays empty
MAX_RESTARTS = 3
_restarts = 0


def _start() -> CompileServer | None:
    try:
        s = CompileServer()
    except OSError:  # cannot start a process here: compile in-process
        return None
    atexit.register(s._at_exit)
    return s


def _start_in_background(slot: _Slot) -> None:
    """Start ``slot``'s worker on a thread: launching a process costs the parent 5-20 ms, which
    the first compile need not wait for (a worker is of no use before it is ready anyway)."""
    pid = os.getpid()
    slot.starting = True

    def start():
        s = _start()
        with _server_lock:
            slot.starting = False
            if s is not None and os.getpid() == pid and slot in _slots and slot.server is None:
                slot.server = s
            elif s is not None:  # (the pool changed meanwhile: not needed)
                s.close()
    threading.Thread(target=start, name="minixla-compile-worker-start", daemon=True).start()


def _serve(slot: _Slot, background: bool) -> CompileServer | None:
    """The worker of ``slot`` (recycled, restarted or started as needed), or None. Holds the lock."""
    global _restarts
    s = slot.server
    if s is not None and s.pid == os.getpid() and s.alive and s.requests >= RECYCLE_AFTER:
        if slot.successor is None or not slot.successor.alive:
            slot.successor = _start()
        elif slot.successor.ready.is_set():
            s.retire()
            s, slot.server, slot.successor = slot.successor, slot.successor, None
    if s is not None and s.pid == os.getpid() and not s.alive:
        if not s.ready.is_set() or _restarts >= MAX_RESTARTS:
            return None
        _restarts += 1
        s = slot.server = None
    if s is None or s.pid != os.getpid():
        if background:
            slot.server = None
            if not slot.starting:
                _start_in_background(slot)
            return None
        s = slot.server = _start()
    return s


def _pool() -> list[CompileServer | None]:
    """One entry per slot (``workers_requested()`` of them): its worker, or None."""
    n = workers_requested()
    with _server_lock:
        for slot in _slots[n:]:  # fewer workers asked for than before: the others exit
            for s in (slot.server, slot.successor):
                if s is not None and s.pid == os.getpid() and s.alive:
                    s.retire()
        del _slots[n:]
        while len(_slots) < n:
            _slots.append(_Slot())
        # (the first worker starts here: cheap next to the first compile's LLVM start-up; the
        # others on a thread)
        return [_serve(slot, background=k > 0) for k, slot in enumerate(_slots)]


def servers() -> list[CompileServer]:
    """The process-wide compile workers (started on first use; ``MINIXLA_COMPILE_WORKERS`` of
    them, none when turned off), those not started yet left out. Each place in the pool is kept
    filled on its own: a forked child starts its own workers (the parent's pipes are not its to
    use); a worker that exited is replaced, up to ``MAX_RESTARTS`` times in all (compiles go to
    the others, or stay in-process, until the new one is ready, ~0.2-0.5 s); a worker that has
    served ``RECYCLE_AFTER`` requests is replaced by a fresh one, started meanwhile: the old
    one is used until the new one is ready."""
    return [s for s in _pool() if s is not None]


def server() -> CompileServer | None:
    """The first worker of the pool (see ``servers``), or None."""
    pool = _pool()
    return pool[0] if pool else None


def live_servers() -> list[CompileServer]:
    """This process's compile workers started so far, successors included (for measurements
    and tests; starts nothing)."""
    with _server_lock:
        return [s for slot in _slots for s in (slot.server, slot.successor)
                if s is not None and s.pid == os.getpid()]


class Split:
    """Which of one program's new kernels go to which worker, decided as they are emitted.

    With a ready worker, the workers compile all of them (the parent then runs no LLVM
    optimizer, whose every run leaks memory in-process, see ``target.JitModule``): a kernel
    of ``MIN_REMOTE_CHARS`` or more is one request as soon as it is emitted, smaller ones are
    bundled into one request until the bundle is that big (``finish`` sends the rest).

    Dispatch (greedy list scheduling: how long a kernel takes to compile is not known in
    advance -- two GEMM kernels of the same IR size differed 2x): a request goes to an idle
    worker at once; with none idle it waits in the parent and goes to the first worker that
    answers one of this program's requests. (It goes at once to the worker with the least IR
    queued when this program has nothing in flight, or when the parent starts waiting for it.)
    Which worker compiles a request does not change what is in it, so the machine code does
    not depend on the number of workers. Without a ready worker (turned off, not ready yet,
    exited), the parent compiles the kernels; a request whose worker fails, or that no worker
    is left to take, fails its future and the parent compiles it.

    ``remote``: the symbols given to the workers; ``objects()``: ``(IR text, Future of object
    code)`` per request, in the order sent.
    """

    def __init__(self):
        self.servers = servers()
        self.remote: set[str] = set()
        self._objects: list[tuple[str, Future]] = []
        self._bundle: list[tuple[str, str]] = []
        self._queue: list[_Request] = []   # requests no worker has taken yet
        self._in_flight = 0                # requests taken and not answered
        self._lock = threading.Lock()

    def _ready(self) -> list[CompileServer]:
        return [s for s in self.servers if s.ready.is_set() and s.alive and not s.retiring]

    def offer(self, symbol: str, text: str) -> bool:
        """Give ``text`` to the workers, alone or in the bundle; False: the parent compiles it."""
        if not self._ready():
            return False
        if len(text) >= MIN_REMOTE_CHARS:
            return self._send([(symbol, text)])
        self._bundle.append((symbol, text))
        if sum(len(t) for _, t in self._bundle) >= MIN_REMOTE_CHARS:
            self._flush()
        return True

    def finish(self) -> None:
        """Send the bundle of small kernels still held (call once all kernels are offered)."""
        self._flush()

    def _flush(self) -> None:
        bundle, self._bundle = self._bundle, []
        if bundle:
            self._send(bundle)

    def _send(self, kernels) -> bool:
        if not self._ready():  # (every worker exited meanwhile: these stay with the parent)
            return False
        request = _Request(self, BUNDLE_SEPARATOR.join(t for _, t in kernels))
        with self._lock:
            self._queue.append(request)
        self._objects.append((request.text, request))
        self.remote.update(s for s, _ in kernels)
        self._dispatch()
        return True

    def _dispatch(self, *, idle_only: bool = False, until: _Request | None = None) -> None:
        """Hand queued requests, oldest first, to idle workers; ``idle_only=False``: also to a
        busy one when this program has nothing in flight; ``until``: to busy ones too, until
        that request is taken. With no worker left, the queued requests fail."""
        refused = []
        while True:
            with self._lock:
                if not self._queue or (until is not None and until not in self._queue):
                    return
                ready = [s for s in self._ready() if s not in refused]
                if not ready:
                    failed, self._queue = self._queue, []
                    break
                idle = [s for s in ready if s.pending_chars == 0]
                if idle:
                    chosen = idle[0]
                elif until is not None or (not idle_only and self._in_flight == 0):
                    chosen = min(ready, key=lambda s: s.pending_chars)
                else:
                    return
                request = self._queue.pop(0)
                self._in_flight += 1
            future = chosen.submit(request.text)
            if future is None:  # (it exited or retired meanwhile: the next one)
                refused.append(chosen)
                with self._lock:
                    self._queue.insert(0, request)
                    self._in_flight -= 1
                continue
            request.server = chosen
            future.add_done_callback(functools.partial(self._answered, request))
        for request in failed:
            if not request.done():
                request.set_exception(CompileWorkerError("no compile worker is left to take it"))

    def _answered(self, request: _Request, future: Future) -> None:
        with self._lock:
            self._in_flight -= 1
        error = future.exception(0)
        if not request.done():
            if error is None:
                request.set_result(future.result(0))
            else:
                request.set_exception(error)
        with self._lock:
            if not self._queue:
                return
        # The worker that answered is idle now: hand it the next request. (On a thread of its
        # own: this runs on a worker's reader thread, which must not block on a write to the
        # worker it reads from.)
        threading.Thread(target=self._dispatch, kwargs={"idle_only": True}, daemon=True,
                         name="minixla-compile-dispatch").start()

    def objects(self) -> list[tuple[str, Future]]:
        return list(self._objects)


class _Request(Future):
    """A request of a ``Split``: waits in the parent until a worker takes it (``server``), then
    completes with the worker's answer. ``result`` sends it at once if it is still waiting, and
    waits at most ``WAIT_S`` for the answer, then stops the worker (``CompileWorkerError``)."""

    def __init__(self, split: Split, text: str):
        super().__init__()
        self.split = split
        self.text = text
        self.server: CompileServer | None = None

    def result(self, timeout=None):
        self.split._dispatch(until=self)
        try:
            return super().result(WAIT_S if timeout is None else timeout)
        except FutureTimeout:
            if self.server is not None:
                self.server.kill()  # stuck (or stopped): the parent compiles, a new worker starts later
            raise CompileWorkerError(f"no answer from the compile worker in {WAIT_S:.0f} s") from None
