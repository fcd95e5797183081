"""The Python array API standard's spellings that NumPy 2 added beside its own: ``acos`` for
``arccos``, ``concat`` for ``concatenate``, ``permute_dims`` for ``transpose``, the vector and
matrix products ``vecdot``/``matvec``/``vecmat``, ``unstack``, and the ``bitwise_*`` shifts and
counts (``cumulative_sum``/``cumulative_prod`` are in ``_cumulative``).

Aliases are the same function objects as NumPy's older names (``tnp.acos is tnp.arccos``), so they
share every rule. The new functions are composites of existing operations; only the bit shifts and
``bitwise_count`` are primitives of their own (integer-valued, so non-differentiable).
"""
from __future__ import annotations

import operator
from typing import Any

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis
from tapegrad.numpy import _complex, _reductions, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._elementwise import _binary, _unary
from tapegrad.numpy._reductions import normalize_axis
from tapegrad.numpy._ufuncs import arccosh, arcsinh, arctanh

# ---- aliases -------------------------------------------------------------------------------------
acos, asin, atan, atan2 = ew.arccos, ew.arcsin, ew.arctan, ew.arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh
pow = ew.power
bitwise_invert = bitwise_not = ew.invert

# ---- bits ----------------------------------------------------------------------------------------
left_shift_p, left_shift = _binary("left_shift", nondiff=True)
right_shift_p, right_shift = _binary("right_shift", nondiff=True)
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
bitwise_count_p, bitwise_count = _unary("bitwise_count", float_valued=False)
bitwise_count.__doc__ = ("The number of 1-bits in ``|x|`` (an integer or boolean array), elementwise, as "
                         "``numpy.bitwise_count``: a ``uint8`` array; non-differentiable.")


# ---- shapes --------------------------------------------------------------------------------------
def concat(arrays: Any, /, *, axis: Axis = 0) -> Array:
    """``arrays`` joined along ``axis``, as the array API's ``concat`` (``numpy.concat``): ``axis=None``
    flattens each array first. Differentiable in every array.

    Raises:
        ValueError: shapes that differ off ``axis``.
    """
    arrays = [as_operand(a) for a in arrays]
    if axis is None:
        return _shape.concatenate([_shape.ravel(a) for a in arrays], axis=0)
    return _shape.concatenate(arrays, axis=axis)


def permute_dims(a: ArrayLike, /, axes: Any) -> Array:
    """``a`` with its axes permuted by ``axes`` (required, unlike ``transpose``'s), as
    ``numpy.permute_dims``."""
    return _shape.transpose(a, axes)


def matrix_transpose(x: ArrayLike, /) -> Array:
    """``x`` with its last two axes swapped (a stack of matrices transposed), as
    ``numpy.matrix_transpose``.

    Raises:
        ValueError: ``x`` with fewer than 2 dimensions.
    """
    x = as_operand(x)
    if _shape.ndim(x) < 2:
        raise ValueError(f"matrix_transpose: x must be at least 2-dimensional, got shape {_shape.shape(x)}")
    return _shape.swapaxes(x, -1, -2)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``, as a tuple of arrays of ``x``'s rank minus one, as
    ``numpy.unstack``.

    Raises:
        ValueError: a 0-d ``x``.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    x = as_operand(x)
    if _shape.ndim(x) == 0:
        raise ValueError("Input array must be at least 1-d.")
    axis = normalize_axis(operator.index(axis), _shape.ndim(x))[0]
    return tuple(x[(slice(None),) * axis + (i,)] for i in range(_shape.shape(x)[axis]))


# ---- products ------------------------------------------------------------------------------------
def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """The dot product of vectors along ``axis`` (``sum(conj(x1) * x2, axis)``), broadcast over the
    other axes, as ``numpy.vecdot``: ``x1`` is conjugated (the array API's convention).

    Raises:
        ValueError: the two axes' lengths differ.
    """
    x1, x2 = as_operand(x1), as_operand(x2)
    n1, n2 = _shape.shape(x1)[axis], _shape.shape(x2)[axis]
    if n1 != n2:
        raise ValueError(f"vecdot: x1 and x2 have lengths {n1} and {n2} along axis {axis}; they must be equal")
    return _reductions.sum(_complex.conj(x1) * x2, axis=axis)


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Matrix-vector products, ``x1 @ x2`` for matrices ``x1[..., m, n]`` and vectors ``x2[..., n]``,
    broadcast over the leading axes, as ``numpy.matvec`` (no conjugation).

    Raises:
        ValueError: the inner lengths differ, or ``x1`` is not at least 2-D.
    """
    x1, x2 = as_operand(x1), as_operand(x2)
    _check_inner("matvec", x1, x2, matrix_first=True)
    return _reductions.sum(x1 * _shape.expand_dims(x2, -2), axis=-1)


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Vector-matrix products, ``conj(x1) @ x2`` for vectors ``x1[..., m]`` and matrices
    ``x2[..., m, n]``, broadcast over the leading axes, as ``numpy.vecmat`` (``x1`` conjugated).

    Raises:
        ValueError: the inner lengths differ, or ``x2`` is not at least 2-D.
    """
    x1, x2 = as_operand(x1), as_operand(x2)
    _check_inner("vecmat", x1, x2, matrix_first=False)
    return _reductions.sum(_shape.expand_dims(_complex.conj(x1), -1) * x2, axis=-2)


def _check_inner(name, x1, x2, matrix_first: bool):
    s1, s2 = _shape.shape(x1), _shape.shape(x2)
    matrix, vector = (s1, s2) if matrix_first else (s2, s1)
    if len(matrix) < 2 or len(vector) < 1:
        raise ValueError(f"{name}: operands of shapes {s1} and {s2} are not a matrix and a vector in that order")
    if vector[-1] != matrix[-1 if matrix_first else -2]:
        raise ValueError(f"{name}: the inner lengths of shapes {s1} and {s2} differ")


__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_count", "bitwise_invert",
    "bitwise_left_shift", "bitwise_not", "bitwise_right_shift", "concat", "left_shift", "matrix_transpose",
    "matvec", "permute_dims", "pow", "right_shift", "unstack", "vecdot", "vecmat",
]
