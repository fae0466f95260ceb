"""The host report: which machine, which target and which vector code a benchmark ran with.

A minixla/jax ratio means little without the host: on an AVX-512 AMD Zen 4 LLVM emits 512-bit
vectors, on an AVX-512 Intel Xeon that LLVM calls ``rocketlake`` it prefers 256-bit ones (for
minixla and for XLA alike), and the same table can flip. So every run of ``python -m
benchmarks`` starts with this report, and its JSON carries it:

* the CPU (``/proc/cpuinfo``: model name, vendor, the ISA flags that matter), the CPUs this
  process may run on, and the threads of minixla's pool and of XLA's intra-op pool (counted:
  the ``tf_XLAEigen`` threads of this process once jax has run);
* minixla's LLVM target: the host CPU name LLVM reports, and the CPU and features minixla's
  target machine actually uses (restricted by ``MINIXLA_LLVM_CPU`` / ``MINIXLA_LLVM_FEATURES``
  where this minixla has those options, see ``minixla/backends/llvm/target.py``);
* per workload, the vector code that was generated: the float vector widths of the arithmetic
  in minixla's optimized LLVM IR (``vector_widths``), and the registers and encoding of its
  machine code (``register_widths``: ``ymm`` vs ``zmm``; AVX-512's EVEX encoding shows as
  mask registers ``%k``, registers 16-31 or ``{1toN}`` broadcasts);
* the same for XLA (``xla_probe``): a subprocess with ``--xla_dump_to`` compiles each workload
  with ``jax.jit``; XLA:CPU's dumped IR (``*.ir-with-opt.ll``) gives its vector widths and its
  ``"prefer-vector-width"`` attribute, ``objdump -d`` of its object files its registers, and
  its ``debug_options`` the ISA limit it honoured (``--xla_cpu_max_isa``), its optimized HLO
  the library fusions it calls instead (jax 0.10's XLA runs dots, convolutions, softmax and
  layernorm as YNNPACK fusions: precompiled code that picks its own kernels). XLA's dump
  names no target CPU; it targets the host, as minixla does by default.

``python -m benchmarks.host`` prints the report for the suite's workloads.
"""
from __future__ import annotations

import collections
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: ISA flags of /proc/cpuinfo worth naming in a report, widest last
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512_bf16", "avx512_fp16", "amx_tile")

_BITS = {"half": 16, "bfloat": 16, "float": 32, "double": 64}
#: a floating point operation of LLVM IR and the first vector type on its line
_FP_OP = re.compile(r"=\s*(?:fadd|fsub|fmul|fdiv|frem|fneg|fcmp|call)\b[^\n]*?<(\d+) x (half|bfloat|float|double)>")


# ---------------------------------------------------------------------------------------
# Parsers (pure functions of text: tested on fixed snippets).

def vector_widths(llvm_ir: str) -> dict:
    """Float vector widths of the floating point arithmetic in LLVM IR text.

    Counts the instructions ``fadd``/``fsub``/``fmul``/``fdiv``/``frem``/``fneg``/``fcmp`` and
    calls (``llvm.fma.v8f32``, ...) whose type is a vector ``<N x float>`` (or half, bfloat,
    double) with N > 1. Returns ``{"by_bits": {bits: count}, "widest_bits": int, "common_bits": int,
    "scalar_only": bool}`` (bits = N x element bits; ``widest_bits``/``common_bits`` are 0 when
    no vector arithmetic is found). A vector type wider than the registers (explicit
    ``<16 x float>`` on an AVX2 target) is legalized into several registers by the backend:
    ``register_widths`` of the assembly tells which registers were used."""
    counts = collections.Counter()
    for lanes, elem in _FP_OP.findall(llvm_ir):
        if int(lanes) > 1:  # (XLA's remainder loops are <1 x float>: scalar code)
            counts[int(lanes) * _BITS[elem]] += 1
    return {"by_bits": dict(sorted(counts.items())),
            "widest_bits": max(counts, default=0),
            "common_bits": counts.most_common(1)[0][0] if counts else 0,
            "scalar_only": not counts}


