"""``qr``: ``A = Q R`` with orthonormal columns in ``Q`` and upper-triangular ``R`` (``m >= n``).

Forward rule (JAX's ``qr_jvp_rule``; Townsend, "Differentiating the QR decomposition",
j-towns.github.io/papers/qr-derivative.pdf): with ``Y = dA R^-1``, ``Z = Q^H Y`` and the
skew-Hermitian ``O = tril(Z, -1) - tril(Z, -1)^H + i Im(diag(Z))`` (the last term for complex
``A``: LAPACK's ``R`` has a real diagonal, and so keeps ``dR``),

    dQ = Q (O - Z) + Y,     dR = (Z - O) R.

Reverse rule, its transpose under ``Re(sum(a * b))`` (JAX's complex convention): with
``M = Q^T Q_bar - R_bar R^T``,

    A_bar = (Q_bar + conj(Q) (tril(M, -1) - tril(M^H, -1) + i Im(diag(M)) - M)) R^-T.

For real ``A`` the conjugations and imaginary parts vanish.
"""
from __future__ import annotations

from typing import NamedTuple

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
    imaginary_diagonal,
    matrix_operand,
    shaped,
    tril,
)
from tapegrad.numpy.linalg._solve import solve


class QRResult(NamedTuple):
    """``qr``'s result, a NamedTuple ``(Q, R)`` named as ``numpy.linalg.qr``'s result is in NumPy 2:
    ``a = Q @ R``.

    Args:
        Q: orthonormal columns.
        R: upper triangular.
    """

    Q: Array
    R: Array


def _qr_shapes(a_shape, mode):
    m, n = a_shape[-2], a_shape[-1]
    k = m if mode == "complete" else min(m, n)
    return [(m, k), (k, n)]


def _qr_impl(a, *, mode):
    return namespace_of(a).linalg.qr(a, mode=mode)


def _qr_aval(a, *, mode):
    batch = tuple(a.shape[:-2])
    return [shaped(batch + shape, a) for shape in _qr_shapes(a.shape, mode)]


def _factors(ans, a, mode):
    m, n = a.shape[-2], a.shape[-1]
    if m < n or (mode == "complete" and m != n):
        raise NotImplementedError(f"qr: the derivative needs m >= n (and m == n for mode='complete'); "
                                  f"got a matrix of shape {(m, n)} with mode={mode!r}")
    return ans


def _qr_jvp(t, ans, a, *, mode):
    q, r = _factors(ans, a, mode)
    y = T(solve(T(r), T(t)))  # dA R^-1
    z = matmul(H(q), y)
    lower = tril(z, -1)
    omega = lower - H(lower)
    if a.dtype.kind == "c":
        omega = omega + imaginary_diagonal(z)
    return [matmul(q, omega - z) + y, matmul(z - omega, r)]


def _qr_vjp(cts, ans, a, *, mode):
    q, r = _factors(ans, a, mode)
    ct_q, ct_r = cts
    m_ = matmul(T(q), ct_q) - matmul(ct_r, T(r))
    ct_z = tril(m_, -1) - tril(H(m_), -1) - m_
    if a.dtype.kind == "c":
        ct_z = ct_z + imaginary_diagonal(m_)
    ct_y = ct_q + matmul(conj(q), ct_z)
    return T(solve(r, T(ct_y)))  # ct_y R^-T


qr_p = primitive("qr", _qr_impl, _qr_aval, multiple_results=True)
defvjp(qr_p, _qr_vjp)
defjvp(qr_p, _qr_jvp)
defbatch_matrices(qr_p)


def qr(a: ArrayLike, mode: str = "reduced") -> QRResult | Array:
    """QR decomposition of each matrix, as ``numpy.linalg.qr``.

    Args:
        a: real or complex ``(..., m, n)``.
        mode: ``'reduced'`` (``Q`` ``(..., m, k)``, ``R`` ``(..., k, n)``, ``k = min(m, n)``),
            ``'complete'`` (``Q`` ``(..., m, m)``, ``R`` ``(..., m, n)``) or ``'r'`` (``R`` alone,
            as in ``'reduced'``).

    Returns:
        ``QRResult(Q, R)``, or ``R`` for ``mode='r'``; ``a``'s float dtype. ``Q`` and ``R`` are
        LAPACK's (``R``'s diagonal real, of either sign), as NumPy's; complex ``a`` differentiates
        with JAX's conventions.

    Raises:
        NotImplementedError: ``mode='raw'``; differentiating with ``m < n``, or with
            ``mode='complete'`` and ``m != n`` (as in JAX).
        ValueError: an unknown ``mode``.
    """
    a = matrix_operand(a, "qr", square=False)
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (Householder reflectors) is not supported")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: unrecognized mode {mode!r}")
    prim_mode = "complete" if mode == "complete" else "reduced"
    q, r = bind(qr_p, a, mode=prim_mode)
    return r if mode == "r" else QRResult(q, r)
