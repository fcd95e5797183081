"""Which array module (``xp``) an operation runs on: NumPy, or a device library (CuPy) when its
operands live there.

How an array's module is found (:func:`namespace_of`):

- a ``numpy.ndarray`` belongs to NumPy; Python and NumPy scalars belong to no module (they combine
  with arrays of any module, as CuPy allows);
- a CuPy array (a type defined in a ``cupy`` module) belongs to the ``cupy`` module, whatever its
  version (CuPy 13 has no ``__array_namespace__``);
- any other array belongs to the module its ``__array_namespace__()`` returns: the array-API
  standard's rule. This is how a device library other than CuPy, or the strict device double of the
  test suite, is recognised, with nothing to register.

Creation functions use the default backend: ``set_backend("numpy")``, ``set_backend("cupy")`` or
``set_backend(module)`` (a module object such as ``cupy``), or the ``TAPEGRAD_BACKEND`` environment
variable (``numpy`` or ``cupy``). Mixing host and device arrays in one operation is a ``TypeError``;
nothing here copies between host and device implicitly.
"""
from __future__ import annotations

import importlib
import os
import types

import numpy

_default_backend = os.environ.get("TAPEGRAD_BACKEND", "numpy")

# operand types that never decide the module: the hot path skips them with one set lookup
_ndarray = numpy.ndarray
_SCALARS = frozenset([int, float, complex, bool, type(None)] + list(set(numpy.sctypeDict.values())))


def namespace_of(*arrays):
    """The array module of ``arrays``: the device module of the device arrays among them, else
    ``numpy``. Python and NumPy scalars go with any module.

    Raises:
        TypeError: host (``numpy.ndarray``) and device arrays are mixed, or arrays of two device
            modules; move them to one device first (``cupy.asarray(x)`` / ``x.get()``).
    """
    device = None
    host = False
    for a in arrays:
        t = type(a)
        if t is _ndarray:
            host = True
        elif t not in _SCALARS:
            module = _module_of(a)
            if module is numpy:
                host = True
            elif module is not None and module is not device:
                if device is not None:
                    raise TypeError(f"an operation mixes arrays of {device.__name__} and {module.__name__}; "
                                    "move them to one device first")
                device = module
    if device is None:
        return numpy
    if host:
        raise TypeError(f"an operation mixes NumPy (host) arrays and {device.__name__} (device) arrays; "
                        f"move them to one device first ({device.__name__}.asarray(x), or x.get() to "
                        "the host); tapegrad never copies implicitly")
    return device


def _module_of(a):
    """The module of one operand, or None for a scalar or a non-array."""
    traced = getattr(type(a), "array_namespace", None)  # a tracer (duck-typed: the core sits above this module)
    if traced is not None:
        return a.array_namespace()
    if isinstance(a, numpy.ndarray):
        return numpy
    if isinstance(a, numpy.generic):
        return None
    if type(a).__module__.partition(".")[0] == "cupy":
        return importlib.import_module("cupy")
    namespace = getattr(a, "__array_namespace__", None)
    return namespace() if namespace is not None else None


def to_host(a) -> numpy.ndarray:
    """``a`` as a NumPy array. A device array is copied to the host (CuPy's ``a.get()``): the
    explicit copy that a caller asks for by name (a random key's bits, a checkpoint being written or
    loaded into host Parameters), never one the library makes on its own. Scalars and NumPy values go
    through ``numpy.asarray``."""
    if isinstance(a, numpy.ndarray):
        return a
    get = getattr(a, "get", None) if _module_of(a) not in (None, numpy) else None
    return get() if callable(get) else numpy.asarray(a)


def like(a, shape=None, dtype=None):
    """``(xp, shape, dtype)`` of a new array like ``a`` (an array, a tracer or a Python scalar): its
    backend, and its shape and dtype unless given."""
    if not hasattr(a, "shape"):
        a = numpy.asarray(a)
    return namespace_of(a), a.shape if shape is None else shape, a.dtype if dtype is None else dtype


def zeros_like(a, shape=None, dtype=None):
    """Zeros like ``a`` (:func:`like`): a constant, never traced. What the interpreters use for a
    zero cotangent or tangent made real."""
    xp, shape, dtype = like(a, shape, dtype)
    return xp.zeros(shape, dtype)


def ones_like(a, shape=None, dtype=None):
    """Ones like ``a`` (:func:`like`): a constant, never traced (the cotangent ``grad`` seeds every
    output with)."""
    xp, shape, dtype = like(a, shape, dtype)
    return xp.ones(shape, dtype)


def scipy_module(xp, name: str):
    """SciPy's submodule ``name`` (``"special"``, ``"linalg"``) for arrays of ``xp``: ``scipy.<name>``
    for NumPy, ``cupyx.scipy.<name>`` for CuPy, and by the same convention ``<module>x.scipy.<name>``
    for another device module (the test suite's device double provides ``devicearrayx.scipy``).

    Raises:
        ImportError: the module is not installed (SciPy, or CuPy's ``cupyx``).
    """
    prefix = "" if xp is numpy else f"{xp.__name__}x."
    return importlib.import_module(f"{prefix}scipy.{name}")


def set_backend(backend) -> None:
    """Choose where creation functions (``tnp.zeros``, ``tnp.arange``, ...) put new arrays.

    Args:
        backend: ``"numpy"``, ``"cupy"``, or a module object with NumPy's creation functions
            (``cupy`` itself, or the namespace another device array's ``__array_namespace__``
            returns).

    Raises:
        ValueError: any other name.
        TypeError: neither a name nor a module.
        ImportError: ``"cupy"`` without CuPy installed (``pip install tapegrad[cupy]``).

    Returns:
        None. The choice is process-wide (not per thread), and starts from the ``TAPEGRAD_BACKEND``
        environment variable (``"numpy"`` if unset); arrays made before keep their device, and
        operations on existing arrays run where their operands are.
    """
    global _default_backend
    if isinstance(backend, str):
        if backend not in ("numpy", "cupy"):
            raise ValueError(f"set_backend: name must be 'numpy' or 'cupy', got {backend!r}")
        if backend == "cupy":
            import cupy  # noqa: F401  (optional dependency; fail here, not at the first creation call)
    elif not isinstance(backend, types.ModuleType):
        raise TypeError(f"set_backend: pass 'numpy', 'cupy' or an array module, got {type(backend).__name__}")
    _default_backend = backend


def default_namespace():
    """The array module that creation functions use."""
    backend = _default_backend
    if isinstance(backend, types.ModuleType):
        return backend
    if backend == "cupy":
        import cupy  # optional dependency, imported only when chosen
        return cupy
    return numpy
