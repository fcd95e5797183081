"""``tapegrad.numpy.linalg``: NumPy's linear algebra, traceable and differentiable in both modes.

Every function has a vjp and a jvp rule written in tapegrad operations, so derivatives of any order
work in forward and reverse mode. Leading (stacked) axes are handled as NumPy handles them.
Decompositions with several outputs (``eigh``, ``svd``, ``qr``, ``slogdet``) are one primitive each,
with several results; they return NumPy 2's named tuples
(``EighResult``, ``SVDResult``, ``QRResult``, ``SlogdetResult``). Functions of symmetric matrices
(``cholesky``, ``eigh``, ``eigvalsh``) read ``(a + a^T) / 2``, as JAX does. Decompositions take real
input; ``solve``, ``inv``, ``det``, ``matrix_power`` and ``multi_dot`` also complex input
(holomorphic, JAX's conventions).
"""
from numpy.linalg import LinAlgError

from tapegrad.numpy.linalg._cholesky import cholesky
from tapegrad.numpy.linalg._det import SlogdetResult, det, slogdet
from tapegrad.numpy.linalg._eigh import EighResult, eigh, eigvalsh
from tapegrad.numpy.linalg._norm import norm
from tapegrad.numpy.linalg._products import matrix_power, multi_dot
from tapegrad.numpy.linalg._qr import QRResult, qr
from tapegrad.numpy.linalg._solve import inv, lstsq, pinv, solve
from tapegrad.numpy.linalg._svd import SVDResult, svd

__all__ = [
    "EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "det", "eigh",
    "eigvalsh", "inv", "lstsq", "matrix_power", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
    "svd",
]
