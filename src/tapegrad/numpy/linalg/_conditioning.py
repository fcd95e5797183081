"""``cond`` and ``matrix_rank``: what the singular values say about a matrix, as compositions of
``svd``, ``norm`` and ``inv`` (so ``cond``'s derivatives in both modes and to any order are theirs;
``matrix_rank`` is integer-valued and has none)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy.linalg._common import matrix_operand
from tapegrad.numpy.linalg._norm import norm
from tapegrad.numpy.linalg._solve import inv
from tapegrad.numpy.linalg._svd import svdvals


def cond(x: ArrayLike, p: Any = None) -> Array:
    """The condition number of each matrix, as ``numpy.linalg.cond``.

    Args:
        x: ``(..., m, n)`` (square unless ``p`` is None, 2 or -2).
        p: None or 2 (largest over smallest singular value), -2 (smallest over largest), or a matrix
            norm order of :func:`norm` (``'fro'``, ``'nuc'``, 1, -1, inf, -inf):
            ``norm(x, p) * norm(inv(x), p)``.

    Returns:
        ``(...)``, ``x``'s float dtype (real for complex input). A singular matrix gives ``inf``
        with ``p`` None/2 (as NumPy, a zero matrix too).

    Raises:
        numpy.linalg.LinAlgError: empty or non-square matrices (for the other ``p``); NaN entries
            with ``p`` None/2/-2 (the SVD does not converge, as in NumPy); a singular
            matrix with a ``p`` other than None, 2, -2 (NumPy returns ``inf`` there; tapegrad's
            ``inv`` refuses).

    Derivatives: those of ``svd``'s singular values (distinct ones) or of ``norm`` and ``inv``.
    """
    x = matrix_operand(x, "cond", square=p not in (None, 2, -2))
    if 0 in _shape.shape(x)[-2:]:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    if p in (None, 2, -2):
        s = svdvals(x)
        largest, smallest = s[..., 0], s[..., -1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = smallest / largest if p == -2 else largest / smallest
        return ew.where(ew.isnan(ratio), math.inf, ratio)  # 0 / 0, a zero matrix: NumPy's inf
    try:
        x_inv = inv(x)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(f"cond: a matrix is singular, so its condition number in the norm "
                                    f"p={p!r} is infinite; p=None gives inf for it instead") from None
    return norm(x, p, axis=(-2, -1)) * norm(x_inv, p, axis=(-2, -1))


def matrix_rank(A: ArrayLike, tol: float | None = None, hermitian: bool = False, *, rtol: float | None = None) -> Array:
    """The rank of each matrix: the number of singular values above a threshold, as
    ``numpy.linalg.matrix_rank``.

    Args:
        A: ``(..., m, n)``; a 0-d or 1-D ``A`` has rank 1 unless it is all zeros (then 0).
        tol: the absolute threshold (a number or an array broadcasting against the stack axes).
        hermitian: accepted for NumPy compatibility; the general SVD is used either way.
        rtol: the threshold relative to the largest singular value; default
            ``max(m, n) * eps`` of ``A``'s precision. Give ``tol`` or ``rtol``, not both.

    Returns:
        ``(...)`` int64 ranks. Integer-valued, so no derivative (a gradient through it is zero).

    Raises:
        ValueError: both ``tol`` and ``rtol`` given.
    """
    if tol is not None and rtol is not None:
        raise ValueError("matrix_rank: give tol or rtol, not both")
    a = matrix_operand(A, "matrix_rank", square=False) if _shape.ndim(A) >= 2 else None
    if a is None:
        return ew.astype(red.any(ew.not_equal(A, 0)), np.int64)
    s = svdvals(a)
    if tol is None:
        if rtol is None:
            rtol = max(a.shape[-2:]) * float(np.finfo(s.dtype).eps)
        tol = red.amax(s, axis=-1, keepdims=True) * _shape.expand_dims(rtol, -1)
    else:
        tol = _shape.expand_dims(tol, -1)
    return red.sum(ew.astype(ew.greater(s, tol), np.int64), axis=-1)
