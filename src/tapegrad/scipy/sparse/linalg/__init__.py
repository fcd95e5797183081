"""``tapegrad.scipy.sparse.linalg``: SciPy's sparse solvers, differentiable in the matrix's stored values
and the right-hand side by the adjoint method.

The matrix is a :mod:`tapegrad.sparse` array (its ``data`` possibly traced) or a SciPy sparse array or
matrix. Each solve runs SciPy's own solver (cupyx's on CuPy) on concrete values; its derivatives come
from :func:`tapegrad.custom_linear_solve` (one solve with the transpose, reusing a factorisation where
there is one), never from the solver's iterations. The guide is ``docs/sparse_linalg.md``.
"""
from tapegrad.scipy.sparse.linalg._direct import SuperLU, factorized, splu, spsolve
from tapegrad.scipy.sparse.linalg._eigsh import eigsh
from tapegrad.scipy.sparse.linalg._expm import expm_multiply
from tapegrad.scipy.sparse.linalg._factor import SingularMatrixError
from tapegrad.scipy.sparse.linalg._iterative import bicgstab, cg, gmres, minres
from tapegrad.scipy.sparse.linalg._krylov import ConvergenceError

__all__ = ["ConvergenceError", "SingularMatrixError", "SuperLU", "bicgstab", "cg", "eigsh", "expm_multiply",
           "factorized", "gmres", "minres", "splu", "spsolve"]
