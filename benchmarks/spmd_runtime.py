"""SPMD at training size (issue 17): the collectives XLA's partitioner inserts into whole
training steps next to minixla's, and the virtual LLVM mesh against one device.
(``benchmarks/spmd.py`` is the small, tested comparison of the same kind on forward programs.)

    python -m benchmarks.spmd_runtime              # table of collectives and bytes, then timings
    python -m benchmarks.spmd_runtime --json       # the figures as one JSON object on the last line
    python -m benchmarks.spmd_runtime --skip-timing

Runs on 8 CPU devices: when this process's JAX has fewer, it re-runs itself in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (which must be set before jax is
imported).

**Collectives.** Each program is sharded the same way for both compilers, over a 1-D mesh
``x`` of 8 devices:

- ``mlp_dp``: the MLP training step (``benchmarks.training.mlp_train_step``, 64 -> 256 -> 256
  -> 64, batch 128), batch sharded, parameters replicated (data parallel);
- ``mlp_mp``: a 2-layer relu MLP forward (Megatron model parallel): ``w0`` sharded by columns,
  ``w1`` by rows, ``x`` replicated;
- ``transformer_dp``: a pre-layernorm transformer block's training step (4-head attention,
  MLP x4, SGD), batch sharded;
- ``cnn_dp``: the digits CNN's Adam step (``benchmarks.training.cnn_train_step``), batch 64
  sharded.

XLA's side is ``jax.jit(step, in_shardings=...).lower(*args).compile().as_text()`` parsed by
``xla_collectives``; minixla's is ``minixla.sharding.partition`` (its SPMD partitioner) and
``minixla.passes.spmd_partitioner.collective_bytes``, imported lazily ("partitioner not
available" without them). Bytes are a per-device model of ring collectives over a group of
``g`` devices: all-reduce ``2(g-1)/g`` of its buffer, all-gather ``(g-1)/g`` of its result,
reduce-scatter ``(g-1)/g`` of its operand, all-to-all ``(g-1)/g`` of its buffer,
collective-permute its buffer.

**Timing.** A data-parallel gradient ``g = x^T tanh(x w)`` (batch 2048, 256x256 weights):
one device on the whole batch (``minixla.jit``, its kernels split over the thread pool; and
the same program on one thread, as one virtual device) against the per-device program (the same on a
batch shard, plus an ``all-reduce`` of ``g``) on 2 and 8 virtual devices (``run_llvm``), and a
lone 4-element all-reduce (the cost of the two barriers). Medians of interleaved calls in one
process. Virtual devices are threads of one process: on a host with fewer cores than devices
they share the cores, and the mesh can only be slower than one device that uses them all.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # ``python benchmarks/spmd_runtime.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

NUM_DEVICES = 8

from minixla.passes.spmd_partitioner import bytes_moved  # noqa: E402 (one byte model)
F32 = np.float32

# -- XLA's partitioned HLO text --------------------------------------------------------------
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
                "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_OPCODES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>\([^=]*?\)|[a-z]\w*\[[\d,]*\](?:\{[^}]*\})?)\s+"
                   r"(?P<op>" + "|".join(_OPCODES) + r")(?P<start>-start)?\((?P<rest>.*)$")
_ARRAY = re.compile(r"([a-z]\w*)\[([\d,]*)\]")


def _arrays(shape_text: str) -> list:
    """``[(dtype, dims)]`` of the arrays in an HLO shape (a tuple gives several)."""
    return [(dt, tuple(int(d) for d in dims.split(",") if d)) for dt, dims in _ARRAY.findall(shape_text)]


def _nbytes(arrays) -> int:
    return sum(_DTYPE_BYTES[dt] * int(np.prod(dims, dtype=np.int64)) for dt, dims in arrays)


def _iota_groups(text: str) -> tuple:
    """XLA's iota replica groups ``[G,g]<=[d0,d1,...]T(p0,p1,...)``: the device ids
    ``iota(d0*d1*...)`` reshaped to ``dims``, transposed by ``T``, reshaped to G groups of g."""
    m = re.match(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    n_groups, size = int(m.group(1)), int(m.group(2))
    dims = [int(d) for d in m.group(3).split(",")]
    ids = np.arange(int(np.prod(dims))).reshape(dims)
    if m.group(4):
        ids = ids.transpose([int(p) for p in m.group(4).split(",")])
    return tuple(tuple(int(v) for v in row) for row in ids.reshape(n_groups, size))


def _mesh_groups(text: str) -> tuple:
    """XLA's mesh-axes replica groups ``mesh['a'=4,'b'=2] {'a'}``: the devices (row-major over
    the mesh) that vary along the listed axes, one group per value of the other axes."""
    sizes = [(a, int(n)) for a, n in re.findall(r"'([^']+)'=(\d+)", text.split("]")[0])]
    chosen = re.findall(r"'([^']+)'", text.split("]", 1)[1])
    names = [a for a, _ in sizes]
    ids = np.arange(int(np.prod([n for _, n in sizes]))).reshape([n for _, n in sizes])
    keep = [names.index(a) for a in chosen]
    rest = [k for k in range(len(names)) if k not in keep]
    size = int(np.prod([sizes[k][1] for k in keep]))
    return tuple(tuple(int(v) for v in row) for row in ids.transpose(rest + keep).reshape(-1, size))


def _groups(rest: str):
    mm = re.search(r"replica_groups=(mesh\[[^\]]*\]\s*\{[^}]*\})", rest)
    if mm is not None:
        return _mesh_groups(mm.group(1))
    m = re.search(r"replica_groups=(\{\}|\{\{[\d,{} ]*\}\}|\[\d+,\d+\]<=\[[\d,]+\](?:T\([\d,]+\))?)", rest)
    if m is None or m.group(1) == "{}":
        return None  # all devices
    text = m.group(1)
    if text.startswith("["):
        return _iota_groups(text)
    return tuple(tuple(int(v) for v in g.split(",") if v.strip()) for g in re.findall(r"\{([\d, ]*)\}", text[1:-1]))


def _pairs(rest: str) -> tuple:
    m = re.search(r"source_target_pairs=\{(.*?)\}\}", rest)
    if m is None:
        return ()
    return tuple(tuple(int(v) for v in p.split(",")) for p in re.findall(r"\{?(\d+,\d+)\}?", m.group(1) + "}"))


def xla_collectives(hlo_text: str, num_devices: int = NUM_DEVICES) -> list[dict]:
    """The collectives of XLA HLO text (e.g. ``jax.jit(f).lower(...).compile().as_text()``):
    per collective (asynchronous ``*-start`` counted once, ``*-done`` skipped) a dict with
    ``opcode``, ``shape`` (the result, as text), ``groups`` (tuple of device tuples; ``None``
    = all ``num_devices``), ``group_size``, ``pairs`` (collective-permute), ``bytes`` (the
    per-device ring model, ``bytes_moved``)."""
    out = []
    for line in hlo_text.splitlines():
        m = _LINE.match(re.sub(r"/\*.*?\*/", "", line))
        if not m:
            continue
        opcode, shape_text, rest = m.group("op"), m.group("shape"), m.group("rest")
        arrays = _arrays(shape_text)
        if m.group("start") and len(arrays) > 1:
            # async forms: all-gather-start -> (operand, result); collective-permute-start ->
            # (operand, result, contexts): the result is the array the op produces
            arrays = [arrays[-1]] if opcode == "all-gather" else [arrays[1]] if opcode == "collective-permute" else arrays
        result = _nbytes(arrays)
        groups = _groups(rest) if opcode != "collective-permute" else None
        size = 2 if opcode == "collective-permute" else (len(groups[0]) if groups else num_devices)
        operand = result * size if opcode == "reduce-scatter" else result
        names = [f"{dt}[{','.join(map(str, dims))}]" for dt, dims in arrays]
        out.append({"opcode": opcode, "shape": names[0] if len(names) == 1 else f"({len(names)} arrays)",
                    "arrays": names,
                    "groups": groups, "group_size": size,
                    "pairs": _pairs(rest) if opcode == "collective-permute" else None,
                    "bytes": bytes_moved(opcode, size, operand, result)})
    return out


# -- the programs ----------------------------------------------------------------------------
def _layernorm(ns, x, g, b):
    xnp = ns.np
    mu = xnp.mean(x, axis=-1, keepdims=True)
    var = xnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / xnp.sqrt(var + F32(1e-5)) * g + b


def _transformer_block(ns, p, x, heads=4):
    xnp = ns.np
    n, s, d = x.shape
    h = _layernorm(ns, x, p["g1"], p["b1"])
    q, k, v = (xnp.reshape(h @ p[w], (n, s, heads, d // heads)) for w in ("wq", "wk", "wv"))
    att = xnp.einsum("nshd,nthd->nhst", q, k) / F32((d // heads) ** 0.5)
    att = xnp.exp(att - xnp.max(att, axis=-1, keepdims=True))
    att = att / xnp.sum(att, axis=-1, keepdims=True)
    o = xnp.reshape(xnp.einsum("nhst,nthd->nshd", att, v), (n, s, d)) @ p["wo"]
    x = x + o
    h = _layernorm(ns, x, p["g2"], p["b2"])
    return x + xnp.maximum(h @ p["w1"], F32(0)) @ p["w2"]


def transformer_train_step(ns):
    def loss(p, x, y):
        d = _transformer_block(ns, p, x) - y
        return ns.np.mean(d * d)

    def step(p, x, y):
        from benchmarks.training import _sgd  # (the training benchmark's SGD update)
        value, g = ns.value_and_grad(loss)(p, x, y)
        return _sgd(ns, p, g), value
    return step


def mlp_forward(ns):
    from benchmarks.training import _mlp
    return lambda params, x: _mlp(ns, params, x)


def programs():
    """``[(name, make_step(ns), make_args(rng), in_specs pytree)]``."""
    from jax.sharding import PartitionSpec as P

    from benchmarks import training as T
    rep = P()

    def mlp_args(rng):
        return T._mlp_params(rng, (64, 256, 256, 64)), T._normal(rng, 128, 64), T._normal(rng, 128, 64)

    def mlp_specs(args):
        return ({k: rep for k in args[0]}, P("x"), P("x"))

    def mp_args(rng):
        return T._mlp_params(rng, (128, 512, 128)), T._normal(rng, 32, 128)

    def mp_specs(args):
        return ({"w0": P(None, "x"), "b0": P("x"), "w1": P("x", None), "b1": rep}, rep)

    def tf_args(rng, n=16, s=16, d=64):
        p = {w: T._normal(rng, d, d, scale=d ** -0.5) for w in ("wq", "wk", "wv", "wo")}
        p.update(w1=T._normal(rng, d, 4 * d, scale=d ** -0.5), w2=T._normal(rng, 4 * d, d, scale=(4 * d) ** -0.5),
                 g1=np.ones(d, F32), b1=np.zeros(d, F32), g2=np.ones(d, F32), b2=np.zeros(d, F32))
        return p, T._normal(rng, n, s, d), T._normal(rng, n, s, d)

    def cnn_args(rng):
        return T.cnn_args(0.25)(rng)

    def cnn_specs(args):
        tree = {k: rep for k in args[0]}
        return (tree, dict(tree), dict(tree), rep, P("x"), P("x"))
    return [
        ("mlp_dp", T.mlp_train_step, mlp_args, mlp_specs),
        ("mlp_mp", mlp_forward, mp_args, mp_specs),
        ("transformer_dp", transformer_train_step, tf_args, mlp_specs),
        ("cnn_dp", T.cnn_train_step, cnn_args, cnn_specs),
    ]


def _flat_specs(specs):
    import jax
    from jax.sharding import PartitionSpec as P
    return jax.tree.leaves(specs, is_leaf=lambda s: isinstance(s, P))


def xla_side(name, make_step, args, specs, mesh):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from benchmarks.training import jax_namespace
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P))
    text = jax.jit(make_step(jax_namespace()), in_shardings=shardings).lower(*args).compile().as_text()
    return xla_collectives(text, NUM_DEVICES)


def minixla_side(name, make_step, args, specs):
    """minixla's collectives, or a string saying why there are none to show."""
    try:
        from minixla.passes.spmd_partitioner import collective_bytes
        from minixla.sharding import partition
    except ImportError:
        return "partitioner not available"
    import jax

    from benchmarks.training import minixla_namespace
    leaves, tree = jax.tree.flatten(args)
    step = make_step(minixla_namespace())

    def flat_step(*flat):  # the partitioner takes one array (and one spec) per argument
        return step(*jax.tree.unflatten(tree, flat))
    try:
        module = partition(flat_step, {"x": NUM_DEVICES}, _flat_specs(specs), args=leaves)
    except Exception as e:  # noqa: BLE001 - reported in the table
        return f"partitioner failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    rows = []
    for entry in collective_bytes(module):
        opcode, shape, nbytes = entry[:3]
        rows.append({"opcode": opcode, "shape": str(shape).split("{")[0], "bytes": float(nbytes)})
    return rows


