"""Running per-device SPMD programs (issue 17, "Running it"): the collectives on a mesh of
virtual LLVM devices (``minixla.backends.spmd``), checked against numpy, without the
partitioner -- the per-device modules are built by hand with ``minixla.hlo.collectives``."""
import numpy as np
import pytest

from minixla.backends.spmd import CollectiveError, compile_llvm, run_llvm
from minixla.hlo import collectives as C
from minixla.hlo.ir import HloInstruction, HloModule, Shape
from minixla.hlo.parser import parse

F32, S32 = np.dtype(np.float32), np.dtype(np.int32)


def _scalar_computation(m, opcode, dtype):
    comp = m.new_computation(f"{opcode}_{dtype}")
    a = comp.add_instruction(HloInstruction("parameter", Shape(dtype, ()), parameter_number=0))
    b = comp.add_instruction(HloInstruction("parameter", Shape(dtype, ()), parameter_number=1))
    comp.root = comp.add_instruction(HloInstruction(opcode, Shape(dtype, ()), [a, b]))
    return comp


def _every_collective_module(rs_groups=((1, 0), (3, 2))):
    """One program using every collective (so the test compiles once): x f32[4,6], i s32[4].
    (``rs_groups``: the groups of the second reduce-scatter; ``shard_map`` cannot express the
    default, a group listed out of device order.)"""
    m = HloModule("collectives")
    add, mx, iadd = (_scalar_computation(m, "add", F32), _scalar_computation(m, "maximum", F32),
                     _scalar_computation(m, "add", S32))
    main = m.new_computation("main")
    m.entry = main
    x = main.add_instruction(HloInstruction("parameter", Shape(F32, (4, 6)), parameter_number=0))
    i = main.add_instruction(HloInstruction("parameter", Shape(S32, (4,)), parameter_number=1))
    outs = [
        C.all_reduce(x, [[0, 1, 2, 3]], add),
        C.all_reduce(x, [[0, 2], [1, 3]], mx),                  # groups of 2 within 4 devices
        C.all_reduce(i, [[0, 1], [2, 3]], iadd),
        C.all_gather(x, 1, [[0, 1], [2, 3]]),
        C.all_gather(x, 0, [[0, 1, 2, 3]]),
        C.reduce_scatter(x, 0, [[0, 1, 2, 3]], add),
        C.reduce_scatter(x, 1, rs_groups, add),  # group order is not device order
        C.all_to_all(x, 0, [[0, 1], [2, 3]]),
        C.all_to_all(x, 1, [[0, 1], [2, 3]]),
        C.collective_permute(x, [(0, 1), (1, 2), (2, 0)]),     # device 3 receives nothing
        C.partition_id(),
    ]
    outs = [main.add_instruction(o) for o in outs]
    main.root = main.add_instruction(HloInstruction("tuple", Shape.tuple_of([o.shape for o in outs]), outs))
    return m


def _expected(xs, ints, rs_groups=((1, 0), (3, 2))):
    """numpy's version of ``_every_collective_module`` on per-device inputs ``xs``, ``ints``."""
    n = len(xs)
    exp = [[] for _ in range(n)]

    def groups_of(groups):
        return {d: g for g in groups for d in g}
    for d in range(n):
        exp[d].append(xs[0] + xs[1] + xs[2] + xs[3])
        g = groups_of([[0, 2], [1, 3]])[d]
        exp[d].append(np.maximum(xs[g[0]], xs[g[1]]))
        g = groups_of([[0, 1], [2, 3]])[d]
        exp[d].append(ints[g[0]] + ints[g[1]])
        exp[d].append(np.concatenate([xs[m] for m in g], axis=1))
        exp[d].append(np.concatenate(xs, axis=0))
        exp[d].append((xs[0] + xs[1] + xs[2] + xs[3])[d:d + 1])
        g = groups_of(rs_groups)[d]
        k = g.index(d)
        exp[d].append(sum(xs[m] for m in g)[:, 3 * k:3 * k + 3])
        g = groups_of([[0, 1], [2, 3]])[d]
        k = g.index(d)
        exp[d].append(np.concatenate([xs[m][2 * k:2 * k + 2] for m in g], axis=0))
        exp[d].append(np.concatenate([xs[m][:, 3 * k:3 * k + 3] for m in g], axis=1))
        src = {1: 0, 2: 1, 0: 2}.get(d)
        exp[d].append(xs[src] if src is not None else np.zeros_like(xs[d]))
        exp[d].append(np.uint32(d))
    return exp


