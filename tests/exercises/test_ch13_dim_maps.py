"""Tutorial 13's exercise: the dimension maps of ``broadcast`` (against minixla's built-in
rule) and ``sort`` (a new rule: a sort along an unsharded dim stays local), installed with
``using_dim_map``, through propagation, the partitioner and 4 virtual devices (values against
JAX)."""
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import minixla.numpy as mnp
from minixla.passes.sharding_propagation import dim_map, using_dim_map
from minixla.passes.spmd_partitioner import collective_bytes
from minixla.sharding import evaluate_partitioned, partition, propagate
from _exercise import exercise_module

MESH = {"x": 2, "y": 2}
#: name -> (function of a NumPy-like module, in_specs, argument shapes)
BROADCASTS = {
    "bias": (lambda np_, x, b: x + b, (P("x", "y"), P("y")), [(4, 6), (6,)]),
    "column": (lambda np_, x, c: x * c[:, None], (P(None, "y"), P("x")), [(4, 6), (4,)]),
    "new_middle_dim": (lambda np_, v: np_.broadcast_to(v[:, None, :], (4, 3, 6)) * 2.0, (P("y", "x"),),
                       [(4, 6)]),
    "backward": (lambda np_, x, b: x * np_.exp(b), (P("x", "y"), P()), [(4, 6), (6,)]),
}


def _counted(fn, calls):
    def rule(instr, k):
        calls.append(instr.opcode)
        return fn(instr, k)
    return rule


def _args(shapes):
    return [np.arange(np.prod(s), dtype=np.float32).reshape(s) / 7 - 1 for s in shapes]


@pytest.mark.parametrize("name", BROADCASTS)
def test_broadcast_dim_map_matches_builtin(name):
    f, specs, shapes = BROADCASTS[name]
    g = lambda *a: f(mnp, *a)  # noqa: E731
    args = _args(shapes)
    want = propagate(g, MESH, specs, args=args)
    bcasts = [i for i in want.entry.instructions if i.opcode == "broadcast" and i.operands[0].shape.rank]
    assert bcasts
    builtin = [dim_map(b, 0) for b in bcasts]
    student = exercise_module("ch13_dim_maps").broadcast_dim_map
    assert [list(student(b, 0)) for b in bcasts] == builtin
    calls = []
    with using_dim_map("broadcast", _counted(student, calls)):
        got = propagate(g, MESH, specs, args=args)
        value = evaluate_partitioned(partition(g, MESH, specs, args=args), *args)
    assert calls, "the rule was not used"
    assert [str(i.attrs["sharding"]) for i in got.entry.instructions] == \
        [str(i.attrs["sharding"]) for i in want.entry.instructions]
    np.testing.assert_allclose(value, f(jnp, *args), rtol=1e-6, atol=1e-6)


def test_sort_dim_map_keeps_a_sort_local():
    solution = exercise_module("ch13_dim_maps")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 5)).astype(np.float32)  # 10 rows over 4 devices: uneven
    x3 = rng.standard_normal((4, 6, 3)).astype(np.float32)
    with using_dim_map("sort", solution.sort_dim_map):
        # rows sharded, sorted along the columns: no collective
        rows = partition(lambda a: mnp.sort(a, axis=1), {"d": 4}, (P("d"),), P("d"), args=(x,))
        assert collective_bytes(rows) == []
        np.testing.assert_array_equal(evaluate_partitioned(rows, x), jnp.sort(x, axis=1))
        # argsort: keys and an iota sorted together, both operands of the sort
        arg = partition(lambda a: mnp.argsort(a, axis=1), {"d": 4}, (P("d"),), P("d"), args=(x,))
        assert collective_bytes(arg) == []
        np.testing.assert_array_equal(evaluate_partitioned(arg, x), jnp.argsort(x, axis=1))
        # a 3-D sort along the middle dim, the others sharded over a 2x2 mesh
        mid = partition(lambda a: mnp.sort(a, axis=1), MESH, (P("x", None, "y"),), P("x", None, "y"),
                        args=(x3,))
        assert collective_bytes(mid) == []
        np.testing.assert_array_equal(evaluate_partitioned(mid, x3), jnp.sort(x3, axis=1))
        # sorting along the sharded dim itself needs the whole dim: gathered, still right
        cols = partition(lambda a: mnp.sort(a, axis=0), {"d": 4}, (P("d"),), P("d"), args=(x,))
        assert any(op == "all-gather" for op, _, _ in collective_bytes(cols))
        np.testing.assert_array_equal(evaluate_partitioned(cols, x), jnp.sort(x, axis=0))
        maps = [solution.sort_dim_map(i, k) for i in mid.entry.instructions if i.opcode == "sort"
                for k in range(len(i.operands))]
    assert maps == [[0, None, 2]]