def _fmt_bytes(b: float) -> str:
    return f"{b / 1024:.1f} KiB" if b >= 1024 else f"{b:.0f} B"


def collectives_report(out: dict) -> None:
    import jax
    from jax.sharding import Mesh
    mesh = Mesh(np.array(jax.devices("cpu")[:NUM_DEVICES]), ("x",))
    rng = np.random.default_rng(0)
    print(f"Collectives per device, {NUM_DEVICES} CPU devices (mesh axis x); bytes: ring model per device")
    for name, make_step, make_args, make_specs in programs():
        args = make_args(rng)
        specs = make_specs(args)
        xla = xla_side(name, make_step, args, specs, mesh)
        mini = minixla_side(name, make_step, args, specs)
        xla_total = sum(c["bytes"] for c in xla)
        print(f"\n{name}: XLA {len(xla)} collectives, {_fmt_bytes(xla_total)}", end="")
        if isinstance(mini, str):
            print(f"; minixla: {mini}")
        else:
            print(f"; minixla {len(mini)} collectives, {_fmt_bytes(sum(c['bytes'] for c in mini))}")
        for c in xla:
            groups = "all" if c["groups"] is None else f"{len(c['groups'])}x{c['group_size']}"
            print(f"  XLA      {c['opcode']:<19} {c['shape']:<28} groups {groups:<6} {_fmt_bytes(c['bytes']):>10}")
        for c in mini if not isinstance(mini, str) else []:
            print(f"  minixla  {c['opcode']:<19} {c['shape']:<28} {'':13} {_fmt_bytes(c['bytes']):>10}")
        out[name] = {"xla": [{k: c[k] for k in ("opcode", "shape", "group_size", "bytes")} for c in xla],
                     "xla_bytes": xla_total,
                     "minixla": mini, "minixla_bytes": None if isinstance(mini, str) else sum(c["bytes"] for c in mini)}


