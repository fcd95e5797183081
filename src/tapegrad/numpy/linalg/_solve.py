"""Linear systems and inverses: ``solve``, ``inv``, ``pinv``, ``lstsq``.

Rules (Giles 2008, "An extended collection of matrix derivative results", sections 2.2 and 3.2;
JAX's ``jax/_src/numpy/linalg.py``), with ``X = ans``:

    solve   X = A^-1 B    jvp  dX = A^-1 (dB - dA X)        vjp  B_bar = A^-T X_bar,  A_bar = -B_bar X^T
    inv     X = A^-1      jvp  dX = -X dA X                 vjp  A_bar = -X^T X_bar X^T
    pinv    X = A^+       jvp  Golub & Pereyra (1973)        vjp  its transpose (below)

Every rule is written with tapegrad's ``matmul`` and ``solve``, so it differentiates again. Complex
input follows JAX's conventions: ``solve`` and ``inv`` are holomorphic (the vjp multiplies by the
transpose, no conjugate); ``pinv`` conjugates (its jvp has ``dA^H`` terms), and its vjp is the
transpose of its jvp under ``Re(sum(a * b))``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import (
    H,
    T,
    abs2,
    batch_of,
    conj,
    defbatch_matrices,
    defbatch_solve,
    eye_like,
    float_operand,
    matrix_operand,
    shaped,
)
from tapegrad.numpy.linalg._svd import svdvals


# ---- solve ---------------------------------------------------------------------------------------
def _solve_vjp_b(ct, ans, a, b):
    return _shape.unbroadcast(solve(T(a), ct), b)


def _solve_vjp_a(ct, ans, a, b):
    return _shape.unbroadcast(-matmul(solve(T(a), ct), T(ans)), a)


def _solve_impl(a, b):
    """``a^-1 b`` for ``a`` ``(..., n, n)`` and ``b`` ``(..., n, k)`` whose stacks broadcast (NumPy 2's
    rule). The broadcasting is done here, because CuPy's ``linalg.solve`` takes equal stacks only
    (``a.shape[:-1] == b.shape[:-1]``, ``cupy/linalg/_solve.py``); one matrix against a stack of
    right-hand sides is one solve with the stack as more columns, which factors the matrix once."""
    xp = namespace_of(a, b)
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if 0 in batch + a.shape[-1:] + b.shape[-1:]:  # nothing to solve (and no zero-sized LAPACK call)
        return xp.zeros(batch + b.shape[-2:], xp.result_type(a, b))
    if a.shape[:-2] == b.shape[:-2]:
        return xp.linalg.solve(a, b)
    if a.ndim == 2:
        columns = xp.moveaxis(b, -2, 0)  # (n, ..., k)
        x = xp.linalg.solve(a, columns.reshape(columns.shape[0], -1))
        return xp.moveaxis(x.reshape(columns.shape), 0, -2)
    return xp.linalg.solve(xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:]))


solve_p = primitive("solve", _solve_impl, lambda a, b: shaped(batch_of(a, b) + tuple(b.shape[-2:]), a, b))
defvjp(solve_p, _solve_vjp_a, _solve_vjp_b)
defjvp(solve_p,
       lambda t, ans, a, b: solve(a, -matmul(t, ans)),
       lambda t, ans, a, b: solve(a, t))
defbatch_solve(solve_p)


def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """The solution ``x`` of ``a @ x = b``, as ``numpy.linalg.solve`` (NumPy 2 semantics).

    Args:
        a: ``(..., n, n)``, invertible.
        b: ``(n,)`` (one right-hand side, for every matrix of the stack) or ``(..., n, k)``; the
            leading axes of ``a`` and ``b`` broadcast.

    Returns:
        ``x`` with ``b``'s trailing shape and the broadcast leading axes, in the promoted float dtype.

    Raises:
        numpy.linalg.LinAlgError: ``a`` is singular or not square.
        ValueError: ``b`` is 0-d, its ``n`` is not ``a``'s, or the stacks do not broadcast.
    """
    a = matrix_operand(a, "solve")
    b = float_operand(b)
    n, b_shape = _shape.shape(a)[-1], _shape.shape(b)
    if not b_shape or b_shape[0 if len(b_shape) == 1 else -2] != n:
        # checked here, so every backend says the same (CuPy's and NumPy's messages differ)
        raise ValueError(f"solve: b must have shape (n,) or (..., n, k) with a's n = {n}, got shape {b_shape}")
    if _shape.ndim(b) == 1:
        return _shape.squeeze(bind(solve_p, a, _shape.expand_dims(b, -1)), -1)
    return bind(solve_p, a, b)


# ---- inv -----------------------------------------------------------------------------------------
inv_p = primitive("inv", lambda a: namespace_of(a).linalg.inv(a), lambda a: shaped(a.shape, a))
defvjp(inv_p, lambda ct, ans, a: -matmul(T(ans), matmul(ct, T(ans))))
defjvp(inv_p, lambda t, ans, a: -matmul(ans, matmul(t, ans)))
defbatch_matrices(inv_p)


def inv(a: ArrayLike) -> Array:
    """The inverse of each matrix of ``a`` (``(..., n, n)``), as ``numpy.linalg.inv``.

    Raises:
        numpy.linalg.LinAlgError: a singular or non-square matrix.
    """
    return bind(inv_p, matrix_operand(a, "inv"))


# ---- pinv ----------------------------------------------------------------------------------------
def _pinv_jvp(t, ans, a, **params):
    """Golub & Pereyra (1973), as JAX's ``_pinv_jvp``: valid where the rank is locally constant."""
    p = ans
    m, n = a.shape[-2], a.shape[-1]
    q = eye_like(a, m) - matmul(a, p)  # I - A A+   (m x m)
    r = eye_like(a, n) - matmul(p, a)  # I - A+ A   (n x n)
    return (-matmul(p, matmul(t, p)) + matmul(matmul(p, H(p)), matmul(H(t), q))
            + matmul(r, matmul(H(t), matmul(H(p), p))))


