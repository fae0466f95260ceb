"""The benchmark suite runs end to end in a tiny mode (no timing is checked, only that every
workload runs on every framework, agrees with jax, and the table/JSON/plot are written)."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from benchmarks import run, workloads as W


def test_suite_runs_tiny(tmp_path, capsys):
    suite = run.main(["--scale", "0.002", "--repeat", "2", "--min-sample-ms", "0", "--compile-repeat", "1",
                      "--quick-limits", "--out", str(tmp_path), "--no-plot"])
    names = [r["name"] for r in suite["results"]]
    assert names == [w.name for w in W.workloads()]
    for r in suite["results"]:
        assert set(r["time_ms"]) == set(run.FRAMEWORKS)
        assert all(t > 0 for t in r["time_ms"].values())
        assert r["compile_ms"]["minixla"] > 0 and r["compile_ms"]["jax"] > 0
        assert r["max_norm_diff_vs_jax"] < 1e-4, r["name"]
    lim = suite["limits"]
    assert lim["fma_gflops"] > 0 and lim["copy_gbs"] > 0
    saved = json.loads((tmp_path / "benchmarks.json").read_text())
    assert [r["name"] for r in saved["results"]] == names
    table = capsys.readouterr().out
    assert "| workload |" in table and "peak FMA" in table
    # the host report comes first, and the JSON carries it with the per-round samples
    assert table.index("- Host: ") < table.index("Machine limits") < table.index("| workload |")
    assert "- minixla: LLVM" in table and "- XLA:CPU: jax" in table
    host = saved["host"]
    assert host["cpu"]["logical_cpus"] >= 1 and host["minixla"]["host_cpu"] and host["minixla"]["cpu"]
    assert host["minixla"]["threads"] == lim["threads"] and host["xla"]["jax"]
    assert saved["settings"]["repeat"] == 2 and "xla_code" in saved and "start" in host["load_average"]
    for r in saved["results"]:
        assert len(r["samples_ms"]["minixla"]) == len(r["samples_ms"]["jax"]) == len(r["ratios"]) == 2
        lo, hi = r["ratio_spread"]
        assert lo <= r["ratio_p10_p90"][0] <= r["ratio_median"] <= r["ratio_p10_p90"][1] <= hi
        assert r["code"]["ir"]["widest_bits"] >= r["code"]["ir"]["common_bits"] > 0, r["name"]  # vectorized


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    suite = run.run_suite(W.workloads(0.001)[:2], scale=0.001, repeat=1, min_sample_ms=0, settle_ms=0, compile_repeat=0,
                          quick_limits=True, log=lambda *a: None, code=False, xla_probe=False)
    assert run.plot(suite, tmp_path / "b.png").stat().st_size > 0
    assert "selu" in run.format_table(suite)


def test_workloads_agree_with_numpy_at_small_scale():
    """The same program text gives the same answer on the three namespaces."""
    import jax
    import minixla

    for w in W.workloads(0.001):
        args = w.make_args(np.random.default_rng(1), 0.001)
        ref = np.asarray(w.fn(W.numpy_namespace(), *args), np.float64)
        mx = minixla.jit(lambda *a: w.fn(W.minixla_namespace(), *a))(*args)
        jx = jax.jit(lambda *a: w.fn(W.jax_namespace(), *a))(*args)
        for out in (mx, jx):
            np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=2e-4, atol=2e-5, err_msg=w.name)


def test_sweep_grid():
    sweep = W.sweep_workloads()
    assert len(sweep) == len(W.SWEEP_BATCH) * len(W.SWEEP_SEQ)
    q, k, v = sweep[0].make_args(np.random.default_rng(0), 1.0)
    assert q.shape == (1, 4, 8, 64)
    assert sweep[0].work((q, k, v), None) == 2 * 2 * 1 * 4 * 8 * 8 * 64


def test_training_benchmarks_run_tiny(tmp_path, capsys):
    """The training-step workloads compile on both frameworks, agree with jax (every output of
    the step: new parameters, loss, gradients) and report times, ratios and memory."""
    from benchmarks import training

    results = training.main(["--scale", "0.01", "--rounds", "1", "--min-sample-ms", "0", "--settle-ms", "0",
                             "--compile-repeat", "1", "--out", str(tmp_path)])
    assert [r["name"] for r in results] == [w.name for w in training.training_workloads()]
    for r in results:
        assert r["time_ms"]["minixla"] > 0 and r["time_ms"]["jax"] > 0
        assert r["ratio_spread"][0] <= r["ratio_median"] <= r["ratio_spread"][1]
        assert r["max_norm_diff_vs_jax"] < 1e-4, r["name"]
        for fw in ("minixla", "jax"):
            assert r["memory"][fw]["argument_size_in_bytes"] > 0
    out = capsys.readouterr().out
    assert "temp bytes minixla / XLA" in out and "memory_analysis()" in out
    assert json.loads((tmp_path / "training.json").read_text())[0]["name"] == "mlp_train"


# A fixed piece of optimized LLVM IR: a 256-bit vector body, a 512-bit FMA, XLA's <1 x float>
# remainder (scalar code) and XLA's vector-width attribute.
_IR = """
define void @k(ptr noalias %p) #0 {
  %v = load <8 x float>, ptr %p, align 4
  %a = fmul <8 x float> %v, splat (float 5.000000e-01)
  %b = fadd reassoc <8 x float> %a, %v
  %c = fcmp olt <8 x float> %b, zeroinitializer
  %d = call <16 x float> @llvm.fma.v16f32(<16 x float> %w, <16 x float> %w, <16 x float> %w)
  %e = fmul <1 x float> %s, %s
  %f = fadd float %x, %y
  %g = select <8 x i1> %c, <8 x float> %a, <8 x float> %b
  ret void
}
attributes #0 = { "prefer-vector-width"="256" }
"""

_ASM_AVX512VL = """
  vmulps  %ymm1, %ymm0, %ymm2
  vaddps  (%rdi){1to8}, %ymm2, %ymm3
  vcmpltps %ymm0, %ymm3, %k1
