"""The HLO verifier (XLA's ``xla/service/hlo_verifier.cc``).

``verify(module)`` checks the invariants every pass must keep, and raises ``HloVerifierError``
naming the computation, the instruction (as printed) and what is wrong:

- structure: every computation has a ``root`` that is one of its instructions; every operand
  is defined earlier in the same computation (no dangling operands, topological order);
  names are unique in the module; parameters are numbered ``0..n-1`` once each; called
  computations have the signature their caller needs (a ``fusion``'s operands match its
  fused computation's parameters; a ``reduce`` region is ``(T[], T[]) -> T[]``);
- shapes: each instruction's result ``Shape`` (dtype and dims) is what its opcode's rule
  in ``shape_rules`` computes from its operands and attributes (XLA's ``ShapeInference``).

An opcode with no row in ``shape_rules`` is an error: every op the compiler can produce must
say what its result shape is. ``jit`` runs the verifier after every pass that reports a
change (and on the final module) when ``MINIXLA_VERIFY=1`` (the test suite sets it).
"""
from __future__ import annotations

import numpy as np

from minixla.core.errors import MinixlaError
from minixla.hlo import ir
from minixla.hlo.ir import Shape


class HloVerifierError(MinixlaError, RuntimeError):
    """An HLO module breaks an IR invariant: a compiler bug in the pass that produced it."""


class _Bad(Exception):
    pass


def _require(cond, message):
    """``message``: a string, or a function making it (the f-strings of shapes cost more to build
    than the checks themselves; the verifier runs after every pass under ``MINIXLA_VERIFY=1``)."""
    if not cond:
        raise _Bad(message() if callable(message) else message)


