"""tapegrad.scipy.sparse.linalg: values against SciPy; derivatives with respect to the stored values and
the right-hand side against the dense route (``tnp.linalg.solve(A.toarray(), b)``) and finite
differences, every order; vmap over right-hand sides and over data; jit; one factorisation per
gradient; the errors."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from tapegrad.scipy.sparse import linalg as tsl
from tapegrad.scipy.sparse.linalg import _factor
from tapegrad.testing import check_grads

EPS = np.finfo(np.float64).eps
RTOL = 1e7 * EPS  # 2e-9: rounding of these small, well-conditioned systems, by two routes
N = 7


def _matrix(n=N, seed=0, symmetric=False, fmt="csr"):
    """A diagonally dominant (so well-conditioned) sparse matrix, SciPy's and tapegrad's."""
    rng = np.random.default_rng(seed)
    S = sp.random_array((n, n), density=0.35, random_state=rng)
    if symmetric:
        S = S + S.T
    S = (S + sp.eye_array(n) * (n / 2.0)).asformat(fmt)
    return S, ts.asarray(S)


S0, A0 = _matrix()
RNG = np.random.default_rng(3)
B1, B2 = RNG.normal(size=N), RNG.normal(size=(N, 3))
W = RNG.normal(size=N)  # weights of the scalar losses


def _with(A, data):
    """``A``'s pattern holding ``data``."""
    return ts.csr_array((data, A.indices, A.indptr), shape=A.shape)