def test_every_collective_on_four_virtual_devices():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(4)]
    ints = [rng.integers(-100, 100, 4).astype(np.int32) for _ in range(4)]
    exe = compile_llvm(_every_collective_module(), 4)
    assert [c.opcode for c in exe.collectives][:3] == ["all-reduce"] * 3
    for _ in range(2):  # compiled once, called again: the mesh and the contexts are reused
        got = exe([[x, i] for x, i in zip(xs, ints)])
        exp = _expected(xs, ints)
        for d in range(4):
            assert len(got[d]) == len(exp[d])
            for j, (g, e) in enumerate(zip(got[d], exp[d])):
                np.testing.assert_array_equal(g, e, err_msg=f"device {d}, output {j}")
            assert got[d][-1].dtype == np.uint32


def test_all_to_all_along_a_minor_dim():
    m = parse("""HloModule a2a

ENTRY %main (x: f32[2,8]) -> f32[2,8] {
  %x = f32[2,8]{1,0} parameter(0)
  ROOT %aa = f32[2,8]{1,0} all-to-all(%x), replica_groups={{0,1,2,3}}, dimensions={1}
}
""")
    xs = [np.arange(16, dtype=np.float32).reshape(2, 8) + 100 * d for d in range(4)]
    got = run_llvm(m, 4, [[x] for x in xs])
    for d in range(4):
        np.testing.assert_array_equal(got[d][0], np.concatenate([xs[s][:, 2 * d:2 * d + 2] for s in range(4)], 1))


def test_data_parallel_matmul_and_all_reduce_in_a_loop():
    """Each device: g = sum over its batch rows of x @ w, all-reduced; then 3 steps of
    ``w = w - 0.1 * all-reduce(w)`` in a while loop (a collective inside a loop)."""
    m = parse("""HloModule dp

%add (a_add: f32[], b_add: f32[]) -> f32[] {
  %a_add = f32[] parameter(0)
  %b_add = f32[] parameter(1)
  ROOT %s_add = f32[] add(%a_add, %b_add)
}

%cond (s_cond: (s32[], f32[3,4])) -> pred[] {
  %s_cond = (s32[], f32[3,4]) parameter(0)
  %k_cond = s32[] get-tuple-element(%s_cond), index=0
  %three_cond = s32[] constant(3)
  ROOT %lt_cond = pred[] compare(%k_cond, %three_cond), direction=LT
}

%body (s_body: (s32[], f32[3,4])) -> (s32[], f32[3,4]) {
  %s_body = (s32[], f32[3,4]) parameter(0)
  %k_body = s32[] get-tuple-element(%s_body), index=0
  %w_body = f32[3,4]{1,0} get-tuple-element(%s_body), index=1
  %one_body = s32[] constant(1)
  %k1_body = s32[] add(%k_body, %one_body)
  %ar_body = f32[3,4]{1,0} all-reduce(%w_body), replica_groups={{0,1}}, to_apply=%add
  %c_body = f32[] constant(0.1)
  %cb_body = f32[3,4]{1,0} broadcast(%c_body), dimensions={}
  %step_body = f32[3,4]{1,0} multiply(%ar_body, %cb_body)
  %w1_body = f32[3,4]{1,0} subtract(%w_body, %step_body)
  ROOT %t_body = (s32[], f32[3,4]) tuple(%k1_body, %w1_body)
}

ENTRY %main (x: f32[2,3], w: f32[3,4]) -> (f32[4], f32[3,4]) {
  %x = f32[2,3]{1,0} parameter(0)
  %w = f32[3,4]{1,0} parameter(1)
  %y = f32[2,4]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %zero = f32[] constant(0)
  %r = f32[4]{0} reduce(%y, %zero), dimensions={0}, to_apply=%add
  %g = f32[4]{0} all-reduce(%r), replica_groups={{0,1}}, to_apply=%add
  %k0 = s32[] constant(0)
  %init = (s32[], f32[3,4]) tuple(%k0, %w)
  %loop = (s32[], f32[3,4]) while(%init), condition=%cond, body=%body
  %wf = f32[3,4]{1,0} get-tuple-element(%loop), index=1
  ROOT %out = (f32[4], f32[3,4]) tuple(%g, %wf)
}
""")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]
    got = run_llvm(m, 2, [[x[:2], w[0]], [x[2:], w[1]]])
    g = (x[:2] @ w[0]).sum(0) + (x[2:] @ w[1]).sum(0)
    ws = list(w)
    for _ in range(3):
        total = ws[0] + ws[1]
        ws = [wd - np.float32(0.1) * total for wd in ws]
    for d in range(2):
        np.testing.assert_allclose(got[d][0], g, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[d][1], ws[d], rtol=1e-6, atol=1e-6)


