"""``svd``: ``A = U diag(s) Vh`` (reduced: ``k = min(m, n)`` singular values).

Forward rule (JAX's ``_svd_jvp_rule``; Townsend 2016, "Differentiating the singular value
decomposition"), with ``V = Vh^H``, ``X = U^H dA V`` (``k x k``), ``S = diag(s)`` and
``F[i, j] = 1 / (s_j^2 - s_i^2)`` off the diagonal:

    ds  = Re(diag(X))
    dU  = U (F * (X S + S X^H) + i Im(diag(X)) S^-1) + (I - U U^H) dA V S^-1     (last term when m > k)
    dV  = V (F * (S X + X^H S)) + (I - V V^H) dA^H U S^-1                       (last term when n > k)

(the ``i Im`` term exists for complex ``A`` only: it puts the phase that ``diag(X)`` carries into
``U``, JAX's choice; ``V`` gets none). The reverse rule is its transpose under ``Re(sum(a * b))``
(JAX's complex convention), term by term, with ``G = F * (U^T U_bar)``, ``K = F * (V^T V_bar)``
(``V_bar = Vh_bar^H``):

    A_bar = conj(U) (diag(s_bar) + (G + G^H) S + S (K + K^H) + i Im(diag(U^T U_bar)) S^-1) conj(Vh)
            + (I - conj(U) U^T) U_bar S^-1 conj(Vh) + conj(U) S^-1 Vh_bar (I - Vh^T conj(Vh))

For real ``A`` the conjugations vanish.

``F`` is 0 between exactly equal singular values and ``S^-1`` is 0 at a zero singular value (as
JAX's rule does for ``F``; the "double where" keeps higher derivatives finite), so functions of the
singular values alone have finite first derivatives everywhere; singular vectors need distinct,
non-zero singular values for theirs, and so do higher derivatives (see ``_eigh``).
"""
from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import (
    H,
    T,
    conj,
    defbatch_matrices,
    diag_embed,
    diagonal,
    gaps_reciprocal,
    imaginary_diagonal,
    matrix_operand,
    safe_reciprocal,
    shaped,
)


class SVDResult(NamedTuple):
    """``svd``'s result, a NamedTuple ``(U, S, Vh)`` named as ``numpy.linalg.svd``'s result is in NumPy
    2: ``a = U @ diag(S) @ Vh``.

    Args:
        U: left singular vectors (columns).
        S: singular values, real, in descending order.
        Vh: right singular vectors (rows), conjugate-transposed.
    """

    U: Array
    S: Array
    Vh: Array


def _svd_shapes(a_shape, full_matrices):
    m, n = a_shape[-2], a_shape[-1]
    k = min(m, n)
    return [(m, m if full_matrices else k), (k,), (n if full_matrices else k, n)]


def _svd_impl(a, *, full_matrices):
    return namespace_of(a).linalg.svd(a, full_matrices=full_matrices)


def _svd_aval(a, *, full_matrices):
    batch = tuple(a.shape[:-2])
    u, s, vh = [shaped(batch + shape, a) for shape in _svd_shapes(a.shape, full_matrices)]
    return [u, s._replace(dtype=np.finfo(a.dtype).dtype), vh]  # real singular values


def _reduced_factors(ans, a, full_matrices):
    m, n = a.shape[-2], a.shape[-1]
    if full_matrices and m != n:
        raise NotImplementedError("svd: the derivative with full_matrices=True needs a square matrix; "
                                  "use full_matrices=False (the derivative of the reduced SVD)")
    return ans


def _svd_jvp(t, ans, a, *, full_matrices):
    u, s, vh = _reduced_factors(ans, a, full_matrices)
    m, n, k = a.shape[-2], a.shape[-1], s.shape[-1]
    v = H(vh)
    f = gaps_reciprocal(s * s)  # 1 / (s_j^2 - s_i^2)
    row_s, col_s = _shape.expand_dims(s, -2), _shape.expand_dims(s, -1)  # s_j along rows, s_i down columns
    s_inv = _shape.expand_dims(safe_reciprocal(s), -2)
    x = matmul(H(u), matmul(t, v))
    du = matmul(u, f * (x * row_s + col_s * H(x)))
    dv = matmul(v, f * (col_s * x + H(x) * row_s))
    if _complex.is_complex(x):
        du = du + matmul(u, imaginary_diagonal(x) * s_inv)
    if m > k:
        tv = matmul(t, v)
        du = du + (tv - matmul(u, matmul(H(u), tv))) * s_inv
    if n > k:
        thu = matmul(H(t), u)
        dv = dv + (thu - matmul(v, matmul(vh, thu))) * s_inv
    ds = diagonal(x)
    return [du, _complex.real(ds) if _complex.is_complex(ds) else ds, H(dv)]


