"""The thread pool's native hand-off (``native_pool.py``, ``runtime.ThreadPool``): every unit
run exactly once, by several threads, from concurrent callers, after the workers went to sleep
and after a shutdown; and a compiled program's results do not depend on it (bit-identical)."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import runtime
from minixla.backends.llvm.runtime import ThreadPool

pytestmark = pytest.mark.skipif(runtime._native() is None, reason="no native hand-off on this platform")


def _recorder():
    seen, lock = [], threading.Lock()

    def record(table, lo, hi):
        with lock:
            seen.append((table, lo, hi, threading.get_ident()))
    return seen, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(record)


def _units(seen, table=None):
    return sorted(u for t, lo, hi, _ in seen if table is None or t == table for u in range(lo, hi))


def test_every_unit_once_across_threads_and_sleeps():
    seen, fn = _recorder()
    pool = ThreadPool(3)
    try:
        for units, pause in ((7, 0), (100, 0), (2, 0.002), (33, 0.002), (1000, 0)):
            time.sleep(pause)  # (long enough for the workers to stop spinning and sleep)
            seen.clear()
            pool.parallel_for(fn, 5, units)
            assert _units(seen) == list(range(units))
        assert pool._workers == 2
    finally:
        pool.shutdown()
    assert pool._workers == 0
    seen.clear()
    pool.parallel_for(fn, 5, 40)  # (new workers after a shutdown)
    assert _units(seen) == list(range(40))
    pool.shutdown()


def test_concurrent_callers_each_get_all_their_units():
    seen, fn = _recorder()
    pool = ThreadPool(2)

    def caller(table):
        for _ in range(50):
            pool.parallel_for(fn, table, 16)
    threads = [threading.Thread(target=caller, args=(t,)) for t in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pool.shutdown()
    for table in (1, 2, 3):
        assert _units(seen, table) == sorted(list(range(16)) * 50)


def test_program_results_are_the_same_with_the_python_hand_off(monkeypatch):
    from minixla.backends.llvm import compile_module, executable
    monkeypatch.setattr(executable, "PARALLEL_MIN_NS", 0)
    x = np.random.default_rng(3).standard_normal((300, 70)).astype(np.float32)
    w = np.random.default_rng(4).standard_normal((70, 50)).astype(np.float32)
    c = minixla.jit(lambda a, b: mnp.tanh(a @ b) + mnp.sum(a, axis=1, keepdims=True)).lower(x, w).compile()
    exe = compile_module(c.hlo_module, c.buffer_assignment, num_threads=3)
    assert any(k["parallel"] for k in exe.kernels())
    native = [np.asarray(o) for o in exe(x, w)]
    monkeypatch.setattr(runtime, "_native", lambda: None)
    python = [np.asarray(o) for o in exe(x, w)]
    for a, b in zip(native, python):
        assert a.tobytes() == b.tobytes()
