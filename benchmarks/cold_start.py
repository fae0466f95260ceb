"""Cold process: the time from process start to the first result, with and without a
persistent compilation cache (what a user waits for each time a script or a server starts).

    python -m benchmarks.cold_start                  # both workloads, 3 processes per setting
    python -m benchmarks.cold_start --only cnn --repeat 5 --json results/cold_start.json

Workloads: ``cnn`` -- inference of the digits CNN (``examples/digits_cnn.py``, batch 64);
``mlp`` -- one training step of a 2-layer MLP (value_and_grad + SGD, batch 64, 64 -> 128 -> 10).
Settings, each a fresh Python process: minixla (llvm backend) without a cache, minixla with
a warm ``minixla_compilation_cache_dir``, ``jax.jit`` without a cache and with a warm
``jax_compilation_cache_dir`` (min compile time 0). The warm settings run once untimed first to
fill their directory (and, for every setting, Python's bytecode: ``PYTHONPYCACHEPREFIX`` in
the scratch directory, as for an installed package; ``--no-bytecode`` keeps
``PYTHONDONTWRITEBYTECODE``). The timed processes run in rounds, one of each setting per
round, so a change in the machine's load hits every setting alike. Reported: median and min
over ``--repeat`` rounds of the wall time from just before the process is spawned to its first
result, the in-process share after the imports, and the load average at each round. The parameters are made with numpy (not ``jax.random``), so a minixla process
compiles nothing with XLA.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import time
t_start = time.time()
import json, os, sys
sys.path.insert(0, {examples!r})
import numpy as onp
FRAMEWORK, WORKLOAD = {framework!r}, {workload!r}
if FRAMEWORK == "jax":
    import jax, jax.numpy as np
    from jax import lax, value_and_grad
    if os.environ.get("BENCH_JAX_CACHE"):
        jax.config.update("jax_compilation_cache_dir", os.environ["BENCH_JAX_CACHE"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jit = jax.jit
    block = jax.block_until_ready
else:
    import minixla, minixla.numpy as np
    from minixla import lax, value_and_grad
    jit = minixla.jit
    block = lambda x: x
import digits_cnn as D
t_imported = time.time()
rng = onp.random.default_rng(0)
f32 = lambda *s: (rng.standard_normal(s) * 0.1).astype(onp.float32)
if WORKLOAD == "cnn":
    params = dict(w1=f32(3, 3, 1, 16), b1=f32(16), w2=f32(3, 3, 16, 32), b2=f32(32), w3=f32(2048, 10), b3=f32(10))
    x = rng.random((64, 8, 8, 1), dtype=onp.float32)
    out = block(jit(lambda p, x: D.cnn(p, x, np=np, lax=lax)[1])(params, x))
else:
    params = dict(w1=f32(64, 128), b1=f32(128), w2=f32(128, 10), b2=f32(10))
    x, y = f32(64, 64), rng.integers(0, 10, 64).astype(onp.int32)

    def loss(p, x, y):
        h = np.maximum(x @ p["w1"] + p["b1"], 0.0)
        z = h @ p["w2"] + p["b2"]
        z = z - np.max(z, axis=1, keepdims=True)
        one_hot = (y[:, None] == np.arange(10)[None, :]).astype(np.float32)
        return np.mean(np.log(np.sum(np.exp(z), axis=1)) - np.sum(z * one_hot, axis=1))

    def step(p, x, y):
        l, g = value_and_grad(loss)(p, x, y)
        return {{k: p[k] - 0.1 * g[k] for k in p}}, l
    out = block(jit(step)(params, x, y))
t_result = time.time()
print(json.dumps({{"result": t_result, "start": t_start, "imported": t_imported}}))
"""

SETTINGS = ("minixla", "minixla+cache", "jax", "jax+cache")
WORKLOADS = ("cnn", "mlp")


def _spawn(framework, workload, env) -> dict:
    root = Path(env.get("BENCH_ROOT", ROOT))  # (--baseline: another minixla source tree)
    code = textwrap.dedent(_CHILD.format(examples=str(root / "examples"), framework=framework, workload=workload))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    if r.returncode != 0:
        raise RuntimeError(f"{framework}/{workload} failed:\n{r.stderr[-2000:]}")
    t = json.loads(r.stdout.strip().splitlines()[-1])
    return {"total_s": t["result"] - t0, "after_imports_s": t["result"] - t["imported"]}


