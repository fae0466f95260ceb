"""minixla.jvp against jax.jvp, per primitive, eagerly and under jit on both backends."""
import jax
import numpy as np
import pytest

import minixla
from minixla import lax

from ad_cases import CASES, IDS, MODES, as_np, assert_tree_close, run, tangents_like


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,args", CASES, ids=IDS)
def test_jvp_matches_jax(name, fn, args, mode):
    f, jf = fn(lax), fn(jax.lax)
    tans = tangents_like(args)
    want = as_np(jax.jvp(jf, args, tans))
    got = run(mode, lambda a, t: minixla.jvp(f, a, t), args, tans)
    assert_tree_close(got, want)


def test_jvp_pytrees_and_int_outputs():
    def f(d):
        return {"y": d["a"] * d["b"], "n": lax.convert_element_type(d["a"], np.int32)}, d["a"]

    def jf(d):
        return {"y": d["a"] * d["b"], "n": jax.lax.convert_element_type(d["a"], np.int32)}, d["a"]
    p = ({"a": np.arange(3, dtype=np.float32), "b": np.ones(3, np.float32)},)
    t = ({"a": np.ones(3, np.float32), "b": np.full(3, 2.0, np.float32)},)
    assert_tree_close(minixla.jvp(f, p, t), as_np(jax.jvp(jf, p, t)))


def test_jvp_int_primal_needs_float0_tangent():
    x = np.int32(3)
    with pytest.raises(TypeError, match="tangent dtype must be float0"):
        minixla.jvp(lambda a: a, (x,), (np.int32(1),))
    out = minixla.jvp(lambda a, b: a * b, (np.float32(2.0), x),
                      (np.float32(1.0), np.zeros((), jax.dtypes.float0)))
    assert float(out[1]) == 0.0 + 3.0


def test_jvp_argument_errors_match_jax():
    with pytest.raises(TypeError, match="must be tuples or lists"):
        minixla.jvp(lambda x: x, 1.0, 1.0)
    with pytest.raises(TypeError, match="same tree structure"):
        minixla.jvp(lambda x: x, (1.0,), (1.0, 2.0))
    with pytest.raises(ValueError, match="different primal and tangent shapes"):
        minixla.jvp(lambda x: x, (np.ones(3, np.float32),), (np.ones(4, np.float32),))


def test_jvp_has_aux_and_linearize():
    f = lambda x: (lax.sin(x) * x, x + 1)  # noqa: E731
    x, t = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    assert_tree_close(minixla.jvp(f, (x,), (t,), has_aux=True), as_np(jax.jvp(
        lambda x: (jax.lax.sin(x) * x, x + 1), (x,), (t,), has_aux=True)))
    y, f_jvp = minixla.linearize(lambda x: lax.sin(x) * x, x)
    jy, jf_jvp = jax.linearize(lambda x: jax.lax.sin(x) * x, x)
    assert_tree_close((y, f_jvp(t), f_jvp(2 * t)), as_np((jy, jf_jvp(t), jf_jvp(2 * t))))


def test_jvp_of_jit_and_jit_of_jvp_nest():
    f = minixla.jit(lambda x: lax.exp(x) * x)
    x, t = np.linspace(-1, 1, 4).astype(np.float32), np.ones(4, np.float32)
    want = as_np(jax.jvp(lambda x: jax.lax.exp(x) * x, (x,), (t,)))
    assert_tree_close(minixla.jvp(f, (x,), (t,)), want)
    assert_tree_close(minixla.jit(lambda x, t: minixla.jvp(f, (x,), (t,)))(x, t), want)
