"""The hand-off for a partitioned program: run the per-device HloModule under ``jax.shard_map``
over real JAX devices, its collectives replayed as JAX's (``jax.lax.psum`` & co.).

Inside ``shard_map`` every device runs the body on its own shard, as in minixla's per-device
program; the replay is the hand-off's own (``backends/jax_xla.py``: one ``jax.lax`` call per
HLO instruction), plus these rules:

==================== ==========================================================================
HLO                  JAX (inside ``shard_map``, over the mesh axes the replica groups span)
==================== ==========================================================================
all-reduce           ``psum`` / ``pmax`` / ``pmin`` (add / maximum / minimum reducers); any
                     other reducer: ``all_gather`` then the reducer applied in group order
all-gather           ``all_gather(x, axes, axis=dim, tiled=True)``
reduce-scatter       ``psum_scatter(x, axes, scatter_dimension=dim, tiled=True)`` (add); other
                     reducers: the all-reduce, then this device's slice
all-to-all           ``all_to_all(x, axes, dim, dim, tiled=True)``
collective-permute   ``ppermute(x, all axes, pairs)`` (a device sent nothing gets zeros, as in HLO)
partition-id         ``axis_index(all axes)`` as ``u32``
==================== ==========================================================================

**Replica groups.** JAX's collectives name mesh *axes*, HLO's name groups of devices. A group
set ``{{0..n-1}}`` is the whole (1-D) mesh. Smaller groups are mapped onto a *reshaped* mesh:
the devices are laid out row-major as a mesh of the prime factors of ``n`` (in some order),
and a collective's groups must be exactly the devices varying along a subset of its axes, in
row-major order -- e.g. on 4 devices as a 2x2 mesh ``(a, b)``, ``{{0,1},{2,3}}`` is axis
``b`` and ``{{0,2},{1,3}}`` is axis ``a``. One layout must fit every collective of the program;
groups that fit none (``{{0,3},{1,2}}``, or a group listed out of order such as ``{{1,0}}``)
raise ``UnsupportedError`` -- the virtual LLVM mesh (``run_llvm``) runs any groups.
"""
from __future__ import annotations

import itertools
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from minixla.backends import jax_xla
from minixla.backends.jax_xla import evaluate_computation, jax_rules
from minixla.core.errors import UnsupportedError
from minixla.hlo.collectives import COLLECTIVE_OPCODES

_context = threading.local()  # while tracing: instr -> the mesh axes of its groups, all axes


def _axes_of(instr):
    ctx = getattr(_context, "axes", None)
    if ctx is None:
        raise UnsupportedError(f"jax backend: {instr.opcode} %{instr.name} runs only inside "
                               "minixla.backends.spmd.run_shard_map (a per-device program)")
    return ctx[0].get(instr), ctx[1]


_P_REDUCERS = {"add": lax.psum, "maximum": lax.pmax, "minimum": lax.pmin}


def _reducer_name(instr):
    root = instr.called[0].root
    params = instr.called[0].parameters
    if root.opcode in _P_REDUCERS and list(root.operands) == list(params):
        return root.opcode
    return None


def _all_reduce(instr, x):
    axes, _ = _axes_of(instr)
    name = _reducer_name(instr)
    if name is not None:
        return _P_REDUCERS[name](x, axes)
    parts = lax.all_gather(x, axes, axis=0)  # [g, ...] in group order
    acc = parts[0]
    for m in range(1, parts.shape[0]):  # the reducer, in group order, as XLA's all-reduce
        acc = evaluate_computation(instr.called[0], [acc, parts[m]])
    return acc


def _all_gather(instr, x):
    axes, _ = _axes_of(instr)
    return lax.all_gather(x, axes, axis=instr.attrs["dimensions"][0], tiled=True)


