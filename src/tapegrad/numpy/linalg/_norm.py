"""``norm``: vector and matrix norms as compositions of traced reductions (so forward and reverse
mode, to any order, come from the rules of ``sum``, ``abs``, ``amax``, ``sqrt`` and ``svd``)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy._float16 import accumulates_in_float32, in_float32, is_float16
from tapegrad.numpy.linalg._common import abs2, float_operand
from tapegrad.numpy.linalg._svd import svd


def norm(x: ArrayLike, ord: Any = None, axis: Axis = None, keepdims: bool = False) -> Array:
    """Vector or matrix norm, as ``numpy.linalg.norm`` (real result, also for complex input).

    Vector norms (``axis`` an int, or 1-D ``x``): ``ord`` None/2 (Euclidean), 1, inf, -inf, 0 (count
    of non-zeros, derivative zero) or any other p (``sum(|x|**p)**(1/p)``). Matrix norms (``axis`` a
    pair, or 2-D ``x`` with ``ord`` given): ``'fro'``, ``'nuc'`` (sum of singular values), 1, -1, 2
    (largest singular value), -2 (smallest), inf, -inf. ``ord`` None with ``axis`` None is the 2-norm
    of the flattened array. Stacked matrices are reduced over ``axis``.

    Args:
        x: a real or complex array (integers are promoted to float64).
        ord: the order, as above.
        axis: None, an int (vector norms) or a pair of ints (matrix norms).
        keepdims: keep the reduced axes with length 1.

    Returns:
        The norms, with ``x``'s dtype (its real counterpart for complex ``x``) and ``x``'s shape less the
        reduced axes. float16 ``x`` is computed in float32 and the norms rounded to float16.

    Raises:
        ValueError: an ``axis`` that is neither None, an int nor a pair; an unknown matrix ``ord``.

    At ``x = 0`` the Euclidean, Frobenius and p-norms have no derivative; tapegrad returns the
    gradient 0 there (a subgradient, the same value JAX's safe-``sqrt`` style rule gives) and the
    second derivative 0, with a "double where" (``where(s == 0, 0, sqrt(where(s == 0, 1, s)))``): the
    inner ``where`` keeps the unused branch's derivative finite, so no ``0 * inf`` appears at any
    order, in either mode. Elsewhere the derivatives are the exact ones. The spectral and nuclear
    norms go through ``svd`` and inherit its conventions (distinct singular values).
    """
    x = float_operand(x)
    if is_float16(x):  # the squares overflow float16 past 256
        return in_float32(norm, x, ord=ord, axis=axis, keepdims=keepdims)
    ndim = _shape.ndim(x)
    if axis is None and (ord is None or ndim == 1):
        return _vector_norm(x, ord, None, keepdims)
    if axis is None:
        axis = tuple(range(ndim))
    axes = red.normalize_axis(axis, ndim)
    if isinstance(axis, (int, np.integer)) or len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, tuple(int(a) % ndim for a in axis), keepdims)
    raise ValueError(f"norm: axis must be None, an int or a pair of ints, got {axis!r}")


def _safe_root(s, p):
    """``s ** (1/p)`` with value and every derivative 0 at ``s == 0`` (the "double where")."""
    is_zero = ew.equal(s, 0.0)
    root = ew.sqrt(ew.where(is_zero, 1.0, s)) if p == 2 else ew.where(is_zero, 1.0, s) ** (1.0 / p)
    return ew.where(is_zero, 0.0, root)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _safe_root(red.sum(abs2(x), axis=axis, keepdims=keepdims), 2)
    if ord == math.inf:
        return red.amax(ew.abs(x), axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return red.amin(ew.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return red.sum(ew.astype(ew.not_equal(x, 0), x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return red.sum(ew.abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    return _safe_root(red.sum(ew.abs(x) ** ord, axis=axis, keepdims=keepdims), ord)


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if row == col:
        raise ValueError("norm: duplicate axes given")
    if ord is None or ord == "fro":
        return _safe_root(red.sum(abs2(x), axis=axes, keepdims=keepdims), 2)
    if ord in (1, -1, math.inf, -math.inf):
        sum_axis, pick_axis = (row, col) if ord in (1, -1) else (col, row)
        sums = red.sum(ew.abs(x), axis=sum_axis, keepdims=True)
        pick = red.amax if ord > 0 else red.amin
        out = pick(sums, axis=pick_axis, keepdims=True)
        return out if keepdims else _shape.squeeze(out, axes)
    if ord in (2, -2, "nuc"):
        s = svd(_shape.moveaxis(x, axes, (-2, -1)), compute_uv=False)
        out = red.sum(s, axis=-1) if ord == "nuc" else (red.amax if ord == 2 else red.amin)(s, axis=-1)
        if keepdims:
            for a in sorted(axes):
                out = _shape.expand_dims(out, a)
        return out
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: str = "fro") -> Array:
    """The norm of each matrix (the last two axes), as ``numpy.linalg.matrix_norm``:
    ``norm(x, ord, axis=(-2, -1), keepdims)``, with the matrix orders of :func:`norm`."""
    return norm(x, ord, (-2, -1), keepdims)


def vector_norm(x: ArrayLike, /, *, axis: Axis = None, keepdims: bool = False, ord: int = 2) -> Array:
    """The vector norm over ``axis``, as ``numpy.linalg.vector_norm``.

    Args:
        x: a real or complex array.
        axis: None (every element, as one vector), an int, or a tuple of axes read together as one
            vector (never a matrix norm, unlike :func:`norm`).
        keepdims: keep the reduced axes with length 1.
        ord: a vector order of :func:`norm` (2, 1, inf, -inf, 0 or any p).

    Returns:
        The norms, in ``x``'s real float dtype, of ``x``'s shape less the reduced axes.
    """
    x = float_operand(x)
    shape = list(_shape.shape(x))
    if axis is None:
        reduced, x, vector_axis = tuple(range(len(shape))), _shape.ravel(x), 0
    elif isinstance(axis, tuple):
        reduced = red.normalize_axis(axis, len(shape))
        rest = [a for a in range(len(shape)) if a not in reduced]
        x = _shape.transpose(x, list(reduced) + rest)
        x = _shape.reshape(x, (math.prod(shape[a] for a in reduced),) + tuple(shape[a] for a in rest))
        vector_axis = 0
    else:
        reduced, vector_axis = red.normalize_axis(axis, len(shape)), axis
    out = _vector_norm(x, ord, vector_axis, False)
    if keepdims:
        out = _shape.reshape(out, tuple(1 if a in reduced else n for a, n in enumerate(shape)))
    return out


accumulates_in_float32("linalg.norm", "the squares overflow float16 past 256")
