"""``minixla.jit(f, in_shardings=..., out_shardings=..., mesh=..., spmd_partitioner="minixla")``:
trace and lower as ``jit`` does, then partition with minixla's own SPMD partitioner
(``minixla.sharding.partition``) and run the per-device program on the mesh's devices.

The executor is pluggable: ``executor(module, num_partitions)`` returns a function from the
per-device argument lists to the per-device results. ``backend="llvm"`` (the default) runs the
per-device program on a mesh of virtual LLVM devices in this process
(``minixla.backends.spmd.llvm_executor``: a thread and an arena per device, collectives in
generated code); ``backend="jax"`` under ``jax.shard_map`` on real JAX devices
(``shard_map_executor``); ``evaluator_executor`` runs it in the HLO evaluator
(``evaluate_spmd``, the collectives' reference semantics).
"""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla.sharding.hlo_sharding import HloSharding, ShardingError
from minixla.sharding.partition import partition, shard, unshard


def _is_spec(x) -> bool:
    from jax.sharding import NamedSharding, PartitionSpec
    return x is None or isinstance(x, (PartitionSpec, NamedSharding, HloSharding))


def _spec(x):
    from jax.sharding import NamedSharding
    return x.spec if isinstance(x, NamedSharding) else x


def mesh_axes_of(mesh) -> dict:
    """``{axis name: size}`` of a ``jax.sharding.Mesh`` (or of such a dict)."""
    if isinstance(mesh, dict):
        return dict(mesh)
    if hasattr(mesh, "shape") and hasattr(mesh, "axis_names"):
        return {name: int(mesh.shape[name]) for name in mesh.axis_names}
    raise ShardingError(f"mesh must be a jax.sharding.Mesh or a {{axis: size}} dict, got {mesh!r}")


def flat_specs(shardings, args, what: str) -> list:
    """One spec per flattened leaf of ``args`` from ``shardings``: a single spec for all, or
    one per argument (a spec for all of an argument's leaves, or a tree matching it)."""
    if _is_spec(shardings):
        return [_spec(shardings)] * len(tree_util.tree_leaves(args))
    shardings = tuple(shardings)
    if len(shardings) != len(args):
        raise ShardingError(f"{what} has {len(shardings)} entries for {len(args)} arguments: "
                            "give one sharding per positional argument")
    out = []
    for k, (s, a) in enumerate(zip(shardings, args)):
        leaves = tree_util.tree_leaves(a)
        if _is_spec(s):
            out += [_spec(s)] * len(leaves)
            continue
        specs, tree = tree_util.tree_flatten(s, is_leaf=_is_spec)
        if tree != tree_util.tree_structure(a):
            raise ShardingError(f"{what}[{k}] has the tree {tree} but argument {k} is "
                                f"{tree_util.tree_structure(a)}")
        out += [_spec(x) for x in specs]
    return out


def evaluator_executor(module, n):
    from minixla.hlo.evaluator import evaluate_spmd
    return lambda per_device: evaluate_spmd(module, per_device, n)


class SpmdJitted:
    """A function compiled for a mesh with minixla's partitioner (see ``minixla.jit``)."""

    def __init__(self, fun, mesh, in_shardings, out_shardings, executor=None, backend="llvm"):
        self.fun = fun
        self.mesh_axes = mesh_axes_of(mesh)
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        if executor is None:
            from minixla.backends import spmd
            executors = {"llvm": spmd.llvm_executor, "evaluator": evaluator_executor}
            if backend == "jax":
                executors["jax"] = spmd.shard_map_executor
            if backend not in executors:
                raise ValueError(f"spmd_partitioner='minixla' runs on backend 'llvm', 'jax' or "
                                 f"'evaluator', got {backend!r}")
            executor = executors[backend]
        self.executor = executor
        self._cache: dict = {}

    def lower(self, *args) -> "SpmdCompiled":
        """Trace, lower, propagate and partition for ``args``; ``.as_text()`` is the
        per-device HLO."""
        from minixla.jit import jit
        lowered = jit(self.fun).lower(*args)
        specs = flat_specs(self.in_shardings, args, "in_shardings")
        out_specs = None
        if self.out_shardings is not None:
            outs = lowered.out_tree
            if _is_spec(self.out_shardings):
                out_specs = ([_spec(self.out_shardings)] * outs.num_leaves if outs.num_leaves > 1
                             else _spec(self.out_shardings))
            else:
                leaves, tree = tree_util.tree_flatten(self.out_shardings, is_leaf=_is_spec)
                if tree.num_leaves != outs.num_leaves:
                    raise ShardingError(f"out_shardings has {tree.num_leaves} shardings for "
                                        f"{outs.num_leaves} outputs")
                out_specs = [_spec(x) for x in leaves] if len(leaves) > 1 else _spec(leaves[0])
        module = partition(lowered.hlo_module, self.mesh_axes, specs, out_specs)
        return SpmdCompiled(module, lowered.in_tree, lowered.out_tree, self.executor)

    def __call__(self, *args):
        flat = [np.asarray(x) for x in tree_util.tree_leaves(args)]
        key = (tree_util.tree_structure(args), tuple((x.shape, x.dtype) for x in flat))
        if key not in self._cache:
            self._cache[key] = self.lower(*args)
        return self._cache[key](*args)


class SpmdCompiled:
    """The per-device module (``.hlo_module``, ``.as_text()``) and how to run it."""

    def __init__(self, module, in_tree, out_tree, executor):
        self.hlo_module, self.in_tree, self.out_tree = module, in_tree, out_tree
        self.num_partitions = getattr(module, "num_partitions", 1)
        self.run = executor(module, self.num_partitions)

    def as_text(self) -> str:
        return self.hlo_module.to_string()

    def compile(self) -> "SpmdCompiled":
        return self

    def __call__(self, *args):
        flat, tree = tree_util.tree_flatten((args, {}))
        if tree != self.in_tree:
            raise TypeError(f"compiled for argument structure {self.in_tree}, got {tree}")
        n, params = self.num_partitions, self.hlo_module.entry.parameters
        shards = [shard(np.asarray(a, p.shape.dtype), p.attrs["sharding"], n) for a, p in zip(flat, params)]
        outs = self.run([[s[d] for s in shards] for d in range(n)])
        root_shape = self.hlo_module.spmd_global_shapes[1]
        S = self.hlo_module.entry.root.attrs["sharding"]
        if root_shape.is_tuple:
            elems = S.elements if S.kind == "tuple" else [S] * len(root_shape.tuple_shapes)
            flat_out = [unshard([o[k] for o in outs], e, sh)
                        for k, (e, sh) in enumerate(zip(elems, root_shape.tuple_shapes))]
        else:
            flat_out = [unshard(outs, S, root_shape)]
        return tree_util.tree_unflatten(self.out_tree, flat_out)
