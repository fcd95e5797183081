"""``lu``, ``lu_factor`` and ``lu_solve``: ``A = P L U`` with partial pivoting (LAPACK's ``getrf``).

One primitive returns ``(P, L, U, piv, perm)``: the permutation matrix (float, as SciPy returns it),
the unit lower and upper factors, LAPACK's pivots and the row permutation (integers). The pivots are
piecewise constant, so ``P``, ``piv`` and ``perm`` have zero derivative.

Forward rule (JAX's ``lu_jvp_rule``, square matrices): with ``X = L^-1 P^T dA U^-1``,
``dL = L tril(X, -1)`` and ``dU = triu(X) U``. Reverse rule, its transpose: with
``M = tril(L^T L_bar, -1) + triu(U_bar U^T)``, ``A_bar = P L^-T M U^-T``. Both are triangular solves
and products, so every order follows.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import ShapedArray, def_nondiff, defbatch_front, defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy._indexing import getitem
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy._sorting import argsort
from tapegrad.numpy.linalg._common import (
    T,
    defbatch_matrices,
    float_operand,
    matrix_operand,
    shaped,
    tril,
    triu,
)
from tapegrad.scipy.linalg._common import over_stack, scipy_linalg
from tapegrad.scipy.linalg._triangular import solve_triangular


def _perm_of(piv, m):
    """The row permutation ``perm`` (``A[perm] = L U``) from LAPACK's pivots ``(..., k)``, in array
    operations (no device synchronization): row ``i`` was swapped with row ``piv[i]``, in order."""
    xp = namespace_of(piv)
    batch = piv.shape[:-1]
    flat = piv.reshape(-1, piv.shape[-1])
    perm = xp.broadcast_to(xp.arange(m), (flat.shape[0], m)).copy()
    rows = xp.arange(flat.shape[0])
    for i in range(flat.shape[-1]):
        j = flat[:, i]
        kept = perm[rows, i].copy()
        perm[rows, i] = perm[rows, j]
        perm[rows, j] = kept
    return perm.reshape(batch + (m,))


def _real(dtype):
    """The real dtype of ``dtype``'s precision: ``P``'s (SciPy's ``P`` is real for complex input)."""
    return np.finfo(dtype).dtype


def _lu_impl(a):
    m, n = a.shape[-2:]
    k = min(m, n)
    xp = namespace_of(a)
    packed, piv = over_stack(lambda x: scipy_linalg(x).lu_factor(x, check_finite=False), a)
    piv = piv.astype(np.int32)
    lower = xp.tril(packed[..., :, :k], -1) + xp.eye(m, k, dtype=a.dtype)
    upper = xp.triu(packed[..., :k, :])
    perm = _perm_of(piv, m)
    p = (perm[..., None, :] == xp.arange(m)[:, None]).astype(_real(a.dtype))  # P[perm[i], i] = 1
    return p, lower, upper, piv, perm


def _lu_aval(a):
    batch, (m, n) = tuple(a.shape[:-2]), tuple(a.shape[-2:])
    k = min(m, n)
    return [ShapedArray(batch + (m, m), _real(a.dtype)), shaped(batch + (m, k), a), shaped(batch + (k, n), a),
            ShapedArray(batch + (k,), np.dtype(np.int32)), ShapedArray(batch + (m,), np.dtype(np.int64))]


def _square(a):
    if a.shape[-1] != a.shape[-2]:
        raise NotImplementedError(f"lu: the derivative needs square matrices, got shape {tuple(a.shape)}")


def _lu_jvp(t, ans, a):
    _square(a)
    p, lower, upper = ans[:3]
    z = solve_triangular(lower, matmul(T(p), t), lower=True, unit_diagonal=True)   # L^-1 P^T dA
    x = T(solve_triangular(upper, T(z), trans=1))                                  # ... U^-1
    return [None, matmul(lower, tril(x, -1)), matmul(triu(x), upper), None, None]


def _lu_vjp(cts, ans, a):
    _square(a)
    p, lower, upper = ans[:3]
    m = tril(matmul(T(lower), cts[1]), -1) + triu(matmul(cts[2], T(upper)))
    y = matmul(p, solve_triangular(lower, m, lower=True, unit_diagonal=True, trans=1))  # P L^-T M
    return T(solve_triangular(upper, T(y)))                                             # ... U^-T


lu_p = primitive("scipy.linalg.lu", _lu_impl, _lu_aval, multiple_results=True)
defvjp(lu_p, _lu_vjp)
defjvp(lu_p, _lu_jvp)
defbatch_matrices(lu_p)


def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> tuple[Array, ...]:
    """The LU decomposition with partial pivoting, ``a = P @ L @ U``, as ``scipy.linalg.lu``.

    Args:
        a: ``(..., m, n)``, real or complex (complex derivatives are holomorphic, JAX's convention).
        permute_l: return ``(P @ L, U)``.
        p_indices: return the permutation as integer row indices ``r`` (``a = L[r] @ U``) instead
            of a matrix.
        overwrite_a, check_finite: accepted for SciPy compatibility, ignored.

    Returns:
        ``(P, L, U)`` (``(m, m)`` real, unit lower ``(m, k)``, upper ``(k, n)``, ``k = min(m, n)``), or
        ``(P @ L, U)`` with ``permute_l``. Differentiable in ``a`` (square matrices) to any order;
        ``P`` and the row indices are piecewise constant (zero derivative).

    Raises:
        NotImplementedError: differentiating with ``m != n``.
    """
    p, lower, upper, _, perm = bind(lu_p, matrix_operand(a, "lu", square=False))
    if permute_l:
        return matmul(p, lower), upper
    return (_inverse_of(perm) if p_indices else p), lower, upper


def _inverse_of(perm):
    """The inverse permutation of ``perm``: SciPy's ``p_indices`` (``a = L[r] @ U``)."""
    return argsort(perm, axis=-1)


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, ...]:
    """The LU decomposition packed as LAPACK returns it, as ``scipy.linalg.lu_factor``.

    Returns:
        ``(lu, piv)``; ``lu`` holds ``U`` and, below the diagonal, ``L``'s strict lower part;
        ``piv`` (int32, ``(..., k)``) says row ``i`` was interchanged with row ``piv[i]``.
        Differentiable in ``a`` (square matrices) through ``lu``; ``piv`` is piecewise constant.
    """
    a = matrix_operand(a, "lu_factor", square=False)
    _, lower, upper, piv, _ = bind(lu_p, a)
    m, n = _shape.shape(a)[-2:]
    strict = tril(lower, -1)
    if m < n:  # L is (m, m), U (m, n): L's part padded with zero columns
        strict = _pad_last(strict, axis=-1, count=n - m)
    elif m > n:  # L is (m, n), U (n, n): U padded with zero rows
        upper = _pad_last(upper, axis=-2, count=m - n)
    packed = strict + upper
    return packed, piv


