"""``minixla.config``: every option of minixla in one place (``jax.config``'s counterpart).

    import minixla
    minixla.config.update("minixla_log_compiles", True)     # as jax.config.update(...)
    minixla.config.minixla_log_compiles                      # -> True (attribute read)
    with minixla.config.override(minixla_log_compiles=False):   # for tests: restored on exit
        ...
    print(minixla.config.describe())                         # the table below, with current values

Each option has an environment variable (its name in capitals: ``MINIXLA_LOG_COMPILES=1``).
An option set with ``update`` (or inside ``override``) wins; otherwise the environment
variable is read *when the option is read*, so a test may set it in ``os.environ`` too; otherwise
the default. Booleans accept 1/0, true/false, yes/no, on/off.

=============================================== ============ ==========================================
option                                          default      meaning
=============================================== ============ ==========================================
minixla_compilation_cache_dir                   None         persistent compilation cache directory
                                                             (JAX's ``jax_compilation_cache_dir``); None: off.
                                                             minixla's own XLA compiles use JAX's cache
                                                             there; JAX's settings are restored after
                                                             each (your jax.jit is not cached there)
minixla_compilation_cache_max_size              1 GiB        bytes of entries kept; least recently used
                                                             entries are evicted past it; -1: unbounded
minixla_persistent_cache_min_compile_time_secs  0.05         compiles faster than this are not written
minixla_log_compiles                            False        one log line per compilation
                                                             (JAX's ``jax_log_compiles``)
minixla_explain_cache_misses                    False        on a compile, say why the cache missed
                                                             (JAX's ``jax_explain_cache_misses``)
minixla_recompile_warning_threshold             8            warn once a jitted function has compiled for
                                                             more distinct input signatures than this; 0: never
minixla_jit_cache_size                          256          compiled signatures kept in memory per jitted
                                                             function (LRU); -1: unbounded
minixla_num_threads                             #CPUs        threads that split big kernels (read when
                                                             the thread pool starts: the first compile)
minixla_compile_workers                         2 (1 core:0) compile worker processes (read when they start)
minixla_llvm_cpu                                None (host)  LLVM CPU the code is generated for, e.g.
                                                             ``haswell`` (AVX2, no AVX-512); read once,
                                                             at the first compile
minixla_llvm_features                           None         LLVM features on top of that CPU's (or the
                                                             host's), e.g. ``+avx2,-avx512f``
minixla_fast_tanh                               False        float32 tanh as minixla's own rational fit
                                                             (4.8 ulp) instead of XLA:CPU's algorithm
                                                             (the default, bit-identical to JAX)
minixla_gemm_library_cache                      True         keep the GEMM library's machine code on disk
                                                             (``~/.cache/minixla/gemm-library``, or under the
                                                             compilation cache's directory): a process's first
                                                             dot loads it instead of compiling it (~0.5 s)
minixla_verify                                  False        run the HLO verifier after every pass that
                                                             changed the module
minixla_dump                                    None         directory to dump every stage to
minixla_dump_pass_re                            None         regex of the passes after which HLO is dumped
jax_debug_nans                                  False        JAX's name: a NaN output of a ``jit`` call reruns
                                                             it op by op, ``FloatingPointError`` naming the
                                                             primitive (env ``JAX_DEBUG_NANS``); a
                                                             ``minixla.debug_nans(...)`` block wins
jax_debug_infs                                  False        the same for infinite outputs (``debug_infs``)
=============================================== ============ ==========================================

Which options change generated code (and are therefore part of the persistent cache's key,
see ``minixla.cache``): ``minixla_num_threads`` (through the thread pool's size, which decides
which kernels are split and how), ``minixla_llvm_cpu`` and ``minixla_llvm_features`` (through the
cache key's target, ``minixla.backends.llvm.target.host_cpu()``) and ``minixla_fast_tanh``.
None of the others does: the verifier, dumps, workers and
logging change how code is produced or reported, never the code.
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

_UNSET = object()


def _bool(text) -> bool:
    if isinstance(text, bool):
        return text
    s = str(text).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {text!r}")


def _int(text) -> int:
    if isinstance(text, bool):
        raise ValueError(f"expected an integer, got {text!r}")
    if isinstance(text, int):
        return text
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def _float(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {text!r}") from None


def _path(text):
    if text is None:
        return None
    s = os.fspath(text) if not isinstance(text, str) else text
    return s.strip() or None


@dataclass(frozen=True)
class Option:
    """One option: its name, default, parser (text or value -> value) and documentation.
    ``env_only`` options are read where they are used from the environment variable (the
    thread pool, the compile workers, the dumper): ``update`` sets that variable."""
    name: str
    default: object
    parse: object
    doc: str
    env_only: bool = False
    changes_code: bool = False

    @property
    def env(self) -> str:
        return self.name.upper()


_OPTIONS = [
    Option("minixla_compilation_cache_dir", None, _path,
           "persistent compilation cache directory (jax_compilation_cache_dir); None: off"),
    Option("minixla_compilation_cache_max_size", 1 << 30, _int,
           "bytes of cache entries kept (LRU eviction past it); -1: unbounded"),
    Option("minixla_persistent_cache_min_compile_time_secs", 0.05, _float,
           "compiles that took less than this (seconds) are not written to the persistent cache"),
    Option("minixla_log_compiles", False, _bool,
           "log one line per compilation: function, file:line, avals, ms per stage, cache hit"),
    Option("minixla_explain_cache_misses", False, _bool,
           "on a compile, log why: a new function, or the closest previous signature and what differs"),
    Option("minixla_recompile_warning_threshold", 8, _int,
           "warn when a jitted function has compiled for more distinct signatures than this; 0: never"),
    Option("minixla_jit_cache_size", 256, _int,
           "compiled signatures kept in memory per jitted function (LRU); -1: unbounded"),
    Option("minixla_num_threads", None, _int,
           "threads splitting big kernels (default: the CPUs available); read when the pool starts",
           env_only=True, changes_code=True),
    Option("minixla_compile_workers", None, _int,
           "compile worker processes (default 2, 0 on one core); read when the workers start", env_only=True),
    Option("minixla_llvm_cpu", None, _path,
           "LLVM CPU name code is generated for (e.g. haswell: AVX2 only); default the host's;"
           " read once, at the first compile", env_only=True, changes_code=True),
    Option("minixla_llvm_features", None, _path,
           "LLVM target features on top of the CPU's, e.g. '+avx2,-avx512f'; read once, at the"
           " first compile", env_only=True, changes_code=True),
    Option("minixla_fast_tanh", False, _bool,
           "float32 tanh as minixla's own rational fit (4.8 ulp) instead of XLA:CPU's algorithm"
           " (the default: bit-identical to JAX, as cheap); read at each compile", changes_code=True),
    Option("minixla_gemm_library_cache", True, _bool,
           "keep the GEMM library's machine code on disk across processes (loaded, not compiled,"
           " by a process's first dot); False: compile it in every process"),
    Option("minixla_verify", False, _bool, "run the HLO verifier after every pass that changed the module",
           env_only=True),
    Option("minixla_dump", None, _path, "directory the compile stages are dumped to", env_only=True),
    Option("minixla_dump_pass_re", None, _path, "regex of the passes after which HLO is dumped", env_only=True),
    Option("jax_debug_nans", False, _bool, "a NaN output of a jit call reruns it op by op and raises"
           " FloatingPointError (minixla.debug_nans for a block)"),
    Option("jax_debug_infs", False, _bool, "the same for infinite outputs (minixla.debug_infs)"),
]


class Config:
    """The option registry (``jax.config``). Read an option as an attribute, set it with
    ``update``, scope a change with ``override``. Unknown names raise ``AttributeError``
    (reads) or ``ValueError`` (``update``), invalid values ``ValueError``, as JAX's does."""

    def __init__(self, options):
        object.__setattr__(self, "_options", {o.name: o for o in options})
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_lock", threading.RLock())
        #: bumped by every change: caches of derived values compare it
        object.__setattr__(self, "generation", 0)

    def _option(self, name) -> Option:
        try:
            return self._options[name]
        except KeyError:
            raise ValueError(f"Unrecognized config option: {name}; known: {', '.join(self._options)}") from None

    def read(self, name: str):
        """The current value of option ``name`` (update/override, else environment, else default)."""
        opt = self._option(name)
        value = self._values.get(name, _UNSET)
        if value is not _UNSET and not opt.env_only:
            return value
        text = os.environ.get(opt.env)
        if text is None or not text.strip():
            return opt.default
        try:
            return opt.parse(text)
        except ValueError as e:
            raise ValueError(f"environment variable {opt.env}={text!r}: {e}") from None

    def __getattr__(self, name):
        if name.startswith(("minixla_", "jax_")):
            try:
                return self.read(name)
            except ValueError as e:
                if name not in self._options:
                    raise AttributeError(str(e)) from None
                raise
        raise AttributeError(name)

    def __setattr__(self, name, value):
        raise AttributeError("set options with minixla.config.update(name, value)")

    def update(self, name: str, value) -> None:
        """Set option ``name`` to ``value`` (parsed as its environment variable would be)."""
        opt = self._option(name)
        parsed = None if value is None else opt.parse(value)
        with self._lock:
            if opt.env_only:
                if parsed is None:
                    os.environ.pop(opt.env, None)
                else:
                    os.environ[opt.env] = str(int(parsed) if isinstance(parsed, bool) else parsed)
            self._values[name] = parsed
            object.__setattr__(self, "generation", self.generation + 1)

    def _reset(self, name) -> None:
        with self._lock:
            self._values.pop(name, None)
            object.__setattr__(self, "generation", self.generation + 1)

    @contextlib.contextmanager
    def override(self, **options):
        """``with config.override(minixla_log_compiles=True): ...`` -- set options for the block
        and restore the previous settings (and environment variables) afterwards."""
        saved = {}
        for name in options:
            opt = self._option(name)
            saved[name] = (self._values.get(name, _UNSET), os.environ.get(opt.env) if opt.env_only else None)
        try:
            for name, value in options.items():
                self.update(name, value)
            yield self
        finally:
            for name, (value, env) in saved.items():
                opt = self._options[name]
                if opt.env_only:
                    if env is None:
                        os.environ.pop(opt.env, None)
                    else:
                        os.environ[opt.env] = env
                if value is _UNSET:
                    self._reset(name)
                else:
                    self.update(name, value)

    def options(self) -> list[Option]:
        """Every option, in the documented order."""
        return list(self._options.values())

    def values(self) -> dict:
        """``{name: current value}`` of every option."""
        return {name: self.read(name) for name in self._options}

    def describe(self) -> str:
        """A table of the options: name, current value, environment variable, meaning."""
        rows = [f"{o.name:48s} {self.read(o.name)!r:>14}  {o.env}: {o.doc}" for o in self._options.values()]
        return "\n".join(rows)

    def __dir__(self):
        return list(self._options) + ["update", "read", "override", "options", "values", "describe"]

    def __repr__(self):
        return f"<minixla.config: {len(self._options)} options; print(config.describe())>"


config = Config(_OPTIONS)
