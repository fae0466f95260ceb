"""The HLO IR: modules, computations and instructions, as in ``xla/hlo/ir``.

An ``HloModule`` owns computations; the ``entry`` computation is the program, others are
called by it (``reduce``'s ``to_apply`` region, a ``fusion``'s fused computation). An
``HloComputation`` keeps its instructions in a topological order (operands before users)
and has one ``root``. An ``HloInstruction`` has an ``opcode``, a result ``Shape``, operand
instructions and opcode-specific attributes (``attrs``). Unlike a jaxpr, HLO never
broadcasts implicitly: elementwise operands all have the result's dims.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # (networkx is imported where a graph is built: it costs ~0.2 s at import)
    import networkx as nx

#: XLA's element type names.
_XLA_DTYPE_NAMES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "s64", "int32": "s32", "int16": "s16", "int8": "s8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool": "pred",
}


#: ``xla_dtype_name``'s answers by the object asked about (``np.dtype(...).name`` costs ~10 us:
#: printing shapes in HLO text, cache keys and verifier messages asks it again and again).
_XLA_DTYPE_NAME_MEMO: dict = {}


def xla_dtype_name(dtype) -> str:
    try:
        return _XLA_DTYPE_NAME_MEMO[dtype]
    except (KeyError, TypeError):  # (TypeError: an unhashable dtype-like)
        name = _XLA_DTYPE_NAMES[np.dtype(dtype).name]
    try:
        _XLA_DTYPE_NAME_MEMO[dtype] = name
    except TypeError:
        pass
    return name


@dataclass(frozen=True)
class Shape:
    """An array shape: element type and dims, row-major (XLA layout ``{n-1,...,0}``).

    A tuple shape (``tuple_shapes`` set, ``dtype``/``dims`` unused) is the result of ``tuple``.
    """
    dtype: np.dtype | None
    dims: tuple = ()
    tuple_shapes: tuple | None = None

    def __post_init__(self):
        if self.dtype is not None:
            object.__setattr__(self, "dtype", np.dtype(self.dtype))
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))

    @staticmethod
    def tuple_of(shapes) -> "Shape":
        return Shape(None, (), tuple(shapes))

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.dims, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Size of the array in bytes (0 for tuples: they own no data)."""
        return 0 if self.is_tuple else self.size * self.dtype.itemsize

    def __str__(self):
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        text = f"{xla_dtype_name(self.dtype)}[{','.join(map(str, self.dims))}]"
        if self.dims:
            text += "{" + ",".join(str(d) for d in reversed(range(self.rank))) + "}"
        return text


#: elementwise opcodes (one output element from the same-index operand elements).
ELEMENTWISE_UNARY = {
    "negate", "abs", "sign", "floor", "ceil", "exponential", "log", "tanh", "logistic",
    "sqrt", "rsqrt", "not", "convert",
    "exponential-minus-one", "log-plus-one", "round-nearest-afz", "round-nearest-even", "sine",
    "cosine", "tan", "cbrt", "erf", "erfc", "is-finite", "bitcast-convert",
}
ELEMENTWISE_BINARY = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "and", "or",
                      "compare", "xor", "remainder", "power", "atan2", "shift-left",
                      "shift-right-logical", "shift-right-arithmetic"}
ELEMENTWISE = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | {"select", "clamp", "fma"}
COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


class HloInstruction:
    """One HLO instruction: ``%name = shape opcode(operands), attr=value, ...``.

    Attributes:
      opcode: XLA's opcode name (``add``, ``broadcast``, ``reduce``, ``fusion``, ...).
      shape: result ``Shape``.
      operands: list of ``HloInstruction``.
      attrs: opcode-specific attributes, e.g. ``dimensions`` for broadcast/transpose/reduce,
        ``direction`` for compare, ``kind`` for fusion.
      called: called computations (``to_apply`` of reduce, the fused computation of a fusion).
      parameter_number: for ``parameter``. literal: numpy array for ``constant``.
      metadata: dict with the jaxpr op name and the user's source line.
    """

    def __init__(self, opcode, shape, operands=(), attrs=None, called=(), name=None,
                 parameter_number=None, literal=None, metadata=None):
        self.opcode = opcode
        self.shape = shape
        self.operands = list(operands)
        self.attrs = dict(attrs or {})
        self.called = list(called)
        self.name = name
        self.parameter_number = parameter_number
        self.literal = literal
        self.metadata = metadata or {}

    def __repr__(self):
        return f"<HloInstruction %{self.name} = {self.shape} {self.opcode}>"

    @property
    def fused_computation(self) -> "HloComputation":
        assert self.opcode == "fusion"
        return self.called[0]

    def is_elementwise(self) -> bool:
        return self.opcode in ELEMENTWISE


