"""tapegrad.scipy.optimize with sparse derivatives: least_squares(jac_sparsity=...) hands SciPy a sparse
Jacobian by colouring (so SciPy solves by lsmr), minimize(method="trust-constr", hess_sparsity=...) a
sparse Hessian by star colouring. Each solution equals SciPy's own (its sparse finite differences, its
finite-difference Hessian) in as many or fewer evaluations, and stays differentiable with respect to
args by the implicit function theorem, equal to the dense route's derivative."""
import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
optimize = pytest.importorskip("scipy.optimize")

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy import optimize as tgo  # noqa: E402
from tapegrad.scipy._sparse_optimize import sparse_hessian_for_scipy  # noqa: E402

N = 40
EPS = np.finfo(np.float64).eps


def broyden(x, a):
    """SciPy's least_squares example (Broyden's tridiagonal system) with a parameter: residual i reads
    x[i - 1], x[i], x[i + 1]."""
    left = tnp.concatenate([tnp.zeros(1), x[:-1]])
    right = tnp.concatenate([x[1:], tnp.zeros(1)])
    return (3 - a * x) * x - left - 2 * right + 1


def broyden_numpy(x, a):
    left = np.concatenate([[0.0], x[:-1]])
    right = np.concatenate([x[1:], [0.0]])
    return (3 - a * x) * x - left - 2 * right + 1


def tridiagonal(n: int):
    return sp.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)], offsets=[-1, 0, 1]).tocsr()


X0 = -np.ones(N)


def test_least_squares_with_jac_sparsity_matches_scipys_sparse_finite_differences():
    a = 2.0
    ours = tgo.least_squares(broyden, X0, jac_sparsity=tridiagonal(N), args=(a,), xtol=1e-12, ftol=1e-12,
                             gtol=1e-12)
    theirs = optimize.least_squares(broyden_numpy, X0, jac_sparsity=tridiagonal(N), args=(a,), xtol=1e-12,
                                    ftol=1e-12, gtol=1e-12)
    assert ours.status > 0 and theirs.status > 0
    assert sp.issparse(ours.jac) and sp.issparse(theirs.jac)  # SciPy kept the sparse Jacobian: lsmr
    np.testing.assert_allclose(ours.x, theirs.x, rtol=1e-7, atol=1e-9)
    dense = np.asarray(tg.jacfwd(broyden)(ours.x, a))
    np.testing.assert_allclose(ours.jac.toarray(), dense, rtol=1e-13, atol=0)  # the exact Jacobian at x*
    # an exact Jacobian takes no more iterations than finite differences (nfev counts SciPy's own calls)
    assert ours.njev <= ours.nfev <= theirs.nfev + 1


def test_least_squares_accepts_a_dense_pattern_of_zeros_and_ones():
    pattern = tridiagonal(N).toarray()  # SciPy's other spelling: an array whose non-zeros are the pattern
    res = tgo.least_squares(broyden, X0, jac_sparsity=pattern, args=(2.0,))
    np.testing.assert_allclose(np.asarray(broyden(res.x, 2.0)), 0, atol=1e-6)
    assert sp.issparse(res.jac)


def test_the_solution_of_a_sparse_fit_is_differentiable():
    """d(sum x*)/da through jac_sparsity equals the dense route's and central differences of SciPy's solves."""
    def total(a, pattern):
        kwargs = {"xtol": 1e-14, "ftol": 1e-14, "gtol": 1e-14}
        return tnp.sum(tgo.least_squares(broyden, X0, jac_sparsity=pattern, args=(a,), **kwargs).x)
    a = 2.0
    sparse_grad = tg.grad(total)(a, tridiagonal(N))
    dense_grad = tg.grad(total)(a, None)
    np.testing.assert_allclose(sparse_grad, dense_grad, rtol=1e-9)
    h = 1e-5
    solve = lambda a: optimize.least_squares(broyden_numpy, X0, args=(a,), xtol=1e-14, ftol=1e-14, gtol=1e-14).x
    central = (solve(a + h).sum() - solve(a - h).sum()) / (2 * h)
    np.testing.assert_allclose(sparse_grad, central, rtol=1e-6)


def test_least_squares_refuses_lm_and_a_wrong_pattern():
    with pytest.raises(ValueError, match="method='lm' does not support jac_sparsity"):
        tgo.least_squares(broyden, X0, jac_sparsity=tridiagonal(N), args=(2.0,), method="lm")
    with pytest.raises(ValueError, match=r"least_squares\(jac_sparsity=...\): sparsity has shape \(39, 39\)"):
        tgo.least_squares(broyden, X0, jac_sparsity=tridiagonal(N - 1), args=(2.0,))
    # a dense first row and the diagonal: N colours, one per column, so every missed off-diagonal shows
    missing = np.eye(N, dtype=bool)
    missing[0] = True
    with pytest.raises(ValueError, match="does not list"):
        tgo.least_squares(broyden, X0, jac_sparsity=missing, args=(2.0,))