def _reduce_scatter(instr, x):
    axes, _ = _axes_of(instr)
    dim = instr.attrs["dimensions"][0]
    if _reducer_name(instr) == "add":
        return lax.psum_scatter(x, axes, scatter_dimension=dim, tiled=True)
    full = _all_reduce(instr, x)
    size = instr.shape.dims[dim]
    return lax.dynamic_slice_in_dim(full, lax.axis_index(axes) * size, size, axis=dim)


def _all_to_all(instr, x):
    axes, _ = _axes_of(instr)
    dim = instr.attrs["dimensions"][0]
    return lax.all_to_all(x, axes, dim, dim, tiled=True)


def _collective_permute(instr, x):
    _, everything = _axes_of(instr)
    return lax.ppermute(x, everything, [tuple(p) for p in instr.attrs["source_target_pairs"]])


def _partition_id(instr):
    _, everything = _axes_of(instr)
    return lax.convert_element_type(lax.axis_index(everything), np.uint32)


jax_rules.update({"all-reduce": _all_reduce, "all-gather": _all_gather, "reduce-scatter": _reduce_scatter,
                  "all-to-all": _all_to_all, "collective-permute": _collective_permute,
                  "partition-id": _partition_id})


# -- replica groups -> mesh axes --------------------------------------------------------------
def _prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _groups_along(shape, subset) -> set:
    """The device groups varying along the axes ``subset`` of a row-major mesh ``shape``."""
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    rest = [a for a in range(len(shape)) if a not in subset]
    moved = np.transpose(ids, rest + list(subset)).reshape(-1, int(np.prod([shape[a] for a in subset])))
    return {tuple(int(v) for v in row) for row in moved}


def mesh_layout(module, num_partitions: int):
    """``(mesh shape, {collective instr: its axis positions})``: the row-major layout of the
    devices (prime factors of ``num_partitions``, in an order that fits) in which every
    collective's replica groups are the devices along a subset of the axes. Raises
    ``UnsupportedError`` naming the first collective no layout fits."""
    n = num_partitions
    grouped = [i for c in module.computations for i in c.instructions
               if i.opcode in COLLECTIVE_OPCODES and i.opcode != "collective-permute"]
    factors = _prime_factors(n) or [1]
    tried = []
    for shape in dict.fromkeys(itertools.permutations(factors)):
        subsets = [s for r in range(len(shape) + 1) for s in itertools.combinations(range(len(shape)), r)]
        found, bad = {}, None
        for instr in grouped:
            groups = tuple(tuple(g) for g in instr.attrs.get("replica_groups", ()))
            want = {tuple(range(n))} if not groups or groups == ((),) else set(groups)
            match = next((s for s in subsets if _groups_along(shape, s) == want), None)
            if match is None:
                bad = instr
                break
            found[instr] = match
        if bad is None:
            return tuple(shape), found
        tried.append(bad)
    instr = tried[0]
    from minixla.hlo.collectives import format_groups
    raise UnsupportedError(
        f"run_shard_map: the replica_groups={format_groups(instr.attrs['replica_groups'])} of "
        f"{instr.opcode} %{instr.name} are not the devices along sub-axes of a row-major mesh of "
        f"{n} devices (with the program's other collectives), so no jax.lax collective names them; "
        f"minixla.backends.spmd.run_llvm runs any groups")


