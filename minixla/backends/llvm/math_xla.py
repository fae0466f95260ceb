"""float32 transcendentals computed as XLA:CPU computes them, so results are bit-identical to JAX.

Why this module exists
----------------------
``math.py``'s own float32 approximations are accurate (about 1 ulp) but not XLA's: ``tanh``
differed from ``jax.jit``/JAX eager in two thirds of all floats, ``exp`` in one in a thousand,
and the differences show up downstream (approximate ``gelu`` gave -5e-7 where JAX gives -0.0).
The semantics contract is JAX's value, so for float32 (and f16/bf16, which are computed in
float32 and rounded) minixla evaluates the *same* algorithm XLA:CPU's elemental emitter and
its ``xla.<fn>.v8f32`` intrinsics emit: the same clamps, the same polynomial or rational
coefficients, the same order of operations, and a fused multiply-add exactly where XLA's LLVM
contracts one (XLA:CPU compiles with ``-ffp-contract=fast``: a ``fmul`` whose only use is an
``fadd``/``fsub`` becomes one ``vfmadd``; here each of those is an explicit ``llvm.fma``, so
the bits do not depend on what our own LLVM would contract).

How it was derived (and how to re-derive it for another jaxlib): run ``jax.jit(jnp.tanh)`` etc.
with ``XLA_FLAGS=--xla_dump_to=DIR``, read ``*ir-with-opt.ll`` (the algorithm and its hex
constants) and the dumped object file's disassembly (which multiplies became FMAs). The
constants below are those numbers, written as the bit patterns of the float32 values.

Accuracy is XLA's (it is XLA's algorithm): ``tanh`` 4.6 ulp, ``exp`` 4 ulp and results below
2^-126 flushed to zero, ``erf`` clamped to +-1 from |x| = 3.83, ``log`` of a subnormal is -inf
(the kernels run with denormals as zero, as XLA:CPU's do). ``docs/elementwise_math.md`` lists the
bounds; ``tests/test_llvm_xla_math.py`` checks the bits against live JAX.

Verified bit-identical to XLA:CPU of jaxlib 0.10.2 on an x86-64 AVX-512 host (every 64th
float32 bit pattern, all of [-10, 10] at 2^-20 steps, all 65,536 f16 and bf16 values). XLA may
compute other bits elsewhere (another jaxlib, or a host where its LLVM contracts differently);
the test takes its reference from live JAX, so it would fail there, not pass silently.

Each emitter takes ``math._Emitter`` ``m`` (float32 scalar or vector) and ``x``.
"""

from __future__ import annotations

import math
import struct


