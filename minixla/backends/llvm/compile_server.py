"""Kernels compiled in parallel in a second process (XLA:CPU's parallel codegen).

LLVM dominates minixla's compile time (a row-fused softmax kernel is ~17 ms of ``-O3`` and
codegen), and llvmlite serializes every LLVM call of a process behind one lock, so threads
cannot compile two modules at once. XLA:CPU splits a program's LLVM module and compiles the
parts on a thread pool; we get the same parallelism from one *compile worker* process
(``compile_worker.py``), started on the first compile and kept for the life of the process.

While ``executable.compile_module`` emits a program's kernels, each new kernel is *offered*
to a ``Split``: with a ready worker, the worker compiles every new kernel -- a big one as soon
as it is emitted, small ones bundled into one module -- and the parent only turns the
program's thunks into machine code (no optimizer run). The worker sends back object files,
which the ``JitModule`` loads into its execution engine next to the parent's own; a kernel
whose compile fails in the worker is compiled by the parent. The machine code is the same
either way.

Why the parent leaves all optimizing to the worker: every run of llvmlite's (0.50) pass
pipeline leaks ~80 KiB inside LLVM (the pass builder's instrumentation callbacks are
allocated and never freed), so a process that compiles thousands of programs would grow
without bound. The worker takes that leak, and is replaced by a fresh one (started meanwhile,
switched to when ready) after ``RECYCLE_AFTER`` requests, which returns the memory. Without a
worker (``MINIXLA_COMPILE_WORKERS=0``, one core) the parent optimizes and the leak remains.

``MINIXLA_COMPILE_WORKERS``: ``0`` turns the worker off (everything compiles in-process);
unset or empty, it is 1 worker on a machine with two or more cores, none on one core; larger
values mean 1 (one worker is all two cores can use).

Failure handling: the parent waits at most ``WAIT_S`` for a kernel (then compiles it itself and
stops the worker, which may be stuck); a Ctrl-C waits until the request is written whole (and a
request broken off half-written any other way stops the worker: its input cannot be parsed); a forked child closes its copy of the pipes
(the parent's worker exits with the parent) and starts its own worker.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from minixla.backends.llvm.compile_worker import REPLY, REQUEST, _read_exact
from minixla.backends.llvm.target import BUNDLE_SEPARATOR, interrupts_deferred

#: seconds the parent waits for one kernel from the worker before compiling it itself
WAIT_S = 20.0
#: smaller kernels are bundled: linked into one module they cost ~1 ms each, while a module of
#: their own costs ~2.5 ms of fixed LLVM overhead
MIN_REMOTE_CHARS = 3000

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_worker.py")
# (loaded by path: running the file as a script would put this folder, whose math.py would
# shadow the standard library's, on sys.path)
_BOOT = ("import importlib.util as u, sys; s = u.spec_from_file_location('minixla_compile_worker', sys.argv[1]); "
         "m = u.module_from_spec(s); s.loader.exec_module(m); m.main()")


class CompileWorkerError(RuntimeError):
    """The worker could not compile a module (or exited); the parent compiles it instead."""


def workers_requested() -> int:
    """How many compile workers to run: ``MINIXLA_COMPILE_WORKERS`` (0, or 1 for any positive
    value), else 1 when the machine has two or more cores. Raises ValueError for a non-integer."""
    env = os.environ.get("MINIXLA_COMPILE_WORKERS", "").strip()
    if not env:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return 1 if cores > 1 else 0
    try:
        return min(max(int(env), 0), 1)
    except ValueError:
        raise ValueError(f"MINIXLA_COMPILE_WORKERS must be an integer, got {env!r}") from None


class CompileServer:
    """One worker process and the futures of the modules it is compiling.

    ``submit(text)`` returns a ``Future`` of the object code (``bytes``), or None when the
    worker is not ready yet or has exited. A reader thread completes the futures; a worker
    that dies fails every pending future with ``CompileWorkerError``. The future's ``result()``
    waits at most ``WAIT_S`` and then stops the worker (``CompileWorkerError``).
    """

    def __init__(self):
        self.pid = os.getpid()
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
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


_server: CompileServer | None = None
_successor: CompileServer | None = None   # starting, to replace a worker that served RECYCLE_AFTER
_server_lock = threading.Lock()
#: requests after which a worker is replaced by a fresh one. Each module the worker optimizes
#: leaks ~80 KiB inside LLVM (llvmlite's pass pipeline, see ``target.JitModule``); a fresh
#: worker returns that memory to the system, ~20 MiB at most.
RECYCLE_AFTER = 256


def _after_fork_in_child():
    # The child must not write to the parent's worker, and must not keep its input open: the
    # worker exits when the parent closes it. (The child starts its own worker when it compiles.)
    global _server, _successor, _server_lock
    _server_lock = threading.Lock()
    for s in (_server, _successor):
        if s is None:
            continue
        devnull = os.open(os.devnull, os.O_RDWR)
        for pipe in (s.proc.stdin, s.proc.stdout):
            try:  # the pipe's fd now points at /dev/null: the pipe is closed here, and the file
                os.dup2(devnull, pipe.fileno())  # object can still be closed harmlessly later
            except (OSError, ValueError):
                pass
        os.close(devnull)
    _server = _successor = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
#: workers replaced after they exited; past ``MAX_RESTARTS`` (or one that never got ready,
#: e.g. an interpreter without llvmlite) everything compiles in-process
MAX_RESTARTS = 3
_restarts = 0


def server() -> CompileServer | None:
    """The process-wide compile server (started on first use), or None when turned off.
    A forked child starts its own (the parent's pipes are not its to use); a worker that
    exited is replaced, up to ``MAX_RESTARTS`` times (compiles stay in-process until the new
    one is ready, ~0.2 s). A worker that has served ``RECYCLE_AFTER`` requests is replaced
    by a fresh one, started meanwhile: the old one is used until the new one is ready."""
    global _server, _successor, _restarts
    if workers_requested() == 0:
        return None
    with _server_lock:
        if (_server is not None and _server.pid == os.getpid() and _server.alive
                and _server.requests >= RECYCLE_AFTER):
            if _successor is None or not _successor.alive:
                try:
                    _successor = CompileServer()
                    atexit.register(_successor._at_exit)
                except OSError:
                    _successor = None
            elif _successor.ready.is_set():
                _server.retire()
                _server, _successor = _successor, None
        if _server is not None and _server.pid == os.getpid() and not _server.alive:
            if not _server.ready.is_set() or _restarts >= MAX_RESTARTS:
                return None
            _restarts += 1
            _server = None
        if _server is None or _server.pid != os.getpid():
            try:
                _server = CompileServer()
            except OSError:  # cannot start a process here: compile in-process
                return None
            atexit.register(_server._at_exit)
        return _server


class Split:
    """Which of one program's new kernels the worker compiles, decided as they are emitted.

    With a ready worker, the worker compiles all of them (the parent then runs no LLVM
    optimizer, whose every run leaks memory in-process, see ``target.JitModule``): a kernel
    of ``MIN_REMOTE_CHARS`` or more goes as soon as it is emitted, smaller ones are bundled
    into one module until the bundle is that big (``finish`` sends the rest). Without one
    (turned off, not ready yet, exited), the parent compiles them.

    ``remote``: the symbols sent; ``objects()``: ``(IR text, Future of object code)`` per request.
    """

    def __init__(self):
        self.server = server()
        self.remote: set[str] = set()
        self._objects: list[tuple[str, Future]] = []
        self._bundle: list[tuple[str, str]] = []

    def offer(self, symbol: str, text: str) -> bool:
        """Give ``text`` to the worker, alone or in the bundle; False: the parent compiles it."""
        if self.server is None or not self.server.ready.is_set() or not self.server.alive:
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
        text = BUNDLE_SEPARATOR.join(t for _, t in kernels)
        future = self.server.submit(text)
        if future is None:  # (the worker exited meanwhile: these stay with the parent)
            return False
        self._objects.append((text, future))
        self.remote.update(s for s, _ in kernels)
        return True

    def objects(self) -> list[tuple[str, Future]]:
        return list(self._objects)
