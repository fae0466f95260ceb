"""Sharding propagation, rule by rule (HLO text in, one pass, the shardings out), as XLA's
sharding_propagation_test.cc reads."""
import pytest

from minixla.hlo.parser import parse
from minixla.passes.sharding_propagation import ShardingPropagation, merge
from minixla.sharding import HloSharding

ADD = """%add (p: f32[], q: f32[]) -> f32[] {
  %p.0 = f32[] parameter(0)
  %q.0 = f32[] parameter(1)
  ROOT %add.0 = f32[] add(%p.0, %q.0)
}

"""


def _propagate(body: str, n=None) -> dict:
    m = parse("HloModule t\n\n" + ADD + "ENTRY %main () -> f32[] {\n" + body + "\n}\n")
    ShardingPropagation(n).run(m)
    return {i.name: str(i.attrs["sharding"]) for i in m.entry.instructions}


def test_elementwise_forward_and_backward():
    s = _propagate("""
  %x = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  %y = f32[8,4] parameter(1)
  %e = f32[8,4] exponential(%x)
  %z = f32[8,4] add(%e, %y)
  ROOT %n = f32[8,4] negate(%z)""")
    assert s["e"] == s["z"] == s["n"] == "{devices=[2,1]0,1}"
    assert s["y"] == "{devices=[2,1]0,1}"  # backward from %z to an unannotated parameter


def test_broadcast_transpose_reshape():
    s = _propagate("""
  %x = f32[8] parameter(0), sharding={devices=[2]0,1}
  %b = f32[8,6] broadcast(%x), dimensions={0}
  %t = f32[6,8] transpose(%b), dimensions={1,0}
  %r = f32[6,2,4] reshape(%t)
  %q = f32[48] reshape(%t)
  %w = f32[3,16] reshape(%t)
  ROOT %o = f32[6,2,4] negate(%r)""")
    assert s["b"] == "{devices=[2,1]0,1}"
    assert s["t"] == "{devices=[1,2]0,1}"
    assert s["r"] == "{devices=[1,2,1]0,1}"  # 8 -> 2x4: the major part of the split keeps the tiles
    assert s["q"] == "{replicated}"         # a minor dim merged into a major one: not contiguous
    assert s["w"] == "{replicated}"


def test_backward_through_broadcast_folds_new_dims_into_replication():
    s = _propagate("""
  %x = f32[8] parameter(0)
  ROOT %b = f32[8,6] broadcast(%x), dimensions={0}, sharding={devices=[2,2]0,1,2,3}""")
    assert s["x"] == "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"


def test_reduce_over_sharded_dim_replicates_over_those_devices():
    s = _propagate("""
  %x = f32[8,6] parameter(0), sharding={devices=[2,2]0,1,2,3}
  %c = f32[] constant(0)
  ROOT %r = f32[6] reduce(%x, %c), dimensions={0}, to_apply=%add""")
    assert s["r"] == "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}"
    assert s["c"] == "{replicated}"


def test_dot_batch_and_non_contracting_dims_merge():
    s = _propagate("""
  %a = f32[4,8,6] parameter(0), sharding={devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}
  %b = f32[4,6,5] parameter(1), sharding={devices=[2,1,2]0,1,2,3}
  ROOT %d = f32[4,8,5] dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}""")
    assert s["d"] == "{devices=[2,1,2]0,1,2,3}"  # batch from both, columns from rhs
    s = _propagate("""
  %a = f32[8,6] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  %b = f32[6,4] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}
  ROOT %d = f32[8,4] dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}""")
    assert s["d"] == "{devices=[2,2]0,1,2,3}"  # rows from lhs, columns from rhs


def test_dot_contracting_dim_and_backward():
    s = _propagate("""
  %a = f32[8,6] parameter(0), sharding={devices=[1,2]0,1}
  %b = f32[6,4] parameter(1)
  %d = f32[8,4] dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  ROOT %o = f32[8,4] negate(%d), sharding={devices=[2,1]0,1}""")
    assert s["d"] == "{devices=[2,1]0,1}"  # backward from the root beats the replicated partial
    assert s["b"] == "{replicated}"         # the result's rows say nothing about the rhs


