"""The compile worker (compile_server.py / compile_worker.py): kernels compiled in a second
process are the same machine code, and every failure falls back to compiling in-process."""
import ctypes
import os
import re
import signal
import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.backends.llvm import compile_server, kernel_cache, target

KERNEL = """
define void @"store_n"(ptr %p, i64 %n) noinline nounwind {
entry:
  store i64 %n, ptr %p
  ret void
}
"""
CALLER = """
declare void @"store_n"(ptr, i64)
define void @"store_42"(ptr %p) nounwind {
entry:
  call void @"store_n"(ptr %p, i64 42)
  ret void
}
"""


@pytest.fixture
def fresh_server():
    srv = compile_server.CompileServer()
    assert srv.ready.wait(60), "the compile worker did not start"
    yield srv
    srv.close()
    srv.proc.wait(60)


def _call_store_42(jit):
    out = ctypes.c_int64(0)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(jit.addresses["store_42"])(ctypes.addressof(out))
    return out.value


def test_worker_returns_object_code_the_engine_links(fresh_server):
    future = fresh_server.submit(KERNEL)
    assert future.result(60).startswith(b"\x7fELF")
    jit = target.JitModule(CALLER, ["store_42", "store_n"], objects=[(KERNEL, fresh_server.submit(KERNEL))])
    assert jit.worker_modules == 1
    assert _call_store_42(jit) == 42
    assert 'define void @"store_n"' in jit.llvm_ir
    assert "define void @store_n" in jit.function_ir("store_n")  # the worker's module, for dumps
    assert "store_n" in jit.asm and "store_42" in jit.asm
    assert fresh_server.pending_chars == 0


def test_worker_reports_bad_ir_and_the_parent_raises_it(fresh_server):
    bad = "define void @f() {\nentry:\n  ret i32 0\n}\n"
    with pytest.raises(compile_server.CompileWorkerError, match="RuntimeError"):
        fresh_server.submit(bad).result(60)
    assert fresh_server.alive  # one bad module does not stop the worker
    with pytest.raises(RuntimeError):  # compiled again here: the user sees LLVM's own error
        target.JitModule(CALLER, ["store_42"], objects=[(bad, fresh_server.submit(bad))])


def test_dead_worker_fails_pending_futures_and_the_parent_compiles(fresh_server):
    fresh_server.proc.kill()
    fresh_server.proc.wait(60)
    future = fresh_server.submit(KERNEL)
    if future is not None:  # (the reader thread may not have seen the exit yet)
        with pytest.raises(compile_server.CompileWorkerError):
            future.result(60)
        jit = target.JitModule(CALLER, ["store_42", "store_n"], objects=[(KERNEL, future)])
        assert jit.worker_modules == 0 and _call_store_42(jit) == 42
    fresh_server._reader.join(60)
    assert not fresh_server.alive and fresh_server.submit(KERNEL) is None


