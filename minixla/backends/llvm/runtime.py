"""The thread pool kernels are split over (XLA:CPU's intra-op Eigen thread pool).

A kernel computes a range ``[lo, hi)`` of its parallel units (see ``kernels.py``); a parallel
call cuts ``[0, units)`` into one contiguous range per thread, runs the first on the calling
thread and the others on worker threads, and returns when all are done. This works from
Python because ``ctypes`` releases the GIL for the duration of a foreign call: while the
kernels run, the threads really run in parallel (measured: ~1.9x on 2 cores).

``MINIXLA_NUM_THREADS`` sets the thread count (default: the CPUs this process may run on).
The workers start on first use and are daemon threads.
"""
from __future__ import annotations

import os
import queue
import threading


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

    def _start(self):
        with self._lock:
            while len(self._queues) < self.size - 1:
                q = queue.SimpleQueue()
                threading.Thread(target=_worker, args=(q,), daemon=True,
                                 name=f"minixla-worker-{len(self._queues)}").start()
                self._queues.append(q)

    def parallel_for(self, fn, table: int, units: int) -> None:
        n = min(self.size, units)
        if n <= 1:
            fn(table, 0, units)
            return
        if len(self._queues) < n - 1:
            self._start()
        bounds = [units * i // n for i in range(n + 1)]
        done = queue.SimpleQueue()
        for i in range(1, n):
            self._queues[i - 1].put((fn, table, bounds[i], bounds[i + 1], done))
        try:
            fn(table, bounds[0], bounds[1])
        finally:
            for _ in range(n - 1):
                error = done.get()
                if error is not None:
                    raise error


    def shutdown(self):
        """Stop the workers (they finish what they were given first)."""
        with self._lock:
            for q in self._queues:
                q.put(None)
            self._queues = []


def _worker(q: queue.SimpleQueue):
    while True:
        task = q.get()
        if task is None:
            return
        fn, table, lo, hi, done = task
        try:
            fn(table, lo, hi)
        except BaseException as e:  # pragma: no cover - a ctypes call does not raise
            done.put(e)
        else:
            done.put(None)


_pool: ThreadPool | None = None
_pool_lock = threading.Lock()


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
