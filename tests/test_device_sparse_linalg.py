"""tapegrad.scipy.sparse.linalg on a device: on the strict device double (whose
``devicearrayx.scipy.sparse.linalg`` stands for ``cupyx.scipy.sparse.linalg``), and on real CuPy with
``TAPEGRAD_DEVICE=cupy``.

Each solver runs with the matrix's stored values and the right-hand side on the device through every
route (eager, reverse, forward, both at order 2, jit, jit of a gradient, vmap) and is compared with the
host run (whose numbers tests/test_sparse_linalg.py checks against SciPy and the dense route); then
the factorisation count of a device gradient, and what CuPy lacks.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from _device import DeviceArray, xp
from _device_check import ROUTES, check_route
from tapegrad.scipy.sparse import linalg as tsl
from tapegrad.scipy.sparse.linalg import _factor

N = 6
T = sp.diags_array([np.full(N, 4.0), np.full(N - 1, -1.0), np.full(N - 1, -1.5)], offsets=[0, 1, -1]).tocsr()
TSYM = sp.diags_array([np.arange(4.0, 4.0 + N), np.full(N - 1, -1.0), np.full(N - 1, -1.0)],
                      offsets=[0, 1, -1]).tocsr()
B = np.arange(1.0, N + 1.0)


def _solver(name):
    """``(d, b) -> x`` of one solver on the pattern of T (TSYM for the symmetric ones)."""
    M = TSYM if name in ("cg", "minres", "eigsh") else T

    def build(d):
        return ts.csr_array((d, M.indices, M.indptr), shape=M.shape)
    solvers = {
        "spsolve": lambda d, b: tsl.spsolve(build(d), b),
        "splu_T": lambda d, b: tsl.splu(build(d)).solve(b, trans="T"),
        "cg": lambda d, b: tsl.cg(build(d), b, rtol=1e-13)[0],
        "minres": lambda d, b: tsl.minres(build(d), b, rtol=1e-13)[0],
        "gmres": lambda d, b: tsl.gmres(build(d), b, rtol=1e-13)[0],
        "bicgstab": lambda d, b: tsl.bicgstab(build(d), b, rtol=1e-13)[0],
        # a loss of the top two eigenpairs that does not depend on the eigenvectors' signs
        "eigsh": lambda d, b: tsl.eigsh(build(d), k=2, v0=np.ones(N))[0] * tnp.sum(
            tsl.eigsh(build(d), k=2, v0=np.ones(N))[1] * b[:, None], axis=0) ** 2,
    }
    fn = solvers[name]
    fn.__name__ = name
    return fn, M.data


SOLVERS = ["spsolve", "splu_T", "cg", "minres", "gmres", "bicgstab", "eigsh"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", SOLVERS)
def test_solvers_on_the_device_equal_the_host(name, route):
    fn, data = _solver(name)
    check_route(route, fn, (data, B))


def test_a_device_gradient_factorises_once_and_stays_on_the_device():
    fn, data = _solver("spsolve")
    _factor.clear_cache()
    before = _factor.factorisations
    gd, gb = tg.grad(lambda d, b: tnp.sum(fn(d, b) ** 2), (0, 1))(xp.asarray(data), xp.asarray(B))
    assert _factor.factorisations - before == 1
    assert type(gd) is DeviceArray and type(gb) is DeviceArray


def test_expm_multiply_is_refused_where_cupyx_lacks_it():
    A = ts.csr_array((xp.asarray(T.data), T.indices, T.indptr), shape=T.shape)
    with pytest.raises(NotImplementedError, match="expm_multiply: .* has no expm_multiply"):
        tsl.expm_multiply(A, xp.asarray(B))


def test_the_device_classes_are_accepted():
    """A cupyx sparse matrix (the double's) is converted keeping its data on the device."""
    import importlib
    xsparse = importlib.import_module(f"{xp.__name__}x.scipy.sparse")
    M = xsparse.csr_matrix(T)
    x = tsl.spsolve(M, xp.asarray(B))
    assert type(x) is DeviceArray
    np.testing.assert_allclose(x.get(), np.linalg.solve(T.toarray(), B), rtol=1e-12)
    w, V = tsl.eigsh(xsparse.csr_matrix(TSYM), k=2, v0=np.ones(N))
    assert type(w) is DeviceArray and type(V) is DeviceArray
    np.testing.assert_allclose(w.get(), np.linalg.eigvalsh(TSYM.toarray())[-2:], rtol=1e-12)
