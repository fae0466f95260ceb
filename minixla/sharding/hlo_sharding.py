"""``HloSharding``: how one array is laid out over the devices of a mesh (XLA's
``xla/hlo/ir/hlo_sharding.h``), printed and parsed as XLA writes it.

An array of rank ``r`` is either

* ``{replicated}``: every device holds all of it;
* ``{maximal device=d}``: device ``d`` alone holds it;
* tiled, ``{devices=[t0,...,t(r-1)]d0,d1,...}``: dimension ``i`` is cut into ``t_i`` equal
  tiles, and the *tile assignment* (an array of device ids of shape ``[t0,...]``, written
  row-major) says which device holds which tile. With ``last_tile_dim_replicate`` the tile
  assignment has one more dimension whose devices hold the *same* tile (partial replication):
  ``{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}`` splits dim 0 in two, each half held by two
  devices.

Newer XLA prints tile assignments in the compact "iota" form, ``devices=[2,2]<=[4]`` or
``devices=[2,2]<=[2,2]T(1,0)`` (iota over the reshape dims, then transposed); ``parse`` reads
both, ``str`` writes the explicit list. A tuple-shaped instruction has a tuple sharding,
``{{replicated}, {devices=[2]0,1}}``.

``from_partition_spec`` turns JAX's ``PartitionSpec`` over a named mesh into the tiled form,
the way ``jax.sharding.NamedSharding`` becomes an ``OpSharding`` for XLA.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from minixla.core.errors import MinixlaError


class ShardingError(MinixlaError, ValueError):
    """A sharding that does not fit its array or mesh (an unknown mesh axis, a tile count
    that does not match the rank, ...). Mirrors the ``ValueError`` JAX raises."""


@dataclass(frozen=True)
class HloSharding:
    """One array's sharding.

    Attributes:
      kind: ``"replicated"``, ``"maximal"``, ``"tiled"`` or ``"tuple"``.
      tile_dims: for ``tiled``, the number of tiles per array dimension, plus the replication
        count as a last entry when ``last_tile_dim_replicate``.
      devices: for ``tiled``, the tile assignment's device ids in row-major order; for
        ``maximal``, ``(device,)``.
      last_tile_dim_replicate: the last entry of ``tile_dims`` replicates instead of tiling.
      elements: for ``tuple``, one ``HloSharding`` per tuple element.
    """
    kind: str
    tile_dims: tuple = ()
    devices: tuple = ()
    last_tile_dim_replicate: bool = False
    elements: tuple = ()

    # ---- constructors ------------------------------------------------------------------
    @staticmethod
    def replicate() -> "HloSharding":
        return HloSharding("replicated")

    @staticmethod
    def maximal(device: int) -> "HloSharding":
        return HloSharding("maximal", devices=(int(device),))

    @staticmethod
    def tile(tile_assignment, last_tile_dim_replicate: bool = False) -> "HloSharding":
        """A tiled sharding from an integer array of device ids (shape = tiles per dim, plus
        the replication group as a last dim when ``last_tile_dim_replicate``). A tiling into
        one tile on every dim is ``replicated``, as XLA canonicalizes it."""
        ta = np.asarray(tile_assignment, dtype=np.int64)
        if ta.ndim == 0:
            raise ShardingError("a tile assignment needs at least one dimension")
        if sorted(ta.ravel().tolist()) != sorted(set(ta.ravel().tolist())):
            raise ShardingError(f"tile assignment {ta.ravel().tolist()} repeats a device")
        tiled = ta.shape[:-1] if last_tile_dim_replicate else ta.shape
        if all(t == 1 for t in tiled):
            return HloSharding.replicate()
        if last_tile_dim_replicate and ta.shape[-1] == 1:
            ta, last_tile_dim_replicate = ta.reshape(ta.shape[:-1]), False
        return HloSharding("tiled", tuple(int(t) for t in ta.shape),
                           tuple(int(d) for d in ta.ravel()), bool(last_tile_dim_replicate))

    @staticmethod
    def tuple_of(elements) -> "HloSharding":
        return HloSharding("tuple", elements=tuple(elements))

    @staticmethod
    def from_partition_spec(spec, mesh_axes: dict, ndim: int) -> "HloSharding":
        """The sharding of a rank-``ndim`` array under ``PartitionSpec`` ``spec`` over a mesh
        whose axes are ``mesh_axes`` (an ordered ``{name: size}``; device ``i`` of the mesh is
        the ``i``-th in row-major order of the mesh shape, as ``mesh.devices.flat``).

        Each spec entry is ``None``, an axis name or a tuple of names (major to minor); mesh
        axes the spec does not name replicate (``last_tile_dim_replicate``). Raises
        ``ShardingError`` for an unknown axis, an axis used twice, or a spec longer than ``ndim``.
        """
        names = list(mesh_axes)
        entries = list(spec) if spec is not None else []
        if len(entries) > ndim:
            raise ShardingError(f"PartitionSpec {tuple(entries)} has {len(entries)} entries "
                                f"for an array of rank {ndim}")
        entries += [None] * (ndim - len(entries))
        per_dim, used = [], []
        for e in entries:
            axes = () if e is None else ((e,) if isinstance(e, str) else tuple(e))
            for a in axes:
                if a not in mesh_axes:
                    raise ShardingError(f"PartitionSpec {tuple(entries)} names mesh axis {a!r}, "
                                        f"which is not in the mesh axes {tuple(names)}")
                if a in used:
                    raise ShardingError(f"PartitionSpec {tuple(entries)} uses mesh axis {a!r} "
                                        "more than once")
                used.append(a)
            per_dim.append(axes)
        ids = np.arange(math.prod(mesh_axes.values()), dtype=np.int64).reshape(
            [mesh_axes[n] for n in names] or [1])
        rest = [n for n in names if n not in used]
        # Order the mesh axes as the tile assignment wants them: dim 0's axes first, ...,
        # then the unused (replicated) axes last.
        order = [names.index(a) for axes in per_dim for a in axes] + [names.index(a) for a in rest]
        ta = ids.transpose(order) if names else ids
        tiles = [math.prod(mesh_axes[a] for a in axes) for axes in per_dim]
        rep = math.prod(mesh_axes[a] for a in rest)
        return HloSharding.tile(ta.reshape(tiles + [rep]), last_tile_dim_replicate=True)

    # ---- queries ----------------------------------------------------------------------
    @property
    def is_replicated(self) -> bool:
        return self.kind == "replicated"

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    @property
    def tile_assignment(self) -> np.ndarray:
        """The device ids as an array of shape ``tile_dims``."""
        return np.asarray(self.devices, dtype=np.int64).reshape(self.tile_dims)

    @property
    def num_tiles(self) -> tuple:
        """Tiles per array dimension (the replication dim excluded)."""
        return self.tile_dims[:-1] if self.last_tile_dim_replicate else self.tile_dims

    def tile_shape(self, dims) -> tuple:
        """The per-device shape of an array of shape ``dims`` (ceil division: XLA pads an
        uneven last tile)."""
        if not self.is_tiled:
            return tuple(dims)
        if len(self.num_tiles) != len(dims):
            raise ShardingError(f"sharding {self} has {len(self.num_tiles)} tiled dims for "
                                f"an array of rank {len(dims)}")
        return tuple(-(-d // t) for d, t in zip(dims, self.num_tiles))

    def tile_index(self, device: int) -> tuple:
        """Which tile (one index per array dim) ``device`` holds."""
        if not self.is_tiled:
            return ()
        pos = np.argwhere(self.tile_assignment == device)
        if not len(pos):
            raise ShardingError(f"device {device} is not in sharding {self}")
        idx = tuple(int(i) for i in pos[0])
        return idx[:-1] if self.last_tile_dim_replicate else idx

    # ---- text -------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.kind == "replicated":
            return "{replicated}"
        if self.kind == "maximal":
            return f"{{maximal device={self.devices[0]}}}"
        if self.kind == "tuple":
            return "{" + ", ".join(str(e) for e in self.elements) + "}"
        text = "{devices=[" + ",".join(map(str, self.tile_dims)) + "]" + ",".join(map(str, self.devices))
        return text + (" last_tile_dim_replicate}" if self.last_tile_dim_replicate else "}")

    @staticmethod
    def parse(text: str) -> "HloSharding":
        """Read XLA's sharding text (``{replicated}``, ``{maximal device=0}``,
        ``{devices=[2,1]0,1}``, ``{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}``,
        tuples). Raises ``ShardingError`` for anything else."""
        t = text.strip()
        if not (t.startswith("{") and t.endswith("}")):
            raise ShardingError(f"sharding must be written in braces: {text!r}")
        inner = t[1:-1].strip()
        if inner.startswith("{") or inner == "":
            return HloSharding.tuple_of(HloSharding.parse(p) for p in _split_braces(inner))
        if inner == "replicated":
            return HloSharding.replicate()
        m = re.fullmatch(r"maximal device=(\d+)", inner)
        if m:
            return HloSharding.maximal(int(m.group(1)))
        m = re.fullmatch(r"devices=\[([\d,]+)\]\s*(.*?)\s*(last_tile_dim_replicate)?", inner)
        if not m:
            raise ShardingError(f"cannot read sharding {text!r}")
        dims = [int(d) for d in m.group(1).split(",")]
        body = m.group(2)
        iota = re.fullmatch(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?", body)
        if iota:
            reshape = [int(d) for d in iota.group(1).split(",")]
            ids = np.arange(math.prod(reshape)).reshape(reshape)
            if iota.group(2):
                ids = ids.transpose([int(p) for p in iota.group(2).split(",")])
        else:
            ids = np.array([int(d) for d in body.split(",")])
        if ids.size != math.prod(dims):
            raise ShardingError(f"sharding {text!r} lists {ids.size} devices for "
                                f"{math.prod(dims)} tiles")
        return HloSharding.tile(ids.reshape(dims), last_tile_dim_replicate=bool(m.group(3)))


def _split_braces(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts
