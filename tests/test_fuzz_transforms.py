"""The differential fuzzer's transformation modes (``minixla/fuzz/transforms.py``): the random
programs of ``tests/test_fuzz.py`` through ``grad``/``vjp``, ``jvp`` and ``vmap`` under
``minixla.jit`` on both backends, against the same transformation by JAX eager.

``MINIXLA_FUZZ_GRAD_EXAMPLES``, ``MINIXLA_FUZZ_JVP_EXAMPLES`` and ``MINIXLA_FUZZ_VMAP_EXAMPLES``
set the number of programs per mode (a few for CI, the same every run unless
``MINIXLA_FUZZ_RANDOM=1``; then ``--hypothesis-seed=N`` splits a deep run over processes), and
``MINIXLA_FUZZ_LOG`` names a file that keeps the program being run. Every mismatch a deep run
found is pinned in ``test_transform_regressions`` against JAX's value.
"""
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from minixla.fuzz.programs import programs
from minixla.fuzz.transforms import GRAD_DTYPES, MAX_OPS, SPECIAL_RATE, fuzz_transform

DERANDOMIZE = not os.environ.get("MINIXLA_FUZZ_RANDOM")
LOG = os.environ.get("MINIXLA_FUZZ_LOG")


def _examples(mode, default):
    return int(os.environ.get(f"MINIXLA_FUZZ_{mode.upper()}_EXAMPLES", default))


def _fuzz(n):
    return settings(max_examples=n, deadline=None, derandomize=DERANDOMIZE, print_blob=True,
                    suppress_health_check=list(HealthCheck))


differentiable_programs = programs(dtypes=GRAD_DTYPES, max_ops=MAX_OPS, special_rate=SPECIAL_RATE)


@_fuzz(_examples("grad", 4))
@given(differentiable_programs, st.data())
def test_grad_of_random_programs(prog, data):
    fuzz_transform("grad", prog, data, LOG)


@_fuzz(_examples("jvp", 3))
@given(differentiable_programs, st.data())
def test_jvp_of_random_programs(prog, data):
    fuzz_transform("jvp", prog, data, LOG)


@_fuzz(_examples("vmap", 4))
@given(programs(max_ops=MAX_OPS), st.data())
def test_vmap_of_random_programs(prog, data):
    fuzz_transform("vmap", prog, data, LOG)
