"""``eigh`` and ``eigvalsh``: eigenvalues and eigenvectors of symmetric matrices.

With ``A = V diag(w) V^T``, ``X = V^T dA V`` and ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal
(JAX's ``_eigh_jvp_rule``; Giles 2008 section 3.1; HIPS autograd's ``grad_eigh``):

    jvp  dw = diag(X),  dV = V (F * X)
    vjp  A_bar = V (diag(w_bar) + F * (V^T V_bar)) V^T

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
    symmetrize,
    tril,
    triu,
)


class EighResult(NamedTuple):
    """``eigh``'s result, named as NumPy 2 names it."""

    eigenvalues: Any
    eigenvectors: Any


def _gaps_reciprocal(w):
    """``F[..., i, j] = 1 / (w_j - w_i)``, 0 on the diagonal and between equal eigenvalues."""
    return safe_reciprocal(_shape.expand_dims(w, -2) - _shape.expand_dims(w, -1))


def _eigh_impl(a):
    return namespace_of(a).linalg.eigh(a)


def _eigh_aval(a):
    n = a.shape[-1]
    return [shaped(tuple(a.shape[:-1]), a), shaped(tuple(a.shape[:-2]) + (n, n), a)]


def _eigh_jvp(t, ans, a):
    w, v = ans
    x = matmul(T(v), matmul(t, v))
    return [diagonal(x), matmul(v, _gaps_reciprocal(w) * x)]


def _eigh_vjp(cts, ans, a):
    (w, v), (ct_w, ct_v) = ans, cts
    inner = diag_embed(ct_w) + _gaps_reciprocal(w) * matmul(T(v), ct_v)
    return matmul(v, matmul(inner, T(v)))


eigh_p = primitive("eigh", _eigh_impl, _eigh_aval, multiple_results=True)
defvjp(eigh_p, _eigh_vjp)
defjvp(eigh_p, _eigh_jvp)
defbatch_matrices(eigh_p)


def eigh(a, UPLO="L", *, symmetrize_input=True):
    """Eigenvalues (ascending) and orthonormal eigenvectors of each symmetric matrix, as
    ``numpy.linalg.eigh``.

    Args:
        a: real ``(..., n, n)``.
        UPLO: which triangle NumPy reads (``'L'`` or ``'U'``); used only when ``symmetrize_input``
            is False.
        symmetrize_input: (JAX's flag, default True) decompose ``(a + a^T) / 2``, so gradients are
            symmetric. False: decompose the symmetric matrix mirrored from the ``UPLO`` triangle, as
            NumPy does, so values match NumPy also for a non-symmetric ``a`` and gradients live on
            that triangle.

    Returns:
        ``EighResult(eigenvalues, eigenvectors)``: ``(..., n)`` and ``(..., n, n)`` (eigenvectors in
        the columns), ``a``'s float dtype.

    Derivatives need distinct eigenvalues for the eigenvectors (see the module notes); each
    eigenvector's sign is arbitrary, so differentiate functions that do not depend on it
    (``v * v``, ``v @ diag(f(w)) @ v.T``).

    Raises:
        NotImplementedError: complex ``a``.
        ValueError: ``UPLO`` not ``'L'`` or ``'U'``.
    """
    a = _symmetric_operand(a, "eigh", UPLO, symmetrize_input)
    return EighResult(*bind(eigh_p, a))


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """The eigenvalues (ascending, ``(..., n)``) of each symmetric matrix, as
    ``numpy.linalg.eigvalsh``; ``eigh(a, UPLO, symmetrize_input=...).eigenvalues``. Their derivative
    ``V^T dA V`` diagonal is defined also for repeated eigenvalues."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def _symmetric_operand(a, name, uplo, symmetrize_input):
    a = matrix_operand(a, name)
    if a.dtype.kind == "c":
        raise NotImplementedError(f"{name}: complex input is not supported (real symmetric matrices only)")
    if uplo not in ("L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    if symmetrize_input:
        return symmetrize(a)
    if uplo == "L":
        return tril(a) + T(tril(a, -1))
    return triu(a) + T(triu(a, 1))