def prefer_vector_width(llvm_ir: str) -> list[int]:
    """The distinct ``"prefer-vector-width"="N"`` function attributes of LLVM IR text (XLA:CPU
    sets it; minixla relies on the target CPU's tuning)."""
    return sorted({int(v) for v in re.findall(r'"prefer-vector-width"="(\d+)"', llvm_ir)})


_REG = re.compile(r"%?\b([xyz])mm(\d+)\b")


def register_widths(asm: str) -> dict:
    """Vector registers named in x86 assembly (AT&T or Intel syntax, LLVM's or objdump's).

    Returns ``{"xmm": n, "ymm": n, "zmm": n, "widest_bits": 128|256|512|0, "evex": bool}``;
    ``evex`` is True when the code needs AVX-512's encoding: a ``zmm`` register, a register
    16-31, a mask register ``%k1``..``%k7`` or an embedded broadcast ``{1toN}`` (AVX-512VL code
    on ``ymm`` registers, as XLA emits on an AVX-512 host, has them; AVX2 code does not)."""
    counts = {"xmm": 0, "ymm": 0, "zmm": 0}
    high = False
    for kind, number in _REG.findall(asm):
        counts[kind + "mm"] += 1
        high |= int(number) >= 16
    masks = re.search(r"%k[1-7]\b|\{k[1-7]\}|\{1to\d+\}", asm) is not None
    widest = 512 if counts["zmm"] else 256 if counts["ymm"] else 128 if counts["xmm"] else 0
    return {**counts, "widest_bits": widest, "evex": bool(counts["zmm"] or high or masks)}


def isa_of(regs: dict) -> str:
    """A short name of the vector ISA of ``register_widths``' result: ``AVX-512 (zmm)``,
    ``AVX-512VL (ymm)``, ``AVX/AVX2 (ymm)``, ``SSE/AVX (xmm)`` or ``none``."""
    if regs["zmm"]:
        return "AVX-512 (zmm)"
    if regs["ymm"]:
        return "AVX-512VL (ymm)" if regs["evex"] else "AVX/AVX2 (ymm)"
    if regs["xmm"]:
        return "AVX-512VL (xmm)" if regs["evex"] else "SSE/AVX (xmm)"
    return "none"


def parse_cpuinfo(text: str) -> dict:
    """``model``, ``vendor`` and the ``ISA_FLAGS`` present, from /proc/cpuinfo text (first CPU)."""
    info = {"model": "", "vendor": "", "isa_flags": []}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and not info["model"]:
            info["model"] = value
        elif key == "vendor_id" and not info["vendor"]:
            info["vendor"] = value
        elif key == "flags" and not info["isa_flags"]:
            flags = set(value.split())
            info["isa_flags"] = [f for f in ISA_FLAGS if f in flags]
    return info


# ---------------------------------------------------------------------------------------
# The host and minixla's target.

