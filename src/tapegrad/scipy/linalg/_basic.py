"""SciPy's spellings of NumPy's linear algebra: ``solve``, ``inv``, ``det``, ``cholesky``, ``eigh``
(also generalized), ``eigh_tridiagonal``, ``svd``, ``qr`` and ``qr_multiply``.

Each is composed of ``tapegrad.numpy.linalg`` functions, so its derivatives, batching and staging are
theirs. What SciPy adds is keywords: ``lower=`` (which triangle is read), ``assume_a=``, ``mode=``.
"""
from __future__ import annotations

from typing import Any

import tapegrad.numpy as tnp
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy.linalg._common import T, float_operand, matrix_operand, tril, triu
from tapegrad.scipy.linalg._triangular import solve_triangular

_ASSUME = ("gen", "general", "sym", "symmetric", "her", "hermitian", "pos", "positive definite",
           "diagonal", "tridiagonal", "banded", "upper triangular", "lower triangular")


def _mirror(a, lower, hermitian=False):
    """The symmetric (or Hermitian) matrix SciPy reads from one triangle of ``a``."""
    strict = tril(a, -1) if lower else triu(a, 1)
    strict_t = T(tnp.conj(strict)) if hermitian and a.dtype.kind == "c" else T(strict)
    return (tril(a) if lower else triu(a)) + strict_t


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: str | None = None, transposed: bool = False) -> Array:
    """The solution ``x`` of ``a @ x = b``, as ``scipy.linalg.solve``.

    Args:
        a: ``(..., n, n)``.
        b: ``(n,)`` or ``(..., n, k)``.
        lower: with ``assume_a`` ``'sym'``, ``'her'`` or ``'pos'``, read the lower triangle of ``a``
            (default the upper), mirrored (conjugated for ``'her'`` and ``'pos'``), as SciPy does;
            the other triangle gets zero derivative.
        assume_a: ``None``/``'gen'`` a general matrix; ``'sym'``, ``'her'``, ``'pos'`` read one
            triangle; the structured kinds (``'diagonal'``, ``'banded'``, ...) are solved as general
            matrices (same values for matrices of that structure).
        transposed: solve ``a^T x = b``.
        overwrite_a, overwrite_b, check_finite: accepted for SciPy compatibility, ignored.

    Returns:
        ``x`` with ``b``'s shape (stacks broadcast); differentiable in ``a`` and ``b``.

    Raises:
        ValueError: an unknown ``assume_a``.
        numpy.linalg.LinAlgError: a singular matrix.
    """
    if assume_a is not None and assume_a not in _ASSUME:
        raise ValueError(f"solve: assume_a must be one of {_ASSUME}, got {assume_a!r}")
    a = matrix_operand(a, "solve")
    if assume_a in ("sym", "symmetric"):
        a = _mirror(a, lower)
    elif assume_a in ("her", "hermitian", "pos", "positive definite"):
        a = _mirror(a, lower, hermitian=True)
    if transposed:
        a = T(a)
    return tnp.linalg.solve(a, float_operand(b))


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The inverse of each matrix of ``a`` (``(..., n, n)``), as ``scipy.linalg.inv``
    (``tapegrad.numpy.linalg.inv``); ``overwrite_a``, ``check_finite`` are ignored."""
    return tnp.linalg.inv(a)


def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The determinant of each matrix of ``a`` (``(..., n, n)``), as ``scipy.linalg.det``
    (``tapegrad.numpy.linalg.det``); ``overwrite_a``, ``check_finite`` are ignored."""
    return tnp.linalg.det(a)


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The Cholesky factor of each symmetric positive-definite matrix, as ``scipy.linalg.cholesky``.

    Args:
        a: real ``(..., n, n)``.
        lower: return ``L`` with ``a = L L^T``; default the upper ``U`` with ``a = U^T U``.

    Returns:
        The factor, ``a``'s shape and float dtype; computed from ``(a + a^T) / 2`` (JAX's convention,
        where SciPy reads one triangle: equal for symmetric ``a``), so gradients are symmetric.

    Raises:
        numpy.linalg.LinAlgError: a matrix is not positive definite.
    """
    return tnp.linalg.cholesky(a, upper=not lower)


def eigh(a: ArrayLike, b: ArrayLike = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, type: int = 1, check_finite: bool = True, subset_by_index: Any = None,
         subset_by_value: Any = None, driver: str | None = None) -> Array:
    """Eigenvalues (ascending) and eigenvectors of a real symmetric matrix, or of the generalized
    problem ``a v = w b v`` with ``b`` positive definite, as ``scipy.linalg.eigh``.

    Args:
        a: real ``(..., n, n)``; only the triangle named by ``lower`` is read (SciPy's rule).
        b: ``None``, or a positive-definite ``(..., n, n)`` (its ``lower`` triangle is read): the
            generalized problem is reduced to ``C = L^-1 a L^-T`` with ``b = L L^T``, and
            ``v = L^-T u`` (so ``v^T b v = I``, SciPy's normalization).
        lower: read the lower (default) or upper triangle.
        eigvals_only: return the eigenvalues alone.
        subset_by_index: ``(lo, hi)``: keep eigenvalues ``lo..hi`` (inclusive), as SciPy.
        type, subset_by_value, driver, overwrite_a, overwrite_b, check_finite: SciPy's; only
            ``type=1`` and ``subset_by_value=None`` are supported, the rest is ignored.

    Returns:
        ``w`` (``(..., n)``) when ``eigvals_only``, else ``(w, v)`` with eigenvectors in the columns of
        ``v``. Each eigenvector's sign is arbitrary (it may differ from SciPy's); eigenvector
        derivatives need distinct eigenvalues (see ``tapegrad.numpy.linalg.eigh``).

    Raises:
        NotImplementedError: ``type`` other than 1, ``subset_by_value``, complex input.
    """
    if type != 1 or subset_by_value is not None:
        raise NotImplementedError("eigh: only type=1 and subset_by_value=None are supported")
    uplo = "L" if lower else "U"
    a = matrix_operand(a, "eigh")
    if b is None:
        w, v = tnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False)
    else:  # real only: the reduction below uses transposes
        if "c" in (a.dtype.kind, tnp.result_type(b).kind):
            raise NotImplementedError("eigh: the generalized problem (b given) takes real matrices only")
        factor = tnp.linalg.cholesky(_mirror(matrix_operand(b, "eigh"), lower))
        half = solve_triangular(factor, _mirror(a, lower), lower=True)          # L^-1 a
        c = T(solve_triangular(factor, T(half), lower=True))                   # L^-1 a L^-T
        w, u = tnp.linalg.eigh(c)
        v = solve_triangular(factor, u, lower=True, trans=1)                   # L^-T u
    if subset_by_index is not None:
        lo, hi = subset_by_index
        w, v = w[..., lo:hi + 1], v[..., lo:hi + 1]
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d: Any, e: ArrayLike, eigvals_only: bool = False, select: str = "a", select_range: Any = None,
                     check_finite: bool = True, tol: float = 0.0, lapack_driver: str = "auto") -> Array:
    """Eigenvalues (and eigenvectors) of the real symmetric tridiagonal matrix with diagonal ``d``
    (``(n,)``) and off-diagonal ``e`` (``(n - 1,)``), as ``scipy.linalg.eigh_tridiagonal``.

    The matrix is assembled and decomposed with ``eigh``, so it is differentiable in ``d`` and ``e``
    (eigenvalues always, eigenvectors where the eigenvalues are distinct), and batches under ``vmap``.

    Returns:
        ``w`` (ascending) when ``eigvals_only``, else ``(w, v)``; eigenvector signs are arbitrary.

    Raises:
        NotImplementedError: ``select`` other than ``'a'`` (all eigenvalues).
        ValueError: ``e`` not one shorter than ``d``.
    """
    if select != "a":
        raise NotImplementedError("eigh_tridiagonal: only select='a' (all eigenvalues) is supported")
    d, e = float_operand(d), float_operand(e)
    if tnp.ndim(d) != 1 or tnp.shape(e) != (tnp.shape(d)[0] - 1,):
        raise ValueError(f"eigh_tridiagonal: d must be (n,) and e (n - 1,), got {tnp.shape(d)} and {tnp.shape(e)}")
    a = tnp.diag(d) + tnp.diag(e, 1) + tnp.diag(e, -1)
    w, v = tnp.linalg.eigh(a, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Array:
    """The singular value decomposition, as ``scipy.linalg.svd``: ``(U, s, Vh)``, or ``s`` when
    ``compute_uv`` is False (``tapegrad.numpy.linalg.svd``, whose notes give the derivative's
    conditions); ``lapack_driver`` and the rest are ignored."""
    out = tnp.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


_QR_MODES = {"full": "complete", "economic": "reduced", "r": "r"}


def qr(a: ArrayLike, overwrite_a: bool = False, lwork: int | None = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> Array:
    """The QR decomposition, as ``scipy.linalg.qr``.

    Args:
        a: real ``(..., m, n)``.
        mode: ``'full'`` (``Q`` ``(m, m)``), ``'economic'`` (``Q`` ``(m, k)``, ``k = min(m, n)``) or
            ``'r'`` (``R`` alone, in a 1-tuple, as SciPy returns it).

    Returns:
        ``(Q, R)``, or ``(R,)`` for ``mode='r'``.

    Raises:
        NotImplementedError: ``pivoting=True``, ``mode='raw'``, complex input, and derivatives where
            ``tapegrad.numpy.linalg.qr`` has none (``m < n``; ``'full'`` with ``m > n``).
        ValueError: an unknown ``mode``.
    """
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (Householder reflectors) is not supported")
    if mode not in _QR_MODES:
        raise ValueError(f"qr: mode must be 'full', 'economic', 'r' or 'raw', got {mode!r}")
    if mode == "r":
        return (tnp.linalg.qr(a, mode="r"),)
    return tuple(tnp.linalg.qr(a, mode=_QR_MODES[mode]))


def qr_multiply(a: ArrayLike, c: ArrayLike, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple[Array, ...]:
    """``Q @ c`` (``mode='left'``) or ``c @ Q`` (``mode='right'``) with ``Q`` the economic QR factor of
    ``a``, and ``R``, as ``scipy.linalg.qr_multiply``: ``(Q c or c Q, R)``.

    ``c`` may be 1-D (a column for ``'left'``, a row for ``'right'``). Composed of :func:`qr`, so its
    derivatives are ``qr``'s (``m >= n``).

    Raises:
        NotImplementedError: ``pivoting`` or ``conjugate``.
        ValueError: an unknown ``mode``.
    """
    if pivoting or conjugate:
        raise NotImplementedError("qr_multiply: pivoting=True and conjugate=True are not supported")
    if mode not in ("left", "right"):
        raise ValueError(f"qr_multiply: mode must be 'left' or 'right', got {mode!r}")
    q, r = qr(a, mode="economic")
    c = float_operand(c)
    return (q @ c if mode == "left" else c @ q), r