def test_convolution_batch_and_feature():
    s = _propagate("""
  %x = f32[4,6,6,2] parameter(0), sharding={devices=[2,1,1,1]0,1}
  %k = f32[3,3,2,8] parameter(1)
  ROOT %y = f32[4,6,6,8] convolution(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f""")
    assert s["y"] == "{devices=[2,1,1,1]0,1}"
    s = _propagate("""
  %x = f32[4,6,6,2] parameter(0)
  %k = f32[3,3,2,8] parameter(1), sharding={devices=[1,1,1,2]0,1}
  ROOT %y = f32[4,6,6,8] convolution(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f""")
    assert s["y"] == "{devices=[1,1,1,2]0,1}"


def test_slice_pad_concatenate_keep_whole_dims_only():
    s = _propagate("""
  %x = f32[8,6] parameter(0), sharding={devices=[2,2]0,1,2,3}
  %s = f32[8,3] slice(%x), slice={[0:8], [0:3]}
  %z = f32[] constant(0)
  %p = f32[8,9] pad(%s, %z), padding_config=((0, 0, 0), (1, 5, 0))
  %c = f32[8,15] concatenate(%x, %p), dimensions={1}
  ROOT %o = f32[8,15] negate(%c)""")
    assert s["s"] == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
    assert s["p"] == s["c"] == s["o"] == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"


def test_tuple_and_get_tuple_element():
    s = _propagate("""
  %x = f32[8] parameter(0), sharding={devices=[2]0,1}
  %y = f32[8] parameter(1)
  %t = (f32[8], f32[8]) tuple(%x, %y)
  %g = f32[8] get-tuple-element(%t), index=0
  ROOT %o = f32[8] negate(%g)""")
    assert s["t"] == "{{devices=[2]0,1}, {replicated}}"
    assert s["g"] == s["o"] == "{devices=[2]0,1}"


def test_constraints_are_never_overridden_and_conflicts_prefer_more_tiles():
    s = _propagate("""
  %x = f32[8,4] parameter(0), sharding={devices=[4,1]0,1,2,3}
  %y = f32[8,4] parameter(1), sharding={devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}
  %a = f32[8,4] add(%x, %y)
  %c = f32[8,4] custom-call(%a), custom_call_target="Sharding", sharding={replicated}
  ROOT %o = f32[8,4] exponential(%c)""")
    assert s["a"] == "{devices=[4,1]0,1,2,3}"  # 4 tiles beat 2 (the two don't merge)
    assert s["c"] == "{replicated}"            # the constraint holds
    assert s["o"] == "{replicated}"


def test_merge_needs_consistent_devices():
    a = HloSharding.parse("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")
    b = HloSharding.parse("{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}")
    assert str(merge(a, b, 2, 4)) == "{devices=[2,2]0,1,2,3}"
    c = HloSharding.parse("{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}")
    assert merge(a, c, 2, 4) is None  # devices 0 and 1 would hold the same tile


def test_unannotated_module_is_replicated():
    s = _propagate("""
  %x = f32[8] parameter(0)
  ROOT %o = f32[8] negate(%x)""", n=2)
    assert set(s.values()) == {"{replicated}"}


def test_a_sharding_that_does_not_fit_is_an_error():
    from minixla.sharding import ShardingError
    with pytest.raises(ShardingError, match="rank 1"):
        _propagate("""
  %x = f32[8] parameter(0), sharding={devices=[2,1]0,1}
  ROOT %o = f32[8] negate(%x)""")


def test_using_dim_map_installs_a_rule_and_restores_the_built_in_one():
    from minixla.passes.sharding_propagation import DIM_MAP_RULES, using_dim_map
    body = """
  %x = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  ROOT %t = f32[4,8] transpose(%x), dimensions={1,0}"""
    assert _propagate(body)["t"] == "{devices=[1,2]0,1}"
    with using_dim_map("transpose", lambda instr, k: [None, None]):
        assert _propagate(body)["t"] == "{replicated}"
        with using_dim_map("transpose", None):  # None: the built-in rule
            assert _propagate(body)["t"] == "{devices=[1,2]0,1}"
        assert _propagate(body)["t"] == "{replicated}"

    def broken(instr, k):
        raise RuntimeError("a broken rule")
    with pytest.raises(RuntimeError, match="broken"), using_dim_map("transpose", broken):
        _propagate(body)
    assert "transpose" not in DIM_MAP_RULES and _propagate(body)["t"] == "{devices=[1,2]0,1}"