def cpu_report() -> dict:
    """The CPU of this machine: ``model``, ``vendor``, ``isa_flags``, ``logical_cpus`` (of the
    machine) and ``available_cpus`` (this process's affinity)."""
    try:
        info = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:  # pragma: no cover - not Linux
        import platform
        info = {"model": platform.processor(), "vendor": "", "isa_flags": []}
    info["logical_cpus"] = os.cpu_count()
    info["available_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return info


def restriction_available() -> bool:
    """Whether this minixla can target another CPU than the host's (``MINIXLA_LLVM_CPU`` /
    ``MINIXLA_LLVM_FEATURES``: ``target.host_cpu()`` or the config options exist)."""
    from minixla.backends.llvm import target
    if hasattr(target, "host_cpu"):
        return True
    missing = object()
    return _config_option("minixla_llvm_cpu", missing) is not missing


def _config_option(name, default):
    import minixla
    try:
        return getattr(minixla.config, name)
    except (AttributeError, ValueError):
        return default


def minixla_target() -> dict:
    """The LLVM target minixla compiles for: ``host_cpu`` (LLVM's name of this CPU),
    ``cpu`` and ``features`` of minixla's target machine, the vector ISA those features allow
    (``isa``), whether they are restricted from the host's (``restricted``), and ``note`` when
    ``MINIXLA_LLVM_CPU``/``MINIXLA_LLVM_FEATURES`` are set but this minixla has no such option."""
    from llvmlite import binding as llvm

    from minixla.backends.llvm import target
    target._initialize()
    host_cpu = llvm.get_host_cpu_name()
    host_features = llvm.get_host_cpu_features().flatten()
    note = ""
    if hasattr(target, "host_cpu"):
        cpu, features = target.host_cpu()
    else:
        cpu = _config_option("minixla_llvm_cpu", None) or host_cpu
        features = _config_option("minixla_llvm_features", None) or host_features
        if not restriction_available() and (os.environ.get("MINIXLA_LLVM_CPU") or os.environ.get("MINIXLA_LLVM_FEATURES")):
            note = ("option not available: this minixla has no minixla_llvm_cpu/minixla_llvm_features "
                    "(MINIXLA_LLVM_CPU/MINIXLA_LLVM_FEATURES are ignored; it targets the host)")
    return {"host_cpu": host_cpu, "cpu": cpu, "features": features,
            # (restricted: an option chose the target; minixla's own default tuning features,
            # such as -prefer-256-bit, do not make a run "restricted")
            "isa": _isa_of_features(cpu, features),
            "restricted": bool(_config_option("minixla_llvm_cpu", None) or _config_option("minixla_llvm_features", None)),
            "env": {k: os.environ[k] for k in ("MINIXLA_LLVM_CPU", "MINIXLA_LLVM_FEATURES") if os.environ.get(k)},
            "note": note}


def _isa_of_features(cpu: str, features: str) -> str:
    """The widest vector ISA a target machine with ``cpu`` and ``features`` may use (a CPU's
    own features count unless the string turns them off)."""
    flags = {f[1:]: f[0] == "+" for f in features.split(",") if f[:1] in "+-" and len(f) > 1}
    if not flags:  # the CPU's own features: ask LLVM through a probe compile
        return _isa_of_cpu(cpu)
    if flags.get("avx512f"):
        return "AVX-512"
    if flags.get("avx2"):
        return "AVX2"
    if flags.get("avx"):
        return "AVX"
    return "SSE" if flags.get("sse2", True) else "scalar"


@functools.cache
def _isa_of_cpu(cpu: str) -> str:
    """The vector ISA of an LLVM CPU name's own features, from the code it generates for a
    wide vector add (zmm: AVX-512, ymm: AVX, xmm: SSE)."""
    from llvmlite import binding as llvm
    ir = ("define void @f(ptr %p) {\n  %v = load <16 x float>, ptr %p\n  %w = fadd <16 x float> %v, %v\n"
          "  store <16 x float> %w, ptr %p\n  ret void\n}\n")
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, opt=2)
    mod = llvm.parse_assembly(ir)
    mod.triple = tm.triple
    regs = register_widths(tm.emit_assembly(mod))
    return {512: "AVX-512", 256: "AVX/AVX2", 128: "SSE"}.get(regs["widest_bits"], "scalar")


def xla_threads() -> int | None:
    """XLA:CPU's intra-op threads in this process (its Eigen pool's ``tf_XLAEigen`` threads;
    None before jax ran a computation here, or off Linux)."""
    try:
        names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]
    except OSError:  # pragma: no cover
        return None
    n = sum(name.startswith("tf_XLAEigen") for name in names)
    return n or None


def minixla_code(compiled) -> dict:
    """The vector code of one ``minixla.jit(...).lower(...).compile()`` result: ``ir``
    (``vector_widths`` of its optimized LLVM IR), ``asm`` (``register_widths`` of its machine
    code) and ``isa`` (``isa_of`` that); ``{}`` when the executable has no IR (the jax backend,
    or loaded from the persistent cache)."""
    ex = getattr(compiled, "executable", None)
    ir = getattr(ex, "optimized_llvm_ir", None)
    if not isinstance(ir, str) or ir.startswith("; (loaded"):
        return {}
    regs = register_widths(ex.asm)
    code = {"ir": vector_widths(ir), "asm": regs, "isa": isa_of(regs)}
    routines = library_routines(ir)
    if routines:
        lib_ir = "\n".join(routines.values())
        code["library"] = {"routines": sorted(routines), "ir": vector_widths(lib_ir)}
    return code


