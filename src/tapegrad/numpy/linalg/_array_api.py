"""The array API's spellings in ``numpy.linalg`` (NumPy 2): ``matrix_transpose``, ``outer``,
``vecdot``, ``cross``, ``diagonal``, ``trace``, ``matmul``, ``tensordot``. Each is the
``tapegrad.numpy`` function with the array API's stricter arguments (keyword-only ``axis``/
``offset``, the last two axes for matrices), so derivatives, ``vmap`` and ``jit`` are theirs."""
from __future__ import annotations

from typing import Any

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, DTypeLike
from tapegrad.numpy import _matrices, _shape
from tapegrad.numpy._array_api import matrix_transpose, vecdot  # numpy.linalg's are numpy's
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._linalg import matmul, tensordot
from tapegrad.numpy._linalg import outer as _outer

__all__ = ["cross", "diagonal", "matmul", "matrix_transpose", "outer", "tensordot", "trace", "vecdot"]


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The outer product ``x1[:, None] * x2[None, :]`` of two vectors, as ``numpy.linalg.outer``.

    Raises:
        ValueError: an input that is not 1-D (``tapegrad.numpy.outer`` flattens instead).
    """
    x1, x2 = as_operand(x1), as_operand(x2)
    if _shape.ndim(x1) != 1 or _shape.ndim(x2) != 1:
        raise ValueError(f"outer: both inputs must be 1-D, got shapes {_shape.shape(x1)} and {_shape.shape(x2)}; "
                         "use tapegrad.numpy.outer to flatten them")
    return _outer(x1, x2)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """The cross product of 3-vectors along ``axis``, as ``numpy.linalg.cross``.

    Raises:
        ValueError: vectors of a length other than 3 (``tapegrad.numpy.cross`` also takes 2).
    """
    x1, x2 = as_operand(x1), as_operand(x2)
    if _shape.shape(x1)[axis] != 3 or _shape.shape(x2)[axis] != 3:
        raise ValueError(f"cross: both inputs must have length 3 along axis {axis}, got shapes "
                         f"{_shape.shape(x1)} and {_shape.shape(x2)}")
    return _matrices.cross(x1, x2, axis=axis)


def diagonal(x: ArrayLike, /, *, offset: Any = 0) -> Array:
    """The ``offset`` diagonal of each matrix (the last two axes), as ``numpy.linalg.diagonal``."""
    return _matrices.diagonal(x, offset, -2, -1)


def trace(x: ArrayLike, /, *, offset: Any = 0, dtype: DTypeLike = None) -> Array:
    """The sum of the ``offset`` diagonal of each matrix (the last two axes), as
    ``numpy.linalg.trace``."""
    return _matrices.trace(x, offset, -2, -1, dtype=dtype)