def _close(got, want, rtol=RTOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


def _loss_sparse(data, b):
    return tnp.sum(tnp.sin(tsl.spsolve(_with(A0, data), b)) * W)


def _loss_dense(data, b):
    return tnp.sum(tnp.sin(tnp.linalg.solve(_with(A0, data).toarray(), b)) * W)


# ---- spsolve: values -----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("b", [B1, B1[:, None], B2], ids=["vector", "column", "matrix"])
def test_spsolve_matches_scipy(fmt, b):
    S, A = _matrix(fmt=fmt)
    want = sla.spsolve(S.tocsc(), b)
    _close(tsl.spsolve(A, b), want)
    _close(tsl.spsolve(S, b), want)  # a SciPy array converts
    _close(tsl.spsolve(sp.csr_matrix(S), b), want)  # and a SciPy matrix


@pytest.mark.parametrize("permc_spec", ["NATURAL", "MMD_ATA", "MMD_AT_PLUS_A", "COLAMD"])
def test_spsolve_permc_spec(permc_spec):
    _close(tsl.spsolve(A0, B1, permc_spec=permc_spec), sla.spsolve(S0.tocsc(), B1, permc_spec=permc_spec))


def test_spsolve_integer_and_float32():
    S = sp.csr_array(np.array([[4, 1, 0], [1, 3, 0], [0, 0, 2]]))
    x = tsl.spsolve(S, np.array([1, 2, 3]))
    assert x.dtype == np.float64
    _close(x, np.linalg.solve(S.toarray(), [1.0, 2.0, 3.0]))
    x32 = tsl.spsolve(ts.asarray(S.astype(np.float32)), np.ones(3, np.float32))
    assert x32.dtype == np.float32
    np.testing.assert_allclose(x32, np.linalg.solve(S.toarray(), np.ones(3)), rtol=100 * np.finfo(np.float32).eps)


# ---- spsolve: derivatives ------------------------------------------------------------------------
def test_spsolve_grad_matches_the_dense_route():
    got = tg.grad(_loss_sparse, (0, 1))(A0.data, B1)
    want = tg.grad(_loss_dense, (0, 1))(A0.data, B1)
    for g, w in zip(got, want):
        _close(g, w)


def test_spsolve_grad_with_respect_to_a_sparse_argument_is_sparse():
    g = tg.grad(lambda A: tnp.sum(tsl.spsolve(A, B1) * W))(A0)
    assert isinstance(g, ts.csr_array) and g.pattern == A0.pattern
    _close(g.data, tg.grad(lambda d: tnp.sum(tnp.linalg.solve(_with(A0, d).toarray(), B1) * W))(A0.data))


def test_spsolve_jvp_matches_the_dense_route():
    t_data, t_b = RNG.normal(size=A0.nnz), RNG.normal(size=N)

    def solve(solver):
        return lambda d, b: solver(_with(A0, d), b)
    sparse = tg.jvp(solve(tsl.spsolve), (A0.data, B2[:, 0]), (t_data, t_b))
    dense = tg.jvp(solve(lambda A, b: tnp.linalg.solve(A.toarray(), b)), (A0.data, B2[:, 0]), (t_data, t_b))
    for g, w in zip(sparse, dense):
        _close(g, w)


def test_spsolve_matrix_rhs_derivatives():
    def loss(solver):
        return lambda d, b: tnp.sum(tnp.tanh(solver(_with(A0, d), b)))
    got = tg.grad(loss(tsl.spsolve), (0, 1))(A0.data, B2)
    want = tg.grad(loss(lambda A, b: tnp.linalg.solve(A.toarray(), b)), (0, 1))(A0.data, B2)
    for g, w in zip(got, want):
        _close(g, w)


def test_spsolve_check_grads_order_2_both_modes():
    check_grads(_loss_sparse, (A0.data, B1), order=2, modes=("fwd", "rev"))


def test_spsolve_third_derivative_by_two_routes_and_the_dense_route():
    """d^3/dt^3 of the loss along a line through (data, b): forward over forward over forward, reverse over
    reverse over reverse, and the dense route's."""
    d_data, d_b = RNG.normal(size=A0.nnz) / 4, RNG.normal(size=N)

    def along(loss):
        return lambda t: loss(A0.data + t * d_data, B1 + t * d_b)

    def fwd3(f):
        first = lambda t: tg.jvp(f, (t,), (1.0,))[1]  # noqa: E731
        second = lambda t: tg.jvp(first, (t,), (1.0,))[1]  # noqa: E731
        return tg.jvp(second, (0.0,), (1.0,))[1]
    rev3 = tg.grad(tg.grad(tg.grad(along(_loss_sparse))))(0.0)
    dense = tg.grad(tg.grad(tg.grad(along(_loss_dense))))(0.0)
    _close(fwd3(along(_loss_sparse)), dense, rtol=1e8 * EPS)
    _close(rev3, dense, rtol=1e8 * EPS)


# ---- spsolve: vmap and jit -----------------------------------------------------------------------
def test_spsolve_vmap_over_right_hand_sides_is_one_factorisation():
    bs = RNG.normal(size=(4, N))
    _factor.clear_cache()
    before = _factor.factorisations
    got = tg.vmap(lambda b: tsl.spsolve(A0, b))(bs)
    assert _factor.factorisations - before == 1
    _close(got, sla.spsolve(S0.tocsc(), bs.T).T)
    grads = tg.vmap(lambda b: tg.grad(_loss_sparse, 1)(A0.data, b))(bs)
    _close(grads, np.stack([tg.grad(_loss_dense, 1)(A0.data, b) for b in bs]))


def test_spsolve_vmap_over_data():
    datas = A0.data[None] * np.array([1.0, 1.5, 0.7])[:, None]
    got = tg.vmap(lambda d: tsl.spsolve(_with(A0, d), B1))(datas)
    _close(got, np.stack([sla.spsolve(_with(A0, d).to_scipy().tocsc(), B1) for d in datas]))
    grads = tg.vmap(tg.grad(_loss_sparse), (0, None))(datas, B1)
    _close(grads, np.stack([tg.grad(_loss_dense)(d, B1) for d in datas]))
    both = tg.vmap(tg.grad(_loss_sparse, (0, 1)))(datas, RNG.normal(size=(3, N)))
    assert both[0].shape == datas.shape and both[1].shape == (3, N)


def test_spsolve_under_jit():
    want = tg.grad(_loss_dense, (0, 1))(A0.data, B1)
    for route in (tg.jit(tg.grad(_loss_sparse, (0, 1))), tg.grad(tg.jit(_loss_sparse), (0, 1))):
        for g, w in zip(route(A0.data, B1), want):
            _close(g, w)
    _close(tg.jit(lambda d, b: tsl.spsolve(_with(A0, d), b))(A0.data, B1), sla.spsolve(S0.tocsc(), B1))


# ---- one factorisation per gradient --------------------------------------------------------------
def _count_splu(monkeypatch) -> list:
    calls = []
    real = sla.splu

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(sla, "splu", counting)
    _factor.clear_cache()
    return calls


def test_a_gradient_through_spsolve_factorises_once(monkeypatch):
    calls = _count_splu(monkeypatch)
    tg.grad(_loss_sparse, (0, 1))(A0.data, B1)
    assert len(calls) == 1
    calls.clear()
    tg.value_and_grad(_loss_sparse)(A0.data * 1.1, B1)  # new values: one more, reused by the adjoint
    assert len(calls) == 1


def test_a_jitted_gradient_factorises_once_per_call(monkeypatch):
    step = tg.jit(tg.grad(_loss_sparse))
    step(A0.data * 0.9, B1)  # compile
    calls = _count_splu(monkeypatch)
    step(A0.data, B1)
    assert len(calls) == 1


# ---- errors --------------------------------------------------------------------------------------
def test_spsolve_singular_warns_and_gives_nan_like_scipy_when_not_differentiated():
    S = sp.csr_array(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.warns(sla.MatrixRankWarning):
        x = tsl.spsolve(S, np.ones(2))
    assert np.isnan(x).all()


def test_spsolve_singular_is_an_error_when_differentiated():
    A = ts.asarray(sp.csr_array(np.array([[1.0, 2.0], [2.0, 4.0]])))
    with pytest.raises(tsl.SingularMatrixError, match=r"spsolve: the matrix is singular.*derivative is being"):
        tg.grad(lambda d: tnp.sum(tsl.spsolve(_with(A, d), np.ones(2))))(A.data)
    with pytest.raises(np.linalg.LinAlgError):  # a LinAlgError, and a RuntimeError as SciPy's splu raises
        tg.jvp(lambda b: tsl.spsolve(A, b), (np.ones(2),), (np.ones(2),))


@pytest.mark.parametrize("A, b, error, match", [
    (np.eye(3), np.ones(3), TypeError, "A must be a sparse array.*csr_array"),
    (sp.random_array((3, 4), density=0.5, random_state=0), np.ones(3), ValueError, "A must be square"),
    (sp.eye_array(3, dtype=complex), np.ones(3), TypeError, "complex ones are not"),
    (sp.eye_array(3), np.ones(4), ValueError, r"b has shape \(4,\).*n = 3"),
    (sp.eye_array(3), np.ones((3, 2, 1)), ValueError, "b has shape"),
    (sp.eye_array(3), sp.eye_array(3), TypeError, "sparse right-hand side"),
])
def test_spsolve_errors_name_the_argument(A, b, error, match):
    with pytest.raises(error, match="spsolve: .*" + match):
        tsl.spsolve(A, b)


# ---- splu and factorized -------------------------------------------------------------------------
def test_splu_matches_scipy_and_shows_its_factors():
    lu, ref = tsl.splu(A0), sla.splu(S0.tocsc())
    for trans in ("N", "T", "H"):
        _close(lu.solve(B2, trans=trans), ref.solve(B2, trans=trans))
        _close(lu.solve(B1, trans=trans), ref.solve(B1, trans=trans))
    _close(lu.L.toarray(), ref.L.toarray())
    _close(lu.U.toarray(), ref.U.toarray())
    np.testing.assert_array_equal(lu.perm_r, ref.perm_r)
    np.testing.assert_array_equal(lu.perm_c, ref.perm_c)
    assert lu.nnz == ref.nnz and lu.shape == (N, N)
    ref_natural = sla.splu(S0.tocsc(), permc_spec="NATURAL", options=dict(SymmetricMode=True))
    natural = tsl.splu(S0, permc_spec="NATURAL", options=dict(SymmetricMode=True))
    np.testing.assert_array_equal(natural.perm_c, ref_natural.perm_c)


def test_splu_solves_reuse_one_factorisation_in_values_and_gradients(monkeypatch):
    calls = _count_splu(monkeypatch)
    lu = tsl.splu(A0)
    for _ in range(3):
        lu.solve(B1)
    tg.grad(lambda b: tnp.sum(lu.solve(b, trans="T") * W))(B1)
    assert len(calls) == 1


@pytest.mark.parametrize("trans", ["N", "T"])
def test_splu_solve_derivatives_match_the_dense_route(trans):
    def loss(solver):
        return lambda d, b: tnp.sum(tnp.sin(solver(_with(A0, d), b)) * W)

    def dense(A, b):
        M = A.toarray()
        return tnp.linalg.solve(M if trans == "N" else M.T, b)
    sparse = loss(lambda A, b: tsl.splu(A).solve(b, trans=trans))
    for g, w in zip(tg.grad(sparse, (0, 1))(A0.data, B1), tg.grad(loss(dense), (0, 1))(A0.data, B1)):
        _close(g, w)
    check_grads(sparse, (A0.data, B1), order=2, modes=("fwd", "rev"))


def test_splu_of_a_traced_matrix_has_no_factors_to_show():
    def f(d):
        lu = tsl.splu(_with(A0, d))
        with pytest.raises(TypeError, match=r"SuperLU.L: the factors of a traced matrix.*stop_gradient"):
            lu.L  # noqa: B018
        return tnp.sum(lu.solve(B1))
    tg.grad(f)(A0.data)


def test_factorized_solves_and_differentiates():
    solve = tsl.factorized(S0)
    _close(solve(B1), sla.factorized(S0.tocsc())(B1))
    g = tg.grad(lambda d: tnp.sum(tsl.factorized(_with(A0, d))(B1) * W))(A0.data)
    _close(g, tg.grad(lambda d: tnp.sum(tnp.linalg.solve(_with(A0, d).toarray(), B1) * W))(A0.data))


def test_splu_errors():
    with pytest.raises(tsl.SingularMatrixError) as info:
        tsl.splu(sp.csc_array(np.array([[1.0, 2.0], [2.0, 4.0]])))
    assert isinstance(info.value, RuntimeError)  # what SciPy's splu raises
    with pytest.raises(ValueError, match="SuperLU.solve: trans must be"):
        tsl.splu(A0).solve(B1, trans="X")
    with pytest.raises(ValueError, match=r"SuperLU.solve: rhs has shape \(3,\)"):
        tsl.splu(A0).solve(np.ones(3))
    with pytest.raises(TypeError, match="splu: options must be a dict"):
        tsl.splu(A0, options=[1])


# ---- cg, gmres, bicgstab, minres -----------------------------------------------------------------
SSYM, ASYM = _matrix(symmetric=True, seed=5)
KRYLOV = [("cg", SSYM, ASYM), ("minres", SSYM, ASYM), ("gmres", S0, A0), ("bicgstab", S0, A0)]
TIGHT = 1e-14  # the solves' rtol where derivatives are compared at RTOL


def _solution(method, A, b, **kwargs):
    return getattr(tsl, method)(A, b, rtol=TIGHT, **kwargs)[0]


@pytest.mark.parametrize("method, S, A", KRYLOV, ids=[k[0] for k in KRYLOV])
def test_krylov_matches_scipy(method, S, A):
    x, info = getattr(tsl, method)(A, B1, rtol=1e-10)
    x_ref, info_ref = getattr(sla, method)(S, B1, rtol=1e-10)
    _close(x, x_ref)
    assert int(info) == info_ref == 0 and info.dtype == np.int64
    _close(getattr(tsl, method)(S, B1[:, None], x0=np.ones(N), rtol=1e-10)[0],
           getattr(sla, method)(S, B1[:, None], x0=np.ones(N), rtol=1e-10)[0])


@pytest.mark.parametrize("method, S, A", KRYLOV, ids=[k[0] for k in KRYLOV])
def test_krylov_derivatives_match_the_dense_route(method, S, A):
    def loss(solver):
        return lambda d, b: tnp.sum(tnp.sin(solver(_with(A, d), b)) * W)
    sparse = loss(lambda M, b: _solution(method, M, b))
    dense = loss(lambda M, b: tnp.linalg.solve(M.toarray(), b))
    for g, w in zip(tg.grad(sparse, (0, 1))(A.data, B1), tg.grad(dense, (0, 1))(A.data, B1)):
        _close(g, w)
    tangents = (RNG.normal(size=A.nnz), RNG.normal(size=N))
    _close(tg.jvp(sparse, (A.data, B1), tangents)[1], tg.jvp(dense, (A.data, B1), tangents)[1])
    check_grads(sparse, (A.data, B1), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("method, S, A", KRYLOV, ids=[k[0] for k in KRYLOV])
def test_krylov_under_vmap_and_jit(method, S, A):
    bs = RNG.normal(size=(3, N))
    got, infos = tg.vmap(lambda b: getattr(tsl, method)(A, b, rtol=TIGHT))(bs)
    _close(got, np.linalg.solve(S.toarray(), bs.T).T)
    assert infos.shape == (3,) and not infos.any()
    datas = A.data[None] * np.array([1.0, 1.2])[:, None]
    _close(tg.vmap(lambda d: _solution(method, _with(A, d), B1))(datas),
           np.stack([np.linalg.solve(_with(A, d).toarray(), B1) for d in datas]))
    loss = lambda d: tnp.sum(_solution(method, _with(A, d), B1) * W)  # noqa: E731
    _close(tg.jit(tg.grad(loss))(A.data), tg.grad(lambda d: tnp.sum(tnp.linalg.solve(_with(A, d).toarray(), B1) * W))(
        A.data))


def test_minres_shift_is_part_of_the_system():
    shifted = lambda d: _with(ASYM, d).toarray() - 0.5 * np.eye(N)  # noqa: E731
    x = tsl.minres(ASYM, B1, shift=0.5, rtol=TIGHT)[0]
    _close(x, np.linalg.solve(shifted(ASYM.data), B1))
    g = tg.grad(lambda d: tnp.sum(tsl.minres(_with(ASYM, d), B1, shift=0.5, rtol=TIGHT)[0] * W))(ASYM.data)
    _close(g, tg.grad(lambda d: tnp.sum(tnp.linalg.solve(shifted(d), B1) * W))(ASYM.data))


@pytest.mark.parametrize("method, S, A", [KRYLOV[2], KRYLOV[3], KRYLOV[0]], ids=["gmres", "bicgstab", "cg"])
def test_krylov_with_a_preconditioner(method, S, A):
    jacobi = sp.diags_array(1.0 / S.diagonal()).tocsr()
    _close(getattr(tsl, method)(A, B1, M=jacobi, rtol=1e-10)[0], getattr(sla, method)(S, B1, M=jacobi, rtol=1e-10)[0])
    loss = lambda d: tnp.sum(_solution(method, _with(A, d), B1, M=ts.asarray(jacobi)) * W)  # noqa: E731
    _close(tg.grad(loss)(A.data), tg.grad(lambda d: tnp.sum(tnp.linalg.solve(_with(A, d).toarray(), B1) * W))(A.data))


def test_krylov_not_converged_returns_info_or_raises_when_differentiated():
    x, info = tsl.gmres(A0, B1, restart=1, maxiter=1)
    assert int(info) == sla.gmres(S0, B1, restart=1, maxiter=1)[1] > 0
    with pytest.raises(tsl.ConvergenceError, match=r"gmres: the solve with gmres did not reach.*Raise maxiter"):
        tg.grad(lambda b: tnp.sum(tsl.gmres(A0, b, restart=1, maxiter=1)[0]))(B1)
    with pytest.raises(RuntimeError, match="cg: the solve with cg did not reach"):
        tg.jvp(lambda d: tsl.cg(_with(ASYM, d), B1, maxiter=1)[0], (ASYM.data,), (ASYM.data,))


def test_krylov_errors():
    with pytest.raises(TypeError, match="cg: M is traced; a preconditioner gets no derivative"):
        tg.grad(lambda d: tnp.sum(tsl.cg(ASYM, B1, M=_with(ASYM, d))[0]))(ASYM.data)
    with pytest.raises(ValueError, match=r"gmres: b has shape \(7, 2\).*\(n,\) or \(n, 1\)"):
        tsl.gmres(A0, B2[:, :2])
    with pytest.raises(ValueError, match=r"cg: x0 has shape \(3,\)"):
        tsl.cg(ASYM, B1, x0=np.ones(3))


# ---- eigsh ---------------------------------------------------------------------------------------
def _symmetric_with_gaps(n=12, seed=0):
    """A symmetric sparse matrix whose top eigenvalues are simple and apart (so their vectors have
    derivatives), SciPy's and tapegrad's."""
    rng = np.random.default_rng(seed)
    S = sp.random_array((n, n), density=0.3, random_state=rng)
    S = (S + S.T + sp.diags_array(np.arange(n, dtype=float) * 1.5)).tocsr()
    return S, ts.asarray(S)


SE, AE = _symmetric_with_gaps()
V0 = np.ones(SE.shape[0])  # ARPACK's start: deterministic runs, as finite differences need
C = np.random.default_rng(7).normal(size=(SE.shape[0], 3))


def _eig_loss(eigen):
    """A loss of the top three eigenpairs that does not depend on the eigenvectors' signs."""
    def loss(d):
        w, V = eigen(_with(AE, d))
        return tnp.sum(w * np.array([1.0, 2.0, 3.0])) + tnp.sum(tnp.sum(V * C, axis=0) ** 2)
    return loss


def _dense_top3(A):
    M = A.toarray()
    w, V = tnp.linalg.eigh((M + M.T) / 2)
    return w[-3:], V[:, -3:]


EIG_SPARSE = _eig_loss(lambda A: tsl.eigsh(A, k=3, v0=V0))
EIG_DENSE = _eig_loss(_dense_top3)


def test_eigsh_matches_scipy():
    w, V = tsl.eigsh(AE, k=3, v0=V0)
    w_ref, V_ref = sla.eigsh(SE, k=3, v0=V0)
    _close(w, w_ref)
    _close(np.abs(V), np.abs(V_ref))
    _close(tsl.eigsh(SE, k=2, which="SA", v0=V0, return_eigenvectors=False),  # ascending, where SciPy's are not
           np.sort(sla.eigsh(SE, k=2, which="SA", v0=V0, return_eigenvectors=False)))
    _close(tsl.eigsh(SE, k=2, sigma=1.0, v0=V0)[0], sla.eigsh(SE, k=2, sigma=1.0, v0=V0)[0])


def test_eigsh_derivatives_match_the_dense_route():
    rtol = 1e4 * RTOL  # the eigenvectors' derivatives divide by gaps of order 1 among values of order 10
    _close(tg.grad(EIG_SPARSE)(AE.data), tg.grad(EIG_DENSE)(AE.data), rtol=rtol)
    t = np.random.default_rng(8).normal(size=AE.nnz)
    _close(tg.jvp(EIG_SPARSE, (AE.data,), (t,))[1], tg.jvp(EIG_DENSE, (AE.data,), (t,))[1], rtol=rtol)
    values_only = lambda d: tnp.sum(tsl.eigsh(_with(AE, d), k=3, v0=V0, return_eigenvectors=False) ** 2)  # noqa
    _close(tg.grad(values_only)(AE.data), tg.grad(lambda d: tnp.sum(_dense_top3(_with(AE, d))[0] ** 2))(AE.data))


def test_eigsh_check_grads_order_2_both_modes():
    check_grads(EIG_SPARSE, (AE.data,), order=2, modes=("fwd", "rev"))


def test_eigsh_gradient_is_that_of_the_symmetric_part():
    """One stored value of a pair (i, j), (j, i) moves both: the gradient is v_i v_j in either half."""
    g = tg.grad(lambda d: tsl.eigsh(_with(AE, d), k=1, v0=V0, return_eigenvectors=False)[0])(AE.data)
    v = sla.eigsh(SE, k=1, v0=V0)[1][:, 0]
    row, col = AE.pattern.row, AE.pattern.col
    _close(g, v[row] * v[col])


def test_eigsh_under_vmap_and_jit():
    datas = AE.data[None] * np.array([1.0, 1.1])[:, None]
    want = np.stack([tg.grad(EIG_DENSE)(d) for d in datas])
    _close(tg.vmap(tg.grad(EIG_SPARSE))(datas), want, rtol=1e4 * RTOL)
    _close(tg.jit(tg.grad(EIG_SPARSE))(AE.data), want[0], rtol=1e4 * RTOL)


def test_eigsh_repeated_eigenvalue_has_no_eigenvector_derivative():
    S = sp.diags_array([1.0, 2.0, 2.0, 0.5, 0.1]).tocsr()  # 2 is double: its eigenvectors are any basis
    A = ts.asarray(S)
    with pytest.raises(tsl.SingularMatrixError, match="eigsh: eigenvalues 0 and 1 are equal to rounding"):
        tg.grad(lambda d: tnp.sum(tsl.eigsh(_with(A, d), k=2, v0=np.ones(5))[1][0] ** 2))(A.data)
    w = tsl.eigsh(A, k=2, v0=np.ones(5))[0]  # values without a derivative are fine
    _close(w, [2.0, 2.0])


def test_eigsh_errors():
    with pytest.raises(NotImplementedError, match="eigsh: M .* not supported"):
        tsl.eigsh(SE, k=2, M=sp.eye_array(SE.shape[0]))
    with pytest.raises(ValueError, match="eigsh: k must satisfy 1 <= k < n = 12"):
        tsl.eigsh(SE, k=12)


# ---- expm_multiply -------------------------------------------------------------------------------
def _generator(n=8, seed=4):
    rng = np.random.default_rng(seed)
    S = (sp.random_array((n, n), density=0.4, random_state=rng) * 2 - sp.eye_array(n)).tocsr()
    return S, ts.asarray(S)


SX, AX = _generator()
WX = np.random.default_rng(9).normal(size=(SX.shape[0], 2))


def _expm_loss(expm):
    return lambda d, b: tnp.sum(tnp.sin(expm(_with(AX, d), b)) * WX[:, : b.shape[1]] if b.ndim == 2
                                else tnp.sin(expm(_with(AX, d), b)) * WX[:, 0])


EXPM_SPARSE = _expm_loss(tsl.expm_multiply)
EXPM_DENSE = _expm_loss(lambda A, b: tg.scipy.linalg.expm(A.toarray()) @ b)
BX1, BX2 = RNG.normal(size=SX.shape[0]), RNG.normal(size=(SX.shape[0], 2))


def test_expm_multiply_matches_scipy():
    _close(tsl.expm_multiply(AX, BX1), sla.expm_multiply(SX, BX1))
    _close(tsl.expm_multiply(SX, BX2), sla.expm_multiply(SX, BX2))
    _close(tsl.expm_multiply(SX, BX1, start=0.0, stop=2.0, num=5, endpoint=False),
           sla.expm_multiply(SX, BX1, start=0.0, stop=2.0, num=5, endpoint=False))


@pytest.mark.parametrize("b", [BX1, BX2], ids=["vector", "matrix"])
def test_expm_multiply_derivatives_match_the_dense_route(b):
    rtol = 1e4 * RTOL  # SciPy's algorithm stops at its own tolerance of unit roundoff times its terms
    for g, w in zip(tg.grad(EXPM_SPARSE, (0, 1))(AX.data, b), tg.grad(EXPM_DENSE, (0, 1))(AX.data, b)):
        _close(g, w, rtol=rtol)
    tangents = (RNG.normal(size=AX.nnz), RNG.normal(size=b.shape))
    _close(tg.jvp(EXPM_SPARSE, (AX.data, b), tangents)[1], tg.jvp(EXPM_DENSE, (AX.data, b), tangents)[1], rtol=rtol)


def test_expm_multiply_check_grads_order_2_both_modes():
    check_grads(EXPM_SPARSE, (AX.data, BX1), order=2, modes=("fwd", "rev"))


def test_expm_multiply_reverse_quadrature_follows_the_norm():
    """A matrix of 1-norm 60 needs six panels: the gradient still agrees with the dense route (whose own
    rounding grows with the norm)."""
    big = 60.0 / np.abs(SX.toarray()).sum(axis=0).max()
    loss = lambda d: tnp.sum(tsl.expm_multiply(_with(AX, d * big), BX1) * WX[:, 0])  # noqa: E731
    dense = lambda d: tnp.sum(tg.scipy.linalg.expm(_with(AX, d * big).toarray()) @ BX1 * WX[:, 0])  # noqa: E731
    _close(tg.grad(loss)(AX.data), tg.grad(dense)(AX.data), rtol=1e4 * RTOL)


def test_expm_multiply_under_vmap_and_jit():
    bs = RNG.normal(size=(3, SX.shape[0]))
    _close(tg.vmap(lambda b: tsl.expm_multiply(AX, b))(bs), sla.expm_multiply(SX, bs.T).T)
    want = tg.grad(EXPM_DENSE)(AX.data, BX1)
    _close(tg.jit(tg.grad(EXPM_SPARSE))(AX.data, BX1), want, rtol=1e4 * RTOL)
    datas = AX.data[None] * np.array([1.0, 0.5])[:, None]
    _close(tg.vmap(tg.grad(EXPM_SPARSE), (0, None))(datas, BX1),
           np.stack([tg.grad(EXPM_DENSE)(d, BX1) for d in datas]), rtol=1e4 * RTOL)


def test_the_guide_runs():
    """docs/sparse_linalg.md's code blocks, run in order: their asserts are the page's claims."""
    import pathlib
    import re
    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "sparse_linalg.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 4
    exec(compile("\n".join(blocks), "sparse_linalg.md", "exec"), {"__name__": "sparse_linalg_guide"})


def test_an_unconverged_adjoint_solve_is_an_error():
    """The forward solve starts at the solution (converged at once); the adjoint's, from zeros, cannot
    converge in one step: the gradient refuses rather than use it."""
    exact = np.linalg.solve(S0.toarray(), B1)
    x, info = tsl.gmres(A0, B1, x0=exact, restart=1, maxiter=1)
    assert int(info) == 0
    with pytest.raises(tsl.ConvergenceError, match=r"gmres: the adjoint's solve \(A\^T y = cotangent\) with gmres"):
        tg.grad(lambda b: tnp.sum(tsl.gmres(A0, b, x0=exact, restart=1, maxiter=1)[0] * W))(B1)
