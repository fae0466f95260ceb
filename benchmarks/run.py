"""Run the benchmark suite: numpy (eager), ``minixla.jit`` (LLVM backend) and ``jax.jit`` (XLA:CPU)
in one process, on the same inputs, next to this machine's limits.

    python -m benchmarks                 # the suite: table, results/benchmarks.json, results/benchmarks.png
    python -m benchmarks --sweep         # plus attention over batch x sequence
    python -m benchmarks --only mlp conv_bias_relu --repeat 31
    python -m benchmarks --scale 0.01 --repeat 3 --no-plot   # a tiny smoke run
    python -m benchmarks --markdown      # only the README block (host, limits, table): benchmarks.md
    python -m benchmarks --cpu haswell --markdown   # minixla and XLA restricted to AVX2, in a subprocess

The host comes first (``benchmarks/host.py``): the CPU, minixla's LLVM target and features,
both compilers' threads, and the vector width of the code each generated for every workload
(read from the optimized LLVM IR and the machine code; XLA's from a dump in a subprocess).

Method. Every framework runs each workload once to warm up (and compile), then ``repeat``
(default 15) *rounds* are timed, each a sample of numpy, of minixla and of jax back to back,
so background load hits all three alike; each sample times enough calls to last
``min_sample_ms``. The reported times are the median samples; the ratio minixla / jax is the
median of the per-round ratios, with their 10th..90th percentile as its spread (and min..max in
the JSON, with every sample), so one noisy round does not decide a row. Each sample runs the calls untimed for ``settle_ms``
first (another framework's thread pool may still be spin-waiting, taking a core; see
``_sampler``). ``jax.jit`` results are waited for
(``block_until_ready``) and its inputs are already device arrays. Compile time is
``jit(f).lower(*args).compile()`` of a fresh function, the median of ``compile_repeat``
runs, for minixla (with its process-wide kernel cache cleared: a cold compile) and for jax;
"re-jit" is minixla compiling the same program again, every kernel found in the cache.
The achieved rate is GB/s (compulsory traffic: inputs read once, output written once) or
GFLOP/s (2 per multiply-add of the dots and convolutions), also given as the fraction of the machine's limit measured in the same run
(``benchmarks/limits.py``: DRAM copy bandwidth, peak FMA throughput, on the pool's threads).
Each workload's minixla result is checked against jax's.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # ``python benchmarks/run.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from benchmarks import limits as limits_mod  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

FRAMEWORKS = ("numpy", "minixla", "jax")


def _sampler(call, min_sample_s: float, settle_s: float = 0.0):
    """A function timing one sample (seconds per call) of ``call``, calibrated once.

    Each sample first runs the calls untimed for ``settle_s``: the frameworks' thread pools
    spin-wait after their last call (OpenBLAS's for ~120 ms, measured here), and a pool still
    spinning takes a core from the next framework's threads -- minixla's 2-thread MLP timed
    right after numpy ran at the speed of one thread. (A pause instead of the untimed calls
    does not work on this VM: after ~0.1 s idle, two busy threads run at half speed for
    the next ~50 ms.) So every framework is timed in its own steady state."""
    t0 = time.perf_counter()
    call()
    one = time.perf_counter() - t0
    number = max(1, int(min_sample_s / max(one, 1e-7)))
    settle = int(settle_s / max(one, 1e-7))

    def sample():
        for _ in range(settle):
            call()
        t = time.perf_counter()
        for _ in range(number):
            call()
        return (time.perf_counter() - t) / number
    return sample


def _compile_times(workload, args, repeat):
    """Median ms of ``jit(f).lower(*args).compile()`` of a fresh function: minixla *cold* (its
    process-wide kernel cache cleared first, as jax compiles a fresh function from scratch;
    the GEMM micro-kernel library stays compiled, as XLA's Eigen is precompiled), jax, and
    minixla *warm* (the same program again: every kernel found in the cache)."""
    import jax
    import minixla
    from minixla.backends.llvm import kernel_cache

    mns, jns = W.minixla_namespace(), W.jax_namespace()
    jargs = [jax.numpy.asarray(a) for a in args]
    mx, jx, warm = [], [], []
    for _ in range(repeat):
        f = functools.partial(workload.fn, mns)
        kernel_cache.clear()
        t = time.perf_counter()
        minixla.jit(f).lower(*args).compile()
        mx.append(time.perf_counter() - t)
        f = functools.partial(workload.fn, mns)
        t = time.perf_counter()
        minixla.jit(f).lower(*args).compile()
        warm.append(time.perf_counter() - t)
        g = functools.partial(workload.fn, jns)  # a fresh function: no jax cache hit
        t = time.perf_counter()
        jax.jit(g).lower(*jargs).compile()
        jx.append(time.perf_counter() - t)
    return statistics.median(mx) * 1e3, statistics.median(jx) * 1e3, statistics.median(warm) * 1e3


def percentile(values, q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linear between order statistics (NumPy's
    default method)."""
    return float(np.percentile(np.asarray(values, np.float64), q))


def round_ratios(minixla_s, jax_s) -> dict:
    """The per-round ratios minixla / jax of two equally long lists of sample times (round
    ``i`` timed one batch of each, back to back, so a burst of background load hits both):
    ``ratios``, ``ratio_median``, ``ratio_p10_p90`` (10th and 90th percentiles: the spread the
    table shows) and ``ratio_spread`` (min, max). Raises ``ValueError`` for unequal or
    empty lists."""
    if len(minixla_s) != len(jax_s) or not minixla_s:
        raise ValueError(f"round_ratios needs two equally long, non-empty sample lists, "
                         f"got {len(minixla_s)} and {len(jax_s)}")
    ratios = [m / j for m, j in zip(minixla_s, jax_s)]
    return {"ratios": ratios, "ratio_median": statistics.median(ratios),
            "ratio_p10_p90": [percentile(ratios, 10), percentile(ratios, 90)],
            "ratio_spread": [min(ratios), max(ratios)]}


def run_workload(workload, limits, scale=1.0, repeat=15, min_sample_ms=20.0, compile_repeat=3,
                 frameworks=FRAMEWORKS, seed=0, settle_ms=150.0, code=True) -> dict:
    """Time one workload on every framework in ``repeat`` interleaved rounds; returns a result
    dict (see ``run_suite``). ``code``: also read the vector code minixla generated
    (``host.minixla_code``)."""
    import jax
    import minixla

    args = workload.make_args(np.random.default_rng(seed), scale)
    calls, outputs = {}, {}
    if "numpy" in frameworks:
        nns = W.numpy_namespace()
        calls["numpy"] = functools.partial(workload.fn, nns, *args)
    if "minixla" in frameworks:
        mf = minixla.jit(functools.partial(workload.fn, W.minixla_namespace()))
        calls["minixla"] = functools.partial(mf, *args)
    if "jax" in frameworks:
        jf = jax.jit(functools.partial(workload.fn, W.jax_namespace()))
        jargs = [jax.device_put(a) for a in args]
        calls["jax"] = lambda: jf(*jargs).block_until_ready()
    for name, call in calls.items():
        outputs[name] = np.asarray(call() if name != "jax" else jf(*jargs))
    samplers = {name: _sampler(call, min_sample_ms / 1e3, settle_ms / 1e3) for name, call in calls.items()}
    samples = {name: [] for name in calls}
    for _ in range(repeat):  # one round: a batch of each framework, back to back
        for name, sample in samplers.items():
            samples[name].append(sample())
    result = {"name": workload.name, "description": workload.description, "kind": workload.kind,
              "time_ms": {n: statistics.median(s) * 1e3 for n, s in samples.items()},
              "spread_ms": {n: [min(s) * 1e3, max(s) * 1e3] for n, s in samples.items()},
              "samples_ms": {n: [t * 1e3 for t in s] for n, s in samples.items()}}
    if "minixla" in samples and "jax" in samples:
        result.update(round_ratios(samples["minixla"], samples["jax"]))
    if code and "minixla" in frameworks:
        from benchmarks import host
        result["code"] = host.minixla_code(mf.lower(*args).compile())
    out = outputs.get("minixla", next(iter(outputs.values())))
    work = workload.work(args, out)
    result["work"] = work
    if workload.kind == "memory":
        result["rate"] = {n: work / (t / 1e3) / 1e9 for n, t in result["time_ms"].items()}
        result["rate_unit"] = "GB/s"
        result["limit"] = limits["copy_gbs"]
    elif workload.kind == "compute":
        result["rate"] = {n: work / (t / 1e3) / 1e9 for n, t in result["time_ms"].items()}
        result["rate_unit"] = "GFLOP/s"
        result["limit"] = limits["fma_gflops"]
    else:
        result["rate"], result["rate_unit"], result["limit"] = {}, "", None
    if result["limit"]:
        result["fraction_of_limit"] = {n: r / result["limit"] for n, r in result["rate"].items()}
    if "jax" in result["time_ms"]:
        result["ratio_to_jax"] = {n: t / result["time_ms"]["jax"] for n, t in result["time_ms"].items()}
    if "minixla" in outputs and "jax" in outputs:
        a, b = outputs["minixla"].astype(np.float64), outputs["jax"].astype(np.float64)
        result["max_abs_diff_vs_jax"] = float(np.max(np.abs(a - b))) if a.size else 0.0
        # (relative to the largest |value|: elementwise relative errors blow up near zero)
        result["max_norm_diff_vs_jax"] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)) if a.size else 0.0
    if compile_repeat and "minixla" in frameworks and "jax" in frameworks:
        result["compile_ms"] = dict(zip(("minixla", "jax", "minixla_warm"),
                                        _compile_times(workload, args, compile_repeat)))
        result["compile_ratio"] = result["compile_ms"]["minixla"] / result["compile_ms"]["jax"]
    return result


