"""Which array module (``xp``) an operation runs on: NumPy, or a device library (CuPy) when its
operands live there.

One rule says whether a value is an array and whose (:func:`array_module`; every check in tapegrad
that asks "is this an array?" goes through it, and nothing else probes attributes):

- a ``numpy.ndarray`` belongs to NumPy; Python and NumPy scalars belong to no module (they combine
  with arrays of any module, as CuPy allows);
- an array whose type (or a base of it) is the ``ndarray`` of the imported top-level package that
  defines it belongs to that package's module: ``cupy.ndarray`` (defined under ``cupy``) belongs to
  ``cupy``. This is how CuPy 13 and CuPy 14 are recognised: neither version's arrays carry
  ``__array_namespace__`` (CuPy 14's *module* follows the array API, its arrays do not). The test
  suite's strict device double is packaged the same way (its type lives in a module named
  ``devicearray`` whose ``ndarray`` it is) and is recognised by this rule, with no special case;
- any other array belongs to the module its ``__array_namespace__()`` returns: the array-API
  standard's rule, for other array libraries;
- a tracer (inside a transform) belongs to the module of the value it stands for.

Creation functions use the default backend: ``set_backend("numpy")``, ``set_backend("cupy")`` or
``set_backend(module)`` (a module object such as ``cupy``), or the ``TAPEGRAD_BACKEND`` environment
variable (``numpy`` or ``cupy``). Mixing host and device arrays in one operation is a ``TypeError``;
nothing here copies between host and device implicitly.
"""
from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

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
    for a in arrays:  # host arrays and scalars alone (the common case) need no more than this loop
        t = type(a)
        if t is not _ndarray and t not in _SCALARS and array_module(a) not in (None, numpy):
            return common_module(map(array_module, arrays))
    return numpy


def common_module(modules):
    """The one array module of operands whose modules are ``modules`` (None for a scalar): the device
    module among them, else ``numpy``.

    Raises:
        TypeError: host and device modules, or two device modules, are among them; the message says
            how to move the arrays (tapegrad never copies between host and device implicitly).
    """
    device, host = None, False
    for module in modules:
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


def array_module(a):
    """The array module of ``a`` when ``a`` is an array or a tracer (``numpy``, ``cupy``, ...), else
    None: for Python and NumPy scalars, lists, Parameters and anything else. The one test of "is this
    an array, and whose" (the module docstring gives the rule)."""
    traced = getattr(type(a), "array_namespace", None)  # a tracer (duck-typed: the core sits above this module)
    if traced is not None:
        return a.array_namespace()
    if isinstance(a, numpy.ndarray):
        return numpy
    module = _module_of_type(type(a))
    if module is not None:
        return module
    if isinstance(a, numpy.generic):
        return None
    namespace = getattr(a, "__array_namespace__", None)  # the array API's rule, for other libraries
    return namespace() if namespace is not None else None


def is_array(a) -> bool:
    """Whether ``a`` is an array of some module, or a tracer (:func:`array_module`)."""
    return array_module(a) is not None


_TYPE_MODULES: dict = {}  # type -> the module whose ndarray it is, or None: asked once per type


def _module_of_type(t):
    """The module whose ``ndarray`` is ``t`` or one of its bases, looked up in the imported top-level
    package that defines that class (``cupy`` for ``cupy.ndarray`` and its subclasses), or None."""
    try:
        return _TYPE_MODULES[t]
    except KeyError:
        pass
    found = None
    for base in t.__mro__:
        name = getattr(base, "__module__", None)
        module = sys.modules.get(name.partition(".")[0]) if isinstance(name, str) else None
        if module is not None and getattr(module, "ndarray", None) is base:
            found = module
            break
    _TYPE_MODULES[t] = found
    return found


def to_host(a) -> numpy.ndarray:
    """``a`` as a NumPy array. A device array is copied to the host (CuPy's ``a.get()``): the
    explicit copy that a caller asks for by name (a random key's bits, a checkpoint being written or
    loaded into host Parameters), never one the library makes on its own. Scalars and NumPy values go
    through ``numpy.asarray``."""
    if isinstance(a, numpy.ndarray):
        return a
    get = getattr(a, "get", None) if array_module(a) not in (None, numpy) else None
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


# Python's numbers (not bools): what a derivative rule may return where an array is due (a constant
# cotangent or tangent, ``2.0``), made an array like its operand by full_like. A NumPy scalar is a
# 0-d array here (an eager reduction gives one where a traced run gives a 0-d tracer)
SCALAR_TYPES = frozenset([int, float, complex])


def full_like(a, fill_value, shape=None, dtype=None):
    """``fill_value`` (a scalar) everywhere in an array like ``a`` (:func:`like`), on ``a``'s backend:
    a constant, never traced (a scalar cotangent or tangent of a custom rule, made an array)."""
    xp, shape, dtype = like(a, shape, dtype)
    return xp.full(shape, fill_value, dtype)


def scipy_module(xp, name: str):
    """SciPy's submodule ``name`` (``"special"``, ``"linalg"``) for arrays of ``xp``: ``scipy.<name>``
    for NumPy, ``cupyx.scipy.<name>`` for CuPy, and by the same convention ``<module>x.scipy.<name>``
    for another device module (the test suite's device double provides ``devicearrayx.scipy``).

    Raises:
        ImportError: the module is not installed (SciPy, or CuPy's ``cupyx``).
    """
    prefix = "" if xp is numpy else f"{xp.__name__}x."
    return importlib.import_module(f"{prefix}scipy.{name}")


def set_backend(backend: Any) -> None:
    """Choose where creation functions (``tnp.zeros``, ``tnp.arange``, ...) put new arrays.

    Args:
        backend: ``"numpy"``, ``"cupy"``, or a module object with NumPy's creation functions
            (``cupy`` itself, or the namespace another device array's ``__array_namespace__``
            returns).

    Raises:
        ValueError: any other name.
        TypeError: neither a name nor a module.
        ImportError: ``"cupy"`` without CuPy installed (``pip install 'tapegrad[cuda13]'``, or
            ``tapegrad[cuda12]`` with a CUDA 12 driver).

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


def gpu_unavailable() -> str | None:
    """Why CuPy cannot run on a GPU here, as one line (CuPy missing, or no device its driver reaches);
    None when it can. ``make test-gpu`` and the GPU benchmark print it and exit 0."""
    try:
        import cupy
    except ImportError as error:
        return f"CuPy is not installed ({error}): pip install 'tapegrad[cuda13]' (CUDA 13) or 'tapegrad[cuda12]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - any failure to reach a driver means no usable GPU
        return f"CuPy {cupy.__version__} sees no GPU ({type(error).__name__}: {error})"
    return None if count else f"CuPy {cupy.__version__} sees no GPU"
