"""Compiler dumps, like XLA's ``--xla_dump_to`` / ``--xla_dump_hlo_pass_re``.

Environment variables (read at every ``compile()``):

- ``MINIXLA_DUMP=dir``: write what each compilation sees, stage by stage, into ``dir``.
- ``MINIXLA_DUMP_PASS_RE=regex``: dump the HLO after a pass only if the regex matches (``re.search``)
  the pass name (``dce``, ``cse``, ``constant-folding``, ``algebraic-simplifier``, ``fusion``, ...).
  Unset: no per-pass HLO (XLA's default too); ``.*``: after every pass.

Files of one compilation share the prefix ``module_NNNN.<module name>.`` and a step number,
so ``ls`` lists them in pipeline order::

    module_0001.jit_f.0000.jaxpr.txt
    module_0001.jit_f.0001.before_optimizations.hlo.txt
    module_0001.jit_f.0002.after_simplify.dce.hlo.txt      (MINIXLA_DUMP_PASS_RE; pipeline.pass)
    ...
    module_0001.jit_f.0012.after_optimizations.hlo.txt     the final HLO
    module_0001.jit_f.0013.pass_log.txt                    pass, changed?, ms
    module_0001.jit_f.0014.fusion_log.txt                  every fusion decision and its rule
    module_0001.jit_f.0015.buffer_assignment.txt
    module_0001.jit_f.0016.ir-no-opt.ll                    LLVM IR as emitted   (llvm backend)
    module_0001.jit_f.0017.ir-with-opt.ll                  LLVM IR after -O3
    module_0001.jit_f.0018.s                               the assembly

HLO dumps print every constant in full and include metadata, so each parses back with
``minixla.hlo.parse``.
"""
from __future__ import annotations

import itertools
import os
import re

_module_ids = itertools.count(1)


class Dumper:
    """Writes one compilation's dump files (a no-op when ``MINIXLA_DUMP`` is unset)."""

    def __init__(self, module_name: str):
        self.dir = os.environ.get("MINIXLA_DUMP") or None
        pass_re = os.environ.get("MINIXLA_DUMP_PASS_RE")
        self.pass_re = re.compile(pass_re) if pass_re else None
        self.step = itertools.count()
        self.files: list[str] = []
        if self.dir:
            os.makedirs(self.dir, exist_ok=True)
            safe = re.sub(r"[^\w.\-]", "_", module_name)
            self.prefix = f"module_{next(_module_ids):04d}.{safe}"

    @property
    def enabled(self) -> bool:
        return self.dir is not None

    def write(self, what: str, text: str, ext: str = "txt") -> None:
        if not self.enabled:
            return
        safe = re.sub(r"[^\w.\-]", "_", what)
        name = f"{self.prefix}.{next(self.step):04d}.{safe}.{ext}" if safe else \
            f"{self.prefix}.{next(self.step):04d}.{ext}"
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        self.files.append(path)

    def hlo(self, what: str, module) -> None:
        if self.enabled:
            self.write(what, module.to_string(print_metadata=True, print_large_constants=True),
                       "hlo.txt")

    def after_pass(self, pass_name: str, module) -> None:
        if self.enabled and self.pass_re is not None and self.pass_re.search(pass_name):
            self.hlo(f"after_{pass_name.replace('/', '.')}", module)

    def backend(self, executable) -> None:
        """LLVM IR before/after optimization and assembly, when the executable has them."""
        if not self.enabled:
            return
        for attr, what, ext in (("llvm_ir", "ir-no-opt", "ll"), ("optimized_llvm_ir", "ir-with-opt", "ll"),
                                ("asm", "", "s")):
            text = getattr(executable, attr, None)
            if text is not None:
                self.write(what, text, ext)
