"""The SPMD partitioner (XLA's ``xla/service/spmd/spmd_partitioner.cc``, GSPMD), simplified
but real: it rewrites a module whose instructions all carry shardings (after
``ShardingPropagation``) into ONE per-device program that every device runs on its own shard,
exchanging data through collective instructions.

Every instruction ``x`` of sharding ``s`` becomes a per-device value of shape
``s.tile_shape(x.shape.dims)`` (uneven dims are padded up to the tile size; what the padding
holds is unspecified, so the ops that read across a dim -- ``reduce`` and a ``dot``'s
contracting dims -- *mask* it with the reducer's identity, ``lax.base.reduction_identity``).

* Ops that move data along dims (elementwise, broadcast, transpose, reshape, slice, pad, ...)
  are computed locally in ``effective(x, s)``, ``s`` restricted to the dims their operands can
  carry (``minixla.passes.sharding_propagation.dim_map``); their operands are first resharded
  to what that result needs.
* ``dot`` (and ``convolution``, whose input features are its contracting dim): if the
  operands' contracting dims are sharded alike, each device multiplies its shards (a *partial*
  dot) and an ``all-reduce`` over the devices holding the other parts of the contraction sums
  them (Megatron's row-parallel layer). Batch and non-contracting dims (a conv's batch and
  output features) stay local (data parallel, column-parallel).
* ``reduce`` over a sharded dim: local reduce, then ``all-reduce`` with the same reducer.
  When the result is wanted sharded along a dim the group could split, the all-reduce becomes
  a ``reduce-scatter`` (each device keeps its slice of the sum: ZeRO-style gradients).
* Resharding a value from ``S`` to ``T`` (``_Partitioner.reshard``): ``all-to-all`` when one
  dim's tiling moves to another dim; otherwise ``all-gather`` each dim whose ``T`` tile a device
  does not already hold, then cut the ``T`` tile out with a ``slice``, or a ``dynamic-slice``
  whose start is looked up by ``partition-id`` in a per-device table (replicated -> tiled);
  the same tiles on other devices are one ``collective-permute``.
* ``copy`` and ``Sharding`` custom-calls (``with_sharding_constraint``) are just a reshard.
* Anything else runs replicated: operands all-gathered, the result cut to its sharding.

``collective_bytes`` lists what each collective moves per device, under the ring model XLA's
cost analysis uses (see its docstring), for the comparison with XLA's partitioned HLO.
"""
from __future__ import annotations

import math

import numpy as np

from minixla.hlo import collectives
from minixla.hlo.ir import HloComputation, HloInstruction, Shape
from minixla.lax.base import reduction_identity
from minixla.passes.pipeline import HloPass
from minixla.passes.sharding_propagation import (backward, device_tiles, effective, forward,
                                                 full_tile_assignment, remap,
                                                 sharding_from_tiles)
from minixla.sharding.hlo_sharding import HloSharding, ShardingError

#: reducers an all-reduce can apply (the reduce's own ``to_apply`` is reused).
_ALL_REDUCIBLE = {"add", "multiply", "maximum", "minimum", "and", "or"}


def _groups_along(ta: np.ndarray, axes) -> list:
    """Replica groups of the devices that differ only in the tile index along ``axes``
    (ordered by that index, row-major over ``axes``)."""
    others = [a for a in range(ta.ndim) if a not in axes]
    k = math.prod(ta.shape[a] for a in axes)
    return [tuple(int(d) for d in g) for g in ta.transpose(others + list(axes)).reshape(-1, k)]


def _reduction_groups(tiles_kept: dict, tiles_red: dict):
    """All-reduce groups: devices holding the same kept tile, one of each reduced tile per
    group. ``None`` when the devices do not split that way."""
    classes: dict = {}
    for d in sorted(tiles_kept):
        classes.setdefault(tiles_kept[d], []).append(d)
    groups = []
    for devs in classes.values():
        by_red: dict = {}
        for d in devs:
            by_red.setdefault(tiles_red[d], []).append(d)
        counts = {len(v) for v in by_red.values()}
        if len(counts) != 1:
            return None
        for j in range(counts.pop()):
            groups.append(tuple(sorted(v[j] for v in by_red.values())))
    if len({len(g) for g in groups}) != 1:
        return None
    return groups


