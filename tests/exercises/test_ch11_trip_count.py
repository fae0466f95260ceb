"""Tutorial 11's exercise: ``trip_count`` of lowered loops, against the known answers."""
import numpy as np
import pytest

import minixla
from minixla import lax
from minixla.hlo import lower_jaxpr
from _exercise import exercise_module

X = np.ones(3, np.float32)
CASES = {
    "fori_0_5": (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2, x), 5),
    "scan_7": (lambda x: lax.scan(lambda c, a: (c + a, c), x, np.ones((7, 3), np.float32)), 7),
    "while_step_3": (lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 3, c[1] * 2), (1, x)), 3),
    "while_le": (lambda x: lax.while_loop(lambda c: c[0] <= 4, lambda c: (c[0] + 1, c[1]), (0, x)), 5),
    "while_zero": (lambda x: lax.while_loop(lambda c: c[0] < 0, lambda c: (c[0] + 1, c[1]), (5, x)), 0),
    "data_dependent": (lambda x: lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2, x), None),
}


@pytest.mark.parametrize("name", CASES)
def test_trip_count(name):
    trip_count = exercise_module("ch11_trip_count").trip_count
    fn, want = CASES[name]
    module = lower_jaxpr(minixla.make_jaxpr(fn)(X))
    loop, = [i for i in module.entry.instructions if i.opcode == "while"]
    assert trip_count(loop) == want
