"""tapegrad.sparse on a device: on the strict device double (``tests/_device_sparse.py`` stands for
``cupyx.scipy.sparse``), and on real CuPy with ``TAPEGRAD_DEVICE=cupy`` (``make test-gpu``).

Each check runs a sparse computation with ``data`` (and the dense operand) on the device through every
route (eager, reverse, forward, both at order 2, jit, vmap) and compares it with the host run; then the
device's own sparse classes as arguments and results, ``A @ x`` and its gradient with no host
synchronisation, the sparse solvers and ``sparse_jacfwd`` there, and the stand-in itself against SciPy.
"""
from __future__ import annotations

import contextlib
import importlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import _device
import _device_sparse
import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from _device import DeviceArray, xp, xpx
from _device_check import ROUTES, assert_same, check_route
from tapegrad.sparse import _foreign

# cupyx.scipy.sparse registers itself when imported; the double's module is put in sys.modules by the
# double, not imported, so its classes are registered here (what the post-import hook does for cupyx)
xsparse = importlib.import_module(f"{xp.__name__}x.scipy.sparse")
xlinalg = importlib.import_module(f"{xp.__name__}x.scipy.sparse.linalg")
_foreign.register(xsparse)

RNG = np.random.default_rng(0)
S = sp.random_array((6, 5), density=0.5, format="csr", random_state=RNG)
X = RNG.normal(size=5)
Y = RNG.normal(size=6)


def _operator(fmt):
    """A function of (data, x) building the array of ``fmt`` from S's pattern (host indices)."""
    C = S.asformat(fmt)
    if fmt == "coo":
        return C.data, lambda d: ts.coo_array((d, (C.row, C.col)), shape=C.shape)
    return C.data, lambda d: getattr(ts, f"{fmt}_array")((d, C.indices, C.indptr), shape=C.shape)


CASES = {  # name: f(A, x, y) of a sparse array A and dense x (n,), y (m,)
    "matvec": lambda A, x, y: tnp.sin(A @ x),
    "vecmat": lambda A, x, y: tnp.sin(y @ A) * x,
    "transpose_matmat": lambda A, x, y: A.T @ tnp.outer(y, x),
    "toarray_multiply": lambda A, x, y: A.multiply(tnp.exp(x)).toarray() ** 2,
    "sums_diagonal": lambda A, x, y: A.sum(axis=0) * x + tnp.sum(A.sum(axis=1) * y) * A.diagonal()[0],
    "convert_union": lambda A, x, y: (A + A.tocoo().tocsc() * 2.0) @ x,
    "scale_by_traced": lambda A, x, y: ((x[0] * A) @ x) * y,
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("name", list(CASES))
def test_sparse_operations_on_the_device_equal_the_host(name, fmt, route):
    data, build = _operator(fmt)
    f = CASES[name]

    def fn(d, x, y):
        return f(build(d), x, y)

    fn.__name__ = f"{name}[{fmt}]"
    check_route(route, fn, (data, X, Y))


def _device_csr():
    return ts.csr_array((xp.asarray(S.data), S.indices, S.indptr), shape=S.shape)


@contextlib.contextmanager
def no_sync():
    """``cupyx.allow_synchronize(False)`` without its deprecation warning; on the double the count of
    declared synchronisations must not move either."""
    before = _device.synchronizations()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="cupyx.allow_synchronize will be removed")
        with xpx.allow_synchronize(False):
            yield
    assert _device.synchronizations() == before