_DIVERGENT = """HloModule divergent

%add (a_add: f32[], b_add: f32[]) -> f32[] {
  %a_add = f32[] parameter(0)
  %b_add = f32[] parameter(1)
  ROOT %s_add = f32[] add(%a_add, %b_add)
}

%cond (s_cond: (u32[], f32[2])) -> pred[] {
  %s_cond = (u32[], f32[2]) parameter(0)
  %k_cond = u32[] get-tuple-element(%s_cond), index=0
  %id_cond = u32[] partition-id()
  ROOT %le_cond = pred[] compare(%k_cond, %id_cond), direction=LE
}

%body (s_body: (u32[], f32[2])) -> (u32[], f32[2]) {
  %s_body = (u32[], f32[2]) parameter(0)
  %k_body = u32[] get-tuple-element(%s_body), index=0
  %v_body = f32[2]{0} get-tuple-element(%s_body), index=1
  %one_body = u32[] constant(1)
  %k1_body = u32[] add(%k_body, %one_body)
  %ar_body = f32[2]{0} all-reduce(%v_body), replica_groups={{0,1}}, to_apply=%add
  ROOT %t_body = (u32[], f32[2]) tuple(%k1_body, %ar_body)
}

ENTRY %main (v: f32[2]) -> f32[2] {
  %v = f32[2]{0} parameter(0)
  %k0 = u32[] constant(0)
  %init = (u32[], f32[2]) tuple(%k0, %v)
  %loop = (u32[], f32[2]) while(%init), condition=%cond, body=%body
  ROOT %r = f32[2]{0} get-tuple-element(%loop), index=1
}
"""


def test_mesh_never_hangs_and_errors_name_the_collective():
    # Device 1 loops once more than device 0 (trip count partition-id + 1): its second
    # all-reduce is never matched. The barrier's abort releases it; the error names it.
    exe = compile_llvm(parse(_DIVERGENT), 2, timeout_s=1.0)
    v = np.ones(2, np.float32)
    with pytest.raises(CollectiveError, match=r"devices \[1\] at all-reduce %ar_body"):
        exe([[v], [v]])
    # A device with a bad argument fails at once; the others are released; the mesh is reusable.
    with pytest.raises(TypeError, match="device 1: argument 0"):
        exe([[v], [np.ones(3, np.float32)]])
    with pytest.raises(ValueError, match="must list every partition 0..3"):
        compile_llvm(parse(_DIVERGENT.replace("{{0,1}}", "{{0,1},{2,2}}")), 4)
    with pytest.raises(ValueError, match="must all have the same size"):
        compile_llvm(parse(_DIVERGENT.replace("{{0,1}}", "{{0,1,2},{3}}")), 4)
    with pytest.raises(ValueError, match="receives from both"):
        run_llvm(parse("""HloModule p

ENTRY %main (v: f32[2]) -> f32[2] {
  %v = f32[2]{0} parameter(0)
  ROOT %cp = f32[2]{0} collective-permute(%v), source_target_pairs={{0,1},{2,1}}
}
"""), 3, [[v]] * 3)


_SHARD_MAP_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_spmd_runtime import _every_collective_module, _expected, _DIVERGENT
from minixla.backends.spmd import compile_llvm, run_shard_map
from minixla.core.errors import UnsupportedError
from minixla.hlo.parser import parse

