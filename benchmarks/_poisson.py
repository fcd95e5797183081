"""The 2-D Poisson problem of the PDE benchmark (not a benchmark itself): -div(kappa grad u) = f on the unit
square, u = 0 on the boundary, cell-centred finite volumes on an n x n grid (h = 1/n).

The conductance of a face between two cells is the harmonic mean of their kappa (the usual finite-volume
choice: it is exact for a layered medium), and a boundary face, half a cell from the wall, has 2 kappa.
The operator is a five-point stencil with a static pattern, so its stored values are a differentiable
function of kappa: ``assemble`` builds them with ``tapegrad.numpy`` and returns a ``tapegrad.sparse``
``csr_array``; ``assemble_numpy`` builds the same matrix with NumPy and SciPy alone (the baseline);
``jax_loss`` is the same problem on JAX's sparse arrays with CG. The stored values are in CSR order: each
row's columns ascend, which for cell p is (p - n, p - 1, p, p + 1, p + n), the stencil's five offsets in
the order of ``_stencil``.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp


@functools.cache
def _stencil(n: int):
    """The static CSR pattern and, per stored value, its index in the stacked (5, n, n) coefficients."""
    cells = np.arange(n * n).reshape(n, n)
    i, j = np.divmod(cells, n)
    offsets = np.array([-n, -1, 0, 1, n])
    valid = np.stack([i > 0, j > 0, np.ones_like(i, bool), j < n - 1, i < n - 1], axis=-1).reshape(n * n, 5)
    columns = cells.reshape(-1, 1) + offsets
    stacked = np.arange(5).reshape(1, 5) * (n * n) + cells.reshape(-1, 1)
    indptr = np.concatenate([[0], np.cumsum(valid.sum(axis=1))])
    return columns[valid], indptr, stacked[valid]


def _coefficients(xp, kappa):
    """The stencil's five coefficients per cell, stacked (5, n, n): the up, left, centre, right and down
    entries of each cell's row (``xp`` is numpy or tapegrad.numpy)."""
    n = kappa.shape[0]
    kx = 2 * kappa[:, :-1] * kappa[:, 1:] / (kappa[:, :-1] + kappa[:, 1:])  # face between (i, j) and (i, j+1)
    ky = 2 * kappa[:-1] * kappa[1:] / (kappa[:-1] + kappa[1:])  # face between (i, j) and (i+1, j)
    left = xp.concatenate([2 * kappa[:, :1], kx], axis=1)
    right = xp.concatenate([kx, 2 * kappa[:, -1:]], axis=1)
    up = xp.concatenate([2 * kappa[:1], ky], axis=0)
    down = xp.concatenate([ky, 2 * kappa[-1:]], axis=0)
    return xp.stack([-up, -left, left + right + up + down, -right, -down]) * (n * n)


def assemble(kappa):
    """The operator as a ``tapegrad.sparse.csr_array`` whose values are a traced function of ``kappa``."""
    import tapegrad.numpy as tnp
    import tapegrad.sparse as tsp
    n = kappa.shape[0]
    indices, indptr, order = _stencil(n)
    data = tnp.reshape(_coefficients(tnp, kappa), (-1,))[order]
    return tsp.csr_array((data, indices, indptr), shape=(n * n, n * n))


def assemble_numpy(kappa: np.ndarray) -> sp.csr_array:
    """The same operator with NumPy and SciPy alone."""
    n = kappa.shape[0]
    indices, indptr, order = _stencil(n)
    data = _coefficients(np, kappa).reshape(-1)[order]
    return sp.csr_array((data, indices, indptr), shape=(n * n, n * n))


def problem(n: int, seed: int = 0):
    """A smooth positive ``kappa`` (n x n), the source ``f`` (n*n) and observations ``u_obs`` of the solution
    for another ``kappa``, with 1% noise."""
    x = (np.arange(n) + 0.5) / n
    xx, yy = np.meshgrid(x, x, indexing="ij")
    kappa_true = 1.0 + 0.5 * np.sin(2 * np.pi * xx) * np.cos(np.pi * yy)
    f = np.ones(n * n)
    u_true = sp.linalg.spsolve(assemble_numpy(kappa_true).tocsc(), f)
    noise = np.random.default_rng(seed).standard_normal(n * n)
    u_obs = u_true + 0.01 * np.abs(u_true).max() * noise
    return np.ones((n, n)), f, u_obs


def forward_scipy(kappa, f):
    """The baseline: assembly with NumPy, then SciPy's ``spsolve`` (factorisation and solve)."""
    return sp.linalg.spsolve(assemble_numpy(kappa).tocsc(), f)


def loss(kappa, f, u_obs, spsolve):
    """``sum((u(kappa) - u_obs)**2)`` with ``u`` solved by ``spsolve(A, f)`` (tapegrad's)."""
    import tapegrad.numpy as tnp
    u = spsolve(assemble(kappa), f)
    return tnp.sum((u - u_obs) ** 2)


def dense_loss(kappa, f, u_obs):
    """The same loss with the operator made dense and solved by ``tnp.linalg.solve``."""
    import tapegrad.numpy as tnp
    u = tnp.linalg.solve(assemble(kappa).toarray(), f)
    return tnp.sum((u - u_obs) ** 2)


def jax_value_and_grad(n: int, rtol: float):
    """JAX's route, jitted: the operator as a ``jax.experimental.sparse.BCOO`` of the same values, solved
    by ``jax.scipy.sparse.linalg.cg`` (which differentiates through ``lax.custom_linear_solve``)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse
    indices, indptr, order = _stencil(n)
    rows = np.repeat(np.arange(n * n), np.diff(indptr))
    coords = jnp.asarray(np.stack([rows, indices], axis=1))

    def jax_loss(kappa, f, u_obs):
        data = _coefficients(jnp, kappa).reshape(-1)[order]
        a = jsparse.BCOO((data, coords), shape=(n * n, n * n), indices_sorted=True, unique_indices=True)
        u, _ = jax.scipy.sparse.linalg.cg(lambda v: a @ v, f, tol=rtol, atol=0.0, maxiter=20 * n * n)
        return jnp.sum((u - u_obs) ** 2)

    return jax.jit(jax.value_and_grad(jax_loss))
