"""The code's target: ``minixla_llvm_cpu`` / ``minixla_llvm_features`` (``target.host_cpu()``).

One place decides the CPU and features (the target machine, the kernel cache, the persistent
cache's key and the compile workers ask it), so a restricted target gives restricted machine
code everywhere, the same results, and another cache key.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.backends.llvm import target
from minixla.cache import key

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                                reason="x86-64 CPU names")


def _program(x):
    # elementwise math of every kind the emitter inlines (bit-identical at any vector width)
    y = mnp.tanh(mnp.exp(mnp.tanh(x * 2 + 1) * 0.5) * x - 0.25) + x
    return y + lax.logistic(x) * mnp.log(mnp.abs(x) + 0.5) + mnp.where(x > 0, x, mnp.expm1(x))


_CHILD = """
import json, sys, numpy as np, minixla
sys.path.insert(0, {tests!r})
from test_llvm_target import _program, _inputs
from minixla.backends.llvm import target
from minixla.cache import key
c = minixla.jit(_program).lower(_inputs()).compile()
out = np.asarray(c(_inputs()))
print(json.dumps({{"cpu": target.host_cpu()[0], "key": key.host_target(), "zmm": "zmm" in c.executable.asm,
                   "ymm": "ymm" in c.executable.asm, "bytes": target.vector_register_bytes(),
                   "out": out.view(np.uint32).tolist()}}))
"""


def _inputs():
    x = np.linspace(-12, 12, 4099, dtype=np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-30, -100.0]
    return x


def test_restricted_cpu_emits_avx2_code_with_the_same_results_and_another_cache_key():
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, MINIXLA_LLVM_CPU="haswell", MINIXLA_COMPILE_WORKERS="1")
    env.pop("MINIXLA_LLVM_FEATURES", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(tests=tests)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    assert child["cpu"] == "haswell" and child["bytes"] == 32
    assert child["ymm"] and not child["zmm"], "AVX-512 registers in code for an AVX2-only CPU"
    assert child["key"]["cpu"] == "haswell" and child["key"] != key.host_target()
    # the same bits as the host's code (another vector width, the same arithmetic)
    here = np.asarray(minixla.jit(_program)(_inputs())).view(np.uint32)
    np.testing.assert_array_equal(np.array(child["out"], np.uint32), here)


def test_host_cpu_reads_the_options(monkeypatch):
    read = target.host_cpu.__wrapped__  # (the cached one is frozen for this process)
    monkeypatch.delenv(target.CPU_ENV, raising=False)
    monkeypatch.setenv(target.FEATURES_ENV, "-avx512f")
    cpu, features = read()
    assert cpu == target.llvm.get_host_cpu_name() and features.endswith(",-avx512f")
    monkeypatch.setenv(target.FEATURES_ENV, "avx2")
    with pytest.raises(ValueError, match="start with"):
        read()
    monkeypatch.setenv(target.FEATURES_ENV, "+avx2,+fma")
    monkeypatch.setenv(target.CPU_ENV, "x86-64-v3")
    assert read() == ("x86-64-v3", "+avx2,+fma")
    monkeypatch.setenv(target.CPU_ENV, "no-such-cpu")
    with pytest.raises(ValueError, match="not a CPU LLVM knows"):
        read()
    # the documented options set the variables the target reads
    with minixla.config.override(minixla_llvm_cpu="haswell", minixla_llvm_features="-avx512f"):
        assert os.environ[target.CPU_ENV] == "haswell" and os.environ[target.FEATURES_ENV] == "-avx512f"
