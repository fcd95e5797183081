"""``expm`` and ``expm_frechet``: the matrix exponential and its Frechet derivative, differentiable
in both modes to any order.

``expm``'s rules come from the block-triangular identity (Najfeld and Havel 1995; Al-Mohy and Higham
2009) ``expm([[A, E], [0, A]]) = [[expm(A), L(A, E)], [0, expm(A)]]``: ``jvp(E) = L(A, E)``, and as
``L(A, .)``'s transpose is ``L(A^T, .)``, ``vjp(G) = L(A^T, G)``. Both call ``expm`` itself on a
``2n x 2n`` matrix, so every order is exact to SciPy's accuracy (each further order doubles the
size). ``expm_frechet`` is that identity itself, so it is differentiable in ``A`` and ``E`` alike.
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import zeros_like
from tapegrad.numpy._indexing import getitem
from tapegrad.numpy.linalg._common import T, defbatch_matrices, matrix_operand, shaped
from tapegrad.scipy.linalg._common import over_stack, scipy_linalg


def _block_upper(a, e):
    """``[[a, e], [0, a]]`` for stacks of matrices."""
    top = _shape.concatenate([a, e], axis=-1)
    bottom = _shape.concatenate([zeros_like(a), a], axis=-1)
    return _shape.concatenate([top, bottom], axis=-2)


def _frechet(a, e):
    """``L(a, e)``: the upper-right block of ``expm([[a, e], [0, a]])``."""
    n = a.shape[-1]
    return getitem(expm(_block_upper(a, e)), (Ellipsis, slice(0, n), slice(n, 2 * n)))


def _expm_impl(a):
    """SciPy's ``expm`` of each matrix of ``a`` ``(..., n, n)``. SciPy's takes stacks;
    ``cupyx.scipy.linalg.expm`` takes one matrix (it starts with ``cupy.diag(a)``, which refuses
    a stack: "Input must be 1- or 2-d."), so on a device the stack is run one matrix at a time."""
    xp = namespace_of(a)
    if xp is np or a.ndim == 2:
        return scipy_linalg(a).expm(a)
    if 0 in a.shape[:-2]:
        return xp.zeros(a.shape, a.dtype)
    return over_stack(scipy_linalg(a).expm, a)


expm_p = primitive("expm", _expm_impl, lambda a: shaped(a.shape, a))
defvjp(expm_p, lambda ct, ans, a: _frechet(T(a), ct))
defjvp(expm_p, lambda t, ans, a: _frechet(a, t))
defbatch_matrices(expm_p)  # the batch is one more stack axis, which the impl takes


def expm(A: ArrayLike) -> Array:
    """The matrix exponential of each matrix of ``A`` (``(..., n, n)``), as ``scipy.linalg.expm``.

    Values are SciPy's (Padé approximation with scaling and squaring, Al-Mohy and Higham 2009);
    on CuPy arrays ``cupyx.scipy.linalg.expm``'s (Padé [13/13] with scaling and squaring, Higham
    2005), run one matrix at a time over a stack, as it takes one matrix only. Derivatives come from
    the block-triangular identity in the module notes. ``expm`` is holomorphic, so complex input
    follows JAX's conventions (the rules use transposes, not conjugate transposes).
    """
    return bind(expm_p, matrix_operand(A, "expm"))


def expm_frechet(A: ArrayLike, E: ArrayLike, method: str | None = None, compute_expm: bool = True,
                 check_finite: bool = True) -> Array:
    """The Frechet derivative ``L(A, E)`` of the matrix exponential at ``A`` in direction ``E``, as
    ``scipy.linalg.expm_frechet``.

    Args:
        A, E: ``(..., n, n)``, stacks broadcast together.
        method, check_finite: accepted for SciPy compatibility; the block-triangular method is used.
        compute_expm: return ``expm(A)`` too.

    Returns:
        ``(expm(A), L(A, E))`` when ``compute_expm``, else ``L(A, E)``; both differentiable in ``A``
        and ``E`` to any order (the upper-right block of ``expm([[A, E], [0, A]])``).
    """
    A, E = matrix_operand(A, "expm_frechet"), matrix_operand(E, "expm_frechet")
    if _shape.shape(A)[-1] != _shape.shape(E)[-1]:
        raise ValueError(f"expm_frechet: A and E must have the same matrix shape, got {_shape.shape(A)} "
                         f"and {_shape.shape(E)}")
    batch = tuple(np.broadcast_shapes(_shape.shape(A)[:-2], _shape.shape(E)[:-2]))
    A = _shape.broadcast_to(A, batch + _shape.shape(A)[-2:])
    E = _shape.broadcast_to(E, batch + _shape.shape(E)[-2:])
    n = _shape.shape(A)[-1]
    both = expm(_block_upper(A, E))
    frechet = getitem(both, (Ellipsis, slice(0, n), slice(n, 2 * n)))
    if not compute_expm:
        return frechet
    return getitem(both, (Ellipsis, slice(0, n), slice(0, n))), frechet
