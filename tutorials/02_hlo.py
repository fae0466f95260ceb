# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial 02 — HLO: lowering, the text format, the parser, the verifier, the evaluator
#
# Tutorial 01 ended with a jaxpr and a first look at HLO. This chapter is about HLO itself, the
# IR every later stage works on: what a **module**, a **computation** and an **instruction**
# are, how HLO is printed and parsed back, how the **verifier** checks that a pass left valid
# IR behind, and how the **evaluator** gives any HLO program its meaning in NumPy.
#
# ```
# jaxpr --lower--> HLO module --print--> text --parse--> HLO module
#                     |                                     |
#                  verify                               evaluate
# ```
#
# *Mirrors* XLA's `xla/hlo/ir` (`HloModule`, `HloComputation`, `HloInstruction`), the HLO
# parser (`xla/hlo/parser/hlo_parser.cc`), `xla/service/hlo_verifier.cc` and
# `xla/hlo/evaluator/hlo_evaluator.cc`.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.hlo import parse
from minixla.hlo.evaluator import evaluate
from minixla.hlo.verifier import HloVerifierError, verify


def f(x, y):
    return mnp.sum(mnp.exp(x) * y, axis=0)


x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
y = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)

# %% [markdown]
# ## 1. Lowering: one jaxpr equation, one or more HLO instructions
#
# The jaxpr has three equations. Lowering turns each into HLO instructions: `exp` becomes
# `exponential`, `mul` becomes `multiply`, and `reduce_sum` becomes a `reduce` whose
# combining function is a small computation of its own, `region_add` (XLA's `to_apply`).
# Its initial value, `0.0`, is a `constant` instruction.

# %%
print(minixla.make_jaxpr(f)(x, y))
lowered = minixla.jit(f).lower(x, y)
module = lowered.hlo_module
print(module)

# %%
entry = module.entry
opcodes = [i.opcode for i in entry.instructions]
assert opcodes == ["parameter", "parameter", "exponential", "multiply", "constant", "reduce"]
(region,) = entry.root.called
assert [i.opcode for i in region.instructions] == ["parameter", "parameter", "add"]
assert len(module.computations) == 2  # the entry and the reducer region

# %% [markdown]
# ## 2. The IR as objects
#
# An `HloModule` owns computations; its `entry` computation is the program. A computation keeps
# its instructions in topological order (operands before users) and has one `root`, the value
# it returns. Each instruction has a **name**, an **opcode**, a result **shape** (element type,
# dims and the layout `{1,0}`: row-major, the minor dim listed first), its **operands** and the
# opcode's attributes (`dimensions` for a `reduce`).

# %%
for instr in entry.instructions:
    print(f"{instr.name:<14} {instr.opcode:<12} {str(instr.shape):<14} "
          f"operands={[o.name for o in instr.operands]} attrs={instr.attrs}")

# %%
assert entry.root.opcode == "reduce" and entry.root.attrs["dimensions"] == (0,)
assert str(entry.root.shape) == "f32[3]{0}"

# %% [markdown]
# The operand lists make a dataflow graph, a `networkx.DiGraph` (edges go from a **producer**
# to its **consumer**, or *user*). Passes ask it questions: who uses this value, is one
# instruction reachable from another?

# %%
import matplotlib.pyplot as plt
import networkx as nx

g = entry.graph()
users = entry.users()
print({i.name: [u.name for u in us] for i, us in users.items()})
pos = {}
for depth, layer in enumerate(nx.topological_generations(g)):
    for k, instr in enumerate(sorted(layer, key=lambda i: i.name)):
        pos[instr] = (k - (len(layer) - 1) / 2, -depth)
plt.figure(figsize=(6, 4.5))
nx.draw_networkx(g, pos, labels={i: f"{i.opcode}\n{i.shape}" for i in g}, node_color="#cfe2ff",
                 node_shape="s", node_size=3000, font_size=8, arrowsize=15)
plt.margins(x=0.25, y=0.12)
plt.axis("off")
plt.title("f's entry computation: producers above consumers")
plt.tight_layout()

# %%
assert [u.opcode for u in users[entry.instructions[2]]] == ["multiply"]  # exponential -> multiply
assert users[entry.root] == []  # nobody uses the root: the caller gets it
assert nx.is_directed_acyclic_graph(g)

# %% [markdown]
# ## 3. The text format and the parser
#
# The printed form is XLA's HLO text: `%name = shape opcode(operands), attributes`, one
# computation per block, `ENTRY` marking the program and `ROOT` its result. It is meant to be
# read and written by people: the tests of XLA's passes, and minixla's, are HLO text in, one
# pass run, text out. `parse` reads it back into the same IR; printing the parsed module gives
# the same text again.

# %%
text = module.to_string()
reparsed = parse(text)
assert reparsed.to_string() == text  # print -> parse -> print is the identity

# %% [markdown]
# So we can write HLO by hand. Here is a program no NumPy function lowers to as is: it shows
# what XLA means by integer `divide` and float `maximum`.

# %%
semantics = parse("""
HloModule semantics

ENTRY %main (a: s32[4], b: s32[4], x: f32[4], y: f32[4]) -> (s32[4], f32[4]) {
  %a = s32[4]{0} parameter(0)
  %b = s32[4]{0} parameter(1)
  %x = f32[4]{0} parameter(2)
  %y = f32[4]{0} parameter(3)
  %quotient = s32[4]{0} divide(%a, %b)
  %larger = f32[4]{0} maximum(%x, %y)
  ROOT %t = (s32[4]{0}, f32[4]{0}) tuple(%quotient, %larger)
}
""")
print(semantics)

