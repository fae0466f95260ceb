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


def _spec(x, mesh_axes, where):
    """A ``PartitionSpec`` (or ``HloSharding``/``None``) from a jit sharding; a
    ``NamedSharding``'s mesh must be the jit's ``mesh``."""
    from jax.sharding import NamedSharding
    if isinstance(x, NamedSharding):
        from minixla.sharding.api import mesh_axes as axes_of
        if axes_of(x.mesh) != mesh_axes:
            raise ShardingError(f"{where}: NamedSharding over the mesh {axes_of(x.mesh)}, but the "
                                f"jit's mesh= is {mesh_axes}")
        return x.spec
    return x


def mesh_axes_of(mesh) -> dict:
    """``{axis name: size}`` of a ``jax.sharding.Mesh`` (or of such a dict); every size >= 1."""
    if isinstance(mesh, dict):
        axes = {str(k): int(v) for k, v in mesh.items()}
    elif hasattr(mesh, "shape") and hasattr(mesh, "axis_names"):
        axes = {name: int(mesh.shape[name]) for name in mesh.axis_names}
    else:
        raise ShardingError(f"mesh must be a jax.sharding.Mesh or a {{axis: size}} dict, got {mesh!r}")
    bad = {k: v for k, v in axes.items() if v < 1}
    if bad:
        raise ShardingError(f"mesh axes must have at least one device, got {bad}")
    return axes


def _arg_names(fun, n) -> list:
    import inspect
    try:
        names = [p.name for p in inspect.signature(fun).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"args[{i}]" for i in range(n)]


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
        per-device HLO. Shardings are ``jax.jit``'s trees: one sharding for everything, or a
        tree prefix of the positional arguments (of the output); errors name the argument's
        pytree path and the caller's line."""
        from minixla.core import errors
        from minixla.jit import jit
        from minixla.sharding.api import flatten_out_shardings, flatten_shardings
        try:
            lowered = jit(self.fun).lower(*args)
            pairs = flatten_shardings(self.in_shardings, args, _arg_names(self.fun, len(args)))
            names = [name for name, _ in pairs]
            specs = [_spec(s, self.mesh_axes, f"in_shardings for {name}") for name, s in pairs]
            out_specs = out_names = None
            if self.out_shardings is not None:
                outs = tree_util.tree_unflatten(lowered.out_tree, [0] * lowered.out_tree.num_leaves)
                out_pairs = flatten_out_shardings(self.out_shardings, outs)
                out_names = [name for name, _ in out_pairs]
                flat = [_spec(s, self.mesh_axes, f"out_shardings for {name}") for name, s in out_pairs]
                out_specs = flat if len(flat) > 1 else flat[0]
            module = partition(lowered.hlo_module, self.mesh_axes, specs, out_specs,
                               in_names=names, out_names=out_names)
        except ShardingError as e:
            raise ShardingError(f"{e.args[0]}\n  at: {errors.user_source_line()}") from None
        from minixla.jit import _weak_outputs
        compiled = SpmdCompiled(module, lowered.in_tree, lowered.out_tree, self.executor)
        compiled.weak_outs = _weak_outputs(lowered.jaxpr)  # (returned weakly typed, as jax.jit's)
        return compiled

    def __call__(self, *args, **kwargs):
        from minixla.core import errors
        from minixla.core.tracing import Tracer
        if kwargs:
            raise ShardingError(f"jit(spmd_partitioner='minixla'): pass the arguments "
                                f"positionally (got keyword arguments {sorted(kwargs)}), as "
                                f"jax.jit requires with in_shardings\n  at: {errors.user_source_line()}")
        leaves = tree_util.tree_leaves(args)
        if any(isinstance(x, Tracer) for x in leaves):
            raise errors.UnsupportedError(
                "a jit(spmd_partitioner='minixla') function cannot be traced by an outer "
                "transformation (grad, vmap, jit); put the transformation inside: "
                "jit(grad(f), spmd_partitioner='minixla', ...)\n"
                f"  at: {errors.user_source_line()}")
        flat = [np.asarray(x) for x in leaves]
        # (a weak input -- a Python scalar, a WeakArray -- traces to other output types: its own key)
        key = (tree_util.tree_structure(args), tuple((x.shape, x.dtype, _is_weak(leaf))
                                                     for x, leaf in zip(flat, leaves)))
        if key not in self._cache:
            self._cache[key] = self.lower(*args)
        return self._cache[key](*args)


def _is_weak(x) -> bool:
    """Whether the argument leaf ``x`` is weakly typed (its aval's ``weak_type``)."""
    from minixla.core.avals import get_aval
    try:
        return get_aval(x).weak_type
    except (TypeError, ValueError):  # (not an array: lower() raises naming it)
        return False


class SpmdCompiled:
    """The per-device module (``.hlo_module``, ``.as_text()``) and how to run it."""

    #: positions of the flat outputs returned weakly typed (their out avals are weak)
    weak_outs: tuple = ()

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
        if self.weak_outs:
            from minixla.jit import _mark_weak
            flat_out = _mark_weak(flat_out, self.weak_outs)
        return tree_util.tree_unflatten(self.out_tree, flat_out)
