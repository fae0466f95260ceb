"""MINIXLA_DUMP writes every stage of a compilation, in pipeline order (the digits CNN)."""
import os
import re
import sys
from pathlib import Path

import jax
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.hlo import parse
from minixla.hlo.verifier import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import digits_cnn  # noqa: E402


def _compile_cnn():
    params = {k: np.asarray(v) for k, v in digits_cnn.init_params(jax.random.PRNGKey(0)).items()}
    x = np.random.default_rng(0).random((2, 8, 8, 1), np.float32)

    def cnn(p, x):
        return digits_cnn.cnn(p, x, np=mnp, lax=lax)
    return minixla.jit(cnn).lower(params, x).compile()


def test_dump_digits_cnn(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_DUMP", str(tmp_path))
    monkeypatch.setenv("MINIXLA_DUMP_PASS_RE", "algebraic|fusion")
    compiled = _compile_cnn()
    files = sorted(os.listdir(tmp_path))
    assert all(f.startswith(files[0].split(".jit_cnn.")[0] + ".jit_cnn.") for f in files)
    kinds = [re.sub(r"^module_\d+\.jit_cnn\.\d{4}\.", "", f) for f in files]
    # In pipeline order: jaxpr, HLO before, after each matching pass, final HLO, logs, LLVM.
    assert kinds[0] == "jaxpr.txt" and kinds[1] == "before_optimizations.hlo.txt"
    passes = [k for k in kinds if k.startswith("after_") and k != "after_optimizations.hlo.txt"]
    assert passes and set(passes) <= {"after_simplify.algebraic-simplifier.hlo.txt", "after_optimize.fusion.hlo.txt"}
    assert passes[-1] == "after_optimize.fusion.hlo.txt"
    tail = kinds[kinds.index("after_optimizations.hlo.txt"):]
    assert tail == ["after_optimizations.hlo.txt", "pass_log.txt", "fusion_log.txt", "buffer_assignment.txt",
                    "ir-no-opt.ll", "ir-with-opt.ll", "s"]
    text = {k: (tmp_path / f).read_text() for k, f in zip(kinds, files)}
    assert "conv_general_dilated" in text["jaxpr.txt"]
    assert "define" in text["ir-no-opt.ll"] and "define" in text["ir-with-opt.ll"]
    assert text["s"].strip()
    assert "fused" in text["fusion_log.txt"] and "arena" in text["buffer_assignment.txt"]
    assert "simplify/cse" in text["pass_log.txt"]
    # Every HLO dump parses back to the same text (constants are printed in full).
    for k, t in text.items():
        if k.endswith(".hlo.txt"):
            m = parse(t)
            verify(m)
            assert m.to_string(print_metadata=True, print_large_constants=True) == t
    assert text["after_optimizations.hlo.txt"] == compiled.hlo_module.to_string(
        print_metadata=True, print_large_constants=True)


def test_no_pass_dumps_without_pass_re_and_nothing_without_dump(tmp_path, monkeypatch):
    monkeypatch.delenv("MINIXLA_DUMP_PASS_RE", raising=False)
    monkeypatch.setenv("MINIXLA_DUMP", str(tmp_path / "d"))
    minixla.jit(lambda a: a * 2.0 + 1.0).lower(np.ones(4, np.float32)).compile()
    names = os.listdir(tmp_path / "d")
    assert not [n for n in names if ".after_" in n and "after_optimizations" not in n]
    assert any(n.endswith("before_optimizations.hlo.txt") for n in names)
    monkeypatch.delenv("MINIXLA_DUMP")
    before = set(os.listdir(tmp_path / "d"))
    minixla.jit(lambda a: a * 3.0).lower(np.ones(4, np.float32)).compile()
    assert set(os.listdir(tmp_path / "d")) == before


def test_jax_backend_dump_has_no_llvm_files(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_DUMP", str(tmp_path))
    minixla.jit(lambda a: a - 1.0, backend="jax").lower(np.ones(4, np.float32)).compile()
    names = os.listdir(tmp_path)
    assert names and not [n for n in names if n.endswith((".ll", ".s"))]


def _kernel_definitions(path):
    """{kernel symbol: times defined} in an LLVM IR dump, and the labels of the assembly."""
    ir = re.findall(r'^define [^@]*@"?(minixla_k_\w+)', path.read_text(), re.M)
    return {s: ir.count(s) for s in ir}


def test_dump_of_a_rejit_has_each_kernel_once(tmp_path, monkeypatch):
    # A re-jit finds its program and kernels in the process-wide cache; its dump used to print
    # every kernel twice (once from the program's own module, once as a "cached" kernel).
    monkeypatch.setenv("MINIXLA_DUMP", str(tmp_path))
    x = np.linspace(-1, 1, 3000, dtype=np.float32).reshape(30, 100)

    def f(x):
        return mnp.exp(x) * 2.0, mnp.sum(x * x, axis=1)
    minixla.jit(f)(x)
    minixla.jit(f)(x)                           # the same program: a program-cache hit
    y = np.ones(7, np.float32)  # (another shape: not fused with f's kernels)
    minixla.jit(lambda x, y: (f(x)[0], y * 3.0))(x, y)  # one cached kernel, one new
    for what in ("ir-no-opt.ll", "ir-with-opt.ll"):
        dumps = sorted(tmp_path.glob(f"module_*.{what}"))
        assert len(dumps) == 3
        first, again, mixed = (_kernel_definitions(p) for p in dumps)
        assert first and set(first.values()) == {1}, what
        assert again == first, what
        assert set(mixed.values()) == {1} and len(set(mixed) & set(first)) >= 1, what
    asm = sorted(tmp_path.glob("module_*.s"))
    labels = [re.findall(r"^(minixla_k_\w+):", p.read_text(), re.M) for p in asm]
    assert sorted(labels[1]) == sorted(labels[0]) and len(set(labels[0])) == len(labels[0])
