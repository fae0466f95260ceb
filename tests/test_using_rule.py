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
