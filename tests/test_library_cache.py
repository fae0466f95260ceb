"""The GEMM library's machine code kept on disk across processes (``library_cache.py``): a fresh
process loads it instead of compiling it, and any file that does not check falls back to a
compile (never a wrong result)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import minixla
from minixla.backends.llvm import dot_library as DL
from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import library_cache as LC
from minixla.backends.llvm.target import compile_stats

ROOT = Path(__file__).resolve().parents[1]


def _dot_routines():
    """The routines of this process's library, after a 24x40 @ 40x72 dot (the dot routine, a
    full tile's micro-kernel and a column edge's), whose IR text it holds."""
    a = np.arange(24 * 40, dtype=np.float32).reshape(24, 40) / 100
    b = np.cos(np.arange(40 * 72, dtype=np.float32)).reshape(40, 72)
    np.asarray(minixla.jit(lambda x, y: x @ y)(a, b))
    names = [n for n, r in G._library.items() if hasattr(r, "object_code")]
    assert {DL.routine_name(np.float32), G.micro_kernel_name(np.float32, G.MR, G.NV, False)} <= set(names)
    return names, a, b


def test_a_fresh_process_loads_the_library_and_a_bad_file_is_compiled_again(tmp_path, monkeypatch):
    names, a, b = _dot_routines()
    where = tmp_path / "minixla" / "gemm-library"
    for name in names:  # this process's routines, written as a previous process would have
        routine = G._library[name]
        assert LC.save(name, LC.routine_key(name), routine.object_code[0], str(where))
    code = """
        import json, sys, numpy as np, minixla
        from minixla.backends.llvm import gemm as G, library_cache as LC
        from minixla.backends.llvm.target import compile_stats
        a = np.arange(24 * 40, dtype=np.float32).reshape(24, 40) / 100
        b = np.cos(np.arange(40 * 72, dtype=np.float32)).reshape(40, 72)
        out = np.asarray(minixla.jit(lambda x, y: x @ y)(a, b))
        mk = G.micro_kernel_name(np.float32, G.MR, G.NV, False)
        print(json.dumps({"out": out.tolist(), "stats": LC.stats, "dir": LC.directory(),
                          "loaded": sorted({type(r).__name__ for r in G._library.values()}),
                          "n": len(G._library), "library_ms": G.library_compile_ms(),
                          "asm": "vfmadd" in G._library[mk].asm}))
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path), MINIXLA_COMPILE_WORKERS="0")
    for var in ("MINIXLA_COMPILATION_CACHE_DIR", "MINIXLA_GEMM_LIBRARY_CACHE"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["dir"] == str(where)
    assert got["n"] >= 3 and got["stats"] == {"hits": got["n"], "misses": 0, "writes": 0, "failures": 0}, got
    assert got["loaded"] == ["LoadedRoutine"] and got["library_ms"] == 0.0
    assert got["asm"]  # (its assembly is still there to read: the tutorial prints it)
    np.testing.assert_allclose(np.array(got["out"], np.float32), np.asarray(jnp.asarray(a) @ jnp.asarray(b)),
                               rtol=2e-6, atol=2e-6)

    # In this process: a whole file loads; a flipped byte, a truncation, another routine's file
    # fall back to compiling; a changed GEMM constant is another key.
    name, other = G.micro_kernel_name(np.float32, G.MR, G.NV, False), DL.routine_name(np.float32)
    text = G._library[name].llvm_ir
    key = LC.routine_key(name)
    path = Path(LC.path_of(name, key, str(where)))
    before = dict(LC.stats)
    loaded = LC.load(name, key, lambda: text, str(where))
    assert loaded is not None and loaded.addresses[name] and loaded.llvm_ir == text
    data = path.read_bytes()
    for bad in (data[:-7], data[:200] + bytes([data[200] ^ 1]) + data[201:], b""):
        path.write_bytes(bad)
        assert LC.load(name, key, lambda: text, str(where)) is None
    path.write_bytes(data)
    os.replace(path, LC.path_of(other, key, str(where)))
    assert LC.load(other, key, lambda: text, str(where)) is None  # (the header names another routine)
    os.replace(LC.path_of(other, key, str(where)), path)
    assert LC.stats["failures"] - before["failures"] == 4
    with monkeypatch.context() as m:
        m.setattr(G, "TAIL_PREFETCH", not G.TAIL_PREFETCH)
        assert LC.routine_key(name) != key
    # A whole compile path with the cache on and a garbled file: compiled and rewritten.
    path.write_bytes(b"MXLALIB1" + b"\0" * 64)
    jits = compile_stats["jit_modules"]
    with minixla.config.override(minixla_gemm_library_cache=True, minixla_compilation_cache_dir=None):
        os.environ["XDG_CACHE_HOME"], old = str(tmp_path), os.environ.get("XDG_CACHE_HOME")
        try:
            routine = LC.compile_routine(name, lambda: text)
        finally:
            if old is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = old
    assert compile_stats["jit_modules"] == jits + 1 and routine.optimized
    assert LC.decode(path.read_bytes(), name, key)  # (rewritten whole)
    with minixla.config.override(minixla_gemm_library_cache=False):
        assert not LC.enabled()
