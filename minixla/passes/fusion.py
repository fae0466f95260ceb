"""Operator fusion (``xla/service/instruction_fusion.cc``, ``cpu_instruction_fusion.cc``).

Fusion merges a producer into its consumer so the intermediate value is computed in registers
instead of being written to memory and read back. The pass grows one *cluster* per consumer,
visiting consumers from the end of the program (users before producers, as XLA does), and
pulls in producers one at a time when the rules below allow it. Each cluster of two or more
instructions becomes one ``fusion`` instruction whose ``calls`` computation holds the members:

- ``kLoop``: elementwise ops with their broadcast/reshape/transpose/slice/iota/convert producers,
  one loop nest over the output.
- ``kInput``: a ``reduce`` root with its elementwise operand expression fused in (the
  operand is never materialized).
- ``kOutput``: a ``dot`` or ``convolution`` followed by an elementwise tail (bias add,
  ReLU, ...): the accumulator is finished in registers before one store (Conv+Bias+ReLU).

Rules (each decision, with the rule that made it, is appended to ``FusionPass.log``):

1. Parameters, tuples and array constants are never fused (they are buffers, not computations);
   rank-0 constants are cheap and are copied into the fusion.
2. A producer is fused only if *all* its users are in the cluster. This keeps the cluster
   convex (no path leaves it and comes back), so fusing can never create a cycle.
3. A cheap producer (constant, iota, broadcast) that has users elsewhere is *duplicated*
   into the cluster instead: recomputing it costs a load, less than a round trip to memory.
4. Reductions, dots and convolutions read each operand element many times, so their operands
   are not fused into them (except the reduce's elementwise operand for kInput, read once each),
   and an expensive producer (exp, log, tanh, divide, ...) is not fused into a broadcast that
   would recompute it for every copied element.
5. A dot/convolution is fused into a consumer only if its value reaches the cluster root
   through elementwise ops at the same index (the kOutput tail) and the cluster has no other
   dot/convolution and no reduce root.
6. A cluster holds at most ``max_fusion_size`` instructions.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from minixla.hlo.ir import ELEMENTWISE, HloInstruction
from minixla.passes.pipeline import HloPass

#: ops that index their operand in a simple, data-independent way (fusible into a loop).
_SHAPE_OPS = {"broadcast", "reshape", "transpose", "slice", "iota"}
_CHEAP = {"constant", "iota", "broadcast"}
_EXPENSIVE = {"exponential", "log", "tanh", "logistic", "divide", "sqrt", "rsqrt", "power"}
_CONTRACTIONS = {"dot", "convolution"}
NOT_KERNELS = {"parameter", "constant", "tuple", "reshape"}


@dataclass
class FusionDecision:
    """One producer/consumer decision: ``fused`` and the rule (``reason``) that decided it."""
    producer: str
    consumer: str
    fused: bool
    reason: str

    def __str__(self):
        verdict = "fused" if self.fused else "not fused"
        return f"{self.producer} -> {self.consumer}: {verdict} ({self.reason})"


class _Cluster:
    def __init__(self, root: HloInstruction):
        self.root = root
        self.members = {root}

    def has_contraction(self):
        return any(m.opcode in _CONTRACTIONS for m in self.members)


class FusionPass(HloPass):
    """Greedy producer-into-consumer fusion of the entry computation (kLoop, kInput, kOutput)."""
    name = "fusion"

    def __init__(self, max_fusion_size: int = 64):
        self.max_fusion_size = max_fusion_size
        self.log: list[FusionDecision] = []

    def run(self, module) -> bool:
        comp = module.entry
        self.comp = comp
        self.pos = {instr: n for n, instr in enumerate(comp.instructions)}
        self.users = comp.users()
        self.cluster_of: dict = {}
        clusters = []
        for instr in reversed(list(comp.instructions)):
            # A reshape is a bitcast (no kernel), so it never roots a fusion of its own.
            if instr in self.cluster_of or instr.opcode in ("parameter", "constant", "tuple", "reshape"):
                continue
            cluster = _Cluster(instr)
            self.cluster_of[instr] = cluster
            self._grow(cluster)
            clusters.append(cluster)
        changed = False
        for cluster in clusters:
            # Copying a scalar constant into a lone instruction is not worth a fusion.
            if sum(m.opcode != "constant" for m in cluster.members) > 1:
                self._materialize(module, cluster)
                changed = True
        comp.remove_dead()
        return changed

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
            fused, reason = self._should_fuse(p, consumer, cluster)
            duplicate = fused == "duplicate"
            self.log.append(FusionDecision(p.name, consumer.name, bool(fused),
                                           reason + (" (duplicated)" if duplicate else "")))
            if not fused:
                continue
            if duplicate:
                p = self._duplicate_into(p, cluster)
            cluster.members.add(p)
            self.cluster_of[p] = cluster
            push_operands(p)

    def _should_fuse(self, p, consumer, cluster):
        if p.opcode in ("parameter", "tuple"):
            return False, "parameters and tuples are buffers, not computations"
        if p in self.cluster_of:
            return False, "producer already belongs to another fusion"
        if p.opcode == "constant" and p.shape.rank > 0:
            return False, "array constants stay in their own buffer"
        if len(cluster.members) >= self.max_fusion_size:
            return False, f"fusion size cap ({self.max_fusion_size}) reached"
        if consumer.opcode in _CONTRACTIONS:
            return False, f"{consumer.opcode} reads each operand element many times"
        if consumer.opcode == "reduce" and p is consumer.operands[1] and p.opcode != "constant":
            return False, "reduce init value must be a constant to fuse"
        users_inside = all(u in cluster.members for u in self.users[p])
        if p.opcode in _CONTRACTIONS:
            return self._output_fusion_ok(p, consumer, cluster, users_inside)
        if p.opcode == "reduce":
            return False, "a reduction is not fused into its consumers"
        if not (p.opcode in ELEMENTWISE or p.opcode in _SHAPE_OPS or p.opcode == "constant"):
            return False, f"'{p.opcode}' is not a loop-fusible producer"
        if (p.opcode in _EXPENSIVE and consumer.opcode == "broadcast"
                and consumer.shape.size > p.shape.size):
            return False, "expensive producer into a broadcast would recompute each element"
        if users_inside:
            kind = "kInput" if cluster.root.opcode == "reduce" else "kLoop"
            return True, f"{kind}: all users of the producer are in the fusion"
        if p.opcode in _CHEAP:
            return "duplicate", "cheap producer with other users"
        return False, "producer has users outside the fusion"

    def _output_fusion_ok(self, p, consumer, cluster, users_inside):
        if cluster.root.opcode == "reduce" or not cluster.root.is_elementwise():
            return False, f"kOutput needs an elementwise fusion root, not {cluster.root.opcode}"
        if cluster.has_contraction():
            return False, "kOutput fusion already has a dot/convolution"
        if not users_inside:
            return False, f"{p.opcode} result has users outside the fusion"
        if not self._elementwise_path_to_root(consumer, cluster, p.shape.dims):
            return False, f"{p.opcode} value must reach the root through same-index elementwise ops"
        return True, f"kOutput: {p.opcode} with an elementwise tail"

    def _elementwise_path_to_root(self, m, cluster, dims):
        if not (m.is_elementwise() and m.shape.dims == dims):
            return False
        if m is cluster.root:
            return True
        return all(self._elementwise_path_to_root(u, cluster, dims)
                   for u in self.users[m] if u in cluster.members)

    def _duplicate_into(self, p, cluster):
        clone = HloInstruction(p.opcode, p.shape, p.operands, p.attrs, p.called,
                               name=self.comp.module.unique_name(p.opcode), literal=p.literal,
                               metadata=p.metadata)
        self.comp.instructions.insert(self.comp.instructions.index(p) + 1, clone)
        self.pos[clone] = self.pos[p]
        self.users[clone] = []
        for m in cluster.members:
            if p in m.operands:
                m.operands = [clone if o is p else o for o in m.operands]
                self.users[p] = [u for u in self.users[p] if u is not m]
                self.users[clone].append(m)
        for o in clone.operands:
            self.users[o].append(clone)
        return clone

    # --- turning a cluster into a fusion instruction -----------------------------------
    def _materialize(self, module, cluster):
        comp = self.comp
        members = sorted(cluster.members, key=lambda i: comp.instructions.index(i))
        if any(m.opcode in _CONTRACTIONS for m in members):
            kind = "kOutput"
        elif cluster.root.opcode == "reduce":
            kind = "kInput"
        else:
            kind = "kLoop"
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
        fusion = HloInstruction("fusion", cluster.root.shape, params, {"kind": kind}, [fused],
                                name=module.unique_name("fusion"))
        comp.instructions.insert(comp.instructions.index(cluster.root), fusion)
        comp.replace_all_uses(cluster.root, fusion)
        comp.instructions = [i for i in comp.instructions if i not in cluster.members]


def count_kernels(module) -> int:
    """Instructions of the entry computation that launch a kernel (reshapes are bitcasts)."""
    return sum(1 for i in module.entry.instructions if i.opcode not in NOT_KERNELS)


def is_conv_bias_relu(instr) -> bool:
    """A kOutput fusion computing ``maximum(add(convolution, broadcast bias), 0)``."""
    if instr.opcode != "fusion" or instr.attrs.get("kind") != "kOutput":
        return False
    ops = {i.opcode for i in instr.fused_computation.instructions}
    return {"convolution", "add", "maximum"} <= ops and instr.fused_computation.root.opcode == "maximum"
