"""Run a function when a module has finished importing, without importing it.

``when_imported("scipy.sparse", register)`` calls ``register(module)`` now if ``scipy.sparse`` is
imported, else right after the program's own first import of it. tapegrad registers SciPy's and
cupyx's sparse classes as pytree nodes this way, so that ``import tapegrad`` imports neither SciPy
(about 250 ms) nor CuPy, yet a SciPy sparse matrix passed to ``grad`` is a pytree like any other.

It is a meta path finder (PEP 451) placed first on ``sys.meta_path``: it answers only for the watched
names, asks the other finders for the module's spec, and wraps the spec's loader so that the
callbacks run after the module's code (the post-import hooks of PEP 369, withdrawn from the standard
library, as ``wrapt.register_post_import_hook`` keeps them).
"""
from __future__ import annotations

import _thread
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

_WATCHED: dict[str, list[Callable[[ModuleType], Any]]] = {}  # module name -> callbacks not yet run
_LOCK = _thread.allocate_lock()  # _thread, not threading: this module may load with `import tapegrad`


def when_imported(name: str, callback: Callable[[ModuleType], Any]) -> None:
    """Call ``callback(module)`` once the module ``name`` is imported: at once if it already is.

    Args:
        name: the module's full name (``"scipy.sparse"``).
        callback: called with the module object, once; an exception it raises propagates out of the
            program's ``import`` statement (or out of this call, if the module is already imported).
    """
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _LOCK:
        _WATCHED.setdefault(name, []).append(callback)
        if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


def _run(name: str, module: ModuleType) -> None:
    with _LOCK:
        callbacks = _WATCHED.pop(name, [])
    for callback in callbacks:
        callback(module)


class _Finder:
    """Finds nothing itself: for a watched name, the spec the other finders give, its loader wrapped.
    (A meta path finder needs only ``find_spec``; ``importlib.abc`` is not imported, as it takes longer
    than the rest of this module.)"""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _WATCHED:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader:
    """The module's own loader, with the watched callbacks run after its ``exec_module``; every other
    attribute (``get_resource_reader``, ``is_package``...) is the wrapped loader's."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _run(module.__name__, module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
