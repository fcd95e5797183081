"""Sparse derivatives for ``tapegrad.scipy.optimize``: the Jacobian of ``least_squares(jac_sparsity=...)``
and the Hessian of ``minimize(method="trust-constr", hess_sparsity=...)``, computed by colouring
(:func:`tapegrad.sparse_jacfwd`, :func:`tapegrad.sparse_hessian`) and handed to SciPy as ``csr_array``s.

SciPy takes a sparse Jacobian from a callable ``jac`` as it takes its own sparse finite differences: with
``jac_sparsity`` it uses ``tr_solver="lsmr"`` (the default for a sparse Jacobian), never forming ``JᵀJ``.
``trust-constr`` takes a sparse Hessian from ``hess`` and solves its subproblems by projected CG.

The passes are staged by :func:`tapegrad.jit` (``jit=True``) for the solve, so each Jacobian costs one
program run; a function ``jit`` cannot stage runs eagerly instead: on the first call, an error of the
staged route is retried eagerly, and an error the eager route raises too is the function's own.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _staged_or_eager(make: Callable[[bool], Callable]) -> Callable:
    """``make(jit=True)``'s transform, or ``make(jit=False)``'s from the first call on where the staged
    one fails on that call and the eager one does not."""
    cell: list[Any] = [make(True), True]

    def call(*args, **kwargs):
        if not cell[1]:
            return cell[0](*args, **kwargs)
        try:
            out = cell[0](*args, **kwargs)
        except Exception:
            eager = make(False)
            out = eager(*args, **kwargs)  # the function's own error raises here
            cell[0] = eager
        cell[1] = False
        return out
    return call


def sparse_jacobian_for_scipy(fun: Callable, jac_sparsity: Any, shape: tuple, host_args, host_kwargs: dict,
                              method: str, where: str) -> Callable:
    """``least_squares``' ``jac``: ``x (flat) -> csr_array (m, n)``, the Jacobian of the residuals
    ``fun(x, *args, **kwargs)`` (flattened) by forward mode on the column colouring of ``jac_sparsity``.

    Raises:
        ValueError: ``method="lm"`` (MINPACK takes dense Jacobians only, as SciPy says for its own
            ``jac_sparsity``).
        TypeError: ``jac_sparsity`` neither a SciPy sparse array or matrix nor a 2-D Boolean array (an
            array of 0 and 1 is taken as SciPy takes it: its non-zeros are the pattern).
    """
    from tapegrad._sparse_jacobians import by_colouring
    if method == "lm":
        raise ValueError(f"{where}: method='lm' does not support jac_sparsity (MINPACK needs a dense Jacobian); "
                         f"use method='trf' or 'dogbox'")
    pattern = _boolean(jac_sparsity)
    jacobian = _staged_or_eager(lambda jit: by_colouring(fun, pattern, "forward", f"{where}(jac_sparsity=...)",
                                                         jit=jit))

    def jac(x, *_):
        return jacobian(np.asarray(x).reshape(shape), *host_args, **host_kwargs)
    return jac


def check_hess_sparsity(method: Any, hess: Any, hessp: Any, where: str) -> None:
    """``hess_sparsity`` asks for a sparse Hessian: only ``trust-constr`` takes one, and only in place of
    ``hess`` and ``hessp``.

    Raises:
        ValueError: another method, or ``hess``/``hessp`` given as well.
    """
    if not isinstance(method, str) or method.lower() != "trust-constr":
        raise ValueError(f"{where}: hess_sparsity is for method='trust-constr' (the method of SciPy's that takes a "
                         f"sparse Hessian), got method={method!r}; pass method='trust-constr', or drop hess_sparsity "
                         f"(Newton-CG, trust-ncg and trust-krylov get matrix-free Hessian-vector products)")
    if hess is not None or hessp is not None:
        raise ValueError(f"{where}: hess_sparsity computes the Hessian, so hess and hessp must be None; drop one")


def sparse_hessian_for_scipy(fun: Callable, hess_sparsity: Any, shape: tuple, host_args, where: str) -> Callable:
    """``minimize``'s ``hess``: ``x (flat) -> csr_array (n, n)``, the Hessian of ``fun(x, *args)`` by star
    colouring of ``hess_sparsity`` (symmetric: ``S``, ``S.T`` or both triangles)."""
    from tapegrad._sparse_jacobians import by_colouring
    pattern = _boolean(hess_sparsity)
    hessian = _staged_or_eager(lambda jit: by_colouring(fun, pattern, "star", f"{where}(hess_sparsity=...)", jit=jit))

    def hess(x, *_):
        return hessian(np.asarray(x).reshape(shape), *host_args)
    return hess


def _boolean(sparsity: Any) -> Any:
    """SciPy's spelling of a pattern (a sparse matrix or an array whose non-zeros are the entries) as
    tapegrad's: a sparse one unchanged (its stored entries), a dense one as ``!= 0``."""
    import scipy.sparse as sp
    if sp.issparse(sparsity):
        return sparsity
    dense = np.asarray(sparsity)
    return dense if dense.dtype == bool else dense != 0
