"""The documentation: every public name has a docstring that names its convention's source, every public
module has an API page, and the docstrings' examples run.

The site itself (Sphinx, every tutorial executed, every warning an error) is built by ``make docs``, which
``make test`` runs as its own step after the suite, with no time limit: it takes minutes on two loaded
cores. ``make docs`` then runs this file as a script on the built site (:func:`built_site_problems`): every
name tapegrad defines rendered, every tutorial shown with its executed output and linked from the contents,
and exits 1 naming what is missing::

    python tests/test_docs.py docs/_build/html
"""
import doctest
import importlib
import inspect
import pathlib
import pkgutil
import re
import shutil
import subprocess
import sys

import pytest

import tapegrad

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"  # the tutorials: the site reads them from here (docs/conf.py)
API = DOCS / "api"

# the modules that mirror another library's functions: each docstring says which one it follows
MIRRORS = ("tapegrad.numpy", "tapegrad.numpy.linalg", "tapegrad.numpy.fft", "tapegrad.scipy.special",
           "tapegrad.scipy.linalg", "tapegrad.scipy.signal", "tapegrad.scipy.integrate", "tapegrad.scipy.stats",
           "tapegrad.nn.functional", "tapegrad.nn.init")
SOURCE = re.compile(r"\b(numpy|scipy|torch|jax|optree|mindspore)\.|NumPy|SciPy|PyTorch|MindSpore|JAX|optree")
# the hand-designed modules: Google-style sections on every function and class
DESIGNED = ("tapegrad", "tapegrad.tree", "tapegrad.testing", "tapegrad.random", "tapegrad.extend",
            "tapegrad.optim", "tapegrad.nn", "tapegrad.distributed")