def library_routines(llvm_ir: str) -> dict:
    """``{name: optimized IR}`` of the precompiled library routines (``gemm.library_routine``:
    the GEMM micro-kernels, the plain-dot routine) that IR text calls, and those they call."""
    from minixla.backends.llvm import gemm
    library = dict(getattr(gemm, "_library", {}))  # (compiled once per process, on first use)
    found, todo = {}, [llvm_ir]
    while todo:
        text = todo.pop()
        for name in set(re.findall(r"@(minixla_[A-Za-z0-9_.]+)", text)):
            if name in library and name not in found:
                try:
                    found[name] = library[name].function_ir(name)
                except (KeyError, AttributeError):  # (loaded code: no IR)
                    continue
                todo.append(found[name])
    return found


def host_report(threads: int | None = None) -> dict:
    """The report of this process (no compile): ``cpu`` (``cpu_report``), ``minixla``
    (``minixla_target`` plus ``threads``, its pool's size), ``xla`` (``threads`` counted
    once jax ran here; jax and jaxlib versions; ``XLA_FLAGS``) and the versions."""
    import jax
    import llvmlite
    import numpy as np

    from minixla.backends.llvm.runtime import thread_pool
    try:
        import jaxlib
        jaxlib_version = jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover
        jaxlib_version = ""
    return {"cpu": cpu_report(),
            "minixla": {**minixla_target(), "threads": threads or thread_pool().size,
                        "MINIXLA_NUM_THREADS": os.environ.get("MINIXLA_NUM_THREADS", "")},
            "xla": {"threads": xla_threads(), "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
                    "jax": jax.__version__, "jaxlib": jaxlib_version, "devices": str(jax.devices())},
            "versions": {"python": sys.version.split()[0], "numpy": np.__version__, "llvmlite": llvmlite.__version__,
                         "llvm": ".".join(map(str, _llvm_version()))}}


def _llvm_version():
    from llvmlite import binding as llvm
    return getattr(llvm, "llvm_version_info", ())


# ---------------------------------------------------------------------------------------
# XLA's generated code, from a dump in a subprocess.

def xla_probe(names=None, scale: float = 1.0, timeout: float = 300.0, xla_flags: str | None = None) -> dict:
    """Compile the suite's workloads (``names``: all by default) with ``jax.jit`` in a fresh
    process dumping XLA:CPU's LLVM IR and object files, and read them: per workload
    ``{"ir": vector_widths, "prefer_vector_width": [...], "asm": register_widths, "isa",
    "modules"}``, plus ``"max_isa"`` (the ``xla_cpu_max_isa`` XLA recorded in its
    debug options, "" for none) and ``"error"`` when the probe failed. ``xla_flags``: the
    XLA_FLAGS of the probe (default: this process's), ``--xla_dump_to`` added. The dumped
    modules hold XLA's fused loops; dots and convolutions call its precompiled runtime
    (Eigen, oneDNN), whose code is not in the dump."""
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    with tempfile.TemporaryDirectory(prefix="minixla-xla-dump-") as d:
        env = dict(os.environ, XLA_FLAGS=f"{flags} --xla_dump_to={d}".strip(), JAX_PLATFORMS="cpu")
        code = ("import sys; from benchmarks.host import _probe_child; "
                f"_probe_child({list(names) if names else None!r}, {scale!r})")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        try:
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"the XLA probe ran past {timeout:.0f} s", "workloads": {}}
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return {"error": f"the XLA probe failed (rc {proc.returncode}): {' / '.join(tail)}", "workloads": {}}
        return read_xla_dump(d, json.loads(proc.stdout.strip().splitlines()[-1]))


