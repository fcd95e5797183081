"""``matrix_power`` and ``multi_dot``: compositions of ``matmul`` (and ``inv``), so their
derivatives in both modes and to any order are ``matmul``'s."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import eye_like
from tapegrad.numpy.linalg._solve import inv


def matrix_power(a: ArrayLike, n: int) -> Array:
    """``a`` raised to the integer power ``n`` (matrix products), as ``numpy.linalg.matrix_power``.

    Args:
        a: ``(..., m, m)``.
        n: an int; 0 gives identities (a constant: derivative zero), a negative ``n`` the power of
            ``inv(a)``.

    Returns:
        ``(..., m, m)``. Computed by repeated squaring, as NumPy.

    Raises:
        TypeError: ``n`` is not an integer.
        numpy.linalg.LinAlgError: a non-square matrix; a singular one with ``n < 0``.
    """
    a = as_operand(a)
    if _shape.ndim(a) < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"matrix_power: a must be a stack of square matrices, got shape "
                                    f"{_shape.shape(a)}")
    n = operator.index(n)
    if n == 0:
        return namespace_of(a).zeros(tuple(a.shape), a.dtype) + eye_like(a)
    if n < 0:
        a, n = inv(a), -n
    result: Any = None  # the product so far: None until the lowest set bit of n
    square = a
    while True:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if not n:
            return result
        square = matmul(square, square)


def multi_dot(arrays: Any, *, out: Any = None) -> Array:
    """The product of two or more arrays in the cheapest order, as ``numpy.linalg.multi_dot``.

    Args:
        arrays: a sequence of 2-D arrays; the first may be 1-D (a row vector) and the last 1-D (a
            column vector), and those axes are dropped from the result.
        out: not supported (must be None).

    Returns:
        The product, with the promoted dtype.

    Raises:
        ValueError: fewer than two arrays; a middle array that is not 2-D.
    """
    if out is not None:
        raise TypeError("multi_dot: out= is not supported; use the returned array")
    arrays = [as_operand(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    if len(arrays) == 2:
        return matmul(arrays[0], arrays[1])
    first_1d, last_1d = _shape.ndim(arrays[0]) == 1, _shape.ndim(arrays[-1]) == 1
    if first_1d:
        arrays[0] = _shape.expand_dims(arrays[0], 0)
    if last_1d:
        arrays[-1] = _shape.expand_dims(arrays[-1], -1)
    for a in arrays:
        if _shape.ndim(a) != 2:
            raise ValueError(f"multi_dot: arrays must be 2-D (the first and last may be 1-D), got {a.shape}")
    order = _chain_order([a.shape[0] for a in arrays] + [arrays[-1].shape[1]])
    result = _multiply(arrays, order, 0, len(arrays) - 1)
    if first_1d:
        result = _shape.squeeze(result, 0)
    if last_1d:
        result = _shape.squeeze(result, -1)
    return result


def _chain_order(dims):
    """The optimal parenthesisation (Cormen et al., "Introduction to Algorithms", 15.2): ``split[i][j]``
    is where the cheapest product of arrays ``i..j`` splits."""
    n = len(dims) - 1
    cost: list[list[Any]] = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _multiply(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return matmul(_multiply(arrays, split, i, k), _multiply(arrays, split, k + 1, j))