def _f(bits: int) -> float:
    """The float32 whose bit pattern is ``bits`` (XLA's IR prints constants this way)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _r32(v: float) -> float:
    """v rounded to float32 (XLA's IR prints the constants that are short decimals this way)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


# -- exp (XLA's Cephes-style expf: shared by exp, logistic and expm1) --
_EXP_LO, _EXP_HI = -87.8, 88.8  # rounded to float32 by the constant
_LOG2E = _f(0x3FB8AA3B)
_EXP_C1, _EXP_C2 = _f(0x3F318000), _f(0xB95E8083)  # ln2 = C1 - C2, C1 with 9 significant bits
_EXP_P = tuple(_f(b) for b in (0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA)) + (0.5,)

# -- tanh (Eigen's odd rational of degree 13/6, clamped at 7.9988) --
_TANH_CLAMP = _f(0x40FFF644)
_TANH_TINY = 4e-4  # below: tanh(x) = x
_TANH_ONE = 20.0  # from here: +-1
_TANH_P = tuple(_f(b) for b in (0xA59F25C0, 0x2A61337E, 0xAEBD37FF, 0x335C0041, 0x3779434A,
                                0x3A270DED, 0x3BA059DC))
_TANH_Q = tuple(_f(b) for b in (0x35A0D3D8, 0x38F895D6, 0x3B14AA05, 0x3BA059DD))

# -- erf (odd rational in x^2, +-1 from |x| = 3.8325) --
_ERF_ONE = _f(0x407547CB)
_ERF_P = tuple(_f(b) for b in (0x39702D51, 0x3B5F5DA2, 0x3D50B6EB, 0x3E3DA740, 0x3F906EBA))
_ERF_Q = tuple(_f(b) for b in (0xB3FD3906, 0x37C588DF, 0x3A856D28, 0x3C6687D4, 0x3DE34C21,
                               0x3EFEB44A)) + (1.0,)

# -- log (Cephes logf: mantissa in [sqrt(1/2), sqrt(2)), polynomial in f = m - 1) --
_MIN_NORMAL = _f(0x00800000)
_SQRT_HALF = _f(0x3F3504F3)
_LOG_A = (_f(0x3D9021BB), _f(0xBDEBD1B8), _f(0x3DEF251A))  # three interleaved Horner chains
_LOG_B = (_f(0xBDFE5D4F), _f(0x3E11E9BF), _f(0xBE2AAE50))
_LOG_C = (_f(0x3E4CCEAC), _f(0xBE7FFFFC), _f(0x3EAAAAAA))

# -- log1p: a rational in x for |x| < 0.4142, log(1 + x) beyond --
_LOG1P_SMALL = _f(0x3ED413CD)
_LOG1P_DEN = tuple(_f(b) for b in (0x417101AD, 0x42A6185B, 0x435DC32D, 0x439A8CA3, 0x43586D8A,
                                   0x42707982))  # after a leading 1
_LOG1P_NUM = tuple(_f(b) for b in (0x3EFF40C5, 0x40D284FA, 0x41EF4B9C, 0x4273CC76, 0x426473AD,
                                   0x41A05101))  # after a leading 4.527e-05


def _fma_horner(m, z, coeffs, acc=None):
    """XLA's ``acc*z + c`` chain, each step one FMA (its contracted ``fmul``+``fadd``)."""
    if acc is None:
        acc, coeffs = m.fma(z, m.c(coeffs[0]), m.c(coeffs[1])), coeffs[2:]
    for c in coeffs:
        acc = m.fma(acc, z, m.c(c))
    return acc


def _exp_parts(m, x, clamp_nan_low: bool):
    """XLA's expf up to the last product: returns (1 + p, 2^k) with exp(x) = (1 + p) * 2^k.

    x is clamped to [-87.8, 88.8] (NaN passes through), k = floor(x log2e + 1/2) clamped to
    [-127, 127], r = x - k ln2 in two FMA steps, p = r + r^2 P(r). 2^k is built in the exponent
    field, so k = -127 gives 0: results below ~2^-126 are 0, as in XLA."""
    b = m.b
    if clamp_nan_low:  # (exp/logistic: `uge`/`ule` selects; expm1: `olt`/`ogt` -- same values)
        xc = m.select(b.fcmp_unordered(">=", x, m.c(_EXP_LO)), x, m.c(_EXP_LO))
        xc = m.select(b.fcmp_unordered("<=", xc, m.c(_EXP_HI)), xc, m.c(_EXP_HI))
    else:
        xc = m.select(m.lt(x, m.c(_EXP_LO)), m.c(_EXP_LO), x)
        xc = m.select(b.fcmp_ordered(">", xc, m.c(_EXP_HI)), m.c(_EXP_HI), xc)
    fx = b.call(_floor(m), [m.fma(xc, m.c(_LOG2E), m.c(0.5))])
    fx = m.select(b.fcmp_unordered(">=", fx, m.c(-127.0)), fx, m.c(-127.0))
    fx = m.select(b.fcmp_unordered("<=", fx, m.c(127.0)), fx, m.c(127.0))
    nfx = b.fneg(fx)
    r = m.fma(nfx, m.c(_EXP_C1), xc)
    r = m.fma(nfx, m.c(_EXP_C2), r)
    p = _fma_horner(m, r, _EXP_P)
    y = m.add(m.fma(p, m.mul(r, r), r), m.c(1.0))
    # fptosi of NaN is poison in LLVM: feed it a number (the NaN comes back through y)
    k = m.to_int(m.select(m.isnan(fx), m.c(0.0), fx))
    two_k = b.bitcast(b.shl(b.add(k, m.ci(127)), m.ci(23)), m.fty)
    return y, two_k


def _floor(m):
    fname = f"llvm.floor.{m.suffix}"
    fn = m.b.module.globals.get(fname)
    if fn is None:
        from llvmlite import ir
        fn = ir.Function(m.b.module, ir.FunctionType(m.fty, [m.fty]), fname)
    return fn


def exp(m, x):
    y, two_k = _exp_parts(m, x, clamp_nan_low=True)
    return m.mul(y, two_k)


def logistic(m, x):
    """XLA expands logistic to 1 / (1 + exp(-x)) (``LogisticExpander``); its LLVM fuses the
    exp's last product with the ``+ 1``."""
    y, two_k = _exp_parts(m, m.b.fneg(x), clamp_nan_low=True)
    return m.div(m.c(1.0), m.fma(y, two_k, m.c(1.0)))


def _tanh(m, x, small_only=False):
    """tanh; ``small_only``: for callers that use the result only where |x| <= 1/4 (or x is
    NaN), so the clamp and the +-1 branch are left out (same bits there, fewer instructions)."""
    a = m.fabs(x)
    xc = x
    if not small_only:
        xc = m.select(m.lt(x, m.c(-_TANH_CLAMP)), m.c(-_TANH_CLAMP), x)
        xc = m.select(m.b.fcmp_ordered(">", xc, m.c(_TANH_CLAMP)), m.c(_TANH_CLAMP), xc)
    z = m.mul(xc, xc)
    num = m.mul(xc, _fma_horner(m, z, _TANH_P))
    y = m.div(num, _fma_horner(m, z, _TANH_Q))
    y = m.select(m.lt(a, m.c(_TANH_TINY)), x, y)
    if small_only:
        return y
    return m.select(m.ge(a, m.c(_TANH_ONE)), m.copysign(m.c(1.0), x), y)


def tanh(m, x):
    return _tanh(m, x)


def expm1(m, x):
    """XLA's elemental expm1: ``exp(x) - 1`` where |x| > 1/2, else ``tanh(x/2) * (exp(x) + 1)``,
    and x itself where x/2 is zero (the exp's product has two uses: no FMA there)."""
    y, two_k = _exp_parts(m, x, clamp_nan_low=False)
    e = m.mul(y, two_k)
    h = m.mul(x, m.c(0.5))
    t = _tanh(m, h, small_only=True)  # (used only where |x| <= 1/2)
    small = m.mul(t, m.add(e, m.c(1.0)))
    r = m.select(m.b.fcmp_ordered(">", m.fabs(x), m.c(0.5)), m.add(e, m.c(-1.0)), small)
    return m.select(m.eq(h, m.c(0.0)), x, r)


def erf(m, x):
    z = m.mul(x, x)
    num = m.mul(x, _fma_horner(m, z, _ERF_P))
    y = m.div(num, _fma_horner(m, z, _ERF_Q))
    return m.select(m.ge(m.fabs(x), m.c(_ERF_ONE)), m.copysign(m.c(1.0), x), y)


def _log_core(m, u):
    """Cephes logf of u > 0 without its special values (u is clamped to the smallest normal)."""
    b = m.b
    uc = m.select(b.fcmp_ordered(">", u, m.c(_MIN_NORMAL)), u, m.c(_MIN_NORMAL))
    bits = b.bitcast(uc, m.ity)
    mant = b.bitcast(b.or_(b.and_(bits, m.ci(-2139095041)), m.ci(0x3F000000)), m.fty)  # [1/2, 1)
    e = m.add(m.to_float(b.sub(b.lshr(bits, m.ci(23)), m.ci(127))), m.c(1.0))
    low = m.lt(mant, m.c(_SQRT_HALF))
    e = m.sub(e, m.select(low, m.c(1.0), m.c(0.0)))
    f = m.add(m.add(mant, m.c(-1.0)), m.select(low, mant, m.c(0.0)))
    z = m.mul(f, f)
    f3 = m.mul(z, f)
    pa = _fma_horner(m, f, _LOG_A)
    pb = _fma_horner(m, f, _LOG_B)
    pc = _fma_horner(m, f, _LOG_C)
    poly = m.fma(m.fma(pa, f3, pb), f3, pc)
    tail = m.fma(poly, f3, m.mul(e, m.c(_EXP_C2)))
    head = m.fma(m.b.fneg(z), m.c(0.5), f)
    return m.fma(e, m.c(_EXP_C1), m.add(head, tail))


def _log_specials(m, u, y):
    """0 -> -inf, +inf -> +inf, u < 0 or NaN -> NaN with every bit set (XLA's bit masks)."""
    b = m.b
    y = m.select(b.fcmp_unordered("<=", u, m.c(0.0)), b.bitcast(m.ci(-1), m.fty), y)
    y = m.select(m.eq(u, m.c(math.inf)), m.c(math.inf), y)
    return m.select(m.eq(u, m.c(0.0)), m.c(-math.inf), y)


def log(m, x):
    return _log_specials(m, x, _log_core(m, x))


def log1p(m, x):
    """log(1 + x) for |x| >= 0.4142; below, ``x - x^2/2 + x^3 R(x)`` with XLA's rational R
    (its Horner chains start from ``x*0 + 1``, which makes R NaN for infinite x, unused there)."""
    u = m.add(x, m.c(1.0))
    big = _log_specials(m, u, _log_core(m, u))
    z = m.mul(x, x)
    x0 = m.mul(x, m.c(0.0))
    den = _fma_horner(m, x, _LOG1P_DEN, acc=m.add(x0, m.c(1.0)))
    num = _fma_horner(m, x, _LOG1P_NUM, acc=m.add(x0, m.c(4.527e-05)))
    t = m.mul(m.mul(x, z), m.div(num, den))
    small = m.add(x, m.fma(z, m.c(-0.5), t))
    return m.select(m.lt(m.fabs(x), m.c(_LOG1P_SMALL)), small, big)


# -- erfc (XLA's expansion of chlo.erfc: 1 - erf(x) below |x| = 1, exp(-x^2)/|x| * R(1/x^2) above)
_ERFC_ERF = tuple(_f(b) for b in (0x38A4B519, 0xBA51FB80, 0x3BAA02D9, 0xBCDBFC87, 0x3DE7167C,
                                  0xBEC0939F, 0x3F906EBA))  # erf(x)/x in x^2, for |x| < 1
_ERFC_NEAR = (_r32(2.326820e-02),) + tuple(_f(b) for b in (
    0xBE0E0868, 0x3EBCCBD0, 0xBF151CF8, 0x3F1EF9E3, 0xBEFD28C0)) + (
    _r32(3.404880e-01),) + tuple(_f(b) for b in (0xBE8C5880, 0x3F1056E6))  # 1 <= |x| < 2
_ERFC_FAR_HEAD = (_f(0x4127A483), _r32(1.297720e+01))  # 12.9772 - C z
_ERFC_FAR = tuple(_f(b) for b in (0xC0EFDB4A, 0x403AF1FA, 0xBF81F436, 0x3ED7FC3E, 0xBE906C5D,
                                  0x3F106EB9))  # |x| >= 2, in z = 1/x^2


def erfc(m, x):
    """XLA's erfc of float32 (the expansion of ``chlo.erfc``): ``1 - x P(x^2)`` for |x| < 1;
    else ``exp(-x^2) / |x| * R(1/x^2)`` (one rational for |x| < 2, another beyond), 0 once
    x^2 > 88.72, and ``2 - that`` for negative x."""
    b = m.b
    xx = m.mul(x, x)
    z = m.div(m.c(1.0), xx)
    near = _fma_horner(m, z, _ERFC_NEAR)
    far = m.fma(b.fneg(z), m.c(_ERFC_FAR_HEAD[0]), m.c(_ERFC_FAR_HEAD[1]))
    far = _fma_horner(m, z, _ERFC_FAR, acc=far)
    small = m.fma(b.fneg(x), _fma_horner(m, xx, _ERFC_ERF), m.c(1.0))
    y, two_k = _exp_parts(m, b.fneg(xx), clamp_nan_low=True)
    a = m.fabs(x)
    big = m.mul(m.mul(m.mul(y, two_k), m.div(m.c(1.0), a)),
                m.select(m.lt(a, m.c(2.0)), near, far))
    big = m.select(b.fcmp_ordered(">", xx, m.c(_f(0x42B17218))), m.c(0.0), big)
    big = m.select(m.lt(x, m.c(0.0)), m.sub(m.c(2.0), big), big)
    return m.select(m.lt(a, m.c(1.0)), small, big)


# -- rsqrt (XLA:CPU's ``xla.rsqrt``: the hardware estimate and one Newton-Raphson step)
def _rsqrt_estimate(m, x):
    """``rsqrtps``'s ~12-bit estimate of 1/sqrt(x), lane by lane (x86 only).

    The estimate is the CPU's own table, so it may differ between CPU families; XLA's code
    uses the same instruction on the same host, which is what bit-identity needs. A vector is
    cut into 4-lane pieces (SSE's ``rsqrtps``; AVX-512 has no 512-bit form of it, and
    ``rsqrt14`` is another, more precise estimate); a scalar is lane 0 of a splat."""
    from llvmlite import ir
    b = m.b
    v4 = ir.VectorType(ir.FloatType(), 4)
    name = "llvm.x86.sse.rsqrt.ps"
    fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(v4, [v4]), name)
    i32 = ir.IntType(32)
    if not isinstance(x.type, ir.VectorType):
        splat = b.insert_element(ir.Constant(v4, [1.0] * 4), x, ir.Constant(i32, 0))
        return b.extract_element(b.call(fn, [splat]), ir.Constant(i32, 0))
    n = x.type.count
    padded = -(-n // 4) * 4
    if padded != n:  # widen with ones (their estimate is unused)
        x = b.shuffle_vector(x, ir.Constant(x.type, [1.0] * n),
                             ir.Constant(ir.VectorType(i32, padded), [min(i, n) if i < n else n for i in range(padded)]))
    pieces = [b.call(fn, [b.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, 4), list(range(j, j + 4))))])
              for j in range(0, padded, 4)]
    while len(pieces) > 1:  # concatenate pairwise back to the full width
        pieces = [b.shuffle_vector(p, q, ir.Constant(ir.VectorType(i32, 2 * p.type.count),
                                                     list(range(2 * p.type.count))))
                  for p, q in zip(pieces[::2], pieces[1::2])] + ([pieces[-1]] if len(pieces) % 2 else [])
    y = pieces[0]
    if padded != n:
        y = b.shuffle_vector(y, y, ir.Constant(ir.VectorType(i32, n), list(range(n))))
    return y


def rsqrt(m, x):
    """XLA's float32 ``rsqrt``: y0 = the ``rsqrtps`` estimate, then one Newton step
    ``y0 + (-y0/2) (x y0 y0 - 1)`` (its LLVM contracts two FMAs: ``fma(x y0, y0, -1)`` and
    ``fma(-y0/2, that, y0)``); the estimate itself for every x but a positive normal number
    or NaN (``is.fpclass`` mask 764: ±0 -> ±inf, +inf -> 0, negatives -> NaN, subnormals read
    as zero under DAZ). About 1-2 ulp, not correctly rounded."""
    b = m.b
    y0 = _rsqrt_estimate(m, x)
    a = m.mul(x, y0)
    h = m.mul(y0, m.c(-0.5))
    y = m.fma(h, m.fma(a, y0, m.c(-1.0)), y0)
    use_estimate = b.or_(m.lt(x, m.c(_MIN_NORMAL)), m.eq(x, m.c(math.inf)))
    return m.select(use_estimate, y0, y)
