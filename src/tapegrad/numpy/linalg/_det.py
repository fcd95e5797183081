"""Determinants: ``det`` and ``slogdet`` (Jacobi's formula, Giles 2008 section 2.2.4), with
``x = tr(A^-1 dA)``:

    d det(A) = det(A) x                    A_bar = det_bar det(A) A^-T
    d log|det(A)| = Re(x)                  A_bar = g A^-T,  g = logabsdet_bar + i Im(sign_bar sign)
    d sign = i Im(x) sign                  (real A: zero, and g = logabsdet_bar)

(``slogdet``'s complex rules are JAX's ``_slogdet_jvp`` and their transpose under
``Re(sum(a * b))``.)

The rules use tapegrad's ``solve`` and ``inv``, so they differentiate again. A singular matrix has
no inverse: its derivative raises ``numpy.linalg.LinAlgError`` (the formula is left as it is, as in
HIPS autograd; JAX's cofactor-based rule is not reproduced).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy.linalg._common import T, defbatch_matrices, matrix_operand, real_part, shaped, trace
from tapegrad.numpy.linalg._solve import inv, solve


def _as_matrix_factor(x):
    """``(...) -> (..., 1, 1)``: a per-matrix scalar that broadcasts against the matrices."""
    return _shape.expand_dims(_shape.expand_dims(x, -1), -1)


# ---- det -----------------------------------------------------------------------------------------
det_p = primitive("det", lambda a: namespace_of(a).linalg.det(a), lambda a: shaped(a.shape[:-2], a))
defvjp(det_p, lambda ct, ans, a: _as_matrix_factor(ct * ans) * T(inv(a)))
defjvp(det_p, lambda t, ans, a: ans * trace(solve(a, t)))
defbatch_matrices(det_p)


def det(a: ArrayLike) -> Array:
    """The determinant of each matrix of ``a`` (``(..., n, n) -> (...)``), as ``numpy.linalg.det``.

    The derivative (Jacobi's formula) needs ``inv(a)``: at a singular matrix it raises
    ``numpy.linalg.LinAlgError``.
    """
    return bind(det_p, matrix_operand(a, "det"))


# ---- slogdet -------------------------------------------------------------------------------------
class SlogdetResult(NamedTuple):
    """``slogdet``'s result, a NamedTuple ``(sign, logabsdet)`` named as ``numpy.linalg.slogdet``'s
    result is in NumPy 2: ``det = sign * exp(logabsdet)``.

    Args:
        sign: the sign of the determinant (a unit-modulus complex number for complex input; 0 for a
            singular matrix).
        logabsdet: ``log(abs(det))`` (``-inf`` for a singular matrix), real.
    """

    sign: Array
    logabsdet: Array


def _slogdet_impl(a):
    return namespace_of(a).linalg.slogdet(a)


def _slogdet_aval(a):
    sign = shaped(a.shape[:-2], a)
    return [sign, sign._replace(dtype=np.finfo(a.dtype).dtype)]  # logabsdet is real


def _slogdet_vjp(cts, ans, a):
    (ct_sign, ct_logabsdet), sign = cts, ans[0]
    g = ct_logabsdet
    if _complex.is_complex(a):  # a real sign has nothing to flow into
        g = g + 1j * _complex.imag(ct_sign * sign)
    return _as_matrix_factor(g) * T(inv(a))


def _slogdet_jvp(t, ans, a):
    x = trace(solve(a, t))
    if not _complex.is_complex(a):
        return [None, x]
    return [ans[0] * (x - real_part(x)), _complex.real(x)]


slogdet_p = primitive("slogdet", _slogdet_impl, _slogdet_aval, multiple_results=True)
defvjp(slogdet_p, _slogdet_vjp)
defjvp(slogdet_p, _slogdet_jvp)
defbatch_matrices(slogdet_p)


def slogdet(a: ArrayLike) -> SlogdetResult:
    """Sign and natural log of the absolute determinant of each matrix, as ``numpy.linalg.slogdet``.

    Args:
        a: ``(..., n, n)``, real or complex.

    Returns:
        ``SlogdetResult(sign, logabsdet)``, each of shape ``(...)``; ``sign`` with ``a``'s dtype (for
        complex ``a`` a complex number of modulus 1, else +-1 with derivative zero), ``logabsdet``
        with its real counterpart.

    Derivatives need an invertible ``a`` (``numpy.linalg.LinAlgError`` otherwise). Complex ``a``:
    JAX's conventions (``d sign = i Im(tr(a^-1 da)) sign``).
    """
    return SlogdetResult(*bind(slogdet_p, matrix_operand(a, "slogdet")))
