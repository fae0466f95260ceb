"""Running a partitioned (per-device) SPMD program: on a mesh of virtual LLVM devices in one
process (``virtual_mesh.py``, collectives in generated code: ``steps.py``), or on real JAX
devices under ``jax.shard_map`` (``shard_map.py``)."""
from minixla.backends.spmd.virtual_mesh import (CollectiveError, SpmdExecutable, compile_llvm, llvm_executor,
                                                run_llvm)

__all__ = ["CollectiveError", "SpmdExecutable", "compile_llvm", "llvm_executor", "run_llvm", "run_shard_map",
           "compile_shard_map", "shard_map_executor"]


def __getattr__(name):
    if name in ("run_shard_map", "compile_shard_map", "shard_map_executor"):  # (imports jax when asked)
        from minixla.backends.spmd import shard_map
        return getattr(shard_map, name)
    raise AttributeError(name)