def run_suite(workloads, *, scale=1.0, repeat=15, min_sample_ms=20.0, settle_ms=150.0, compile_repeat=3, quick_limits=False,
              frameworks=FRAMEWORKS, limits=None, log=print, code=True, xla_probe=True) -> dict:
    """Measure the limits (unless given), then every workload in ``repeat`` interleaved rounds.

    Returns ``{"host", "machine", "limits", "results", "settings"}`` (and ``"xla_code"``):
    ``host`` is ``benchmarks.host.host_report()`` taken after the runs (so XLA's threads are
    counted); each result holds its per-round ``samples_ms``, the per-round ``ratios``
    minixla / jax with their median and spread (``round_ratios``) and, with ``code``, the
    vector code minixla generated (``host.minixla_code``); ``xla_probe``: read XLA's code for
    the same workloads from a dump in a subprocess (``host.xla_probe``), before timing."""
    import jax
    import llvmlite

    from benchmarks import host
    from minixla.backends.llvm.runtime import thread_pool

    threads = thread_pool().size
    load_start = _load_average()
    xla_code = None
    if xla_probe and "jax" in frameworks and workloads:
        log("reading XLA's generated code (a jax subprocess dumping its IR) ...")
        xla_code = host.xla_probe([w.name for w in workloads], scale=scale)
    if limits is None:
        log(f"measuring machine limits on {threads} thread(s) ...")
        limits = limits_mod.measure(threads, quick=quick_limits)
        log(f"  peak FMA {limits['fma_gflops']:.0f} GFLOP/s ({limits['fma_gflops_1thread']:.0f} on 1 thread), "
            f"DRAM copy {limits['copy_gbs']:.1f} GB/s ({limits['copy_gbs_1thread']:.1f} on 1 thread)")
    results = []
    for w in workloads:
        log(f"running {w.name} ...")
        results.append(run_workload(w, limits, scale, repeat, min_sample_ms, compile_repeat, frameworks,
                                    settle_ms=settle_ms, code=code))
    machine = {"cpu": _cpu_name(), "threads": threads, "jax": jax.__version__, "llvmlite": llvmlite.__version__,
               "numpy": np.__version__, "jax_devices": str(jax.devices()),
               "MINIXLA_NUM_THREADS": os.environ.get("MINIXLA_NUM_THREADS", "")}
    report = host.host_report(threads)
    report["load_average"] = {"start": load_start, "end": _load_average()}
    suite = {"host": report, "machine": machine, "limits": limits, "results": results,
             "settings": {"scale": scale, "repeat": repeat, "min_sample_ms": min_sample_ms, "settle_ms": settle_ms}}
    if xla_code is not None:
        suite["xla_code"] = xla_code
    return suite


