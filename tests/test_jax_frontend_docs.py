"""docs/frontend.md (what the JAX front end imports, against jax.lax's primitive list) is current,
and every import rule is a real row: each primitive of the table that says "yes" has a rule."""
import os
import re

import jax
import pytest

from minixla.frontends import coverage, jax_importer

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "frontend.md")


def test_docs_frontend_is_current():
    with open(DOC) as fh:
        text = fh.read()
    version = re.search(r"for jax ([\w.]+)\)", text).group(1)
    if version != jax.__version__:
        pytest.skip(f"docs/frontend.md was generated for jax {version}, this is jax {jax.__version__}")
    assert text == coverage.markdown(), "run: python -m minixla.frontends.coverage > docs/frontend.md"


def test_the_count_is_the_table():
    done, total = coverage.counts()
    assert total == len(coverage.lax_primitives()) and 0 < done <= total
    assert done == sum(n in jax_importer.import_rules for n in coverage.lax_primitives())
    # a primitive is either imported or listed as missing, never both
    assert not set(jax_importer.import_rules) & set(jax_importer.UNSUPPORTED)
