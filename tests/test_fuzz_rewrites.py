"""The differential fuzzer's rewrite mode (``minixla/fuzz/rewrites.py``): the compositions XLA's
whole-program optimizer rewrites (inverse pairs at overflow bounds, ``exp(a)*exp(b)`` near
overflow, integer squares near wraparound, update-slices that overlap their source, nested
slices with out-of-range starts) compiled by ``minixla.jit`` on both backends against JAX
eager: the hand-off bit for bit. A few cases in CI (the same every run), many with
``MINIXLA_DEEP_FUZZ=1`` (``MINIXLA_FUZZ_REWRITE_EXAMPLES=N`` sets the count; with
``MINIXLA_FUZZ_RANDOM=1`` new ones each run).
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from minixla.backends import jax_xla
from minixla.fuzz.rewrites import Case, cases, run_case

DEEP = bool(os.environ.get("MINIXLA_DEEP_FUZZ"))
N = int(os.environ.get("MINIXLA_FUZZ_REWRITE_EXAMPLES", 2000 if DEEP else 12))


@settings(max_examples=N, deadline=None, derandomize=not os.environ.get("MINIXLA_FUZZ_RANDOM"),
          print_blob=True, suppress_health_check=list(HealthCheck), database=None)
@given(cases())
def test_rewrite_compositions_match_eager(case):
    run_case(case, backends=("jax", "llvm") if DEEP else ("jax",))