def _probe_child(names, scale):
    import functools as ft

    import jax
    import numpy as np

    from benchmarks import workloads as W
    done = []
    for w in W.workloads(scale):
        if names and w.name not in names:
            continue
        f = ft.partial(w.fn, W.jax_namespace())
        g = lambda *a, _f=f: _f(*a)  # noqa: E731 - named for XLA's module name
        g.__name__ = g.__qualname__ = f"bench_{w.name}"
        args = w.make_args(np.random.default_rng(0), scale)
        # (run once: XLA:CPU writes a kernel's object file when it is first run)
        jax.block_until_ready(jax.jit(g)(*args))
        done.append(w.name)
    print(json.dumps(done))


def read_xla_dump(directory, names) -> dict:
    """Read an ``--xla_dump_to`` directory of the probe (see ``xla_probe``)."""
    out = {"workloads": {}, "max_isa": "", "objdump": bool(shutil.which("objdump"))}
    for name in names:
        ir_files = sorted(glob.glob(os.path.join(directory, f"module_*.jit_bench_{name}.*ir-with-opt.ll")))
        obj_files = sorted(glob.glob(os.path.join(directory, f"module_*.jit_bench_{name}.*.o")))
        ir = "\n".join(Path(p).read_text(errors="replace") for p in ir_files)
        entry = {"modules": len(ir_files), "ir": vector_widths(ir), "prefer_vector_width": prefer_vector_width(ir),
                 "libraries": _library_fusions(directory, name)}
        if obj_files and out["objdump"]:
            asm = "\n".join(_objdump(p) for p in obj_files)
            entry["asm"] = register_widths(asm)
            entry["isa"] = isa_of(entry["asm"])
        out["workloads"][name] = entry
    for p in glob.glob(os.path.join(directory, "*.debug_options"))[:1]:
        m = re.search(r'xla_cpu_max_isa:\s*"([^"]*)"', Path(p).read_text())
        out["max_isa"] = m.group(1) if m else ""
    return out


def library_fusions(hlo_text: str) -> list[str]:
    """The precompiled libraries an XLA:CPU program after optimization calls instead of
    emitting LLVM IR: custom fusions (``"kind":"__ynn_fusion"``: YNNPACK, which XLA uses for
    dots, convolutions and row reductions) and custom-call targets (``__onednn$matmul``, ...)."""
    found = set(re.findall(r'"kind":"__(\w+?)_fusion"', hlo_text))
    found |= {t.split("$")[0].strip("_") for t in re.findall(r'custom_call_target="([^"]+)"', hlo_text)}
    return sorted(found)


def _library_fusions(directory, name) -> list[str]:
    paths = glob.glob(os.path.join(directory, f"module_*.jit_bench_{name}.cpu_after_optimizations.txt"))
    return library_fusions("\n".join(Path(p).read_text(errors="replace") for p in paths))


def _objdump(path) -> str:
    try:
        return subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):  # pragma: no cover
        return ""


# ---------------------------------------------------------------------------------------
# Text.

def vector_bits_cell(code: dict | None) -> str:
    """The most common float vector width (bits) of a workload's arithmetic, for a table cell
    (``scalar`` when none is vectorized, ``-`` when unknown)."""
    if not code or "ir" not in code:
        return "-"
    libs = "+".join(code.get("libraries", ()))
    if code.get("modules") == 0:  # (XLA: no LLVM IR at all, only library calls)
        return libs or "-"
    cell = _bits(code["ir"])
    if "library" in code:  # (minixla: its GEMM routines' own width)
        cell += f", gemm {_bits(code['library']['ir'])}"
    return f"{cell} + {libs}" if libs else cell


def _bits(widths: dict) -> str:
    bits, widest = widths["common_bits"], widths["widest_bits"]
    return "scalar" if not bits else f"{bits}" if widest == bits else f"{bits} (max {widest})"


def _isa_summary(code: dict) -> str:
    """``AVX-512VL (ymm) in 7 workloads, AVX/AVX2 (ymm) in layernorm`` from per-workload code."""
    by_isa = collections.defaultdict(list)
    for name, c in code.items():
        if c.get("isa"):
            by_isa[c["isa"]].append(name)
    parts = []
    for isa, names in sorted(by_isa.items(), key=lambda kv: -len(kv[1])):
        parts.append(f"{isa} in {len(names)} workloads" if len(names) > 2 else f"{isa} in {', '.join(names)}")
    return ", ".join(parts) or "not read"


