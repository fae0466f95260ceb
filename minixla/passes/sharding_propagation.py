"""Sharding propagation (XLA's ``xla/service/sharding_propagation.cc``, simplified but real).

Some instructions carry a sharding (``instr.attrs["sharding"]``, an ``HloSharding``): the
parameters (from ``in_shardings``), ``custom-call`` ``Sharding`` constraints
(``with_sharding_constraint``) and the root (from ``out_shardings``). Those are *constraints*
and are never changed. The pass gives every other instruction of the entry computation a
sharding by walking the dataflow graph forward (from operands to users) and backward (from users
to operands) until nothing changes; whatever is left is ``{replicated}``.

The rules are **dimension maps**: for an instruction and its operand ``k``, which result dim
comes from which operand dim (``dim_map(instr, k)``). The forward rule moves the operand's tile
assignment onto the result along that map; the backward rule moves the result's onto the
operand along the inverse. A tiled dim with no partner on the other side is folded into the
replication group (``last_tile_dim_replicate``): its devices then hold the same data, e.g. a
``reduce`` over a sharded dim leaves a result replicated over those devices (once the
partitioner all-reduces the partial results). One rule serves both passes and the partitioner,
so they agree by construction.

| opcode | forward (operand -> result) | backward (result -> operand) |
|---|---|---|
| elementwise, ``convert``, ``copy``, Sharding custom-call | same sharding | same sharding |
| ``broadcast`` | operand dim ``i`` -> result dim ``dimensions[i]``; new dims untiled | broadcast dims' tiles fold into replication |
| ``transpose`` | permuted by ``dimensions`` | inverse permutation |
| ``reshape`` | a dim maps through when it starts at the same element offset on both sides (same product of the dims before it) and its tile count divides both sizes (or the sizes are equal); otherwise replicated | the same, inverted |
| ``reduce`` | kept dims keep their tiles; a reduced dim's tiles fold into replication (partial result, all-reduced by the partitioner) | kept dims from the result; reduced dims untiled |
| ``dot`` | batch and non-contracting dims of the operand -> result; contracting dim folds into replication | result's batch/own non-contracting dims -> operand; the other operand's dims fold into replication; contracting dim untiled |
| ``convolution`` | lhs batch -> out batch, rhs output feature -> out feature | the inverse |
| ``slice``, ``dynamic-slice`` | dims taken whole map through | dims taken whole map through |
| ``pad`` | dims without padding map through | the same |
| ``concatenate`` | every dim but the concatenated one | the same |
| ``reverse`` | dims not reversed | the same |
| ``tuple`` / ``get-tuple-element`` | tuple of the operands' shardings / the element's | element ``k`` / the element of the tuple |
| anything else (``iota``, ``gather``, ``sort``, ``while``, ...) | replicated | replicated |

Conflicts: the operands' forward candidates are *merged* when they tile different dims
consistently (a dot of a batch-sharded lhs and a column-sharded rhs is sharded on both dims,
XLA's ``MergeSharding``); otherwise each instruction takes the candidate with the most tiles
among its operands (forward) and users (backward), the first on a tie, as XLA prefers the
more-sharded operand; an
instruction's sharding is only replaced by one with strictly more tiles, so the pass terminates.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from minixla.passes.pipeline import HloPass
from minixla.sharding.hlo_sharding import HloSharding, ShardingError

#: opcodes whose result dims are the operands' dims, one to one.
_IDENTITY = {"convert", "copy", "bitcast-convert", "custom-call", "is-finite"}


def num_devices_of(sharding: HloSharding | None) -> int | None:
    if sharding is None or sharding.kind == "replicated":
        return None
    if sharding.kind == "tuple":
        ns = [num_devices_of(e) for e in sharding.elements]
        return next((n for n in ns if n), None)
    return len(sharding.devices)


def full_tile_assignment(s: HloSharding, rank: int, n: int) -> np.ndarray:
    """The tile assignment of ``s`` as an array of shape ``tiles per dim + [replication]``
    (``{replicated}`` is ``[1,...,1,n]``)."""
    if s.kind == "replicated":
        return np.arange(n, dtype=np.int64).reshape([1] * rank + [n])
    if s.kind != "tiled":
        raise ShardingError(f"sharding {s} is not an array sharding (maximal and tuple shardings "
                            "are not partitioned by minixla)")
    ta = s.tile_assignment
    if not s.last_tile_dim_replicate:
        ta = ta[..., None]
    if ta.ndim != rank + 1:
        raise ShardingError(f"sharding {s} does not fit an array of rank {rank}")
    return ta


def from_tile_assignment(ta: np.ndarray) -> HloSharding:
    return HloSharding.tile(ta, last_tile_dim_replicate=True)


def tile_count(s: HloSharding | None) -> int:
    """How many tiles ``s`` cuts an array into (-1 for no sharding yet); tuples add up."""
    if s is None:
        return -1
    if s.kind == "tuple":
        return sum(max(tile_count(e), 1) for e in s.elements)
    return math.prod(s.num_tiles) if s.is_tiled else 1


def remap(s: HloSharding, src_dims, dst_dims, dst_src, n: int) -> HloSharding:
    """Move sharding ``s`` of an array of shape ``src_dims`` onto one of shape ``dst_dims``:
    destination dim ``j`` takes the tiles of source dim ``dst_src[j]`` (``None``: untiled).
    A pair of dims of different sizes (a reshape) maps only when the tile count divides both;
    unmapped tiled source dims fold into the replication group."""
    ta = full_tile_assignment(s, len(src_dims), n)
    pairs = []
    for j, i in enumerate(dst_src):
        if i is None:
            continue
        t = ta.shape[i]
        a, b = src_dims[i], dst_dims[j]
        if a == b or (a % t == 0 and b % t == 0):
            pairs.append((j, i))
    mapped = {i for _, i in pairs}
    src_of = dict(pairs)
    order = [src_of[j] for j in range(len(dst_dims)) if j in src_of]
    dropped = [i for i in range(len(src_dims)) if i not in mapped]
    t = ta.transpose(order + dropped + [len(src_dims)])
    shape = [ta.shape[src_of[j]] if j in src_of else 1 for j in range(len(dst_dims))]
    shape.append(math.prod(ta.shape[i] for i in dropped) * ta.shape[-1])
    return from_tile_assignment(t.reshape(shape))


def device_tiles(s: HloSharding, rank: int, n: int) -> dict:
    """device -> its tile index (one entry per array dim)."""
    ta = full_tile_assignment(s, rank, n)
    return {int(ta[pos]): pos[:-1] for pos in np.ndindex(ta.shape)}


def sharding_from_tiles(tiles: dict, counts, n) -> HloSharding | None:
    """The sharding whose tile ``idx`` is held by the devices ``d`` with ``tiles[d] == idx``."""
    by: dict = {}
    for d in range(n):
        by.setdefault(tiles[d], []).append(d)
    reps = {len(v) for v in by.values()}
    if len(reps) != 1 or len(by) != math.prod(counts):
        return None
    rep = reps.pop()
    ta = np.zeros(list(counts) + [rep], np.int64)
    for idx, devs in by.items():
        ta[idx] = devs
    return from_tile_assignment(ta)


def merge(a: HloSharding, b: HloSharding, rank: int, n: int) -> HloSharding | None:
    """One sharding with the tiles of both ``a`` and ``b`` (XLA's ``MergeSharding``): each
    dim takes the tiling of whichever tiles it (both alike, or ``None``), when every device's
    merged tile index is consistent with its index in each; else ``None``."""
    ta, tb = full_tile_assignment(a, rank, n), full_tile_assignment(b, rank, n)
    ia, ib = device_tiles(a, rank, n), device_tiles(b, rank, n)
    counts = []
    for i in range(rank):
        x, y = ta.shape[i], tb.shape[i]
        if x > 1 and y > 1 and (x != y or any(ia[d][i] != ib[d][i] for d in range(n))):
            return None
        counts.append(max(x, y))
    tiles = {d: tuple(ia[d][i] if ta.shape[i] > 1 else ib[d][i] for i in range(rank)) for d in range(n)}
    return sharding_from_tiles(tiles, counts, n)


# ---- dimension maps -------------------------------------------------------------------

def _reshape_map(src, dst):
    """Result dim -> operand dim for dims starting at the same element offset."""
    def prefixes(dims):
        out, p = [], 1
        for d in dims:
            out.append(p)
            p *= d
        return out
    ps, pd = prefixes(src), prefixes(dst)
    out = []
    for j, pj in enumerate(pd):
        cands = [i for i, pi in enumerate(ps) if pi == pj and src[i] != 1]
        out.append(cands[0] if cands and dst[j] != 1 else None)
    return out


def _conv_labels(instr):
    from minixla.hlo.lowering import parse_dim_labels
    return parse_dim_labels(instr.attrs["dim_labels"])


#: opcode -> ``rule(instr, k)``, a dimension map tried before the built-in ones below (set it
#: with ``using_dim_map``): how a rule of one's own -- tutorial 13's exercise -- reaches the
#: propagation pass and the partitioner, which both read ``dim_map``.
DIM_MAP_RULES: dict = {}


@contextlib.contextmanager
def using_dim_map(opcode: str, rule):
    """Within the ``with`` block, ``rule(instr, k) -> list`` is the dimension map of
    ``opcode`` (``rule=None``: the built-in one); the previous rule is restored on exit, also
    after an error. Process-global, as ``minixla.interpreters.rules.using_rule``."""
    missing = object()
    old = DIM_MAP_RULES.get(opcode, missing)
    if rule is None:
        DIM_MAP_RULES.pop(opcode, None)
    else:
        DIM_MAP_RULES[opcode] = rule
    try:
        yield rule
    finally:
        if old is missing:
            DIM_MAP_RULES.pop(opcode, None)
        else:
            DIM_MAP_RULES[opcode] = old


def dim_map(instr, k: int):
    """For operand ``k`` of ``instr``: a list with, for each result dim, the operand dim it
    comes from (``None``: none, so the result dim cannot be tiled from this operand)."""
    rule = DIM_MAP_RULES.get(instr.opcode)
    if rule is not None:
        return list(rule(instr, k))
    op = instr.operands[k]
    rank, orank = instr.shape.rank, op.shape.rank
    none = [None] * rank
    code = instr.opcode
    if instr.is_elementwise() or code in _IDENTITY:
        return list(range(rank)) if orank == rank else none
    if code == "broadcast":
        dims = list(instr.attrs["dimensions"])
        return [dims.index(j) if j in dims else None for j in range(rank)]
    if code == "transpose":
        return list(instr.attrs["dimensions"])
    if code == "reshape":
        return _reshape_map(op.shape.dims, instr.shape.dims)
    if code == "reduce":
        if k >= len(instr.operands) // 2 or instr.shape.is_tuple:
            return none
        red = set(instr.attrs["dimensions"])
        return [i for i in range(orank) if i not in red]
    if code == "dot":
        at = instr.attrs
        lb, lc, rb, rc = (list(at[a]) for a in ("lhs_batch_dims", "lhs_contracting_dims",
                                                 "rhs_batch_dims", "rhs_contracting_dims"))
        lhs, rhs = instr.operands[0].shape.rank, instr.operands[1].shape.rank
        lfree = [i for i in range(lhs) if i not in lb and i not in lc]
        rfree = [i for i in range(rhs) if i not in rb and i not in rc]
        if k == 0:
            return lb + lfree + [None] * len(rfree)
        return rb + [None] * len(lfree) + rfree
    if code == "convolution":
        dn = _conv_labels(instr)
        out = list(none)
        if k == 0:
            out[dn.out_spec[0]] = dn.lhs_spec[0]
        elif instr.attrs.get("feature_group_count", 1) == 1:
            out[dn.out_spec[1]] = dn.rhs_spec[0]
        return out
    if code in ("slice", "dynamic-slice"):
        if k > 0:
            return none
        whole = [i for i in range(rank) if instr.shape.dims[i] == op.shape.dims[i]
                 and (code != "slice" or instr.attrs["slice"][i] == (0, op.shape.dims[i], 1))]
        return [i if i in whole else None for i in range(rank)]
    if code == "pad":
        if k > 0:
            return none
        return [i if tuple(c) == (0, 0, 0) else None for i, c in enumerate(instr.attrs["padding_config"])]
    if code == "concatenate":
        d = instr.attrs["dimensions"][0]
        return [i if i != d else None for i in range(rank)]
    if code == "reverse":
        rev = set(instr.attrs["dimensions"])
        return [i if i not in rev else None for i in range(rank)]
    if code == "dynamic-update-slice":
        if k > 1:
            return none
        return [i if instr.operands[1].shape.dims[i] == instr.shape.dims[i] else None
                for i in range(rank)]
    return none


def inverse_map(dmap, orank: int):
    inv = [None] * orank
    for j, i in enumerate(dmap):
        if i is not None:
            inv[i] = j
    return inv


def forward(instr, k: int, s: HloSharding, n: int) -> HloSharding:
    """The result sharding implied by operand ``k`` having sharding ``s``."""
    op = instr.operands[k]
    return remap(s, op.shape.dims, instr.shape.dims, dim_map(instr, k), n)


def backward(instr, k: int, s: HloSharding, n: int) -> HloSharding:
    """The sharding of operand ``k`` implied by the result having sharding ``s``."""
    op = instr.operands[k]
    inv = inverse_map(dim_map(instr, k), op.shape.rank)
    return remap(s, instr.shape.dims, op.shape.dims, inv, n)


def effective(instr, s: HloSharding, n: int) -> HloSharding:
    """``s`` restricted to the result dims the operands can carry: the sharding in which the
    partitioner computes ``instr`` locally (from operands resharded to ``backward`` of it)
    before resharding the result to ``s``."""
    if instr.opcode == "parameter":
        return s
    arrays = [k for k, o in enumerate(instr.operands) if not o.shape.is_tuple and o.shape.rank > 0]
    if instr.shape.is_tuple:
        return HloSharding.replicate()
    if not arrays:  # a broadcast scalar is the same on every device: any tiling is local
        return s if instr.opcode == "broadcast" else HloSharding.replicate()
    if instr.opcode in ("dot", "convolution"):  # each result dim comes from one operand
        m0, m1 = dim_map(instr, 0), dim_map(instr, 1)
        keep = [j if m0[j] is not None or m1[j] is not None else None for j in range(instr.shape.rank)]
        return remap(s, instr.shape.dims, instr.shape.dims, keep, n)
    for k in arrays:
        s = forward(instr, k, backward(instr, k, s, n), n)
    return s


# ---- the pass -------------------------------------------------------------------------

def _is_constraint(instr) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding"


class ShardingPropagation(HloPass):
    """Give every instruction of the entry computation a sharding (see the module docstring).

    ``num_devices`` is the mesh size; by default it is read from the shardings already there.
    Raises ``ShardingError`` when no instruction has a sharding and ``num_devices`` is not given
    or when a sharding does not fit its instruction's rank.
    """
    name = "sharding-propagation"

    def __init__(self, num_devices: int | None = None):
        self.num_devices = num_devices

    def run(self, module) -> bool:
        comp = module.entry
        instrs = comp.instructions
        fixed = {i for i in instrs if "sharding" in i.attrs}
        n = self.num_devices or next((num_devices_of(i.attrs["sharding"]) for i in fixed
                                      if num_devices_of(i.attrs["sharding"])), None) or 1
        for i in fixed:
            s = i.attrs["sharding"]
            if s.kind not in ("tuple", "maximal"):
                full_tile_assignment(s, i.shape.rank, n)  # check it fits
        cur = {i: i.attrs["sharding"] for i in fixed}
        users = comp.users()

        def candidate_forward(i):
            if i.opcode == "tuple":
                if any(o in cur for o in i.operands):
                    return HloSharding.tuple_of(cur.get(o, HloSharding.replicate()) for o in i.operands)
                return None
            if i.opcode == "get-tuple-element":
                s = cur.get(i.operands[0])
                if s is None:
                    return None
                return s.elements[i.attrs["index"]] if s.kind == "tuple" else s
            best = None
            for k, o in enumerate(i.operands):
                if o in cur and not o.shape.is_tuple and not i.shape.is_tuple:
                    c = forward(i, k, cur[o], n)
                    m = merge(best, c, i.shape.rank, n) if best is not None else None
                    if m is not None and tile_count(m) > max(tile_count(best), tile_count(c)):
                        best = m
                    elif tile_count(c) > tile_count(best):
                        best = c
            return best

        def candidate_backward(i):
            best = None
            for u in users[i]:
                su = cur.get(u)
                if su is None:
                    continue
                for k, o in enumerate(u.operands):
                    if o is not i:
                        continue
                    if u.opcode == "tuple":
                        c = su.elements[k] if su.kind == "tuple" else su
                    elif u.opcode == "get-tuple-element" or i.shape.is_tuple or u.shape.is_tuple:
                        continue
                    else:
                        c = backward(u, k, su, n)
                    if tile_count(c) > tile_count(best):
                        best = c
            return best

        changed = True
        while changed:
            changed = False
            for order, cand in ((instrs, candidate_forward), (reversed(instrs), candidate_backward)):
                for i in order:
                    if i in fixed:
                        continue
                    c = cand(i)
                    if c is not None and tile_count(c) > tile_count(cur.get(i)):
                        cur[i] = c
                        changed = True
        for i in instrs:
            if i.shape.is_tuple and i.opcode == "tuple" and i not in fixed:
                cur[i] = HloSharding.tuple_of(cur.get(o, HloSharding.replicate()) for o in i.operands)
            i.attrs["sharding"] = cur.get(i, HloSharding.replicate())
        module.num_partitions = n
        return True
