"""Constant folding: folded values equal JAX eager bit for bit; what must not fold stays."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax as jlax

import minixla
from minixla import lax
from minixla.hlo import Shape, parse
from minixla.hlo.printer import format_literal
from minixla.hlo.verifier import verify
from minixla.passes.constant_folding import ConstantFolding
from minixla.passes.dce import DeadCodeElimination
from conftest import filecheck

F32_SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3e38, 1e-40, -7.0], np.float32)
S32_SPECIAL = np.array([-2**31, -1, 0, 1, 2**31 - 1, 7, -7, 2, 3, -3], np.int32)


def fold(text):
    m = parse(text)
    changed = ConstantFolding().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    return changed, m


def fold_op(opcode, consts, result_type, attrs=""):
    """Fold ``ROOT opcode(constants...)`` and return the folded literal (asserting it folded)."""
    lines, names = [], []
    for k, c in enumerate(consts):
        shape = Shape(c.dtype, c.shape)
        lines.append(f"  %c{k} = {shape} constant({format_literal(c, print_large_constants=True)})")
        names.append(f"%c{k}")
    n = consts[0].shape[0]
    text = (f"HloModule t\n\nENTRY %main (p0: f32[]) -> {result_type}[{n}] {{\n  %p0 = f32[] parameter(0)\n"
            + "\n".join(lines) + f"\n  ROOT %r = {result_type}[{n}] {opcode}({', '.join(names)}){attrs}\n}}\n")
    changed, m = fold(text)
    assert changed and m.entry.root.opcode == "constant", m.to_string()
    return m.entry.root.literal


def jax_eager(f, *consts):
    with jax.disable_jit():
        return np.asarray(f(*[jnp.asarray(c) for c in consts]))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    if a.dtype.kind == "f":
        return bool(np.all((np.isnan(a) & np.isnan(b)) | (a.view(f"u{a.itemsize}") == b.view(f"u{a.itemsize}"))))
    return bool(np.array_equal(a, b))


# (HLO opcode, attrs, result type, JAX eager reference)
INT_CASES = {
    "divide": ("", "s32", jlax.div), "remainder": ("", "s32", jlax.rem), "add": ("", "s32", jlax.add),
    "multiply": ("", "s32", jlax.mul), "maximum": ("", "s32", jlax.max), "subtract": ("", "s32", jlax.sub),
    "compare": (", direction=LT", "pred", jlax.lt),
}
FLOAT_CASES = {
    "add": ("", "f32", jlax.add), "subtract": ("", "f32", jlax.sub), "multiply": ("", "f32", jlax.mul),
    "divide": ("", "f32", jlax.div), "maximum": ("", "f32", jlax.max), "minimum": ("", "f32", jlax.min),
    "compare": (", direction=NE", "pred", jlax.ne),
}
FLOAT_UNARY = {
    "convert": ("s32", lambda x: jlax.convert_element_type(x, np.int32)),
    "sqrt": ("f32", jlax.sqrt), "sign": ("f32", jlax.sign), "floor": ("f32", jlax.floor),
    "negate": ("f32", jlax.neg), "abs": ("f32", jlax.abs),
}


def _pairs(values):
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    keep = slice(None, 1000)  # under the folding size cap
    return a[keep], b[keep]


@pytest.mark.parametrize("opcode", sorted(INT_CASES))
def test_integer_folding_equals_jax_eager(opcode):
    attrs, rtype, ref = INT_CASES[opcode]
    a, b = _pairs(S32_SPECIAL)  # includes x/0, INT_MIN/-1, wraparound
    got = fold_op(opcode, [a, b], rtype, attrs)
    assert same_bits(got, jax_eager(ref, a, b))


@pytest.mark.parametrize("opcode", sorted(FLOAT_CASES))
def test_float_folding_equals_jax_eager(opcode):
    attrs, rtype, ref = FLOAT_CASES[opcode]
    normal = F32_SPECIAL[np.abs(F32_SPECIAL) != np.float32(1e-40)]  # subnormals are never folded
    a, b = _pairs(normal)
    with np.errstate(all="ignore"):  # drop pairs with a subnormal result: those are not folded
        numpy_op = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                    "divide": np.divide}.get(opcode, np.maximum)
        exact = numpy_op(a, b).astype(np.float64)  # NumPy does not flush subnormals
    ok = ~((exact != 0) & (np.abs(exact) <= np.finfo(np.float32).smallest_normal))
    a, b = a[ok], b[ok]
    got = fold_op(opcode, [a, b], rtype, attrs)
    want = jax_eager(ref, a, b)
    assert same_bits(got, want), np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))


@pytest.mark.parametrize("opcode", sorted(FLOAT_UNARY))
def test_float_unary_folding_equals_jax_eager(opcode):
    rtype, ref = FLOAT_UNARY[opcode]
    x = np.concatenate([F32_SPECIAL[np.abs(F32_SPECIAL) != np.float32(1e-40)],
                        np.array([2.5, -2.5, 2**31, -2**31 - 256.0, 4e9, -0.7, 16.0], np.float32)])
    got = fold_op(opcode, [x], rtype)
    assert same_bits(got, jax_eager(ref, x))


def test_folds_arithmetic_of_constants():
    changed, m = fold("""HloModule t