def format_host(report: dict, code: dict | None = None, xla: dict | None = None) -> str:
    """The host header of a benchmark table, as a Markdown list: the CPU, minixla's and XLA's
    targets and threads, and (``code``, ``xla``: per-workload results of ``minixla_code`` and
    ``xla_probe``) the instruction sets their machine code used."""
    cpu, mx, xl = report["cpu"], report["minixla"], report["xla"]
    lines = [f"- Host: {cpu['model'] or '?'} ({cpu['vendor'] or '?'}), {cpu['available_cpus']} CPUs available "
             f"of {cpu['logical_cpus']}; ISA flags: {' '.join(cpu['isa_flags']) or '-'}."]
    load = report.get("load_average") or {}
    if load.get("start") is not None:
        lines[0] += (f" Load average {load['start']:.1f} at the start of the run, {load['end']:.1f} at its end "
                     f"(other processes shared the CPUs).")
    target = (f"`{mx['cpu']}` (restricted; the host is `{mx['host_cpu']}`)" if mx["restricted"]
              else f"`{mx['cpu']}` (the host)")
    line = (f"- minixla: LLVM {report['versions']['llvm']} (llvmlite {report['versions']['llvmlite']}) targets "
            f"{target}, {mx['isa']} features, {mx['threads']} thread(s)")
    if code:
        line += f"; machine code: {_isa_summary(code)}"
    lines.append(line + "." + (f" {mx['note']}" if mx.get("note") else ""))
    threads = xl["threads"] if xl["threads"] is not None else "?"
    line = f"- XLA:CPU: jax {xl['jax']} / jaxlib {xl['jaxlib']}, {threads} intra-op thread(s)"
    if xl["XLA_FLAGS"]:
        line += f", XLA_FLAGS `{xl['XLA_FLAGS']}`"
    if xla and xla.get("error"):
        line += f"; its code not read: {xla['error']}"
    elif xla:
        line += f", max ISA {xla['max_isa'] or 'the host'}"
        widths = sorted({w for c in xla["workloads"].values() for w in c.get("prefer_vector_width", ())})
        if widths:
            line += f", prefer-vector-width {'/'.join(map(str, widths))}"
        line += f"; machine code of its fused loops: {_isa_summary(xla['workloads'])}"
        libs = collections.defaultdict(list)
        for name, c in xla["workloads"].items():
            for lib in c.get("libraries", ()):
                libs[lib].append(name)
        for lib, names in libs.items():
            line += f"; {lib} library fusions (not in its IR) in {', '.join(names)}"
        if libs and xla["max_isa"]:
            line += " (the ISA limit does not reach them: they pick their kernels at run time)"
    lines.append(line + ".")
    return "\n".join(lines)


def main(argv=None) -> dict:
    import argparse
    import functools as ft

    import numpy as np

    import minixla
    from benchmarks import workloads as W
    p = argparse.ArgumentParser(prog="python -m benchmarks.host", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="workload scale of the compiles read")
    p.add_argument("--no-xla-probe", action="store_true", help="skip XLA's dump (a jax subprocess)")
    a = p.parse_args(argv)
    code = {}
    for w in W.workloads(a.scale):
        args = w.make_args(np.random.default_rng(0), a.scale)
        code[w.name] = minixla_code(minixla.jit(ft.partial(w.fn, W.minixla_namespace())).lower(*args).compile())
    xla = None if a.no_xla_probe else xla_probe(scale=a.scale)
    report = host_report()
    print(format_host(report, code, xla))
    print("vector bits (minixla / XLA): " + ", ".join(
        f"{n} {vector_bits_cell(c)} / {vector_bits_cell((xla or {}).get('workloads', {}).get(n))}"
        for n, c in code.items()))
    return {"host": report, "code": code, "xla_code": xla}


if __name__ == "__main__":
    main()