def _svd_vjp(cts, ans, a, *, full_matrices):
    u, s, vh = _reduced_factors(ans, a, full_matrices)
    ct_u, ct_s, ct_vh = cts
    m, n, k = a.shape[-2], a.shape[-1], s.shape[-1]
    f = gaps_reciprocal(s * s)  # 1 / (s_j^2 - s_i^2)
    ut_ct_u = matmul(T(u), ct_u)
    g = f * ut_ct_u
    h = f * matmul(conj(vh), H(ct_vh))  # F * (V^T V_bar), V_bar = Vh_bar^H
    row_s, col_s = _shape.expand_dims(s, -2), _shape.expand_dims(s, -1)
    s_inv = safe_reciprocal(s)
    ct_x = diag_embed(ct_s) + (g + H(g)) * row_s + col_s * (h + H(h))
    if _complex.is_complex(ct_x):
        ct_x = ct_x + imaginary_diagonal(ut_ct_u) * _shape.expand_dims(s_inv, -2)
    ct_a = matmul(conj(u), matmul(ct_x, conj(vh)))
    if m > k:
        projected = (ct_u - matmul(conj(u), matmul(T(u), ct_u))) * _shape.expand_dims(s_inv, -2)
        ct_a = ct_a + matmul(projected, conj(vh))
    if n > k:
        projected = ct_vh - matmul(matmul(ct_vh, T(vh)), conj(vh))
        ct_a = ct_a + matmul(conj(u), projected * _shape.expand_dims(s_inv, -1))
    return ct_a


svd_p = primitive("svd", _svd_impl, _svd_aval, multiple_results=True)
defvjp(svd_p, _svd_vjp)
defjvp(svd_p, _svd_jvp)
defbatch_matrices(svd_p)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> SVDResult | Array:
    """Singular value decomposition of each matrix, as ``numpy.linalg.svd``.

    Args:
        a: real or complex ``(..., m, n)``.
        full_matrices: ``U`` is ``(..., m, m)`` and ``Vh`` ``(..., n, n)``; else (reduced) ``U`` is
            ``(..., m, k)`` and ``Vh`` ``(..., k, n)`` with ``k = min(m, n)``.
        compute_uv: False returns only the singular values.
        hermitian: accepted for NumPy compatibility; the general SVD is used either way.

    Returns:
        ``SVDResult(U, S, Vh)`` with ``S`` of shape ``(..., k)`` (descending, real), or ``S`` alone
        when ``compute_uv`` is False; ``U`` and ``Vh`` with ``a``'s dtype, ``S`` with its real one.

    Raises:
        NotImplementedError: differentiating with ``full_matrices=True`` and ``m != n`` (the extra
            columns are not unique; use ``full_matrices=False``, as in JAX).

    Singular vectors are unique up to a simultaneous sign flip (complex: phase ``e^{i phi}``) of
    ``U[:, i]`` and ``Vh[i]``: differentiate functions invariant to it (``U @ diag(f(s)) @ Vh``,
    ``abs(U) ** 2``). The derivative needs distinct non-zero singular values for ``U`` and ``Vh``;
    see the module notes for ``S``. Complex input: JAX's conventions.
    """
    a = matrix_operand(a, "svd", square=False)
    full = bool(full_matrices) and compute_uv
    u, s, vh = bind(svd_p, a, full_matrices=full)
    return SVDResult(u, s, vh) if compute_uv else s


def svdvals(x: ArrayLike, /) -> Array:
    """The singular values (``(..., k)``, descending) of each matrix, as ``numpy.linalg.svdvals``:
    ``svd(x, compute_uv=False)``, with its derivative (finite everywhere, see the module notes)."""
    return cast(Array, svd(x, compute_uv=False))  # no vectors asked: the singular values alone
