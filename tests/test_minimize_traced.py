"""The minimiser that runs inside ``jit`` and ``vmap`` (``tapegrad.scipy._minimize_traced``): its minima
against SciPy's, its iteration counts against JAX's, ``jit`` and ``vmap`` against eager calls, the
implicit derivative of its solution against finite differences of re-solving and the analytic one, and
the Lotka-Volterra fit of the benchmarks batched over 16 data sets."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from scipy import optimize

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.scipy._minimize_traced import MESSAGES, minimize_traced
from tapegrad.testing import check_grads

METHODS = ("BFGS", "L-BFGS-B")
X_ROSEN = np.array([-1.2, 1.0, -0.5, 0.8])
_RNG = np.random.default_rng(0)
_M = _RNG.standard_normal((6, 6))
A = _M @ _M.T + np.eye(6)  # symmetric positive definite
B = _RNG.standard_normal(6)


def rosen(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def quadratic(x, a, b):
    return 0.5 * x @ (a @ x) - b @ x


def quartic(x, b):
    """Strictly convex, not quadratic: the Hessian depends on x, so the implicit derivative does too."""
    return quadratic(x, A, b) + 0.1 * tnp.sum(x ** 4)


def scipy_min(fun, x0, args, method):
    value_and_grad = tg.value_and_grad(fun)

    def host(x):
        value, gradient = value_and_grad(x, *args)
        return float(value), np.asarray(gradient)
    return optimize.minimize(host, x0, jac=True, method=method, options={"gtol": 1e-8})


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", ["rosen", "quadratic"])
def test_reaches_scipys_minimum(method, problem):
    fun, x0, args = (rosen, X_ROSEN, ()) if problem == "rosen" else (quadratic, np.zeros(6), (A, B))
    options = {"gtol": 1e-8} if method == "BFGS" else {"gtol": 1e-8, "ftol": 0.0}
    res = minimize_traced(fun, x0, args, method=method, options=options)
    ref = scipy_min(fun, x0, args, method)
    assert bool(res.success) and int(res.status) == 0 and res.message == MESSAGES[0]
    assert_close(res.x, ref.x, atol=1e-6, rtol=0)
    assert_close(res.fun, ref.fun, atol=1e-10, rtol=0)
    assert_close(res.jac, tg.grad(fun)(res.x, *args), rtol=1e-12, atol=1e-14)
    assert np.max(np.abs(res.jac)) <= 1e-8
    assert int(res.nfev) == int(res.njev) >= int(res.nit) > 0
    assert 0.5 * ref.nit <= int(res.nit) <= 2 * ref.nit  # a quasi-Newton method's count, like SciPy's
    if method == "BFGS":  # its inverse-Hessian estimate approaches the true inverse Hessian
        hess = tg.hessian(fun)(res.x, *args)
        assert np.linalg.norm(res.hess_inv @ hess - np.eye(len(x0))) < 0.1
    else:
        assert res.hess_inv is None


@pytest.mark.peer("jax")
@pytest.mark.parametrize("method", METHODS)
def test_iterations_match_jax(method):
    """The same line-search conditions and updates as JAX: the same iterations and evaluations (JAX's
    L-BFGS is its experimental one, which fails on Rosenbrock, so that compares on the quadratic)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.optimize import minimize as jax_minimize
    jax.config.update("jax_enable_x64", True)

    def jax_rosen(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    problems = [(quadratic, lambda x: 0.5 * x @ (A @ x) - B @ x, np.zeros(6), (A, B))]
    if method == "BFGS":
        problems.append((rosen, jax_rosen, X_ROSEN, ()))
    jax_method = "BFGS" if method == "BFGS" else "l-bfgs-experimental-do-not-rely-on-this"
    for fun, jax_fun, x0, args in problems:
        ours = minimize_traced(fun, x0, args, method=method, options={"gtol": 1e-8})
        theirs = jax_minimize(jax_fun, jnp.asarray(x0), method=jax_method, options={"gtol": 1e-8})
        assert (int(ours.nit), int(ours.nfev)) == (int(theirs.nit), int(theirs.nfev))
        assert_close(ours.x, np.asarray(theirs.x), atol=1e-7, rtol=0)


@pytest.mark.parametrize("method", METHODS)
def test_jit_and_vmap_match_eager(method):
    starts = X_ROSEN + 0.2 * np.random.default_rng(1).standard_normal((16, 4))

    def solve(x0):
        return minimize_traced(rosen, x0, method=method)
    jitted = tg.jit(solve)(starts[0])
    eager = solve(starts[0])
    # the compiled executor rounds differently (its own summation order): the iterates agree to rounding,
    # and the last iteration may differ by one where rounding decides a line search
    assert_close(jitted.x, eager.x, atol=1e-9, rtol=0)
    assert_close(jitted.fun, eager.fun, atol=1e-14, rtol=0)
    assert_close(jitted.jac, eager.jac, atol=1e-9, rtol=0)
    assert int(jitted.status) == int(eager.status) == 0 and abs(int(jitted.nit) - int(eager.nit)) <= 1
    batched = tg.jit(tg.vmap(solve))(starts)
    loop = [solve(x0) for x0 in starts]
    assert batched.x.shape == (16, 4) and batched.nit.shape == (16,)
    assert_close(batched.x, np.stack([r.x for r in loop]), atol=1e-8, rtol=0)
    assert np.array_equal(batched.status, [int(r.status) for r in loop])
    # iteration counts may differ by one where roundoff decides the last line search
    assert np.max(np.abs(batched.nit - np.array([int(r.nit) for r in loop]))) <= 1
    if method == "BFGS":
        assert batched.hess_inv.shape == (16, 4, 4)


def test_vmap_over_datasets():
    bs = np.random.default_rng(2).standard_normal((16, 6))
    res = tg.vmap(lambda b: minimize_traced(quadratic, np.zeros(6), (A, b), options={"gtol": 1e-7}))(bs)
    assert np.all(res.success)
    assert_close(res.x, np.linalg.solve(A, bs.T).T, atol=1e-6, rtol=0)


def _solution(method):
    # gtol 1e-8: tighter, f's changes near the minimum fall below its rounding and the line search fails
    # (SciPy's "precision loss"), in SciPy as here
    options = {"gtol": 1e-8, "ftol": 0.0} if method == "L-BFGS-B" else {"gtol": 1e-8}

    def solution(b):
        return minimize_traced(quartic, np.zeros(6), (b,), method=method, options=options).x
    return solution


def _implicit_jacobian(x):
    """dx*/db for the quartic: grad = A x - b + 0.4 x^3 = 0, so dx*/db = H^-1, H = A + 1.2 diag(x^2)."""
    return np.linalg.inv(A + 1.2 * np.diag(np.asarray(x) ** 2))


@pytest.mark.parametrize("method", METHODS)
def test_implicit_derivative(method):
    solution = _solution(method)
    assert bool(minimize_traced(quartic, np.zeros(6), (B,), method=method).success)
    x = solution(B)
    exact = _implicit_jacobian(x)
    assert_close(tg.jacrev(solution)(B), exact, rtol=1e-9, atol=1e-12)
    assert_close(tg.jacfwd(solution)(B), exact, rtol=1e-9, atol=1e-12)
    check_grads(solution, (B,), order=1, modes=("fwd", "rev"))  # finite differences of re-solving


def test_implicit_derivative_under_jit_and_vmap():
    solution = _solution("BFGS")
    exact = _implicit_jacobian(solution(B))
    assert_close(tg.jit(tg.jacrev(solution))(B), exact, rtol=1e-9, atol=1e-12)
    assert_close(tg.grad(lambda b: tnp.sum(tg.jit(solution)(b)))(B), exact.sum(axis=0), rtol=1e-9, atol=1e-12)
    bs = B + 0.1 * np.random.default_rng(3).standard_normal((4, 6))
    batched = tg.vmap(tg.jacrev(solution))(bs)
    for b, jac in zip(bs, batched):
        assert_close(jac, _implicit_jacobian(solution(b)), rtol=1e-9, atol=1e-12)


def test_quadratic_gradient_is_analytic():
    """For ``0.5 x^T A x - b^T x`` the condition is ``(A + A^T) x / 2 = b``, so with ``v = A^-1 w`` (``A``
    symmetric): ``d(w.x*)/db = v`` and ``d(w.x*)/dA = -(v x*^T + x* v^T) / 2``."""
    def solution(a, b):
        return minimize_traced(quadratic, np.zeros(6), (a, b), options={"gtol": 1e-8}).x
    w = np.arange(1.0, 7.0)
    grad_a, grad_b = tg.grad(lambda a, b: w @ solution(a, b), grad_position=(0, 1))(A, B)
    v = np.linalg.solve(A, w)
    assert_close(grad_b, v, rtol=1e-9, atol=1e-12)
    x = np.linalg.solve(A, B)
    assert_close(grad_a, -0.5 * (np.outer(v, x) + np.outer(x, v)), rtol=1e-9, atol=1e-12)


def test_second_order():
    check_grads(_solution("BFGS"), (B,), order=2, modes=("fwd", "rev"))


def test_shapes_and_dtypes():
    res = minimize_traced(lambda x: tnp.sum((x - 1.0) ** 2), np.zeros((2, 3), dtype=np.float32))
    assert res.x.shape == res.jac.shape == (2, 3) and res.x.dtype == np.float32
    assert_close(res.x, np.ones((2, 3)), atol=1e-5, rtol=0)
    assert minimize_traced(lambda x: tnp.sum((x - 1.0) ** 2), np.zeros(3, dtype=int)).x.dtype == np.float64


def test_stops_and_reports():
    short = minimize_traced(rosen, X_ROSEN, options={"maxiter": 3})
    assert int(short.status) == 1 and not bool(short.success) and int(short.nit) == 3
    assert short.message == MESSAGES[1]
    start = minimize_traced(rosen, X_ROSEN, options={"maxiter": 0})  # x0 is still evaluated
    assert int(start.nit) == 0 and int(start.nfev) == 1 and int(start.status) == 1
    assert_close(start.fun, rosen(X_ROSEN))
    assert np.array_equal(start.x, X_ROSEN)
    with np.errstate(invalid="ignore"):  # log of a negative number: NaN from the first evaluation
        nan = minimize_traced(lambda x: tnp.sum(x ** 2) + tnp.log(-1.0 - x[0] ** 2), np.ones(2))
    assert int(nan.status) == 3 and not bool(nan.success)
    # tol sets gtol, as in SciPy
    loose, tight = (minimize_traced(rosen, X_ROSEN, tol=tol) for tol in (1e-2, 1e-9))
    assert int(loose.nit) < int(tight.nit)
    batch = tg.vmap(lambda x0: minimize_traced(rosen, x0, options={"maxiter": 3}))(np.stack([X_ROSEN, X_ROSEN]))
    assert batch.message == [MESSAGES[1]] * 2
    with pytest.raises(TypeError, match="message needs a concrete status"):
        tg.jit(lambda x0: minimize_traced(rosen, x0).message)(X_ROSEN)


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="Nelder-Mead"), "only 'BFGS' and 'L-BFGS-B'"),
    (dict(method="L-BFGS-B", bounds=[(0, 1)] * 4), "bounds cannot be used"),
    (dict(jac=True, callback=print), "jac, callback cannot be used"),
    (dict(options={"maxcor": 5}), r"unknown options \['maxcor'\]"),
    (dict(options={"return_all": True}), "return_all"),
    (dict(options={"c1": 0.9, "c2": 0.1}), "0 < c1 < c2 < 1"),
    (dict(options={"hess_inv0": np.eye(3)}), r"hess_inv0'\] has shape \(3, 3\)"),
    (dict(implicit_solve="cg"), "implicit_solve='cg' runs SciPy's host solver"),
])
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        minimize_traced(rosen, X_ROSEN, **kwargs)


def test_lotka_volterra_fit_batched():
    """``vmap`` over 16 data sets of the jitted fit of the benchmarks' model: each fit reaches a loss at
    most that of the rates that generated its data (the least-squares fit can only do better)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
    import _lotka_volterra as lv
    observed = lv.datasets(16)
    # the rates datasets() drew, in its order
    rates = lv.TRUE * (1.0 + 0.05 * np.random.default_rng(1234).standard_normal((16, 4)))

    def fit(obs):
        return minimize_traced(lv.loss, lv.START, (obs,), method="BFGS")
    with np.errstate(over="ignore", invalid="ignore"):  # trial steps that overshoot make the model blow up
        res = tg.vmap(tg.jit(fit))(observed)
    assert np.all(res.success), res.status
    fitted = np.array([float(lv.loss(x, obs)) for x, obs in zip(res.x, observed)])
    generating = np.array([float(lv.loss(r, obs)) for r, obs in zip(rates, observed)])
    assert np.all(fitted <= generating * (1 + 1e-9))
    assert_close(res.x, rates, rtol=0.1, atol=0)
