"""A deep fuzz run that keeps going: ``python -m minixla.fuzz --mode grad --examples 5000 --seed 1``.

Unlike the pytest entry points (``tests/test_fuzz*.py``: stop at the first mismatch and shrink
it), this draws ``--examples`` programs, runs each through the mode (``grad``, ``jvp``, ``vmap``
as ``minixla/fuzz/transforms.py`` describes, ``forward``: the plain compile of
``tests/test_fuzz.py``, or ``rewrites``: the compositions XLA's whole-program optimizer rewrites,
``minixla/fuzz/rewrites.py``; ``--backends`` picks the backends there; ``frontend``: the forward
programs written with ``jax.numpy``/``jax.lax``/``jax.random`` and imported by the JAX front end,
as ``tests/test_jax_frontend_fuzz.py``), appends every mismatch to ``--failures`` (one JSON object a line: the
program's op list and the message) and prints a JSON summary: programs run, skipped, failed,
seconds. ``--log`` keeps the program being run, for a crash that takes the process down.
``--families`` (default: all) adds the linear-algebra, random, sorting and window ops of
``minixla/fuzz/families.py`` to the draws (one op in ``--family-odds``); ``--families none``
draws the programs the fuzzer drew before them (same seed, same program).
"""
from __future__ import annotations

import argparse
import collections
import json
import pickle
import sys
import time

from hypothesis import HealthCheck, given, seed, settings, strategies as st

from minixla.fuzz import programs as P
from minixla.fuzz.families import FAMILIES
from minixla.fuzz.transforms import GRAD_DTYPES, MAX_OPS, SPECIAL_RATE, fuzz_transform


def _forward(prog, data, frontend="minixla"):
    inputs, n_ops, _ = prog
    program, vals = P.build(data.draw, inputs, n_ops)
    if not program:
        return "skipped"
    n = len(vals)
    outputs = sorted({n - 1} | set(data.draw(st.lists(st.integers(len(inputs), n - 1), max_size=2))))
    try:
        if frontend == "jax":  # the program written with jax.numpy & co., imported by the JAX front end
            import jax
            import jax.numpy as jnp
            import minixla
            for backend in ("llvm", "jax"):
                got = minixla.jit(lambda *xs: P.interpret(jnp, jax.lax, program, xs, outputs), frontend="jax",
                                  backend=backend)(*inputs)
                for j, (g, o) in enumerate(zip(got, outputs)):
                    P.compare_value(f"[{backend}] output {j} (value {o})", g, vals[o].ref, vals[o], backend)
        else:
            P.run_program(inputs, program, outputs, vals)
    except Exception as e:
        raise AssertionError(f"{'frontend' if frontend == 'jax' else 'forward'} of "
                             f"{P.describe(inputs, program, outputs)}\n{type(e).__name__}: {e}") from e
    return "forward"


def _programs(counts, mode):
    """Programs run so far (the rewrites mode counts each case by kind, and its failures twice)."""
    if mode == "rewrites":
        return sum(v for k, v in counts.items() if not k.startswith("failed"))
    return sum(counts.values())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["grad", "jvp", "vmap", "forward", "frontend", "rewrites"], required=True)
    ap.add_argument("--backends", default="jax,llvm", help="rewrites mode: comma-separated backends")
    ap.add_argument("--examples", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--failures", default=None, help="append mismatches here (JSON lines)")
    ap.add_argument("--log", default=None, help="the program being run, for a post-mortem")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated op families to draw as well (minixla/fuzz/families.py: "
                         f"{', '.join(FAMILIES)}; 'none' for the programs of the fuzzer before them)")
    ap.add_argument("--family-odds", type=int, default=P.FAMILY_ODDS,
                    help="one op in this many is a family op")
    ap.add_argument("--jax-cache", default=None,
                    help="JAX's persistent compilation cache for the eager reference's per-op "
                         "compiles (default ~/.cache/minixla/fuzz-jax-cache; '' turns it off)")
    args = ap.parse_args(argv)
    from minixla.testing import default_jax_cache_dir, share_jax_compiles
    share_jax_compiles(default_jax_cache_dir("fuzz-jax-cache") if args.jax_cache is None else args.jax_cache)
    P.FAMILIES = tuple(f for f in args.families.split(",") if f and f != "none")
    P.FAMILY_ODDS = args.family_odds
    counts = collections.Counter()
    start = time.perf_counter()
    if args.mode == "rewrites":
        from minixla.fuzz import rewrites
        strategy = rewrites.cases()
    elif args.mode in ("grad", "jvp"):
        strategy = P.programs(dtypes=GRAD_DTYPES, max_ops=MAX_OPS, special_rate=SPECIAL_RATE)
    else:
        strategy = P.programs(max_ops=MAX_OPS if args.mode == "vmap" else 30)

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy, st.data())
    def run(prog, data):
        try:
            if args.mode == "rewrites":
                counts[f"{prog.kind}"] += 1
                try:
                    rewrites.run_case(prog, tuple(args.backends.split(",")))
                except AssertionError:
                    counts[f"failed {prog.kind} {prog.name}"] += 1
                    raise
            elif args.mode in ("forward", "frontend"):
                counts[_forward(prog, data, "jax" if args.mode == "frontend" else "minixla")] += 1
            else:
                counts[fuzz_transform(args.mode, prog, data, args.log)] += 1
        except Exception as e:  # record it and keep going: a deep run reports every class
            counts["failed"] += 1
            print(f"--- failure {counts['failed']}:\n{str(e)[:3000]}", file=sys.stderr, flush=True)
            if args.failures:
                from minixla.fuzz import transforms
                if transforms.LAST:
                    with open(f"{args.failures}.{counts['failed']}.pkl", "wb") as fh:
                        pickle.dump(dict(transforms.LAST), fh)
                    transforms.LAST.clear()
                with open(args.failures, "a") as fh:
                    fh.write(json.dumps({"mode": args.mode, "seed": args.seed, "message": str(e)[:6000]}) + "\n")
        n = _programs(counts, args.mode)
        if n % 100 == 0:
            print(json.dumps({"progress": n, "seconds": round(time.perf_counter() - start), **counts}),
                  file=sys.stderr, flush=True)
    run()
    summary = {"mode": args.mode, "seed": args.seed, "programs": _programs(counts, args.mode), **counts,
               "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(summary))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