def _pad_last(x, axis, count):
    """``x`` with ``count`` zeros appended along ``axis`` (-1 or -2)."""
    width = [(0, 0)] * _shape.ndim(x)
    width[axis] = (0, count)
    return _shape.pad(x, width)


_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def lu_solve(lu_and_piv: Any, b: ArrayLike, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Array:
    """The solution of ``a x = b`` (``trans=0``) or ``a^T x = b`` (``trans=1``) from
    ``(lu, piv) = lu_factor(a)``, as ``scipy.linalg.lu_solve``.

    Args:
        lu_and_piv: ``(lu, piv)``; ``lu`` one square ``(n, n)`` matrix.
        b: ``(n, ...)``.
        trans: ``0``/``'N'``, ``1``/``'T'``, or ``2``/``'C'`` (real input only: the same as ``1``).

    Returns:
        ``x`` with ``b``'s shape; differentiable in ``lu`` and ``b`` to any order (two triangular
        solves and a gather), batched under ``vmap``.

    Raises:
        ValueError: an unknown ``trans``, or shapes that do not fit.
        NotImplementedError: ``trans=2`` with complex input.
    """
    lu_, piv = lu_and_piv
    lu_ = matrix_operand(lu_, "lu_solve")
    b = float_operand(b)
    n = _shape.shape(lu_)[-1]
    if trans not in _TRANS:
        raise ValueError(f"lu_solve: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    if _shape.ndim(lu_) != 2 or not _shape.ndim(b) or _shape.shape(b)[0] != n:
        raise ValueError(f"lu_solve: lu must be (n, n) and b (n, ...), got {_shape.shape(lu_)} and {_shape.shape(b)}")
    if trans in (2, "C") and "c" in (lu_.dtype.kind, b.dtype.kind):
        raise NotImplementedError("lu_solve: trans='C' of complex input is not supported; conjugate lu, b")
    perm = bind(perm_p, piv, m=n)
    columns = _shape.reshape(b, (n, -1))
    if _TRANS[trans] == 0:  # a = P L U: x = U^-1 L^-1 (P^T b), and P^T b = b[perm]
        y = solve_triangular(lu_, getitem(columns, perm), lower=True, unit_diagonal=True)
        x = solve_triangular(lu_, y)
    else:  # a^T = U^T L^T P^T: P^T x = L^-T U^-T b, so x[perm] = that
        y = solve_triangular(lu_, solve_triangular(lu_, columns, trans=1), lower=True, unit_diagonal=True, trans=1)
        x = getitem(y, _inverse_of(perm))
    return _shape.reshape(x, _shape.shape(b))


perm_p = primitive("scipy.linalg.lu_perm", lambda piv, *, m: _perm_of(piv, m),
                   lambda piv, *, m: ShapedArray(tuple(piv.shape[:-1]) + (m,), np.dtype(np.int64)))
def_nondiff(perm_p)
defbatch_front(perm_p)
