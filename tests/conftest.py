import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

BACKENDS = ("llvm", "jax")

# Every compile in the test suite runs the HLO verifier after each pass (minixla.jit).
os.environ.setdefault("MINIXLA_VERIFY", "1")

# On a GPU, JAX's default float32 matmul precision is TF32-class: eager and the hand-off's jit
# then differ by ~3e-4 relative with the summation order. The tests compare at full precision
# there (on a CPU the default already is).
import jax  # noqa: E402

if jax.default_backend() != "cpu":
    jax.config.update("jax_default_matmul_precision", "highest")


def _share_jax_compiles():
    """JAX eager, the suite's reference, compiles every primitive it runs with XLA (~50 ms of
    CPU each, about half the suite's time). The pytest-xdist workers, and later runs, share
    those executables through JAX's own persistent cache (``minixla.testing.share_jax_compiles``).
    ``MINIXLA_TEST_JAX_CACHE`` names the directory; empty turns it off.
    (Subprocesses the tests start do not inherit it: they measure cold processes.)"""
    from minixla.testing import default_jax_cache_dir, share_jax_compiles
    share_jax_compiles(os.environ.get("MINIXLA_TEST_JAX_CACHE", default_jax_cache_dir("test-jax-cache")),
                       trim="PYTEST_XDIST_WORKER" not in os.environ)  # (the controller, before any worker)


_share_jax_compiles()


def filecheck(text: str, checks: str):
    """Run the ``filecheck`` package (a Python FileCheck) on ``text`` with ``CHECK:`` lines."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(checks)
    try:
        cmd = [os.path.join(os.path.dirname(sys.executable), "filecheck"), f.name]
        r = subprocess.run(cmd, input=text, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, f"FileCheck failed:\n{r.stdout}{r.stderr}\n--- input ---\n{text}"


@pytest.fixture
def x64():
    """Run the test with ``jax_enable_x64`` on (64-bit default int and float, as JAX), then restore it."""
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", prev)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
