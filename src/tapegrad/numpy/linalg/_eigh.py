"""``eigh`` and ``eigvalsh``: eigenvalues and eigenvectors of symmetric (Hermitian) matrices.

With ``A = V diag(w) V^H``, ``X = V^H dA V`` and ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal
(JAX's ``_eigh_jvp_rule``; Giles 2008 section 3.1; HIPS autograd's ``grad_eigh``):

    jvp  dw = Re(diag(X)),  dV = V (F * X)
    vjp  A_bar = conj(V) (diag(w_bar) + F * (V^T V_bar)) V^T

The vjp is the transpose of the jvp under ``Re(sum(a * b))`` (JAX's complex convention); for real
``A`` the conjugations vanish. ``dV`` has no component along ``V`` (``diag(V^H dV) = 0``): the
eigenvectors' phases (signs, for real ``A``) are arbitrary, and the derivative adds none.

``F`` is 0 where two eigenvalues are exactly equal (the "double where" of :func:`safe_reciprocal`):
the eigenvectors of a repeated eigenvalue are not unique and have no derivative, but functions of
the eigenvalues alone (and functions invariant to the choice of basis in the eigenspace) then get
their finite, correct first derivative instead of ``0 * inf = nan`` (JAX's ``eigh`` gives NaN
there; its ``svd`` makes the same choice as here). Higher derivatives at exactly repeated
eigenvalues involve the eigenvector derivative and are not correct there (the divided differences of
the Daleckii-Krein formula would be needed). Close but distinct eigenvalues give large derivatives,
as they should.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _complex
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg._common import (
    H,
    T,
    conj,
    defbatch_matrices,
    diag_embed,
    diagonal,
    gaps_reciprocal,
    matrix_operand,
    real_part,
    shaped,
    symmetrize,
    tril,
    triu,
)


class EighResult(NamedTuple):
    """``eigh``'s result, a NamedTuple ``(eigenvalues, eigenvectors)`` named as ``numpy.linalg.eigh``'s
    result is in NumPy 2.

    Args:
        eigenvalues: ``(..., n)``, real, in ascending order.
        eigenvectors: ``(..., n, n)``, orthonormal columns; column ``i`` belongs to
            ``eigenvalues[..., i]``.
    """

    eigenvalues: Array
    eigenvectors: Array


def _eigh_impl(a):
    return namespace_of(a).linalg.eigh(a)


def _eigh_aval(a):
    n = a.shape[-1]
    w = shaped(tuple(a.shape[:-1]), a)
    return [w._replace(dtype=np.finfo(a.dtype).dtype), shaped(tuple(a.shape[:-2]) + (n, n), a)]  # real w


def _eigh_jvp(t, ans, a):
    w, v = ans
    x = matmul(H(v), matmul(t, v))
    dw = diagonal(x)
    return [_complex.real(dw) if _complex.is_complex(dw) else dw, matmul(v, gaps_reciprocal(w) * x)]


def _eigh_vjp(cts, ans, a):
    (w, v), (ct_w, ct_v) = ans, cts
    inner = diag_embed(ct_w) + gaps_reciprocal(w) * matmul(T(v), ct_v)
    return matmul(conj(v), matmul(inner, T(v)))


eigh_p = primitive("eigh", _eigh_impl, _eigh_aval, multiple_results=True)
defvjp(eigh_p, _eigh_vjp)
defjvp(eigh_p, _eigh_jvp)
defbatch_matrices(eigh_p)


def eigh(a: ArrayLike, UPLO: str = "L", *, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors of each symmetric matrix, as
    ``numpy.linalg.eigh``.

    Args:
        a: ``(..., n, n)``, real symmetric or complex Hermitian.
        UPLO: which triangle NumPy reads (``'L'`` or ``'U'``); used only when ``symmetrize_input``
            is False.
        symmetrize_input: (JAX's flag, default True) decompose ``(a + a^H) / 2``, so gradients are
            symmetric (Hermitian). False: decompose the Hermitian matrix mirrored from the ``UPLO``
            triangle (the diagonal's imaginary part dropped), as NumPy does, so values match NumPy
            also for a non-symmetric ``a`` and gradients live on that triangle.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)`` with ``(..., n)`` real eigenvalues (``a``'s real
        dtype) and ``(..., n, n)`` eigenvectors in the columns (``a``'s dtype).

    Derivatives need distinct eigenvalues for the eigenvectors (see the module notes); each
    eigenvector's sign (complex: phase) is arbitrary, so differentiate functions that do not depend
    on it (``abs(v) ** 2``, ``v @ diag(f(w)) @ v.conj().T``). Complex input: JAX's conventions.

    Raises:
        ValueError: ``UPLO`` not ``'L'`` or ``'U'``.
    """
    a = _symmetric_operand(a, "eigh", UPLO, symmetrize_input)
    return EighResult(*bind(eigh_p, a))


def eigvalsh(a: ArrayLike, UPLO: str = "L", *, symmetrize_input: bool = True) -> Array:
    """The eigenvalues (ascending, ``(..., n)``) of each symmetric matrix, as
    ``numpy.linalg.eigvalsh``; ``eigh(a, UPLO, symmetrize_input=...).eigenvalues``. Their derivative
    ``V^T dA V`` diagonal is defined also for repeated eigenvalues."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def _symmetric_operand(a, name, uplo, symmetrize_input):
    a = matrix_operand(a, name)
    if uplo not in ("L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    if symmetrize_input:
        return symmetrize(a)
    half = tril(a, -1) if uplo == "L" else triu(a, 1)
    return half + H(half) + diag_embed(real_part(diagonal(a)))  # LAPACK reads the diagonal's real part