def _load_average() -> float | None:
    """The 1-minute load average (runnable processes; None where the OS has none): the
    background work a run shared the machine with."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # pragma: no cover
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    from llvmlite import binding
    return binding.get_host_cpu_name()


# ---------------------------------------------------------------------------------------
# Reporting.

def format_ratio(r: dict) -> str:
    """``0.61 (0.55..0.70)``: the median of the per-round ratios minixla / jax and their 10th-90th
    percentiles (``-`` without both frameworks)."""
    if "ratio_median" not in r:
        return "-"
    lo, hi = r["ratio_p10_p90"]
    return f"{r['ratio_median']:.2f} ({lo:.2f}..{hi:.2f})"


def format_table(suite: dict, header: bool = True) -> str:
    """A Markdown table of the suite: the host first (``host.format_host``), the limits, then
    per workload the median times, the median per-round ratio minixla / jax with its spread,
    rates and fraction of the limit, the vector width of the generated code and compile
    times. ``header=False``: the table alone."""
    from benchmarks import host

    lim = suite["limits"]
    lines = []
    if header:
        if "host" in suite:
            code = {r["name"]: r["code"] for r in suite["results"] if r.get("code")}
            lines += [host.format_host(suite["host"], code, suite.get("xla_code")), ""]
        rounds = suite.get("settings", {}).get("repeat")
        lanes = f" of <{lim['fma_vector_lanes']} x float>" if "fma_vector_lanes" in lim else ""
        lines += [f"Machine limits ({lim['threads']} threads): peak FMA{lanes} {lim['fma_gflops']:.0f} GFLOP/s "
                  f"({lim['fma_gflops_1thread']:.0f} on 1 thread), DRAM copy {lim['copy_gbs']:.1f} GB/s "
                  f"({lim['copy_gbs_1thread']:.1f} on 1 thread)." + (
                      f" {rounds} interleaved rounds; times are medians, the ratio is the median of the "
                      f"per-round ratios (10th..90th percentile); vector bits: the most common float "
                      f"vector of the arithmetic in the optimized LLVM IR." if rounds else ""), ""]
    xla_code = suite.get("xla_code", {}).get("workloads", {})
    lines += ["| workload | numpy ms | minixla ms | jax.jit ms | minixla / jax (p10..p90) | minixla rate | jax rate "
              "| minixla % of limit | jax % of limit | vector bits minixla / XLA | compile ms minixla / jax "
              "| re-jit ms minixla |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in suite["results"]:
        t = r["time_ms"]
        unit = r.get("rate_unit", "")

        def ms(n):
            if n not in t:
                return "-"
            return f"{t[n] * 1e3:.1f} µs" if r["kind"] == "dispatch" else f"{t[n]:.3f}"

        def rate(n):
            return f"{r['rate'][n]:.1f} {unit}" if n in r.get("rate", {}) else "-"

        def frac(n):
            return f"{100 * r['fraction_of_limit'][n]:.0f}%" if n in r.get("fraction_of_limit", {}) else "-"

        vec = (f"{host.vector_bits_cell(r.get('code'))} / {host.vector_bits_cell(xla_code.get(r['name']))}"
               if r.get("code") or r["name"] in xla_code else "-")
        comp = (f"{r['compile_ms']['minixla']:.0f} / {r['compile_ms']['jax']:.0f}" if "compile_ms" in r else "-")
        warm = f"{r['compile_ms']['minixla_warm']:.0f}" if "compile_ms" in r else "-"
        lines.append(f"| {r['name']} | {ms('numpy')} | {ms('minixla')} | {ms('jax')} | {format_ratio(r)} "
                     f"| {rate('minixla')} | {rate('jax')} | {frac('minixla')} | {frac('jax')} | {vec} | {comp} "
                     f"| {warm} |")
    return "\n".join(lines)


def format_sweep(results) -> str:
    """The attention sweep as a batch x sequence grid of minixla / jax time ratios (the median
    of the per-round ratios)."""
    ratio = {}
    for r in results:
        b, s = (int(v[1:]) for v in r["name"].split("_")[1:])
        ratio[b, s] = r.get("ratio_median", r.get("ratio_to_jax", {}).get("minixla"))
    lines = ["| batch \\ seq | " + " | ".join(str(s) for s in W.SWEEP_SEQ) + " |",
             "|---|" + "---:|" * len(W.SWEEP_SEQ)]
    for b in W.SWEEP_BATCH:
        cells = [f"{ratio[b, s]:.2f}" if ratio.get((b, s)) is not None else "-" for s in W.SWEEP_SEQ]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(suite: dict, path: Path) -> Path | None:
    """Bar plot: speed relative to jax.jit (left) and fraction of the machine limit (right)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    results = suite["results"]
    names = [r["name"] for r in results]
    fws = [f for f in FRAMEWORKS if any(f in r["time_ms"] for r in results)]
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    width = 0.8 / max(1, len(fws))
    x = np.arange(len(names))
    for k, fw in enumerate(fws):
        speed = [r["time_ms"]["jax"] / r["time_ms"][fw] if fw in r["time_ms"] and "jax" in r["time_ms"] else 0
                 for r in results]
        axes[0].bar(x + k * width, speed, width, label=fw)
        frac = [r.get("fraction_of_limit", {}).get(fw, 0) for r in results]
        axes[1].bar(x + k * width, frac, width, label=fw)
    axes[0].axhline(1.0, color="k", lw=0.8)
    axes[0].set_ylabel("speed relative to jax.jit (higher is better)")
    axes[1].set_ylabel("fraction of machine limit (DRAM copy or FMA peak)")
    axes[1].set_ylim(0, 1)
    for ax in axes:
        ax.set_xticks(x + width * (len(fws) - 1) / 2)
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.legend()
    lim = suite["limits"]
    target = suite.get("host", {}).get("minixla", {}).get("cpu")
    fig.suptitle(f"minixla vs jax.jit vs numpy — {suite['machine']['cpu']}"
                 + (f" (LLVM {target})" if target else "") + f", {lim['threads']} threads "
                 f"(FMA {lim['fma_gflops']:.0f} GFLOP/s, copy {lim['copy_gbs']:.0f} GB/s)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(type(o))


#: XLA:CPU's ``--xla_cpu_max_isa`` for the LLVM CPUs ``--cpu`` is most often given (the
#: widest ISA the CPU has, in XLA's names); other CPUs need ``--xla-max-isa``
XLA_MAX_ISA = {"x86-64-v2": "SSE4_2", "nehalem": "SSE4_2", "sandybridge": "AVX", "ivybridge": "AVX",
               "haswell": "AVX2", "broadwell": "AVX2", "skylake": "AVX2", "x86-64-v3": "AVX2",
               "alderlake": "AVX2", "znver1": "AVX2", "znver2": "AVX2", "znver3": "AVX2",
               "skylake-avx512": "AVX512", "x86-64-v4": "AVX512", "cascadelake": "AVX512_VNNI"}
#: set in the subprocess of a restricted-target run (``--cpu``), so it runs the suite itself
_CHILD_ENV = "MINIXLA_BENCH_RESTRICTED_CHILD"


def _restricted_name(a) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "", part) for part in (a.cpu, a.features) if part)


