"""Sphinx configuration of the tapegrad site: ``make docs`` builds it into ``docs/_build/html``.

MyST-Parser reads the Markdown pages, MyST-NB executes every notebook and every page written as a
MyST notebook (``file_format: mystnb``) on each build, and a cell that raises fails the build; autodoc
with napoleon renders the API reference from the Google-style docstrings; the theme is Furo.

The site's source directory is the repository root, and this file stays in ``docs/``:
``sphinx-build -c docs . docs/_build/html``. It reads ``docs/`` (the pages) and ``notebooks/`` (the
tutorials) and nothing else, so a link between the two, ``../notebooks/quickstart.ipynb`` or
``../docs/grad.md``, is the same path on the repository page and on the site (docs/site.md says why).
"""

import pathlib

import tapegrad

ROOT = pathlib.Path(__file__).resolve().parent.parent

project = "tapegrad"
author = "the tapegrad developers"
copyright = "2026, the tapegrad developers"
release = tapegrad.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
]

# the Markdown pages stay readable on the repository page; generated and build files are not pages.
# Only docs/ and notebooks/ are read; every other top-level entry (src/, tests/, .venv/, .git/, ...) is
# excluded by name as well, because Sphinx walks every folder that no exclude pattern prunes
root_doc = "docs/index"
include_patterns = ["docs/**", "notebooks/**"]
exclude_patterns = (["docs/_build", "docs/jupyter_execute", "**.ipynb_checkpoints", "**/demo_output"]
                    + sorted(p.name for p in ROOT.iterdir() if p.name not in ("docs", "notebooks")))
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# MyST: headings become link targets (`page.md#section`), $…$ and $$…$$ are maths, ::: fences are directives
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]

# every tutorial runs on every build, and one raising cell fails the build
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 600
nb_execution_show_tb = True

# the API reference: Google-style docstrings, signatures as written, members in the order of __all__
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # a class's "Attributes:" as fields: a property of the same name is then not described twice
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = f"tapegrad {release}"


def _skip_foreign(app, what, name, obj, skip, options):
    """Leave NumPy's own objects that ``tapegrad.numpy`` re-exports (dtypes, constants, ``mgrid``) out
    of the reference: their NumPy docstrings describe NumPy, and the API page names them in a list."""
    if what == "module" and not getattr(obj, "__module__", "tapegrad").startswith("tapegrad"):
        return True
    return skip


def _front_door(app, exception):
    """The pages are under ``docs/`` in the output as in the source; ``index.html`` at the top of the
    output sends a browser on to ``docs/index.html``, so the site opens where it always did."""
    if exception is None and app.builder.format == "html":
        (pathlib.Path(app.outdir) / "index.html").write_text(
            '<!DOCTYPE html>\n<meta charset="utf-8">\n<title>tapegrad</title>\n'
            '<meta http-equiv="refresh" content="0; url=docs/index.html">\n'
            '<a href="docs/index.html">tapegrad\'s documentation</a>\n')


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)
    app.connect("build-finished", _front_door)