def chained_rosenbrock(x, c):
    """sum c (x[i+1] - x[i]^2)^2 + (1 - x[i])^2: a tridiagonal Hessian."""
    return tnp.sum(c * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_trust_constr_with_hess_sparsity_matches_scipys_finite_difference_hessian():
    x0 = np.linspace(-1.0, 0.5, 20)
    c = 10.0
    ours = tgo.minimize(chained_rosenbrock, x0, args=(c,), method="trust-constr", hess_sparsity=tridiagonal(20),
                        options={"gtol": 1e-10, "xtol": 1e-12})
    grad = tg.jit(tg.grad(chained_rosenbrock))
    theirs = optimize.minimize(lambda x: float(chained_rosenbrock(x, c)), x0, method="trust-constr",
                               jac=lambda x: np.asarray(grad(x, c)), hess="2-point",
                               options={"gtol": 1e-10, "xtol": 1e-12})
    assert ours.success and theirs.success
    np.testing.assert_allclose(ours.x, theirs.x, rtol=1e-7)
    np.testing.assert_allclose(ours.x, np.ones(20), rtol=1e-7)
    assert ours.nhev >= 1 and ours.nit <= theirs.nit + 2  # the exact Hessian takes no more steps


def test_the_hessian_given_to_scipy_is_sparse_and_exact():
    x = np.linspace(-1.0, 0.5, 20)
    hess = sparse_hessian_for_scipy(chained_rosenbrock, tridiagonal(20), (20,), (10.0,), "test")(x)
    assert isinstance(hess, sp.csr_array) and hess.nnz == tridiagonal(20).nnz
    dense = np.asarray(tg.hessian(chained_rosenbrock)(x, 10.0))
    np.testing.assert_allclose(hess.toarray(), dense, rtol=1e-13, atol=4 * EPS * np.abs(dense).max())


def tilted_rosenbrock(x, c):
    """The chained Rosenbrock function tilted by c along every x: its minimum moves with c."""
    return chained_rosenbrock(x, c) + 0.1 * c * tnp.sum(x)


def test_the_minimum_with_hess_sparsity_is_differentiable():
    """d(sum x*^3)/dc with a tridiagonal hess_sparsity equals the dense pattern's (every entry: the dense
    Hessian), the matrix-free route's (no hess_sparsity) and central differences of SciPy's solves."""
    options = {"gtol": 1e-12, "xtol": 1e-14}

    def cubes(c, sparsity):
        kwargs = {} if sparsity is None else {"hess_sparsity": sparsity}
        res = tgo.minimize(tilted_rosenbrock, np.full(12, 0.5), args=(c,), method="trust-constr", options=options,
                           **kwargs)
        return tnp.sum(res.x ** 3)
    c = 2.0
    sparse_grad = tg.grad(cubes)(c, tridiagonal(12))
    np.testing.assert_allclose(sparse_grad, tg.grad(cubes)(c, np.ones((12, 12), bool)), rtol=1e-9)
    np.testing.assert_allclose(sparse_grad, tg.grad(cubes)(c, None), rtol=1e-9)
    # trust-constr stops with a gradient near 1e-9, too coarse for a difference quotient: the reference
    # minima come from SciPy's trust-exact (Newton steps on the dense Hessian) to the last digits
    grad, hess = tg.jit(tg.grad(tilted_rosenbrock)), tg.jit(tg.hessian(tilted_rosenbrock))

    def reference(c):
        x = optimize.minimize(lambda x: float(tilted_rosenbrock(x, c)), np.full(12, 0.5), method="trust-exact",
                              jac=lambda x: np.asarray(grad(x, c)), hess=lambda x: np.asarray(hess(x, c)),
                              options={"gtol": 1e-14}).x
        return np.sum(x ** 3)
    h = 1e-4
    np.testing.assert_allclose(sparse_grad, (reference(c + h) - reference(c - h)) / (2 * h), rtol=1e-6)


def test_hess_sparsity_needs_trust_constr_alone():
    with pytest.raises(ValueError, match="hess_sparsity is for method='trust-constr'"):
        tgo.minimize(chained_rosenbrock, np.zeros(4), args=(1.0,), method="BFGS", hess_sparsity=tridiagonal(4))
    with pytest.raises(ValueError, match="hess and hessp must be None"):
        tgo.minimize(chained_rosenbrock, np.zeros(4), args=(1.0,), method="trust-constr",
                     hess_sparsity=tridiagonal(4), hess=lambda x, c: np.eye(4))
    with pytest.raises(ValueError, match="square and symmetric"):
        tgo.minimize(chained_rosenbrock, np.zeros(4), args=(1.0,), method="trust-constr",
                     hess_sparsity=sp.eye_array(4, k=1, format="csr") + sp.eye_array(4, format="csr"))


def test_a_function_jit_cannot_stage_runs_eagerly():
    """Python control flow on a value: jit refuses it (ConcretizationError), the eager passes take it."""
    def branchy(x):
        return x * x - 2 if x[0] < 100 else x
    res = tgo.least_squares(branchy, np.ones(3), jac_sparsity=sp.eye_array(3, format="csr"))
    np.testing.assert_allclose(res.x, np.sqrt(2.0), rtol=1e-8)