def test_split_sends_big_kernels_alone_and_small_ones_bundled():
    class FakeServer(_FakeServer):
        sent = []
        pending_chars = 0

        def __init__(self):
            pass

        def submit(self, text):  # (always idle: every request goes at once)
            self.sent.append(text)
            return Future()

    split = compile_server.Split()
    split.servers = [FakeServer()]
    big = "x" * compile_server.MIN_REMOTE_CHARS
    small = "s" * (compile_server.MIN_REMOTE_CHARS // 2 - 1)
    assert split.offer("a", big)                   # sent at once
    assert split.offer("s1", small) and split.offer("s2", small)  # held: the bundle is still small
    assert split.offer("b", big * 2)
    assert split.offer("s3", "t" * 3)               # the bundle is now big enough: sent
    assert split.offer("s4", small)
    split.finish()                                  # the rest of the bundle
    sep = target.BUNDLE_SEPARATOR
    assert FakeServer.sent == [big, big * 2, sep.join([small, small, "t" * 3]), small]
    assert split.remote == {"a", "b", "s1", "s2", "s3", "s4"} and len(split.objects()) == 4
    split.servers = []                              # no worker: the parent compiles
    assert not split.offer("c", big)


def test_worker_compiles_a_bundle_of_modules(fresh_server):
    other = KERNEL.replace("store_n", "store_m")
    code = fresh_server.submit(KERNEL + target.BUNDLE_SEPARATOR + other).result(60)
    assert code.startswith(b"\x7fELF")
    jit = target.JitModule(CALLER, ["store_42", "store_n", "store_m"],
                           objects=[(KERNEL + target.BUNDLE_SEPARATOR + other, fresh_server.submit(
                               KERNEL + target.BUNDLE_SEPARATOR + other))])
    assert jit.worker_modules == 1 and _call_store_42(jit) == 42 and jit.addresses["store_m"]
    assert target.BUNDLE_SEPARATOR not in jit.llvm_ir and "store_m" in jit.optimized_llvm_ir


def test_a_worker_is_replaced_after_recycle_after_requests(monkeypatch):
    # The worker leaks LLVM memory with every module it optimizes: after RECYCLE_AFTER requests
    # a fresh one takes over (once ready) and the old one exits when done with what it has.
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "1")
    monkeypatch.setattr(compile_server, "RECYCLE_AFTER", 3)
    old = compile_server.server()
    assert old is not None and old.ready.wait(60)
    futures = [old.submit(KERNEL) for _ in range(3)]
    assert compile_server.server() is old  # the successor is starting
    successor = compile_server._slots[0].successor
    assert successor is not None and successor.ready.wait(60)
    new = compile_server.server()
    assert new is not old and new.alive and new.requests == 0
    assert old.submit(KERNEL) is None  # retired: takes nothing new
    assert all(f.result(60).startswith(b"\x7fELF") for f in futures)  # ... but answers what it had
    old._reader.join(60)
    assert old.proc.returncode is not None  # exited and reaped
    assert new.submit(KERNEL).result(60).startswith(b"\x7fELF")


def test_workers_requested_reads_the_environment(monkeypatch):
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "0")
    assert compile_server.workers_requested() == 0 and compile_server.server() is None
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "4")  # the number of workers
    assert compile_server.workers_requested() == 4
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "-1")
    assert compile_server.workers_requested() == 0
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "")  # empty: the default, as MINIXLA_NUM_THREADS
    monkeypatch.setattr(compile_server.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert compile_server.workers_requested() == 2
    monkeypatch.setattr(compile_server.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert compile_server.workers_requested() == 0
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "two")
    with pytest.raises(ValueError, match="MINIXLA_COMPILE_WORKERS"):
        compile_server.workers_requested()


def test_server_is_replaced_after_a_fork_or_an_exit(monkeypatch):
    monkeypatch.delenv("MINIXLA_COMPILE_WORKERS", raising=False)
    monkeypatch.setattr(compile_server.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    first = compile_server.server()
    assert compile_server.server() is first
    monkeypatch.setattr(first, "pid", -1)  # as seen from a forked child
    second = compile_server.server()
    assert second is not first
    assert second.ready.wait(60)
    monkeypatch.setattr(compile_server, "_restarts", 0)
    second.proc.kill()
    second._reader.join(60)
    third = compile_server.server()
    assert third is not second and third.alive and compile_server._restarts == 1
    monkeypatch.setattr(compile_server, "_restarts", compile_server.MAX_RESTARTS)
    assert third.ready.wait(60)
    third.proc.kill()
    third._reader.join(60)
    assert compile_server.server() is None  # no more restarts: compile in-process


def test_a_worker_that_never_starts_is_not_restarted(monkeypatch):
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "1")
    monkeypatch.setattr(compile_server, "_BOOT", "raise SystemExit(1)")  # as without llvmlite
    monkeypatch.setattr(compile_server, "_slots", [])
    broken = compile_server.server()
    broken._reader.join(60)
    assert not broken.alive and not broken.ready.is_set()
    assert compile_server.server() is None and compile_server.Split().servers == []
    monkeypatch.setattr(compile_server, "_slots", [])  # (the next test starts a good one)


def _softmax(x):
    e = mnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_program_compiled_with_the_worker_is_bit_identical(monkeypatch):
    x = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32)
    x[3, 7], x[5] = np.nan, -np.inf
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "0")
    kernel_cache.clear()
    local = minixla.jit(_softmax).lower(x).compile()
    assert local.executable._jit.worker_modules == 0
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "1")
    assert compile_server.server().ready.wait(60)
    kernel_cache.clear()
    remote = minixla.jit(_softmax).lower(x).compile()
    assert remote.executable._jit.worker_modules == 1  # the row kernel
    np.testing.assert_array_equal(np.asarray(remote(x)).view(np.int32), np.asarray(local(x)).view(np.int32))
    # the same optimized kernel, wherever it was compiled
    symbol, = [k.symbol for k in remote.executable._kernels]
    def body(exe):  # (attribute groups are numbered per module)
        return re.sub(r"#\d+", "#N", exe._jit.function_ir(symbol))
    assert body(local.executable) == body(remote.executable)


