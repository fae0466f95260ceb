"""The persistent compilation cache (``minixla.cache``): keys, warm processes, faults.

Where a process boundary matters (a warm start, the key in two processes, concurrent
writers) the test runs fresh Python processes; the fault cases run in-process on a small
program (its re-compiles hit the in-process kernel cache, so they cost little LLVM).
"""
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import cache as pc
from minixla.cache import atomic, store
from minixla.backends.llvm.target import compile_stats

ROOT = Path(__file__).resolve().parents[1]


def _env(cache_dir, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MINIXLA_COMPILATION_CACHE_DIR=str(cache_dir),
               MINIXLA_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", MINIXLA_COMPILE_WORKERS="0")
    env.update({k: v for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:  # (None: the variable unset, the default)
        env.pop(k, None)
    return env


def _run(code, cache_dir, **extra):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=_env(cache_dir, **extra), cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _f(x, w):
    return mnp.tanh(x @ w) * 2.0 + mnp.sum(x)


def _args():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)


def _expected():
    x, w = _args()
    with jax.disable_jit():
        return np.asarray(jax.numpy.tanh(x @ w) * 2.0 + jax.numpy.sum(x))


@pytest.fixture
def cache_dir(tmp_path):
    with minixla.config.override(minixla_compilation_cache_dir=str(tmp_path / "cache"),
                                 minixla_persistent_cache_min_compile_time_secs=0.0):
        yield tmp_path / "cache"


def _compile():
    """A fresh jit (its in-memory cache empty), so the persistent cache is consulted."""
    c = minixla.jit(_f).lower(*_args()).compile()
    np.testing.assert_allclose(c(*_args()), _expected(), rtol=2e-6, atol=2e-6)
    return c


def _entry(cache_dir, first_level=False):
    """The program's entry file (``first_level``: the lowered program's entry pointing at it)."""
    (path,) = [p for p in cache_dir.iterdir() if p.name.endswith(".mxc")
               and ("alias" in store.read_header(p)) == first_level]
    return path


# -- the warm process ---------------------------------------------------------------------------

_WORKLOADS = """
    import json, sys
    sys.path.insert(0, "examples")
    import numpy as np
    import digits_cnn as D
    import minixla, minixla.numpy as mnp
    from minixla import cache as pc
    from minixla.backends.llvm.target import compile_stats
    from minixla.cache import cache_key, lowered_cache_key
    from minixla.jit import optimization_pipeline
    from minixla.passes.sharding_remover import ShardingRemover
    if {other}:  # another program traced first: counters and ids differ between the processes
        minixla.make_jaxpr(lambda a: mnp.exp(a) * 3.0)(np.ones(5, np.float32))
    rng = np.random.default_rng(0)
    shapes = dict(w1=(3, 3, 1, 16), b1=(16,), w2=(3, 3, 16, 32), b2=(32,), w3=(2048, 10), b3=(10,))
    params = {{k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in shapes.items()}}
    x = rng.random((16, 8, 8, 1), dtype=np.float32)
    infer = minixla.jit(lambda p, x: D.cnn(p, x, np=mnp, lax=minixla.lax)[1])
    lowered = infer.lower(params, x)
    c = lowered.compile()
    probs = c(params, x)
    # the MLP training step of benchmarks/cold_start.py (value_and_grad + SGD)
    mlp = dict(w1=(rng.standard_normal((16, 32)) * 0.1).astype(np.float32), b1=np.zeros(32, np.float32),
               w2=(rng.standard_normal((32, 10)) * 0.1).astype(np.float32), b2=np.zeros(10, np.float32))
    xm, ym = rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 10, 8).astype(np.int32)

    def loss(p, x, y):
        z = mnp.maximum(x @ p["w1"] + p["b1"], 0.0) @ p["w2"] + p["b2"]
        z = z - mnp.max(z, axis=1, keepdims=True)
        one_hot = (y[:, None] == mnp.arange(10)[None, :]).astype(mnp.float32)
        return mnp.mean(mnp.log(mnp.sum(mnp.exp(z), axis=1)) - mnp.sum(z * one_hot, axis=1))

    def step(p, x, y):
        l, g = minixla.value_and_grad(loss)(p, x, y)
        return {{k: p[k] - 0.1 * g[k] for k in p}}, l
    new_params, l = minixla.jit(step)(mlp, xm, ym)
    result = dict(hit=c.persistent_cache_hit, stats=dict(pc.stats), llvm=compile_stats["jit_modules"],
                  networkx="networkx" in sys.modules, probs=probs.tolist(), loss=float(l),
                  w1=new_params["w1"].tolist(), lkey=lowered_cache_key(lowered.hlo_module, "llvm"),
                  key=cache_key(c.hlo_module, "llvm"), passes=[e.name for e in c.pass_log],
                  ms=dict(passes=c.passes_ms, codegen=c.codegen_ms, key=c.key_ms, setup=c.key_setup_ms))
    # the passes run again here, from scratch: the same optimized program in both processes
    m = lowered.hlo_module.clone()
    ShardingRemover().run(m)
    optimization_pipeline().run(m)
    result["key_of_passes_here"] = cache_key(m, "llvm")
    print(json.dumps(result))
"""


def test_warm_process_runs_no_pass_and_no_llvm(tmp_path):
    """A fresh process with a warm cache reaches the digits CNN's and the MLP training step's
    first results without running a pass or LLVM (the first level: lowered program -> entry);
    both keys, and the passes' output, are the same in both processes though the second traced
    another program first. The default minimum compile time (0.05 s) lets both be cached."""
    default = dict(MINIXLA_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=None)
    cold = _run(_WORKLOADS.format(other=False), tmp_path, **default)
    warm = _run(_WORKLOADS.format(other=True), tmp_path, **default)
    assert not cold["hit"] and cold["llvm"] > 0 and cold["stats"]["writes"] == 4  # 2 entries, 2 first-level
    assert warm["lkey"] == cold["lkey"] and warm["key"] == cold["key"]
    assert cold["key_of_passes_here"] == warm["key_of_passes_here"] == cold["key"]  # deterministic passes
    assert warm["hit"] and warm["llvm"] == 0  # no LLVM module compiled in the warm process
    assert warm["stats"]["lowered_hits"] == 2 and warm["stats"]["misses"] == 0
    assert not warm["networkx"]  # (no pass ran: the passes' graphs import it)
    assert not cold["networkx"]  # (nor for straight-line programs: only loops' passes need it)
    assert warm["passes"] == cold["passes"]  # the stored pass log
    # what log_compiles reports: no pass and no codegen on the hit; the key's own time apart
    # from the process's one LLVM target set-up (was: "passes 230.9 ms" on a hit)
    assert warm["ms"]["passes"] == warm["ms"]["codegen"] == 0.0 and cold["ms"]["codegen"] > 0
    assert warm["ms"]["setup"] > 0 and warm["ms"]["key"] > 0
    # the same machine code: bit-identical
    assert (warm["probs"], warm["loss"], warm["w1"]) == (cold["probs"], cold["loss"], cold["w1"])


def test_key_depends_on_constants_backend_and_donation():
    from minixla.jit import optimization_pipeline

    def optimized(c):
        m = minixla.jit(lambda x: x * c).lower(np.ones(100, np.float32)).hlo_module.clone()
        optimization_pipeline().run(m)
        return m
    a, b = optimized(np.arange(100, dtype=np.float32)), optimized(np.arange(100, dtype=np.float32)[::-1].copy())
    assert a.to_string() == b.to_string()  # (the text elides large constants) ...
    assert pc.cache_key(a, "llvm") != pc.cache_key(b, "llvm")  # ... the key does not
    assert pc.cache_key(a, "llvm") != pc.cache_key(a, "jax")
    assert pc.cache_key(a, "llvm") != pc.cache_key(a, "llvm", (0,))
    assert pc.cache_key(a, "llvm") == pc.cache_key(optimized(np.arange(100, dtype=np.float32)), "llvm")


def test_four_concurrent_processes_one_good_entry(tmp_path):
    code = """
        import json, numpy as np, minixla, minixla.numpy as mnp
        x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
        print(json.dumps(minixla.jit(lambda x: mnp.tanh(x @ x.T) - x)(x).tolist()))
    """
    env = _env(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    expected = np.tanh(x @ x.T) - x
    for out, _ in outs:
        np.testing.assert_allclose(np.array(json.loads(out.strip().splitlines()[-1])), expected, rtol=1e-5, atol=1e-5)
    names = [p.name for p in tmp_path.iterdir()]
    files = [n for n in names if n.endswith(".mxc")]
    # one entry and one first-level entry; no temporary file left
    assert len(files) == 2 and not any(n.startswith(".minixla-") for n in names), names
    headers = [store.decode((tmp_path / f).read_bytes())[0] for f in files]  # checksums verified
    assert [h["name"] for h in headers] == ["jit_lambda"] * 2
    (alias,) = [h for h in headers if "alias" in h]
    assert (tmp_path / f"minixla-{alias['alias']}.mxc").name in files


# -- faults: never an exception, never a wrong result -------------------------------------------

def _rewrite_header(path, **changes):
    header, payload = store.decode(path.read_bytes())
    header.update(changes)
    path.write_bytes(store.encode(header, payload))


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "version", "cpu", "first-level"])
def test_bad_entry_warns_compiles_and_is_rewritten(cache_dir, damage):
    _compile()
    if damage == "first-level":  # the lowered program's entry: the passes run, the program's entry serves
        alias = _entry(cache_dir, first_level=True)
        alias.write_bytes(alias.read_bytes()[:-3])
        with pytest.warns(store.CompilationCacheWarning, match="ignoring entry"):
            assert _compile().persistent_cache_hit
        assert store.decode(alias.read_bytes())[0]["alias"] == _entry(cache_dir).name[8:-4]  # rewritten
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _compile().persistent_cache_hit
        assert pc.stats["lowered_hits"] >= 1
        return
    path = _entry(cache_dir)
    good = path.read_bytes()
    if damage == "flip":
        data = bytearray(good)
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(good[:len(good) // 3])
    elif damage == "garbage":
        path.write_bytes(b"\x00not an entry" * 10)
    elif damage == "version":  # a valid entry written by another minixla under this key
        header = store.decode(good)[0]
        _rewrite_header(path, versions=dict(header["versions"], minixla="0.0.0-other"))
    else:  # written for another CPU
        header = store.decode(good)[0]
        _rewrite_header(path, target=dict(header["target"], cpu="other-cpu", features="+sse2"))
    with pytest.warns(store.CompilationCacheWarning, match="ignoring entry"):
        c = _compile()
    assert not c.persistent_cache_hit
    store.decode(path.read_bytes())  # rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compile().persistent_cache_hit


def test_hit_in_process_runs_no_llvm(cache_dir):
    _compile()
    before = compile_stats["jit_modules"]
    c = _compile()
    assert c.persistent_cache_hit and compile_stats["jit_modules"] == before


def test_entry_replaced_by_a_directory(cache_dir):
    _compile()
    path = _entry(cache_dir)
    path.unlink()
    (path / "inside").mkdir(parents=True)
    with pytest.warns(store.CompilationCacheWarning):
        c = _compile()
    assert not c.persistent_cache_hit


def test_unwritable_directory_and_failing_write(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with minixla.config.override(minixla_compilation_cache_dir=str(blocker / "cache"),
                                 minixla_persistent_cache_min_compile_time_secs=0.0):
        with pytest.warns(store.CompilationCacheWarning, match="cannot write"):
            _compile()
    with minixla.config.override(minixla_compilation_cache_dir=str(tmp_path / "full"),
                                 minixla_persistent_cache_min_compile_time_secs=0.0):
        def disk_full(f, data):
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(atomic, "_write_all", disk_full)
        with pytest.warns(store.CompilationCacheWarning, match="No space left"):
            _compile()
        assert list((tmp_path / "full").iterdir()) == []  # the temporary file is removed


def test_min_compile_time_writes_nothing(cache_dir):
    with minixla.config.override(minixla_persistent_cache_min_compile_time_secs=1e6):
        _compile()
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_lru_eviction_keeps_unknown_files(cache_dir):
    _compile()  # the entry's size depends on what the process has loaded: measure it
    entry = _entry(cache_dir)
    entry_size = entry.stat().st_size + _entry(cache_dir, first_level=True).stat().st_size
    entry.unlink()
    (cache_dir / "jit_other-jax-entry-cache").write_bytes(b"x" * 5000)  # not ours: never touched
    (cache_dir / "subdir").mkdir()
    old = [cache_dir / f"minixla-{i:064x}.mxc" for i in range(3)]
    for i, p in enumerate(old):
        p.write_bytes(b"y" * 4000)
        os.utime(p, (1000 + i, 1000 + i))
    size = 4000 * 2 + entry_size  # room for the new entries and two of the old: one must go
    with minixla.config.override(minixla_compilation_cache_max_size=size):
        _compile()
    names = {p.name for p in cache_dir.iterdir()}
    assert "jit_other-jax-entry-cache" in names and "subdir" in names
    assert old[0].name not in names  # the least recently used went first
    assert sum(p.stat().st_size for p in cache_dir.iterdir() if p.name.endswith(".mxc")) <= size
    assert _compile().persistent_cache_hit  # the new entry was kept


def test_cli_lists_stats_clears(cache_dir, capsys):
    from minixla.cache.__main__ import main
    _compile()
    (cache_dir / "unrelated.txt").write_text("keep me")
    lib = cache_dir / "minixla-gemm-library"  # (the GEMM library's object files, when kept there)
    lib.mkdir(exist_ok=True)
    (lib / "minixla_dot_f32-0123.o").write_bytes(b"x" * 10)
    assert main(["--dir", str(cache_dir), "list"]) == 0
    assert "jit__f" in capsys.readouterr().out
    assert main(["--dir", str(cache_dir), "stats"]) == 0
    out = capsys.readouterr().out
    assert "entries: 1" in out and "first-level entries (lowered program -> entry): 1" in out
    assert "other files (not minixla's or JAX's): 1" in out
    assert re.search(r"GEMM library object files \(minixla-gemm-library/\): [1-9]\d*, \d+ bytes", out), out
    assert main(["--dir", str(cache_dir), "clear"]) == 0
    assert [p.name for p in cache_dir.iterdir()] == ["unrelated.txt"]


def test_jax_backend_uses_jax_cache_in_the_same_directory_and_leaves_users_jax_alone(tmp_path, caplog, capsys):
    """The jax backend's XLA executables go to JAX's cache in minixla's directory, a later
    compile served by it is logged as a JAX cache hit, the CLI lists JAX's entries as JAX's,
    and JAX's own settings are the user's outside minixla's compiles: a user's jax.jit
    program is not written there (was: jax's config changed for the rest of the process)."""
    from minixla.cache.__main__ import main
    prev = jax.config.jax_compilation_cache_dir
    with minixla.config.override(minixla_compilation_cache_dir=str(tmp_path),
                                 minixla_persistent_cache_min_compile_time_secs=0.0,
                                 minixla_log_compiles=True):
        for _ in range(2):  # (a fresh jit each time: the second XLA compile is served from disk)
            np.testing.assert_allclose(minixla.jit(_f, backend="jax")(*_args()), _expected(),
                                       rtol=2e-6, atol=2e-6)
        assert jax.config.jax_compilation_cache_dir == prev
        before = {p.name for p in tmp_path.iterdir()}
        jax.jit(lambda x: jax.numpy.cos(x) * 3.0 - 1.25)(np.ones(7, np.float32)).block_until_ready()
        assert {p.name for p in tmp_path.iterdir()} == before  # the user's program: not cached here
    lines = [r.getMessage() for r in caplog.records if r.name == "minixla.jit"]
    assert lines[0].endswith("; jax persistent cache miss") and lines[1].endswith("; jax persistent cache hit"), lines
    # XLA's executable is in the directory, in JAX's own file (minixla stores none for this backend)
    assert any(n.startswith("jit_") and n.endswith("-cache") for n in before), before
    assert not any(n.endswith(".mxc") for n in before)
    assert main(["--dir", str(tmp_path), "list"]) == 0
    assert re.search(r"\njit_\S+ +jax ", capsys.readouterr().out)
    assert main(["--dir", str(tmp_path), "stats"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"JAX's entries \(jax_compilation_cache_dir, kept by JAX\): [1-9]", out), out
    assert "other files (not minixla's or JAX's): 0" in out, out


def test_source_fingerprint_memo(cache_dir, monkeypatch):
    """The sources are hashed once per directory and version of the files (their stat
    signature); the memo is written with an entry and removed by ``clear``."""
    from minixla.cache import key as K
    monkeypatch.setattr(K, "_unwritten_memo", [])
    computed = K.source_fingerprint.__wrapped__()
    assert computed == K._content_fingerprint(*K._source_files())
    assert not cache_dir.exists()  # (nothing written without an entry)
    _compile()
    (memo,) = [p for p in cache_dir.iterdir() if p.name.startswith("minixla-sources-")]
    assert memo.read_text() == computed
    memo.write_text("f" * 64)  # what the memo says is what a process with these files uses
    assert K.source_fingerprint.__wrapped__() == "f" * 64
    memo.write_text("garbage")  # an unreadable memo: hashed again
    assert K.source_fingerprint.__wrapped__() == computed
    store.clear(str(cache_dir))
    assert list(cache_dir.iterdir()) == []
