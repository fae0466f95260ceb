"""Tutorial 02's exercise: the ``popcnt`` evaluator rule agrees with ``jax.lax.population_count``."""
import jax
import numpy as np
import pytest

from minixla.hlo import parse
from minixla.hlo.evaluator import evaluate, evaluate_rules
from minixla.hlo.ir import xla_dtype_name
from minixla.hlo.verifier import verify
from _exercise import exercise_module

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def values(dtype):
    info = np.iinfo(dtype)
    extremes = np.array([info.min, info.max, 0, 1, 2, 3, info.max - 1, info.min + 1], dtype)
    rest = np.random.default_rng(0).integers(info.min, info.max, 24, dtype=dtype, endpoint=True)
    return np.concatenate([extremes, rest]).reshape(4, 8)


@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).name for d in DTYPES])
def test_popcnt_matches_jax(dtype, monkeypatch):
    monkeypatch.setitem(evaluate_rules, "popcnt", exercise_module("ch02_popcnt").popcnt)
    t = xla_dtype_name(dtype)
    module = parse(f"""
HloModule popcnt

ENTRY %main (a: {t}[4,8]) -> {t}[4,8] {{
  %a = {t}[4,8]{{1,0}} parameter(0)
  ROOT %c = {t}[4,8]{{1,0}} popcnt(%a)
}}
""")
    verify(module)
    x = values(dtype)
    got = evaluate(module, x)
    if np.dtype(dtype).itemsize <= 4:
        want = np.asarray(jax.lax.population_count(x))
    else:  # JAX without x64 has no 64-bit integers: NumPy counts the bits of the unsigned view
        want = np.bitwise_count(x.view(np.uint64)).astype(dtype)  # (on a signed array: of |x|)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_minus_one_has_every_bit_set(monkeypatch):
    popcnt = exercise_module("ch02_popcnt").popcnt
    module = parse("HloModule p\n\nENTRY %main (a: s32[2]) -> s32[2] {\n  %a = s32[2]{0} parameter(0)\n"
                   "  ROOT %c = s32[2]{0} popcnt(%a)\n}\n")
    assert list(popcnt(module.entry.root, np.array([-1, -2**31], np.int32))) == [32, 1]
