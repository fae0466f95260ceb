"""Operator fusion (``xla/service/instruction_fusion.cc``, ``cpu_instruction_fusion.cc``).

Why fuse: an unfused program writes every intermediate array to memory and reads it back in
the next kernel. On this machine a memory round trip of one f32 costs about as much as twenty
flops, so an elementwise op is almost free *if* its operand is still in a register. Fusion
merges a producer into its consumer so the intermediate value is computed where it is used.

How: the pass grows one *cluster* per consumer, visiting consumers from the end of the program
(users before producers, as XLA does), and pulls in producers one at a time, the latest first,
when the rules below allow it. Each cluster of two or more instructions becomes one ``fusion``
instruction whose ``calls`` computation holds the members. The fusion *kind* names the kernel
shape the backend emits:

- ``kLoop``: elementwise ops with their broadcast/reshape/transpose/slice/iota/convert producers:
  one loop nest over the output, every element computed from its operands' elements.
- ``kInput``: a ``reduce`` root with its operand expression fused in: the reduction reads the
  expression element by element and the operand array is never materialized (an (L,N)
  broadcast-then-reduce never writes the (L,N) array).
- ``kOutput``: a ``dot`` or ``convolution`` with an elementwise tail (bias add, residual add,
  ReLU, ReLU6/clamp, ...): the accumulator is finished in registers before one store
  (Conv+Bias+ReLU and Dot+Bias+activation, i.e. an MLP layer, are each one kernel).

Legality and profitability rules. Every decision is logged with the rule that made it
(``FusionPass.log``, a list of ``FusionDecision``; ``Compiled.fusion_log``; ``format_fusion_log``):

1. **Buffers are not computations.** Parameters, tuples and array constants are never fused;
   rank-0 constants are copied into the fusion (they become immediates).
2. **Convexity, so no cycles.** A producer is *moved* into a cluster only if all its users are
   in the cluster. Were one user outside, moving the producer would make that user read the
   fusion while the fusion (possibly, through that user) reads it: a cycle. The log names the
   user through which the cycle would close when it reaches the fusion root within a few steps
   (a bounded search: see ``_why_not_move``). What it does instead is rule 3 or 4.
3. **Cheap producers are duplicated.** A constant, iota, broadcast or reshape (a bitcast) with
   users elsewhere is copied into the cluster: recomputing it is a load or less, cheaper than a
   memory round trip.
4. **Recompute instead of store** (the rule that makes softmax and layernorm 3 kernels). An
   elementwise producer whose users are not all in the cluster is duplicated into it when
   (a) recomputing it reads no more memory than loading its result: it reads at most one
   array of its own size (its other operands are scalars or broadcasts of smaller arrays), and
   (b) every one of its users reads each of its elements once (elementwise ops, the operand of a
   reduce, reshape/transpose/slice): so each user can take its own copy and the producer's array
   is never written at all, and
   (c) it has been duplicated fewer than ``max_duplicates`` times (bounds recomputation and code
   size). For softmax ``exp(x - max)`` feeds both ``sum`` and the final ``divide``: it is
   recomputed in both (2 extra flops and one ``exp`` per element) instead of writing and
   reading 8 bytes per element.
   (d) **Recompute what the cluster can derive.** A cheap elementwise producer that fails
   (b) -- a dot reads it many times, so it is stored anyway -- is still duplicated into a
   cluster that already reads each of its operands (or they are scalars or small broadcasts):
   the kernel reads one array fewer, and the producer's buffer dies at its last other reader.
   The backward relu mask, JAX's ``h == max(h, 0)`` with ``h = z + b``, then reads only
   the dot's output ``z``, as XLA's mask fusions do (XLA's ``InstructionFusion`` duplicates a
   cheap producer into each consumer it fuses into); the activation ``max(h, 0)`` lives only
   until its layer's weight gradient, which the memory scheduler then runs early (the MLP
   training step's arena: 5.25 -> 4.25 MiB).
5. **Element reuse.** Dots and convolutions read each operand element many times (a dot reads
   each lhs element once per output column), so no producer is fused into a dot or convolution
   (it would be recomputed for every use), and an expensive producer (exp, log, tanh, divide,
   sqrt, ...) is never fused where a broadcast between it and the fusion root expands it (it
   would be recomputed for every copy). A ``reduce`` reads each operand element once: its
   operand expression is fused (kInput); its init value must be a constant. So does a
   cumulative ``reduce-window`` (``cumsum`` & co., ``minixla.hlo.scan.scan_axis``): it roots a
   kernel of its own, a running accumulator along the axis (the LLVM backend's scan kernel),
   into which its operand expression is fused and read once per element; like every
   reduce-window it is never fused into a consumer.
6. **One hero per kernel.** A fusion has at most one dot, convolution or reduce (its *hero*),
   whose value must reach the root through same-index elementwise ops and reshapes (bitcasts:
   the same linear index), never through an expanding broadcast, and must have no user outside the
   fusion (a pattern rewrite needs single-use intermediates). So: kOutput is a dot/conv with
   its tail (bias/residual add, activation); a reduce takes a small *epilogue* (``sum / n``,
   ``sqrt(var + eps)``: each reduced value finished once, in the same kernel); but a
   reduction is never fused into a consumer that broadcasts it (``x - max(x)`` needs the whole
   row maximum before the first subtraction).
7. **Size cap.** A cluster holds at most ``max_fusion_size`` instructions (compile time, and
   register pressure in the generated loop), counting immediates (scalar constants and their
   broadcasts) as nothing and integer/bitwise elementwise ops as a quarter (``_size_weight``):
   a threefry hash (20 rounds of add, shifts, or, xor, each word with two users) is then one
   kernel where it was ~20, and ``random.normal``'s program 7 kernels instead of 24.
8. **Row fusion** (softmax, log_softmax, layernorm: reduce -> broadcast -> elementwise ->
   reduce -> broadcast -> elementwise). Rule 6 keeps a broadcast reduction out of its
   consumer because a *loop* kernel would recompute the reduction for every copy. But when
   every reduction of a cluster reduces the *minor* dims of arrays of the root's shape
   ``(R..., C...)`` (``dimensions = {k, ..., rank-1}``, the same ``k`` for all) and each
   reduced value is only broadcast back along its own row (``broadcast(v), dimensions={0..k-1}``,
   possibly after reshapes and elementwise ops on row values), one kernel can do it per row:
   compute the reductions in order into registers (each once per row), then the output
   elements, so the row is read from DRAM once and re-read from L1 by the later passes. The
   pass then grows the cluster in *row mode*, where each member gets an access class from its
   users (``row_access``): ``full`` (read at the output element's index), ``row`` (read at
   the row's index: computed once per row, so an expensive op there is not recomputed per
   copy and rule 5 does not apply) or ``other`` (any other index: no reduction may lie below).
   A reduction is fused when its class is ``row`` and all its users are in the cluster (so
   several reductions per fusion, not one hero). The row must fit ``row_fusion_bytes`` (a
   32 KiB L1 budget by default) or the row would come back from DRAM for each pass; if the
   row-mode cluster ends up with no reduction, or the row is too long, the cluster is grown
   again by rules 1-7 (today's 3-kernel plan). The fusion's kind is ``kInput`` (XLA's kind for
   a reduction-containing input fusion); its root has the full shape, which is how the
   backend tells it from a reduction-rooted kInput.

In-place safety (a kernel must not overwrite a buffer it still reads) is buffer assignment's
business: it gives a kernel an operand's buffer only when the kernel reads that operand at the
index it writes (see ``minixla.passes.buffer_assignment``).

Cost: O(n) in the number of instructions for programs of many kernels. Every decision does work
bounded by the cluster (at most ``max_fusion_size`` members) and the instructions a few steps
above its root, never by the program: users are kept in insertion-ordered dicts (a duplicated
producer loses a user in O(1)), each cluster counts which users of a producer it holds, a
failed row-mode attempt is undone from a journal of what it changed (not a copy of the
program), duplicates are placed and clusters replaced by fusions in one sweep at the end, and the
rule 5/6 path checks visit each member once (a cluster of diamonds has exponentially many paths).
``FusionPass.work`` counts the steps of the searches so a test can check this without a clock.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from minixla.hlo.collectives import COLLECTIVE_OPCODES
from minixla.hlo.ir import ELEMENTWISE, HloInstruction
from minixla.hlo.scan import scan_axis
from minixla.passes.pipeline import HloPass

#: elementwise opcodes (``clamp`` is listed for when lowering produces it).
_ELEMENTWISE = ELEMENTWISE | {"clamp"}
#: ops that index their operand in a simple, data-independent way (fusible into a loop).
_SHAPE_OPS = {"broadcast", "reshape", "transpose", "slice", "iota"}
_CHEAP = {"constant", "iota", "broadcast", "reshape"}
_EXPENSIVE = {"exponential", "log", "tanh", "logistic", "divide", "sqrt", "rsqrt", "power"}
_CONTRACTIONS = {"dot", "convolution"}
#: entry instructions that launch no kernel (a row-major reshape is a bitcast).
NOT_KERNELS = {"parameter", "constant", "tuple", "reshape", "get-tuple-element"}
#: instructions that never root a fusion: no kernel, a loop/branch running other computations,
#: or an SPMD collective / ``partition-id`` (a plan step of its own: ``backends/spmd/steps.py``)
_NO_FUSION_ROOT = NOT_KERNELS | {"while", "conditional", "partition-id", "opt-barrier"} | COLLECTIVE_OPCODES


def _is_elementwise(instr) -> bool:
    return instr.opcode in _ELEMENTWISE


#: rule 8's default cache budget for one row (product of the reduced dims x item size).
ROW_FUSION_BYTES = 32 << 10


def is_row_reduce(instr, split: int, dims) -> bool:
    """Rule 8: ``instr`` is a single-operand reduce of an array of ``dims`` over exactly its
    minor dims ``split..rank-1`` (at least one)."""
    if instr.opcode != "reduce" or len(instr.operands) != 2 or instr.shape.is_tuple:
        return False
    operand = instr.operands[0]
    return (operand.shape.dims == tuple(dims) and 0 <= split < len(dims)
            and tuple(instr.attrs.get("dimensions", ())) == tuple(range(split, len(dims))))


def row_access(user, user_class, operand, split: int, dims):
    """Rule 8: how ``user``, itself read as ``user_class``, reads ``operand`` in a row fusion
    whose root has ``dims`` and whose rows are the first ``split`` dims.

    Classes: ``"full"`` (at the output element's index), ``"row"`` (at the row's index, once
    per row), ``"other"`` (any other index); ``None`` when the access is illegal (a row
    reduction read other than once per row). Also used by the LLVM backend to re-check a
    row fusion before emitting its kernel.
    """
    if user_class == "other":
        return "other"
    if user.opcode == "reduce":
        if operand is user.operands[0] and operand is not user.operands[1]:
            return "full" if user_class == "row" and is_row_reduce(user, split, dims) else None
        return "other"  # the init value: a scalar
    if user.opcode in _ELEMENTWISE:
        return user_class if operand.shape.dims == user.shape.dims else "other"
    if user.opcode == "reshape":
        if user_class == "row" and operand.shape.size == user.shape.size:
            return "row"
        return "full" if operand.shape.dims == user.shape.dims else "other"
    if user.opcode == "broadcast" and user_class == "full":
        row_dims = tuple(dims[:split])
        if operand.shape.dims == row_dims and tuple(user.attrs.get("dimensions", ())) == tuple(range(split)):
            return "row"
    return "other"


def join_row_classes(instr, classes, split: int, dims):
    """Rule 8: the class of ``instr`` from the accesses of its users (``row_access``), or
    None when illegal. A reduction must be a row reduction read once per row."""
    classes = set(classes)
    if None in classes or not classes:
        return None
    joined = classes.pop() if len(classes) == 1 else "other"
    if instr.opcode == "reduce" and (joined != "row" or not is_row_reduce(instr, split, dims)):
        return None
    return joined


@dataclass
class FusionDecision:
    """One producer/consumer decision.

    Attributes:
      producer, consumer: instruction names (a duplicated producer is named by the original).
      fused: whether the producer went into the consumer's fusion.
      reason: the rule that decided (text; see the module docstring).
      fusion: name of the fusion instruction the consumer ended up in ('' when the consumer's
        cluster stayed a single, unfused instruction).
    """
    producer: str
    consumer: str
    fused: bool
    reason: str
    fusion: str = ""

    def __str__(self):
        verdict = "fused" if self.fused else "not fused"
        where = f" [{self.fusion}]" if self.fusion else ""
        return f"{self.producer} -> {self.consumer}: {verdict} ({self.reason}){where}"


def format_fusion_log(log) -> str:
    """The decisions as text, one a line (what ``MINIXLA_DUMP`` writes as ``*.fusion_log.txt``)."""
    return "\n".join(str(d) for d in log) + ("\n" if log else "")


#: integer and bitwise ops one rule-7 unit buys: a threefry round (add, two shifts, or, xor) is
#: one unit, so a whole 20-round hash fits one kernel instead of ~20 (each value of a round has
#: two users, so a cut between rounds stores both words and reads them back)
_INT_OPS_PER_UNIT = 4


def _size_weight(m) -> float:
    """What ``m`` counts toward rule 7's cap: nothing for an immediate (a scalar constant, or a
    broadcast of one: a register the loop never reloads), a quarter for an integer or bool
    elementwise op (one ALU instruction per element), one for anything else."""
    if m.opcode == "constant" and m.shape.rank == 0:
        return 0.0
    if m.opcode == "broadcast" and m.operands[0].opcode == "constant" and m.operands[0].shape.rank == 0:
        return 0.0
    if _is_elementwise(m) and not np.issubdtype(np.dtype(m.shape.dtype), np.inexact) and all(
            not np.issubdtype(np.dtype(o.shape.dtype), np.inexact) for o in m.operands):
        return 1.0 / _INT_OPS_PER_UNIT
    return 1.0


class _Cluster:
    def __init__(self, root: HloInstruction):
        self.root = root
        self.reset()

    def reset(self):
        self.members: set = set()
        self.weight = 0.0    # rule 7's count of the members (``_size_weight``)
        self.decisions: list[FusionDecision] = []
        self.row = None      # rule 8: the row split k while growing in row mode
        self.classes = {}    # rule 8: member -> access class (row mode only)
        self.inside = {}     # instruction -> set of its users that are members
        self.near = None     # _why_not_move's cache: what reaches the root in a few steps
        self.add(self.root)

    def add(self, m):
        self.members.add(m)
        self.weight += _size_weight(m)
        for o in m.operands:
            self.inside.setdefault(o, set()).add(m)

    def member_users(self, m):
        """The members that read ``m``."""
        return self.inside.get(m, ())

    def hero(self):
        """The fusion's dot, convolution or reduce (rule 6), or None."""
        return next((m for m in self.members if m.opcode in _CONTRACTIONS or m.opcode == "reduce"), None)