def public_modules():
    """Every module under tapegrad with no path component that starts with an underscore."""
    names = ["tapegrad"]
    for info in pkgutil.walk_packages(tapegrad.__path__, "tapegrad."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


MODULES = public_modules()


def _is_foreign(obj) -> bool:
    """An object of another library (NumPy's dtypes and constants, optree's functions): docs/conf.py
    leaves these out of the rendered reference."""
    return not getattr(obj, "__module__", "").startswith("tapegrad")


def own_names(module_name):
    """``(name, object)`` for the names of ``__all__`` that tapegrad defines (not submodules, not NumPy's)."""
    module = importlib.import_module(module_name)
    for name in module.__all__:
        obj = getattr(module, name)
        if not inspect.ismodule(obj) and not _is_foreign(obj):
            yield name, obj


# module -> the API page (file stem) whose ``automodule`` directive documents it
API_PAGES = {module: page.stem for page in API.glob("*.rst")
             for module in re.findall(r"^\.\. automodule:: (\S+)$", page.read_text(), re.M)}


@pytest.mark.parametrize("module_name", MODULES)
def test_public_module_declares_all(module_name):
    module = importlib.import_module(module_name)
    assert isinstance(getattr(module, "__all__", None), list), f"{module_name} has no __all__ list"
    assert module.__doc__, f"{module_name} has no module docstring"


@pytest.mark.parametrize("module_name", MODULES)
def test_public_names_have_docstrings(module_name):
    missing = [name for name, obj in own_names(module_name) if not inspect.getdoc(obj)]
    assert not missing, f"{module_name}: public names without a docstring: {missing}"


@pytest.mark.parametrize("module_name", [m for m in MODULES if m.startswith(MIRRORS)])
def test_mirrored_functions_name_their_source(module_name):
    module = importlib.import_module(module_name)
    if module_name.startswith("tapegrad.scipy.stats.") and SOURCE.search(module.__doc__):
        return  # a distribution's module docstring names the SciPy distribution its functions follow
    unsourced = [name for name, obj in own_names(module_name) if not SOURCE.search(inspect.getdoc(obj) or "")]
    assert not unsourced, f"{module_name}: docstrings that do not name the function they follow: {unsourced}"


def _takes_arguments(obj):
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    return any(name not in ("self", "cls") for name in parameters)


def _missing_sections(obj):
    """The Google-style sections ``obj``'s docstring lacks: Args when it takes arguments (a class: its
    constructor's; exceptions excepted), Returns (or Yields) when it is a function."""
    doc = inspect.getdoc(obj) or ""
    missing = []
    is_exception = inspect.isclass(obj) and issubclass(obj, Exception)
    if _takes_arguments(obj) and not is_exception and "Args:" not in doc:
        missing.append("Args:")
    if inspect.isfunction(obj) and "Returns:" not in doc and "Yields:" not in doc:
        missing.append("Returns:")
    return missing


@pytest.mark.parametrize("module_name", MODULES)
def test_returns_sections_do_not_render_as_a_return_type(module_name):
    """napoleon reads ``Returns:``'s first line up to a colon as the return *type*: "A pair: ..." would
    render as "Return type: A pair". The sentence must not open with ``words:``."""
    napoleon = pytest.importorskip("sphinx.ext.napoleon")
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    config = napoleon.Config(napoleon_use_rtype=True)
    typed = [name for name, obj in own_names(module_name)
             if ":rtype:" in str(GoogleDocstring(inspect.getdoc(obj) or "", config, what="function"))]
    assert not typed, f"{module_name}: a Returns section whose first line napoleon splits at a colon: {typed}"


@pytest.mark.parametrize("module_name", [m for m in MODULES if m in DESIGNED])
def test_designed_api_has_google_sections(module_name):
    lacking = {name: gaps for name, obj in own_names(module_name) if (gaps := _missing_sections(obj))}
    assert not lacking, f"{module_name}: docstrings without these sections: {lacking}"


SRC = pathlib.Path(tapegrad.__file__).parent
DOCTESTED = sorted(".".join(("tapegrad",) + path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
                   for path in SRC.rglob("*.py") if ">>> " in path.read_text())


@pytest.mark.parametrize("module_name", DOCTESTED)
def test_docstring_examples_run(module_name):
    """The ``Example:`` sections show real output: each runs, and prints what it shows."""
    result = doctest.testmod(importlib.import_module(module_name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {module_name} failed"


def test_every_public_module_has_an_api_page():
    documented = {name for m in API_PAGES for name in importlib.import_module(m).__all__}
    # a module whose every name its package re-exports (tapegrad.nn.layers) is documented on the package's page
    orphans = [m for m in MODULES if m not in API_PAGES
               and not set(importlib.import_module(m).__all__) <= documented]
    assert not orphans, f"public modules with no page under docs/api (add an automodule directive): {orphans}"


def test_reexports_are_named_on_their_page():
    """Objects of other libraries in an ``__all__`` (NumPy's dtypes and constants, optree's functions)
    are left out of the rendered reference (docs/conf.py); their page must name them instead."""
    unnamed = []
    for module_name, page in sorted(API_PAGES.items()):
        module = importlib.import_module(module_name)
        text = (API / f"{page}.rst").read_text()
        unnamed += [f"{module_name}.{n}" for n in module.__all__ if not inspect.ismodule(getattr(module, n))
                    and _is_foreign(getattr(module, n)) and f"``{n}``" not in text]
    assert not unnamed, f"names re-exported from other libraries but not named on their API page: {unnamed}"


def built_site_problems(out: pathlib.Path) -> list[str]:
    """What the site built into ``out`` (``make docs``) lacks; empty when nothing. Sphinx itself fails on a
    cell that raises or on a warning; this checks what it would not: that autodoc rendered every name
    tapegrad defines (it silently skips what it thinks undocumented), that every tutorial was executed (its
    page shows cell output) and is linked from the contents, and that the top of the output opens the front
    page."""
    problems = []
    for module_name, page in sorted(API_PAGES.items()):
        html_path = out / "docs" / "api" / f"{page}.html"
        if not html_path.exists():
            problems.append(f"{html_path} was not built")
            continue
        html = html_path.read_text()
        problems += [f"public name missing from the rendered API reference: {module_name}.{n}"
                     for n, _ in own_names(module_name) if f'id="{module_name}.{n}"' not in html]
    tutorials = [t for t in NOTEBOOKS.iterdir() if t.suffix in (".ipynb", ".md")]
    if len(tutorials) < 7:
        problems.append(f"only {len(tutorials)} tutorials under {NOTEBOOKS}")
    index = out / "docs" / "index.html"
    contents = index.read_text() if index.exists() else ""
    if not contents:
        problems.append(f"{index} was not built")
    for tutorial in tutorials:
        html_path = out / "notebooks" / f"{tutorial.stem}.html"
        if not html_path.exists() or "cell_output" not in html_path.read_text():
            problems.append(f"{tutorial.name} shows no executed output ({html_path})")
        if contents and f'href="../notebooks/{tutorial.stem}.html' not in contents:
            problems.append(f"the contents do not link {tutorial.name}")
    front = out / "index.html"
    if not front.exists() or "url=docs/index.html" not in front.read_text():
        problems.append(f"{front} does not open docs/index.html")
    return problems


def test_the_site_check_names_what_a_build_lacks(tmp_path):
    """built_site_problems, which ``make docs`` runs on the real build, finds each kind of gap: on an empty
    folder every page is missing; on a page that renders one name of its module but not the others, the
    others are named; a tutorial page without output is named."""
    assert len(built_site_problems(tmp_path)) >= len(API_PAGES) + 2
    module_name, page = sorted(API_PAGES.items())[0]
    names = [n for n, _ in own_names(module_name)]
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "docs" / "api" / f"{page}.html").write_text(f'<dt id="{module_name}.{names[0]}">')
    (tmp_path / "notebooks").mkdir()
    tutorial = sorted(t for t in NOTEBOOKS.iterdir() if t.suffix in (".ipynb", ".md"))[0]
    (tmp_path / "notebooks" / f"{tutorial.stem}.html").write_text("<p>not run</p>")
    problems = built_site_problems(tmp_path)
    missing = {line.rsplit(" ", 1)[1] for line in problems if line.startswith("public name missing")}
    assert missing == {f"{module_name}.{n}" for n in names[1:]}, problems
    assert any(line.startswith(f"{tutorial.name} shows no executed output") for line in problems), problems


def test_make_test_builds_the_site_after_the_suite():
    """The site build is a step of ``make test`` (through ``make docs``), after pytest, followed by the check
    of the built site: ``make -n`` prints the commands without running them."""
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    run = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    pytest_at = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    sphinx_at = next(i for i, line in enumerate(lines) if "sphinx-build" in line)
    check_at = next(i for i, line in enumerate(lines) if "tests/test_docs.py docs/_build/html" in line)
    assert pytest_at < sphinx_at <= check_at, run.stdout
    assert " -W " in lines[sphinx_at] and " -E " in lines[sphinx_at], lines[sphinx_at]


def test_the_cupy_tutorials_gpu_cells_run_on_the_device_double(monkeypatch, capsys):
    """The site is built without a GPU, so notebooks/numpy_and_cupy.md's CuPy cells only print what
    they would show there. Here they run, with the strict device double standing in for ``cupy``, so
    that code cannot rot unseen: every cell, in order, with the page's own checks."""
    import types

    from _device import xp
    from tapegrad import _backend

    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, getDeviceProperties=lambda i: {"name": b"double"})
    monkeypatch.setattr(xp, "cuda", types.SimpleNamespace(runtime=runtime), raising=False)
    monkeypatch.setattr(xp, "__version__", "(the device double)", raising=False)
    monkeypatch.setitem(sys.modules, "cupy", xp)
    monkeypatch.setattr(_backend, "_default_backend", _backend._default_backend)  # the page sets it
    page = (NOTEBOOKS / "numpy_and_cupy.md").read_text()
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page, re.S)
    exec(compile("\n".join(cells), "numpy_and_cupy.md", "exec"), {"__name__": "numpy_and_cupy"})
    printed = capsys.readouterr().out
    assert "the CuPy cells run" in printed and "With a GPU" not in printed
    # the message the page prints where there is no GPU is tapegrad's own, word for word
    shown = re.search(r"TypeError: (an operation mixes .*)", printed).group(1).replace("devicearray", "cupy")
    quoted = re.search(r'"(TypeError: an operation mixes .*?implicitly)"\)', page, re.S).group(1)
    assert " ".join(re.sub(r'\\n"\s*"', " ", quoted).split()) == f"TypeError: {shown}"


if __name__ == "__main__":
    # `make docs`, after the build: python tests/test_docs.py docs/_build/html
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/test_docs.py BUILT_SITE (docs/_build/html)")
    found = built_site_problems(pathlib.Path(sys.argv[1]))
    print("\n".join(found) or f"the built site in {sys.argv[1]} renders every public name and every tutorial's "
          "output")
    sys.exit(1 if found else 0)