def test_products_and_their_gradients_do_not_synchronise():
    A, x, y = _device_csr(), xp.asarray(X), xp.asarray(Y)
    loss = lambda d, x: tnp.sum(tnp.sin(ts.csr_array((d, S.indices, S.indptr), shape=S.shape) @ x))  # noqa: E731
    A @ x  # the first use copies the pattern's indices to the device: host-to-device, no synchronisation
    with no_sync():
        ax, ya = A @ x, y @ A
        gd, gx = tg.grad(loss, grad_position=(0, 1))(A.data, x)
        jitted = tg.jit(tg.grad(loss, grad_position=(0, 1)))(A.data, x)
        batched = tg.vmap(lambda v: A @ v)(xp.asarray(np.stack([X, 2 * X])))
    for got in (ax, ya, gd, gx, *jitted, batched):
        assert type(got) is DeviceArray
    assert_same(ax, S @ X, "A @ x")
    assert_same(ya, Y @ S, "y @ A")
    host = tg.grad(loss, grad_position=(0, 1))(S.data, X)
    assert_same((gd, gx), host, "grad of A @ x")
    assert_same(tuple(jitted), host, "jit of grad of A @ x")


def test_indices_live_on_the_device_once_per_pattern():
    A = _device_csr()
    A @ xp.asarray(X)
    row = A.pattern.on(xp, "row")
    assert type(row) is DeviceArray
    A @ xp.asarray(X)
    assert A.pattern.on(xp, "row") is row  # the same device array: no second copy
    assert A.pattern.on(np, "row") is A.pattern.row  # NumPy's are the host arrays themselves


@pytest.mark.parametrize("name", ["csr_matrix", "csc_matrix", "coo_matrix", "csr_array", "coo_array"])
def test_the_device_sparse_classes_are_arguments_and_results(name):
    M = getattr(xsparse, name)(S.asformat(name[:3]))
    seen = []

    def loss(B):
        seen.append(type(B))
        return tnp.sum(tnp.sin(B @ xp.asarray(X)))

    g = tg.grad(loss)(M)
    assert seen == [getattr(ts, f"{name[:3]}_array")]
    assert type(g) is type(M) and type(g.data) is DeviceArray
    host = tg.grad(lambda B: tnp.sum(tnp.sin(B @ X)))(getattr(sp, name)(S.asformat(name[:3])))
    assert_same(g.data, host.data, f"gradient with respect to a {name}")
    if name[:3] != "coo":
        assert np.array_equal(g.indices.get(), host.indices)
    ours = ts.asarray(M)  # a device sparse matrix converted: its data stays on the device
    assert type(ours.data) is DeviceArray
    assert type(ours.to_scipy()).__module__.startswith(f"{xp.__name__}x.scipy.sparse")


def test_a_non_canonical_device_matrix_is_refused_with_the_fix():
    M = xsparse.csr_matrix((xp.asarray(np.ones(2)), xp.asarray(np.array([1, 0])), xp.asarray(np.array([0, 2]))),
                           shape=(1, 2))
    with pytest.raises(ValueError, match=r"sum_duplicates\(\)"):
        tg.grad(lambda B: B.sum())(M)


def _poisson(n=6):
    return sp.diags([np.full(n, 4.0), np.full(n - 1, -1.0), np.full(n - 1, -1.0)], [0, 1, -1], format="csr")


def test_spsolve_and_splu_on_the_device_equal_the_host():
    from tapegrad.scipy.sparse import linalg as tsl
    T = _poisson()
    b = np.arange(1.0, 7.0)

    def loss(d, b):
        A = ts.csr_array((d, T.indices, T.indptr), shape=T.shape)
        return tnp.sum(tsl.spsolve(A, b) ** 2) + tnp.sum(tsl.splu(A).solve(b) * b)

    for route in ("eager", "vjp", "jvp", "jit"):
        check_route(route, loss, (T.data, b))


def test_krylov_solvers_on_the_device_equal_the_host():
    from tapegrad.scipy.sparse import linalg as tsl
    T = _poisson()
    b = np.arange(1.0, 7.0)
    for method in ("cg", "gmres", "minres"):
        def loss(d, b, method=method):
            return tnp.sum(getattr(tsl, method)(ts.csr_array((d, T.indices, T.indptr), shape=T.shape), b,
                                                rtol=1e-12)[0] ** 2)
        check_route("vjp", loss, (T.data, b))