rng = np.random.default_rng(0)
xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(4)]
ints = [rng.integers(-100, 100, 4).astype(np.int32) for _ in range(4)]
groups = ((0, 1), (2, 3))
module = _every_collective_module(groups)
args = [[x, i] for x, i in zip(xs, ints)]
got = run_shard_map(module, 4, args)
virtual = compile_llvm(module, 4)(args)
exp = _expected(xs, ints, groups)
for d in range(4):
    assert len(got[d]) == len(exp[d])
    for j, (g, v, e) in enumerate(zip(got[d], virtual[d], exp[d])):
        assert g.dtype == e.dtype and g.shape == e.shape, (d, j, g.dtype, g.shape)
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6, err_msg=f"device {{d}}, output {{j}}")
        np.testing.assert_allclose(v, g, rtol=1e-6, atol=1e-6)
try:
    run_shard_map(_every_collective_module(((0, 3), (1, 2))), 4, args)
    raise AssertionError("expected UnsupportedError")
except UnsupportedError as e:
    assert "not the devices along sub-axes" in str(e), e
try:
    run_shard_map(module, 16, [args[0]] * 16)
    raise AssertionError("expected ValueError")
except ValueError as e:
    assert "16 devices, but JAX has 8" in str(e), e
from minixla.backends.spmd.shard_map import _groups_along, _prime_factors
assert _prime_factors(12) == [2, 2, 3] and _prime_factors(1) == []
assert _groups_along((2, 2), (1,)) == {{(0, 1), (2, 3)}} and _groups_along((2, 2), (0,)) == {{(0, 2), (1, 3)}}
assert _groups_along((2, 2, 2), (0, 2)) == {{(0, 1, 4, 5), (2, 3, 6, 7)}}
print("SHARD_MAP_OK")
"""


def test_shard_map_hand_off_matches_numpy_and_the_virtual_mesh(tmp_path):
    """The per-device program under ``jax.shard_map`` on 8 forced host devices (4 used, as a
    2x2 mesh for the groups of 2), in a subprocess: every collective equals numpy's and the
    virtual mesh's; groups that are no mesh sub-axes and too many devices are clear errors.
    (In a subprocess also because importing the hand-off's collective rules adds rows to
    ``jax_rules``.)"""
    import os
    import subprocess
    import sys
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(tests), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", _SHARD_MAP_SCRIPT.format(tests=tests)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SHARD_MAP_OK" in proc.stdout, proc.stderr[-3000:]


def test_xla_collectives_parser_reads_xla_hlo_text():
    """``benchmarks.spmd_runtime.xla_collectives`` on XLA's forms: a combined tuple all-reduce with
    mesh-axes groups and ``/*index=*/`` comments, iota groups, explicit pairs."""
    from benchmarks.spmd_runtime import xla_collectives
    text = """
  %all-reduce.7 = (f32[256]{0}, f32[64,256]{1,0}, /*index=2*/f32[]) all-reduce(%a, %b, %c), channel_id=1, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, use_global_device_ids=true, to_apply=%region_0
  %ag = f32[8,4]{1,0} all-gather(f32[2,4]{1,0} %x), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}
  %rs = f32[2,4]{1,0} reduce-scatter(f32[8,4]{1,0} %x), replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, to_apply=%add
  %ags = (f32[2]{0}, f32[4]{0}) all-gather-start(f32[2]{0} %y), replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  %agd = f32[4]{0} all-gather-done(%ags)
  ROOT %cp = f32[4]{0} collective-permute(f32[4]{0} %x), source_target_pairs={{0,1},{1,0}}
