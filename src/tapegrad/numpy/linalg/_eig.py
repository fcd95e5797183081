"""``eig`` and ``eigvals``: eigenvalues and right eigenvectors of general square matrices.

With ``A V = V diag(w)``, ``X = V^-1 dA V`` and ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal
(Giles 2008, "An extended collection of matrix derivative results", section 3.1; Magnus 1985; HIPS
autograd's ``grad_eig``):

    jvp  dw = diag(X),   dV = V (F * X) - V diag(diag(V^H V (F * X)))
    vjp  A_bar = V^-T (diag(w_bar) + F * (V^T V_bar - V^T conj(V) diag(diag(V^T V_bar)))) V^T

The second term of ``dV`` makes each column's derivative orthogonal to the column (``v^H dv = 0``):
its real part keeps the unit Euclidean norm (NumPy's and JAX's normalisation), its imaginary part
adds no phase. LAPACK instead fixes each column's phase by making its largest component real, a
choice that jumps where two components swap places. The phase of an eigenvector is arbitrary, so
only functions invariant to it (``|v|``, ``v_i conj(v_j)``, ``V f(diag(w)) V^-1``) have a derivative
worth taking, and for those the two conventions agree. The vjp is the transpose of the jvp under
``Re(sum(a * b))`` (JAX's convention); for real ``A`` its real part.

``F`` is 0 between exactly equal eigenvalues (the "double where" of ``safe_reciprocal``): the
eigenvalues' own derivative is then still right for a diagonalisable ``A``, the eigenvectors' is not
(they are not unique there). JAX differentiates only the eigenvalues of ``eig``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _complex
from tapegrad.numpy._elementwise import astype
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
)
from tapegrad.numpy.linalg._solve import solve


class EigResult(NamedTuple):
    """``eig``'s result, a NamedTuple ``(eigenvalues, eigenvectors)`` named as ``numpy.linalg.eig``'s
    result is in NumPy 2.

    Args:
        eigenvalues: ``(..., n)``, complex.
        eigenvectors: ``(..., n, n)``, complex; column ``i`` belongs to ``eigenvalues[..., i]``.
    """

    eigenvalues: Array
    eigenvectors: Array


def _complex_dtype(dtype) -> np.dtype:
    """complex64 for float32/complex64, complex128 otherwise (the precision of NumPy's eig)."""
    return np.result_type(dtype, np.complex64)


def _eig_impl(a):
    w, v = namespace_of(a).linalg.eig(a)  # NumPy returns real arrays when every eigenvalue is real
    dtype = _complex_dtype(a.dtype)
    return [w.astype(dtype, copy=False), v.astype(dtype, copy=False)]


def _eig_aval(a):
    dtype = _complex_dtype(a.dtype)
    return [ShapedArray(tuple(a.shape[:-1]), dtype), ShapedArray(tuple(a.shape), dtype)]


def _diagonal_matrix(x):
    """``diag(diag(x))``: ``x`` with its off-diagonal entries zeroed."""
    return diag_embed(diagonal(x))


def _eig_jvp(t, ans, a):
    w, v = ans
    x = matmul(solve(v, astype(t, v.dtype)), v)
    dv = matmul(v, gaps_reciprocal(w) * x)
    dv = dv - matmul(v, _diagonal_matrix(matmul(H(v), dv)))
    return [diagonal(x), dv]


def _eig_vjp(cts, ans, a):
    (w, v), (ct_w, ct_v) = ans, cts
    vt_ct_v = matmul(T(v), ct_v)
    norm_part = matmul(matmul(T(v), conj(v)), _diagonal_matrix(vt_ct_v))
    inner = diag_embed(ct_w) + gaps_reciprocal(w) * (vt_ct_v - norm_part)
    ct_a = solve(T(v), matmul(inner, T(v)))  # V^-T inner V^T
    return ct_a if a.dtype.kind == "c" else _complex.real(ct_a)


eig_p = primitive("eig", _eig_impl, _eig_aval, multiple_results=True)
defvjp(eig_p, _eig_vjp)
defjvp(eig_p, _eig_jvp)
defbatch_matrices(eig_p)


def eig(a: ArrayLike) -> EigResult:
    """Eigenvalues and right eigenvectors of each square matrix, as ``numpy.linalg.eig``.

    Args:
        a: real or complex ``(..., n, n)`` (integers are promoted to float64).

    Returns:
        ``EigResult(eigenvalues, eigenvectors)`` of shapes ``(..., n)`` and ``(..., n, n)`` (eigenvectors in the
        columns, each of unit Euclidean norm), always complex (complex64 for float32/complex64 input,
        else complex128), as in JAX; NumPy returns real arrays when every eigenvalue is real. The
        order is LAPACK's (``geev``), as NumPy's.

    Raises:
        numpy.linalg.LinAlgError: a non-square matrix, or the algorithm does not converge.

    Derivatives, both modes, any order: they need distinct eigenvalues (for the eigenvectors) and a
    diagonalisable ``a``. An eigenvector's phase is arbitrary (NumPy and LAPACK make its largest
    component real; the derivative ``dv`` is orthogonal to ``v``: unit norm kept, no phase added):
    differentiate functions that do not depend on it, such as ``abs(v)``, ``v[i] * conj(v[j])`` or
    ``v @ diag(f(w)) @ inv(v)``. JAX differentiates only the eigenvalues.
    """
    return EigResult(*bind(eig_p, matrix_operand(a, "eig")))


def eigvals(a: ArrayLike) -> Array:
    """The eigenvalues (``(..., n)``, complex, in LAPACK's order) of each square matrix, as
    ``numpy.linalg.eigvals``: ``eig(a).eigenvalues``, with its derivative (which needs a
    diagonalisable ``a``). Always complex, as in JAX (NumPy returns reals when all are real)."""
    return eig(a).eigenvalues
