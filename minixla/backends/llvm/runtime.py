"""The thread pool kernels are split over (XLA:CPU's intra-op Eigen thread pool).

A kernel computes a range ``[lo, hi)`` of its parallel units (see ``kernels.py``); a parallel
call cuts ``[0, units)`` into a few contiguous chunks per thread, which the calling thread and
the worker threads claim one at a time, and returns when all are done. This works from
Python because ``ctypes`` releases the GIL for the duration of a foreign call: while the
kernels run, the threads really run in parallel (measured: ~1.9x on 2 cores).

``MINIXLA_NUM_THREADS`` sets the thread count (default: the CPUs this process may run on).
The workers start on first use and are daemon threads.

The hand-off is native (``native_pool.py``): the caller posts a call into the pool's job words,
every thread claims chunks there by compare-and-swap and calls the kernel from native code, so
no chunk passes the GIL. Between calls a worker *spins* on the job's ticket for up to
``SPIN_US`` (as Eigen's pool, which XLA:CPU's kernels run on, spins before it sleeps), then
sleeps on a futex. (On this 2-vCPU VM a blocked worker took 20-130 us to wake, and a
training step has ten parallel kernels with serial ones between them.) A second Python thread
calling the same pool while a call is in flight runs its kernel on its own thread, whole. Without
the native functions (no JIT) the Python hand-off below is used: a queue per worker.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading
import weakref

from minixla.backends.llvm import native_pool

#: chunks per thread of a parallel call (more: better balance under load, more calls)
CHUNKS_PER_THREAD = 4
#: how long a worker spins for the next call before it blocks (native hand-off)
SPIN_US = 200


def default_num_threads() -> int:
    """``MINIXLA_NUM_THREADS`` if set (>= 1), else the number of CPUs available to this process."""
    env = os.environ.get("MINIXLA_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"MINIXLA_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"MINIXLA_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class ThreadPool:
    """``size - 1`` worker threads plus the caller.

    ``parallel_for(fn, table, units)`` calls ``fn(table, lo, hi)`` on disjoint ranges covering
    ``[0, units)``; ``fn`` is a ctypes function (it must not need the GIL). Several Python
    threads may use one pool at once: each call waits only for its own ranges.
    """

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a thread pool needs at least one thread, got {size}")
        self.size = size
        self._queues: list[queue.SimpleQueue] = []
        self._lock = threading.Lock()
        self._reset_native()
        _all_pools.add(self)

    def _reset_native(self):
        self._job = native_pool.new_job()
        self._seq = 0
        self._workers = 0
        self._busy = threading.Lock()  # (held by the call in flight)

    def _start(self):
        with self._lock:
            while len(self._queues) < self.size - 1:
                q = queue.SimpleQueue()
                threading.Thread(target=_worker, args=(q,), daemon=True,
                                 name=f"minixla-worker-{len(self._queues)}").start()
                self._queues.append(q)

    def _start_native(self, native):
        with self._lock:
            self._native = native
            polls = max(1, int(SPIN_US * native.polls_per_us))
            while self._workers < self.size - 1:
                # (the thread holds the job array, not the pool: ``__del__`` can stop it)
                threading.Thread(target=native.worker, args=(self._job.ctypes.data, self._seq, polls),
                                 daemon=True, name=f"minixla-worker-{self._workers}").start()
                self._workers += 1

    def parallel_for(self, fn, table: int, units: int) -> None:
        """``[0, units)`` is cut into up to ``CHUNKS_PER_THREAD * size`` contiguous chunks that
        the threads claim one by one (dynamic scheduling: a thread that shares its core with
        another process simply claims fewer chunks). The caller returns as soon as every chunk
        is done: a worker that wakes up late finds nothing left to claim."""
        n = min(self.size, units)
        if n <= 1:
            fn(table, 0, units)
            return
        native = _native()
        if native is not None:
            if not self._busy.acquire(blocking=False):  # another thread's call is in flight
                fn(table, 0, units)
                return
            try:
                if self._workers < self.size - 1:
                    self._start_native(native)
                self._seq = self._seq % 0x7FFFFFFF + 1
                native.call(self._job.ctypes.data, ctypes.cast(fn, ctypes.c_void_p).value, table, units,
                            min(units, CHUNKS_PER_THREAD * n), self._seq)
            finally:
                self._busy.release()
            return
        if len(self._queues) < n - 1:
            self._start()
        chunks = min(units, CHUNKS_PER_THREAD * n)
        call = _Call(fn, table, [units * i // chunks for i in range(chunks + 1)])
        for i in range(n - 1):
            self._queues[i].put(call)
        call.run()
        call.wait()
    def shutdown(self):
        """Stop the workers (they finish what they were given first)."""
        with self._lock:
            for q in self._queues:
                q.put(None)
            self._queues = []
            self._stop_native()

    def _stop_native(self):
        if self._workers:
            _stopped_jobs.append(self._job)  # (stopped workers may still read it on their way out)
            self._native.stop(self._job.ctypes.data)
            self._job = native_pool.new_job()
            self._workers = 0

    def __del__(self):  # the workers hold only their queues / the job array: stop them with the pool
        for q in getattr(self, "_queues", ()):
            q.put(None)
        if getattr(self, "_workers", 0):
            try:
                self._stop_native()
            except Exception:  # pragma: no cover - at interpreter exit: the daemon threads die with it
                pass


class _Call:
    """One parallel call: chunk bounds, the claim counter and the completion count."""

    def __init__(self, fn, table, bounds):
        self.fn, self.table, self.bounds = fn, table, bounds
        self.claim = itertools.count().__next__  # atomic under the GIL
        self.chunks = len(bounds) - 1
        self.finished = 0
        self.error = None
        self._lock = threading.Lock()
        self._done = threading.Event()

    def run(self):
        while True:
            i = self.claim()
            if i >= self.chunks:
                return
            try:
                self.fn(self.table, self.bounds[i], self.bounds[i + 1])
            except BaseException as e:  # pragma: no cover - a ctypes call does not raise
                self.error = e
            with self._lock:
                self.finished += 1
                if self.finished == self.chunks:
                    self._done.set()

    def wait(self):
        self._done.wait()
        if self.error is not None:  # pragma: no cover
            raise self.error


_stopped_jobs: list = []


_native_lock = threading.Lock()
_native_pool = None


def _native():
    """The compiled hand-off functions (``native_pool.NativePool``), or None without a JIT."""
    global _native_pool
    if _native_pool is None:
        with _native_lock:
            if _native_pool is None:
                try:
                    _native_pool = native_pool.NativePool()
                except Exception:  # pragma: no cover - no JIT here: the Python hand-off
                    _native_pool = False
    return _native_pool or None


def _worker(q: queue.SimpleQueue):
    while True:
        call = q.get()
        if call is None:
            return
        call.run()


_pool: ThreadPool | None = None
_pool_lock = threading.Lock()
_all_pools: "weakref.WeakSet[ThreadPool]" = weakref.WeakSet()


def _after_fork_in_child():
    # The workers did not survive the fork: forget them (the next parallel call starts new ones).
    global _pool_lock
    _pool_lock = threading.Lock()
    for pool in list(_all_pools):
        pool._queues = []
        pool._lock = threading.Lock()
        pool._reset_native()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def thread_pool() -> ThreadPool:
    """The process-wide pool, sized by ``default_num_threads()`` (re-read on every call, so
    changing ``MINIXLA_NUM_THREADS`` takes effect for executables compiled afterwards)."""
    global _pool
    size = default_num_threads()
    with _pool_lock:
        if _pool is None or _pool.size != size:
            if _pool is not None:
                _pool.shutdown()
            _pool = ThreadPool(size)
        return _pool
