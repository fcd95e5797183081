"""tapegrad._post_import: a callback runs once, right after a watched module's first import (or at once
if it is imported already), and the module imports as it would without the hook."""
import importlib
import importlib.resources
import sys

import pytest

from tapegrad import _post_import


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh importable package ``tg_watched`` with a submodule and a data file, removed afterwards."""
    root = tmp_path / "tg_watched"
    root.mkdir()
    (root / "__init__.py").write_text("VALUE = 1\n")
    (root / "sub.py").write_text("from tg_watched import VALUE\nDOUBLE = 2 * VALUE\n")
    (root / "data.txt").write_text("resource")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "tg_watched"
    for name in [n for n in sys.modules if n.startswith("tg_watched")]:
        del sys.modules[name]


def test_the_callback_runs_after_the_first_import(package):
    seen = []
    _post_import.when_imported(f"{package}.sub", lambda m: seen.append((m.__name__, m.DOUBLE)))
    assert seen == [] and f"{package}.sub" not in sys.modules  # nothing imported by watching
    sub = importlib.import_module(f"{package}.sub")
    assert seen == [(f"{package}.sub", 2)] and sub.DOUBLE == 2  # after the module's code ran
    importlib.reload(sub)
    assert len(seen) == 1  # once
    # the wrapped loader is the module's own for everything else: resources still read
    assert importlib.resources.files(package).joinpath("data.txt").read_text() == "resource"
    assert sub.__spec__.loader.is_package(f"{package}.sub") is False


def test_an_imported_module_runs_the_callback_at_once(package):
    module = importlib.import_module(package)
    seen = []
    _post_import.when_imported(package, seen.append)
    assert seen == [module]


def test_an_error_in_the_callback_propagates_from_the_import(package):
    def fail(module):
        raise RuntimeError("registration failed")

    _post_import.when_imported(package, fail)
    with pytest.raises(RuntimeError, match="registration failed"):
        importlib.import_module(package)
