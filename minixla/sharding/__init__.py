"""Sharding: how arrays are laid out over a mesh of devices, and the SPMD partitioner that
turns one program into a per-device program with collectives (XLA's GSPMD)."""
from minixla.sharding.hlo_sharding import HloSharding, ShardingError
from minixla.sharding.partition import evaluate_partitioned, partition, propagate, shard, unshard

__all__ = ["HloSharding", "ShardingError", "partition", "propagate", "evaluate_partitioned",
           "shard", "unshard"]
