"""``Rosenbrock23`` with a sparse Jacobian: ``solve_ivp(..., method="Rosenbrock23", jac_sparsity=S)``.

A stiff system from a discretised PDE or a reaction network has a Jacobian ``df/dy`` with few entries
per row. Given its pattern (SciPy's ``jac_sparsity`` option of its implicit methods), each step takes
the Jacobian by column colouring (Curtis, Powell and Reid 1974: ``tapegrad._colouring``), one
``jvp`` per colour batched by ``vmap`` instead of one per state, and solves its three linear systems
with ``W = I - h d J`` as a sparse matrix: ``tapegrad.scipy.sparse.linalg.spsolve``, SciPy's SuperLU,
whose factorisation the three solves of a step share (its cache matches ``W``'s values). The step
stays differentiable at every order: the Jacobian's values come from tapegrad operations, and the
solves from ``custom_linear_solve``.

Everything about the pattern (the colouring, the seeds, where each entry of ``J`` lands in ``W``) is
computed once per solve, on the host, in :class:`SparseStructure`.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
import tapegrad.sparse as tsp
from tapegrad._api import jvp
from tapegrad._backend import namespace_of
from tapegrad._colouring import pattern_of
from tapegrad._sparse_jacobians import Compressed
from tapegrad._vmap_api import vmap
from tapegrad.scipy.sparse.linalg import spsolve


class SparseStructure:
    """The static parts of a sparse Rosenbrock step for an ``(n, n)`` Jacobian pattern ``jac_sparsity``
    (a SciPy sparse array or matrix, or a Boolean ``(n, n)`` array).

    Attributes: ``compressed``, the pattern's column colouring (``sparse_jacfwd``'s: its seeds, and
    where each entry of ``J`` lies in the compressed Jacobian ``J S``); ``indices``, ``indptr``: ``W``'s
    canonical CSR pattern, ``J``'s with the whole diagonal added; ``gather`` ``(nnz(W),)``, per stored
    value of ``W``, its index in the flattened ``J S``, or ``colours * n`` (a zero appended) for a
    diagonal entry ``J`` does not have; ``diagonal`` ``(nnz(W),)``, 1.0 on the diagonal.

    Raises:
        TypeError: ``jac_sparsity`` neither sparse nor a 2-D Boolean array.
        ValueError: its shape is not ``(n, n)``.
    """

    def __init__(self, jac_sparsity, n: int):
        import scipy.sparse as sp  # SciPy is needed here only
        pattern = pattern_of(jac_sparsity, "solve_ivp")
        if pattern.shape != (n, n):
            raise ValueError(f"solve_ivp: jac_sparsity must have shape (n, n) = ({n}, {n}) for y0 of {n} states, "
                             f"got {pattern.shape}")
        self.compressed = Compressed(pattern, "column")
        w = sp.csr_array(pattern.astype(np.int8) + sp.eye_array(n, dtype=np.int8, format="csr"))
        w.sum_duplicates()
        self.indices, self.indptr = w.indices, w.indptr
        rows = np.repeat(np.arange(n), np.diff(w.indptr))
        # each entry of W: its position among J's entries, -1 where J has none (which picks the zero below)
        positions = sp.csr_array((np.arange(1, pattern.nnz + 1), pattern.indices, pattern.indptr), shape=(n, n))
        in_jacobian = np.asarray(positions[rows, w.indices]).ravel() - 1
        self.gather = np.append(self.compressed.gather, self.compressed.count * n)[in_jacobian]
        self.diagonal = (rows == w.indices).astype(np.float64)


def sparse_solver(structure: SparseStructure, fun, t, y, hd):
    """``solve(b) = W^-1 b`` with ``W = I - hd * df/dy(t, y)``, the Jacobian taken by colouring."""
    dtype = y.dtype
    seeds = structure.compressed.seeds(namespace_of(y), dtype)
    compressed = vmap(lambda s: jvp(lambda z: fun(t, z), (y,), (s,))[1])(seeds)  # (colours, n): J S
    flat = tnp.concatenate([tnp.reshape(compressed, (-1,)), tnp.zeros((1,), dtype=dtype)])
    jacobian_on_w = flat[structure.gather]
    data = tnp.asarray(structure.diagonal, dtype=dtype) - hd * jacobian_on_w
    n = tnp.shape(y)[0]
    w = tsp.csr_array((data, structure.indices, structure.indptr), shape=(n, n))
    return lambda b: spsolve(w, b)
