"""minixla's SPMD partitioner: per-device programs run on virtual devices in the HLO evaluator
(``evaluate_spmd``, lockstep) equal JAX's values, and the partitioned HLO has the collectives
GSPMD would insert (FileCheck)."""
import functools

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import minixla.numpy as mnp
from benchmarks import spmd as spmd_bench
from benchmarks.spmd import block, cnn, grads, mlp, train_step
from conftest import filecheck
from minixla.core import errors
from minixla.hlo.evaluator import evaluate_spmd
from minixla.hlo.parser import parse
from minixla.hlo.verifier import verify
from minixla.passes.spmd_partitioner import collective_bytes
from minixla.sharding import ShardingError, evaluate_partitioned, partition

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _check(f, mesh, in_specs, out_specs, args, checks=None, rtol=2e-5, ref=np, want=None):
    """Partition ``f`` (written against a numpy-like module ``np_``), run it on the mesh's
    virtual devices and compare with ``f(ref, ...)`` (NumPy where it computes the same as JAX
    eager, which costs a compile per op); FileCheck the per-device HLO."""
    m = partition(functools.partial(f, mnp), mesh, in_specs, out_specs, args=args)
    text = m.to_string()
    back = parse(text)
    assert back.to_string() == text  # prints and parses as XLA text (num_partitions included)
    assert getattr(back, "num_partitions", 1) == m.num_partitions
    got = evaluate_partitioned(m, *args)
    want = f(ref, *args) if want is None else want
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=1e-5)
    if checks:
        filecheck(text, checks)
    return m


def test_mlp_data_parallel_has_no_collectives():
    x, w1, w2 = _rand(8, 4), _rand(4, 6), _rand(6, 3)
    m = _check(mlp, {"data": 4}, (P("data"), P(), P()), P("data"), (x, w1, w2), """
CHECK: p0 = f32[2,4]{1,0} parameter(0), sharding={devices=[4,1]0,1,2,3}
CHECK-NOT: all-reduce
CHECK-NOT: all-gather
CHECK: ROOT {{.*}} f32[2,3]{1,0} dot(
""")
    assert collective_bytes(m) == []


def test_mlp_megatron_one_all_reduce():
    """Column-parallel then row-parallel dot: the hidden dim never leaves its device; one
    all-reduce of the [batch, out] partial sums."""
    x, w1, w2 = _rand(8, 4), _rand(4, 6), _rand(6, 3)
    m = _check(mlp, {"model": 2}, (P(), P(None, "model"), P("model", None)), P(), (x, w1, w2), """
CHECK: p1 = f32[4,3]{1,0} parameter(1), sharding={devices=[1,2]0,1}
CHECK: tanh{{.*}} = f32[8,3]{1,0} tanh(
CHECK-NOT: all-gather
CHECK: ROOT %all-reduce{{.*}} = f32[8,3]{1,0} all-reduce({{.*}}), replica_groups={{[{][{]0,1[}][}]}}
""")
    assert collective_bytes(m) == [("all-reduce", "f32[8,3]{1,0}", 2 * 1 / 2 * 8 * 3 * 4)]


def test_2d_mesh_data_and_model_parallel():
    x, w1, w2 = _rand(8, 4), _rand(4, 6), _rand(6, 4)
    m = _check(mlp, {"data": 2, "model": 2}, (P("data"), P(None, "model"), P("model", None)),
               P("data"), (x, w1, w2), "CHECK: all-reduce({{.*}}), replica_groups={{[{][{]0,1[}],[{]2,3[}][}]}}")
    assert [c[0] for c in collective_bytes(m)] == ["all-reduce"]


def test_reductions_over_sharded_dims_and_uneven_shards():
    """10 rows over 4 devices: tiles of 3 padded to 12; the padding is masked with the
    reducer's identity before the local reduce (sum, max, min) and sliced off when gathering."""
    def f(np_, x):
        return np_.sum(x, axis=0), np_.max(x), np_.min(x * 2.0, axis=1), np_.exp(x) + 1.0
    x = _rand(10, 3) - 4.0  # all negative: padding zeros would win the max
    m = _check(f, {"d": 4}, (P("d"),), (P(), P(), P(), P()), (x,), """
CHECK: p0 = f32[3,3]{1,0} parameter(0)
CHECK: partition-id()
CHECK: select(
CHECK: all-reduce(
CHECK: all-gather(
""")
    verify(m)


