"""The primitive behind ``cg``, ``gmres``, ``bicgstab`` and ``minres``: one call of the backend's Krylov
solver (SciPy's, or cupyx's on CuPy, on the operands' own arrays).

``iterative_solve_p(data, b, x0, ...)`` runs ``method`` on the CSC matrix of ``pattern`` holding ``data``
(``trans``: on its transpose, the same arrays read as CSR; ``adjoint``: the solve is the adjoint's, for
the error message) and returns ``(x, info)``; with ``strict`` a
solve that did not converge raises :class:`ConvergenceError` instead of returning ``info != 0``. It has
no derivative of its own (the solvers bind it on constants inside ``custom_linear_solve``), declines
jit's compiled executor, and is batched by one call per example (a Krylov method takes one right-hand
side at a time).
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad.extend import ShapedArray, bind, defbatch, primitive
from tapegrad.scipy.sparse.linalg._operands import csc_matrix, host_solver, linalg_module


class ConvergenceError(RuntimeError):
    """An iterative solve did not reach its tolerance (SciPy's ``info != 0``) while a derivative was being
    taken, or in the adjoint's solve."""


class _Static:
    """A concrete operator (the preconditioner ``M``, a ``callback``) as a static parameter: hashed by
    identity, so ``jit`` never merges two calls that hold different ones."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"<{type(self.value).__name__}>"


def _tolerances(xp, method: str, rtol, atol) -> dict:
    """The tolerance keywords: ``rtol`` and ``atol`` (SciPy's, and CuPy 14's ``cg``/``gmres``/``bicgstab``);
    ``minres`` has no ``atol``, and CuPy's calls its ``rtol`` ``tol``."""
    if method == "minres":
        return {"rtol" if xp is np else "tol": rtol}
    return {"rtol": rtol, "atol": atol}


def _iterative_impl(data, b, x0, *, pattern, method, trans, adjoint, rtol, atol, maxiter, extra, M, callback, strict,
                    where):
    xp = namespace_of(data, b, x0)
    linalg = linalg_module(data, b)
    solver = getattr(linalg, method, None)
    if solver is None:
        raise NotImplementedError(f"{where}: {linalg.__name__} has no {method}; use another method (gmres) or "
                                  "spsolve on this backend")
    kwargs = dict(extra, maxiter=maxiter, **_tolerances(xp, method, rtol, atol))
    if M is not None:
        kwargs["M"] = M.value.T if trans and method not in ("cg", "minres") else M.value
    if callback is not None:
        kwargs["callback"] = callback.value
    x, info = solver(csc_matrix(data, pattern, transpose=trans), b, x0=x0, **kwargs)
    info = int(info)
    if info != 0 and strict:
        raise ConvergenceError(_not_converged(where, method, adjoint, info, rtol, atol, maxiter))
    return [xp.asarray(x, dtype=b.dtype).reshape(b.shape), xp.asarray(info, dtype=np.int64)]


def _not_converged(where, method, adjoint, info, rtol, atol, maxiter) -> str:
    what = "the adjoint's solve (A^T y = cotangent)" if adjoint else "the solve"
    how = (f"it stopped after {info} iterations (maxiter={maxiter})" if info > 0
           else f"it broke down or met an illegal input (info = {info})")
    return (f"{where}: {what} with {method} did not reach rtol={rtol}, atol={atol}: {how}. A derivative is being "
            "taken, and the implicit-function derivative at an unconverged point would be wrong without a word. "
            "Raise maxiter, pass a preconditioner M, loosen rtol/atol, or solve directly with spsolve")


def _iterative_aval(data, b, x0, **params):
    return [ShapedArray(tuple(b.shape), b.dtype), ShapedArray((), np.dtype(np.int64))]


iterative_solve_p = primitive("sparse_iterative_solve", _iterative_impl, _iterative_aval, multiple_results=True)


host_solver(iterative_solve_p, "SciPy's iterative solver", "tapegrad.scipy.sparse.linalg's cg/gmres/bicgstab/minres")


def _iterative_batch(vals, dims, **params):
    """One solve per example (a Krylov method takes one right-hand side at a time)."""
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = [v if d is None else tnp.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    outs = [bind(iterative_solve_p, *[v if d is None else v[i] for v, d in zip(moved, dims)], **params)
            for i in range(size)]
    return [tnp.stack([o[k] for o in outs]) for k in range(2)], [0, 0]


defbatch(iterative_solve_p, _iterative_batch)
