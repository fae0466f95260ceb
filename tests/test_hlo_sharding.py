"""HloSharding text and PartitionSpec conversion, checked against XLA's own OpSharding text."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from minixla.hlo import collectives
from minixla.hlo.ir import HloComputation, HloInstruction, HloModule, Shape
from minixla.hlo.parser import parse
from minixla.sharding import HloSharding, ShardingError


@pytest.mark.parametrize("text", [
    "{replicated}", "{maximal device=3}", "{devices=[2,1]0,1}", "{devices=[4]3,2,1,0}",
    "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "{{replicated}, {devices=[2]0,1}}",
])
def test_text_round_trip(text):
    assert str(HloSharding.parse(text)) == text


def test_iota_form_reads_as_explicit_devices():
    assert str(HloSharding.parse("{devices=[2,2]<=[4]}")) == "{devices=[2,2]0,1,2,3}"
    assert str(HloSharding.parse("{devices=[2,2]<=[2,2]T(1,0)}")) == "{devices=[2,2]0,2,1,3}"
    s = HloSharding.parse("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert s.tile_dims == (2, 1, 2) and s.devices == (0, 2, 1, 3)


def _xla_sharding_text(spec, mesh_shape, names, ndim):
    """The sharding XLA gets for NamedSharding(spec) (via the OpSharding proto)."""
    from jax._src import sharding_impls
    mesh = jax.sharding.AbstractMesh(mesh_shape, names)
    hlo = sharding_impls.NamedSharding(mesh, spec)._to_xla_hlo_sharding(ndim)
    return str(hlo)


@pytest.mark.parametrize("spec,ndim", [
    (P("x"), 2), (P(None, "x"), 2), (P("x", "y"), 2), (P("y", "x"), 2), (P(("x", "y")), 1),
    (P(("y", "x"), None), 2), (P("y"), 3), (P(), 2),
])
def test_from_partition_spec_matches_xla(spec, ndim):
    axes = {"x": 2, "y": 4}
    ours = HloSharding.from_partition_spec(spec, axes, ndim)
    xla = HloSharding.parse(_xla_sharding_text(spec, (2, 4), ("x", "y"), ndim))
    assert ours == xla, (str(ours), str(xla))


def test_tile_shape_and_index():
    s = HloSharding.from_partition_spec(P("x", None), {"x": 2, "y": 2}, 2)
    assert s.tile_shape((5, 3)) == (3, 3)  # uneven: padded last tile
    assert s.tile_index(0) == (0, 0) and s.tile_index(2) == (1, 0)


def test_bad_specs_name_the_axis():
    with pytest.raises(ShardingError, match="'z'"):
        HloSharding.from_partition_spec(P("z"), {"x": 2}, 1)
    with pytest.raises(ShardingError, match="more than once"):
        HloSharding.from_partition_spec(P("x", "x"), {"x": 2}, 2)
    with pytest.raises(ShardingError, match="rank 1"):
        HloSharding.from_partition_spec(P("x", None), {"x": 2}, 1)


def test_collectives_and_sharding_print_and_parse():
    m = HloModule("spmd")
    add = m.new_computation("add")
    a = add.add_instruction(HloInstruction("parameter", Shape(np.dtype("float32"), ()), parameter_number=0))
    b = add.add_instruction(HloInstruction("parameter", Shape(np.dtype("float32"), ()), parameter_number=1))
    add.root = add.add_instruction(HloInstruction("add", a.shape, [a, b]))
    main = m.new_computation("main")
    m.entry = main
    x = main.add_instruction(HloInstruction("parameter", Shape(np.dtype("float32"), (2, 4)),
                                            parameter_number=0,
                                            attrs={"sharding": HloSharding.parse("{devices=[2,1]0,1}")}))
    ar = main.add_instruction(collectives.all_reduce(x, [[0, 1]], add))
    ag = main.add_instruction(collectives.all_gather(ar, 0, [[0, 1]]))
    rs = main.add_instruction(collectives.reduce_scatter(ag, 0, [[0, 1]], add))
    aa = main.add_instruction(collectives.all_to_all(rs, 1, [[0, 1]]))
    main.root = main.add_instruction(collectives.collective_permute(aa, [(0, 1), (1, 0)]))
    main.add_instruction(collectives.partition_id())
    text = m.to_string()
    assert "all-gather(" in text and "replica_groups={{0,1}}" in text
    assert "source_target_pairs={{0,1},{1,0}}" in text and "sharding={devices=[2,1]0,1}" in text
    assert ag.shape.dims == (4, 4) and rs.shape.dims == (2, 4)
    assert parse(text).to_string() == text
