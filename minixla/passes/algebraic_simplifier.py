"""The algebraic simplifier (XLA's ``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``).

Each rule rewrites one instruction into something cheaper that computes *the same bits for
every input*: every NaN, ±inf, ±0.0, subnormal, overflowing float and wrapping integer. Next
to each rule is the reason it holds. A "constant c" below is a ``constant`` whose elements
all have the bits of c, or a ``broadcast`` of such a scalar constant.

Subnormals: the backends flush subnormal floats to zero in arithmetic (like XLA:CPU and JAX
eager), so for a subnormal x, ``x * 1`` is 0.0 and not x. The identity rules A1, A3, A4, A6 and
A9 on float32/float64/bfloat16 therefore fire only when x can never be subnormal: x is the
result of an arithmetic instruction (already flushed) or a constant without subnormals
(``never_subnormal``). On a parameter they do not fire.

Arithmetic
  A1  add(x, -0.0) -> x (floats)        x + (-0.0) is x for every x: -0.0 + -0.0 = -0.0,
                                        +0.0 + -0.0 = +0.0, NaN stays NaN, inf stays inf.
                                        (x + 0.0 is NOT x: -0.0 + 0.0 = +0.0.)
  A2  add(x, 0) -> x (integers, pred)   exact; for pred, add is ``or``.
  A3  subtract(x, +0.0) -> x (floats)   x - (+0.0) = x + (-0.0), see A1. (x - (-0.0) is not x.)
      subtract(x, 0) -> x (integers)
  A4  multiply(x, 1) -> x               x * 1 is exact for every float (NaN, inf, -0.0
                                        included) and integer; for pred, multiply is ``and``.
  A5  multiply(x, 0) -> 0 (integers, pred only)   wrapping integer products with 0 are 0.
                                        (Not for floats: NaN*0 = NaN, inf*0 = NaN, -1*0 = -0.0.)
  A6  divide(x, 1) -> x                 x / 1 is exact for floats; truncating integer
                                        division by 1 is x (no INT_MIN/-1 case).
  A7  negate(negate(x)) -> x            a sign-bit flip twice (floats); two's-complement
                                        negation twice, INT_MIN included.
  A8  not(not(x)) -> x                  bitwise/logical complement twice.
  A9  maximum(x, x), minimum(x, x), and(x, x), or(x, x) -> x
                                        max(NaN, NaN) is NaN, max(-0.0, -0.0) is -0.0, ...
  A10 compare(x, x) -> true for EQ/LE/GE, false for NE/LT/GT (integers and pred only)
                                        (not for floats: NaN == NaN is false).
  A11 select(true, a, b) -> a, select(false, a, b) -> b, select(p, a, a) -> a
  A12 convert(x) to x's own dtype -> x  a no-op. (convert(convert(x)) is not simplified:
                                        narrowing then widening loses information.)

  A13 dot(a, b) whose contracting dims all have extent 1 -> multiply(broadcast(a'), broadcast(b'))
                                        (a', b': a and b without the extent-1 dims, batch dims
                                        first). Each output element is one product a*b, exactly
                                        XLA's definition; a GEMM would add it to a +0.0
                                        accumulator and lose the sign of a -0.0 product.
  A14 reduce(x, init) whose reduced dims all have extent 1 -> reshape(x)
                                        each output element is one element of x. XLA's simplifier
                                        drops the init (it must be the reducer's identity), and so
                                        does JAX eager, which XLA compiles op by op: sum([-0.0]) is
                                        -0.0 (0.0 + -0.0 would be +0.0).
  A15 convolution(x, w) with a window of ones (no stride, padding or dilation), one batch group
      and one input and one output feature per feature group (a depthwise 1x1 conv, or a 1x1
      conv of one feature) -> multiply(x', broadcast(w')) (x' in the output's dim order, w' the
      vector of the w's output features). Each output element is one product: XLA's
      simplifier makes the same rewrite (SimplifyConvToMultiply), so its -0.0 products stay
      -0.0, where every convolution it keeps starts its sums from +0.0 (0.0 + -0.0 = +0.0).

Shapes (data movement only, so exact for every value)
  S1  reshape(x) to x's own dims -> x; reshape(reshape(x)) -> reshape(x)
  S2  transpose(x) by the identity -> x; transpose(transpose(x)) -> transpose(x) by the
      composed permutation (-> x when that is the identity)
  S3  slice(x) of all of x -> x; slice(slice(x)) -> one slice with composed start/stride
  S4  broadcast(x) adding no dims -> x; broadcast(broadcast(x)) -> one broadcast
  S5  reshape, transpose or slice of broadcast(scalar) -> broadcast(scalar) of the new dims
  S6  an elementwise op whose operands are all broadcasts of scalars -> broadcast of the op on
      the scalars (each output element is that op on the same scalars); this also lets
      constant folding fold it.
  S7  transpose(dot(a, b)) by (1, 0) of a 2-D dot without batch dims, its only use ->
      dot(b, a) (contracting dims swapped): each element is the same sum of the same
      products, and the GEMM writes the transposed result directly instead of a later kernel
      reading it with a stride (a backward scan's weight gradient, ``h^T @ dz``).

Not rules here, on purpose: x*0 -> 0, x-x -> 0, x/x -> 1, x+0.0 -> x for floats,
log(exp(x)) -> x, float re-association (a+b)+c -> a+(b+c) (different rounding and overflow).

The pass visits each computation once in program order (operands before users), so a
chain of rewrites collapses in one run; it is O(n) per run.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.evaluator import flush_denormals, is_float
from minixla.hlo.ir import ELEMENTWISE, HloInstruction, Shape
from minixla.hlo.lowering import parse_dim_labels
from minixla.passes.pipeline import HloPass


def scalar_constant_bits(instr):
    """The scalar value (0-d array) if every element of ``instr`` is one constant value,
    else None: a rank-0 constant, a broadcast of one, or a constant array of equal bits."""
    if instr.opcode == "broadcast" and instr.operands[0].shape.rank == 0:
        instr = instr.operands[0]
    if instr.opcode != "constant" or instr.shape.size == 0:
        return None
    lit = np.ascontiguousarray(instr.literal)
    first = lit.reshape(-1)[:1]
    if lit.size > 1 and lit.view(np.uint8).reshape(lit.size, -1).tobytes() != first.view(np.uint8).tobytes() * lit.size:
        return None
    return first.reshape(())


def _is(instr, value, *, negative_zero=None) -> bool:
    """Whether every element of ``instr`` equals ``value`` (with ``negative_zero`` checking
    the sign of a float zero)."""
    c = scalar_constant_bits(instr)
    if c is None:
        return False
    v = c.item()
    if isinstance(v, float) and np.isnan(v):
        return False
    if v != value:
        return False
    if negative_zero is not None:
        return bool(np.signbit(c)) == negative_zero
    return True


def _is_int_like(dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


#: opcodes whose float result is computed by floating-point arithmetic units, so it is already
#: flushed. (Not max/min/sign/select-like ops: a backend may implement them by selecting an
#: operand's bits, which keeps a subnormal.)
FLUSHED_RESULTS = {"add", "subtract", "multiply", "divide", "sqrt", "rsqrt", "exponential", "log",
                   "tanh", "logistic", "power", "exponential-minus-one", "log-plus-one", "dot",
                   "convolution"}


def never_subnormal(x) -> bool:
    """Whether no element of ``x`` can be a subnormal float that arithmetic would flush.

    The backends flush subnormals to zero in arithmetic (FTZ/DAZ, as XLA:CPU and JAX eager),
    so ``x * 1`` is 0.0, not x, for a subnormal x: the identity rules below hold bit for bit
    only when x is already flushed, i.e. x is the result of an arithmetic instruction
    (``FLUSHED_RESULTS``), a
    constant without subnormals, an integer, or a float16 (computed in f32, never flushed).
    """
    name = np.dtype(x.shape.dtype).name
    if name not in ("float32", "float64", "bfloat16"):
        return True
    if x.opcode == "constant":
        lit = np.asarray(x.literal).reshape(-1)  # (numpy cannot view a 0-d array as bytes)
        return bool(np.array_equal(flush_denormals(lit).view(np.uint8), lit.view(np.uint8)))
    if x.opcode == "broadcast" and x.operands[0].opcode == "constant":
        return never_subnormal(x.operands[0])
    return x.opcode in FLUSHED_RESULTS


class AlgebraicSimplifier(HloPass):
    """Apply the rules of the module docstring (one sweep; run it to a fixed point)."""
    name = "algebraic-simplifier"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            changed |= self._run_on(module, comp)
        return changed

    def _run_on(self, module, comp) -> bool:
        self.module = module
        self.users = comp.users()  # (as the sweep starts: S7 asks whether a dot has one use)
        self.root = comp.root
        self.out = []
        mapping: dict = {}
        for instr in comp.instructions:
            if any(o in mapping for o in instr.operands):
                instr.operands = [mapping.get(o, o) for o in instr.operands]
            self.out.append(instr)
            new = self.simplify(instr)
            if new is not None and new is not instr:
                assert new.shape == instr.shape, (instr, new)
                mapping[instr] = new
        comp.instructions = self.out  # replaced instructions are left for DCE
        if not mapping:
            return False
        comp.root = mapping.get(comp.root, comp.root)
        return True

    # --- building replacements (appended after the instruction being simplified) ---------
    def _emit(self, opcode, shape, operands, like, **attrs):
        instr = HloInstruction(opcode, shape, operands, attrs, name=self.module.unique_name(opcode),
                               metadata=dict(like.metadata))
        self.out.append(instr)
        return instr

    def _filled(self, value, shape: Shape, like):
        """A ``shape`` array of ``value``: a scalar constant, broadcast unless rank 0."""
        c = HloInstruction("constant", Shape(shape.dtype, ()), literal=np.asarray(value, shape.dtype),
                           name=self.module.unique_name("constant"))
        self.out.append(c)
        if shape.rank == 0:
            return c
        return self._emit("broadcast", shape, [c], like, dimensions=())

    # --- the rules ------------------------------------------------------------------------
    def simplify(self, instr):
        """The replacement of ``instr`` (an instruction of the same shape), or None."""
        rule = _RULES.get(instr.opcode)
        new = rule(self, instr) if rule is not None else None
        if new is None and instr.opcode in ELEMENTWISE and instr.operands:
            new = self.sink_broadcast(instr)
        return new

    def add(self, instr):
        x, y = instr.operands
        flt = is_float(instr.shape.dtype)
        for a, b in ((x, y), (y, x)):
            if flt and _is(b, 0.0, negative_zero=True) and never_subnormal(a):  # A1
                return a
            if not flt and _is(b, 0):  # A2
                return a
        return None

    def subtract(self, instr):
        x, y = instr.operands
        if is_float(instr.shape.dtype):
            return x if _is(y, 0.0, negative_zero=False) and never_subnormal(x) else None  # A3
        return x if _is(y, 0) else None

    def multiply(self, instr):
        x, y = instr.operands
        for a, b in ((x, y), (y, x)):
            if _is(b, 1) and never_subnormal(a):  # A4
                return a
            if _is_int_like(instr.shape.dtype) and _is(b, 0):  # A5
                return b
        return None

    def divide(self, instr):
        x, y = instr.operands
        return x if _is(y, 1) and never_subnormal(x) else None  # A6

    def negate(self, instr):
        x, = instr.operands
        return x.operands[0] if x.opcode == "negate" else None  # A7

    def not_(self, instr):
        x, = instr.operands
        return x.operands[0] if x.opcode == "not" else None  # A8

    def idempotent(self, instr):
        x, y = instr.operands
        return x if x is y and never_subnormal(x) else None  # A9

    def compare(self, instr):
        x, y = instr.operands
        if x is not y or not _is_int_like(x.shape.dtype):  # A10
            return None
        return self._filled(instr.attrs["direction"] in ("EQ", "LE", "GE"), instr.shape, instr)

    def select(self, instr):
        p, a, b = instr.operands
        if a is b:
            return a
        if _is(p, True):  # A11
            return a
        if _is(p, False):
            return b
        return None

    def convert(self, instr):
        x, = instr.operands
        return x if x.shape == instr.shape else None  # A12

    def reshape(self, instr):
        x, = instr.operands
        if x.shape.dims == instr.shape.dims:  # S1
            return x
        if x.opcode == "reshape":
            inner = x.operands[0]
            return inner if inner.shape.dims == instr.shape.dims else \
                self._emit("reshape", instr.shape, [inner], instr)
        return self._of_scalar_broadcast(instr)  # S5

    def transpose(self, instr):
        x, = instr.operands
        perm = tuple(instr.attrs["dimensions"])
        if perm == tuple(range(len(perm))):  # S2
            return x
        if x.opcode == "transpose":
            inner = x.attrs["dimensions"]
            composed = tuple(inner[p] for p in perm)
            if composed == tuple(range(len(composed))):
                return x.operands[0]
            return self._emit("transpose", instr.shape, [x.operands[0]], instr, dimensions=composed)
        if (x.opcode == "dot" and perm == (1, 0) and not x.attrs["lhs_batch_dims"]
                and x.operands[0].shape.rank == 2 and x.operands[1].shape.rank == 2
                and len(self.users.get(x, ())) == 1 and x is not self.root):  # S7
            a, b = x.operands
            attrs = dict(x.attrs, lhs_contracting_dims=tuple(x.attrs["rhs_contracting_dims"]),
                         rhs_contracting_dims=tuple(x.attrs["lhs_contracting_dims"]))
            return self._emit("dot", instr.shape, [b, a], x, **attrs)
        return self._of_scalar_broadcast(instr)  # S5

    def slice(self, instr):
        x, = instr.operands
        spec = instr.attrs["slice"]
        if all(s == 0 and lim == n and st == 1 for (s, lim, st), n in zip(spec, x.shape.dims)):  # S3
            return x
        if x.opcode == "slice":
            composed = []
            for (s1, _, st1), (s2, l2, st2), n in zip(x.attrs["slice"], spec, instr.shape.dims):
                start, stride = s1 + s2 * st1, st1 * st2
                # (an empty range is [0:0:1]: its composed start may lie past the dim's end)
                composed.append((start, start + (n - 1) * stride + 1, stride) if n else (0, 0, 1))
            return self._emit("slice", instr.shape, [x.operands[0]], instr, slice=tuple(composed))
        return self._of_scalar_broadcast(instr)  # S5

    def broadcast(self, instr):
        x, = instr.operands
        dims = tuple(instr.attrs["dimensions"])
        if x.shape.dims == instr.shape.dims and dims == tuple(range(x.shape.rank)):  # S4
            return x
        if x.opcode == "broadcast":
            inner = tuple(x.attrs["dimensions"])
            return self._emit("broadcast", instr.shape, [x.operands[0]], instr,
                              dimensions=tuple(dims[d] for d in inner))
        return None

    def dot(self, instr):
        """A13."""
        lhs, rhs = instr.operands
        a = instr.attrs
        lc, rc = a["lhs_contracting_dims"], a["rhs_contracting_dims"]
        if any(lhs.shape.dims[d] != 1 for d in lc) or lhs.shape.dtype != rhs.shape.dtype:
            return None
        nb = len(a["lhs_batch_dims"])
        nlf = lhs.shape.rank - nb - len(lc)
        lhs_b = self._degenerate_dot_operand(lhs, a["lhs_batch_dims"], lc, range(nb + nlf), instr)
        rhs_b = self._degenerate_dot_operand(rhs, a["rhs_batch_dims"], rc,
                                             list(range(nb)) + list(range(nb + nlf, instr.shape.rank)), instr)
        if instr.shape.dtype != lhs.shape.dtype:  # (f16 operands, f32 result: the product is exact in f32)
            lhs_b, rhs_b = (self._emit("convert", instr.shape, [x], instr) for x in (lhs_b, rhs_b))
        return self._emit("multiply", instr.shape, [lhs_b, rhs_b], instr)

    def reduce(self, instr):
        """A14."""
        if len(instr.operands) != 2 or instr.shape.is_tuple:
            return None
        x = instr.operands[0]
        if x.shape.dtype != instr.shape.dtype or any(x.shape.dims[d] != 1 for d in instr.attrs["dimensions"]):
            return None
        return self._emit("reshape", instr.shape, [x], instr)

    def convolution(self, instr):
        """A15."""
        lhs, rhs = instr.operands
        a, w = instr.attrs, instr.attrs["window"]
        if (int(a.get("batch_group_count", 1)) != 1 or lhs.shape.dtype != rhs.shape.dtype
                or any(int(v) != 1 for k in ("size", "stride", "lhs_dilate", "rhs_dilate") for v in w[k])
                or any(tuple(p) != (0, 0) for p in w["pad"])):
            return None
        dn = parse_dim_labels(a["dim_labels"])
        groups = int(a.get("feature_group_count", 1))
        if lhs.shape.dims[dn.lhs_spec[1]] != groups or instr.shape.dims[dn.out_spec[1]] != groups:
            return None
        perm = [0] * instr.shape.rank  # out dim out_spec[k] is lhs dim lhs_spec[k]
        for o, i in zip(dn.out_spec, dn.lhs_spec):
            perm[o] = i
        x = lhs
        if perm != sorted(perm):
            x = self._emit("transpose", Shape(lhs.shape.dtype, [lhs.shape.dims[d] for d in perm]), [lhs], instr,
                           dimensions=tuple(perm))
        v = self._emit("reshape", Shape(rhs.shape.dtype, [groups]), [rhs], instr)  # (every other dim is 1)
        if instr.shape.dtype != lhs.shape.dtype:  # (f16/bf16 convs compute in f32: the product is exact)
            x = self._emit("convert", Shape(instr.shape.dtype, x.shape.dims), [x], instr)
            v = self._emit("convert", Shape(instr.shape.dtype, [groups]), [v], instr)
        v = self._emit("broadcast", instr.shape, [v], instr, dimensions=(dn.out_spec[1],))
        return self._emit("multiply", instr.shape, [x, v], instr)

    def _degenerate_dot_operand(self, x, batch, contracting, out_dims, like):
        """``x`` without its contracting dims, batch dims first, broadcast to the dot's output."""
        kept = [d for d in range(x.shape.rank) if d not in contracting]
        if contracting:
            x = self._emit("reshape", Shape(x.shape.dtype, [x.shape.dims[d] for d in kept]), [x], like)
        order = [kept.index(d) for d in batch] + [i for i, d in enumerate(kept) if d not in batch]
        if order != sorted(order):
            x = self._emit("transpose", Shape(x.shape.dtype, [x.shape.dims[i] for i in order]), [x], like,
                           dimensions=tuple(order))
        return self._emit("broadcast", Shape(x.shape.dtype, like.shape.dims), [x], like,
                          dimensions=tuple(out_dims))

    def _of_scalar_broadcast(self, instr):
        x, = instr.operands
        if x.opcode == "broadcast" and x.operands[0].shape.rank == 0:
            return self._emit("broadcast", instr.shape, [x.operands[0]], instr, dimensions=())
        return None

    def sink_broadcast(self, instr):
        """S6: op(broadcast(a), broadcast(b), ...) -> broadcast(op(a, b, ...)) for scalars a, b."""
        if instr.shape.rank == 0 or not all(
                o.opcode == "broadcast" and o.operands[0].shape.rank == 0 for o in instr.operands):
            return None
        scalar = self._emit(instr.opcode, Shape(instr.shape.dtype, ()),
                            [o.operands[0] for o in instr.operands], instr, **instr.attrs)
        return self._emit("broadcast", instr.shape, [scalar], instr, dimensions=())


_RULES = {
    "add": AlgebraicSimplifier.add, "subtract": AlgebraicSimplifier.subtract,
    "multiply": AlgebraicSimplifier.multiply, "divide": AlgebraicSimplifier.divide,
    "negate": AlgebraicSimplifier.negate, "not": AlgebraicSimplifier.not_,
    "maximum": AlgebraicSimplifier.idempotent, "minimum": AlgebraicSimplifier.idempotent,
    "and": AlgebraicSimplifier.idempotent, "or": AlgebraicSimplifier.idempotent,
    "compare": AlgebraicSimplifier.compare, "select": AlgebraicSimplifier.select,
    "convert": AlgebraicSimplifier.convert, "reshape": AlgebraicSimplifier.reshape,
    "transpose": AlgebraicSimplifier.transpose, "slice": AlgebraicSimplifier.slice,
    "broadcast": AlgebraicSimplifier.broadcast, "dot": AlgebraicSimplifier.dot,
    "reduce": AlgebraicSimplifier.reduce, "convolution": AlgebraicSimplifier.convolution,
}
