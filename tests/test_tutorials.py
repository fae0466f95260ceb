"""The course (``tutorials/``): every chapter runs top to bottom, its committed notebook is its
source executed, and every exercise test fails on the student's empty slot."""
import os
import pathlib
import subprocess
import sys

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))
IDS = [p.stem for p in TUTORIALS]


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_executes(path, tmp_path):
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


def _cells(nb):
    return [(c.cell_type, c.source) for c in nb.cells]


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_notebook_matches_source(path):
    """The committed ``.ipynb`` has the ``.py``'s cells (regenerate it with
    ``jupytext --to notebook --execute tutorials/NN_name.py``) and was executed."""
    ipynb = path.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: jupytext --to notebook --execute {path.name}"
    committed = nbformat.read(ipynb, as_version=4)
    assert _cells(committed) == _cells(jupytext.read(path)), (
        f"{ipynb.name} is out of sync with {path.name}: jupytext --to notebook --execute {path.name}")
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{ipynb.name} was not executed"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_chapter_has_an_exercise(path):
    """Each chapter ends with an exercise: a student slot, its test and a reference solution."""
    chapter = "ch" + path.stem.split("_")[0]
    slots = sorted((ROOT / "tutorials" / "exercises").glob(chapter + "_*.py"))
    assert slots, f"no tutorials/exercises/{chapter}_*.py"
    for slot in slots:
        assert (ROOT / "tutorials" / "solutions" / slot.name).exists()
        assert (ROOT / "tests" / "exercises" / ("test_" + slot.name)).exists()
        assert f"exercises/{slot.name}" in path.read_text()


def test_exercise_tests_fail_on_the_student_slots():
    """``MINIXLA_EXERCISES=student`` runs the exercise tests against the empty slots: every test
    must fail there (it can fail), while the default run (the references) passes."""
    env = dict(os.environ, MINIXLA_EXERCISES="student", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        str(ROOT / "tests" / "exercises")], capture_output=True, text=True, env=env, cwd=ROOT)
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 1 and " failed" in last and "passed" not in last, r.stdout[-3000:]