class SpmdPartitioner(HloPass):
    """Rewrite ``module.entry`` into the per-device program for ``num_partitions`` devices
    (default: ``module.num_partitions``, set by ``ShardingPropagation``). Every entry
    instruction must have ``attrs["sharding"]``. The parameters and the root keep their
    shardings as attributes (the caller feeds and reads shards accordingly); the module gets
    ``num_partitions``. Raises ``ShardingError`` for a missing or ill-fitting sharding."""
    name = "spmd-partitioner"

    def __init__(self, num_partitions: int | None = None):
        self.num_partitions = num_partitions

    def run(self, module) -> bool:
        n = self.num_partitions or getattr(module, "num_partitions", None)
        if not n:
            raise ShardingError("spmd-partitioner: the number of partitions is unknown "
                                "(run ShardingPropagation first or pass num_partitions)")
        _Partitioner(module, n).run()
        module.num_partitions = n
        return True


class _Partitioner:
    def __init__(self, module, n):
        self.module, self.n = module, n
        self.old = module.entry
        self.comp = module.new_computation("spmd")
        self.pid = None
        self.tables: dict = {}
        self.adders: dict = {}
        self.metadata: dict = {}

    # ---- emitting -------------------------------------------------------------------
    def add(self, instr: HloInstruction) -> HloInstruction:
        if not instr.metadata:
            instr.metadata = dict(self.metadata)
        return self.comp.add_instruction(instr)

    def op(self, opcode, dtype, dims, operands=(), called=(), **attrs):
        return self.add(HloInstruction(opcode, Shape(dtype, dims), operands, attrs, called))

    def constant(self, value, dtype):
        value = np.asarray(value, dtype=dtype)
        return self.add(HloInstruction("constant", Shape(dtype, value.shape), literal=value))

    def partition_id(self):
        if self.pid is None:
            pid = self.add(collectives.partition_id())
            self.pid = self.op("convert", np.int32, (), [pid])
        return self.pid

    def per_device(self, values) -> HloInstruction:
        """An ``s32[]`` holding ``values[partition_id]`` (a table lookup, as XLA does)."""
        values = tuple(int(v) for v in values)
        if len(set(values)) == 1:
            values = values[:1]
        if values not in self.tables and len(values) == 1:
            self.tables[values] = self.constant(values[0], np.int32)
        if values not in self.tables:
            table = self.constant(np.array(values, np.int32), np.int32)
            one = self.op("dynamic-slice", np.int32, (1,), [table, self.partition_id()],
                          dynamic_slice_sizes=(1,))
            self.tables[values] = self.op("reshape", np.int32, (), [one])
        return self.tables[values]

    def adder(self, dtype):
        dtype = np.dtype(dtype)
        if dtype not in self.adders:
            comp = self.module.new_computation("add")
            s = Shape(dtype, ())
            a = comp.add_instruction(HloInstruction("parameter", s, parameter_number=0,
                                                    name=self.module.unique_name("x")))
            b = comp.add_instruction(HloInstruction("parameter", s, parameter_number=1,
                                                    name=self.module.unique_name("y")))
            comp.root = comp.add_instruction(HloInstruction(
                "or" if dtype == np.bool_ else "add", s, [a, b], name=self.module.unique_name("add")))
            self.adders[dtype] = comp
        return self.adders[dtype]

    def dry_run_bytes(self, emit) -> float:
        """Bytes moved by the collectives ``emit()`` would add (emitted into a scratch
        computation that is then dropped)."""
        saved = self.comp, self.pid, dict(self.tables)
        self.comp = HloComputation("scratch")  # (no module: its names are not taken)
        try:
            emit()
            scratch = self.comp
        finally:
            self.comp, self.pid, self.tables = saved
        return sum(_instr_bytes(i) for i in scratch.instructions)

    # ---- driver -----------------------------------------------------------------------
    def run(self):
        self.module.spmd_global_shapes = ([p.shape for p in self.old.parameters], self.old.root.shape)
        env = {}
        for instr in self.old.instructions:
            if "sharding" not in instr.attrs:
                raise ShardingError(f"spmd-partitioner: %{instr.name} has no sharding "
                                    "(run ShardingPropagation first)")
            self.metadata = dict(instr.metadata)
            env[instr] = self.partition(instr, env)
        self.comp.root = env[self.old.root]
        self.comp.root.attrs["sharding"] = self.old.root.attrs["sharding"]
        self.comp.name = self.old.name
        self.module.entry = self.comp

    def partition(self, instr, env):
        R = instr.attrs["sharding"]
        code = instr.opcode
        if code == "parameter":
            dims = R.tile_shape(instr.shape.dims) if not instr.shape.is_tuple else None
            p = HloInstruction("parameter", Shape(instr.shape.dtype, dims) if dims is not None else instr.shape,
                               name=instr.name, parameter_number=instr.parameter_number,
                               attrs={"sharding": R})
            return self.add(p)
        if code == "tuple":
            elems = R.elements if R.kind == "tuple" else [R] * len(instr.operands)
            ops = [self.reshard(env[o], o.attrs["sharding"], e, o.shape) for o, e in zip(instr.operands, elems)]
            return self.add(HloInstruction("tuple", Shape.tuple_of([o.shape for o in ops]), ops,
                                           name=instr.name))
        if code == "get-tuple-element":
            t = instr.operands[0]
            St = t.attrs["sharding"]
            S = St.elements[instr.attrs["index"]] if St.kind == "tuple" else St
            local = env[t].shape.tuple_shapes[instr.attrs["index"]]
            g = self.add(HloInstruction(code, local, [env[t]], {"index": instr.attrs["index"]},
                                        name=instr.name))
            return self.reshard(g, S, R, instr.shape)
        if code == "copy" or (code == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding"):
            o = instr.operands[0]
            return self.reshard(env[o], o.attrs["sharding"], R, instr.shape)
        if code == "dot" or (code == "convolution" and instr.attrs.get("feature_group_count", 1) == 1
                             and instr.attrs.get("batch_group_count", 1) == 1):
            return self.partition_contraction(instr, env, R)
        if code == "reduce" and len(instr.operands) == 2:
            out = self.partition_reduce(instr, env, R)
            if out is not None:
                return out
        return self.partition_generic(instr, env, R)

    def _attrs(self, instr, local_dims):
        attrs = {k: v for k, v in instr.attrs.items() if k != "sharding"}
        if instr.opcode == "slice":
            attrs["slice"] = tuple((s, l, st) if local_dims[i] == instr.shape.dims[i] else (0, local_dims[i], 1)
                                   for i, (s, l, st) in enumerate(instr.attrs["slice"]))
        if instr.opcode == "dynamic-slice":
            attrs["dynamic_slice_sizes"] = tuple(local_dims)
        return attrs

    def partition_generic(self, instr, env, R):
        n = self.n
        tuple_shaped = instr.shape.is_tuple
        Reff = HloSharding.replicate() if tuple_shaped else effective(instr, R, n)
        ops = []
        for k, o in enumerate(instr.operands):
            So = o.attrs["sharding"]
            if o.shape.is_tuple or o.shape.rank == 0 or tuple_shaped:
                T = (HloSharding.tuple_of([HloSharding.replicate()] * len(o.shape.tuple_shapes))
                     if o.shape.is_tuple else HloSharding.replicate())
            else:
                T = backward(instr, k, Reff, n)
            ops.append(self.reshard(env[o], So, T, o.shape))
        if tuple_shaped:
            shape = instr.shape
        else:
            shape = Shape(instr.shape.dtype, Reff.tile_shape(instr.shape.dims))
        new = HloInstruction(instr.opcode, shape, ops, self._attrs(instr, shape.dims if not tuple_shaped else ()),
                             instr.called, name=instr.name, literal=instr.literal,
                             metadata=dict(instr.metadata))
        self.add(new)
        return self.reshard(new, Reff, R, instr.shape)

    # ---- masking ----------------------------------------------------------------------
    def mask(self, x, S, global_dims, dims, value):
        """``x`` (a local shard of sharding ``S``) with the padding of the uneven tiled dims in
        ``dims`` replaced by ``value`` (a scalar of x's dtype)."""
        n = self.n
        tiles = device_tiles(S, len(global_dims), n)
        nt = S.num_tiles if S.is_tiled else (1,) * len(global_dims)
        pred = None
        ldims = x.shape.dims
        for i in dims:
            a, t = global_dims[i], nt[i]
            c = -(-a // t)
            if t == 1 or (a % t == 0 and ldims[i] == c):
                continue
            offs = [tiles[d][i] * c for d in range(n)]
            iota = self.op("iota", np.int32, ldims, iota_dimension=i)
            off = self.op("broadcast", np.int32, ldims, [self.per_device(offs)], dimensions=())
            pos = self.op("add", np.int32, ldims, [iota, off])
            lim = self.op("broadcast", np.int32, ldims, [self.constant(a, np.int32)], dimensions=())
            ok = self.op("compare", np.bool_, ldims, [pos, lim], direction="LT")
            pred = ok if pred is None else self.op("and", np.bool_, ldims, [pred, ok])
        if pred is None:
            return x
        fill = self.op("broadcast", x.shape.dtype, ldims, [self.constant(value, x.shape.dtype)], dimensions=())
        return self.op("select", x.shape.dtype, ldims, [pred, x, fill])

    # ---- dot and convolution ---------------------------------------------------------
    def _contraction(self, instr):
        """How a ``dot``/``convolution`` maps its operands' dims: result dim of each lhs / rhs
        dim that reaches the result, the (lhs, rhs) pairs that must be tiled alike (batch) or
        are summed (contracting), and the dims that must stay whole (conv's spatial dims)."""
        lhs, rhs = instr.operands
        if instr.opcode == "dot":
            at = instr.attrs
            lb, lc, rb, rc = (list(at[a]) for a in ("lhs_batch_dims", "lhs_contracting_dims",
                                                     "rhs_batch_dims", "rhs_contracting_dims"))
            lfree = [i for i in range(lhs.shape.rank) if i not in lb and i not in lc]
            rfree = [i for i in range(rhs.shape.rank) if i not in rb and i not in rc]
            lhs_out = {d: j for j, d in enumerate(lb + lfree)}
            rhs_out = {d: len(lb) + len(lfree) + j for j, d in enumerate(rfree)}
            return lhs_out, rhs_out, list(zip(lb, rb)), list(zip(lc, rc)), [], []
        from minixla.hlo.lowering import parse_dim_labels
        dn = parse_dim_labels(instr.attrs["dim_labels"])
        return ({dn.lhs_spec[0]: dn.out_spec[0]}, {dn.rhs_spec[0]: dn.out_spec[1]}, [],
                [(dn.lhs_spec[1], dn.rhs_spec[1])], list(dn.lhs_spec[2:]), list(dn.rhs_spec[2:]))

    def _contraction_plan(self, instr, Sl, Sr):
        """(partial result sharding P, all-reduce groups or None) for a local dot/convolution
        of shards in ``Sl``/``Sr``, or ``None`` if those shards do not line up."""
        n = self.n
        lhs, rhs = instr.operands
        lhs_out, rhs_out, batch, contract, lwhole, rwhole = self._contraction(instr)
        tl = full_tile_assignment(Sl, lhs.shape.rank, n)
        tr = full_tile_assignment(Sr, rhs.shape.rank, n)
        if any(tl.shape[d] > 1 for d in lwhole) or any(tr.shape[d] > 1 for d in rwhole):
            return None
        il, ir = device_tiles(Sl, lhs.shape.rank, n), device_tiles(Sr, rhs.shape.rank, n)
        for a, b in batch + contract:
            if tl.shape[a] != tr.shape[b] or any(il[d][a] != ir[d][b] for d in range(n)):
                return None
        src = {j: (0, i) for i, j in lhs_out.items()}
        src.update({j: (1, i) for i, j in rhs_out.items()})
        rank = instr.shape.rank
        counts = [(tl, tr)[src[j][0]].shape[src[j][1]] if j in src else 1 for j in range(rank)]
        kept = {d: tuple((il, ir)[src[j][0]][d][src[j][1]] if j in src else 0 for j in range(rank))
                for d in range(n)}
        red = {d: tuple(il[d][a] for a, _ in contract) for d in range(n)}
        groups = _reduction_groups(kept, red)
        if groups is None:
            return None
        P = sharding_from_tiles(kept, counts, n)
        if P is None:
            return None
        return P, (groups if len(groups[0]) > 1 else None)

    def partition_contraction(self, instr, env, R):
        """``dot``/``convolution``: among the ways to line the operands up -- as they are, the
        rhs cut to the lhs's contracting/batch tiles or the reverse, or both resharded to what
        ``R`` needs -- take the one whose collectives move the fewest bytes; a sharded
        contraction is a partial result summed over the devices by ``combine``."""
        n = self.n
        lhs, rhs = instr.operands
        Sl, Sr = lhs.attrs["sharding"], rhs.attrs["sharding"]
        _, _, batch, contract, _, _ = self._contraction(instr)
        Reff = effective(instr, R, n)
        cands = [(Sl, Sr)]
        for lhs_decides in (True, False):  # one operand's contracting/batch tiles decide
            src, dst = (lhs, rhs) if lhs_decides else (rhs, lhs)
            dmap = [None] * dst.shape.rank
            for a, b in batch + contract:
                dmap[b if lhs_decides else a] = a if lhs_decides else b
            T = remap(src.attrs["sharding"], src.shape.dims, dst.shape.dims, dmap, n)
            cands.append((Sl, T) if lhs_decides else (T, Sr))
        cands.append((backward(instr, 0, Reff, n), backward(instr, 1, Reff, n)))
        plans = [(c, self._contraction_plan(instr, *c)) for c in cands]
        plans = [(c, p) for c, p in plans if p is not None]
        dtype = instr.shape.dtype

        def cost(plan):  # bytes the plan's collectives move (a dry run of its emission)
            (tl, tr), (P, groups) = plan

            def emit():
                self.reshard(env[lhs], Sl, tl, lhs.shape)
                self.reshard(env[rhs], Sr, tr, rhs.shape)
                d = self.add(HloInstruction("parameter", Shape(dtype, P.tile_shape(instr.shape.dims)),
                                            parameter_number=0))
                if groups:
                    self.combine(d, P, R, groups, self.adder(dtype), instr.shape)
                else:
                    self.reshard(d, P, R, instr.shape)
            return self.dry_run_bytes(emit)
        (tl, tr), (P, groups) = min(plans, key=cost)  # the first of the cheapest
        a = self.reshard(env[lhs], Sl, tl, lhs.shape)
        b = self.reshard(env[rhs], Sr, tr, rhs.shape)
        if groups:
            a = self.mask(a, tl, lhs.shape.dims, [x for x, _ in contract], 0)
            b = self.mask(b, tr, rhs.shape.dims, [y for _, y in contract], 0)
        dims = P.tile_shape(instr.shape.dims)
        d = self.add(HloInstruction(instr.opcode, Shape(dtype, dims), [a, b], self._attrs(instr, dims),
                                    name=instr.name))
        if groups:
            return self.combine(d, P, R, groups, self.adder(dtype), instr.shape)
        return self.reshard(d, P, R, instr.shape)

    def combine(self, partial, P, R, groups, reducer, shape):
        """Sum the partial results ``partial`` over ``groups`` into sharding ``R``: one
        ``reduce-scatter`` when ``R`` tiles a dim of ``P`` exactly over each group's members
        (each keeps its own slice of the sum), else ``all-reduce`` then reshard."""
        n, dims, rank = self.n, shape.dims, shape.rank
        tP, tR = device_tiles(P, rank, n), device_tiles(R, rank, n)
        cP = full_tile_assignment(P, rank, n).shape[:-1]
        cR = full_tile_assignment(R, rank, n).shape[:-1]
        g = len(groups[0])
        for j in range(rank):
            if cP[j] != 1 or cR[j] != g or dims[j] % g:
                continue
            if any(cP[i] != cR[i] for i in range(rank) if i != j) or any(
                    tP[d][i] != tR[d][i] for d in range(n) for i in range(rank) if i != j):
                continue
            ordered = [tuple(sorted(grp, key=lambda d: tR[d][j])) for grp in groups]
            if all([tR[d][j] for d in grp] == list(range(g)) for grp in ordered):
                return self.add(collectives.reduce_scatter(partial, j, ordered, reducer))
        r = self.add(collectives.all_reduce(partial, groups, reducer))
        return self.reshard(r, P, R, shape)

    # ---- reduce -------------------------------------------------------------------------
    def partition_reduce(self, instr, env, R):
        n = self.n
        x, init = instr.operands
        reducer = instr.called[0]
        code = reducer.root.opcode
        if code not in _ALL_REDUCIBLE or set(reducer.root.operands) != set(reducer.parameters):
            return None
        S = x.attrs["sharding"]
        red = list(instr.attrs["dimensions"])
        kept_dims = [i for i in range(x.shape.rank) if i not in red]
        tiles = device_tiles(S, x.shape.rank, n)
        groups = _reduction_groups({d: tuple(tiles[d][i] for i in kept_dims) for d in range(n)},
                                   {d: tuple(tiles[d][i] for i in red) for d in range(n)})
        if groups is None or len(groups[0]) == 1:
            return None  # nothing reduced across devices: the generic path keeps it local
        P = forward(instr, 0, S, n)
        dtype = x.shape.dtype
        ident = reduction_identity(code, dtype)
        xs = self.mask(env[x], S, x.shape.dims, red, ident)
        local_init = self.constant(ident, dtype)
        dims = tuple(xs.shape.dims[i] for i in kept_dims)
        r = self.add(HloInstruction("reduce", Shape(dtype, dims), [xs, local_init],
                                    {"dimensions": tuple(red)}, [reducer], name=instr.name))
        r = self.combine(r, P, R, groups, reducer, instr.shape)
        init_local = self.reshard(env[init], init.attrs["sharding"], HloSharding.replicate(), init.shape)
        if not (init.opcode == "constant" and np.array_equal(init.literal, ident, equal_nan=True)):
            b = self.op("broadcast", dtype, r.shape.dims, [init_local], dimensions=())
            r = self.op(code, dtype, r.shape.dims, [r, b])
        return r

    # ---- resharding ---------------------------------------------------------------------
    def reshard(self, x, S, T, shape):
        """The local shard of sharding ``T`` from ``x``, a local shard of sharding ``S`` of an
        array of ``shape``."""
        if S == T:
            return x
        if shape.is_tuple:
            Se = S.elements if S.kind == "tuple" else [S] * len(shape.tuple_shapes)
            Te = T.elements if T.kind == "tuple" else [T] * len(shape.tuple_shapes)
            parts = []
            for k, (s, t, sh) in enumerate(zip(Se, Te, shape.tuple_shapes)):
                g = self.add(HloInstruction("get-tuple-element", x.shape.tuple_shapes[k], [x], {"index": k}))
                parts.append(self.reshard(g, s, t, sh))
            return self.add(HloInstruction("tuple", Shape.tuple_of([p.shape for p in parts]), parts))
        n, dims, rank = self.n, shape.dims, shape.rank
        if rank == 0:
            return x
        out = self._all_to_all(x, S, T, dims)
        if out is None:
            out = self._permute(x, S, T, dims)
        if out is not None:
            return out
        tT = device_tiles(T, rank, n)
        ntT = full_tile_assignment(T, rank, n).shape[:-1]
        cT = [-(-a // t) for a, t in zip(dims, ntT)]

        def s_ranges(S):
            ta = full_tile_assignment(S, rank, n)
            tS = device_tiles(S, rank, n)
            return ta, tS, [-(-a // t) for a, t in zip(dims, ta.shape[:-1])]
        taS, tS, cS = s_ranges(S)
        for i in range(rank):
            if taS.shape[i] == 1:
                continue
            inside = all(tT[d][i] * cT[i] >= tS[d][i] * cS[i] and
                         min(tT[d][i] * cT[i] + cT[i], dims[i]) <= tS[d][i] * cS[i] + cS[i]
                         for d in range(n))
            if inside:
                continue
            groups = _groups_along(taS, [i])
            x = self.add(collectives.all_gather(x, i, groups))
            S = remap(S, dims, dims, [j if j != i else None for j in range(rank)], n)
            taS, tS, cS = s_ranges(S)
        # every device now holds its T tile: cut it out
        offs = [[tT[d][i] * cT[i] - tS[d][i] * cS[i] for d in range(n)] for i in range(rank)]
        need = [max(offs[i]) + cT[i] for i in range(rank)]
        if any(need[i] > x.shape.dims[i] for i in range(rank)):
            cfg = tuple((0, max(need[i] - x.shape.dims[i], 0), 0) for i in range(rank))
            pdims = tuple(x.shape.dims[i] + cfg[i][1] for i in range(rank))
            x = self.op("pad", x.shape.dtype, pdims, [x, self.constant(0, x.shape.dtype)], padding_config=cfg)
        if tuple(cT) == x.shape.dims:
            return x
        if all(len(set(o)) == 1 for o in offs):
            return self.op("slice", x.shape.dtype, tuple(cT), [x],
                           slice=tuple((o[0], o[0] + c, 1) for o, c in zip(offs, cT)))
        starts = [self.per_device(o) for o in offs]
        return self.op("dynamic-slice", x.shape.dtype, tuple(cT), [x] + starts,
                       dynamic_slice_sizes=tuple(cT))

    def _permute(self, x, S, T, dims):
        """Same tiles, other devices (e.g. ``P(("x", "y"))`` to ``P(("y", "x"))``): each
        device receives its ``T`` tile from a device holding it in ``S``, one
        ``collective-permute``."""
        n, rank = self.n, len(dims)
        sa, ta = full_tile_assignment(S, rank, n), full_tile_assignment(T, rank, n)
        if sa.shape != ta.shape or x.shape.dims != S.tile_shape(dims):
            return None
        if device_tiles(S, rank, n) == device_tiles(T, rank, n):
            return x  # only the replication groups differ: every device holds its tile
        holders: dict = {}
        for pos in np.ndindex(sa.shape):  # the j-th holder of a tile in S feeds its j-th in T
            holders.setdefault(pos[:-1], []).append(int(sa[pos]))
        pairs = [(holders[pos[:-1]][pos[-1]], int(ta[pos])) for pos in np.ndindex(ta.shape)]
        return self.add(collectives.collective_permute(x, sorted(pairs)))

    def _all_to_all(self, x, S, T, dims):
        """Move the tiling of dim ``i`` to dim ``j`` with one all-to-all, when ``T`` is ``S``
        with those two dims' tile axes swapped and both dims divide evenly."""
        n, rank = self.n, len(dims)
        sa, ta = full_tile_assignment(S, rank, n), full_tile_assignment(T, rank, n)
        for i in range(rank):
            for j in range(rank):
                t = sa.shape[i]
                if i == j or t == 1 or sa.shape[j] != 1 or ta.shape[j] != t or ta.shape[i] != 1:
                    continue
                if dims[i] % t or dims[j] % t or not np.array_equal(np.swapaxes(sa, i, j), ta):
                    continue
                if x.shape.dims != S.tile_shape(dims):
                    continue
                groups = _groups_along(sa, [i])
                L = list(x.shape.dims)
                split = L[:j] + [t, L[j] // t] + L[j + 1:]
                y = self.op("reshape", x.shape.dtype, tuple(split), [x])
                y = self.add(collectives.all_to_all(y, j, groups))
                labels = list(range(j)) + ["m", j] + list(range(j + 1, rank))
                order = []
                for dd in range(rank):
                    order += ([labels.index("m"), labels.index(i)] if dd == i else [labels.index(dd)])
                tdims = tuple(split[a] for a in order)
                y = self.op("transpose", x.shape.dtype, tdims, [y], dimensions=tuple(order))
                return self.op("reshape", x.shape.dtype, T.tile_shape(dims), [y])
        return None


# ---- bytes moved -------------------------------------------------------------------------

def _shape_bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_shape_bytes(s) for s in shape.tuple_shapes)
    return shape.nbytes


def bytes_moved(opcode: str, group_size: int, operand_bytes: int, result_bytes: int) -> float:
    """Bytes one device sends in a ring (bandwidth-optimal) implementation of collective
    ``opcode`` over ``group_size`` devices (the model of ``collective_bytes``); 0 for a group of
    one. ``benchmarks/spmd*.py`` measure XLA's partitioned HLO with it too."""
    g = group_size
    if g <= 1:
        return 0.0
    if opcode == "all-reduce":
        return 2 * (g - 1) / g * result_bytes
    if opcode == "all-gather":
        return (g - 1) / g * result_bytes
    if opcode == "reduce-scatter":
        return (g - 1) / g * operand_bytes
    if opcode == "all-to-all":
        return (g - 1) / g * result_bytes
    return float(result_bytes)  # collective-permute: the whole buffer


def collective_bytes(module) -> list:
    """``[(opcode, shape text, bytes moved per device)]`` for every collective of the entry
    computation of a per-device module.

    The model is the one of a ring (bandwidth-optimal) implementation, per device and group
    size ``g``: ``all-reduce`` moves ``2 (g-1)/g`` of its buffer (a reduce-scatter then an
    all-gather), ``all-gather`` ``(g-1)/g`` of its result, ``reduce-scatter`` ``(g-1)/g`` of
    its operand, ``all-to-all`` ``(g-1)/g`` of its buffer, ``collective-permute`` its buffer.
    """
    return [(i.opcode, str(i.shape), _instr_bytes(i)) for i in module.entry.instructions
            if i.opcode in collectives.COLLECTIVE_OPCODES]


def _instr_bytes(i) -> float:
    if i.opcode not in collectives.COLLECTIVE_OPCODES:
        return 0.0
    g = len(i.attrs["replica_groups"][0]) if i.opcode != "collective-permute" else 2
    return bytes_moved(i.opcode, g, _shape_bytes(i.operands[0].shape), _shape_bytes(i.shape))
