"""``tapegrad.numpy.linalg``: linear-algebra functions that trace. More arrive with forward mode."""
from __future__ import annotations

import math

import numpy as np

from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as ``numpy.linalg.norm`` for real input.

    Vector norms (``axis`` an int, or 1-D ``x``): ``ord`` None/2 (Euclidean), 1, inf, -inf, 0 (count
    of non-zeros, not differentiable) or any other p (``sum(|x|**p)**(1/p)``). Matrix norms (``axis`` a
    pair, or 2-D ``x`` with ``ord`` given): ``'fro'``, 1, -1, inf, -inf. ``ord`` None with ``axis`` None
    is the Frobenius / 2-norm of the flattened array. Spectral (2, -2) and nuclear norms need an SVD
    and raise ``NotImplementedError`` until ``linalg.svd`` lands.

    The Euclidean norm's gradient ``x / norm`` is NaN at ``x = 0``, as in NumPy-based autograd.
    """
    x = as_operand(x)
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


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return ew.sqrt(red.sum(x * x, axis=axis, keepdims=keepdims))
    if ord == math.inf:
        return red.amax(ew.abs(x), axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return red.amin(ew.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return red.sum(ew.astype(ew.not_equal(x, 0), x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return red.sum(ew.abs(x), axis=axis, keepdims=keepdims)
    return red.sum(ew.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        return ew.sqrt(red.sum(x * x, axis=axes, keepdims=keepdims))
    if ord in (1, -1, math.inf, -math.inf):
        sum_axis, pick_axis = (row, col) if ord in (1, -1) else (col, row)
        sums = red.sum(ew.abs(x), axis=sum_axis, keepdims=True)
        pick = red.amax if ord > 0 else red.amin
        out = pick(sums, axis=pick_axis, keepdims=True)
        return out if keepdims else _shape.squeeze(out, axes)
    raise NotImplementedError(f"norm: matrix ord={ord!r} needs an SVD, which arrives with tapegrad.numpy.linalg.svd")
