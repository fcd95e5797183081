"""``tapegrad.scipy.linalg``: SciPy's linear algebra, traceable and differentiable in both modes.

Values come from ``scipy.linalg`` (``cupyx.scipy.linalg`` on CuPy arrays) or from
``tapegrad.numpy.linalg``; every derivative rule is written in tapegrad operations, so derivatives of
any order work in forward and reverse mode. ``schur``, ``rsf2csf``, ``hessenberg`` and ``funm`` give
values only (as in JAX); the special matrices of an integer size (``hilbert``, ``pascal``, ...) are
constants.
"""
from tapegrad.scipy.linalg._basic import cholesky, det, eigh, eigh_tridiagonal, inv, qr, qr_multiply, solve, svd
from tapegrad.scipy.linalg._expm import expm, expm_frechet
from tapegrad.scipy.linalg._lu import lu, lu_factor, lu_solve
from tapegrad.scipy.linalg._schur import funm, hessenberg, rsf2csf, schur
from tapegrad.scipy.linalg._special_matrices import (
    block_diag,
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
    toeplitz,
)
from tapegrad.scipy.linalg._sylvester import polar, solve_sylvester, sqrtm
from tapegrad.scipy.linalg._triangular import cho_factor, cho_solve, solve_triangular

__all__ = [
    "block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
    "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
    "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
    "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
    "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz",
]