class _FakeServer:
    """A ready worker that answers when the test says so (``answer``)."""
    alive = True
    retiring = False
    ready = threading.Event()
    ready.set()

    def __init__(self):
        self.sent, self.futures, self.pending_chars = [], [], 0
        self.refuses = self.instant = False

    def submit(self, text):
        if self.refuses:  # (exited since the Split was made)
            return None
        self.sent.append(text)
        future = Future()
        if self.instant:
            future.set_result(b"code of " + text.encode())
        else:
            self.futures.append((future, text))
            self.pending_chars += len(text)
        return future

    def answer(self):
        future, text = self.futures.pop(0)
        self.pending_chars -= len(text)
        future.set_result(b"code of " + text.encode())

    def fail(self):
        self.alive = False
        for future, text in self.futures:
            future.set_exception(compile_server.CompileWorkerError("the compile worker exited"))
        self.futures, self.pending_chars = [], 0


def _eventually(condition):
    deadline = time.time() + 30
    while not condition() and time.time() < deadline:
        time.sleep(0.005)
    assert condition()


def test_split_gives_each_request_to_the_first_worker_free():
    a, b = _FakeServer(), _FakeServer()
    split = compile_server.Split()
    split.servers = [a, b]
    k = ["%d" % i * compile_server.MIN_REMOTE_CHARS for i in range(8)]
    assert split.offer("k0", k[0]) and split.offer("k1", k[1])
    assert a.sent == [k[0]] and b.sent == [k[1]]         # each idle worker takes one
    assert split.offer("k2", k[2]) and split.offer("k3", k[3])
    assert a.sent == [k[0]] and b.sent == [k[1]]         # both busy: they wait in the parent
    b.answer()                                           # b is free first: it takes the next one
    _eventually(lambda: b.sent == [k[1], k[2]])
    a.answer()
    _eventually(lambda: a.sent == [k[0], k[3]])
    requests = dict(zip(["k0", "k1", "k2", "k3"], (f for _, f in split.objects())))
    assert requests["k1"].result() == b"code of " + k[1].encode()
    # a worker that fails: its request fails (the parent compiles it), the other takes the rest
    assert split.offer("k4", k[4])
    a.fail()
    with pytest.raises(compile_server.CompileWorkerError):
        requests["k3"].result()
    b.answer()
    _eventually(lambda: b.sent[-1] == k[4])
    # the parent waits for a request no worker took yet: it goes to the least busy one at once
    assert split.offer("k5", k[5])                       # b is busy with k4
    b.instant = True
    assert split.objects()[-1][1].result() == b"code of " + k[5].encode() and b.sent[-1] == k[5]
    # none left: a waiting request fails, and a new kernel stays with the parent
    b.instant = False
    b.answer()
    b.pending_chars = 1                                  # (busy with another program's kernel)
    assert split.offer("k6", k[6]) and split.offer("k7", k[7])  # k6 sent (nothing in flight), k7 waits
    b.fail()
    with pytest.raises(compile_server.CompileWorkerError):
        split.objects()[-1][1].result()
    assert not split.offer("k8", k[0]) and "k8" not in split.remote
    a.alive, a.refuses = True, True                      # (one that refuses what it is sent)
    assert split.offer("k9", k[0])
    with pytest.raises(compile_server.CompileWorkerError):
        split.objects()[-1][1].result()


def _two_row_kernels(x, y):
    e = mnp.exp(x - x.max(axis=-1, keepdims=True))
    m = y - y.mean(axis=-1, keepdims=True)
    return e / e.sum(axis=-1, keepdims=True), m / mnp.sqrt((m * m).mean(axis=-1, keepdims=True) + 1e-5)


def _two_row_inputs():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((64, 512), np.float32), rng.standard_normal((32, 256), np.float32)
    x[2, 5], y[4] = np.nan, np.inf
    return x, y