# %% [markdown]
# A mistake in the text is reported with its line:

# %%
try:
    parse("HloModule t\nENTRY %m (p: f32[2]) -> f32[2] {\n  %p = f32[2] parameter(0)\n"
          "  ROOT %a = f32[2] add(%p, %q)\n}\n")
except minixla.hlo.HloParseError as e:
    parse_error = e
    print(e)

# %%
assert "line 4" in str(parse_error) and "%q" in str(parse_error)

# %% [markdown]
# ## 4. The verifier
#
# The parser checks the syntax; the **verifier** checks the meaning. Every opcode has a *shape
# rule* (XLA's `ShapeInference`) that computes the result shape from the operands and
# attributes; the verifier recomputes it for every instruction and compares. It also checks the
# structure: operands defined before their users, unique names, parameters numbered once,
# called computations with the signature their caller needs. `minixla.jit` runs it after every
# pass when `MINIXLA_VERIFY=1` (the test suite sets it), so a pass that breaks the IR is caught at
# the pass, not three passes later in a crash of the backend.
#
# HLO never broadcasts implicitly. This `add` of an `f32[2,3]` and an `f32[3]` parses, but it is
# not valid HLO (the jaxpr's NumPy broadcasting must become an explicit `broadcast`):

# %%
bad = parse("""
HloModule bad

ENTRY %main (p0: f32[2,3], p1: f32[3]) -> f32[2,3] {
  %p0 = f32[2,3]{1,0} parameter(0)
  %p1 = f32[3]{0} parameter(1)
  ROOT %add = f32[2,3]{1,0} add(%p0, %p1)
}
""")
try:
    verify(bad)
except HloVerifierError as e:
    verifier_error = e
    print(e)

# %%
assert "operands of 'add' differ" in str(verifier_error)
verify(module)      # the lowered module and the hand-written one are valid
verify(semantics)

# %% [markdown]
# ## 5. The evaluator
#
# The evaluator runs an HLO module instruction by instruction on NumPy arrays: each opcode has
# one rule in `evaluate_rules`. It defines what the IR *means*, independently of any backend,
# which makes it the referee of the compiler's tests (constant folding uses it too, tutorial 03).
# On `f`, it agrees with the LLVM backend and with JAX:

# %%
by_evaluator = evaluate(module, x, y)
by_llvm = lowered.compile()(x, y)
by_jax = jnp.sum(jnp.exp(x) * y, axis=0)
print(by_evaluator, by_llvm, np.asarray(by_jax), sep="\n")

# %%
np.testing.assert_allclose(by_evaluator, by_jax, rtol=1e-6)
np.testing.assert_allclose(by_llvm, by_jax, rtol=1e-6)

# %% [markdown]
# The rules are XLA's semantics, not NumPy's. On the hand-written module: integer `divide`
# truncates toward zero (NumPy's `//` floors), `x / 0` is -1 and `INT_MIN / -1` is `INT_MIN`
# (NumPy warns and returns 0); float `maximum` propagates NaN from either side (NumPy's
# `fmax` drops it). JAX, which runs XLA, agrees with the evaluator:

# %%
a = np.array([7, -7, 5, -2**31], np.int32)
b = np.array([2, 2, 0, -1], np.int32)
xs = np.array([np.nan, 1.0, -0.0, 2.0], np.float32)
ys = np.array([1.0, np.nan, 0.0, 3.0], np.float32)
quotient, larger = evaluate(semantics, a, b, xs, ys)
print("divide :", quotient, " NumPy a // b:", a[:2] // b[:2])
print("maximum:", larger, " NumPy fmax:", np.fmax(xs, ys))

# %%
np.testing.assert_array_equal(quotient, jax.lax.div(a, b))
assert list(quotient) == [3, -3, -1, -2**31] and list(a[:2] // b[:2]) == [3, -4]
np.testing.assert_array_equal(larger, jnp.maximum(xs, ys))
assert np.isnan(larger[:2]).all() and not np.isnan(np.fmax(xs, ys)[:2]).any()

# %% [markdown]
# ## 6. Exercise: an evaluator rule
#
# `popcnt` (population count: the number of 1 bits of each integer, in two's complement for a
# signed type; `jax.lax.population_count`) has a shape rule in the verifier. Write its evaluator
# rule, `popcnt(instr, x)`, in `tutorials/exercises/ch02_popcnt.py`. It receives the
# instruction and its operand's value as a NumPy array and returns the result, of the operand's
# dtype. Check it with
#
# ```
# MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch02_popcnt.py
# ```
#
# The test installs your rule as `evaluate_rules["popcnt"]` and compares with JAX on every
# integer type, negative numbers and extremes included. The cell below runs it once it exists.

# %%
from exercises import ch02_popcnt

popcnt_module = parse("""
HloModule popcnt

ENTRY %main (a: s32[4]) -> s32[4] {
  %a = s32[4]{0} parameter(0)
  ROOT %c = s32[4]{0} popcnt(%a)
}
""")
verify(popcnt_module)
try:
    print(ch02_popcnt.popcnt(popcnt_module.entry.root, a))
except NotImplementedError as e:
    print("not written yet:", e)

# %% [markdown]
# Next, tutorial 03: passes that rewrite HLO into cheaper HLO computing the same bits.