def test_uneven_batch_elementwise_and_dot_with_sharded_contracting_dim():
    def f(np_, a, b):
        return np_.log(np_.abs(a) + 1.0) @ b  # contracting dim of 10 over 4: masked to 0
    a, b = _rand(3, 10), _rand(10, 5)
    _check(f, {"d": 4}, (P(None, "d"), P("d", None)), P(), (a, b), "CHECK: all-reduce(")


def test_reshard_by_all_to_all():
    def f(np_, x):
        return x * 2.0
    x = _rand(4, 8)
    m = _check(f, {"d": 4}, (P("d", None),), P(None, "d"), (x,), """
CHECK: all-to-all(
CHECK-NOT: all-gather
""")
    assert [c[0] for c in collective_bytes(m)] == ["all-to-all"]


def test_replicated_to_tiled_is_a_dynamic_slice_by_partition_id():
    def f(np_, x):
        return np_.sin(x)
    m = _check(f, {"d": 2}, (P(),), P("d"), (_rand(6, 2),), """
CHECK: partition-id()
CHECK: dynamic-slice(
CHECK-NOT: all-
""")
    assert collective_bytes(m) == []


def test_transformer_block_heads_sharded():
    """Attention with the heads sharded (Megatron): q/k/v projections column-parallel, the
    output projection row-parallel: one all-reduce per block, no all-gather."""
    x = _rand(2, 4, 8)
    wq, wk, wv = _rand(8, 4, 2), _rand(8, 4, 2), _rand(8, 4, 2)
    wo = _rand(4, 2, 8)
    heads = P(None, "model", None)
    m = _check(block, {"model": 2}, (P(), heads, heads, heads, P("model", None, None)), P(),
               (x, wq, wk, wv, wo), """
CHECK-NOT: all-gather
CHECK: all-reduce(
CHECK-NOT: all-reduce(
""", rtol=1e-4)
    assert [c[0] for c in collective_bytes(m)] == ["all-reduce"]


def test_cnn_forward_batch_sharded():
    x, k, w = _rand(4, 6, 6, 1), _rand(3, 3, 1, 4), _rand(4, 3)
    _check(cnn, {"batch": 2}, (P("batch"), P(), P()), P("batch"), (x, k, w), """
CHECK: p0 = f32[2,6,6,1]{3,2,1,0} parameter(0)
CHECK: f32[2,6,6,4]{3,2,1,0} convolution(
CHECK-NOT: all-
""", rtol=1e-4, ref=jjnp)


def test_evaluate_spmd_collective_semantics():
    """The reference semantics of each collective on 4 virtual devices."""
    text = """HloModule c

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[2]) -> (f32[2], f32[4], f32[1], f32[2], f32[2]) {
  %x = f32[2]{0} parameter(0)
  %ar = f32[2]{0} all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%add
  %ag = f32[4]{0} all-gather(%x), replica_groups={{0,2},{1,3}}, dimensions={0}
  %rs = f32[1]{0} reduce-scatter(%x), replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=%add
  %aa = f32[2]{0} all-to-all(%x), replica_groups={{0,1},{2,3}}, dimensions={0}
  %cp = f32[2]{0} collective-permute(%x), source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT %t = (f32[2], f32[4], f32[1], f32[2], f32[2]) tuple(%ar, %ag, %rs, %aa, %cp)
}
"""
    m = parse(text)
    verify(m)
    xs = [np.array([10 * d, 10 * d + 1], np.float32) for d in range(4)]
    out = evaluate_spmd(m, [[x] for x in xs])
    np.testing.assert_array_equal(out[1][0], [10, 12])             # 0 + 10, 1 + 11
    np.testing.assert_array_equal(out[1][1], [10, 11, 30, 31])     # gather {1,3}
    np.testing.assert_array_equal(out[1][2], [12])                 # slice 1 of [10, 12]
    np.testing.assert_array_equal(out[1][3], [1, 11])              # chunk 1 of each member
    np.testing.assert_array_equal(out[0][4], [0, 0])               # nobody sends to 0
    np.testing.assert_array_equal(out[3][4], [20, 21])


