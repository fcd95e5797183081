"""``cholesky``: ``A = L L^H`` for Hermitian (real: symmetric) positive-definite ``A``.

Forward rule (Murray 2016, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, as
JAX's ``_cholesky_jvp_rule``): ``dL = L Phi(L^-1 dA L^-H)`` where ``Phi`` keeps the lower triangle
and halves the diagonal. The reverse rule is its transpose under ``Re(sum(a * b))`` (JAX's complex
convention; ``Phi`` is its own transpose): ``A_bar = L^-T Phi(L^T L_bar) conj(L)^-1``. For real
``A`` the conjugations vanish. Both are written with tapegrad's ``solve`` and ``matmul``.
"""
from __future__ import annotations

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import (
    H,
    T,
    conj,
    defbatch_matrices,
    eye_like,
    matrix_operand,
    shaped,
    symmetrize,
    tri_like,
)
from tapegrad.numpy.linalg._solve import solve


def _phi(x):
    """The lower triangle with the diagonal halved."""
    return x * (tri_like(x) - 0.5 * eye_like(x))


def _cholesky_jvp(t, ans, a):
    l_inv_t_l_inv_h = solve(ans, T(solve(conj(ans), T(t))))  # L^-1 dA L^-H
    return matmul(ans, _phi(l_inv_t_l_inv_h))


def _cholesky_vjp(ct, ans, a):
    lt = T(ans)
    return solve(lt, T(solve(H(ans), T(_phi(matmul(lt, ct))))))  # L^-T Phi(L^T L_bar) conj(L)^-1


cholesky_p = primitive("cholesky", lambda a: namespace_of(a).linalg.cholesky(a), lambda a: shaped(a.shape, a))
defvjp(cholesky_p, _cholesky_vjp)
defjvp(cholesky_p, _cholesky_jvp)
defbatch_matrices(cholesky_p)


def cholesky(a: ArrayLike, /, *, upper: bool = False) -> Array:
    """The Cholesky factor of each symmetric positive-definite matrix, as ``numpy.linalg.cholesky``.

    Args:
        a: ``(..., n, n)``, symmetric (complex: Hermitian) positive definite.
        upper: return the upper factor ``U = L^H`` (``a = U^H U``) instead of ``L`` (``a = L L^H``).

    Returns:
        ``(..., n, n)``, lower (or upper) triangular, ``a``'s float dtype.

    Raises:
        numpy.linalg.LinAlgError: a matrix is not positive definite.

    Symmetric input (JAX's convention, ``symmetrize_input=True``): the factor is computed from
    ``(a + a^H) / 2``, so the function and its derivatives are those of ``cholesky((a + a^H) / 2)``
    and gradients are symmetric (Hermitian). For a symmetric ``a`` the values are NumPy's (NumPy
    reads only the lower triangle, so for a non-symmetric ``a`` the two differ). Complex input:
    JAX's conventions for derivatives (the vjp is the transpose of the jvp under ``Re(sum(a * b))``).
    """
    a = matrix_operand(a, "cholesky")
    lower = bind(cholesky_p, symmetrize(a))
    return H(lower) if upper else lower