# -- timing ----------------------------------------------------------------------------------
def _add_all_reduce(module, num_partitions):
    """Append ``all-reduce(root)`` (sum over all partitions) to an optimized module's entry."""
    from minixla.hlo import collectives
    from minixla.hlo.ir import HloInstruction, Shape
    root = module.entry.root
    dtype = root.shape.dtype
    add = module.new_computation("sum")
    a = add.add_instruction(HloInstruction("parameter", Shape(dtype, ()), parameter_number=0))
    b = add.add_instruction(HloInstruction("parameter", Shape(dtype, ()), parameter_number=1))
    add.root = add.add_instruction(HloInstruction("add", Shape(dtype, ()), [a, b]))
    module.entry.root = module.entry.add_instruction(
        collectives.all_reduce(root, [list(range(num_partitions))], add))
    return module


def _median_ms(fn, seconds=0.6, min_calls=3):
    times, t_end = [], time.perf_counter() + seconds
    while len(times) < min_calls or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _partitioned_mlp_runs():
    """``mlp_dp`` partitioned by minixla's partitioner, on 8 virtual devices (``optimize=True``)
    next to the one-device ``minixla.jit`` step; checked equal first. A string when the
    partitioner is not available or fails."""
    import jax

    import minixla
    from benchmarks.training import minixla_namespace
    from minixla.backends.spmd import compile_llvm
    try:
        from minixla.sharding import partition
        from minixla.sharding.partition import shard, unshard
    except ImportError:
        return "partitioner not available"
    name, make_step, make_args, make_specs = programs()[0]
    args = make_args(np.random.default_rng(1))
    leaves, tree = jax.tree.flatten(args)
    step = make_step(minixla_namespace())

    def flat_step(*flat):
        return step(*jax.tree.unflatten(tree, flat))
    try:
        module = partition(flat_step, {"x": NUM_DEVICES}, _flat_specs(make_specs(args)), args=leaves)
        params = module.entry.parameters
        per_param = [shard(np.asarray(a), p.attrs["sharding"], NUM_DEVICES) for a, p in zip(leaves, params)]
        per_device = [[s[d] for s in per_param] for d in range(NUM_DEVICES)]
        exe = compile_llvm(module, NUM_DEVICES, optimize=True)
        outs = exe(per_device)
        root = module.entry.root
        shapes = module.spmd_global_shapes[1].tuple_shapes  # (the partitioner's record of them)
        sharding = root.attrs["sharding"]
        shardings = sharding.elements if sharding.kind == "tuple" else [sharding] * len(shapes)
        one = minixla.jit(flat_step)
        want = jax.tree.leaves(one(*leaves))
        for k, (sh, s, w) in enumerate(zip(shapes, shardings, want)):
            got = unshard([o[k] for o in outs], s, sh)
            np.testing.assert_allclose(got, w, rtol=2e-3, atol=2e-4, err_msg=f"output {k}")
    except Exception as e:  # noqa: BLE001 - reported, the rest of the benchmark runs
        return f"failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return {"mlp_dp step, 1 device (minixla.jit)": lambda: one(*leaves),
            f"mlp_dp step partitioned, {NUM_DEVICES} virtual devices": lambda: exe(per_device)}