class ShardMapExecutable:
    """A per-device module compiled by XLA under ``jax.shard_map`` over ``num_partitions``
    JAX devices. ``exe(per_device_args)`` -> per-device lists of outputs, as ``run_llvm``."""

    def __init__(self, module, mesh):
        entry = module.entry
        devices = list(mesh.devices.flat) if isinstance(mesh, Mesh) else _devices(int(mesh))
        self.num_partitions = n = len(devices)
        shape, found = mesh_layout(module, n)
        names = tuple(f"a{k}" for k in range(len(shape)))
        self.mesh = Mesh(np.array(devices).reshape(shape), names)
        axes = {instr: tuple(names[a] for a in subset) for instr, subset in found.items()}
        self.module = module
        self.n_outputs = len(entry.root.operands) if entry.root.opcode == "tuple" else 1
        params = entry.parameters
        hidden = jax_xla._hidden_arguments(module)
        self._hidden = [v for _, v in hidden]

        def body(*args):
            local = [a.reshape(p.shape.dims) for a, p in zip(args, params)]  # drop the device axis
            _context.axes = (axes, names)
            jax_xla._hidden.values = {key: a for (key, _), a in zip(hidden, args[len(params):])}
            try:
                out = evaluate_computation(entry, local)
            finally:
                _context.axes = None
                jax_xla._hidden.values = None
            outs = list(out) if entry.root.opcode == "tuple" else [out]
            return tuple(jnp.asarray(o)[None] for o in outs)
        sharded = P(names)
        in_specs = tuple([sharded] * len(params) + [P()] * len(hidden))
        out_specs = tuple([sharded] * self.n_outputs)
        fn = jax.shard_map(body, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
        specs = [jax.ShapeDtypeStruct((n, *p.shape.dims), p.shape.dtype) for p in params]
        specs += [jax.ShapeDtypeStruct(np.shape(v), np.asarray(v).dtype) for v in self._hidden]
        # (the hand-off's XLA options; the barriers of OP_BARRIERS come with evaluate_computation)
        self._fn = jax.jit(fn).lower(*specs).compile(jax_xla.COMPILER_OPTIONS)
        self._params = params

    def __call__(self, per_device_args):
        n = self.num_partitions
        per_device_args = list(per_device_args)
        if len(per_device_args) != n:
            raise TypeError(f"expected the arguments of {n} devices, got {len(per_device_args)}")
        stacked = []
        for k, p in enumerate(self._params):
            xs = [np.asarray(per_device_args[d][k]) for d in range(n)]
            for d, x in enumerate(xs):
                if x.shape != p.shape.dims or x.dtype != p.shape.dtype:
                    raise TypeError(f"device {d}: argument {k}: expected {np.dtype(p.shape.dtype)}"
                                    f"{list(p.shape.dims)}, got {x.dtype}{list(x.shape)}")
            stacked.append(np.stack(xs))
        outs = [np.asarray(o) for o in self._fn(*stacked, *self._hidden)]
        return [[o[d] for o in outs] for d in range(n)]


def _devices(n: int) -> list:
    devices = jax.devices()
    if n < 1 or n > len(devices):
        raise ValueError(f"run_shard_map: a mesh of {n} devices, but JAX has {len(devices)} "
                         f"({devices[0].platform}); on CPU, set XLA_FLAGS="
                         f"--xla_force_host_platform_device_count={max(n, 1)} before importing jax")
    return devices[:n]


def compile_shard_map(module, mesh) -> ShardMapExecutable:
    """Compile per-device ``module`` under ``jax.shard_map``; ``mesh``: a ``jax.sharding.Mesh``
    (its devices, in order, are the partitions) or a number of devices (the first of
    ``jax.devices()``)."""
    return ShardMapExecutable(module, mesh)


def run_shard_map(module, mesh, per_device_args) -> list:
    """Run per-device ``module`` once under ``jax.shard_map`` (see ``compile_shard_map``):
    ``per_device_args[d]`` are partition ``d``'s arguments; returns, per partition, its outputs."""
    return compile_shard_map(module, mesh)(per_device_args)


def shard_map_executor(module, num_partitions: int):
    """An executor for ``minixla.sharding.spmd_jit`` running under ``jax.shard_map`` on the
    first ``num_partitions`` JAX devices (root values per device, as ``llvm_executor``)."""
    exe = compile_shard_map(module, num_partitions)
    tuple_root = module.entry.root.opcode == "tuple"
    return lambda per_device: [tuple(outs) if tuple_root else outs[0] for outs in exe(per_device)]
