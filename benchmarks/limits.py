"""This machine's limits, measured in the same run as the workloads.

* **Peak FMA throughput**: a generated loop of ``ACCUMULATORS`` independent
  ``<16 x float>`` (or the host's widest) ``llvm.fma`` chains -- enough in flight to cover
  the FMA latency on every pipe -- run on 1 thread and on all pool threads. FLOPs count 2
  per lane per FMA.
* **DRAM copy bandwidth**: a generated ``out[i] = in[i]`` over arrays far larger than the
  last-level cache, on 1 thread and on all pool threads; bytes count read + write (STREAM's
  "copy" convention; the write-allocate read is not counted).

Both use the same JIT and thread pool as the compiled programs, so they measure what the
generated code could reach on this machine, in this process.
"""
from __future__ import annotations

import ctypes
import statistics
import time

import numpy as np

from minixla.backends.llvm.gemm import VECTOR_BYTES
from minixla.backends.llvm.runtime import thread_pool
from minixla.backends.llvm.target import JitModule

#: float lanes of the host's vector registers, and independent FMA chains (enough to cover
#: the FMA latency on every pipe, few enough to stay in registers)
LANES = VECTOR_BYTES // 4
ACCUMULATORS = 10 if VECTOR_BYTES == 32 else 12
_FMA_STEPS = 4096      # iterations of the FMA loop per unit
_COPY_CHUNK = 1 << 16  # floats per unit of the copy


def _splat(value: float) -> str:
    return "<" + ", ".join([f"float {value}"] * LANES) + ">"


def _fma_ir() -> str:
    vec = f"<{LANES} x float>"
    accs = "\n".join(f"  %a{i} = phi {vec} [ zeroinitializer, %entry ], [ %n{i}, %loop ]" for i in range(ACCUMULATORS))
    fmas = "\n".join(f"  %n{i} = call {vec} @llvm.fma.v{LANES}f32({vec} %a{i}, {vec} %x, {vec} %y)"
                     for i in range(ACCUMULATORS))
    total = [f"%n0"]
    sums = []
    for i in range(1, ACCUMULATORS):
        sums.append(f"  %s{i} = fadd {vec} {total[-1]}, %n{i}")
        total.append(f"%s{i}")
    return f"""
declare {vec} @llvm.fma.v{LANES}f32({vec}, {vec}, {vec})

define void @fma_peak(ptr noalias %out, i64 %lo, i64 %hi) nounwind {{
entry:
  %units = sub i64 %hi, %lo
  %steps = mul i64 %units, {_FMA_STEPS}
  %x = insertelement {vec} {_splat(0.5)}, float 0.75, i32 0
  %y = insertelement {vec} {_splat(0.25)}, float 0.125, i32 0
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
{accs}
{fmas}
  %i.next = add i64 %i, 1
  %done = icmp uge i64 %i.next, %steps
  br i1 %done, label %exit, label %loop
exit:
{chr(10).join(sums)}
  %r = extractelement {vec} {total[-1]}, i32 0
  %where = and i64 %lo, 63
  %slot = getelementptr float, ptr %out, i64 %where
  store float %r, ptr %slot
  ret void
}}
"""


