"""``partition``: minixla's own SPMD partitioner, end to end -- the educational entry point.

::

    import minixla.numpy as jnp
    from jax.sharding import PartitionSpec as P
    from minixla.sharding import partition, evaluate_partitioned

    def mlp(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2
    m = partition(mlp, {"model": 2}, in_specs=(P(), P(None, "model"), P("model", None)),
                  out_specs=P(), args=(x, w1, w2))
    print(m)          # the per-device program: a dot, tanh, a partial dot, one all-reduce
    evaluate_partitioned(m, x, w1, w2)   # run it on 2 virtual devices: == mlp(x, w1, w2)

The steps are XLA's: lower to HLO, annotate the parameters (``in_specs``) and the root
(``out_specs``) with ``HloSharding``s, run ``ShardingPropagation`` (every instruction gets a
sharding), then ``SpmdPartitioner`` (one per-device program with collectives), then the
verifier.
"""
from __future__ import annotations

import math

import numpy as np

from minixla.hlo.ir import HloInstruction, HloModule
from minixla.sharding.hlo_sharding import HloSharding, ShardingError


def _to_sharding(spec, mesh_axes, ndim, what):
    if isinstance(spec, HloSharding):
        return spec
    try:
        return HloSharding.from_partition_spec(spec, mesh_axes, ndim)
    except ShardingError as e:
        raise ShardingError(f"{what}: {e}") from None


def _lowered(f_or_module, args) -> HloModule:
    if isinstance(f_or_module, HloModule):
        return f_or_module.clone()
    if args is None:
        raise TypeError("partition: a function needs example args= (arrays or "
                        "jax.ShapeDtypeStruct) to be lowered")
    from minixla.jit import jit
    args = [a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a) for a in args]
    return jit(f_or_module).lower(*args).hlo_module.clone()


def propagate(f_or_module, mesh_axes: dict, in_specs, out_specs=None, *, args=None,
              in_names=None, out_names=None) -> HloModule:
    """The module with every entry instruction annotated (``attrs["sharding"]``): the
    parameters from ``in_specs``, the root from ``out_specs`` (``None``: left to propagation),
    everything else by ``ShardingPropagation``. Arguments as ``partition``; ``in_names`` /
    ``out_names`` (one per flattened argument / output) name them in error messages."""
    from minixla.passes.sharding_propagation import ShardingPropagation
    module = _lowered(f_or_module, args)
    n = math.prod(mesh_axes.values()) if mesh_axes else 1
    params = module.entry.parameters
    in_specs = list(in_specs)
    if len(in_specs) != len(params):
        raise ShardingError(f"partition: {len(in_specs)} in_specs for {len(params)} arguments "
                            "(one PartitionSpec per flattened argument)")
    for k, (p, spec) in enumerate(zip(params, in_specs)):
        where = (f"in_shardings for {in_names[k]} ({p.shape})" if in_names
                 else f"in_specs[{k}] (argument {k}, {p.shape})")
        p.attrs["sharding"] = _to_sharding(spec, mesh_axes, p.shape.rank, where)
    comp = module.entry
    root = comp.root
    if out_specs is not None:
        outs = list(root.operands) if root.opcode == "tuple" else [root]
        specs = list(out_specs) if root.opcode == "tuple" else [out_specs]
        if len(specs) != len(outs):
            raise ShardingError(f"partition: {len(specs)} out_specs for {len(outs)} outputs")
        for k, (o, spec) in enumerate(zip(outs, specs)):
            where = (f"out_shardings for {out_names[k]} ({o.shape})" if out_names
                     else f"out_specs[{k}] ({o.shape})")
            s = _to_sharding(spec, mesh_axes, o.shape.rank, where)
            if "sharding" in o.attrs and o.attrs["sharding"] != s:
                # an output that is also an argument (or another output) with another
                # sharding: a copy carries the output's, the partitioner reshards into it
                c = comp.add_instruction(HloInstruction("copy", o.shape, [o]))
                if root.opcode == "tuple":
                    root.operands[k] = c
                else:
                    comp.root = c
                o = c
            o.attrs["sharding"] = s
        comp.sort_topologically()
    ShardingPropagation(n).run(module)
    return module


