"""Matrix building blocks: ``diagonal``, ``diag``, ``diagflat``, ``trace``, ``triu``, ``tril``,
``kron``, ``cross``.

Composites of gathers, masks (``where`` with a constant mask) and products, so both modes and every
order of derivative come from those primitives' rules.
"""
from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand, zeros_like
from tapegrad.numpy._reductions import normalize_axis


def _backend_of(a):
    """The array module of ``a`` (NumPy for Python scalars)."""
    return namespace_of(a) if hasattr(a, "shape") else np


# ---- diagonals -----------------------------------------------------------------------------------
def diagonal(a: ArrayLike, offset: Any = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The ``offset`` diagonal of the 2-D sub-arrays on ``axis1``/``axis2``, as ``numpy.diagonal``:
    those two axes are removed and the diagonal becomes the last axis.

    Raises:
        ValueError: ``a`` with fewer than 2 dimensions, or ``axis1 == axis2``.
        numpy.exceptions.AxisError: an axis out of range.
    """
    a = as_operand(a)
    ndim = _shape.ndim(a)
    if ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    axis1, axis2 = (normalize_axis(operator.index(ax), ndim)[0] for ax in (axis1, axis2))
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 cannot be the same")
    rest = tuple(i for i in range(ndim) if i not in (axis1, axis2))
    x = _shape.transpose(a, rest + (axis1, axis2))
    rows, cols = _shape.shape(a)[axis1], _shape.shape(a)[axis2]
    offset = operator.index(offset)
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    xp = _backend_of(a)
    i = xp.arange(length)
    return x[..., i - min(offset, 0), i + max(offset, 0)]


def diag(v: ArrayLike, k: int = 0) -> Array:
    """The ``k``-th diagonal of a 2-D ``v``, or the square 2-D array with a 1-D ``v`` on its ``k``-th
    diagonal (zeros elsewhere), as ``numpy.diag``.

    Raises:
        ValueError: ``v`` that is neither 1-D nor 2-D.
    """
    v = as_operand(v)
    ndim = _shape.ndim(v)
    if ndim == 2:
        return diagonal(v, k)
    if ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    k = operator.index(k)
    n = _shape.shape(v)[0]
    on_diagonal = _backend_of(v).eye(n, dtype=bool)
    square = ew.where(on_diagonal, _shape.reshape(v, (n, 1)), zeros_like(v, shape=()))
    shift = abs(k)
    widths = ((0, shift), (shift, 0)) if k >= 0 else ((shift, 0), (0, shift))
    return _shape.pad(square, widths) if shift else square


def diagflat(v: ArrayLike, k: int = 0) -> Array:
    """The 2-D array with the flattened ``v`` on its ``k``-th diagonal, as ``numpy.diagflat``."""
    return diag(_shape.ravel(as_operand(v)), k)


def trace(a: ArrayLike, offset: Any = 0, axis1: int = 0, axis2: int = 1, dtype: DTypeLike = None,
          out: Any = None) -> Array:
    """Sum along the ``offset`` diagonal, as ``numpy.trace``: ``sum(diagonal(a, ...), axis=-1)``.

    Raises:
        NotImplementedError: ``out`` given.
    """
    if out is not None:
        raise NotImplementedError("trace: out= is not supported by tapegrad.numpy")
    return red.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---- triangles -----------------------------------------------------------------------------------
def _triangle(m, k, lower: bool):
    m = as_operand(m)
    shape = tuple(_shape.shape(m))
    if not shape:
        raise ValueError("tril/triu: input must have at least one dimension")
    # NumPy's tri over the last two axes (a 1-D input is treated as rows of a square matrix)
    keep = _backend_of(m).tri(*shape[-2:], k=k if lower else k - 1, dtype=bool)
    zero = zeros_like(m, shape=())
    return ew.where(keep, m, zero) if lower else ew.where(keep, zero, m)


def tril(m: Any, k: int = 0) -> Array:
    """``m`` with the entries above the ``k``-th diagonal set to zero (on the last two axes), as
    ``numpy.tril``. The gradient of a zeroed entry is zero."""
    return _triangle(m, operator.index(k), lower=True)


def triu(m: Any, k: int = 0) -> Array:
    """``m`` with the entries below the ``k``-th diagonal set to zero (on the last two axes), as
    ``numpy.triu``. The gradient of a zeroed entry is zero."""
    return _triangle(m, operator.index(k), lower=False)


# ---- products ------------------------------------------------------------------------------------
def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """Kronecker product, as ``numpy.kron``: blocks ``a[i, j] * b``, with the shorter shape padded
    with leading 1s. Differentiable in both operands (it is a broadcast product and a reshape)."""
    a, b = as_operand(a), as_operand(b)
    a_shape, b_shape = tuple(_shape.shape(a)), tuple(_shape.shape(b))
    if not b_shape:  # NumPy first gives a at least b's rank: only a 0-d b is a plain product
        return ew.multiply(a, b)
    nd = max(len(a_shape), len(b_shape))
    a_shape = (1,) * (nd - len(a_shape)) + a_shape
    b_shape = (1,) * (nd - len(b_shape)) + b_shape
    a_blocks = _shape.reshape(a, tuple(x for d in a_shape for x in (d, 1)))
    b_blocks = _shape.reshape(b, tuple(x for d in b_shape for x in (1, d)))
    return _shape.reshape(ew.multiply(a_blocks, b_blocks), tuple(p * q for p, q in zip(a_shape, b_shape)))


def _cast(x, dtype):
    return x if np.dtype(x.dtype) == dtype else ew.astype(x, dtype)


def _minus(p, q):
    """``p - q`` where None stands for a zero term."""
    if q is None:
        return p
    return -q if p is None else p - q


# 2-vectors in cross: deprecated in NumPy 2.0 and refused from 2.5; tapegrad follows the NumPy installed
_TWO_VECTORS = np.lib.NumpyVersion(np.__version__) < "2.5.0"


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Axis = None) -> Array:
    """Cross product of 3-vectors (or 2-vectors before NumPy 2.5, deprecated since 2.0) along the given axes, as
    ``numpy.cross``: ``(a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0)``, a missing third component
    being 0; two 2-vectors give the scalar ``a0 b1 - a1 b0``. The vector axes broadcast against each
    other's other axes; ``axis`` sets all three.

    Raises:
        ValueError: a 0-d input, or vectors of a length other than 2 or 3 (other than 3 with NumPy 2.5
            or later, as ``numpy.cross``).
        numpy.exceptions.AxisError: an axis out of range.
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = as_operand(a), as_operand(b)
    if _shape.ndim(a) < 1 or _shape.ndim(b) < 1:
        raise ValueError("At least one array has zero dimension")
    a = _shape.moveaxis(a, normalize_axis(axisa, _shape.ndim(a), "axisa")[0], -1)
    b = _shape.moveaxis(b, normalize_axis(axisb, _shape.ndim(b), "axisb")[0], -1)
    na, nb = _shape.shape(a)[-1], _shape.shape(b)[-1]
    if not _TWO_VECTORS and (na, nb) != (3, 3):
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they are "
                         f"{na} and {nb} dimensional instead.")
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional "
                      "vectors instead. (deprecated in NumPy 2.0)", DeprecationWarning, stacklevel=2)
    dtype = np.promote_types(a.dtype, b.dtype)
    a, b = _cast(a, dtype), _cast(b, dtype)
    ac = [a[..., i] for i in range(na)] + [None] * (3 - na)
    bc = [b[..., i] for i in range(nb)] + [None] * (3 - nb)

    def term(i, j):
        return None if ac[i] is None or bc[j] is None else ac[i] * bc[j]

    batch = np.broadcast_shapes(tuple(_shape.shape(a))[:-1], tuple(_shape.shape(b))[:-1])
    last = _shape.broadcast_to(_minus(term(0, 1), term(1, 0)), batch)
    if na == 2 and nb == 2:
        return last
    first = _shape.broadcast_to(_minus(term(1, 2), term(2, 1)), batch)
    second = _shape.broadcast_to(_minus(term(2, 0), term(0, 2)), batch)
    axisc = normalize_axis(axisc, len(batch) + 1, "axisc")[0]
    return _shape.moveaxis(_shape.stack([first, second, last], axis=-1), -1, axisc)