_COPY_IR = f"""
define void @copy(ptr noalias %table, i64 %lo, i64 %hi) nounwind {{
entry:
  %src.slot = getelementptr ptr, ptr %table, i64 0
  %dst.slot = getelementptr ptr, ptr %table, i64 1
  %src = load ptr, ptr %src.slot
  %dst = load ptr, ptr %dst.slot
  %start = mul i64 %lo, {_COPY_CHUNK}
  %stop = mul i64 %hi, {_COPY_CHUNK}
  call void @copy_range(ptr %dst, ptr %src, i64 %start, i64 %stop)
  ret void
}}

define internal void @copy_range(ptr noalias %dst, ptr noalias %src, i64 %start, i64 %stop) nounwind {{
entry:
  %empty = icmp uge i64 %start, %stop
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [ %start, %entry ], [ %i.next, %loop ]
  %p = getelementptr inbounds float, ptr %src, i64 %i
  %v = load float, ptr %p
  %q = getelementptr inbounds float, ptr %dst, i64 %i
  store float %v, ptr %q
  %i.next = add i64 %i, 1
  %done = icmp uge i64 %i.next, %stop
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""


#: untimed runs before timing, in seconds: on this VM two busy threads run at half speed for
#: ~50 ms after the cores were idle (see ``run._sampler``)
WARM_UP_S = 0.15


def _median_time(fn, repeat: int) -> float:
    t0 = time.perf_counter()
    fn()
    while time.perf_counter() - t0 < WARM_UP_S:
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_fma_gflops(threads: int, repeat: int = 5, seconds: float = 0.05) -> float:
    """FLOP/s (in GFLOP/s) of independent vector FMAs on ``threads`` threads."""
    jit = JitModule(_fma_ir(), ["fma_peak"], optimize=True)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(jit.addresses["fma_peak"])
    out = np.zeros(64, np.float32)  # the kernel stores its result at out[lo % 64]
    pool = thread_pool()
    flops_per_unit = 2 * LANES * ACCUMULATORS * _FMA_STEPS
    # Calibrate: one unit on one thread.
    t1 = _median_time(lambda: fn(out.ctypes.data, 0, 1), 3)
    per_thread = max(1, int(seconds / max(t1, 1e-7)))
    units = per_thread * threads
    if threads == 1:
        t = _median_time(lambda: fn(out.ctypes.data, 0, units), repeat)
    else:
        t = _median_time(lambda: _parallel(pool, fn, out.ctypes.data, units, threads), repeat)
    del jit
    return flops_per_unit * units / t / 1e9


def _parallel(pool, fn, table, units, threads):
    if pool.size == threads:
        pool.parallel_for(fn, table, units)
    else:  # pragma: no cover - only when asked for another thread count than the pool's
        from minixla.backends.llvm.runtime import ThreadPool
        ThreadPool(threads).parallel_for(fn, table, units)


def copy_bandwidth_gbs(threads: int, megabytes: int = 256, repeat: int = 5) -> float:
    """DRAM copy bandwidth (GB/s, read + write) on ``threads`` threads."""
    n = megabytes * (1 << 20) // 4 // _COPY_CHUNK * _COPY_CHUNK
    src = np.ones(n, np.float32)
    dst = np.zeros(n, np.float32)
    table = np.array([src.ctypes.data, dst.ctypes.data], np.uint64)
    jit = JitModule(_COPY_IR, ["copy"], optimize=True)  # (vectorized: see JitModule)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(jit.addresses["copy"])
    units = n // _COPY_CHUNK
    pool = thread_pool()
    if threads == 1:
        t = _median_time(lambda: fn(table.ctypes.data, 0, units), repeat)
    else:
        t = _median_time(lambda: _parallel(pool, fn, table.ctypes.data, units, threads), repeat)
    del jit
    return 2 * n * 4 / t / 1e9


def numpy_copy_bandwidth_gbs(megabytes: int = 256, repeat: int = 5) -> float:
    """``np.copyto`` bandwidth (GB/s, read + write), one thread."""
    n = megabytes * (1 << 20) // 4
    src, dst = np.ones(n, np.float32), np.zeros(n, np.float32)
    t = _median_time(lambda: np.copyto(dst, src), repeat)
    return 2 * n * 4 / t / 1e9


def measure(threads: int, quick: bool = False) -> dict:
    """All limits as a dict (GFLOP/s and GB/s, on 1 thread and on ``threads`` threads, and the
    float lanes of the FMA loop's vectors, ``fma_vector_lanes``)."""
    mb = 32 if quick else 256
    rep = 2 if quick else 5
    sec = 0.005 if quick else 0.05
    limits = {
        "threads": threads,
        "fma_vector_lanes": LANES,  # (float lanes of the FMA loop: the target's widest vectors)
        "fma_gflops_1thread": peak_fma_gflops(1, rep, sec),
        "fma_gflops": peak_fma_gflops(threads, rep, sec),
        "copy_gbs_1thread": copy_bandwidth_gbs(1, mb, rep),
        "copy_gbs": copy_bandwidth_gbs(threads, mb, rep),
        "numpy_copy_gbs": numpy_copy_bandwidth_gbs(mb, rep),
    }
    return limits
