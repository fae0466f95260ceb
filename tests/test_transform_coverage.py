"""Every primitive has its JVP, transpose (if linear) and batching rows, except the ones that
``minixla.interpreters.rules.MISSING`` lists with a reason; and each row is exercised on the
coverage samples: the batching row against a per-example loop, the JVP and transpose rows by
the dot-product identity <ct, J t> == <J^T ct, t> (jvp against vjp)."""
import jax
import numpy as np
import pytest
from jax import tree_util

import minixla
from minixla.core.primitive import registry
from minixla.interpreters import rules
from minixla.interpreters.ad import is_float

from test_coverage import FORWARD_MODE_OF, SAMPLES


def test_every_primitive_has_its_transformation_rules_or_is_listed_missing():
    for name in sorted(registry):
        cells = rules.transform_cells(name)
        for col, cell in cells.items():
            if name in rules.MISSING[col]:
                assert cell == "missing", f"{name}: {col} rule exists now; remove it from rules.MISSING"
            else:
                assert cell in ("yes", "n/a"), f"{name} has no {col} rule (add it, or list it in rules.MISSING)"
    named = rules.LINEAR | rules.NO_OPERANDS | {n for m in rules.MISSING.values() for n in m}
    assert named <= set(registry), named - set(registry)


def test_rules_lookup_gathers_every_table():
    r = rules.rules("mul")
    assert set(r) == {"shape", "impl", "lowering", "jvp", "transpose", "batching"}
    assert all(v is not None for v in r.values())


def _variant(x, k):
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return (x * (0.5 + k) + 0.25 * k).astype(x.dtype)
    return x


@pytest.mark.parametrize("name", sorted(n for n in registry if rules.transform_cells(n)["batching"] == "yes"
                                         and n not in rules.NOT_PER_EXAMPLE))
def test_batching_row_matches_a_per_example_loop(name):
    fn, args = SAMPLES[name]
    examples = [tuple(_variant(a, k) for a in args) for k in range(3)]
    stacked = tuple(np.stack([e[i] for e in examples]) for i in range(len(args)))
    got = minixla.vmap(fn)(*stacked)
    want = [fn(*e) for e in examples]
    want = tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *want)
    for g, w in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-6, atol=1e-6)


def _tangent(x, r):
    x = np.asarray(x)
    if is_float(x.dtype):
        return r.uniform(-1, 1, x.shape).astype(x.dtype)
    return np.zeros(x.shape, jax.dtypes.float0)


def _dot(a, b):
    return sum(float(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
               for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b))
               if np.asarray(x).dtype != jax.dtypes.float0)


@pytest.mark.parametrize("name", sorted(n for n in registry if rules.transform_cells(n)["jvp"] == "yes"))
def test_jvp_and_transpose_rows_satisfy_the_dot_product_identity(name):
    fn, args = SAMPLES[name]
    r = np.random.default_rng(0)
    tans = tuple(_tangent(a, r) for a in args)
    y, ty = minixla.jvp(FORWARD_MODE_OF.get(name, fn), args, tans)
    if name in rules.FORWARD_ONLY:  # (while_loop: reverse mode is JAX's error)
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
            minixla.grad(lambda *a: minixla.numpy.sum(fn(*a)))(*args)
        return
    y2, pull = minixla.vjp(fn, *args)
    cts = tree_util.tree_map(lambda o: _tangent(o, r), y)
    grads = pull(cts)
    np.testing.assert_allclose(_dot(cts, ty), _dot(grads, tans), rtol=1e-4, atol=1e-4)
