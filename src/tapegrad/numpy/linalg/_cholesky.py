"""``cholesky``: ``A = L L^T`` for symmetric positive-definite ``A``.

Forward rule (Murray 2016, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, as
JAX's ``_cholesky_jvp_rule``): ``dL = L Phi(L^-1 dA L^-T)`` where ``Phi`` keeps the lower triangle
and halves the diagonal. The reverse rule is its transpose (``Phi`` is self-adjoint):
``A_bar = L^-T Phi(L^T L_bar) L^-1``. Both are written with tapegrad's ``solve`` and ``matmul``.
"""
from __future__ import annotations

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._rules import defjvp, defvjp, primitive
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import T, defbatch_matrices, eye_like, matrix_operand, shaped, symmetrize, tri_like
from tapegrad.numpy.linalg._solve import solve


def _phi(x):
    """The lower triangle with the diagonal halved."""
    return x * (tri_like(x) - 0.5 * eye_like(x))


def _cholesky_jvp(t, ans, a):
    l_inv_t_l_inv_t = solve(ans, T(solve(ans, T(t))))  # L^-1 dA L^-T
    return matmul(ans, _phi(l_inv_t_l_inv_t))


def _cholesky_vjp(ct, ans, a):
    lt = T(ans)
    return solve(lt, T(solve(lt, T(_phi(matmul(lt, ct))))))  # L^-T Phi(L^T L_bar) L^-1


cholesky_p = primitive("cholesky", lambda a: namespace_of(a).linalg.cholesky(a), lambda a: shaped(a.shape, a))
defvjp(cholesky_p, _cholesky_vjp)
defjvp(cholesky_p, _cholesky_jvp)
defbatch_matrices(cholesky_p)


def cholesky(a, /, *, upper=False):
    """The Cholesky factor of each symmetric positive-definite matrix, as ``numpy.linalg.cholesky``.

    Args:
        a: real ``(..., n, n)``, symmetric positive definite.
        upper: return the upper factor ``U = L^T`` (``a = U^T U``) instead of ``L`` (``a = L L^T``).

    Returns:
        ``(..., n, n)``, lower (or upper) triangular, ``a``'s float dtype.

    Raises:
        numpy.linalg.LinAlgError: a matrix is not positive definite.

    Symmetric input (JAX's convention, ``symmetrize_input=True``): the factor is computed from
    ``(a + a^T) / 2``, so the function and its derivatives are those of ``cholesky((a + a^T) / 2)``
    and gradients are symmetric. For a symmetric ``a`` the values are NumPy's (NumPy reads only the
    lower triangle, so for a non-symmetric ``a`` the two differ).
    """
    a = matrix_operand(a, "cholesky")
    if a.dtype.kind == "c":
        raise NotImplementedError("cholesky: complex input is not supported (real matrices only)")
    lower = bind(cholesky_p, symmetrize(a))
    return T(lower) if upper else lower