"""


def test_host_report_parsers_and_spread():
    """The host report's fields, the vector-width and register parsers on fixed text, and the
    per-round ratio statistics on fixed samples (no timing)."""
    from benchmarks import host

    w = host.vector_widths(_IR)
    assert w == {"by_bits": {256: 3, 512: 1}, "widest_bits": 512, "common_bits": 256, "scalar_only": False}
    assert host.vector_widths("%f = fadd float %x, %y\n%e = fmul <1 x float> %s, %s")["scalar_only"]
    assert host.prefer_vector_width(_IR) == [256]
    assert host.vector_bits_cell({"ir": w}) == "256 (max 512)" and host.vector_bits_cell(None) == "-"

    hlo = ('%ynn_fusion = f32[8,4]{1,0} fusion(%a), kind=kCustom, calls=%f, backend_config={"fusion_config":'
           '{"kind":"__ynn_fusion"}}\n%c = f32[8,4]{1,0} custom-call(%a), custom_call_target="__onednn$matmul"')
    assert host.library_fusions(hlo) == ["onednn", "ynn"]
    assert host.vector_bits_cell({"modules": 0, "ir": host.vector_widths(""), "libraries": ["ynn"]}) == "ynn"
    assert host.vector_bits_cell({"ir": w, "library": {"ir": w}}) == "256 (max 512), gemm 256 (max 512)"

    regs = host.register_widths(_ASM_AVX512VL)
    assert (regs["ymm"], regs["zmm"], regs["widest_bits"], regs["evex"]) == (7, 0, 256, True)
    assert host.isa_of(regs) == "AVX-512VL (ymm)"
    avx2 = host.register_widths("vfmadd231ps %ymm1, %ymm2, %ymm15\nvmovups %xmm0, (%rax)")
    assert not avx2["evex"] and host.isa_of(avx2) == "AVX/AVX2 (ymm)"
    assert host.isa_of(host.register_widths("vaddps zmm0, zmm1, zmm2")) == "AVX-512 (zmm)"
    assert host.register_widths("vaddps %xmm17, %xmm1, %xmm2")["evex"]  # registers 16-31 need EVEX

    info = host.parse_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n"
                              "flags\t\t: fpu sse4_2 avx avx2 fma avx512f\nprocessor\t: 1\nmodel name\t: other\n")
    assert info == {"model": "Intel(R) Xeon(R)", "vendor": "GenuineIntel",
                    "isa_flags": ["sse4_2", "avx", "avx2", "fma", "avx512f"]}

    stats = run.round_ratios([2.0, 1.0, 3.0, 4.0, 1.0], [2.0, 2.0, 2.0, 2.0, 4.0])
    assert stats["ratios"] == [1.0, 0.5, 1.5, 2.0, 0.25]
    assert stats["ratio_median"] == 1.0 and stats["ratio_spread"] == [0.25, 2.0]
    assert stats["ratio_p10_p90"] == pytest.approx([0.35, 1.8])  # linear between order statistics
    assert run.format_ratio(stats) == "1.00 (0.35..1.80)"
    with pytest.raises(ValueError, match="equally long"):
        run.round_ratios([1.0], [1.0, 2.0])

    report = host.host_report()
    assert report["cpu"]["available_cpus"] >= 1 and report["versions"]["llvmlite"]
    target = report["minixla"]
    assert target["host_cpu"] and target["cpu"] and target["isa"] in ("AVX-512", "AVX2", "AVX/AVX2", "AVX", "SSE")
    header = host.format_host(report)
    assert header.startswith("- Host: ") and f"`{target['cpu']}`" in header


def test_restricted_run_plumbing(tmp_path, monkeypatch, capsys):
    """``--cpu haswell`` runs the suite in a subprocess with minixla's target and XLA's ISA
    restricted (the subprocess is faked here), or says cleanly that minixla has no such option."""
    from benchmarks import host

    seen = {}

    def fake_run(cmd, env, **kw):
        seen.update(cmd=cmd, env=env)
        (tmp_path / "benchmarks_haswell.json").write_text('{"results": []}')
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(host, "restriction_available", lambda: True)
    monkeypatch.setattr(run, "_xla_rejects", lambda flags, env: "")
    monkeypatch.setattr(run.subprocess, "run", fake_run)
    argv = ["--cpu", "haswell", "--out", str(tmp_path), "--scale", "0.01"]
    assert run.main(argv) == {"results": []}
    assert seen["cmd"][-len(argv):] == argv and seen["cmd"][1:3] == ["-m", "benchmarks"]
    assert seen["env"]["MINIXLA_LLVM_CPU"] == "haswell" and "--xla_cpu_max_isa=AVX2" in seen["env"]["XLA_FLAGS"]
    assert seen["env"][run._CHILD_ENV] == "1" and "MINIXLA_LLVM_FEATURES" not in seen["env"]
    # an XLA that rejects the flag: the run goes on without it, and says so
    monkeypatch.setattr(run, "_xla_rejects", lambda flags, env: "Unknown flags in XLA_FLAGS")
    monkeypatch.setenv("XLA_FLAGS", "")
    assert run.main(argv) == {"results": []} and "--xla_cpu_max_isa" not in seen["env"]["XLA_FLAGS"]
    assert "rejects --xla_cpu_max_isa=AVX2" in capsys.readouterr().out

    monkeypatch.setattr(host, "restriction_available", lambda: False)
    result = run.main(argv)
    assert "option not available" in result["error"] and "option not available" in capsys.readouterr().out
