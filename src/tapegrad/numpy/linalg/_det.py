"""Determinants: ``det`` and ``slogdet`` (Jacobi's formula, Giles 2008 section 2.2.4):

    d det(A) = det(A) tr(A^-1 dA)          A_bar = det_bar det(A) A^-T
    d log|det(A)| = tr(A^-1 dA)            A_bar = logabsdet_bar A^-T      (sign: derivative zero)

The rules use tapegrad's ``solve`` and ``inv``, so they differentiate again. A singular matrix has
no inverse: its derivative raises ``numpy.linalg.LinAlgError`` (the formula is left as it is, as in
HIPS autograd; JAX's cofactor-based rule is not reproduced).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy.linalg._common import T, defbatch_matrices, matrix_operand, shaped, trace
from tapegrad.numpy.linalg._solve import inv, solve


def _as_matrix_factor(x):
    """``(...) -> (..., 1, 1)``: a per-matrix scalar that broadcasts against the matrices."""
    return _shape.expand_dims(_shape.expand_dims(x, -1), -1)


# ---- det -----------------------------------------------------------------------------------------
det_p = primitive("det", lambda a: namespace_of(a).linalg.det(a), lambda a: shaped(a.shape[:-2], a))
defvjp(det_p, lambda ct, ans, a: _as_matrix_factor(ct * ans) * T(inv(a)))
defjvp(det_p, lambda t, ans, a: ans * trace(solve(a, t)))
defbatch_matrices(det_p)


def det(a):
    """The determinant of each matrix of ``a`` (``(..., n, n) -> (...)``), as ``numpy.linalg.det``.

    The derivative (Jacobi's formula) needs ``inv(a)``: at a singular matrix it raises
    ``numpy.linalg.LinAlgError``.
    """
    return bind(det_p, matrix_operand(a, "det"))


# ---- slogdet -------------------------------------------------------------------------------------
class SlogdetResult(NamedTuple):
    """``slogdet``'s result, named as NumPy 2 names it."""

    sign: Any
    logabsdet: Any


def _slogdet_impl(a):
    return namespace_of(a).linalg.slogdet(a)


def _slogdet_vjp(cts, ans, a):
    return _as_matrix_factor(cts[1]) * T(inv(a))  # the sign's cotangent has nothing to flow into


def _slogdet_jvp(t, ans, a):
    return [None, trace(solve(a, t))]


slogdet_p = primitive("slogdet", _slogdet_impl, lambda a: [shaped(a.shape[:-2], a)] * 2, multiple_results=True)
defvjp(slogdet_p, _slogdet_vjp)
defjvp(slogdet_p, _slogdet_jvp)
defbatch_matrices(slogdet_p)


def slogdet(a):
    """Sign and natural log of the absolute determinant of each matrix, as ``numpy.linalg.slogdet``.

    Args:
        a: real ``(..., n, n)``.

    Returns:
        ``SlogdetResult(sign, logabsdet)``, each of shape ``(...)`` and ``a``'s float dtype; ``sign``
        has derivative zero.

    Raises:
        NotImplementedError: complex ``a``.
    """
    a = matrix_operand(a, "slogdet")
    if a.dtype.kind == "c":
        raise NotImplementedError("slogdet: complex input is not supported (real matrices only)")
    return SlogdetResult(*bind(slogdet_p, a))