def test_bad_specs_name_the_argument():
    x = _rand(4, 4)
    with pytest.raises(ShardingError, match=r"in_specs\[0\].*'model'"):
        partition(lambda a: a + 1.0, {"data": 2}, (P("model"),), args=(x,))
    with pytest.raises(ShardingError, match="1 in_specs for 2 arguments"):
        partition(lambda a, b: a + b, {"data": 2}, (P(),), args=(x, x))


def test_collectives_no_more_bytes_than_xla():
    """For the same annotations, XLA's own partitioned HLO (8 host devices, in a subprocess:
    ``python -m benchmarks.spmd --json``) moves at least as many bytes in collectives as
    minixla's per-device program: the MLP (data, model, 2D, a training step), a transformer
    block, the CNN forward, ZeRO gradients."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "benchmarks.spmd", "--json"], capture_output=True,
                       text=True, env=env, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(results) == set(spmd_bench.CASES)
    for name, res in results.items():
        ours, xla = (sum(b for _, _, b in res[k]) for k in ("minixla", "xla"))
        assert ours <= xla, (name, res)
    assert results["mlp megatron"]["minixla"] == [["all-reduce", "f32[8,3]{1,0}", 96.0]]


def test_sharded_sum_of_partials_is_a_reduce_scatter():
    """Data-parallel gradients kept sharded (ZeRO): the batch contraction is summed over the
    devices and each keeps its rows: reduce-scatter, not all-reduce + slice."""
    x, y = _rand(8, 4), _rand(8, 8)
    m = _check(grads, {"data": 4}, (P("data"), P("data")), (P("data"), P("data")), (x, y), """