def _pool_of_two(monkeypatch):
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "2")
    deadline = time.time() + 60
    while time.time() < deadline:
        pool = compile_server.servers()
        if len(pool) == 2 and all(s.ready.is_set() for s in pool):
            return pool
        time.sleep(0.05)
    pytest.fail("two compile workers did not start")


def _same_program(a, b):
    """The same outputs (bit for bit) and the same optimized kernels."""
    x, y = _two_row_inputs()
    for u, v in zip(a(x, y), b(x, y)):
        np.testing.assert_array_equal(np.asarray(u).view(np.int32), np.asarray(v).view(np.int32))
    symbols = [k.symbol for k in a.executable._kernels]
    assert symbols == [k.symbol for k in b.executable._kernels] and len(symbols) == 2
    def body(exe, symbol):  # (attribute groups and metadata are numbered per module)
        return re.sub(r"![0-9]+", "!N", re.sub(r"#\d+", "#N", exe._jit.function_ir(symbol)))
    assert all(body(a.executable, s) == body(b.executable, s) for s in symbols)


def test_two_workers_compile_one_program_and_the_machine_code_is_the_same(monkeypatch):
    x, y = _two_row_inputs()
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "0")
    kernel_cache.clear()
    local = minixla.jit(_two_row_kernels).lower(x, y).compile()
    assert local.executable._jit.worker_modules == 0
    a, b = _pool_of_two(monkeypatch)
    kernel_cache.clear()
    before = a.requests, b.requests
    # Both workers stopped until both kernels are sent: neither can answer (and so lower its
    # queue) before the second kernel is dispatched, so the choice of worker is deterministic.
    compiled = {}
    thread = threading.Thread(target=lambda: compiled.update(c=minixla.jit(_two_row_kernels).lower(x, y).compile()))
    for s in (a, b):
        os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        thread.start()
        deadline = time.time() + 60
        while a.requests + b.requests < sum(before) + 2 and thread.is_alive() and time.time() < deadline:
            time.sleep(0.01)
    finally:
        for s in (a, b):
            os.kill(s.proc.pid, signal.SIGCONT)
    thread.join(60)
    assert (a.requests - before[0], b.requests - before[1]) == (1, 1)  # one kernel each
    remote = compiled["c"]
    assert remote.executable._jit.worker_modules == 2
    _same_program(local, remote)


def test_a_failing_worker_is_replaced_while_the_other_keeps_compiling(monkeypatch):
    x, y = _two_row_inputs()
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "0")
    kernel_cache.clear()
    local = minixla.jit(_two_row_kernels).lower(x, y).compile()
    a, b = _pool_of_two(monkeypatch)
    monkeypatch.setattr(compile_server, "_restarts", 0)
    b.proc.kill()
    b._reader.join(60)
    assert not b.alive
    kernel_cache.clear()
    before = a.requests
    remote = minixla.jit(_two_row_kernels).lower(x, y).compile()  # b's replacement is starting
    assert remote.executable._jit.worker_modules == 2 and a.requests > before
    _same_program(local, remote)
    a2, b2 = _pool_of_two(monkeypatch)
    assert a2 is a and b2 is not b and b2.alive and compile_server._restarts == 1
    # fewer workers asked for: the second one finishes what it has and exits
    monkeypatch.setenv("MINIXLA_COMPILE_WORKERS", "1")
    assert compile_server.servers() == [a] and b2.retiring
    b2._reader.join(60)
    assert b2.proc.returncode is not None


