"""``tapegrad.scipy.linalg``: SciPy's linear algebra, traceable and differentiable in both modes.

Values come from ``scipy.linalg`` (``cupyx.scipy.linalg`` on CuPy arrays) or from
``tapegrad.numpy.linalg``; every derivative rule is written in tapegrad operations, so derivatives of
any order work in forward and reverse mode. ``schur``, ``hessenberg`` and ``rsf2csf`` give values only
(as in JAX); the special-matrix constructors of an integer size (``hilbert``, ``pascal``, ...) are
constants.
"""
from tapegrad.scipy.linalg._basic import cholesky, det, eigh, eigh_tridiagonal, inv, qr, qr_multiply, solve, svd
from tapegrad.scipy.linalg._expm import expm, expm_frechet
from tapegrad.scipy.linalg._lu import lu, lu_factor, lu_solve
from tapegrad.scipy.linalg._triangular import cho_factor, cho_solve, solve_triangular

__all__ = [
    "cho_factor", "cho_solve", "cholesky", "det", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "inv",
    "lu", "lu_factor", "lu_solve", "qr", "qr_multiply", "solve", "solve_triangular", "svd",
]