ENTRY %main (p0: s32[3]) -> s32[3] {
  %p0 = s32[3] parameter(0)
  %a = s32[3] constant({7, -7, -2147483648})
  %b = s32[3] constant({0, 2, -1})
  %d = s32[3] divide(%a, %b)
  ROOT %r = s32[3] add(%p0, %d)
}
""")
    assert changed
    filecheck(m.to_string(), """
CHECK-NOT: divide
CHECK: %[[C:.*]] = s32[3]{0} constant({-1, -3, -2147483648})
CHECK: ROOT %r = s32[3]{0} add(%p0, %[[C]])
""")


@pytest.mark.parametrize("opcode", ["exponential", "log", "tanh", "logistic", "rsqrt"])
def test_transcendentals_are_not_folded(opcode):
    changed, m = fold(f"""HloModule t

ENTRY %main (p0: f32[]) -> f32[] {{
  %p0 = f32[] parameter(0)
  %c = f32[] constant(0.5)
  ROOT %r = f32[] {opcode}(%c)
}}
""")
    assert not changed and f"{opcode}(%c)" in m.to_string()


def test_subnormals_are_not_folded():
    changed, m = fold("""HloModule t

ENTRY %main (p0: f32[]) -> (f32[], f32[], pred[]) {
  %p0 = f32[] parameter(0)
  %tiny = f32[] constant(1e-40)
  %two = f32[] constant(2.0)
  %small = f32[] constant(1e-30)
  %a = f32[] multiply(%tiny, %two)
  %b = f32[] multiply(%small, %small)
  %z = f32[] constant(0.0)
  %c = pred[] compare(%tiny, %z), direction=EQ
  ROOT %t = (f32[], f32[], pred[]) tuple(%a, %b, %c)
}
""")
    # 1e-30 * 1e-30 underflows to 0.0 in both worlds: that one folds.
    filecheck(m.to_string(), """
CHECK: multiply(%tiny, %two)
CHECK-NOT: multiply(%small
CHECK: compare(%tiny, %z)
""")
    assert changed


def test_broadcast_iota_big_results_and_float_reductions_stay():
    changed, m = fold("""HloModule t

%add (ra: f32[], rb: f32[]) -> f32[] {
  %ra = f32[] parameter(0)
  %rb = f32[] parameter(1)
  ROOT %rs = f32[] add(%ra, %rb)
}

%max (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %m = f32[] maximum(%x, %y)
}

ENTRY %main (p0: f32[]) -> (f32[2000], s32[8], f32[2000], f32[], f32[]) {
  %p0 = f32[] parameter(0)
  %c = f32[] constant(1.5)
  %b = f32[2000] broadcast(%c), dimensions={}
  %i = s32[8] iota(), iota_dimension=0
  %big = f32[2000] negate(%b)
  %v = f32[4] constant({0.1, 0.2, 0.3, -0.0})
  %z = f32[] constant(0.0)
  %sum = f32[] reduce(%v, %z), dimensions={0}, to_apply=%add
  %mx = f32[] reduce(%v, %z), dimensions={0}, to_apply=%max
  ROOT %t = (f32[2000], s32[8], f32[2000], f32[], f32[]) tuple(%b, %i, %big, %sum, %mx)
}
""")
    assert changed  # only the max reduction (exact) folds
    filecheck(m.to_string(), """
CHECK: broadcast(%c)
CHECK: iota()
CHECK: negate(%b)
CHECK: reduce(%v, %z), dimensions={0}, to_apply=%add
CHECK-NOT: to_apply=%max
""")


def test_jit_folds_constant_subexpressions_and_matches_jax():
    # Integer x*0 -> 0 (A5), 0+7 -> 7 (A2), the broadcasts of scalars sink (S6) and folding
    # then computes 7 / -2 (truncating) at compile time.
    def f(x):
        return x + lax.div(x * 0 + 7, x * 0 - 2)
    x = np.arange(4, dtype=np.int32)
    lowered = minixla.jit(f).lower(x)
    assert "divide" in lowered.as_text()
    compiled = lowered.compile()
    assert "divide" not in compiled.as_text()
    assert any(e.name.endswith("/constant-folding") and e.changed for e in compiled.pass_log)
    np.testing.assert_array_equal(compiled(x), x + jlax.div(7, -2))
