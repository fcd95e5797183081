"""``cg``, ``gmres``, ``bicgstab`` and ``minres``: SciPy's (cupyx's) Krylov solvers, their solutions
differentiated by the adjoint method, never through their iterations.

Each wraps the solver (``_krylov.iterative_solve_p``) in :func:`tapegrad.custom_linear_solve` with
``matvec = A @ x``: forward mode solves ``A dx = db - dA x`` with the same method, reverse mode solves
``A^T y = ct_x`` with it (``cg`` and ``minres`` take symmetric matrices, so that is ``A`` again:
``symmetric=True``) and gives ``ct_b = y``, ``ct_data[e] = -y[row_e] x[col_e]``. The derivative solves
use the caller's tolerances, so a gradient is as accurate as the solves. ``info`` comes back as SciPy
returns it; a solve that did not converge raises :class:`~._krylov.ConvergenceError` instead while a
derivative is being taken, and the adjoint's solve always does: a derivative at an unconverged point
would be wrong without a word.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._control_flow import custom_linear_solve
from tapegrad._core import Tracer
from tapegrad._structural import stop_gradient
from tapegrad.extend import bind
from tapegrad.scipy.sparse.linalg._krylov import _Static, iterative_solve_p
from tapegrad.scipy.sparse.linalg._operands import dense_rhs, differentiating, float_dtype, square_matrix
from tapegrad.sparse import SparseArray


def _static(value, where: str, name: str):
    """A preconditioner or callback as a static parameter; a tapegrad.sparse ``M`` of concrete values
    becomes SciPy's, a traced one is refused (it would get no derivative)."""
    if value is None:
        return None
    if isinstance(value, SparseArray):
        if isinstance(value.data, Tracer):
            raise TypeError(f"{where}: {name} is traced; a preconditioner gets no derivative (it changes how fast "
                            "the solve converges, not its solution): pass tg.stop_gradient of its data, or a SciPy "
                            "sparse array or LinearOperator")
        value = value.to_scipy()
    return _Static(value)


def _krylov(method: str, A: Any, b: Any, x0: Any, rtol: float, atol: float, maxiter: int | None, M: Any,
            callback: Any, extra: tuple = (), shift: float = 0.0) -> tuple[Any, Any]:
    """``(x, info)`` of ``method`` on ``A x = b`` (``(A - shift I) x = b``), differentiable in ``A``'s stored
    values and ``b``."""
    A = square_matrix(A, method)
    n = A.shape[0]
    b = tnp.reshape(dense_rhs(b, n, method, matrix_rhs=False), (n,))
    dtype = float_dtype(A.dtype, b.dtype)
    A = A if np.dtype(A.dtype) == dtype else type(A)._make(A.data.astype(dtype), A.pattern)
    b = b if np.dtype(b.dtype) == dtype else tnp.asarray(b, dtype=dtype)
    x0 = tnp.zeros_like(b) if x0 is None else tnp.reshape(dense_rhs(x0, n, method, False, "x0"), (n,))
    x0 = stop_gradient(x0).astype(dtype)  # only where the iterations start: no derivative
    data, strict, symmetric = A.data, differentiating(), method in ("cg", "minres")
    params = dict(pattern=A.pattern, method=method, rtol=float(rtol), atol=float(atol), maxiter=maxiter,
                  extra=extra, M=_static(M, method, "M"), where=method)
    callback = _static(callback, method, "callback")

    def solver(transposed: bool):
        def solve(_matvec, rhs):
            start = tnp.zeros_like(rhs) if transposed else x0  # the adjoint's right-hand side is another vector
            return bind(iterative_solve_p, data, rhs, start, trans=transposed and not symmetric, adjoint=transposed,
                        strict=strict or transposed, callback=None if transposed else callback, **params)
        return solve

    def matvec(x):
        return A @ x - shift * x if shift else A @ x
    return custom_linear_solve(matvec, b, solver(False), None if symmetric else solver(True), symmetric=symmetric,
                               has_aux=True)


