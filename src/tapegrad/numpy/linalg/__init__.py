"""``tapegrad.numpy.linalg``: NumPy's linear algebra, traceable and differentiable in both modes.

Every function has a vjp and a jvp rule written in tapegrad operations, so derivatives of any order
work in forward and reverse mode. Leading (stacked) axes are handled as NumPy handles them.
Decompositions with several outputs (``eigh``, ``svd``, ``qr``, ``slogdet``) are one primitive each,
with several results; they return NumPy 2's named tuples
(``EigResult``, ``EighResult``, ``SVDResult``, ``QRResult``, ``SlogdetResult``); ``eig`` and ``eigvals``
always return complex arrays (as JAX). The array API's spellings (``matrix_transpose``, ``vecdot``,
``matrix_norm``, ...) are here as NumPy 2 has them. Functions of symmetric matrices
(``cholesky``, ``eigh``, ``eigvalsh``) read ``(a + a^H) / 2``, as JAX does. Every function takes
complex input too, with JAX's conventions for its derivatives: the jvp is the R-linear map, the vjp
its transpose under ``Re(sum(a * b))`` (so holomorphic functions such as ``solve``, ``inv`` and
``det`` multiply by the transposed, not conjugated, derivative).
"""
import numpy as _np
from numpy.linalg import LinAlgError

from tapegrad.numpy._operators import register_alternatives, register_numpy_functions
from tapegrad.numpy.linalg._array_api import (
    cross,
    diagonal,
    matmul,
    matrix_transpose,
    outer,
    tensordot,
    trace,
    vecdot,
)
from tapegrad.numpy.linalg._cholesky import cholesky
from tapegrad.numpy.linalg._conditioning import cond, matrix_rank
from tapegrad.numpy.linalg._det import SlogdetResult, det, slogdet
from tapegrad.numpy.linalg._eig import EigResult, eig, eigvals
from tapegrad.numpy.linalg._eigh import EighResult, eigh, eigvalsh
from tapegrad.numpy.linalg._norm import matrix_norm, norm, vector_norm
from tapegrad.numpy.linalg._products import matrix_power, multi_dot
from tapegrad.numpy.linalg._qr import QRResult, qr
from tapegrad.numpy.linalg._solve import inv, lstsq, pinv, solve
from tapegrad.numpy.linalg._svd import SVDResult, svd, svdvals
from tapegrad.numpy.linalg._tensor import tensorinv, tensorsolve

__all__ = [
    "EigResult", "EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cond",
    "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer", "pinv",
    "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
    "vector_norm",
]

# np.linalg.solve(x) of a traced x dispatches here; its error for a list that holds one names ours
register_numpy_functions({name: globals()[name] for name in __all__}, _np.linalg)
register_alternatives("numpy.linalg", __name__, __all__)
