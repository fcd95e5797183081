"""``svd``: ``A = U diag(s) Vh`` (reduced: ``k = min(m, n)`` singular values).

Forward rule (JAX's ``_svd_jvp_rule``; Townsend 2016, "Differentiating the singular value
decomposition"), real case, with ``V = Vh^T``, ``X = U^T dA V`` (``k x k``), ``S = diag(s)`` and
``F[i, j] = 1 / (s_j^2 - s_i^2)`` off the diagonal:

    ds  = diag(X)
    dU  = U (F * (X S + S X^T)) + (I - U U^T) dA V S^-1          (second term when m > k)
    dV  = V (F * (S X + X^T S)) + (I - V V^T) dA^T U S^-1        (second term when n > k)

The reverse rule is its transpose, term by term, with ``G = F * (U^T U_bar)``,
``H = F * (V^T V_bar)``:

    A_bar = U (diag(s_bar) + (G + G^T) S + S (H + H^T)) Vh
            + (I - U U^T) U_bar S^-1 Vh + U S^-1 Vh_bar (I - V V^T)

``F`` is 0 between exactly equal singular values and ``S^-1`` is 0 at a zero singular value (as
JAX's rule does for ``F``; the "double where" keeps higher derivatives finite), so functions of the
singular values alone have finite first derivatives everywhere; singular vectors need distinct,
non-zero singular values for theirs, and so do higher derivatives (see ``_eigh``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import (
    T,
    defbatch_matrices,
    diag_embed,
    diagonal,
    matrix_operand,
    safe_reciprocal,
    shaped,
)


class SVDResult(NamedTuple):
    """``svd``'s result, named as NumPy 2 names it."""

    U: Any
    S: Any
    Vh: Any


def _svd_shapes(a_shape, full_matrices):
    m, n = a_shape[-2], a_shape[-1]
    k = min(m, n)
    return [(m, m if full_matrices else k), (k,), (n if full_matrices else k, n)]


def _svd_impl(a, *, full_matrices):
    return namespace_of(a).linalg.svd(a, full_matrices=full_matrices)


def _svd_aval(a, *, full_matrices):
    batch = tuple(a.shape[:-2])
    return [shaped(batch + shape, a) for shape in _svd_shapes(a.shape, full_matrices)]


def _reduced_factors(ans, a, full_matrices):
    m, n = a.shape[-2], a.shape[-1]
    if full_matrices and m != n:
        raise NotImplementedError("svd: the derivative with full_matrices=True needs a square matrix; "
                                  "use full_matrices=False (the derivative of the reduced SVD)")
    return ans


def _gaps_reciprocal(s):
    """``F[..., i, j] = 1 / (s_j^2 - s_i^2)``, 0 on the diagonal and between equal values."""
    s2 = s * s
    return safe_reciprocal(_shape.expand_dims(s2, -2) - _shape.expand_dims(s2, -1))


def _svd_jvp(t, ans, a, *, full_matrices):
    u, s, vh = _reduced_factors(ans, a, full_matrices)
    m, n, k = a.shape[-2], a.shape[-1], s.shape[-1]
    v = T(vh)
    f = _gaps_reciprocal(s)
    row_s, col_s = _shape.expand_dims(s, -2), _shape.expand_dims(s, -1)  # s_j along rows, s_i down columns
    x = matmul(T(u), matmul(t, v))
    du = matmul(u, f * (x * row_s + col_s * T(x)))
    dv = matmul(v, f * (col_s * x + T(x) * row_s))
    s_inv = _shape.expand_dims(safe_reciprocal(s), -2)
    if m > k:
        tv = matmul(t, v)
        du = du + (tv - matmul(u, matmul(T(u), tv))) * s_inv
    if n > k:
        ttu = matmul(T(t), u)
        dv = dv + (ttu - matmul(v, matmul(vh, ttu))) * s_inv
    return [du, diagonal(x), T(dv)]


def _svd_vjp(cts, ans, a, *, full_matrices):
    u, s, vh = _reduced_factors(ans, a, full_matrices)
    ct_u, ct_s, ct_vh = cts
    m, n, k = a.shape[-2], a.shape[-1], s.shape[-1]
    v = T(vh)
    f = _gaps_reciprocal(s)
    g = f * matmul(T(u), ct_u)
    h = f * matmul(vh, T(ct_vh))  # F * (V^T V_bar), V_bar = Vh_bar^T
    row_s, col_s = _shape.expand_dims(s, -2), _shape.expand_dims(s, -1)
    ct_x = diag_embed(ct_s) + (g + T(g)) * row_s + col_s * (h + T(h))
    ct_a = matmul(u, matmul(ct_x, vh))
    s_inv = safe_reciprocal(s)
    if m > k:
        ct_a = ct_a + matmul((ct_u - matmul(u, matmul(T(u), ct_u))) * _shape.expand_dims(s_inv, -2), vh)
    if n > k:
        ct_a = ct_a + matmul(u, (ct_vh - matmul(matmul(ct_vh, v), vh)) * _shape.expand_dims(s_inv, -1))
    return ct_a


svd_p = primitive("svd", _svd_impl, _svd_aval, multiple_results=True)
defvjp(svd_p, _svd_vjp)
defjvp(svd_p, _svd_jvp)
defbatch_matrices(svd_p)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular value decomposition of each matrix, as ``numpy.linalg.svd``.

    Args:
        a: real ``(..., m, n)``.
        full_matrices: ``U`` is ``(..., m, m)`` and ``Vh`` ``(..., n, n)``; else (reduced) ``U`` is
            ``(..., m, k)`` and ``Vh`` ``(..., k, n)`` with ``k = min(m, n)``.
        compute_uv: False returns only the singular values.
        hermitian: accepted for NumPy compatibility; the general SVD is used either way.

    Returns:
        ``SVDResult(U, S, Vh)`` with ``S`` of shape ``(..., k)`` (descending), or ``S`` alone when
        ``compute_uv`` is False; ``a``'s float dtype.

    Raises:
        NotImplementedError: complex ``a``; differentiating with ``full_matrices=True`` and
            ``m != n`` (the extra columns are not unique; use ``full_matrices=False``, as in JAX).

    Singular vectors are unique up to a simultaneous sign flip of ``U[:, i]`` and ``Vh[i]``:
    differentiate functions invariant to it (``U @ diag(f(s)) @ Vh``, ``U * U``). The derivative
    needs distinct non-zero singular values for ``U`` and ``Vh``; see the module notes for ``S``.
    """
    a = matrix_operand(a, "svd", square=False)
    if a.dtype.kind == "c":
        raise NotImplementedError("svd: complex input is not supported (real matrices only)")
    full = bool(full_matrices) and compute_uv
    u, s, vh = bind(svd_p, a, full_matrices=full)
    return SVDResult(u, s, vh) if compute_uv else s


def svdvals(x, /):
    """The singular values (``(..., k)``, descending) of each matrix, as ``numpy.linalg.svdvals``:
    ``svd(x, compute_uv=False)``, with its derivative (finite everywhere, see the module notes)."""
    return svd(x, compute_uv=False)