def run_restricted(a, argv) -> dict:
    """``--cpu NAME``: run the suite in a subprocess whose minixla targets LLVM CPU ``NAME``
    (``MINIXLA_LLVM_CPU``; ``--features`` sets ``MINIXLA_LLVM_FEATURES``) and whose XLA is held
    to the matching ISA (``--xla_cpu_max_isa``, from ``XLA_MAX_ISA`` or ``--xla-max-isa``), so an
    AVX2-only comparison runs on an AVX-512 host. Results go to ``benchmarks_NAME.json``; the
    host report in it says what each compiler used. Returns the suite (``{"error": ...}``
    without running when this minixla has no such option, or the child failed)."""
    from benchmarks import host

    if not host.restriction_available():
        msg = ("--cpu: option not available: this minixla has no minixla_llvm_cpu option "
               "(MINIXLA_LLVM_CPU would be ignored), so a restricted-target run cannot be measured")
        print(msg)
        return {"error": msg}
    env = dict(os.environ, MINIXLA_LLVM_CPU=a.cpu, **{_CHILD_ENV: "1"})
    if a.features:
        env["MINIXLA_LLVM_FEATURES"] = a.features
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    isa = a.xla_max_isa if a.xla_max_isa is not None else XLA_MAX_ISA.get(a.cpu, "")
    base_flags = env.get("XLA_FLAGS", "")
    cmd = [sys.executable, "-m", "benchmarks", *argv]
    say = (lambda m: print(m, file=sys.stderr)) if a.markdown else print
    if isa:
        flags = f"{base_flags} --xla_cpu_max_isa={isa}".strip()
        error = _xla_rejects(flags, env)
        if error:
            say(f"this jaxlib rejects --xla_cpu_max_isa={isa} ({error}): XLA runs on the host's ISA")
        else:
            env["XLA_FLAGS"] = flags
    else:
        say(f"--cpu {a.cpu}: no XLA ISA limit known for this CPU (give --xla-max-isa): XLA runs on the host's ISA")
    proc = subprocess.run(cmd, env=env, cwd=root)
    if proc.returncode != 0:
        return {"error": f"the restricted run failed (rc {proc.returncode})"}
    return json.loads((Path(a.out) / f"benchmarks_{_restricted_name(a)}.json").read_text())