class HloComputation:
    """A list of instructions in topological order with one ``root``.

    ``parameters[i]`` is the ``parameter(i)`` instruction. Names are unique within the module.
    """

    def __init__(self, name: str):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.module: HloModule | None = None

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.parameter_number)

    def add_instruction(self, instr: HloInstruction) -> HloInstruction:
        if instr.name is None:
            instr.name = self.module.unique_name(instr.opcode) if self.module else instr.opcode
        self.instructions.append(instr)
        return instr

    def users(self) -> dict:
        """Map instruction -> list of its users (an instruction using x twice is listed twice)."""
        users = {i: [] for i in self.instructions}
        for i in self.instructions:
            for o in i.operands:
                users[o].append(i)
        return users

    def graph(self) -> nx.DiGraph:
        """The dataflow graph: an edge operand -> user for every use."""
        import networkx as nx
        g = nx.DiGraph()
        g.add_nodes_from(self.instructions)
        for i in self.instructions:
            for o in i.operands:
                g.add_edge(o, i)
        return g

    def replace_all_uses(self, old: HloInstruction, new: HloInstruction):
        for i in self.instructions:
            i.operands = [new if o is old else o for o in i.operands]
        if self.root is old:
            self.root = new

    def replace_uses(self, mapping: dict) -> None:
        """Replace every use of each key of ``mapping`` by its value (the root included), in one
        O(n) sweep; chains ``a -> b -> c`` are followed. Use this instead of calling
        ``replace_all_uses`` once per instruction, which is O(n) each time."""
        if not mapping:
            return

        def resolve(i):
            while i in mapping:
                i = mapping[i]
            return i
        for instr in self.instructions:
            if any(o in mapping for o in instr.operands):
                instr.operands = [resolve(o) for o in instr.operands]
        self.root = resolve(self.root)

    def sort_topologically(self):
        """Re-establish operands-before-users order (stable: keeps the current order when valid)."""
        import networkx as nx
        pos = {i: n for n, i in enumerate(self.instructions)}
        g = self.graph()
        self.instructions = list(nx.lexicographical_topological_sort(g, key=lambda i: pos[i]))

    def remove_dead(self) -> bool:
        """Drop instructions the root does not depend on (parameters are kept)."""
        # (the root's ancestors by a walk over operands rather than networkx's ``ancestors``:
        # lowering runs this on every trace, and a process whose programs all come from the
        # persistent cache then never imports networkx, ~0.2 s)
        live, todo = {self.root}, [self.root]
        while todo:
            for o in todo.pop().operands:
                if o not in live:
                    live.add(o)
                    todo.append(o)
        before = len(self.instructions)
        self.instructions = [i for i in self.instructions if i in live or i.opcode == "parameter"]
        return len(self.instructions) != before

    def called_computations(self):
        for i in self.instructions:
            yield from i.called


class HloModule:
    """An HLO module: the entry computation and every computation it (transitively) calls."""

    def __init__(self, name: str):
        self.name = name
        self.entry: HloComputation | None = None
        self._counter = itertools.count()
        self._names: set = set()
        #: XLA's ``HloModuleConfig``, the part minixla uses: ``device_assignment`` (the jax
        #: device ids of logical devices 0..n-1 of a sharded program), ``num_partitions``,
        #: ``output_shardings`` (an ``HloSharding`` or None per output), ``user_shardings`` (the
        #: jax.sharding objects they came from; see minixla.sharding.api)
        self.config: dict = {}

    def unique_name(self, base: str) -> str:
        while True:
            name = f"{base}.{next(self._counter)}"
            if name not in self._names:
                self._names.add(name)
                return name

    def new_computation(self, base: str) -> HloComputation:
        comp = HloComputation(self.unique_name(base))
        comp.module = self
        return comp

    @property
    def computations(self) -> list[HloComputation]:
        """Callees before callers, the entry last (the order XLA prints them in)."""
        order, seen = [], set()

        def visit(c):
            if id(c) in seen:
                return
            seen.add(id(c))
            for callee in c.called_computations():
                visit(callee)
            order.append(c)
        visit(self.entry)
        return order

    def clone(self) -> "HloModule":
        """A copy whose computations and instructions are new objects (literals, attributes and
        metadata are shared: passes replace them, never mutate them). Iterative and O(n),
        unlike ``copy.deepcopy``, which recurses along operand chains."""
        new = HloModule(self.name)
        n = next(self._counter)
        self._counter, new._counter = itertools.count(n), itertools.count(n)
        new._names = set(self._names)
        new.config = dict(self.config)
        comps = {}
        for comp in self.computations:  # callees first
            c = HloComputation(comp.name)
            c.module = new
            instrs = {}
            for i in comp.instructions:
                instrs[i] = HloInstruction(
                    i.opcode, i.shape, [instrs[o] for o in i.operands], i.attrs,
                    [comps[k] for k in i.called], i.name, i.parameter_number, i.literal, dict(i.metadata))
                c.instructions.append(instrs[i])
            c.root = instrs[comp.root]
            comps[comp] = c
        new.entry = comps[self.entry]
        for attr in ("num_partitions", "spmd_global_shapes"):  # (set by the SPMD passes)
            if hasattr(self, attr):
                setattr(new, attr, getattr(self, attr))
        return new

    def to_string(self, print_metadata: bool = False, print_large_constants: bool = False) -> str:
        from minixla.hlo.printer import print_module
        return print_module(self, print_metadata=print_metadata,
                            print_large_constants=print_large_constants)

    def __str__(self):
        return self.to_string()