def test_a_request_broken_off_half_written_stops_the_worker(fresh_server):
    """Regression (fresh-user report): a Ctrl-C inside submit's write left half a request on
    the pipe; the worker waited for the rest and every later compile hung. (A Ctrl-C now waits
    for the whole request; anything else that breaks one off stops the worker.)"""
    real = fresh_server.proc.stdin

    class HalfThenInterrupt:
        def write(self, data):
            real.write(data[: len(data) // 2])
            real.flush()
            raise KeyboardInterrupt

        def flush(self):
            pass

    fresh_server.proc.stdin = HalfThenInterrupt()
    with pytest.raises(KeyboardInterrupt):
        fresh_server.submit(KERNEL)
    fresh_server.proc.stdin = real
    fresh_server._reader.join(60)
    assert not fresh_server.alive and fresh_server.proc.returncode is not None  # stopped and reaped
    assert fresh_server.submit(KERNEL) is None


def test_a_stalled_worker_times_out_and_the_parent_compiles(fresh_server, monkeypatch):
    """Regression (fresh-user report): a stopped worker blocked compiling until it resumed."""
    monkeypatch.setattr(compile_server, "WAIT_S", 0.5)
    os.kill(fresh_server.proc.pid, signal.SIGSTOP)
    future = fresh_server.submit(KERNEL)
    t0 = time.perf_counter()
    jit = target.JitModule(CALLER, ["store_42", "store_n"], objects=[(KERNEL, future)])
    assert time.perf_counter() - t0 < 30
    assert jit.worker_modules == 0 and _call_store_42(jit) == 42
    fresh_server._reader.join(60)
    assert not fresh_server.alive and fresh_server.proc.returncode is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:os.fork")
def test_a_forked_child_does_not_keep_the_parents_worker_alive(fresh_server, monkeypatch):
    """Regression (fresh-user report): a child inherited the worker's input pipe, so the worker
    outlived its parent as long as the child ran."""
    monkeypatch.setattr(compile_server, "_slots", [compile_server._Slot(fresh_server)])
    pid = os.fork()
    if pid == 0:  # the child: its copy of the pipes is closed at the fork
        time.sleep(5)
        os._exit(0)
    try:
        fresh_server.close()  # the parent closes the worker's input: it must exit now
        fresh_server.proc.wait(timeout=4)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:os.fork")
def test_fork_while_another_thread_is_inside_llvm():
    """Regression (fresh-user report): forking while another thread held llvmlite's lock left the
    child's copy locked, and its first compile hung. The fork now waits for the LLVM call."""
    from llvmlite.binding import ffi
    inside = threading.Event()

    def long_llvm_call():
        with ffi.lib._lock:
            inside.set()
            time.sleep(0.3)

    thread = threading.Thread(target=long_llvm_call)
    thread.start()
    inside.wait(10)
    pid = os.fork()
    if pid == 0:
        target.parse(KERNEL)  # hangs if the lock came over held
        os._exit(0)
    thread.join()
    deadline = time.time() + 30
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung on llvmlite's lock")


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler (a test runner may have replaced it), restored after."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_interrupts_are_held_until_the_llvm_work_is_done(default_sigint):
    reached_end = False
    with pytest.raises(KeyboardInterrupt):
        with target.interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # (the handler runs here: it must only record the interrupt)
            reached_end = True
    assert reached_end and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_while_linking_raises_after_the_link_and_compiling_goes_on(default_sigint, monkeypatch):
    """Regression (fresh-user report): a KeyboardInterrupt inside llvmlite's link_in (after
    LLVM destroyed the linked module, before llvmlite forgot it) freed the module twice: a
    segfault at the next garbage collection. The interrupt now waits for the LLVM work."""
    from llvmlite import binding as llvm
    original = llvm.ModuleRef.link_in
    linked = []

    def link_in_interrupted(self, other, preserve=False):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # (without the fix, the KeyboardInterrupt is raised here)
        original(self, other, preserve)
        linked.append(True)

    monkeypatch.setattr(llvm.ModuleRef, "link_in", link_in_interrupted)
    with pytest.raises(KeyboardInterrupt):
        target.JitModule(CALLER, ["store_42"], link=[KERNEL])
    assert linked  # the link finished before the interrupt was raised
    monkeypatch.setattr(llvm.ModuleRef, "link_in", original)
    import gc
    gc.collect()
    assert _call_store_42(target.JitModule(CALLER, ["store_42"], link=[KERNEL])) == 42


def test_a_stopped_worker_leaves_no_open_pipes(fresh_server):
    fresh_server.kill()
    fresh_server._reader.join(60)
    assert fresh_server.proc.stdout.closed and fresh_server.proc.stdin.closed
    assert fresh_server.proc.returncode is not None


def test_ctrl_c_while_sending_a_request_waits_for_the_whole_request(fresh_server, default_sigint):
    real = fresh_server.proc.stdin

    class InterruptedWrite:
        def write(self, data):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            real.write(data)

        def flush(self):
            real.flush()

    fresh_server.proc.stdin = InterruptedWrite()
    with pytest.raises(KeyboardInterrupt):
        fresh_server.submit(KERNEL)
    fresh_server.proc.stdin = real
    assert fresh_server.alive  # the request went out whole: the worker answers it and the next
    assert fresh_server.submit(KERNEL).result(60).startswith(b"\x7fELF")
