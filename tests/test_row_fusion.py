"""Row fusion (rule 8 of ``minixla/passes/fusion.py``, kernel in ``backends/llvm/kernels_rows.py``):
softmax, log_softmax and layernorm as one kernel that reads each row from DRAM once."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.nn as mnn
import minixla.numpy as mnp
from minixla import lax
from minixla.backends.llvm.kernels_rows import row_plan
from minixla.passes.dce import DeadCodeElimination
from minixla.passes.fusion import ROW_FUSION_BYTES, FusionPass
from minixla.testing import check_against_jax
from conftest import filecheck

f32 = np.float32
rng = np.random.default_rng(8)


def layernorm(x, g, b, np=mnp, rsqrt=lax.rsqrt):
    mean = np.mean(x, axis=-1, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=-1, keepdims=True)
    return d * rsqrt(var + f32(1e-5)) * g + b


def jax_layernorm(x, g, b):
    return layernorm(x, g, b, np=jnp, rsqrt=jax.lax.rsqrt)


def kernels(f, *args):
    return minixla.jit(f).lower(*args).compile().kernels()


def fused(f, *args, **options):
    m = minixla.jit(f).lower(*args).hlo_module
    p = FusionPass(**options)
    p.run(m)
    DeadCodeElimination().run(m)
    return m, p


SHAPES = [(512, 1024), (7, 33), (3, 1), (0, 5), (2, 0), (2, 3, 17)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_log_softmax_layernorm_match_jax(shape):
    x = rng.standard_normal(shape).astype(f32)
    g, b = rng.standard_normal(shape[-1]).astype(f32), rng.standard_normal(shape[-1]).astype(f32)
    check_against_jax(mnn.softmax, jax.nn.softmax, x, rtol=2e-6, atol=1e-7)
    check_against_jax(mnn.log_softmax, jax.nn.log_softmax, x, rtol=2e-6, atol=2e-6)
    check_against_jax(layernorm, jax_layernorm, x, g, b, rtol=2e-5, atol=2e-5)


def test_nan_and_inf_rows():
    x = rng.standard_normal((6, 40)).astype(f32)
    x[0, 3] = np.nan                  # NaN anywhere: the whole row is NaN
    x[1, 5] = np.inf                  # +inf: max is inf, inf - inf = NaN
    x[2, :] = -np.inf                 # all -inf: exp(-inf - -inf) = NaN
    x[3, 7] = -np.inf                 # one -inf: a 0 probability
    x[4, :] = -0.0
    x[5, 0] = 3e38                    # large but finite: no overflow after subtracting the max
    g, b = np.ones(40, f32), np.zeros(40, f32)
    check_against_jax(mnn.softmax, jax.nn.softmax, x, rtol=2e-6, atol=1e-7)
    check_against_jax(mnn.log_softmax, jax.nn.log_softmax, x, rtol=2e-6, atol=2e-6)
    check_against_jax(layernorm, jax_layernorm, x, g, b, rtol=2e-5, atol=2e-5)


def test_max_and_min_rows_are_exact():
    x = rng.standard_normal((9, 300)).astype(f32)

    def f(x):  # max and min are exact, so these are bit-identical to numpy
        return (x - mnp.max(x, axis=-1, keepdims=True)) * (x - mnp.min(x, axis=-1, keepdims=True))
    got = minixla.jit(f)(x)
    want = (x - x.max(-1, keepdims=True)) * (x - x.min(-1, keepdims=True))
    np.testing.assert_array_equal(got, want)
    assert [k["kind"] for k in kernels(f, x)] == ["kInput"]


@pytest.mark.parametrize("f, args", [
    (mnn.softmax, (np.ones((64, 1024), f32),)),
    (mnn.log_softmax, (np.ones((64, 1024), f32),)),
    (layernorm, (np.ones((64, 1024), f32), np.ones(1024, f32), np.ones(1024, f32))),
], ids=["softmax", "log_softmax", "layernorm"])
def test_one_kernel_when_the_row_fits(f, args):
    ks = kernels(f, *args)
    assert [k["kind"] for k in ks] == ["kInput"]
    assert ks[0]["opcodes"].count("reduce") == 2


def test_rows_longer_than_the_budget_keep_the_three_kernel_plan():
    cols = ROW_FUSION_BYTES // 4 * 2   # a 64 KiB f32 row
    x = np.ones((2, cols), f32)
    assert [k["kind"] for k in kernels(mnn.softmax, x)] == ["kInput", "kInput", "kLoop"]
    g = np.ones(cols, f32)
    assert [k["kind"] for k in kernels(layernorm, x, g, g)] == ["reduce", "kInput", "kLoop"]
    x = rng.standard_normal((2, cols)).astype(f32)
    check_against_jax(mnn.softmax, jax.nn.softmax, x, rtol=2e-6, atol=1e-7, backends=("llvm",))


def test_budget_is_an_option_and_zero_disables_it():
    x = np.ones((4, 256), f32)   # a 1 KiB row
    assert sum(i.opcode == "fusion" for i in fused(mnn.softmax, x)[0].entry.instructions) == 1
    m, p = fused(mnn.softmax, x, row_fusion_bytes=512)
    assert not any("rule 8" in d.reason for d in p.log)
    m, p = fused(mnn.softmax, x, row_fusion_bytes=0)
    assert not any("rule 8" in d.reason for d in p.log)


def test_reduction_over_a_non_minor_axis_is_not_a_row_fusion():
    x = np.ones((16, 8), f32)
    m, p = fused(lambda x: mnn.softmax(x, axis=0), x)
    assert not any("rule 8" in d.reason and d.fused for d in p.log)
    assert len([i for i in m.entry.instructions if i.opcode not in ("parameter", "constant", "reshape")]) > 1
    x = rng.standard_normal((16, 8)).astype(f32)
    check_against_jax(lambda x: mnn.softmax(x, axis=0), lambda x: jax.nn.softmax(x, axis=0), x,
                      rtol=2e-6, atol=1e-7)


def test_row_reduction_broadcast_along_another_dim_is_not_fused():
    # The row sums broadcast along dim 1 of a (n, n) array: read at (j, i), not once per row.
    def f(x):
        s = mnp.sum(x, axis=1)
        return x * mnp.broadcast_to(s[None, :], x.shape)
    x = rng.standard_normal((8, 8)).astype(f32)
    m, p = fused(f, x)
    assert not any(d.fused and "rule 8" in d.reason for d in p.log)
    check_against_jax(f, lambda x: x * jnp.sum(x, axis=1)[None, :], x, rtol=2e-6, atol=1e-6)


def test_row_fusion_in_the_hlo_and_the_log():
    m, p = fused(mnn.softmax, np.ones((4, 8), f32))
    filecheck(m.to_string(), """
