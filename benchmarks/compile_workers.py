"""Cold compile time with 0, 1, 2 ... compile workers (``MINIXLA_COMPILE_WORKERS``).

For each worker count a process of its own compiles the benchmark workloads (softmax,
layernorm, mlp, conv_bias_relu, attention) and the digits CNN of ``examples/digits_cnn.py``
(random weights: compile time does not depend on their values) once to pay the one-time
start-up and waits until its workers are ready; then each program is compiled ``--repeat``
times *cold* (``kernel_cache.clear()`` first, a fresh function each time), in turn in each
process, so that a shared machine's changing load weighs on every worker count alike. Per program it prints the
minimum and median wall time of ``jit(f).lower(*args).compile()`` and the mean CPU time of
the same compile: the parent's (all its threads) + what its workers used meanwhile
(``/proc/<pid>/stat``, in 10 ms ticks: summed over the runs, then averaged). The minimum wall
time is the figure to compare on a shared, loaded machine; the median shows the spread. At the end: resident memory of the parent and of each worker.

    python -m benchmarks.compile_workers [--workers 0 1 2] [--repeat 7] [--only softmax cnn]
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import time

PROGRAMS = ("softmax", "layernorm", "mlp", "conv_bias_relu", "attention", "cnn")


def _programs(only):
    import numpy as np
    from benchmarks import workloads as W
    mns = W.minixla_namespace()
    rng = np.random.default_rng(0)
    out = {}
    for w in W.workloads():
        if w.name in only:
            out[w.name] = (functools.partial(w.fn, mns), w.make_args(rng, 1.0))
    if "cnn" in only:
        import minixla
        import minixla.numpy as mnp
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
        from digits_cnn import cnn
        shapes = {"w1": (3, 3, 1, 16), "b1": (16,), "w2": (3, 3, 16, 32), "b2": (32,), "w3": (2048, 10), "b3": (10,)}
        params = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in shapes.items()}
        x = rng.random((360, 8, 8, 1), dtype=np.float32)
        out["cnn"] = (lambda p, x: cnn(p, x, np=mnp, lax=minixla.lax), (params, x))
    return out


def _workers():
    from minixla.backends.llvm import compile_server
    return [s for s in compile_server.live_servers() if s.alive]


def _ticks(pid) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except OSError:
        return 0


def _rss_mib(pid) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
    except (OSError, StopIteration):
        return 0.0


def _child(only):
    """Serve the driver: one line per program name on stdin, one JSON line per compile back."""
    import minixla
    from minixla.backends.llvm import compile_server, kernel_cache
    programs = _programs(only)
    for fn, args in programs.values():  # start-up: LLVM, workers, GEMM library, imports
        minixla.jit(fn).lower(*args).compile()
    deadline = time.time() + 60
    while time.time() < deadline:  # (the second worker starts on a thread: it may not be there yet)
        pool = compile_server.servers()
        if len(pool) >= compile_server.workers_requested() and all(s.ready.is_set() for s in pool):
            break
        time.sleep(0.05)
    hz = os.sysconf("SC_CLK_TCK")
    print("ready", flush=True)
    for line in sys.stdin:
        name = line.strip()
        if name == "rss":
            print(json.dumps({"parent": _rss_mib(os.getpid()), "workers": [_rss_mib(s.proc.pid) for s in _workers()]}),
                  flush=True)
            continue
        fn, args = programs[name]
        f = functools.partial(lambda fn, *a: fn(*a), fn)  # a fresh function: no jit-cache hit
        kernel_cache.clear()
        gc.collect()
        workers = _workers()
        w0 = [_ticks(s.proc.pid) for s in workers]
        c0, t0 = time.process_time(), time.perf_counter()
        minixla.jit(f).lower(*args).compile()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ticks = sum(_ticks(s.proc.pid) - w for s, w in zip(workers, w0))
        print(json.dumps({"wall": wall * 1e3, "cpu": cpu * 1e3, "worker_cpu": ticks / hz * 1e3}), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--only", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return _child(a.only)
    print(f"cold compile, ms: min / median wall of {a.repeat}, mean CPU parent + workers; "
          f"load average {os.getloadavg()[0]:.1f}")
    # One process per worker count, all started first; then each compile in turn in each of
    # them, so that the load of a shared machine weighs on every count alike.
    children = {}
    for n in a.workers:
        env = dict(os.environ, MINIXLA_COMPILE_WORKERS=str(n))
        children[n] = subprocess.Popen([sys.executable, "-m", "benchmarks.compile_workers", "--child", "--only",
                                        *a.only], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if children[n].stdout.readline().strip() != "ready":
            sys.exit(f"the process with {n} workers failed")

    def ask(n, line):
        children[n].stdin.write(line + "\n")
        children[n].stdin.flush()
        return json.loads(children[n].stdout.readline())

    rows = {n: {name: {"wall": [], "cpu": [], "worker_cpu": []} for name in a.only} for n in a.workers}
    for _ in range(a.repeat):
        for name in a.only:
            for n in a.workers:
                r = ask(n, name)
                for k, v in r.items():
                    rows[n][name][k].append(v)
    rss = {n: ask(n, "rss") for n in a.workers}
    for child in children.values():
        child.stdin.close()
        child.wait()
    head = "| program | " + " | ".join(f"{n} workers: wall min / med | CPU" for n in a.workers) + " |"
    print(head)
    print("|---|" + "---:|---:|" * len(a.workers))
    for name in a.only:
        cells = []
        for n in a.workers:  # (worker CPU is counted in 10 ms ticks: its mean is the figure)
            r = rows[n][name]
            cells.append(f"{min(r['wall']):.0f} / {statistics.median(r['wall']):.0f} | "
                         f"{statistics.mean(r['cpu']):.0f} + {statistics.mean(r['worker_cpu']):.0f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for n in a.workers:
        print(f"RSS with {n} workers: parent {rss[n]['parent']:.0f} MiB, workers "
              + (", ".join(f"{w:.0f}" for w in rss[n]["workers"]) or "-") + " MiB")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