CHECK: f32[1,8]{1,0} reduce-scatter({{.*}}), replica_groups={{[{][{]0,1,2,3[}][}]}}, dimensions={0}
CHECK: f32[2]{0} reduce-scatter(
CHECK-NOT: all-reduce
""")
    assert [c[0] for c in collective_bytes(m)] == ["reduce-scatter", "reduce-scatter"]


def test_jit_with_minixla_partitioner():
    """``minixla.jit(..., spmd_partitioner="minixla")``: pytrees of arguments, a spec per
    argument (or per leaf), several outputs; runs on the mesh's virtual devices."""
    import minixla

    def f(params, x):
        h = mnp.tanh(x @ params["w1"])
        return {"y": h @ params["w2"], "s": mnp.sum(h)}
    mesh = jax.sharding.AbstractMesh((2, 2), ("data", "model"))
    params = {"w1": _rand(4, 6), "w2": _rand(6, 3)}
    x = _rand(8, 4)
    g = minixla.jit(f, mesh=mesh, spmd_partitioner="minixla",
                    in_shardings=({"w1": P(None, "model"), "w2": P("model", None)}, P("data")),
                    out_shardings={"s": P(), "y": P("data")})
    out = g(params, x)
    h = np.tanh(x @ params["w1"])
    np.testing.assert_allclose(out["y"], h @ params["w2"], rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(out["s"], h.sum(), rtol=2e-5)
    # the default backend is the virtual LLVM mesh; the HLO evaluator is the reference
    ref = minixla.jit(f, mesh=mesh, spmd_partitioner="minixla", backend="evaluator",
                      in_shardings=({"w1": P(None, "model"), "w2": P("model", None)}, P("data")),
                      out_shardings={"s": P(), "y": P("data")})(params, x)
    np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-6, atol=1e-6)
    text = g.lower(params, x).as_text()
    filecheck(text, """
CHECK: f32[4,3]{1,0} parameter({{.}}), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}
CHECK: all-reduce(
""")
    with pytest.raises(ShardingError, match="tuple of length 2 for 1 positional arguments"):
        minixla.jit(lambda a: a, mesh={"d": 2}, spmd_partitioner="minixla", in_shardings=(P(), P()))(x)
    with pytest.raises(ShardingError, match=r"for a \(f32\[8,4\].*'nope'.*\n  at: .*test_spmd_partitioner"):
        minixla.jit(lambda a: a, mesh={"d": 2}, spmd_partitioner="minixla", in_shardings=P("nope"))(x)
    # (a fresh user's cases) errors name the pytree path; out_shardings is a tree prefix
    bad = minixla.jit(f, mesh=mesh, spmd_partitioner="minixla",
                      in_shardings=({"w1": P(None, None, "model"), "w2": P()}, P("data")))
    with pytest.raises(ShardingError, match=r"params\['w1'\].*3 entries for an array of rank 2"):
        bad(params, x)
    prefix = minixla.jit(f, mesh=mesh, spmd_partitioner="minixla",
                         in_shardings=(P(), P("data")), out_shardings=P())(params, x)
    np.testing.assert_allclose(prefix["y"], h @ params["w2"], rtol=2e-5, atol=1e-5)
    with pytest.raises(ShardingError, match="keyword arguments"):
        minixla.jit(lambda a: a, mesh={"d": 2}, spmd_partitioner="minixla", in_shardings=P())(a=x)
    with pytest.raises(ShardingError, match="at least one device"):
        minixla.jit(lambda a: a, mesh={"d": 0}, spmd_partitioner="minixla", in_shardings=P())(x)
    with pytest.raises(errors.UnsupportedError, match="put the transformation inside"):
        minixla.grad(minixla.jit(lambda a: (a * a).sum(), mesh={"d": 2}, spmd_partitioner="minixla",
                                 in_shardings=P("d")))(x)


def test_data_parallel_training_step_all_reduces_the_gradients():
    """grad of the MLP's loss, batch sharded, weights replicated: the forward and backward
    stay local and each weight gradient is one all-reduce."""
    w1, w2, x, y = args = [_rand(4, 6), _rand(6, 3), _rand(8, 4), _rand(8, 3)]
    h = np.tanh(x @ w1)  # the gradients by hand (jax.grad eager would compile every op)
    d = 2 * (h @ w2 - y) / y.size
    g1, g2 = x.T @ (d @ w2.T * (1 - h * h)), h.T @ d
    m = _check(train_step, {"data": 4}, (P(), P(), P("data"), P("data")), (P(), P()), args, """
CHECK-NOT: all-gather
CHECK: f32[3,6]{1,0} all-reduce(
CHECK: f32[6,4]{1,0} all-reduce(
""", want=(w1 - 0.1 * g1, w2 - 0.1 * g2))
    assert len(collective_bytes(m)) == 2


def _fori(np_, a, b):
    if np_ is np:
        for _ in range(3):
            a = a * 0.5 + b
        return a
    return __import__("minixla").lax.fori_loop(0, 3, lambda i, c: c * 0.5 + b, a)


#: name -> (f(np_, a, b), argument shapes): every propagation rule and partitioning path
FUZZ_PROGRAMS = {
    "elementwise": (lambda np_, a, b: np_.exp(a) * b + a, [(6, 4), (6, 4)]),
    "broadcast": (lambda np_, a, b: a + b[None, :], [(5, 4), (4,)]),
    "transpose_dot": (lambda np_, a, b: a.T @ b, [(6, 3), (6, 5)]),
    "reshape": (lambda np_, a, b: (a.reshape(2, 3, 4) * 2.0).reshape(6, 4) + b, [(6, 4), (6, 4)]),
    "sum": (lambda np_, a, b: np_.sum(a * b, axis=0), [(7, 4), (7, 4)]),
    "max": (lambda np_, a, b: np_.max(a - b, axis=1), [(6, 5), (6, 5)]),
    "batched_dot": (lambda np_, a, b: np_.einsum("bij,bjk->bik", a, b), [(4, 3, 5), (4, 5, 2)]),
    "slice": (lambda np_, a, b: a[1:4, :] + b[:3, :], [(6, 4), (6, 4)]),
    "concatenate": (lambda np_, a, b: np_.concatenate([a, b], axis=1), [(6, 4), (6, 3)]),
    "pad": (lambda np_, a, b: np_.pad(a, ((0, 0), (1, 2))) * 2.0 + b, [(6, 4), (6, 7)]),
    "reverse": (lambda np_, a, b: a[::-1] + b, [(6, 4), (6, 4)]),
    "argmax": (lambda np_, a, b: np_.argmax(a + b, axis=0), [(6, 4), (6, 4)]),
    "gather": (lambda np_, a, b: a[np_.array([2, 0, 1])] + b[:3], [(6, 4), (6, 4)]),
    "while": (_fori, [(6, 4), (6, 4)]),
    "cumsum": (lambda np_, a, b: np_.cumsum(a, axis=0) + b, [(6, 4), (6, 4)]),
    "iota_where": (lambda np_, a, b: np_.where(a > b, a * np_.arange(4.0), b), [(6, 4), (6, 4)]),
    "prod_min": (lambda np_, a, b: np_.prod(a, axis=0) + np_.min(b, axis=0), [(5, 4), (5, 4)]),
    "bool_int": (lambda np_, a, b: np_.sum((a * 10).astype(np_.int32), axis=0) + np_.any(b > 1.0, axis=0),
                 [(7, 4), (7, 4)]),
}
FUZZ_MESHES = [{"x": 2}, {"x": 4}, {"x": 3}, {"x": 2, "y": 2}, {"x": 2, "y": 4}]


def _random_spec(rng, ndim, mesh):
    names = list(mesh)
    entries = []
    for _ in range(ndim):
        free = [a for a in names if a not in [e for e in entries if e]]
        entries.append(rng.choice([None] + free) if free else None)
    return P(*entries)


def test_random_shardings_match_numpy():
    """Random in/out specs (uneven shards included) over programs that reach every rule; a
    few in CI, all of them with MINIXLA_DEEP_FUZZ=1."""
    import os
    import random
    deep = os.environ.get("MINIXLA_DEEP_FUZZ") == "1"
    rng = random.Random(0)
    cases = [(name, mesh) for name in FUZZ_PROGRAMS for mesh in FUZZ_MESHES for _ in range(4 if deep else 1)]
    if not deep:
        cases = rng.sample(cases, 30)
    for name, mesh in cases:
        f, shapes = FUZZ_PROGRAMS[name]
        args = [_rand(*s) for s in shapes]
        want = f(np, *args)
        ins = tuple(_random_spec(rng, len(s), mesh) for s in shapes)
        out = rng.choice([None, _random_spec(rng, np.ndim(want), mesh)])
        m = partition(functools.partial(f, mnp), mesh, ins, out, args=args)
        np.testing.assert_allclose(evaluate_partitioned(m, *args), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name} on {mesh}: in_specs={ins} out_specs={out}")


def test_output_that_is_an_argument_is_resharded():
    x = _rand(4, 6)
    m = _check(lambda np_, a: (a, a), {"d": 2}, (P("d"),), (P(), P(None, "d")), (x,), """
CHECK-DAG: all-to-all(
CHECK-DAG: all-gather(
""")
    assert m.entry.parameters[0].shape.dims == (2, 6)


def test_same_tiles_on_other_devices_is_a_collective_permute():
    x = _rand(4, 3)
    m = _check(lambda np_, a: a + 1.0, {"x": 2, "y": 2}, (P(("x", "y")),), P(("y", "x")), (x,), """
CHECK: collective-permute({{.*}}), source_target_pairs={{[{][{]0,0[}],[{]1,2[}],[{]2,1[}],[{]3,3[}][}]}}
CHECK-NOT: all-
""")
    assert collective_bytes(m) == [("collective-permute", "f32[1,3]{1,0}", 12.0)]


def test_convolution_with_sharded_input_features_is_a_partial_conv():
    """Input features (the conv's contraction) sharded on both operands, uneven (5 over 2):
    masked, local conv, one all-reduce; output features sharded stay local."""
    def conv(np_, x, k):
        lax = jax.lax if np_ is jjnp else __import__("minixla").lax
        return lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x, k = _rand(2, 5, 5, 5), _rand(3, 3, 5, 4)
    _check(conv, {"f": 2}, (P(None, None, None, "f"), P(None, None, "f", None)), P(), (x, k), """
CHECK: select(
CHECK: convolution(
CHECK: all-reduce(
CHECK-NOT: all-gather
""", rtol=1e-4, ref=jjnp)
    _check(conv, {"f": 2}, (P(), P(None, None, None, "f")), P(None, None, None, "f"), (x, k),
           "CHECK-NOT: all-", rtol=1e-4, ref=jjnp)