CHECK: %fused_computation
CHECK: reduce({{.*}}), dimensions={1}, to_apply=%region_max
CHECK: broadcast(
CHECK: exponential(
CHECK: reduce({{.*}}), dimensions={1}, to_apply=%region_add
CHECK: divide(
CHECK: ROOT %multiply
CHECK: ENTRY
CHECK: ROOT %fusion{{.*}} = f32[4,8]{1,0} fusion(%p0), kind=kInput, calls=%fused_computation
""")
    rule8 = [d for d in p.log if "rule 8" in d.reason]
    assert {d.producer.split(".")[0] for d in rule8 if d.fused} == {"reduce"}


def test_a_reduction_with_an_outside_user_stays_a_fusion_operand():
    def f(x):
        m = mnp.max(x, axis=-1, keepdims=True)
        return mnp.exp(x - m) / mnp.sum(mnp.exp(x - m), axis=-1, keepdims=True), m
    x = rng.standard_normal((5, 12)).astype(f32)
    check_against_jax(f, lambda x: (jax.nn.softmax(x), jnp.max(x, axis=-1, keepdims=True)), x,
                      rtol=2e-6, atol=1e-7)


def test_rows_of_several_minor_dims():
    x = rng.standard_normal((3, 4, 5)).astype(f32)
    f = lambda x: mnn.softmax(x, axis=(1, 2))  # noqa: E731
    assert [k["kind"] for k in kernels(f, x)] == ["kInput"]
    check_against_jax(f, lambda x: jax.nn.softmax(x, axis=(1, 2)), x, rtol=2e-6, atol=1e-7)


def test_results_do_not_depend_on_thread_count():
    from minixla.backends.llvm import compile_module
    x = rng.standard_normal((8192, 128)).astype(f32)
    c = minixla.jit(mnn.softmax).lower(x).compile()
    one = compile_module(c.hlo_module, c.buffer_assignment, num_threads=1)
    two = compile_module(c.hlo_module, c.buffer_assignment, num_threads=2)
    assert [k["parallel"] for k in two.kernels()] == [True]  # split over the rows
    np.testing.assert_array_equal(one(x), two(x))


def test_chained_softmaxes():
    x = rng.standard_normal((300, 64)).astype(f32)
    f = minixla.jit(lambda x: mnn.softmax(mnn.softmax(x) * 4.0))
    with jax.disable_jit():
        want = np.asarray(jax.nn.softmax(jax.nn.softmax(x) * 4.0))
    np.testing.assert_allclose(f(x), want, rtol=4e-6, atol=1e-7)


def test_row_kernel_is_vectorized_with_reassoc_only_on_the_reductions():
    x = np.ones((64, 256), f32)
    exe = minixla.jit(mnn.softmax).lower(x).compile().executable
    assert [k["strategy"] for k in exe.kernels()] == ["rows"]
    opt = exe.optimized_llvm_ir
    assert re.search(r"<(8|16) x float>", opt)
    assert "llvm.vector.reduce.fadd" in opt and "llvm.vector.reduce.fmaximum" in opt
    flags = set(re.findall(r"\b(fast|contract|nnan|ninf|nsz|arcp|afn|reassoc)\b", exe.llvm_ir))
    assert flags == {"reassoc"}
    # the two accumulations (max, then sum), nothing else
    reassoc_ops = re.findall(r"= (?!call)(\w+) reassoc", exe.llvm_ir) + \
        re.findall(r"call reassoc \w+ @\"?([\w.]+)", exe.llvm_ir)
    assert set(reassoc_ops) == {"fadd", "llvm.maximum.f32"}


def test_backend_rechecks_the_plan():
    # A reduction-rooted kInput and a kInput with an epilogue are not row fusions.
    m, _ = fused(lambda x: mnp.sqrt(mnp.mean(x * x, axis=1) + 1e-5), np.ones((4, 5), f32))
    comp = m.entry.root.fused_computation
    assert row_plan(comp.root, set(comp.parameters)) is None
    m, _ = fused(layernorm, np.ones((4, 5), f32), np.ones(5, f32), np.ones(5, f32))
    comp = m.entry.root.fused_computation
    split, reduces, classes = row_plan(comp.root, set(comp.parameters))
    assert split == 1 and len(reduces) == 2 and classes[comp.root] == "full"
    assert all(classes[r] == "row" for r in reduces)


def test_next_row_read_ahead_matches_jax_and_thread_counts():
    """Each row's last pass accumulates the next row's max (``kernels_rows._read_ahead``): rows
    whose values are all far below 0 or above the other reductions' inits, -inf rows at chunk
    starts and ends, and a single-reduction kernel (the output pass reads ahead). (No NaN:
    at this size XLA:CPU's reduce-max drops a NaN, JAX gives the row's finite max.)"""
    from minixla.backends.llvm import compile_module
    x = (rng.standard_normal((2048, 256)) - 200).astype(f32)
    x[1::3] += 400
    x[0, :] = -np.inf
    x[1023, :] = -np.inf
    x[2047, :] = -np.inf
    shifted = lambda x: (x - mnp.max(x, axis=-1, keepdims=True)) * 2  # noqa: E731
    for f, jf in [(mnn.softmax, jax.nn.softmax), (shifted, lambda x: (x - jnp.max(x, -1, keepdims=True)) * 2)]:
        check_against_jax(f, jf, x, rtol=2e-6, atol=1e-7)
        c = minixla.jit(f).lower(x).compile()
        one = compile_module(c.hlo_module, c.buffer_assignment, num_threads=1)
        two = compile_module(c.hlo_module, c.buffer_assignment, num_threads=2)
        np.testing.assert_array_equal(one(x), two(x))


def test_bf16_softmax_row_sum_stays_vectorized():
    # reading the next row's max ahead made LLVM give up vectorizing the bf16 sum pass (a
    # sequential bf16 sum, other bits): bf16 rows do not read ahead
    import ml_dtypes
    x = rng.standard_normal((64, 512)).astype(ml_dtypes.bfloat16)
    opt = minixla.jit(mnn.softmax).lower(x).compile().executable.optimized_llvm_ir
    assert "llvm.vector.reduce.fadd" in opt
    check_against_jax(mnn.softmax, jax.nn.softmax, x, rtol=1e-2, atol=1e-3)
