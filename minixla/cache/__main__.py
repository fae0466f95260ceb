"""``python -m minixla.cache [--dir DIR] {list,stats,clear}``: inspect the persistent cache.

``--dir`` defaults to ``MINIXLA_COMPILATION_CACHE_DIR``. ``list``: one line per entry (program
name, size, compile ms it saves, last use; a first-level entry, which maps a lowered program
to its optimized program's entry, is named ``<program> (lowered)``; JAX's own entries -- XLA
executables of the ``jax`` backend and of ops traced eagerly -- are listed with backend
``jax``); ``stats``: entries, first-level entries, bytes, the cap, JAX's entries and the
other files; ``clear``: delete minixla's entries (JAX's and other files are left alone).
``stats`` and ``clear`` also cover the GEMM library's object files kept under the directory
(``minixla-gemm-library/``, see ``minixla.backends.llvm.library_cache``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from minixla.backends.llvm import library_cache
from minixla.cache import store
from minixla.config import config


def _rows(directory):
    for path, size, used in store.entries(directory):
        try:
            h = store.read_header(path)
            name, ms, backend = h.get("name", "?"), float(h.get("compile_ms", 0.0)), h.get("backend", "?")
            first_level = "alias" in h
        except (OSError, ValueError):
            name, ms, backend, first_level = "<unreadable>", 0.0, "?", False
        if first_level:  # (the lowered program's entry, pointing at the optimized program's)
            name = f"{name} (lowered)"
        yield path, name, backend, size, ms, used, first_level


def _jax_rows(directory):
    """JAX's entries as ``_rows`` gives minixla's (the compile ms from the entry's header:
    JAX stores it compressed, as the first 4 bytes of the entry)."""
    for path, name, size, used in store.jax_entries(directory):
        ms = 0.0
        try:
            from jax._src import compilation_cache as jcc
            with open(path, "rb") as f:
                ms = float(jcc.extract_executable_and_time(jcc.decompress_executable(f.read()))[1])
        except Exception:  # (JAX's private format: a version that differs shows 0)
            pass
        yield path, name, "jax", size, ms, used, False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m minixla.cache", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=None, help="cache directory (default: MINIXLA_COMPILATION_CACHE_DIR)")
    p.add_argument("command", nargs="?", default="list", choices=("list", "stats", "clear"))
    args = p.parse_args(argv)
    directory = args.dir or config.read("minixla_compilation_cache_dir")
    if not directory:
        print("no cache directory: pass --dir or set MINIXLA_COMPILATION_CACHE_DIR", file=sys.stderr)
        return 2
    lib_dir = os.path.join(directory, library_cache.SUBDIR_OF_CACHE_DIR)
    lib_files = _library_files(lib_dir)
    if args.command == "clear":
        removed = 0
        for path, _ in lib_files:
            try:
                os.remove(path)
                removed += 1
            except OSError:
                pass
        try:
            os.rmdir(lib_dir)  # (only if empty: a file another process writes meanwhile stays)
        except OSError:
            pass
        print(f"removed {store.clear(directory)} entries from {directory}"
              + (f" and {removed} GEMM library files from {lib_dir}" if removed else ""))
        return 0
    rows = list(_rows(directory))
    jax_rows = list(_jax_rows(directory))
    if args.command == "list":
        print(f"{'program':32s} {'backend':7s} {'KiB':>8s} {'saves ms':>9s}  last use")
        for path, name, backend, size, ms, used, _ in sorted(rows + jax_rows, key=lambda r: -r[5]):
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(used))
            print(f"{name[:32]:32s} {backend:7s} {size / 1024:8.1f} {ms:9.1f}  {stamp}  {os.path.basename(path)[:24]}")
        return 0
    total = sum(r[3] for r in rows)
    try:
        others = sum(1 for e in os.scandir(directory) if not store._ENTRY_RE.match(e.name)
                     and not store._MEMO_RE.match(e.name) and not store.JAX_ENTRY_RE.match(e.name)
                     and e.name != library_cache.SUBDIR_OF_CACHE_DIR)
    except OSError:
        others = 0
    cap = config.read("minixla_compilation_cache_max_size")
    first = sum(1 for r in rows if r[6])
    print(f"directory: {directory}\nentries: {len(rows) - first}\n"
          f"first-level entries (lowered program -> entry): {first}\nbytes: {total}\n"
          f"cap: {'unbounded' if cap < 0 else cap}\ncompile ms saved per warm start: {sum(r[4] for r in rows):.1f}\n"
          f"JAX's entries (jax_compilation_cache_dir, kept by JAX): {len(jax_rows)}, "
          f"{sum(r[3] for r in jax_rows)} bytes, compile ms saved {sum(r[4] for r in jax_rows):.1f}\n"
          f"GEMM library object files ({library_cache.SUBDIR_OF_CACHE_DIR}/): {len(lib_files)}, "
          f"{sum(size for _, size in lib_files)} bytes\n"
          f"other files (not minixla's or JAX's): {others}")
    return 0


def _library_files(lib_dir):
    """``[(path, bytes)]`` of the GEMM library's object files in ``lib_dir`` (none if absent)."""
    try:
        return [(e.path, e.stat().st_size) for e in os.scandir(lib_dir) if e.name.endswith(".o")]
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main())