class FusionPass(HloPass):
    """Greedy producer-into-consumer fusion of the entry and of loop bodies and branches (kLoop, kInput, kOutput).

    Args:
      max_fusion_size: rule 7's cap on instructions per fusion.
      max_duplicates: rule 4's cap on how many extra copies of one instruction may be made.
      row_fusion_bytes: rule 8's budget for one row (reduced dims x item size); 0 disables
        row fusion.
    After ``run``, ``log`` holds every ``FusionDecision`` in the order they were made and
    ``work`` the number of steps its bounded searches took (nodes visited, users scanned): a
    deterministic measure of the pass's cost, linear in the program for a linear pass.
    """
    name = "fusion"

    def __init__(self, max_fusion_size: int = 64, max_duplicates: int = 4,
                 row_fusion_bytes: int = ROW_FUSION_BYTES):
        self.max_fusion_size = max_fusion_size
        self.max_duplicates = max_duplicates
        self.row_fusion_bytes = row_fusion_bytes
        self.log: list[FusionDecision] = []
        self.work = 0

    def run(self, module) -> bool:
        """Fuse the entry and every computation a ``while``/``conditional`` calls (loop bodies
        and branches run kernels too)."""
        changed = False
        for comp in [module.entry] + control_flow_computations(module):
            changed |= self._run_on(module, comp)
        return changed

    def _run_on(self, module, comp) -> bool:
        self.comp = comp
        self.pos = {instr: n for n, instr in enumerate(comp.instructions)}
        # users[p]: user -> a sequence number; dict order is the order the users appeared in
        # (program order, then clones as they are made), which the log's wording depends on.
        self._seq = itertools.count()
        self.users = {i: {} for i in comp.instructions}
        self.bad_users = {i: {} for i in comp.instructions}  # users not reading each element once
        for i in comp.instructions:
            for o in i.operands:
                self._add_user(o, i)
        self.origin: dict = {}          # clone -> the instruction it copies
        self.copies: Counter = Counter()  # original -> number of clones made
        self.clones: dict = {}          # original -> its clones, in the order they were made
        self.cluster_of: dict = {}
        self._journal = None            # row mode: what to undo if the attempt fails
        clusters = []
        for instr in reversed(list(comp.instructions)):
            # A reshape is a bitcast (no kernel), so it never roots a fusion of its own.
            if instr in self.cluster_of or instr.opcode in _NO_FUSION_ROOT:
                continue
            cluster = _Cluster(instr)
            self.cluster_of[instr] = cluster
            if not self._grow_row(cluster):
                self._grow(cluster)
            clusters.append(cluster)
        # Each clone goes right after the instruction it copies, the latest clone first.
        comp.instructions = [j for i in comp.instructions for j in [i, *reversed(self.clones.get(i, ()))]]
        order = {i: n for n, i in enumerate(comp.instructions)}
        fusion_of, fused_away = {}, set()
        for cluster in clusters:
            # Copying a scalar constant into a lone instruction is not worth a fusion.
            if sum(m.opcode != "constant" for m in cluster.members) > 1:
                fusion = self._materialize(module, cluster, order)
                fusion_of[cluster.root] = fusion
                fused_away |= cluster.members
                for d in cluster.decisions:
                    d.fusion = fusion.name
            else:
                for d in cluster.decisions:
                    if d.fused:
                        d.fused = False
                        d.reason = "rule 1: a scalar constant is an immediate of the lone op, no fusion needed"
        # Each fusion takes its root's place; the members go; users read the fusion (one sweep).
        comp.instructions = [fusion_of.get(i, i) for i in comp.instructions
                             if i in fusion_of or i not in fused_away]
        comp.replace_uses(fusion_of)
        changed = bool(fusion_of)
        comp.remove_dead()
        # Convexity (rule 2) makes this hold by construction; a violation is a bug in this pass.
        # (Operands before users in the new order proves there is no cycle, in O(n) and
        # without networkx, whose import was ~0.2 s of a process's first compile.)
        assert _operands_first(comp), "fusion created a cycle"
        return changed

    # --- rule 8: row fusion -------------------------------------------------------------
    def _row_splits(self, root):
        """The splits ``k`` for which a row reduction of an array of ``root``'s shape, with a row
        within the budget, is close enough above ``root`` to be worth a row-mode attempt."""
        dims = root.shape.dims
        if root.shape.is_tuple or not dims or self.row_fusion_bytes <= 0:
            return []
        splits, frontier, seen = set(), [root], {root}
        while frontier and len(seen) <= 2 * self.max_fusion_size:  # a bounded look, not a search
            m = frontier.pop()
            for o in m.operands:
                if o in seen or o.opcode in ("parameter", "tuple") or o in self.cluster_of:
                    continue
                seen.add(o)
                if o.opcode == "reduce":
                    k = min(o.attrs.get("dimensions", (0,)), default=0)
                    row_bytes = o.operands[0].shape.size // max(1, math.prod(dims[:k])) * \
                        np.dtype(o.operands[0].shape.dtype).itemsize
                    if is_row_reduce(o, k, dims) and row_bytes <= self.row_fusion_bytes:
                        splits.add(k)
                if _is_elementwise(o) or o.opcode in ("reduce", "broadcast", "reshape"):
                    frontier.append(o)
        return sorted(splits, reverse=True)

    def _grow_row(self, cluster) -> bool:
        """Grow ``cluster`` in row mode (rule 8); keep it if it holds a row reduction, else undo."""
        for split in self._row_splits(cluster.root):
            self._journal, n_log = [], len(self.log)
            cluster.row, cluster.classes = split, {cluster.root: "full"}
            self._grow(cluster)
            journal, self._journal = self._journal, None
            if any(m.opcode == "reduce" for m in cluster.members):
                return True
            self._undo(journal)
            del self.log[n_log:]
            cluster.reset()
        return False

    # --- users, and undoing a failed row-mode attempt ---------------------------------
    def _add_user(self, p, u, seq=None):
        seq = next(self._seq) if seq is None else seq
        self.users[p][u] = seq
        if not self._reads_once(u, p):
            self.bad_users[p][u] = seq

    def _remove_user(self, p, u):
        seq = self.users[p].pop(u)
        self.bad_users[p].pop(u, None)
        return seq

    def _record(self, *entry):
        if self._journal is not None:
            self._journal.append(entry)

    def _undo(self, journal):
        """Revert the changes ``journal`` recorded, latest first. Its size is bounded by the
        cluster, so a failed attempt costs what it did, not the program's size (but a user put
        back is put back in its original place: those users dicts are re-sorted)."""
        resort = set()
        for entry in reversed(journal):
            kind = entry[0]
            if kind == "member":
                del self.cluster_of[entry[1]]
            elif kind == "operands":
                entry[1].operands = entry[2]
            elif kind == "user-removed":
                _, p, u, seq = entry
                self._add_user(p, u, seq)
                resort.add(p)
            elif kind == "user-added":
                self._remove_user(entry[1], entry[2])
            elif kind == "clone":
                _, clone, p, origin = entry
                self.clones[p].pop()
                del self.origin[clone], self.pos[clone], self.users[clone], self.bad_users[clone]
                self.copies[origin] -= 1
                if not self.copies[origin]:
                    del self.copies[origin]
        for p in resort:
            for table in (self.users, self.bad_users):
                table[p] = dict(sorted(table[p].items(), key=lambda kv: kv[1]))

    def _row_class(self, p, cluster):
        """Rule 8: ``p``'s access class from its users already in the row cluster (or None)."""
        dims = cluster.root.shape.dims
        return join_row_classes(p, [row_access(u, cluster.classes[u], p, cluster.row, dims)
                                    for u in cluster.member_users(p)],
                                cluster.row, dims)

    # --- growing a cluster -------------------------------------------------------------
    def _grow(self, cluster):
        heap, seen = [], set()

        def push_operands(m):
            for p in m.operands:
                if id(p) not in seen:
                    seen.add(id(p))
                    heapq.heappush(heap, (-self.pos[p], id(p), p, m))
        push_operands(cluster.root)
        while heap:
            _, _, p, consumer = heapq.heappop(heap)
            verdict, reason = self._should_fuse(p, consumer, cluster)
            decision = FusionDecision(self.origin.get(p, p).name, self.origin.get(consumer, consumer).name,
                                      bool(verdict), reason)
            self.log.append(decision)
            cluster.decisions.append(decision)
            if not verdict:
                continue
            if verdict == "duplicate":
                p = self._duplicate_into(p, cluster)
            cluster.add(p)
            self.cluster_of[p] = cluster
            self._record("member", p)
            if cluster.row is not None:
                cluster.classes[p] = self._row_class(p, cluster)
            push_operands(p)

    def _should_fuse(self, p, consumer, cluster):
        """(False | "fuse" | "duplicate", reason) for fusing producer ``p`` into ``consumer``."""
        if p.opcode in ("parameter", "tuple"):
            return False, "rule 1: parameters and tuples are buffers, not computations"
        if p in self.cluster_of:
            return False, "producer already belongs to another fusion"
        if p.opcode == "constant" and p.shape.rank > 0:
            return False, "rule 1: array constants stay in their own buffer"
        if cluster.weight >= self.max_fusion_size:
            return False, f"rule 7: fusion size cap ({self.max_fusion_size}) reached"
        if consumer.opcode in _CONTRACTIONS:
            return False, f"rule 5: {consumer.opcode} reads each operand element many times"
        if consumer.opcode == "reduce" and p is consumer.operands[1] and p.opcode != "constant":
            return False, "rule 5: a reduce's init value must be a constant to fuse"
        users_inside = len(cluster.member_users(p)) == len(self.users[p])
        row_class = None
        if cluster.row is not None:
            row_class = self._row_class(p, cluster)
            if row_class is None:
                return False, "rule 8: a row reduction must be read once per row (broadcast along its row)"
            if p.opcode in _CONTRACTIONS:
                return False, f"rule 8: a row fusion holds no {p.opcode}"
            if p.opcode == "reduce":
                if not users_inside:
                    return False, "rule 6: the reduction result has users outside the fusion"
                return "fuse", ("kInput: rule 8: row fusion: reduction over the minor dims, computed once "
                                "per row and broadcast from a register")
        if p.opcode in _CONTRACTIONS or p.opcode == "reduce":
            return self._hero_fusion_ok(p, consumer, cluster, users_inside)
        if not (_is_elementwise(p) or p.opcode in _SHAPE_OPS or p.opcode in ("constant", "dynamic-slice")):
            return False, f"'{p.opcode}' is not a loop-fusible producer"
        if p.opcode in _EXPENSIVE and row_class not in ("row", "full") and self._expanded(consumer, cluster):
            return False, "rule 5: an expensive producer under an expanding broadcast would be recomputed per copy"
        if users_inside:
            kind = "kInput" if cluster.hero() is not None and cluster.hero().opcode == "reduce" else (
                "kOutput" if cluster.hero() is not None else "kLoop")
            return "fuse", f"{kind}: all users of the producer are in the fusion"
        why_not_move = self._why_not_move(p, cluster)
        if p.opcode in _CHEAP:
            return "duplicate", f"rule 3: cheap producer duplicated ({why_not_move})"
        ok, why = self._recompute_ok(p)
        if ok:
            return "duplicate", f"rule 4: recomputed here instead of stored ({why}; {why_not_move})"
        ok, why_d = self._derivable(p, cluster)
        if ok:
            return "duplicate", f"rule 4d: recomputed from what the fusion reads anyway ({why_d}; {why_not_move})"
        return False, f"{why_not_move}; not duplicated: {why}"

    #: how far (in producer->user steps) the cycle explanation searches; see _why_not_move.
    explain_depth = 8

    def _why_not_move(self, p, cluster) -> str:
        """Rule 2: the first outside user of ``p`` through which moving ``p`` would close a cycle.

        Legality never depends on this search (a producer with an outside user is simply not
        moved); it only explains the decision. A full reachability query per decision would
        make the pass quadratic in program size, so only a cycle closing within
        ``explain_depth`` producer->user steps from the outside user to the fusion root is
        named, and otherwise the plainer reason is given. Those users are the instructions the
        root reaches in ``explain_depth`` steps up its operands (``_near_root``: computed once
        per cluster and again after a duplication, which changes the graph); what is scanned
        is the smaller of that set and ``p``'s users, so a producer with many users (a
        broadcast scalar read by every step of a loop) costs nothing per decision.
        """
        users, inside = self.users[p], cluster.member_users(p)
        near = self._near_root(cluster)
        if len(users) <= len(near) + len(inside):
            closes = None
            for u in users:
                self.work += 1
                if u not in inside and u in near:
                    closes = u
                    break
        else:
            self.work += len(near)
            closes = min((u for u in near if u in users and u not in inside), key=users.__getitem__, default=None)
        if closes is not None:
            return f"rule 2: moving it would create a cycle through %{closes.name}"
        first = next(u for u in users if u not in inside)  # skips at most the cluster's members
        return f"rule 2: %{first.name} outside the fusion also needs its value"

    def _near_root(self, cluster) -> set:
        """The instructions with a path of at most ``explain_depth`` steps to the cluster's root
        (a breadth-first search up the operands: the dataflow graph's in-edges, always current)."""
        if cluster.near is None:
            near, frontier = {cluster.root}, [cluster.root]
            for _ in range(self.explain_depth):
                nxt = []
                for m in frontier:
                    for o in m.operands:
                        self.work += 1
                        if o not in near:
                            near.add(o)
                            nxt.append(o)
                frontier = nxt
            cluster.near = near
        return cluster.near

    def _recompute_ok(self, p):
        """Rule 4's conditions for duplicating an elementwise producer ``p``."""
        if not (_is_elementwise(p) or p.opcode in ("reshape", "transpose", "slice")):
            return False, f"'{p.opcode}' does not read each operand element once"
        if p is self.comp.root:
            return False, "it is the program's result, so it is stored anyway"
        big = [o for o in set(p.operands) if not self._small_source(o, p)]
        if len(big) > 1:
            return False, f"recomputing it reads {len(big)} arrays of its size, more than loading it"
        u = next(iter(self.bad_users[p]), None)  # the first user that does not read it once
        if u is not None:
            return False, f"%{u.name} ({u.opcode}) does not read each element once"
        origin = self.origin.get(p, p)
        if self.copies[origin] >= self.max_duplicates:
            return False, f"rule 4c: already duplicated {self.max_duplicates} times"
        return True, f"it reads {'one array' if big else 'no array'} of its size and every user reads it once"

    def _derivable(self, p, cluster):
        """Rule 4d: ``p`` (stored anyway, for a user that reads it many times) is cheap and
        elementwise, and the cluster already reads each of its operands (or they are small
        sources), so recomputing it reads no new array and saves reading ``p``'s."""
        if not _is_elementwise(p) or p.opcode in _EXPENSIVE:
            return False, f"'{p.opcode}' is not a cheap elementwise op"
        if p is self.comp.root:
            return False, "it is the program's result"
        for o in set(p.operands):
            if not (self._small_source(o, p) or o in cluster.members or cluster.member_users(o)):
                return False, f"the fusion does not read %{o.name}"
        origin = self.origin.get(p, p)
        if self.copies[origin] >= self.max_duplicates:
            return False, f"rule 4c: already duplicated {self.max_duplicates} times"
        return True, "each of its operands is already read by the fusion"

    @staticmethod
    def _small_source(o, p) -> bool:
        """``o`` costs less than one array of ``p``'s size to re-read (scalar, iota, small broadcast)."""
        if o.opcode == "iota" or (o.opcode == "constant" and o.shape.rank == 0):
            return True
        return o.opcode == "broadcast" and o.operands[0].shape.size < p.shape.size

    def _reads_once(self, u, p) -> bool:
        if _is_elementwise(u) or u.opcode in ("reshape", "transpose", "slice"):
            return True
        if u.opcode == "reduce" or scan_axis(u) is not None:  # a scan kernel reads x[i] once
            return u.operands[0] is p and u.operands[1] is not p
        return u.opcode == "broadcast" and u.shape.size == p.shape.size

    def _hero_fusion_ok(self, p, consumer, cluster, users_inside):
        """Rule 6 for a dot, convolution or reduce producer ``p``."""
        what = "reduction" if p.opcode == "reduce" else p.opcode
        if cluster.hero() is not None:
            return False, f"rule 6: the fusion already has a hero ({cluster.hero().opcode})"
        if not users_inside:
            return False, f"rule 6: the {what} result has users outside the fusion"
        if p.opcode == "reduce":
            if not self._same_elements_to_root(consumer, cluster):
                return False, "rule 6: a reduction is not fused into a consumer that broadcasts it"
            return "fuse", "kInput: reduction with an elementwise epilogue"
        if not self._elementwise_path_to_root(consumer, cluster, p.shape.dims):
            return False, f"rule 6: the {p.opcode} value must reach the root through same-index elementwise ops"
        return "fuse", f"kOutput: {p.opcode} with an elementwise tail"

    def _elementwise_path_to_root(self, m, cluster, dims):
        """Rule 6 for a dot/conv: elementwise ops of its size up to the root, or reshapes
        (row-major bitcasts: the tail reads the hero's element at the output's linear index;
        the relu mask of a flattening layer's gradient is ``reshape(dot) * mask``)."""
        size = math.prod(dims)
        return self._every_path(m, cluster, lambda x: (_is_elementwise(x) or x.opcode == "reshape")
                                and x.shape.size == size)

    def _same_elements_to_root(self, m, cluster):
        """``m`` reaches the root through elementwise ops and reshapes only (element count kept)."""
        return self._every_path(m, cluster, lambda x: _is_elementwise(x) or x.opcode == "reshape")

    def _expanded(self, m, cluster) -> bool:
        """Some path from ``m`` to the root goes through a broadcast that adds elements."""
        return not self._every_path(
            m, cluster, lambda x: not (x.opcode == "broadcast" and x.shape.size > x.operands[0].shape.size))

    @staticmethod
    def _every_path(m, cluster, ok) -> bool:
        """Every instruction on every path from ``m`` up the members to the root satisfies ``ok``.
        Each member is visited once: a cluster of diamonds has exponentially many paths."""
        memo = {}

        def visit(x):
            r = memo.get(x)
            if r is None:
                r = memo[x] = ok(x) and all(visit(u) for u in cluster.member_users(x))
            return r
        return visit(m)

    def _duplicate_into(self, p, cluster):
        """A copy of ``p`` that the cluster's members read instead of ``p``."""
        clone = HloInstruction(p.opcode, p.shape, p.operands, p.attrs, p.called,
                               name=self.comp.module.unique_name(p.opcode), literal=p.literal,
                               metadata=p.metadata)
        origin = self.origin.get(p, p)
        self.origin[clone] = origin
        self.copies[origin] += 1
        self.clones.setdefault(p, []).append(clone)  # placed in the program at the end of run()
        self.pos[clone] = self.pos[p]
        self.users[clone], self.bad_users[clone] = {}, {}
        self._record("clone", clone, p, origin)
        readers = cluster.inside.pop(p, set())
        for m in readers:
            self._record("operands", m, m.operands)
            m.operands = [clone if o is p else o for o in m.operands]
            self._record("user-removed", p, m, self._remove_user(p, m))
            self._add_user(clone, m)
        cluster.inside[clone] = readers
        for o in dict.fromkeys(clone.operands):
            self._add_user(o, clone)
            self._record("user-added", o, clone)
        cluster.near = None  # the graph changed: p no longer reaches these readers directly
        return clone

    # --- turning a cluster into a fusion instruction -----------------------------------
    def _materialize(self, module, cluster, order):
        """The fusion instruction for ``cluster`` (``order``: the instructions' positions); ``run``
        puts it in the program in place of the root."""
        members = sorted(cluster.members, key=order.__getitem__)
        hero = cluster.hero()
        kind = "kLoop" if hero is None else ("kInput" if hero.opcode == "reduce" else "kOutput")
        fused = module.new_computation("fused_computation")
        clones, params = {}, []
        for m in members:  # the fusion's operands: values the members read from outside
            for o in m.operands:
                if o not in cluster.members and o not in clones:
                    clones[o] = fused.add_instruction(HloInstruction(
                        "parameter", o.shape, name=module.unique_name(f"param_{len(params)}"),
                        parameter_number=len(params)))
                    params.append(o)
        for m in members:
            clone = HloInstruction(m.opcode, m.shape, [clones[o] for o in m.operands], m.attrs,
                                   m.called, name=module.unique_name(m.opcode), literal=m.literal,
                                   metadata=m.metadata)
            clones[m] = fused.add_instruction(clone)
        fused.root = clones[cluster.root]
        return HloInstruction("fusion", cluster.root.shape, params, {"kind": kind}, [fused],
                              name=module.unique_name("fusion"), metadata=cluster.root.metadata)