def _is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _is_int_or_pred(dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


#: opcode -> rule(instr) -> the expected result Shape (raises _Bad when the operands don't fit)
shape_rules: dict = {}

#: elementwise unary opcodes defined only on floats / only on integers and pred.
FLOAT_UNARY = {"floor", "ceil", "exponential", "log", "tanh", "logistic", "sqrt", "rsqrt",
               "exponential-minus-one", "log-plus-one", "sine", "cosine", "tan", "cbrt",
               "round-nearest-afz", "round-nearest-even"}
INT_UNARY = {"not", "popcnt", "count-leading-zeros"}
INT_BINARY = {"and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic"}
FLOAT_BINARY = {"atan2"}
OTHER_UNARY = {"negate", "abs", "sign"}
OTHER_BINARY = {"add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power"}


def _operand_count(instr, n):
    _require(len(instr.operands) == n, lambda: f"'{instr.opcode}' takes {n} operands, got {len(instr.operands)}")


def _array(x):
    _require(not x.shape.is_tuple, lambda: f"operand %{x.name} is a tuple")
    return x.shape


def _unary(instr):
    _operand_count(instr, 1)
    s = _array(instr.operands[0])
    if instr.opcode in FLOAT_UNARY:
        _require(_is_float(s.dtype), lambda: f"'{instr.opcode}' needs a float operand, got {s}")
    if instr.opcode in INT_UNARY:
        _require(_is_int_or_pred(s.dtype), lambda: f"'{instr.opcode}' needs an integer or pred operand, got {s}")
    return s


def _binary(instr):
    _operand_count(instr, 2)
    a, b = (_array(o) for o in instr.operands)
    _require(a == b, lambda: f"operands of '{instr.opcode}' differ: {a} vs {b}")
    if instr.opcode in INT_BINARY:
        _require(_is_int_or_pred(a.dtype), lambda: f"'{instr.opcode}' needs integer or pred operands, got {a}")
    if instr.opcode in FLOAT_BINARY:
        _require(_is_float(a.dtype), lambda: f"'{instr.opcode}' needs float operands, got {a}")
    return a


def _compare(instr):
    _operand_count(instr, 2)
    a, b = (_array(o) for o in instr.operands)
    _require(a == b, lambda: f"operands of 'compare' differ: {a} vs {b}")
    _require(instr.attrs.get("direction") in ("EQ", "NE", "LT", "LE", "GT", "GE"),
             lambda: f"bad compare direction {instr.attrs.get('direction')!r}")
    return Shape(np.bool_, a.dims)


def _is_finite(instr):
    s = _unary(instr)
    _require(_is_float(s.dtype), lambda: f"'is-finite' needs a float operand, got {s}")
    return Shape(np.bool_, s.dims)


def _select(instr):
    _operand_count(instr, 3)
    p, t, f = (_array(o) for o in instr.operands)
    _require(t == f, lambda: f"select branches differ: {t} vs {f}")
    _require(p.dtype == np.bool_ and p.dims == t.dims, lambda: f"select predicate must be pred{list(t.dims)}, got {p}")
    return t


def _clamp(instr):
    _operand_count(instr, 3)
    lo, x, hi = (_array(o) for o in instr.operands)
    for b in (lo, hi):
        _require(b.dtype == x.dtype and b.dims in ((), x.dims), lambda: f"clamp bound {b} does not fit {x}")
    return x


def _convert(instr):
    _operand_count(instr, 1)
    return Shape(instr.shape.dtype, _array(instr.operands[0]).dims)


for _op in FLOAT_UNARY | INT_UNARY | OTHER_UNARY | ir.ELEMENTWISE_UNARY - {"convert"}:
    shape_rules[_op] = _unary
for _op in INT_BINARY | FLOAT_BINARY | OTHER_BINARY | ir.ELEMENTWISE_BINARY - {"compare"}:
    shape_rules[_op] = _binary
shape_rules.update(compare=_compare, select=_select, clamp=_clamp, convert=_convert)


def _fma(instr):  # fma(a, b, c) = a*b + c rounded once (minixla.lax.fma)
    _operand_count(instr, 3)
    a, b, c = (_array(o) for o in instr.operands)
    _require(a == b == c and _is_float(a.dtype), lambda: f"fma operands must be one float shape, got {a}, {b}, {c}")
    return a


shape_rules["fma"] = _fma
shape_rules["is-finite"] = _is_finite


def _bitcast_convert(instr):  # (issue 3) same-width reinterpretation: the dims are kept
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    _require(np.dtype(x.dtype).itemsize == np.dtype(instr.shape.dtype).itemsize,
             lambda: f"bitcast-convert between widths {x} -> {instr.shape.dtype}")
    return Shape(instr.shape.dtype, x.dims)


shape_rules["bitcast-convert"] = _bitcast_convert


def _perm(dims, n, what):
    _require(sorted(dims) == list(range(n)), lambda: f"{what} {tuple(dims)} is not a permutation of {n} dims")


def _broadcast(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    dims = tuple(instr.attrs.get("dimensions", ()))
    out = instr.shape
    _require(len(dims) == x.rank, lambda: f"broadcast dimensions {dims} do not match the operand rank {x.rank}")
    _require(len(set(dims)) == len(dims) and all(0 <= d < out.rank for d in dims),
             lambda: f"broadcast dimensions {dims} are not distinct dims of {out}")
    for i, d in enumerate(dims):
        _require(x.dims[i] == out.dims[d],
                 lambda: f"broadcast operand dim {i} ({x.dims[i]}) != result dim {d} ({out.dims[d]})")
    return Shape(x.dtype, out.dims)


def _reshape(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    _require(x.size == instr.shape.size, lambda: f"reshape of {x} to {instr.shape} changes the element count")
    return Shape(x.dtype, instr.shape.dims)


def _transpose(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    perm = tuple(instr.attrs["dimensions"])
    _perm(perm, x.rank, "transpose dimensions")
    return Shape(x.dtype, tuple(x.dims[p] for p in perm))


def _slice(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    spec = instr.attrs["slice"]
    _require(len(spec) == x.rank, lambda: f"slice has {len(spec)} ranges for rank {x.rank}")
    dims = []
    for (start, limit, stride), n in zip(spec, x.dims):
        _require(0 <= start <= limit <= n and stride >= 1,
                 lambda: f"slice [{start}:{limit}:{stride}] out of a dim of {n}")
        dims.append(-(-(limit - start) // stride))
    return Shape(x.dtype, dims)


def _iota(instr):
    _operand_count(instr, 0)
    d = instr.attrs.get("iota_dimension")
    _require(isinstance(d, int) and 0 <= d < instr.shape.rank,
             lambda: f"iota_dimension {d} out of range for {instr.shape}")
    return instr.shape


def _reverse(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    dims = tuple(instr.attrs.get("dimensions", ()))
    _require(all(0 <= d < x.rank for d in dims), lambda: f"reverse dimensions {dims} out of range for {x}")
    return x


def _concatenate(instr):
    xs = [_array(o) for o in instr.operands]
    _require(xs, "concatenate needs operands")
    d, = instr.attrs["dimensions"]
    for x in xs:
        _require(x.dtype == xs[0].dtype and x.rank == xs[0].rank and 0 <= d < x.rank
                 and all(a == b for k, (a, b) in enumerate(zip(x.dims, xs[0].dims)) if k != d),
                 lambda: f"concatenate operands {xs[0]} and {x} do not fit along dim {d}")
    dims = list(xs[0].dims)
    dims[d] = sum(x.dims[d] for x in xs)
    return Shape(xs[0].dtype, dims)


def _constant(instr):
    _operand_count(instr, 0)
    lit = np.asarray(instr.literal)
    _require(instr.literal is not None, "constant without a literal")
    return Shape(lit.dtype, lit.shape)


def _parameter(instr):
    _operand_count(instr, 0)
    return instr.shape


def _tuple(instr):
    return Shape.tuple_of([o.shape for o in instr.operands])


def _scalar_region(instr, comp, dtype):
    ps = comp.parameters
    s = Shape(dtype, ())
    _require(len(ps) == 2 and all(p.shape == s for p in ps) and comp.root.shape == s,
             lambda: f"to_apply=%{comp.name} must be ({s}, {s}) -> {s}")


def _reduce(instr):
    _operand_count(instr, 2)
    x, init = (_array(o) for o in instr.operands)
    _require(init.dtype == x.dtype and init.rank == 0, lambda: f"reduce init {init} must be a {x.dtype} scalar")
    _require(len(instr.called) == 1, "reduce needs one to_apply computation")
    _scalar_region(instr, instr.called[0], x.dtype)
    axes = tuple(instr.attrs["dimensions"])
    _require(len(set(axes)) == len(axes) and all(0 <= a < x.rank for a in axes),
             lambda: f"reduce dimensions {axes} out of range for {x}")
    return Shape(x.dtype, tuple(n for i, n in enumerate(x.dims) if i not in axes))


def _dot(instr):
    _operand_count(instr, 2)
    a, b = (_array(o) for o in instr.operands)
    at = instr.attrs
    lb, lc = tuple(at["lhs_batch_dims"]), tuple(at["lhs_contracting_dims"])
    rb, rc = tuple(at["rhs_batch_dims"]), tuple(at["rhs_contracting_dims"])
    _require(len(lb) == len(rb) and len(lc) == len(rc), "dot: batch/contracting dim counts differ")
    _require(len(set(lb + lc)) == len(lb + lc) and all(0 <= d < a.rank for d in lb + lc),
             lambda: f"dot: bad lhs dims for {a}")
    _require(len(set(rb + rc)) == len(rb + rc) and all(0 <= d < b.rank for d in rb + rc),
             lambda: f"dot: bad rhs dims for {b}")
    for i, j in zip(lb + lc, rb + rc):
        _require(a.dims[i] == b.dims[j], lambda: f"dot: lhs dim {i} ({a.dims[i]}) != rhs dim {j} ({b.dims[j]})")
    _require(a.dtype == b.dtype, lambda: f"dot operands differ in dtype: {a} vs {b}")
    dims = ([a.dims[i] for i in lb] + [n for i, n in enumerate(a.dims) if i not in lb + lc]
            + [n for j, n in enumerate(b.dims) if j not in rb + rc])
    return Shape(instr.shape.dtype, dims)


def _convolution(instr):
    from minixla.hlo.lowering import parse_dim_labels
    _operand_count(instr, 2)
    lhs, rhs = (_array(o) for o in instr.operands)
    _require(lhs.rank == rhs.rank >= 3, lambda: f"convolution ranks differ or < 3: {lhs} {rhs}")
    dn = parse_dim_labels(instr.attrs["dim_labels"])
    w = instr.attrs["window"]
    g = instr.attrs.get("feature_group_count", 1)
    nsp = lhs.rank - 2
    in_f, k_in, k_out = lhs.dims[dn.lhs_spec[1]], rhs.dims[dn.rhs_spec[1]], rhs.dims[dn.rhs_spec[0]]
    _require(g >= 1 and in_f == k_in * g and k_out % g == 0,
             lambda: f"convolution features: input {in_f}, kernel in {k_in} x groups {g}, kernel out {k_out}")
    _require(all(len(w[k]) == nsp for k in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate")),
             lambda: f"convolution window {w} does not have {nsp} spatial dims")
    out = [0] * lhs.rank
    out[dn.out_spec[0]] = lhs.dims[dn.lhs_spec[0]]
    out[dn.out_spec[1]] = k_out
    for d in range(nsp):
        size = rhs.dims[dn.rhs_spec[2 + d]]
        _require(size == w["size"][d], lambda: f"convolution window size {w['size']} != kernel {rhs}")
        n = lhs.dims[dn.lhs_spec[2 + d]]
        dilated = (n - 1) * w["lhs_dilate"][d] + 1 if n else 0
        padded = dilated + sum(w["pad"][d])
        span = (size - 1) * w["rhs_dilate"][d] + 1
        out[dn.out_spec[2 + d]] = max(0, (padded - span) // w["stride"][d] + 1) if padded >= span else 0
    _require(lhs.dtype == rhs.dtype, lambda: f"convolution operands differ in dtype: {lhs} vs {rhs}")
    return Shape(instr.shape.dtype, out)


def _fusion(instr):
    _require(len(instr.called) == 1, "fusion needs one called computation")
    comp = instr.called[0]
    params = comp.parameters
    _require(len(params) == len(instr.operands),
             lambda: f"fusion has {len(instr.operands)} operands, %{comp.name} has {len(params)} parameters")
    for p, o in zip(params, instr.operands):
        _require(p.shape == o.shape, lambda: f"fusion operand %{o.name} {o.shape} != parameter %{p.name} {p.shape}")
    _require(instr.attrs.get("kind") in ("kLoop", "kInput", "kOutput", "kCustom"),
             lambda: f"bad fusion kind {instr.attrs.get('kind')!r}")
    return comp.root.shape


def _pad(instr):
    _operand_count(instr, 2)
    x, v = (_array(o) for o in instr.operands)
    _require(v.dtype == x.dtype and v.rank == 0, lambda: f"pad value {v} must be a {x.dtype} scalar")
    cfg = instr.attrs["padding_config"]
    _require(len(cfg) == x.rank, lambda: f"padding_config has {len(cfg)} entries for rank {x.rank}")
    dims = []
    for (lo, hi, interior), n in zip(cfg, x.dims):
        _require(interior >= 0, lambda: f"negative interior padding {interior}")
        size = lo + hi + n + max(n - 1, 0) * interior
        _require(size >= 0, lambda: f"padding_config {cfg} gives a negative dim")
        dims.append(size)
    return Shape(x.dtype, dims)


def _scalar_indices(instr, idx):
    for i in idx:
        s = _array(i)
        _require(s.rank == 0 and s.dtype.kind in "iu",
                 lambda: f"'{instr.opcode}' index %{i.name} must be an integer scalar, got {s}")


def _dynamic_slice(instr):
    x = _array(instr.operands[0])
    _operand_count(instr, 1 + x.rank)
    _scalar_indices(instr, instr.operands[1:])
    sizes = tuple(instr.attrs["dynamic_slice_sizes"])
    _require(len(sizes) == x.rank and all(0 <= s <= n for s, n in zip(sizes, x.dims)),
             lambda: f"dynamic_slice_sizes {sizes} do not fit {x}")
    return Shape(x.dtype, sizes)


def _dynamic_update_slice(instr):
    x = _array(instr.operands[0])
    _operand_count(instr, 2 + x.rank)
    u = _array(instr.operands[1])
    _require(u.dtype == x.dtype and u.rank == x.rank and all(a <= b for a, b in zip(u.dims, x.dims)),
             lambda: f"update {u} does not fit in {x}")
    _scalar_indices(instr, instr.operands[2:])
    return x


def _gather(instr):
    _operand_count(instr, 2)
    x, idx = (_array(o) for o in instr.operands)
    a = instr.attrs
    offset, collapsed, sizes = tuple(a["offset_dims"]), tuple(a["collapsed_slice_dims"]), tuple(a["slice_sizes"])
    _require(idx.dtype.kind in "iu", lambda: f"gather indices must be integers, got {idx}")
    _require(len(sizes) == x.rank and all(0 <= s <= n for s, n in zip(sizes, x.dims)),
             lambda: f"gather slice_sizes {sizes} do not fit {x}")
    _require(all(sizes[d] <= 1 for d in collapsed), lambda: f"collapsed_slice_dims {collapsed} must have size <= 1")
    ivd = a.get("index_vector_dim", idx.rank - 1)
    batch = [n for d, n in enumerate(idx.dims) if d != ivd]
    window = [s for d, s in enumerate(sizes) if d not in collapsed]
    _require(len(offset) == len(window), lambda: f"gather offset_dims {offset} vs {len(window)} window dims")
    rank = len(batch) + len(window)
    dims, b, w = [], iter(batch), iter(window)
    for d in range(rank):
        dims.append(next(w) if d in offset else next(b))
    return Shape(x.dtype, dims)


def _scatter(instr):
    _operand_count(instr, 3)
    x, idx, upd = (_array(o) for o in instr.operands)
    _require(idx.dtype.kind in "iu", lambda: f"scatter indices must be integers, got {idx}")
    _require(upd.dtype == x.dtype, lambda: f"scatter updates {upd} differ in dtype from {x}")
    _require(len(instr.called) == 1, "scatter needs one to_apply computation")
    _scalar_region(instr, instr.called[0], x.dtype)
    return x


def _reduce_window(instr):
    _operand_count(instr, 2)
    x, init = (_array(o) for o in instr.operands)
    _require(init.dtype == x.dtype and init.rank == 0, lambda: f"reduce-window init {init} must be a {x.dtype} scalar")
    _require(len(instr.called) == 1, "reduce-window needs one to_apply computation")
    _scalar_region(instr, instr.called[0], x.dtype)
    w = instr.attrs["window"]
    _require(len(w["size"]) == x.rank, lambda: f"window {w} does not match rank {x.rank}")
    dims = []
    for d, n in enumerate(x.dims):
        padded = (n - 1) * w["lhs_dilate"][d] + 1 if n else 0
        padded += sum(w["pad"][d])
        span = (w["size"][d] - 1) * w["rhs_dilate"][d] + 1
        dims.append(max(0, (padded - span) // w["stride"][d] + 1) if padded >= span else 0)
    return Shape(x.dtype, dims)


shape_rules.update({"pad": _pad, "dynamic-slice": _dynamic_slice, "dynamic-update-slice": _dynamic_update_slice,
                    "gather": _gather, "scatter": _scatter, "reduce-window": _reduce_window})
shape_rules.update(broadcast=_broadcast, reshape=_reshape, transpose=_transpose, slice=_slice,
                   iota=_iota, reverse=_reverse, concatenate=_concatenate, constant=_constant,
                   parameter=_parameter, tuple=_tuple, reduce=_reduce, dot=_dot,
                   convolution=_convolution, fusion=_fusion)


def _get_tuple_element(instr):
    _operand_count(instr, 1)
    t = instr.operands[0].shape
    _require(t.is_tuple, lambda: f"get-tuple-element of %{instr.operands[0].name}, which is not a tuple")
    k = instr.attrs["index"]
    _require(0 <= k < len(t.tuple_shapes), lambda: f"get-tuple-element index {k} out of range for {t}")
    return t.tuple_shapes[k]


def _signature(comp, param_shapes, root_shape, what):
    ps = comp.parameters
    _require([p.shape for p in ps] == list(param_shapes) and comp.root.shape == root_shape,
             lambda: f"{what}=%{comp.name} must be ({', '.join(map(str, param_shapes))}) -> {root_shape}, "
             f"it is ({', '.join(str(p.shape) for p in ps)}) -> {comp.root.shape}")


def _while(instr):
    """XLA's rule: condition ``S -> pred[]`` and body ``S -> S`` for the operand's shape ``S``,
    which is the result's."""
    _operand_count(instr, 1)
    _require(len(instr.called) == 2, "while needs a condition and a body computation")
    state = instr.operands[0].shape
    cond, body = instr.called
    _signature(cond, [state], Shape(np.bool_, ()), "condition")
    _signature(body, [state], state, "body")
    return state


def _conditional(instr):
    """``conditional(index, op_0, ..., op_n-1)``: branch ``k`` is ``shape(op_k) -> R`` for one
    result shape ``R``; the index is a ``pred[]`` (two branches) or an ``s32[]``."""
    _require(len(instr.operands) == len(instr.called) + 1 and instr.called,
             lambda: f"conditional has {len(instr.operands)} operands for {len(instr.called)} branches")
    index = _array(instr.operands[0])
    _require(index.rank == 0 and (index.dtype == np.bool_ and len(instr.called) == 2
                                  or index.dtype == np.int32),
             lambda: f"conditional index must be pred[] (two branches) or s32[], got {index}")
    result = instr.called[0].root.shape
    for k, (comp, op) in enumerate(zip(instr.called, instr.operands[1:])):
        _signature(comp, [op.shape], result, f"branch {k}")
    return result


def _opt_barrier(instr):
    """``opt-barrier(t)``: one tuple operand, the result of its shape."""
    _operand_count(instr, 1)
    _require(instr.operands[0].shape.is_tuple, "opt-barrier takes one tuple operand")
    return instr.operands[0].shape


shape_rules.update({"get-tuple-element": _get_tuple_element, "while": _while,
                    "conditional": _conditional, "opt-barrier": _opt_barrier})


def _text(instr) -> str:
    from minixla.hlo.printer import print_instruction
    try:
        return print_instruction(instr)
    except Exception:  # noqa: BLE001 - a broken instruction may not even print
        return repr(instr)


def verify_computation(comp, names: set) -> None:
    """Check one computation; ``names`` collects the module's names (for uniqueness)."""
    where = f"computation %{comp.name}"
    if comp.root is None or comp.root not in set(comp.instructions):
        raise HloVerifierError(f"{where}: the root is not one of its instructions")
    defined = set()
    params = []
    for instr in comp.instructions:
        if instr.name in names:
            raise HloVerifierError(f"{where}: name %{instr.name} is used twice")
        names.add(instr.name)
        for o in instr.operands:
            if o not in defined:
                raise HloVerifierError(f"{where}: %{instr.name} uses %{o.name}, which is not defined "
                                       f"before it in this computation\n  {_text(instr)}")
        if instr.opcode == "parameter":
            params.append(instr.parameter_number)
        rule = shape_rules.get(instr.opcode)
        if rule is None:
            raise HloVerifierError(f"{where}: no shape rule for opcode '{instr.opcode}' "
                                   f"(add a row to minixla.hlo.verifier.shape_rules)\n  {_text(instr)}")
        try:
            expected = rule(instr)
        except _Bad as e:
            raise HloVerifierError(f"{where}: {e}\n  {_text(instr)}") from None
        except (KeyError, TypeError, ValueError) as e:
            raise HloVerifierError(f"{where}: malformed attributes ({type(e).__name__}: {e})\n  {_text(instr)}") from None
        if expected != instr.shape:
            raise HloVerifierError(f"{where}: %{instr.name} has shape {instr.shape}, but '{instr.opcode}' of "
                                   f"its operands gives {expected}\n  {_text(instr)}")
        defined.add(instr)
    if sorted(params) != list(range(len(params))):
        raise HloVerifierError(f"{where}: parameter numbers {sorted(params)} are not 0..{len(params) - 1} once each")


def verify(module) -> None:
    """Raise ``HloVerifierError`` if ``module`` breaks an invariant (see the module docstring)."""
    if module.entry is None:
        raise HloVerifierError(f"module {module.name} has no entry computation")
    names: set = set()
    for comp in module.computations:
        if comp.name in names:
            raise HloVerifierError(f"computation name %{comp.name} is used twice")
        names.add(comp.name)
        verify_computation(comp, names)


def _sort(instr):  # one result of a multi-operand sort (see minixla.hlo.lowering._sort)
    ops = [_array(o) for o in instr.operands]
    _require(bool(ops) and all(o.dims == ops[0].dims for o in ops), lambda: f"sort operands differ in dims: {ops}")
    (d,), k, j = instr.attrs["dimensions"], instr.attrs["num_keys"], instr.attrs["result_index"]
    _require(0 <= d < len(ops[0].dims), lambda: f"sort dimension {d} out of range for {ops[0]}")
    _require(1 <= k <= len(ops) and 0 <= j < len(ops), lambda: f"sort num_keys={k} / result_index={j} "
             f"out of range for {len(ops)} operands")
    return ops[j]


shape_rules["sort"] = _sort


# ---- collectives (the SPMD partitioner's per-device programs) ----------------------------

def _replica_groups(instr):
    groups = instr.attrs["replica_groups"]
    _require(bool(groups) and all(len(g) == len(groups[0]) for g in groups),
             lambda: f"'{instr.opcode}' replica_groups {groups} must be non-empty and of one size")
    flat = [d for g in groups for d in g]
    _require(len(set(flat)) == len(flat), lambda: f"'{instr.opcode}' replica_groups {groups} repeat a device")
    return len(groups[0])


def _collective_dim(instr, x):
    (d,) = instr.attrs["dimensions"]
    _require(0 <= d < x.rank, lambda: f"'{instr.opcode}' dimension {d} out of range for {x}")
    return d


def _all_reduce(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    _replica_groups(instr)
    _require(len(instr.called) == 1, "all-reduce needs one to_apply computation")
    _scalar_region(instr, instr.called[0], x.dtype)
    return x


def _all_gather(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    g, d = _replica_groups(instr), _collective_dim(instr, x)
    return Shape(x.dtype, tuple(n * g if i == d else n for i, n in enumerate(x.dims)))


def _reduce_scatter(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    g, d = _replica_groups(instr), _collective_dim(instr, x)
    _require(x.dims[d] % g == 0, lambda: f"reduce-scatter of {x} along dim {d} over groups of {g}: not divisible")
    _scalar_region(instr, instr.called[0], x.dtype)
    return Shape(x.dtype, tuple(n // g if i == d else n for i, n in enumerate(x.dims)))


def _all_to_all(instr):
    _operand_count(instr, 1)
    x = _array(instr.operands[0])
    g, d = _replica_groups(instr), _collective_dim(instr, x)
    _require(x.dims[d] % g == 0, lambda: f"all-to-all of {x} along dim {d} over groups of {g}: not divisible")
    return x


def _collective_permute(instr):
    _operand_count(instr, 1)
    pairs = instr.attrs["source_target_pairs"]
    targets = [t for _, t in pairs]
    _require(len(set(targets)) == len(targets), lambda: f"collective-permute pairs {pairs} repeat a target")
    return _array(instr.operands[0])


def _partition_id(instr):
    _operand_count(instr, 0)
    return Shape(np.dtype(np.uint32), ())


shape_rules["all-reduce"] = _all_reduce
shape_rules["all-gather"] = _all_gather
shape_rules["reduce-scatter"] = _reduce_scatter
shape_rules["all-to-all"] = _all_to_all
shape_rules["collective-permute"] = _collective_permute
shape_rules["partition-id"] = _partition_id
def _custom_call(instr):  # (issue 17) only XLA's "Sharding" target: the identity, annotated
    _operand_count(instr, 1)
    target = instr.attrs.get("custom_call_target")
    _require(target == "Sharding", lambda: f"custom-call target {target!r} is not known (only \"Sharding\")")
    _require("sharding" in instr.attrs, "a Sharding custom-call needs a sharding= attribute")
    return _array(instr.operands[0])


shape_rules["custom-call"] = _custom_call
