"""What a fresh process pays before its first result (README "The jit system",
``benchmarks/cold_start.py``), checked by what runs, not by timing:

* ``import minixla`` imports nothing a process that traces and runs minixla code never needs
  (``sys.modules`` of a fresh process), and freezes the objects alive then (``gc.freeze``);
* tracing a training step under ``jit`` evaluates no JAX operation eagerly (each is an XLA
  compile, ~40 ms at a process's start): ``arange`` and the backward pass's operations on
  the seed cotangent are staged, as JAX stages them.

(That a warm persistent cache runs no pass and no LLVM: ``test_compilation_cache.py``.)"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: imported only where used, and what each costs at import on the 2-vCPU host (CPU time)
LAZY = {
    "networkx": "graphs of HLO computations: passes only (~0.2 s)",
    "jax.extend": "the JAX front end (minixla.frontends.jax_importer, ~0.15 s with jax._src.pallas)",
    "minixla.frontends.jax_importer": "the JAX front end",
    "llvmlite": "the LLVM backend: the first compile or cache load",
    "minixla.backends.llvm": "the LLVM backend",
    "minixla.fuzz": "the fuzzer",
    "minixla.testing": "the differential-testing helpers",
    "hypothesis": "the fuzzer",
    "matplotlib": "pictures in the course",
}


def test_import_minixla_imports_nothing_it_does_not_need():
    code = """
        import json, sys
        import minixla
        modules = sorted(sys.modules)
        import gc
        frozen = gc.get_freeze_count()
        public = {name: hasattr(minixla, name) for name in minixla.__all__}
        print(json.dumps({"modules": modules, "public": public, "frozen": frozen,
                          "dir": sorted(set(minixla.__all__) - set(dir(minixla)))}))
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    loaded = [m for m in out["modules"] if any(m == lazy or m.startswith(lazy + ".") for lazy in LAZY)]
    assert not loaded, f"import minixla imported {loaded}"
    # every public name is still there (some load on first access: ``import_jaxpr``)
    assert all(out["public"].values()) and not out["dir"], out
    # the objects alive after the imports are out of the collector's way (minixla/__init__.py)
    assert out["frozen"] > 50_000


def test_tracing_a_training_step_runs_no_eager_jax_op(monkeypatch):
    import minixla
    import minixla.numpy as mnp
    from jax._src import core as jax_core

    applied = []
    original = jax_core.EvalTrace.process_primitive

    def counting(self, primitive, args, params):
        applied.append(primitive.name)
        return original(self, primitive, args, params)

    def loss(np_, p, x, y):
        z = np_.maximum(x @ p["w"], 0.0)
        z = z - np_.max(z, axis=1, keepdims=True)
        one_hot = (y[:, None] == np_.arange(4)[None, :]).astype(np_.float32)
        return np_.mean(np_.log(np_.sum(np_.exp(z), axis=1)) - np_.sum(z * one_hot, axis=1))

    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((3, 4)).astype(np.float32)}
    x, y = rng.standard_normal((5, 3)).astype(np.float32), np.array([0, 1, 2, 3, 1], np.int32)
    step = minixla.jit(minixla.value_and_grad(lambda p, x, y: loss(mnp, p, x, y)))
    monkeypatch.setattr(jax_core.EvalTrace, "process_primitive", counting)
    lowered = step.lower(p, x, y)
    monkeypatch.undo()
    assert applied == [], applied
    text = str(lowered.jaxpr)
    # (mean's 1/n is folded at trace time, as XLA folds JAX's division by the constant count)
    assert "iota[dtype=int32 shape=(4,) dimension=0]" in text and "mul 1.0:f32[] 0.20000000298023224:f32[]" in text
    l, g = step(p, x, y)
    with jax.disable_jit():
        l_ref, g_ref = jax.value_and_grad(lambda p, x, y: loss(jnp, p, x, y))(p, x, y)
    np.testing.assert_allclose(l, l_ref, rtol=1e-6)
    np.testing.assert_allclose(g["w"], g_ref["w"], rtol=1e-5, atol=1e-6)


def test_arange_inside_a_trace_is_jax_iota():
    """``arange(n)`` / ``arange(0, n)`` under jit are staged as JAX's ``broadcasted_iota``, with
    jnp.arange's dtype and length (float and empty cases included); the others stay constants."""
    import minixla
    import minixla.numpy as mnp
    for args, kw in [((10,), {}), ((0, 7), {}), ((5.0,), {}), ((3.5,), {}), ((0,), {}), ((-3,), {}),
                     ((6,), {"dtype": np.int8}), ((2, 9, 3), {})]:
        out = minixla.jit(lambda: mnp.arange(*args, **kw), backend="jax")()
        ref = jnp.arange(*args, **kw)
        assert out.dtype == ref.dtype and out.shape == ref.shape and np.array_equal(out, ref), (args, kw)
        text = str(minixla.make_jaxpr(lambda: mnp.arange(*args, **kw))())
        assert ("iota" in text) == (len(args) == 1 or args[0] == 0), text
