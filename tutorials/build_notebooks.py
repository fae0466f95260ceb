"""Execute the course's jupytext sources and write their notebooks next to them.

    python tutorials/build_notebooks.py                 # every chapter
    python tutorials/build_notebooks.py 03_simplification.py

Same result as ``jupytext --to notebook --execute tutorials/NN_name.py`` (which needs
nbconvert), with nbclient only. The kernel runs in ``tutorials/``, as in Jupyter.
``tests/test_tutorials.py`` checks that each committed ``.ipynb`` has its source's cells.
"""
import pathlib
import sys
import time

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent


def build(path: pathlib.Path) -> float:
    nb = jupytext.read(path)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(nb, path.with_suffix(".ipynb"))
    return time.perf_counter() - t0


if __name__ == "__main__":
    paths = [HERE / p for p in sys.argv[1:]] or sorted(HERE.glob("[0-9]*.py"))
    for p in paths:
        print(f"{p.with_suffix('.ipynb').name}: executed in {build(p):.1f} s")