"""
    got = xla_collectives(text, 8)
    assert [c["opcode"] for c in got] == ["all-reduce", "all-gather", "reduce-scatter", "all-gather",
                                          "collective-permute"]
    ar, ag, rs, ags, cp = got
    assert ar["groups"] == (tuple(range(8)),) and ar["bytes"] == 2 * 7 / 8 * (256 + 64 * 256 + 1) * 4
    assert ag["groups"] == ((0, 2, 4, 6), (1, 3, 5, 7)) and ag["bytes"] == 3 / 4 * 128
    assert rs["group_size"] == 4 and rs["bytes"] == 3 / 4 * 128
    assert ags["shape"] == "f32[4]" and ags["bytes"] == 1 / 2 * 16
    assert cp["pairs"] == ((0, 1), (1, 0)) and cp["bytes"] == 16


def test_optimized_program_on_three_devices():
    """Through ``minixla.jit``'s pass pipeline (``optimize=True``): ``partition-id`` feeds a
    fused elementwise kernel, the all-reduce (``replica_groups={}``: every device) is never
    fused; an odd mesh size splits the all-reduce unevenly (8 elements over 3 devices)."""
    m = parse("""HloModule fused

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %id = u32[] partition-id()
  %f = f32[] convert(%id)
  %fb = f32[8]{0} broadcast(%f), dimensions={}
  %y = f32[8]{0} multiply(%x, %fb)
  %e = f32[8]{0} exponential(%y)
  %ar = f32[8]{0} all-reduce(%e), replica_groups={}, to_apply=%add
  %z = f32[8]{0} add(%ar, %x)
  ROOT %t = f32[8]{0} tanh(%z)
}
""")
    m.num_partitions = 3
    exe = compile_llvm(m, optimize=True)
    assert {k["kind"] for k in exe.executable.kernels()} >= {"kLoop", "all-reduce", "partition-id"}
    x = np.linspace(-1, 1, 8).astype(np.float32)
    got = exe([[x]] * 3)
    want = np.tanh(sum(np.exp(x * np.float32(d)) for d in range(3)) + x)
    for d in range(3):
        np.testing.assert_allclose(got[d][0], want, rtol=1e-6)
    np.testing.assert_array_equal(got[0][0], got[2][0])  # every device: the same bits


def test_collectives_over_dtypes_and_reducers():
    """One program: all-reduce and reduce-scatter of f64 (add), bf16 (add), f16 (maximum),
    s8 (multiply, wrapping), u8 (minimum), pred (and / or) on 4 virtual devices."""
    import ml_dtypes
    cases = [("f64", "add", np.float64, np.add), ("bf16", "add", ml_dtypes.bfloat16, np.add),
             ("f16", "maximum", np.float16, np.maximum), ("s8", "multiply", np.int8, np.multiply),
             ("u8", "minimum", np.uint8, np.minimum), ("pred", "and", np.bool_, np.logical_and),
             ("pred", "or", np.bool_, np.logical_or)]
    comps, params, body, roots, shapes = [], [], [], [], []
    for k, (t, op, _, _) in enumerate(cases):
        comps.append(f"%r{k} (a{k}: {t}[], b{k}: {t}[]) -> {t}[] {{\n  %a{k} = {t}[] parameter(0)\n"
                     f"  %b{k} = {t}[] parameter(1)\n  ROOT %s{k} = {t}[] {op}(%a{k}, %b{k})\n}}\n")
        params.append(f"x{k}: {t}[6,4]")
        body.append(f"  %x{k} = {t}[6,4]{{1,0}} parameter({k})\n"
                    f"  %ar{k} = {t}[6,4]{{1,0}} all-reduce(%x{k}), replica_groups={{{{0,1,2,3}}}}, to_apply=%r{k}\n"
                    f"  %rs{k} = {t}[6,2]{{1,0}} reduce-scatter(%x{k}), replica_groups={{{{0,1}},{{2,3}}}}, "
                    f"dimensions={{1}}, to_apply=%r{k}\n")
        roots += [f"%ar{k}", f"%rs{k}"]
        shapes += [f"{t}[6,4]", f"{t}[6,2]"]
    text = ("HloModule dtypes\n\n" + "\n".join(comps) + f"\nENTRY %main ({', '.join(params)}) -> "
            f"({', '.join(shapes)}) {{\n" + "".join(body) + f"  ROOT %t = ({', '.join(shapes)}) "
            f"tuple({', '.join(roots)})\n}}\n")
    rng = np.random.default_rng(3)
    xs = [[(rng.integers(0, 2, (6, 4)) if dt == np.bool_ else rng.integers(1, 40, (6, 4))).astype(dt)
            for _, _, dt, _ in cases] for _ in range(4)]
    got = run_llvm(parse(text), 4, xs)
    for k, (_, _, dt, f) in enumerate(cases):
        def red(devs):
            acc = xs[devs[0]][k]
            for d in devs[1:]:
                acc = f(acc, xs[d][k]).astype(dt)
            return acc
        for d in range(4):
            np.testing.assert_array_equal(got[d][2 * k], red([0, 1, 2, 3]), err_msg=f"{cases[k]} device {d}")
            pair = [0, 1] if d < 2 else [2, 3]
            np.testing.assert_array_equal(got[d][2 * k + 1], red(pair)[:, 2 * (d % 2):2 * (d % 2) + 2])