def _xla_rejects(flags: str, env: dict) -> str:
    """Why XLA refuses ``XLA_FLAGS=flags`` (an unknown flag aborts the process at jax's first
    computation), or "" when it accepts them: a jax subprocess, ~3 s."""
    probe = "import jax.numpy as jnp; jnp.zeros(2).block_until_ready()"
    try:
        proc = subprocess.run([sys.executable, "-c", probe], env=dict(env, XLA_FLAGS=flags),
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "the check timed out"
    if proc.returncode == 0:
        return ""
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1] if lines else f"rc {proc.returncode}"


def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", help="workload names to run (default: all)")
    p.add_argument("--sweep", action="store_true", help="also run attention over batch x sequence")
    p.add_argument("--sweep-only", action="store_true", help="run only the attention sweep")
    p.add_argument("--repeat", type=int, default=15, help="timed samples per framework (default 15)")
    p.add_argument("--min-sample-ms", type=float, default=20.0, help="minimum duration of one sample")
    p.add_argument("--settle-ms", type=float, default=150.0,
                   help="untimed calls before each sample (other thread pools stop spinning)")
    p.add_argument("--compile-repeat", type=int, default=3, help="compilations timed per workload (0: skip)")
    p.add_argument("--scale", type=float, default=1.0, help="shrink the workloads (smoke runs)")
    p.add_argument("--quick-limits", action="store_true", help="measure the limits briefly (smoke runs)")
    p.add_argument("--frameworks", nargs="*", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    p.add_argument("--out", default="results", help="directory for benchmarks.json and benchmarks.png")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--markdown", action="store_true",
                   help="print only the Markdown block (host, limits, table) and write it to benchmarks.md; "
                        "progress goes to stderr")
    p.add_argument("--no-xla-probe", action="store_true",
                   help="do not read XLA's generated code (a jax subprocess dumping its IR)")
    p.add_argument("--cpu", help="run in a subprocess with minixla targeting this LLVM CPU (e.g. haswell: "
                                 "AVX2, no AVX-512) and XLA held to its ISA; results in benchmarks_CPU.json")
    p.add_argument("--features", help="with --cpu: LLVM target features for minixla (MINIXLA_LLVM_FEATURES)")
    p.add_argument("--xla-max-isa", help="with --cpu: XLA's --xla_cpu_max_isa (default: from the CPU name)")
    a = p.parse_args(argv)
    if a.features and not a.cpu:
        p.error("--features needs --cpu")
    if a.cpu and not os.environ.get(_CHILD_ENV):
        return run_restricted(a, argv)
    tag = f"_{_restricted_name(a)}" if a.cpu else ""
    log = (lambda *m: print(*m, file=sys.stderr)) if a.markdown else print
    out_print = (lambda *m: None) if a.markdown else print

    workloads = [] if a.sweep_only else W.workloads(a.scale)
    if a.only:
        unknown = set(a.only) - {w.name for w in workloads}
        if unknown:
            p.error(f"unknown workload(s) {sorted(unknown)}; choose from {[w.name for w in workloads]}")
        workloads = [w for w in workloads if w.name in a.only]
    suite = run_suite(workloads, scale=a.scale, repeat=a.repeat, min_sample_ms=a.min_sample_ms,
                      settle_ms=a.settle_ms, compile_repeat=a.compile_repeat, quick_limits=a.quick_limits,
                      frameworks=a.frameworks, log=log, xla_probe=not a.no_xla_probe)
    markdown = []
    if workloads:
        markdown.append(format_table(suite))
        out_print()
        out_print(markdown[-1])
    if a.sweep or a.sweep_only:
        # numpy is left out: eager batched attention at sequence 1024 takes seconds per call.
        fws = [f for f in a.frameworks if f != "numpy"]
        sweep = run_suite(W.sweep_workloads(), repeat=max(3, a.repeat // 3), min_sample_ms=a.min_sample_ms,
                          settle_ms=a.settle_ms, compile_repeat=0, frameworks=fws, limits=suite["limits"],
                          log=log, code=False, xla_probe=False)
        suite["sweep"] = sweep["results"]
        markdown += ["Attention sweep (4 heads, d 64), minixla / jax.jit:", format_sweep(sweep["results"]),
                     format_table(sweep, header=False)]
        out_print("\nAttention sweep (4 heads, d 64), minixla / jax.jit:\n")
        out_print(format_sweep(sweep["results"]))
        out_print()
        out_print(format_table(sweep, header=False))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"benchmarks{tag}.json").write_text(json.dumps(suite, indent=1, default=_json_default))
    log(f"\nwrote {out / f'benchmarks{tag}.json'}")
    if a.markdown:
        text = "\n\n".join(markdown) + "\n"
        (out / f"benchmarks{tag}.md").write_text(text)
        print(text, end="")
        log(f"wrote {out / f'benchmarks{tag}.md'}")
    if not a.no_plot and suite["results"]:
        path = plot(suite, out / f"benchmarks{tag}.png")
        if path:
            log(f"wrote {path}")
    return suite


if __name__ == "__main__":
    main()
