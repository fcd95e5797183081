"""``solve_sylvester`` and the matrix functions whose derivatives are Sylvester equations: ``sqrtm``
(and ``polar``, composed of ``svd``).

- ``solve_sylvester``, ``X`` with ``A X + X B = Q``: differentiating,
  ``A dX + dX B = dQ - dA X - X dB``, one more Sylvester solve. Its transpose: the adjoint of
  ``X -> A X + X B`` is ``Y -> A^T Y + Y B^T``, so ``Q_bar = sylvester(A^T, B^T, X_bar)``,
  ``A_bar = -Q_bar X^T`` and ``B_bar = -X^T Q_bar``.
- ``sqrtm``, ``S`` with ``S S = A``: ``S dS + dS S = dA`` (JAX's rule), so
  ``dS = sylvester(S, S, dA)`` and ``A_bar = sylvester(S^T, S^T, S_bar)``.

The rules call ``solve_sylvester`` itself, so every order is exact. Complex input is holomorphic
(transposes, not conjugate transposes: JAX's conventions).
"""
from __future__ import annotations

import numpy as np

from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg import svd
from tapegrad.numpy.linalg._common import T, batch_of, defbatch_matrices, matrix_operand, shaped
from tapegrad.scipy.linalg._common import over_stack, scipy_linalg


# ---- solve_sylvester -----------------------------------------------------------------------------
def _sylvester_impl(a, b, q):
    return over_stack(lambda a, b, q: scipy_linalg(a).solve_sylvester(a, b, q), a, b, q)


def _sylvester(a, b, q):
    return bind(sylvester_p, a, b, q)


sylvester_p = primitive("scipy.linalg.solve_sylvester", _sylvester_impl,
                        lambda a, b, q: shaped(batch_of(a, b, q) + tuple(q.shape[-2:]), a, b, q))
defjvp(sylvester_p,
       lambda t, ans, a, b, q: _sylvester(a, b, -matmul(t, ans)),
       lambda t, ans, a, b, q: _sylvester(a, b, -matmul(ans, t)),
       lambda t, ans, a, b, q: _sylvester(a, b, t))


def _sylvester_vjp_a(ct, ans, a, b, q):
    return _shape.unbroadcast(-matmul(_sylvester(T(a), T(b), ct), T(ans)), a)


def _sylvester_vjp_b(ct, ans, a, b, q):
    return _shape.unbroadcast(-matmul(T(ans), _sylvester(T(a), T(b), ct)), b)


defvjp(sylvester_p, _sylvester_vjp_a, _sylvester_vjp_b,
       lambda ct, ans, a, b, q: _shape.unbroadcast(_sylvester(T(a), T(b), ct), q))
defbatch_matrices(sylvester_p)


def solve_sylvester(a: ArrayLike, b: ArrayLike, q: ArrayLike) -> Array:
    """The solution ``X`` of ``a @ X + X @ b = q``, as ``scipy.linalg.solve_sylvester``
    (Bartels-Stewart).

    Args:
        a: ``(..., m, m)``; b: ``(..., n, n)``; q: ``(..., m, n)``; stacks broadcast.

    Returns:
        ``X`` ``(..., m, n)``, differentiable in all three to any order (module notes).

    Raises:
        ValueError: shapes that do not fit.
    """
    a, b = matrix_operand(a, "solve_sylvester"), matrix_operand(b, "solve_sylvester")
    q = matrix_operand(q, "solve_sylvester", square=False)
    if _shape.shape(q)[-2:] != (_shape.shape(a)[-1], _shape.shape(b)[-1]):
        raise ValueError(f"solve_sylvester: q must be (m, n) for a (m, m) and b (n, n), got a "
                         f"{_shape.shape(a)}, b {_shape.shape(b)}, q {_shape.shape(q)}")
    return _sylvester(a, b, q)


# ---- sqrtm ---------------------------------------------------------------------------------------
def _sqrtm_impl(a):
    root = over_stack(lambda x: scipy_linalg(x).sqrtm(x), a)
    if a.dtype.kind != "c" and root.dtype.kind == "c":
        raise np.linalg.LinAlgError("sqrtm: the square root of this real matrix is complex (a negative "
                                    "real eigenvalue); pass a complex matrix to get it")
    return root.astype(a.dtype, copy=False)


sqrtm_p = primitive("scipy.linalg.sqrtm", _sqrtm_impl, lambda a: shaped(a.shape, a))
defjvp(sqrtm_p, lambda t, ans, a: _sylvester(ans, ans, t))
defvjp(sqrtm_p, lambda ct, ans, a: _sylvester(T(ans), T(ans), ct))
defbatch_matrices(sqrtm_p)


def sqrtm(A: ArrayLike, disp: bool = True, blocksize: int = 64) -> Array:
    """The principal square root ``S`` (``S @ S = A``) of each matrix, as ``scipy.linalg.sqrtm``.

    Args:
        A: ``(..., n, n)``, real or complex.
        disp, blocksize: accepted for SciPy compatibility; the result alone is returned.

    Returns:
        ``S``, ``A``'s shape and dtype. Differentiable to any order where ``S`` and ``-S`` share no
        eigenvalue (a positive-definite ``A``, for one): ``dS`` solves ``S dS + dS S = dA``.

    Raises:
        numpy.linalg.LinAlgError: a real ``A`` whose square root is complex (SciPy would return a
            complex array, whose dtype depends on the values; pass complex input for it).
    """
    return bind(sqrtm_p, matrix_operand(A, "sqrtm"))


# ---- polar ---------------------------------------------------------------------------------------
def polar(a: ArrayLike, side: str = "right") -> tuple[Array, ...]:
    """The polar decomposition, as ``scipy.linalg.polar``: ``a = u @ p`` (``side='right'``) or
    ``a = p @ u`` (``'left'``), ``u`` with orthonormal columns (or rows), ``p`` symmetric
    positive semi-definite.

    Args:
        a: real ``(..., m, n)``.
        side: ``'right'`` (``p`` is ``(n, n)``) or ``'left'`` (``p`` is ``(m, m)``).

    Returns:
        ``(u, p)``, from the reduced SVD ``a = W diag(s) Vh`` as ``u = W Vh``, ``p = Vh^T diag(s) Vh``
        (or ``W diag(s) W^T``). Derivatives are the SVD's: they need distinct non-zero singular
        values (JAX computes ``polar`` by QDWH, with the same values).

    Raises:
        ValueError: ``side`` not ``'right'`` or ``'left'``.
    """
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    w, s, vh = svd(matrix_operand(a, "polar", square=False), full_matrices=False)
    u = matmul(w, vh)
    if side == "right":
        return u, matmul(T(vh) * _shape.expand_dims(s, -2), vh)
    return u, matmul(w * _shape.expand_dims(s, -2), T(w))
