"""Decompositions and functions given as values only, as in JAX: ``schur``, ``rsf2csf``,
``hessenberg`` and ``funm``. Their derivative rules raise ``NotImplementedError`` naming the function
(the Schur vectors of a non-normal matrix have no simple derivative, and SciPy's Schur-Parlett
recurrence fails on the block matrix the Frechet derivative needs): a derivative is never silently
zero. They batch under ``vmap`` and stage under ``jit``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad._core import ShapedArray, bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import defjvp, defvjp, primitive
from tapegrad.numpy.linalg._common import defbatch_matrices, matrix_operand, shaped
from tapegrad.scipy.linalg._common import over_stack, scipy_linalg


def _values_only(prim, *, operands=1):
    """Derivative rules for ``prim`` that raise: the function has values only."""
    def rule(*args, **params):
        raise NotImplementedError(f"{prim.name} has no derivative (values only, as in JAX); wrap its "
                                  "input in tg.stop_gradient if no derivative is needed through it")
    defvjp(prim, *[rule] * operands)
    defjvp(prim, *[rule] * operands)
    defbatch_matrices(prim)


def _complex_of(dtype):
    return np.result_type(dtype, np.complex64)


def _schur_aval(a, *, output):
    dtype = a.dtype if output == "real" else _complex_of(a.dtype)
    return [ShapedArray(tuple(a.shape), dtype)] * 2


schur_p = primitive("scipy.linalg.schur",
                    lambda a, *, output: over_stack(lambda x: scipy_linalg(x).schur(x, output=output), a),
                    _schur_aval, multiple_results=True)
_values_only(schur_p)


def schur(a: ArrayLike, output: str = "real", lwork: int | None = None, overwrite_a: bool = False, sort: Any = None,
          check_finite: bool = True) -> Array:
    """The Schur decomposition ``a = Z T Z^H``, as ``scipy.linalg.schur``: ``T`` quasi upper
    triangular (``output='real'``) or upper triangular (``'complex'``), ``Z`` unitary.

    Values only (no derivative, as in JAX); ``sort`` is not supported (``NotImplementedError``),
    ``lwork``, ``overwrite_a``, ``check_finite`` are ignored. Returns ``(T, Z)``, ``(..., n, n)``.

    Raises:
        ValueError: ``output`` not ``'real'`` or ``'complex'``.
    """
    if sort is not None:
        raise NotImplementedError("schur: sort= is not supported")
    if output not in ("real", "complex", "r", "c"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    output = "real" if output in ("real", "r") else "complex"
    return tuple(bind(schur_p, matrix_operand(a, "schur"), output=output))


def _rsf2csf_impl(t, z):
    return over_stack(lambda t, z: scipy_linalg(t, z).rsf2csf(t, z), t, z)


rsf2csf_p = primitive("scipy.linalg.rsf2csf", _rsf2csf_impl,
                      lambda t, z: [ShapedArray(tuple(t.shape), _complex_of(np.result_type(t.dtype, z.dtype)))] * 2,
                      multiple_results=True)
_values_only(rsf2csf_p, operands=2)


def rsf2csf(T: ArrayLike, Z: ArrayLike, check_finite: bool = True) -> Array:
    """The complex Schur form from the real one, as ``scipy.linalg.rsf2csf``: ``(T, Z)`` complex.
    Values only (no derivative)."""
    return tuple(bind(rsf2csf_p, matrix_operand(T, "rsf2csf"), matrix_operand(Z, "rsf2csf")))


def _hessenberg_impl(a):
    return over_stack(lambda x: scipy_linalg(x).hessenberg(x, calc_q=True), a)


hessenberg_p = primitive("scipy.linalg.hessenberg", _hessenberg_impl, lambda a: [shaped(a.shape, a)] * 2,
                         multiple_results=True)
_values_only(hessenberg_p)


def hessenberg(a: ArrayLike, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The Hessenberg form ``a = Q H Q^H``, as ``scipy.linalg.hessenberg``: ``H``, or ``(H, Q)`` with
    ``calc_q``. Values only (no derivative, as in JAX)."""
    h, q = bind(hessenberg_p, matrix_operand(a, "hessenberg"))
    return (h, q) if calc_q else h


def _funm_impl(a, *, func):
    out = over_stack(lambda x: scipy_linalg(x).funm(x, func, disp=True), a)
    if a.dtype.kind != "c" and out.dtype.kind == "c":
        raise np.linalg.LinAlgError("funm: the result for this real matrix is complex; pass a complex matrix")
    return out.astype(np.result_type(a.dtype, out.dtype) if a.dtype.kind == "c" else a.dtype, copy=False)


funm_p = primitive("scipy.linalg.funm", _funm_impl, lambda a, *, func: shaped(a.shape, a))
_values_only(funm_p)


def funm(A: ArrayLike, func: Callable[..., Any], disp: bool = True) -> Array:
    """The matrix function ``func(A)`` by the Schur-Parlett recurrence, as ``scipy.linalg.funm``.

    Args:
        A: ``(..., n, n)``.
        func: a NumPy elementwise function (it is applied to the Schur form's entries); it is a
            static argument (hashed into ``jit``'s cache).
        disp: SciPy's flag; ``True`` only (the error estimate of ``disp=False`` is not returned).

    Returns:
        ``func(A)``, ``A``'s shape and dtype. Values only (no derivative, as in JAX). Like SciPy's,
        the recurrence is inaccurate for close eigenvalues.

    Raises:
        NotImplementedError: ``disp=False``.
        numpy.linalg.LinAlgError: a real ``A`` whose result is complex.
    """
    if not disp:
        raise NotImplementedError("funm: disp=False (the error estimate) is not supported")
    return bind(funm_p, matrix_operand(A, "funm"), func=func)