def _env(workload: str, setting: str, scratch: str, bytecode: bool, baseline=None) -> dict:
    framework = setting.split("+")[0]
    root = baseline if framework == "baseline" else ROOT
    env = dict(os.environ, PYTHONPATH=str(root), BENCH_ROOT=str(root))
    for var in ("MINIXLA_COMPILATION_CACHE_DIR", "BENCH_JAX_CACHE"):
        env.pop(var, None)
    if bytecode:
        # As an installed package: sources compiled to bytecode once (the untimed first run),
        # not at every start (PYTHONDONTWRITEBYTECODE=1 in this environment; jax's site-packages
        # have their .pyc files either way).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
    if setting.endswith("+cache"):
        d = os.path.join(scratch, f"{setting}-{workload}")
        env["BENCH_JAX_CACHE" if framework == "jax" else "MINIXLA_COMPILATION_CACHE_DIR"] = d
        env["MINIXLA_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    return env


def measure_all(workloads, repeat: int, scratch: str, bytecode: bool = True, baseline=None) -> list[dict]:
    """Rows of ``measure`` for every workload and setting, the processes interleaved round by
    round (setting after setting), so a change in the machine's load hits every setting alike.
    ``baseline``: another minixla source tree (e.g. an older commit's ``git archive``), measured
    as the settings ``baseline`` and ``baseline+cache``."""
    settings = SETTINGS + (("baseline", "baseline+cache") if baseline else ())
    envs = {(w, s): _env(w, s, scratch, bytecode, baseline) for w in workloads for s in settings}
    for (w, s), env in envs.items():  # fill the caches and the bytecode (untimed)
        _spawn(s.split("+")[0], w, env)
    runs = {k: [] for k in envs}
    load = [os.getloadavg()[0]]
    for _ in range(repeat):
        for (w, s), env in envs.items():
            runs[(w, s)].append(_spawn(s.split("+")[0], w, env))
        load.append(os.getloadavg()[0])
    rows = []
    for (w, s), rs in runs.items():
        total = [r["total_s"] for r in rs]
        after = [r["after_imports_s"] for r in rs]
        rows.append({"workload": w, "setting": s, "median_s": statistics.median(total), "min_s": min(total),
                     "after_imports_median_s": statistics.median(after), "runs_s": total,
                     "after_imports_s": after, "load_average": [round(x, 2) for x in load],
                     "bytecode": bytecode})
    return rows


def measure(workload: str, setting: str, repeat: int, scratch: str, bytecode: bool = True) -> dict:
    """One setting's row: median and min over ``repeat`` fresh processes (after one untimed run)."""
    env = _env(workload, setting, scratch, bytecode)
    framework = setting.split("+")[0]
    _spawn(framework, workload, env)  # fill the cache and the bytecode (untimed)
    runs = [_spawn(framework, workload, env) for _ in range(repeat)]
    total = [r["total_s"] for r in runs]
    after = [r["after_imports_s"] for r in runs]
    return {"workload": workload, "setting": setting, "median_s": statistics.median(total), "min_s": min(total),
            "after_imports_median_s": statistics.median(after), "runs_s": total, "after_imports_s": after}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", choices=WORKLOADS, default=list(WORKLOADS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-bytecode", action="store_true",
                   help="keep PYTHONDONTWRITEBYTECODE from the environment (minixla's sources "
                        "compiled at every start)")
    p.add_argument("--baseline", default=None,
                   help="another minixla source tree to measure beside this one (settings baseline, "
                        "baseline+cache), e.g. from: git archive COMMIT | tar -x -C DIR")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="minixla-cold-") as scratch:
        rows = measure_all(args.only, args.repeat, scratch, bytecode=not args.no_bytecode,
                           baseline=Path(args.baseline).resolve() if args.baseline else None)
    for r in rows:
        print(f"{r['workload']:4s} {r['setting']:14s} first result {r['median_s']:6.2f} s "
              f"(min {r['min_s']:.2f}; after imports {r['after_imports_median_s']:.2f} s)", flush=True)
    by = {(r["workload"], r["setting"]): r for r in rows}
    for workload in args.only:
        warm, cold, jax_warm = (by[(workload, s)] for s in ("minixla+cache", "minixla", "jax+cache"))
        print(f"{workload}: minixla warm/cold {warm['median_s'] / cold['median_s']:.2f}x "
              f"(after imports {warm['after_imports_median_s'] / cold['after_imports_median_s']:.2f}x); "
              f"minixla warm / jax warm {warm['median_s'] / jax_warm['median_s']:.2f}x "
              f"(after imports {warm['after_imports_median_s'] / jax_warm['after_imports_median_s']:.2f}x)")
        if (workload, "baseline+cache") in by:
            base_warm, base_cold = by[(workload, "baseline+cache")], by[(workload, "baseline")]
            print(f"{workload}: baseline warm/cold {base_warm['median_s'] / base_cold['median_s']:.2f}x; "
                  f"minixla warm / baseline warm {warm['median_s'] / base_warm['median_s']:.2f}x "
                  f"(after imports {warm['after_imports_median_s'] / base_warm['after_imports_median_s']:.2f}x)")
    print(f"load average (1 min) before and after each round: {rows[0]['load_average']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
