"""Creation functions. New arrays are constants (never traced) on the default backend, except
``array``/``asarray`` of sequences holding traced values, which stack them differentiably, and
``full`` of a traced fill value, which broadcasts it."""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad import _backend, _structural
from tapegrad._array_type import Array
from tapegrad._backend import default_namespace, is_array, namespace_of
from tapegrad._core import Boxed, Tracer
from tapegrad._structural import astype, stack
from tapegrad._typing import ArrayLike, DTypeLike, ShapeLike


def _contains_traced(obj) -> bool:
    if isinstance(obj, (Tracer, Boxed)):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_traced(o) for o in obj)
    return False


def array(object: ArrayLike, dtype: DTypeLike = None, copy: bool | None = True) -> Array:
    """An array from ``object`` (array, scalar or nested sequence), as ``numpy.array``.

    Nested lists of traced values are stacked with ``tnp.stack``, so ``tnp.array([t1, t2])`` is
    differentiable in ``t1`` and ``t2``. A traced value passes through (cast to ``dtype`` if given);
    a traced Python scalar (a ``jit`` argument) becomes a strongly typed array, as NumPy makes one.
    """
    if isinstance(object, Boxed):
        object = object.unbox()
    if isinstance(object, Tracer):
        if getattr(object, "weak_type", False):  # a Python scalar staged by jit: an array of NumPy's dtype
            return astype(object, object.dtype if dtype is None else dtype)  # for it, as np.asarray makes
        return object if dtype is None else astype(object, dtype)
    if isinstance(object, (list, tuple)) and _contains_traced(object):
        out = stack([array(o) for o in object])
        return out if dtype is None else astype(out, dtype)
    arrays = _array_leaves(object)  # a list of CuPy arrays stays on the device: no host round trip
    xp = namespace_of(*arrays) if arrays else default_namespace()
    return xp.array(object, dtype=dtype, copy=copy)


def _array_leaves(obj) -> list:
    if isinstance(obj, (list, tuple)):
        return [a for o in obj for a in _array_leaves(o)]
    return [obj] if is_array(obj) else []


def at_rest(x):
    """NumPy scalars (what 0-d arithmetic returns) as 0-d arrays: arrays at rest are arrays."""
    return np.asarray(x) if isinstance(x, np.generic) else x


def as_operand(a):
    """Lists and tuples (of traced values, say) become arrays; anything else passes through."""
    return array(a) if isinstance(a, (list, tuple)) else a


def with_dtype(a):
    """``a`` itself where it has a dtype (an array, a NumPy scalar, a traced array), else
    :func:`asarray` of it: a Python scalar becomes a 0-d array, and so does one staged by ``jit``
    (weakly typed while staged, a Python scalar at run time), as eagerly."""
    return a if hasattr(a, "dtype") and not getattr(a, "weak_type", False) else asarray(a)


def asarray(a: ArrayLike, dtype: DTypeLike = None) -> Array:
    """As :func:`array` (``numpy.asarray``), without copying an array that already has ``dtype``."""
    return array(a, dtype=dtype, copy=None)


def zeros(shape: ShapeLike, dtype: Any = float) -> Array:
    """An array of zeros of ``shape`` and ``dtype`` (default float64) on the default backend, as
    ``numpy.zeros``; a constant, never traced.
    """
    return default_namespace().zeros(shape, dtype)


def ones(shape: ShapeLike, dtype: Any = float) -> Array:
    """An array of ones of ``shape`` and ``dtype`` (default float64) on the default backend, as
    ``numpy.ones``; a constant, never traced.
    """
    return default_namespace().ones(shape, dtype)


def full(shape: ShapeLike, fill_value: ArrayLike, dtype: DTypeLike = None) -> Array:
    """An array of ``shape`` filled with ``fill_value``, as ``numpy.full``. A traced ``fill_value``
    (a scalar, or an array that broadcasts to ``shape``) is broadcast, so the result is differentiable
    in it (JAX's behaviour); ``dtype`` defaults to its dtype."""
    if isinstance(_unboxed(fill_value), Tracer):
        filled = _structural.broadcast_to(_unboxed(fill_value), _shape_tuple(shape))
        return filled if dtype is None else astype(filled, np.dtype(dtype))
    return default_namespace().full(shape, fill_value, dtype)


def _shape_tuple(shape) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)


def empty(shape: ShapeLike, dtype: Any = float) -> Array:
    """An uninitialised array of ``shape`` and ``dtype`` (default float64) on the default backend, as
    ``numpy.empty``; a constant, never traced.
    """
    return default_namespace().empty(shape, dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = float) -> Array:
    """The ``N x M`` (``M`` defaults to ``N``) array with ones on diagonal ``k`` and zeros elsewhere, as
    ``numpy.eye``, on the default backend; a constant, never traced.
    """
    return default_namespace().eye(N, M, k, dtype=dtype)


def identity(n: int, dtype: Any = float) -> Array:
    """The ``n x n`` identity matrix in ``dtype`` (default float64), as ``numpy.identity``, on the
    default backend; a constant, never traced.
    """
    return default_namespace().identity(n, dtype=dtype)


def arange(*args: Any, **kwargs: Any) -> Array:
    """Evenly spaced values in ``[start, stop)``, as ``numpy.arange`` (the same arguments), on the
    default backend; a constant, never traced.
    """
    return default_namespace().arange(*args, **kwargs)


def _unboxed(a):
    return a.unbox() if isinstance(a, Boxed) else a


def _like_args(a, dtype, shape):
    return _backend.like(_unboxed(a), shape, dtype)


def zeros_like(a: ArrayLike, dtype: DTypeLike = None, shape: ShapeLike | None = None) -> Array:
    """Zeros with ``a``'s shape, dtype and backend (or ``dtype`` and ``shape`` if given), as
    ``numpy.zeros_like``; a constant, never traced (also for a tracer ``a``).
    """
    return _backend.zeros_like(_unboxed(a), shape, dtype)


def ones_like(a: ArrayLike, dtype: DTypeLike = None, shape: ShapeLike | None = None) -> Array:
    """Ones with ``a``'s shape, dtype and backend (or ``dtype`` and ``shape`` if given), as
    ``numpy.ones_like``; a constant, never traced.
    """
    return _backend.ones_like(_unboxed(a), shape, dtype)


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike = None, shape: ShapeLike | None = None) -> Array:
    """``fill_value`` with ``a``'s shape, dtype and backend (or ``dtype`` and ``shape`` if given), as
    ``numpy.full_like``; a constant, never traced.
    """
    xp, shape, dtype = _like_args(a, dtype, shape)
    return xp.full(shape, fill_value, dtype)


def empty_like(a: ArrayLike, dtype: DTypeLike = None, shape: ShapeLike | None = None) -> Array:
    """An uninitialised array with ``a``'s shape, dtype and backend (or ``dtype`` and ``shape`` if
    given), as ``numpy.empty_like``; a constant, never traced (also for a traced ``a``).
    """
    xp, shape, dtype = _like_args(a, dtype, shape)
    return xp.empty(shape, dtype)
