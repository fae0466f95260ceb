"""HLO: the IR the passes and backends work on (``xla/hlo/ir``), its printer and parser, the
verifier, the evaluator and the lowering from jaxprs."""
from minixla.hlo.ir import HloComputation, HloInstruction, HloModule, Shape
from minixla.hlo.lowering import lower_jaxpr, lowering_rules
from minixla.hlo.parser import HloParseError, parse
