"""NumPy's questions about types and shapes, which never trace: they read dtypes, shapes and Python
objects, so a traced value answers them from its abstract value (``isscalar``, ``iterable``) and the
rest take no array at all (``can_cast`` of dtypes, ``promote_types``, ``broadcast_shapes``)."""
from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import Tracer
from tapegrad._typing import ArrayLike, DTypeLike


def broadcast_shapes(*shapes: Any) -> tuple:
    """The shape that arrays of ``shapes`` broadcast to, as ``numpy.broadcast_shapes``.

    Raises:
        ValueError: the shapes do not broadcast.
    """
    return np.broadcast_shapes(*shapes)


def can_cast(from_: Any, to: Any, casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"] = "safe") -> bool:
    """Whether ``numpy.can_cast(from_, to, casting)``; a traced ``from_`` answers by its dtype (NumPy 2
    refuses Python scalars here, and so does this)."""
    return np.can_cast(_dtype_of(from_), to, casting)


def promote_types(type1: Any, type2: Any) -> np.dtype:
    """The smallest dtype both cast to safely, as ``numpy.promote_types``."""
    return np.promote_types(type1, type2)


def isdtype(dtype: DTypeLike, kind: str) -> bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, or ``'bool'``, ``'signed integer'``, ``'integral'``,
    ``'real floating'``, ``'complex floating'``, ``'numeric'``, or a tuple of those), as NumPy 2's
    ``numpy.isdtype`` (the array API's)."""
    return bool(np.isdtype(np.dtype(dtype), kind))


def issubdtype(arg1: ArrayLike, arg2: ArrayLike) -> bool:
    """``numpy.issubdtype``: whether ``arg1`` is lower than ``arg2`` in NumPy's type hierarchy."""
    return bool(np.issubdtype(arg1, arg2))


def isscalar(element: ArrayLike) -> bool:
    """Whether ``element`` is a scalar as ``numpy.isscalar`` says (a Python or NumPy scalar, a str); a
    traced value, like an ndarray, is not, whatever its shape."""
    return False if isinstance(element, Tracer) else bool(np.isscalar(element))


def iterable(y: ArrayLike) -> bool:
    """Whether ``iter(y)`` works, as ``numpy.iterable``: a traced value is iterable when it has at least
    one axis (a 0-d one is not, as a 0-d ndarray is not)."""
    if isinstance(y, Tracer):
        return len(y.shape) > 0
    return bool(np.iterable(y))


def einsum_path(subscripts: str, *operands: ArrayLike, optimize: str = "greedy", einsum_call: Any = False) -> Array:
    """The contraction order ``numpy.einsum_path`` chooses, and its report: it reads only the
    operands' shapes, so traced operands are answered from theirs."""
    stand_ins = [np.broadcast_to(np.zeros((), _dtype_of(x)), tuple(np.shape(x) if not isinstance(x, Tracer)
                                                                   else x.shape)) for x in operands]
    # cast: the stubs of numpy 2.2.0 (the floor) lack einsum_path(einsum_call=)
    return cast(Any, np.einsum_path)(subscripts, *stand_ins, optimize=optimize, einsum_call=einsum_call)


def _dtype_of(x):
    if isinstance(x, Tracer):
        return np.dtype(x.dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    return x
