"""``solve_triangular``, ``cho_factor`` and ``cho_solve``, differentiable in both modes to any order.

Rules:

- ``solve_triangular``, ``x = op(A)^-1 b`` with ``op`` the identity or the transpose and ``A`` the
  triangle SciPy reads (Giles 2008, section 2.2): ``dx = op(A)^-1 (db - op(dA) x)``;
  ``b_bar = op(A)^-T x_bar``, ``A_bar = -b_bar x^T`` (``-x b_bar^T`` for the transpose), kept to
  the triangle that is read (off-diagonal only with ``unit_diagonal``).
- ``cho_factor`` is ``tapegrad.numpy.linalg.cholesky``; ``cho_solve`` two triangular solves.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy.linalg import cholesky
from tapegrad.numpy.linalg._common import (
    T,
    batch_of,
    defbatch_solve,
    float_operand,
    matrix_operand,
    shaped,
    tri_like,
)
from tapegrad.scipy.linalg._common import scipy_linalg


# ---- solve_triangular ----------------------------------------------------------------------------
def _read_mask(a, lower, unit_diagonal):
    """Ones on the entries of ``a`` that the solve reads: one triangle, without the diagonal when
    it is taken as ones."""
    mask = tri_like(a, -1 if unit_diagonal else 0)
    return mask if lower else T(mask)


def _op(x, trans):
    return T(x) if trans else x


def _tri_solve_jvp_a(t, ans, a, b, *, trans, lower, unit_diagonal):
    t_a = t * _read_mask(a, lower, unit_diagonal)
    return _tri_solve(a, -matmul(_op(t_a, trans), ans), trans, lower, unit_diagonal)


def _tri_solve_jvp_b(t, ans, a, b, *, trans, lower, unit_diagonal):
    return _tri_solve(a, t, trans, lower, unit_diagonal)


def _tri_solve_vjp_a(ct, ans, a, b, *, trans, lower, unit_diagonal):
    ct_b = _tri_solve(a, ct, 1 - trans, lower, unit_diagonal)
    ct_a = -matmul(ct_b, T(ans)) if trans == 0 else -matmul(ans, T(ct_b))
    return _shape.unbroadcast(ct_a * _read_mask(a, lower, unit_diagonal), a)


def _tri_solve_vjp_b(ct, ans, a, b, *, trans, lower, unit_diagonal):
    return _shape.unbroadcast(_tri_solve(a, ct, 1 - trans, lower, unit_diagonal), b)


def _tri_solve_impl(a, b, *, trans, lower, unit_diagonal):
    """``a`` ``(..., n, n)``, ``b`` ``(..., n, k)``, their stacks broadcast.

    SciPy's solver batches stacks with a Python loop over every pair, even when only ``b`` is
    stacked, and CuPy's (before CuPy 13) takes one matrix, so the stacks are handled here:

    - one matrix (what ``vmap`` gives when ``a`` is shared): ``b``'s stacked right-hand sides become
      columns of one right-hand side, and one LAPACK call solves them all;
    - a stack of ``n x n`` matrices with more matrices than ``n`` (many small systems, what ``vmap``
      gives when ``a`` is mapped): substitution vectorized across the stack, ``n`` steps of stacked
      row-times-solution products. It is exact substitution (not an LU of the triangle) and several
      times faster than a loop over the matrices while ``n`` is at most their number;
    - otherwise (few, large matrices): a loop over the matrices, each one LAPACK call, whose cost
      then dwarfs the loop's.
    """
    params = dict(trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if math.prod(a.shape[:-2]) == 1:
        return _tri_solve_columns(a.reshape(a.shape[-2:]), b, batch, **params)
    xp = namespace_of(a, b)
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    if a.shape[-1] <= math.prod(batch):
        return _tri_substitute(a, b, **params)
    out = xp.empty(b.shape, xp.result_type(a, b))
    for index in np.ndindex(*batch):
        out[index] = _tri_solve_matrix(a[index], b[index], **params)
    return out


def _tri_solve_matrix(a, b, **params):
    """One LAPACK solve: ``a`` ``(n, n)``, ``b`` ``(n, k)``."""
    if namespace_of(a, b) is np:  # SciPy's finiteness check costs more than the solve on small matrices
        import scipy.linalg  # optional dependency (the `dev` extra): needed only on this path
        return scipy.linalg.solve_triangular(a, b, check_finite=False, **params)
    return scipy_linalg(a, b).solve_triangular(a, b, **params)


def _tri_solve_columns(a, b, batch, **params):
    """One matrix ``a`` against every right-hand side of the stack ``b``, as the columns of one
    ``(n, stack * k)`` right-hand side; the result broadcast to ``batch``."""
    if b.ndim == 2:
        x = _tri_solve_matrix(a, b, **params)
    else:
        xp = namespace_of(a, b)
        columns = xp.moveaxis(b, -2, 0)  # (n, ..., k)
        x = _tri_solve_matrix(a, columns.reshape(columns.shape[0], -1), **params)
        x = xp.moveaxis(x.reshape(columns.shape), 0, -2)
    return x if x.shape[:-2] == batch else namespace_of(x).broadcast_to(x, batch + x.shape[-2:])


def _tri_substitute(a, b, *, trans, lower, unit_diagonal):
    """Forward (or back) substitution over equal stacks ``a`` ``(..., n, n)`` and ``b``
    ``(..., n, k)``: row ``i`` of every solution at once, from the rows already solved."""
    xp = namespace_of(a, b)
    if trans:  # op(a) = a^T, whose triangle is the other one
        a, lower = xp.swapaxes(a, -1, -2), not lower
    n = a.shape[-1]
    diagonal = None if unit_diagonal else xp.diagonal(a, axis1=-2, axis2=-1)[..., None]
    if diagonal is not None and xp is np and not diagonal.all():  # LAPACK's check (no device sync on CuPy)
        raise np.linalg.LinAlgError("solve_triangular: singular matrix (a zero on the diagonal)")
    x = xp.empty(b.shape, xp.result_type(a, b))
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        solved = slice(0, i) if lower else slice(i + 1, n)
        row = b[..., i, :] - xp.matmul(a[..., i:i + 1, solved], x[..., solved, :])[..., 0, :]
        x[..., i, :] = row if diagonal is None else row / diagonal[..., i, :]
    return x


tri_solve_p = primitive("solve_triangular", _tri_solve_impl,
                        lambda a, b, **params: shaped(batch_of(a, b) + tuple(b.shape[-2:]), a, b))
defvjp(tri_solve_p, _tri_solve_vjp_a, _tri_solve_vjp_b)
defjvp(tri_solve_p, _tri_solve_jvp_a, _tri_solve_jvp_b)
defbatch_solve(tri_solve_p)


def _tri_solve(a, b, trans, lower, unit_diagonal):
    return bind(tri_solve_p, a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """The solution ``x`` of ``op(a) @ x = b`` for triangular ``a``, as ``scipy.linalg.solve_triangular``.

    Args:
        a: ``(..., n, n)``; only the triangle named by ``lower`` is read (and not its diagonal
            when ``unit_diagonal``), so derivatives with respect to the other entries are zero.
        b: ``(n,)`` or ``(..., n, k)``; leading axes broadcast with ``a``'s.
        trans: ``0``/``'N'`` solves ``a x = b``; ``1``/``'T'`` and ``2``/``'C'`` (the same for real
            ``a``) solve ``a^T x = b``. Complex input is holomorphic in ``a`` and ``b`` for ``trans``
            0 and 1 (JAX's conventions).
        lower: use the lower triangle (default: the upper).
        unit_diagonal: take the diagonal of ``a`` as ones.
        overwrite_b, check_finite: accepted for SciPy compatibility, ignored.

    Returns:
        ``x`` with ``b``'s shape (leading axes broadcast), the promoted float dtype.

    Raises:
        ValueError: an unknown ``trans``.
        numpy.linalg.LinAlgError: a zero on the diagonal (a singular matrix).
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a = matrix_operand(a, "solve_triangular")
    b = float_operand(b)
    if trans in (2, "C") and "c" in (a.dtype.kind, b.dtype.kind):
        raise NotImplementedError("solve_triangular: trans='C' (conjugate transpose) of complex input is "
                                  "not supported; conjugate a and use trans='T'")
    params = dict(trans=_TRANS[trans], lower=bool(lower), unit_diagonal=bool(unit_diagonal))
    if _shape.ndim(b) == 1:
        return _shape.squeeze(bind(tri_solve_p, a, _shape.expand_dims(b, -1), **params), -1)
    return bind(tri_solve_p, a, b, **params)


# ---- Cholesky ------------------------------------------------------------------------------------
def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Array, ...]:
    """The Cholesky factor of each symmetric positive-definite matrix, for :func:`cho_solve`, as
    ``scipy.linalg.cho_factor``.

    Args:
        a: real ``(..., n, n)``.
        lower: return the lower factor ``L`` (``a = L L^T``); default the upper ``U`` (``a = U^T U``).
        overwrite_a, check_finite: accepted for SciPy compatibility, ignored.

    Returns:
        ``(c, lower)``. Unlike SciPy, whose ``c`` keeps arbitrary entries of ``a`` in the unused
        triangle, that triangle is zero here (as in JAX); the used triangle matches SciPy.

    Raises:
        numpy.linalg.LinAlgError: a matrix is not positive definite.

    Symmetric input: computed from ``(a + a^T) / 2`` (JAX's convention; see
    ``tapegrad.numpy.linalg.cholesky``), so gradients are symmetric.
    """
    return cholesky(a, upper=not lower), bool(lower)


def cho_solve(c_and_lower: Any, b: ArrayLike, overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """The solution of ``A x = b`` given ``(c, lower)`` from :func:`cho_factor`, as
    ``scipy.linalg.cho_solve``.

    Args:
        c_and_lower: ``(c, lower)``; only the triangle of ``c`` named by ``lower`` is read.
        b: ``(n,)`` or ``(..., n, k)``.
        overwrite_b, check_finite: accepted for SciPy compatibility, ignored.

    Returns:
        ``x`` with ``b``'s shape; differentiable in ``c`` and ``b`` (two triangular solves).
    """
    c, lower = c_and_lower
    b = float_operand(b)
    if _shape.ndim(b) == 1:  # one right-hand side for every matrix of the stack
        return _shape.squeeze(cho_solve((c, lower), _shape.expand_dims(b, -1)), -1)
    if lower:  # A = L L^T
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans=1, lower=False), lower=False)  # A = U^T U