def _operands_first(comp) -> bool:
    """Every operand of every instruction comes before it in ``comp.instructions`` (then the
    dataflow graph has no cycle)."""
    seen = set()
    for i in comp.instructions:
        if any(o not in seen for o in i.operands):
            return False
        seen.add(i)
    return True


def control_flow_computations(module) -> list:
    """The computations ``while`` and ``conditional`` instructions call, transitively from the
    entry (conditions, bodies, branches): programs of their own, unlike fused computations
    and reducer regions, which are parts of one instruction."""
    out, todo = [], [module.entry]
    while todo:
        comp = todo.pop()
        for instr in comp.instructions:
            if instr.opcode in ("while", "conditional"):
                for c in instr.called:
                    if c not in out:
                        out.append(c)
                        todo.append(c)
    return out


def count_kernels(module) -> int:
    """Instructions of the entry computation that launch a kernel (reshapes are bitcasts)."""
    return sum(1 for i in module.entry.instructions if i.opcode not in NOT_KERNELS)


def is_conv_bias_relu(instr) -> bool:
    """A kOutput fusion computing ``maximum(add(convolution, broadcast bias), 0)``."""
    if instr.opcode != "fusion" or instr.attrs.get("kind") != "kOutput":
        return False
    ops = {i.opcode for i in instr.fused_computation.instructions}
    return {"convolution", "add", "maximum"} <= ops and instr.fused_computation.root.opcode == "maximum"
