"""Sparse arrays, solves and Jacobians against JAX (``make test-peers``; CI runs them): the same functions
written with ``jax.experimental.sparse`` (BCOO), ``jax.numpy.linalg.solve`` on the densified operator (JAX
has no sparse direct solver), ``jax.scipy.sparse.linalg.cg`` and ``jax.jacfwd``/``jax.hessian``, in
float64, derivatives up to order 3."""
import numpy as np
import pytest
import scipy.sparse as sp

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from tapegrad.scipy.sparse import linalg as tsl

pytestmark = pytest.mark.peer("jax")
EPS = np.finfo(np.float64).eps
N = 8


@pytest.fixture(scope="module")
def jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


def _spd():
    """A symmetric, diagonally dominant sparse matrix: its pattern (CSR) and stored values."""
    rng = np.random.default_rng(0)
    s = sp.random_array((N, N), density=0.3, random_state=rng)
    s = sp.csr_array(s + s.T + sp.eye_array(N) * N)
    s.sort_indices()
    return s


S = _spd()
ROWS = np.repeat(np.arange(N), np.diff(S.indptr))
B = np.random.default_rng(1).normal(size=N)
W = np.random.default_rng(2).normal(size=N)


def _close(ours, theirs, scale=1.0):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e3 * EPS * scale * max(1.0, np.abs(theirs).max()))


def _ours(data):
    return ts.csr_array((data, S.indices, S.indptr), shape=(N, N))


def _bcoo(jax, data):
    from jax.experimental import sparse as jsparse
    return jsparse.BCOO((data, jax.numpy.asarray(np.stack([ROWS, S.indices], 1))), shape=(N, N))


def test_matvec_derivatives_match_bcoo(jax):
    """A loss through ``A @ x``, ``x @ A`` and ``A.T @ x``: value, gradient and Hessian in (data, x)."""
    jnp = jax.numpy

    def ours(data, x):
        a = _ours(data)
        return tnp.sum(tnp.sin(a @ x) * W) + tnp.sum((x @ a) ** 2) + tnp.sum(tnp.cos(a.T @ x))

    def theirs(data, x):
        a, x = _bcoo(jax, data), jnp.asarray(x)  # a NumPy x @ BCOO is NumPy's matmul, not JAX's
        return jnp.sum(jnp.sin(a @ x) * W) + jnp.sum((x @ a) ** 2) + jnp.sum(jnp.cos(a.T @ x))

    args = (S.data, B)
    _close(ours(*args), theirs(*args))
    for k in (0, 1):
        _close(tg.grad(ours, grad_position=k)(*args), jax.grad(theirs, argnums=k)(*args))
        _close(tg.hessian(ours, grad_position=k)(*args), jax.hessian(theirs, argnums=k)(*args), scale=10)


def test_spsolve_derivatives_to_order_3_match_jax(jax):
    """``spsolve`` against JAX's dense solve of the same matrix: the gradient in (data, b) and the third
    derivative along a line, by tapegrad's reverse and forward routes."""
    jnp = jax.numpy
    d_data, d_b = np.random.default_rng(3).normal(size=(2, S.nnz))[0] / 4, np.random.default_rng(4).normal(size=N)

    def ours(data, b):
        return tnp.sum(tnp.sin(tsl.spsolve(_ours(data), b)) * W)

    def theirs(data, b):
        return jnp.sum(jnp.sin(jnp.linalg.solve(_bcoo(jax, data).todense(), b)) * W)

    for k in (0, 1):
        _close(tg.grad(ours, grad_position=k)(S.data, B), jax.grad(theirs, argnums=k)(S.data, B))
    ours_line = lambda t: ours(S.data + t * d_data, B + t * d_b)  # noqa: E731
    theirs_line = lambda t: theirs(S.data + t * d_data, B + t * d_b)  # noqa: E731
    third = float(jax.grad(jax.grad(jax.grad(theirs_line)))(0.0))
    _close(tg.grad(tg.grad(tg.grad(ours_line)))(0.0), third, scale=1e3)
    _close(tg.jacfwd(tg.jacfwd(tg.jacrev(ours_line)))(0.0), third, scale=1e3)


def test_cg_gradient_matches_jax_cg(jax):
    """``cg`` on a symmetric positive definite matrix: tapegrad's adjoint against JAX's CG, which
    differentiates through ``lax.custom_linear_solve`` too."""
    jnp = jax.numpy

    def ours(data, b):
        return tnp.sum(tsl.cg(_ours(data), b, rtol=1e-14, atol=0.0)[0] * W)

    def theirs(data, b):
        a = _bcoo(jax, data)
        return jnp.sum(jax.scipy.sparse.linalg.cg(lambda v: a @ v, b, tol=1e-14, atol=0.0)[0] * W)

    for k in (0, 1):
        _close(tg.grad(ours, grad_position=k)(S.data, B), jax.grad(theirs, argnums=k)(S.data, B), scale=1e3)


def test_sparse_jacobian_and_hessian_match_jax(jax):
    """``sparse_jacfwd``/``sparse_jacrev`` of a 2-D stencil and ``sparse_hessian`` of a banded objective,
    patterns detected by tracing, against JAX's dense Jacobian and Hessian."""
    jnp = jax.numpy
    k = 6

    def stencil(xp):
        def f(u):
            p = xp.pad(u, 1)
            return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + xp.sin(u) * u
        return f

    def banded(xp):
        return lambda x: xp.sum(xp.sin(x[1:] * x[:-1])) + xp.sum(x ** 4) / 4

    u = np.random.default_rng(5).normal(size=(k, k))
    dense = np.asarray(jax.jacfwd(stencil(jnp))(u)).reshape(k * k, k * k)
    _close(tg.sparse_jacfwd(stencil(tnp))(u).toarray(), dense)
    _close(tg.sparse_jacrev(stencil(tnp))(u).toarray(), dense)
    x = np.random.default_rng(6).normal(size=20)
    _close(tg.sparse_hessian(banded(tnp))(x).toarray(), jax.hessian(banded(jnp))(x), scale=10)