def test_sparse_jacfwd_returns_the_device_csr_matrix():
    pattern = sp.eye_array(5, 6) + sp.eye_array(5, 6, k=1) != 0
    f = lambda v: v[1:] * tnp.sin(v[:-1])  # noqa: E731
    v = np.linspace(0.5, 1.5, 6)
    J = tg.sparse_jacfwd(f, pattern)(xp.asarray(v))
    assert type(J) is xsparse.csr_matrix and type(J.data) is DeviceArray
    np.testing.assert_allclose(J.get().toarray(), tg.sparse_jacfwd(f, pattern)(v).toarray(), rtol=1e-12)


# ---- the stand-in itself: SciPy's values, CuPy's signatures and refusals -----------------------------
@pytest.mark.skipif(xp.__name__ != "devicearray", reason="checks the double's stand-in, not CuPy")
def test_the_stand_in_matches_scipy_and_refuses_as_cupy():
    T = _poisson()
    M = xsparse.csr_matrix(T)
    b = np.arange(1.0, 7.0)
    db = xp.asarray(b)
    exact = spla.spsolve(T.tocsc(), b)
    np.testing.assert_allclose((M @ db).get(), T @ b)
    np.testing.assert_allclose(M.tocsc().toarray().get(), T.toarray())
    np.testing.assert_allclose(xlinalg.spsolve(M, db).get(), exact)
    lu = xlinalg.splu(M)
    for trans, matrix in (("N", T), ("T", T.T)):
        np.testing.assert_allclose(lu.solve(db, trans=trans).get(), spla.spsolve(matrix.tocsc(), b))
    for method in ("cg", "gmres", "bicgstab", "cgs"):
        x, info = getattr(xlinalg, method)(M, db, rtol=1e-12)
        assert info == 0 and type(x) is DeviceArray
        np.testing.assert_allclose(x.get(), exact, rtol=1e-9)
    x, info = xlinalg.minres(M, db, tol=1e-12)
    np.testing.assert_allclose(x.get(), exact, rtol=1e-9)
    w, V = xlinalg.eigsh(M, k=2, which="LA")
    np.testing.assert_allclose(w.get(), np.linalg.eigvalsh(T.toarray())[-2:], rtol=1e-9)
    # CuPy's refusals: host operands, SciPy's newer keyword, what cupyx lacks
    with pytest.raises(ValueError, match="must be 1-D cupy arrays"):
        xsparse.csr_matrix((T.data, T.indices, T.indptr), shape=T.shape)
    with pytest.raises(TypeError, match="b must be cupy.ndarray"):
        xlinalg.spsolve(M, b)
    with pytest.raises(TypeError, match="tol"):
        xlinalg.cg(M, db, tol=1e-8)
    with pytest.raises(ValueError, match="which must be"):
        xlinalg.eigsh(M, k=2, which="SM")
    assert not hasattr(xlinalg, "expm_multiply") and not hasattr(xlinalg, "MatrixRankWarning")
    # CuPy's synchronisations: constructing from arrays reads indptr's ends; splu copies A to the host
    with pytest.raises(xpx.DeviceSynchronized), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xpx.allow_synchronize(False):
            xsparse.csr_matrix((M.data, M.indices, M.indptr), shape=M.shape)
    with pytest.raises(xpx.DeviceSynchronized), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xpx.allow_synchronize(False):
            xlinalg.splu(M)


@pytest.mark.gpu
def test_the_stand_in_names_and_keywords_are_cupyx_s():
    """The double's sparse names exist in the installed cupyx, with the tolerance keyword it models."""
    import inspect
    cupyx_sparse = pytest.importorskip("cupyx.scipy.sparse")
    linalg = importlib.import_module("cupyx.scipy.sparse.linalg")
    assert [n for n in _device_sparse._SPARSE if not hasattr(cupyx_sparse, n)] == []
    assert [n for n in _device_sparse._LINALG if not hasattr(linalg, n)] == []
    assert not hasattr(linalg, "expm_multiply")
    for name in ("cg", "gmres", "bicgstab", "cgs"):
        keywords = inspect.signature(getattr(linalg, name)).parameters
        assert "rtol" in keywords and "tol" not in keywords, name
    assert "tol" in inspect.signature(linalg.minres).parameters