def cg(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M: Any = None, callback: Any = None) -> tuple[Any, Any]:
    """Solve ``A x = b`` by conjugate gradients, as ``scipy.sparse.linalg.cg``, differentiably.

    Args:
        A: an ``(n, n)`` symmetric positive definite :mod:`tapegrad.sparse` array (``data`` may be traced)
            or SciPy (cupyx) sparse array or matrix, real.
        b: dense, ``(n,)`` or ``(n, 1)``; may be traced.
        x0: the starting guess (default zeros); it gets no derivative.
        rtol, atol: stop at ``||b - A x|| <= max(atol, rtol ||b||)`` (SciPy's rule; cupyx's ``tol`` is
            ``rtol``). The derivative solves use them too: tighten them for accurate derivatives.
        maxiter: the most iterations (None: SciPy's default, ``10 n``).
        M: a preconditioner approximating ``A^-1`` (SciPy's or cupyx's sparse array, dense array or
            ``LinearOperator``, or a :mod:`tapegrad.sparse` array of concrete values); no derivative.
        callback: SciPy's ``callback(xk)``, called on the forward solve's iterates only.

    Returns:
        The pair ``(x, info)``. ``x`` has shape ``(n,)`` and the common float dtype (float64 for
        integers), differentiable in ``A``'s stored values and ``b`` (the adjoint solve is ``cg`` on
        ``A`` again); ``info`` is SciPy's (0 converged, > 0 the iterations ran out, < 0 a breakdown), an
        int64 0-d array with no derivative.

    Raises:
        ConvergenceError: ``info != 0`` while a derivative is being taken, or in a derivative's solve (a
            ``RuntimeError``). Without a derivative ``info`` is returned, as SciPy does.
        TypeError, ValueError: ``A`` dense, complex or not square; ``b`` or ``x0`` of the wrong shape; a
            traced ``M``.
    """
    return _krylov("cg", A, b, x0, rtol, atol, maxiter, M, callback)


def bicgstab(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
             M: Any = None, callback: Any = None) -> tuple[Any, Any]:
    """Solve ``A x = b`` by BiCGSTAB, as ``scipy.sparse.linalg.bicgstab``, differentiably.

    Args:
        A: an ``(n, n)`` :mod:`tapegrad.sparse` array (``data`` may be traced) or SciPy sparse array or
            matrix, real.
        b, x0, rtol, atol, maxiter, callback: as :func:`cg`.
        M: as :func:`cg`; the adjoint's solve (on ``A^T``) uses ``M.T``.

    Returns:
        ``(x, info)`` as :func:`cg`; the adjoint's solve is ``bicgstab`` on ``A^T``.

    Raises:
        ConvergenceError, TypeError, ValueError: as :func:`cg`.
        NotImplementedError: on CuPy, whose ``cupyx.scipy.sparse.linalg`` has no ``bicgstab`` (use
            :func:`gmres`).
    """
    return _krylov("bicgstab", A, b, x0, rtol, atol, maxiter, M, callback)


def gmres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0, restart: int | None = None,
          maxiter: int | None = None, M: Any = None, callback: Any = None,
          callback_type: str | None = None) -> tuple[Any, Any]:
    """Solve ``A x = b`` by restarted GMRES, as ``scipy.sparse.linalg.gmres``, differentiably.

    Args:
        A: as :func:`bicgstab`.
        b, x0, rtol, atol, callback: as :func:`cg`.
        restart: the Krylov space's size between restarts (SciPy's default 20).
        maxiter: the most restart cycles (SciPy's meaning).
        M: as :func:`bicgstab` (``M.T`` for the adjoint's solve).
        callback_type: SciPy's (``"x"``, ``"pr_norm"``, ``"legacy"``).

    Returns:
        ``(x, info)`` as :func:`cg`; the adjoint's solve is ``gmres`` on ``A^T``.

    Raises:
        ConvergenceError, TypeError, ValueError: as :func:`cg`.
    """
    extra = tuple((k, v) for k, v in (("restart", restart), ("callback_type", callback_type)) if v is not None)
    return _krylov("gmres", A, b, x0, rtol, atol, maxiter, M, callback, extra)


def minres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, shift: float = 0.0, maxiter: int | None = None,
           M: Any = None, callback: Any = None, show: bool = False, check: bool = False) -> tuple[Any, Any]:
    """Solve ``(A - shift I) x = b`` by MINRES, as ``scipy.sparse.linalg.minres``, differentiably.

    Args:
        A: an ``(n, n)`` symmetric (possibly indefinite) matrix, as :func:`cg` takes.
        b, x0, maxiter, M, callback: as :func:`cg`.
        rtol: SciPy's relative tolerance (``minres`` has no ``atol``).
        shift: a constant (no derivative) subtracted from the diagonal.
        show, check: SciPy's (print the iterations; check that ``A`` and ``M`` are symmetric).

    Returns:
        ``(x, info)`` as :func:`cg`; the adjoint's solve is ``minres`` on the same matrix.

    Raises:
        ConvergenceError, TypeError, ValueError: as :func:`cg`.
    """
    extra = tuple((k, v) for k, v in (("shift", float(shift)), ("show", show), ("check", check)) if v)
    return _krylov("minres", A, b, x0, rtol, 0.0, maxiter, M, callback, extra, shift=float(shift))
