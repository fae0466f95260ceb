"""The pass framework (``xla/hlo/pass/hlo_pass_interface.h``, ``hlo_pass_pipeline.h``,
``hlo_pass_fix.h``).

A pass is an object with a ``name`` and ``run(module) -> bool`` that says whether it changed
the module. A ``PassPipeline`` runs passes in order (pipelines nest); ``FixedPoint`` repeats a
pass until it stops changing the module. Every run is logged with its wall time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass


class HloPass:
    """Base class of HLO passes: override ``name`` and ``run``."""
    name = "pass"

    def run(self, module) -> bool:
        raise NotImplementedError


@dataclass
class PassLogEntry:
    """One pass run: its (pipeline-qualified) name, whether it changed the module, its time in ms."""
    name: str
    changed: bool
    ms: float


class PassPipeline(HloPass):
    """Run ``passes`` in order. ``log`` collects a ``PassLogEntry`` per pass run.

    ``after_pass(name, module)`` (optional) is called after every pass, e.g. to dump or verify.
    """

    def __init__(self, name: str, passes, after_pass=None):
        self.name = name
        self.passes = list(passes)
        self.after_pass = after_pass
        self.log: list[PassLogEntry] = []

    def run(self, module) -> bool:
        changed = False
        for p in self.passes:
            t0 = time.perf_counter()
            root = module.entry.root if module.entry is not None else None
            c = p.run(module)
            if root is not None and module.entry.root is not root:
                _keep_root_sharding(root, module.entry.root)
            ms = (time.perf_counter() - t0) * 1e3
            self.log.append(PassLogEntry(f"{self.name}/{p.name}", bool(c), ms))
            if isinstance(p, (PassPipeline, FixedPoint)):
                self.log.extend(p.log)
                p.log = []
            if self.after_pass is not None:
                # pipeline-qualified (``simplify/dce`` vs ``optimize/dce``): dumps tell them apart
                self.after_pass(f"{self.name}/{p.name}", module)
            changed |= bool(c)
        return changed

    def __str__(self):
        """The passes in order, nested pipelines indented (what ``print(pipeline)`` shows)."""
        lines = [f"{self.name}:"]
        for p in self.passes:
            lines += ["    " + line for line in str(p).splitlines()] if isinstance(p, (PassPipeline, FixedPoint)) \
                else [f"    {p.name}"]
        return "\n".join(lines)


def _keep_root_sharding(old, new) -> None:
    """The entry root's ``sharding`` (``out_shardings``) moves to the instruction a pass put in
    its place, as XLA's ``ReplaceInstruction`` keeps it (not onto a parameter: its own sharding
    is its input's; the output's stays in ``module.config``)."""
    if "sharding" in old.attrs and "sharding" not in new.attrs and new.opcode != "parameter" \
            and new.shape == old.shape:
        new.attrs["sharding"] = old.attrs["sharding"]


class FixedPoint(HloPass):
    """Repeat ``pass_`` until a run reports no change, at most ``max_rounds`` times (``HloPassFix``)."""

    def __init__(self, pass_: HloPass, max_rounds: int = 25):
        self.pass_ = pass_
        self.max_rounds = max_rounds
        self.name = f"fixed-point({pass_.name})"
        self.log: list[PassLogEntry] = []

    def __str__(self):
        inner = str(self.pass_).splitlines()
        return "\n".join([f"{inner[0][:-1]}, to a fixed point (at most {self.max_rounds} rounds):"] + inner[1:])

    def run(self, module) -> bool:
        changed = False
        for _ in range(self.max_rounds):
            c = self.pass_.run(module)
            if isinstance(self.pass_, PassPipeline):
                self.log.extend(self.pass_.log)
                self.pass_.log = []
            if not c:
                break
            changed = True
        return changed
