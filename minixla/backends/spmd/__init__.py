"""Running a partitioned (per-device) SPMD program: on a mesh of virtual LLVM devices in one
process (``virtual_mesh.py``, collectives in generated code: ``steps.py``), or on real JAX
devices under ``jax.shard_map`` (``shard_map.py``)."""
from minixla.backends.spmd.virtual_mesh import CollectiveError, SpmdExecutable, compile_llvm, run_llvm

__all__ = ["CollectiveError", "SpmdExecutable", "compile_llvm", "run_llvm", "run_shard_map"]


def __getattr__(name):
    if name == "run_shard_map":  # (imports jax only when asked for)
        from minixla.backends.spmd.shard_map import run_shard_map
        return run_shard_map
    raise AttributeError(name)