def _pinv_vjp(ct, ans, a, **params):
    """The transpose of :func:`_pinv_jvp` under ``<X, Y> = Re(sum(X * Y))``, term by term (a term
    ``B dA^H C`` transposes to ``conj(C) ct^H conj(B)``)."""
    p = ans
    m, n = a.shape[-2], a.shape[-1]
    q = eye_like(a, m) - matmul(a, p)
    r = eye_like(a, n) - matmul(p, a)
    return (-matmul(T(p), matmul(ct, T(p))) + matmul(conj(q), matmul(H(ct), matmul(conj(p), T(p))))
            + matmul(matmul(T(p), conj(p)), matmul(H(ct), conj(r))))


pinv_p = primitive("pinv", lambda a, *, rcond: namespace_of(a).linalg.pinv(a, rcond),
                   lambda a, *, rcond: shaped(tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), a))
defvjp(pinv_p, _pinv_vjp)
defjvp(pinv_p, _pinv_jvp)
defbatch_matrices(pinv_p)


_NO_VALUE = object()  # NumPy tells "rtol not given" from "rtol=None"


def pinv(a: ArrayLike, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NO_VALUE) -> Array:
    """The Moore-Penrose pseudo-inverse of each matrix of ``a``, as ``numpy.linalg.pinv``.

    Args:
        a: ``(..., m, n)``.
        rcond, rtol: singular values at most ``rcond * largest`` are treated as zero (Python
            numbers; give one of them). As NumPy 2: neither given means ``1e-15``, ``rtol=None``
            means ``max(m, n) * eps``.
        hermitian: accepted for NumPy compatibility; the general SVD is used either way, so the
            value and the derivative are those of ``pinv(a)`` also for a non-symmetric ``a``.

    Returns:
        ``(..., n, m)``.

    The derivative (Golub and Pereyra 1973, "The differentiation of pseudo-inverses") holds where
    the rank of ``a`` is locally constant; it is not defined where a singular value crosses the
    cut-off.
    """
    a = matrix_operand(a, "pinv", square=False)
    if rcond is not None and rtol is not _NO_VALUE:
        raise ValueError("pinv: give rcond or rtol, not both")
    if rcond is None:
        rcond = 1e-15 if rtol is _NO_VALUE else rtol
    if rcond is None:
        rcond = max(a.shape[-2:]) * float(np.finfo(a.dtype).eps)  # finfo of a complex dtype: its real part's
    return bind(pinv_p, a, rcond=float(rcond))


# ---- lstsq ---------------------------------------------------------------------------------------
def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None) -> tuple[Array, Array, int, Array]:
    """Least-squares solution of ``a @ x = b``, as ``numpy.linalg.lstsq``.

    Args:
        a: ``(m, n)``.
        b: ``(m,)`` or ``(m, k)``.
        rcond: singular values at most ``rcond * largest`` count as zero; None means
            ``eps * max(m, n)`` with float64's ``eps`` (NumPy's default: it computes in double).

    Returns:
        ``(x, residuals, rank, s)`` as NumPy; ``x`` of shape ``(n,)`` or ``(n, k)``; ``residuals``
        the squared 2-norms (real, also for complex input) of the columns of ``b - a @ x`` (shape
        ``(1,)`` or ``(k,)``) when ``rank == n < m``, else an empty array; ``rank`` an int; ``s`` the
        singular values of ``a``.

    Raises:
        numpy.linalg.LinAlgError: ``a`` is not 2-D.

    ``x = pinv(a, rcond) @ b``, so its derivative is the pseudo-inverse's (constant rank);
    ``residuals`` and ``s`` are differentiable too, ``rank`` is not. ``rank`` is read from the
    singular values, so it needs concrete values (eager mode).
    """
    a = matrix_operand(a, "lstsq", square=False)
    b = float_operand(b)
    if _shape.ndim(a) != 2:
        raise np.linalg.LinAlgError(f"lstsq: a must be 2-dimensional, got shape {a.shape}")
    m, n = a.shape
    if rcond is None:
        rcond = float(np.finfo(np.float64).eps) * max(m, n)
    s = svdvals(a)
    rank = int(red.sum(ew.greater(s, rcond * red.amax(s)))) if min(m, n) else 0
    x = matmul(pinv(a, rcond), b)
    if rank == n and m > n:
        r = b - matmul(a, x)
        residuals = red.sum(abs2(r), axis=0)
        residuals = _shape.reshape(residuals, (1,)) if _shape.ndim(b) == 1 else residuals
    else:
        residuals = namespace_of(a).zeros((0,), dtype=s.dtype)
    return x, residuals, rank, s
