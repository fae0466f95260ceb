"""What fusion and buffer assignment save, program by program, next to XLA.

    python -m benchmarks.memory              # the table
    python -m benchmarks.memory --json       # ... and the rows as JSON on the last line
    python -m benchmarks.memory --scale 0.25 # smaller shapes

For the digits CNN (``examples/digits_cnn.py``'s ``cnn``), a 2-layer MLP, softmax, layernorm,
Conv+Bias+ReLU and attention it prints:

- kernels before fusion (every HLO instruction that is not a parameter, constant, tuple or
  reshape) and after (one per fusion or unfused instruction);
- bytes moved before and after fusion: the sum over kernels of their operand and output bytes
  (``minixla.memory.kernel_traffic``), i.e. the memory traffic if nothing stayed in cache;
- minixla's arena (``temp_size_in_bytes``) against the sum of all intermediate values (what
  the temporaries would take with no reuse) and XLA's own ``temp_size_in_bytes`` for the same
  function under ``jax.jit`` (``jax.jit(f).lower(*args).compile().memory_analysis()``).

No timing: these are properties of the compiled programs, the same on every run.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib

import jax
import numpy as np

import minixla
from minixla.memory import kernel_traffic
from benchmarks import workloads as W

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _digits_cnn():
    spec = importlib.util.spec_from_file_location("digits_cnn", ROOT / "examples" / "digits_cnn.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def programs(scale: float = 1.0):
    """(name, minixla function, jax function, args) for every program of the table."""
    m, j = W.minixla_namespace(), W.jax_namespace()
    suite = {w.name: w for w in W.workloads(scale)}
    rng = np.random.default_rng(0)
    out = []
    cnn = _digits_cnn()
    params = jax.tree.map(np.asarray, cnn.init_params(jax.random.PRNGKey(0)))
    images = rng.random((max(1, int(360 * scale)), 8, 8, 1), dtype=np.float32)
    out.append(("digits_cnn", lambda p, x: cnn.cnn(p, x, np=m.np, lax=minixla.lax),
                lambda p, x: cnn.cnn(p, x), (params, images)))
    for name in ("mlp", "softmax", "layernorm", "conv_bias_relu", "attention"):
        w = suite[name]
        out.append((name, lambda *a, w=w: w.fn(m, *a), lambda *a, w=w: w.fn(j, *a), w.make_args(rng, scale)))
    return out


def measure(name, fn, jax_fn, args, backend="llvm") -> dict:
    """The row of one program (see the module docstring). The buffer plan does not depend on
    the backend; ``backend`` only decides which code generator compiles it."""
    lowered = minixla.jit(fn, backend=backend).lower(*args)
    compiled = lowered.compile()
    ma = compiled.memory_analysis()
    xla = jax.jit(jax_fn).lower(*args).compile().memory_analysis()
    return {
        "program": name,
        "kernels_before": compiled.kernels_unfused,
        "kernels_after": len(compiled.kernels()),
        "kinds": [k["kind"] for k in compiled.kernels()],
        "bytes_moved_before": kernel_traffic(lowered.hlo_module),
        "bytes_moved_after": kernel_traffic(compiled.hlo_module),
        "arena_bytes": ma.temp_size_in_bytes,
        "arena_lower_bound": ma.temp_lower_bound_in_bytes,
        "intermediate_bytes": ma.intermediate_size_in_bytes,
        "xla_temp_bytes": int(xla.temp_size_in_bytes),
    }


def _kb(n: int) -> str:
    return f"{n / 1024:10,.1f}"


def table(rows) -> str:
    head = (f"{'program':<15} {'kernels':>11} {'KiB moved before → after':>23} {'arena':>10} {'bound':>10} "
            f"{'interm.':>10} {'XLA temp':>10}  kernels after fusion")
    lines = [head, f"{'':<15} {'before→after':>11} {'':>23} {'(all sizes in KiB)':>43}", "-" * len(head)]
    for r in rows:
        lines.append(f"{r['program']:<15} {r['kernels_before']:>5} → {r['kernels_after']:<3} "
                     f"{_kb(r['bytes_moved_before'])} → {_kb(r['bytes_moved_after'])} "
                     f"{_kb(r['arena_bytes'])} {_kb(r['arena_lower_bound'])} {_kb(r['intermediate_bytes'])} "
                     f"{_kb(r['xla_temp_bytes'])}  {' '.join(r['kinds'])}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the big dims (default 1.0)")
    parser.add_argument("--backend", default="llvm", choices=("llvm", "jax"), help="code generator")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON on the last line")
    args = parser.parse_args(argv)
    rows = [measure(*p, backend=args.backend) for p in programs(args.scale)]
    print(table(rows))
    if args.json:
        print(json.dumps(rows))
    return rows


if __name__ == "__main__":
    main()