def timing_report(out: dict, rounds: int = 3) -> None:
    import minixla
    import minixla.numpy as mnp
    from minixla.backends.spmd import compile_llvm

    def grad(x, w):
        return mnp.matmul(mnp.transpose(x), mnp.tanh(mnp.matmul(x, w)))
    rng = np.random.default_rng(0)
    batch, d = 2048, 256
    x = rng.standard_normal((batch, d)).astype(F32)
    w = (rng.standard_normal((d, d)) * d ** -0.5).astype(F32)
    one = minixla.jit(grad)
    one(x, w)
    single = compile_llvm(minixla.jit(grad).lower(x, w).compile().hlo_module.clone(), 1)  # num_threads=1
    runs = {"1 device": lambda: one(x, w), "1 device, 1 thread": lambda: single([[x, w]])}
    meshes = {}
    for n in (2, NUM_DEVICES):
        local = x[: batch // n]
        module = _add_all_reduce(minixla.jit(grad).lower(local, w).compile().hlo_module.clone(), n)
        exe = compile_llvm(module, n)
        shards = [[x[k * batch // n:(k + 1) * batch // n], w] for k in range(n)]
        got = exe(shards)
        np.testing.assert_allclose(got[0][0], one(x, w), rtol=2e-3, atol=2e-3)
        meshes[n] = exe
        runs[f"{n} virtual devices"] = (lambda e, s: lambda: e(s))(exe, shards)
    tiny = _add_all_reduce(minixla.jit(lambda v: v + 1).lower(np.zeros(4, F32)).compile().hlo_module.clone(),
                           NUM_DEVICES)
    tiny_exe = compile_llvm(tiny, NUM_DEVICES)
    tiny_args = [[np.full(4, k, F32)] for k in range(NUM_DEVICES)]
    runs[f"lone all-reduce f32[4], {NUM_DEVICES} devices"] = lambda: tiny_exe(tiny_args)
    partitioned = _partitioned_mlp_runs()
    if isinstance(partitioned, str):
        print(f"\n(the partitioned mlp_dp step on virtual devices: {partitioned})")
    else:
        runs.update(partitioned)
    samples = {k: [] for k in runs}
    for r in range(rounds):  # interleaved: the host's load hits every variant alike
        for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            samples[k].append(_median_ms(runs[k]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nData-parallel g = x^T tanh(x w), x f32[{batch},{d}], w f32[{d},{d}]; {cores} cores, "
          f"load average {os.getloadavg()[0]:.1f}; median ms of interleaved calls ({rounds} rounds):")
    base = statistics.median(samples["1 device"])
    timing = {}
    for k, v in samples.items():
        ms = statistics.median(v)
        timing[k] = ms
        ratio = f"  ({ms / base:.2f}x the one-device time)" if k in (
            "1 device, 1 thread", "2 virtual devices", f"{NUM_DEVICES} virtual devices") else ""
        print(f"  {k:<44} {ms:8.3f} ms{ratio}")
    out["timing_ms"] = timing
    out["cores"] = cores


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    flag = f"--xla_force_host_platform_device_count={NUM_DEVICES}"
    if flag not in os.environ.get("XLA_FLAGS", "") and os.environ.get("MINIXLA_SPMD_CHILD") != "1":
        import importlib.util
        jax_loaded = "jax" in sys.modules
        if jax_loaded or importlib.util.find_spec("jax") is not None:
            env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flag).strip(),
                       MINIXLA_SPMD_CHILD="1", JAX_PLATFORMS="cpu")
            root = str(Path(__file__).resolve().parent.parent)
            env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
            argv = sys.argv[1:] if argv is None else list(argv)
            return subprocess.call([sys.executable, "-m", "benchmarks.spmd_runtime", *argv], env=env)
    out: dict = {}
    collectives_report(out)
    if not args.skip_timing:
        timing_report(out, args.rounds)
    if args.json:
        print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
