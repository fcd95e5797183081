"""Sphinx configuration of the tapegrad site: ``make docs`` builds it into ``docs/_build/html``.

MyST-Parser reads the Markdown pages, MyST-NB executes every notebook and every page written as a
MyST notebook (``file_format: mystnb``) on each build, and a cell that raises fails the build; autodoc
with napoleon renders the API reference from the Google-style docstrings; the theme is Furo.
"""

import tapegrad

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

# the Markdown pages stay readable on the repository page; generated and build files are not pages
exclude_patterns = ["_build", "**.ipynb_checkpoints", "coverage_reference.json"]
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


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)
