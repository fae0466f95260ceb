"""Render the course to a static site: ``python -m tutorials.build [--out site]``.

Each chapter's committed, executed notebook (``tutorials/NN_name.ipynb``) becomes
``site/NN_name.html`` with its outputs (text, tables, pictures embedded as data URIs, so the
site is self-contained and opens from disk), the README becomes ``site/readme.html`` (its tour of
the compiler), and ``site/index.html`` is the contents page: the chapters in order, each with
the title and first paragraph of its notebook. Nothing is executed here — the notebooks were run
by ``tutorials/build_notebooks.py`` and ``tests/test_tutorials.py`` keeps them in sync.

Mirrors what ``jupyter nbconvert --to html`` does per notebook (nbconvert's HTML exporter,
``lab`` template), plus the contents page. ``tests/test_site.py`` builds the site and checks
that every chapter is linked and keeps its pictures.
"""
import argparse
import html
import pathlib
import re

import nbformat
from nbconvert import HTMLExporter
from nbconvert.filters import markdown2html

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; color: #222; }}
a {{ color: #0b5cad; }} li {{ margin-bottom: .8rem; }}
pre, code {{ background: #f5f5f5; }} pre {{ padding: .6rem; overflow-x: auto; }}
.num {{ font-weight: bold; margin-right: .4rem; }}
</style></head><body>
{body}
</body></html>
"""


def chapters(directory: pathlib.Path = HERE) -> list[pathlib.Path]:
    """The executed notebooks of the course, in chapter order (``NN_name.ipynb``)."""
    return sorted(directory.glob("[0-9][0-9]_*.ipynb"))


def _summary(nb) -> tuple[str, str]:
    """(title, first paragraph) of a notebook's first markdown cell."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.strip().splitlines()
            title = lines[0].lstrip("# ").strip() if lines else ""
            paragraph = []
            for line in lines[1:]:
                if not line.strip():
                    if paragraph:
                        break
                    continue
                paragraph.append(line.strip())
            return title, " ".join(paragraph)
    return "", ""


def _inline_markdown(text: str) -> str:
    # One paragraph of markdown to HTML without the enclosing <p>.
    return re.sub(r"^<p>|</p>\s*$", "", markdown2html(text).strip())


def build(out: pathlib.Path, directory: pathlib.Path = HERE) -> list[pathlib.Path]:
    """Write the site under ``out`` (created if needed); return the pages written.

    Raises ``FileNotFoundError`` when ``directory`` holds no executed notebook.
    """
    notebooks = chapters(directory)
    if not notebooks:
        raise FileNotFoundError(f"no NN_name.ipynb chapters in {directory}")
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    written, entries = [], []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        page = out / (path.stem + ".html")
        page.write_text(body, encoding="utf-8")
        written.append(page)
        title, paragraph = _summary(nb)
        entries.append(f'<li value="{int(path.stem[:2])}"><a href="{page.name}">{html.escape(title or path.stem)}</a>'
                       f"<br>{_inline_markdown(paragraph)}</li>")

    readme = ROOT / "README.md"
    if readme.exists():
        page = out / "readme.html"
        page.write_text(_PAGE.format(title="minixla — README",
                                     body=markdown2html(readme.read_text(encoding="utf-8"))),
                        encoding="utf-8")
        written.append(page)

    index = out / "index.html"
    index.write_text(_PAGE.format(title="minixla — the course", body=(
        "<h1>minixla — the course</h1>"
        "<p>A step-by-step course through an XLA-style compiler: from a Python function to a "
        "jaxpr, to HLO, through the passes, to LLVM machine code, and into XLA itself. Read the "
        '<a href="readme.html">README</a> for the tour; then follow the chapters in order. Each '
        "ends with an exercise (<code>tutorials/exercises/</code>) and its test.</p>"
        "<ol>" + "".join(entries) + "</ol>")), encoding="utf-8")
    return [index, *written]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "site",
                        help="output folder (default: site/ at the repository root)")
    args = parser.parse_args(argv)
    pages = build(args.out)
    print(f"wrote {len(pages)} pages to {args.out}; open {args.out / 'index.html'}")


if __name__ == "__main__":
    main()
