"""``minixla.interpreters.rules.using_rule``: the hook the course's exercises use to try a rule."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.interpreters.ad import jvp_rules
from minixla.interpreters.batching import batching_rules
from minixla.interpreters.rules import using_rule


def test_using_rule_swaps_in_and_restores_even_after_an_error():
    original = jvp_rules[lax.sin_p]

    def doubled(primals, tangents):
        (x,), (t,) = primals, tangents
        return lax.sin(x), lax.mul(lax.mul(t, lax.cos(x)), np.float32(2))
    with pytest.raises(RuntimeError):
        with using_rule("jvp", "sin", doubled):
            assert minixla.grad(mnp.sin)(np.float32(0.0)) == 2.0  # the swapped-in rule is used
            raise RuntimeError
    assert jvp_rules[lax.sin_p] is original
    assert minixla.grad(mnp.sin)(np.float32(0.0)) == 1.0


def test_using_rule_none_behaves_as_a_missing_row():
    original = batching_rules[lax.cumsum_p]
    with using_rule("batching", lax.cumsum_p, None):
        with pytest.raises(minixla.errors.UnsupportedError, match="Batching rule for 'cumsum' not implemented"):
            minixla.vmap(mnp.cumsum)(np.ones((2, 3), np.float32))
    assert batching_rules[lax.cumsum_p] is original


def test_using_rule_removes_a_row_that_did_not_exist():
    from minixla.interpreters.ad import transpose_rules
    assert lax.sin_p not in transpose_rules
    with using_rule("transpose", lax.sin_p, lambda ct, x: [ct]):
        assert lax.sin_p in transpose_rules
    assert lax.sin_p not in transpose_rules


def test_using_rule_unknown_table_or_primitive():
    with pytest.raises(KeyError):
        with using_rule("lowering", lax.sin_p, None):
            pass
    with pytest.raises(KeyError):
        with using_rule("jvp", "no_such_primitive", None):
            pass


def test_a_rule_that_breaks_its_contract_is_named():
    # a JVP rule returning only the tangent, or a reduced tangent, and a transpose rule returning
    # a bare array were unpacked row by row into silently wrong derivatives
    x = np.full((2, 3), 0.5, np.float32)
    only_tangent = lambda primals, tangents: lax.mul(tangents[0], np.float32(2))
    reduced = lambda primals, tangents: (lax.tanh(primals[0]), mnp.sum(tangents[0]))
    with using_rule("jvp", lax.tanh_p, only_tangent):
        with pytest.raises(minixla.errors.TransformTypeError, match="jvp rule of 'tanh' must return a pair"):
            minixla.jvp(mnp.tanh, (x,), (x,))
    with using_rule("jvp", lax.tanh_p, reduced):
        with pytest.raises(minixla.errors.TransformTypeError, match=r"tangent of shape \(\) for a primal output f32\[2,3\]"):
            minixla.grad(lambda x: mnp.sum(mnp.tanh(x)))(x)
    bare = lambda ct, x, *, axes: lax.broadcast_in_dim(ct, x.aval.shape, (1,))
    with using_rule("transpose", lax.reduce_sum_p, bare):
        with pytest.raises(minixla.errors.TransformTypeError, match="transpose rule of 'reduce_sum' must return a list of 1"):
            minixla.vjp(lambda x: lax.reduce_sum(x, (0,)), x)[1](np.ones(3, np.float32))
    wrong_shape = lambda ct, x, *, axes: [ct]
    with using_rule("transpose", lax.reduce_sum_p, wrong_shape):
        with pytest.raises(minixla.errors.TransformTypeError, match=r"cotangent of shape \(3,\) for its operand 0, f32\[2,3\]"):
            minixla.vjp(lambda x: lax.reduce_sum(x, (0,)), x)[1](np.ones(3, np.float32))