def partition(f_or_module, mesh_axes: dict, in_specs, out_specs=None, *, args=None,
              in_names=None, out_names=None) -> HloModule:
    """Partition a program for a mesh with minixla's own SPMD partitioner (GSPMD's steps).

    Args:
      f_or_module: a Python function of arrays (traced with ``minixla.jit(f).lower(*args)``)
        or an ``HloModule``.
      mesh_axes: the mesh as an ordered ``{axis name: size}`` (device ``i`` is the ``i``-th in
        row-major order, as ``jax.sharding.Mesh(devices.reshape(sizes), names)``).
      in_specs: one ``jax.sharding.PartitionSpec`` (or tuple, ``None`` = replicated, or
        ``HloSharding``) per flattened argument.
      out_specs: the output's spec (a sequence for several outputs), or ``None`` to let
        propagation choose.
      args: example arguments (arrays or ``jax.ShapeDtypeStruct``) when ``f_or_module`` is a
        function.
    Returns:
      The per-device ``HloModule``: parameters of the local shard shapes (each with its
      ``sharding`` attribute), collectives (``all-reduce``, ``all-gather``, ``all-to-all``),
      ``partition-id`` lookups; ``module.num_partitions`` devices. Run it with
      ``evaluate_partitioned`` (virtual devices in the HLO evaluator) or an SPMD executor.
    Raises:
      ShardingError: a spec naming an unknown mesh axis, too long for its argument, or a
        wrong number of specs (the message names the argument).
    """
    from minixla.hlo.verifier import verify
    from minixla.passes.spmd_partitioner import SpmdPartitioner
    module = propagate(f_or_module, mesh_axes, in_specs, out_specs, args=args, in_names=in_names,
                       out_names=out_names)
    n = math.prod(mesh_axes.values()) if mesh_axes else 1
    SpmdPartitioner(n).run(module)
    module.entry.remove_dead()
    verify(module)
    return module


def shard(x, sharding: HloSharding, n: int) -> list:
    """The local shards of array ``x`` under ``sharding`` on ``n`` devices (uneven tiles
    padded with zeros up to the tile shape)."""
    x = np.asarray(x)
    if not sharding.is_tiled:
        return [x] * n
    tiles = sharding.num_tiles
    c = sharding.tile_shape(x.shape)
    x = np.pad(x, [(0, t * ci - d) for t, ci, d in zip(tiles, c, x.shape)])
    out = []
    for d in range(n):
        idx = sharding.tile_index(d)
        out.append(x[tuple(slice(i * ci, (i + 1) * ci) for i, ci in zip(idx, c))])
    return out


def unshard(values, sharding: HloSharding, shape) -> np.ndarray:
    """The global array of ``shape`` from the per-device ``values`` under ``sharding``."""
    if not sharding.is_tiled:
        return np.asarray(values[0])
    dims = shape.dims
    c = sharding.tile_shape(dims)
    tiles = sharding.num_tiles
    out = np.zeros([t * ci for t, ci in zip(tiles, c)], shape.dtype)
    for d, v in enumerate(values):
        idx = sharding.tile_index(d)
        out[tuple(slice(i * ci, (i + 1) * ci) for i, ci in zip(idx, c))] = v
    return out[tuple(slice(0, d) for d in dims)]


def evaluate_partitioned(module: HloModule, *args):
    """Run a partitioned module on ``module.num_partitions`` virtual devices of the HLO
    evaluator (``evaluate_spmd``) from global arguments; returns the global result (a tuple
    for a tuple root), assembled from the devices' shards."""
    from minixla.hlo.evaluator import evaluate_spmd
    n = getattr(module, "num_partitions", 1)
    params = module.entry.parameters
    if len(args) != len(params):
        raise TypeError(f"evaluate_partitioned: {len(params)} arguments expected, got {len(args)}")
    per_param = [shard(np.asarray(a, p.shape.dtype), p.attrs["sharding"], n) for a, p in zip(args, params)]
    outs = evaluate_spmd(module, [[s[d] for s in per_param] for d in range(n)], n)
    root_shape = module.spmd_global_shapes[1]
    S = module.entry.root.attrs["sharding"]
    if root_shape.is_tuple:
        elems = S.elements if S.kind == "tuple" else [S] * len(root_shape.tuple_shapes)
        return tuple(unshard([o[k] for o in outs], e, sh)
                     for k, (e, sh) in enumerate(zip(elems, root_shape.tuple_shapes)))
    return unshard(outs, S, root_shape)
