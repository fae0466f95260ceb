"""Sharding: how arrays are laid out over a mesh of devices, and the SPMD partitioner that
turns one program into a per-device program with collectives (XLA's GSPMD)."""
from minixla.sharding.hlo_sharding import HloSharding, ShardingError

__all__ = ["HloSharding", "ShardingError"]
