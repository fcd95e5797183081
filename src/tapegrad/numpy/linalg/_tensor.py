"""``tensorinv`` and ``tensorsolve``: ``inv`` and ``solve`` of a tensor read as a square matrix
(NumPy's reshapes around them), so their derivatives are ``inv``'s and ``solve``'s."""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy.linalg._solve import inv, solve


def tensorinv(a: ArrayLike, ind: ArrayLike = 2) -> Array:
    """The inverse of ``a`` with respect to ``tensordot(., ., ind)``, as ``numpy.linalg.tensorinv``:
    ``a`` read as the matrix ``(prod(a.shape[:ind]), prod(a.shape[ind:]))``, inverted, and
    reshaped to ``a.shape[ind:] + a.shape[:ind]``.

    Raises:
        ValueError: ``ind`` not a positive int.
        numpy.linalg.LinAlgError: the matrix is not square, or singular.
    """
    a = as_operand(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive int, got {ind}")
    shape = tuple(_shape.shape(a))
    rows = math.prod(shape[ind:])
    a_inv = inv(_shape.reshape(a, (rows, -1)))
    return _shape.reshape(a_inv, shape[ind:] + shape[:ind])


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: Any = None) -> Array:
    """The ``x`` with ``tensordot(a, x, axes=x.ndim) == b``, as ``numpy.linalg.tensorsolve``.

    Args:
        a: shape ``b.shape + Q`` with ``prod(Q) == prod(b.shape)`` (after ``axes`` are moved).
        b: the right-hand side.
        axes: axes of ``a`` moved to the end (in this order) before solving.

    Returns:
        ``x`` of shape ``Q``.

    Raises:
        numpy.linalg.LinAlgError: ``a`` does not read as a square matrix, or it is singular.
    """
    a, b = as_operand(a), as_operand(b)
    ndim = _shape.ndim(a)
    if axes is not None:
        order = [k for k in range(ndim) if k not in {operator.index(x) % ndim for x in axes}]
        a = _shape.transpose(a, order + [operator.index(x) % ndim for x in axes])
    x_shape = tuple(_shape.shape(a))[_shape.ndim(b):]
    n = math.prod(x_shape)
    if math.prod(_shape.shape(a)) != n * n:
        raise np.linalg.LinAlgError(f"tensorsolve: a of shape {_shape.shape(a)} does not read as a square "
                                    f"matrix against b of shape {_shape.shape(b)}: "
                                    "prod(a.shape[b.ndim:])**2 must equal a.size")
    return _shape.reshape(solve(_shape.reshape(a, (n, n)), _shape.ravel(b)), x_shape)
