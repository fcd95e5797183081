"""Which array module (``xp``) an operation runs on: NumPy, or CuPy when its operands live there.

Creation functions use the default backend (``set_backend``, or the ``TAPEGRAD_BACKEND`` environment
variable: ``numpy`` or ``cupy``). Mixing the two in one operation is an error; nothing here copies
between host and device implicitly.
"""
from __future__ import annotations

import os
import sys

import numpy

_default_backend = os.environ.get("TAPEGRAD_BACKEND", "numpy")


def namespace_of(*arrays):
    """The array module of ``arrays``: ``cupy`` if any is a CuPy array, else ``numpy``.

    Raises:
        TypeError: NumPy and CuPy arrays are mixed; move one side with ``cupy.asarray`` /
            ``cupy.asnumpy`` first.
    """
    cupy = sys.modules.get("cupy")
    if cupy is None:  # no CuPy array can exist before cupy is imported
        return numpy
    found_cupy = found_numpy = False
    for a in arrays:
        module = _module_of(a)
        found_cupy |= module is cupy
        found_numpy |= module is numpy
    if found_cupy and found_numpy:
        raise TypeError("an operation mixes NumPy and CuPy arrays; move them to one device first "
                        "(cupy.asarray(x) or cupy.asnumpy(x)); tapegrad never copies implicitly")
    return cupy if found_cupy else numpy


def _module_of(a):
    from tapegrad._core import Tracer
    if isinstance(a, Tracer):
        return a.array_namespace()
    return sys.modules["cupy"] if type(a).__module__.startswith("cupy") else (
        numpy if isinstance(a, (numpy.ndarray, numpy.generic)) else None)


def set_backend(name: str) -> None:
    """Choose where creation functions (``tnp.zeros``, ``tnp.arange``, ...) put new arrays.

    Args:
        name: ``"numpy"`` or ``"cupy"``.

    Raises:
        ValueError: any other name.
        ImportError: ``"cupy"`` without CuPy installed (``pip install tapegrad[cupy]``).
    """
    global _default_backend
    if name not in ("numpy", "cupy"):
        raise ValueError(f"set_backend: name must be 'numpy' or 'cupy', got {name!r}")
    if name == "cupy":
        import cupy  # noqa: F401  (fail here, not at the first creation call)
    _default_backend = name


def default_namespace():
    """The array module that creation functions use."""
    if _default_backend == "cupy":
        import cupy
        return cupy
    return numpy
