"""``tapegrad.scipy.optimize``: SciPy's solvers, with solutions differentiated by the implicit function
theorem, against closed forms and re-solving; and their errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.scipy.optimize import fixed_point, least_squares, minimize, root, root_scalar

RNG = np.random.default_rng(0)
A = RNG.normal(size=(5, 3))
B = RNG.normal(size=(5,))


def ridge_objective(x, lam):
    return 0.5 * tnp.sum((A @ x - B) ** 2) + 0.5 * lam * tnp.sum(x ** 2)


def ridge_closed(lam):
    return np.linalg.solve(A.T @ A + lam * np.eye(3), A.T @ B)


@pytest.mark.parametrize("method, implicit_solve", [(None, "auto"), ("Newton-CG", "dense"), ("trust-exact", "cg"),
                                                    ("L-BFGS-B", "auto")])
def test_minimize_ridge_closed_form(method, implicit_solve):
    def solution(lam):
        return minimize(ridge_objective, np.zeros(3), args=(lam,), method=method, tol=1e-12,
                        implicit_solve=implicit_solve).x
    lam = np.array(0.7)
    assert_close(solution(lam), ridge_closed(0.7), rtol=1e-6)
    closed = -np.linalg.solve(A.T @ A + 0.7 * np.eye(3), ridge_closed(0.7))
    assert_close(tg.jacrev(solution)(lam), closed, rtol=1e-6)
    assert_close(tg.jacfwd(solution)(lam), closed, rtol=1e-6)
    h = 1e-5
    assert_close(tg.jacrev(solution)(lam), (ridge_closed(0.7 + h) - ridge_closed(0.7 - h)) / (2 * h), rtol=1e-6)


def test_minimize_returns_scipy_result_and_second_order():
    res = minimize(ridge_objective, np.zeros(3), args=(np.array(0.5),), tol=1e-12)
    assert res.success and res.x.shape == (3,)
    # d^2 x*/d lam^2 = 2 (A^T A + lam)^-2 x*
    second = tg.jacfwd(tg.jacrev(lambda lam: minimize(ridge_objective, np.zeros(3), args=(lam,), tol=1e-12).x))(
        np.array(0.5))
    inv = np.linalg.inv(A.T @ A + 0.5 * np.eye(3))
    assert_close(second, 2 * inv @ inv @ ridge_closed(0.5), rtol=1e-6)


@pytest.mark.parametrize("implicit_solve", ["auto", "gmres"])
def test_root_cube_roots(implicit_solve):
    def solution(t):
        return root(lambda x, t: x ** 3 - t, np.array([1.0, 1.0]), args=(t,), tol=1e-14,
                    implicit_solve=implicit_solve).x
    t = np.array([8.0, 27.0])
    assert_close(solution(t), [2.0, 3.0])
    assert_close(tg.jacrev(solution)(t), np.diag(t ** (-2 / 3) / 3))
    assert_close(tg.jacfwd(solution)(t), np.diag(t ** (-2 / 3) / 3))


def test_errors():
    lam = np.array(0.7)
    with pytest.raises(ValueError, match="lies on a bound"):
        tg.jacrev(lambda lm: minimize(ridge_objective, np.zeros(3), args=(lm,), bounds=[(0.5, 2.0)] * 3).x)(lam)
    with pytest.raises(ValueError, match="did not converge"):
        tg.jacrev(lambda lm: minimize(ridge_objective, np.zeros(3), args=(lm,), options={"maxiter": 1}).x)(lam)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        minimize(ridge_objective, np.zeros(3), args=(lam,), options={"maxiter": 1})
    assert any("did not converge" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="constrained problem"):
        tg.jacrev(lambda lm: minimize(ridge_objective, np.zeros(3), args=(lm,), method="SLSQP",
                                     constraints=[{"type": "eq", "fun": lambda x: np.sum(x) - 1.0}]).x)(lam)
    with pytest.raises(ValueError, match="singular"):
        # a valley of minima: the Hessian at the solution is singular, x* does not depend smoothly on lam
        tg.grad(lambda lm: tnp.sum(minimize(lambda x, lm: (x[0] + x[1] - lm) ** 2, np.zeros(2), args=(lm,),
                                           implicit_solve="dense").x))(lam)
    with pytest.raises(ValueError, match="method='Nelder-Mead' does not run under jit or vmap"):
        tg.vmap(lambda lm: minimize(ridge_objective, np.zeros(3), args=(lm,), method="Nelder-Mead").x)(
            np.array([0.5, 0.7]))
    with pytest.raises(ValueError, match="implicit_solve must be"):
        minimize(ridge_objective, np.zeros(3), args=(lam,), implicit_solve="lu")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", [None, "L-BFGS-B"])
def test_minimize_under_vmap_and_jit_runs_tapegrads_own_bfgs(method):
    """SciPy needs host values: under vmap or jit, minimize is BFGS (L-BFGS) in tapegrad's while_loop,
    with the same solution and derivative as the eager call."""
    lams = np.array([0.3, 0.7, 1.5])

    def solution(lm):
        return minimize(ridge_objective, np.zeros(3), args=(lm,), method=method, options={"gtol": 1e-10}).x
    want = np.stack([ridge_closed(lm) for lm in lams])
    assert_close(tg.vmap(solution)(lams), want, rtol=1e-8)
    assert_close(tg.jit(solution)(lams[1]), want[1], rtol=1e-8)
    closed = -np.linalg.solve(A.T @ A + 0.7 * np.eye(3), ridge_closed(0.7))
    assert_close(tg.jit(tg.jacrev(solution))(lams[1]), closed, rtol=1e-6)
    assert_close(tg.vmap(tg.jacfwd(solution))(lams)[1], closed, rtol=1e-6)


def cube(x, t):
    return x ** 3 - t


@pytest.mark.parametrize("kwargs", [{"method": "newton", "x0": 1.0}, {"method": "brentq", "bracket": [0.5, 5.0]},
                                    {"method": "halley", "x0": 1.0}, {"x0": 1.0, "x1": 1.5}])
def test_root_scalar_cube_root(kwargs):
    def solution(t):
        return root_scalar(cube, args=(t,), xtol=1e-15, **kwargs).root
    t = np.array(8.0)
    res = root_scalar(cube, args=(t,), xtol=1e-15, **kwargs)
    assert type(res).__name__ == "RootResults" and res.converged
    assert_close(solution(t), 2.0)
    assert_close(tg.grad(solution)(t), 1 / 12)                         # 1 / (3 x*^2), x* = t^(1/3)
    assert_close(tg.jvp(solution, (t,), (np.array(1.0),))[1], 1 / 12)
    assert_close(tg.grad(tg.grad(solution))(t), -2 / 9 * 8.0 ** (-5 / 3))


M = 0.1 * np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])   # spectral radius < 1: a contraction


@pytest.mark.parametrize("method, implicit_solve", [("del2", "auto"), ("iteration", "gmres")])
def test_fixed_point_linear(method, implicit_solve):
    def solution(theta):
        return fixed_point(lambda x, th: M @ x + th, np.zeros(3), args=(theta,), xtol=1e-12, maxiter=2000,
                           method=method, implicit_solve=implicit_solve)
    theta = np.array([1.0, 2.0, -1.0])
    inverse = np.linalg.inv(np.eye(3) - M)
    assert isinstance(solution(theta), np.ndarray)
    assert_close(solution(theta), inverse @ theta, rtol=1e-10)
    assert_close(tg.jacrev(solution)(theta), inverse, rtol=1e-10)
    assert_close(tg.jacfwd(solution)(theta), inverse, rtol=1e-10)


A_LS = RNG.normal(size=(8, 3))


@pytest.mark.parametrize("method", ["trf", "lm", "dogbox"])
def test_least_squares_linear_model(method):
    # r = A x - b(theta), b = theta^2 elementwise: x* = lstsq(A, b), dx*/dtheta = pinv(A) diag(2 theta)
    def solution(theta):
        return least_squares(lambda x, th: A_LS @ x - th ** 2, np.zeros(3), args=(theta,), method=method,
                             ftol=1e-15, xtol=1e-15, gtol=1e-15).x
    theta = np.linspace(0.5, 2.0, 8)
    res = least_squares(lambda x, th: A_LS @ x - th ** 2, np.zeros(3), args=(theta,), method=method)
    assert res.success and res.status > 0 and hasattr(res, "cost")
    assert_close(solution(theta), np.linalg.lstsq(A_LS, theta ** 2, rcond=None)[0], rtol=1e-8)
    closed = np.linalg.pinv(A_LS) * (2 * theta)
    assert_close(tg.jacrev(solution)(theta), closed, rtol=1e-8)
    assert_close(tg.jacfwd(solution)(theta), closed, rtol=1e-8)


T_DECAY = np.linspace(0.0, 3.0, 12)


def decay(p, y):
    return p[0] * tnp.exp(-p[1] * T_DECAY) - y


def test_least_squares_exponential_fit_against_resolving():
    # a fit with non-zero residuals: the Hessian of the cost has second-order terms (not only J^T J)
    y = 2.0 * np.exp(-0.7 * T_DECAY) + 0.05 * np.sin(5 * T_DECAY)

    def solution(y):
        return least_squares(decay, np.array([1.0, 1.0]), args=(y,),
                             ftol=1e-15, xtol=1e-15, gtol=1e-15).x
    jac = tg.jacrev(solution)(y)
    assert_close(tg.jacfwd(solution)(y), jac, rtol=1e-8)
    h = 1e-4  # central differences: truncation ~h^2, the solution's own error (~1e-10) / h
    columns = [(solution(y + h * e) - solution(y - h * e)) / (2 * h) for e in np.eye(y.size)]
    assert_close(jac, np.stack(columns, axis=1), rtol=1e-5)
    assert np.abs(jac).max() > 0.1


@pytest.mark.parametrize("loss", ["soft_l1", "huber", "cauchy", "arctan"])
def test_least_squares_robust_losses_against_resolving(loss):
    # the optimality condition is the gradient of SciPy's robust cost 0.5 f^2 sum rho((r / f)^2); f_scale
    # 0.1 puts residuals on both sides of huber's switch. Reverse mode transposes a map through sqrt at
    # a zero tangent, which a rule that was not linear there once got wrong (soft_l1, huber)
    y = 2.0 * np.exp(-0.7 * T_DECAY) + 0.05 * np.sin(5 * T_DECAY)

    def solution(y):
        return least_squares(decay, np.array([1.0, 1.0]), args=(y,), loss=loss, f_scale=0.1,
                             ftol=1e-15, xtol=1e-15, gtol=1e-15).x
    jac = tg.jacrev(solution)(y)
    assert_close(tg.jacfwd(solution)(y), jac, rtol=1e-8)
    h = 1e-4
    columns = [(solution(y + h * e) - solution(y - h * e)) / (2 * h) for e in np.eye(y.size)]
    assert_close(jac, np.stack(columns, axis=1), rtol=1e-5)


@pytest.mark.parametrize("wrap", ["dict", "tuple", "list"])
def test_traced_values_inside_pytree_args_are_differentiated(wrap):
    # a dict, tuple or list argument holding a traced value was taken for a constant: gradient 0
    pack = {"dict": lambda c: {"c": c}, "tuple": lambda c: (c,), "list": lambda c: [c]}[wrap]
    unpack = {"dict": lambda p: p["c"], "tuple": lambda p: p[0], "list": lambda p: p[0]}[wrap]
    c = np.array([1.0, 2.0])
    x_min = lambda c: minimize(lambda x, p: tnp.sum((x - unpack(p)) ** 2), np.zeros(2), args=(pack(c),)).x
    x_root = lambda c: root(lambda x, p: x ** 3 - unpack(p), np.ones(2), args=(pack(c),)).x
    assert_close(tg.grad(lambda c: tnp.sum(x_min(c)))(c), np.ones(2), rtol=1e-7)
    assert_close(tg.jacfwd(x_root)(c), np.diag(1.0 / (3.0 * np.cbrt(c) ** 2)), rtol=1e-7)


def test_least_squares_exact_fit():
    # every residual 0 at the solution: the cost's Hessian is J^T J, whose second-order part (through
    # r**2 at r = 0) once came out 0, giving a wrong Jacobian with no error
    t = np.linspace(0.0, 1.0, 5)
    y = 2.0 * np.exp(-0.5 * t)

    def solution(y):
        return least_squares(lambda p, y: p[0] * tnp.exp(p[1] * t) - y, np.array([1.0, 0.0]), args=(y,),
                             ftol=1e-15, xtol=1e-15, gtol=1e-15).x
    p = solution(y)
    J = np.stack([np.exp(p[1] * t), p[0] * t * np.exp(p[1] * t)], axis=1)
    closed = np.linalg.solve(J.T @ J, J.T)  # dp*/dy at an exact fit: (J^T J)^-1 J^T
    assert_close(tg.jacrev(solution)(y), closed, rtol=1e-6)
    assert_close(tg.jacfwd(solution)(y), closed, rtol=1e-6)


def test_new_solvers_errors():
    t = np.array(8.0)
    with pytest.raises(ValueError, match="did not converge"):
        tg.grad(lambda t: root_scalar(cube, args=(t,), method="newton", x0=100.0, maxiter=2).root)(t)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not root_scalar(cube, args=(t,), method="newton", x0=100.0, maxiter=2).converged
    assert any("did not converge" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="singular"):   # the triple root x* = 0 of x^3 - 0 (bisect's first midpoint)
        tg.grad(lambda t: root_scalar(cube, args=(t,), method="bisect", bracket=[-1.0, 1.0]).root)(np.array(0.0))
    with pytest.raises(TypeError, match=r"args\[0\] is \(or holds\) a value of vmap or jit"):
        tg.vmap(lambda t: root_scalar(cube, args=(t,), x0=1.0).root)(np.array([8.0, 27.0]))
    with pytest.raises(RuntimeError, match="fixed_point: SciPy's iteration did not converge"):
        fixed_point(lambda x, th: 2.0 * x + th, np.ones(2), args=(np.ones(2),), maxiter=5, method="iteration")
    with pytest.raises(ValueError, match="singular"):   # func(x) = x - th + th: every point is fixed, I - G = 0
        tg.jacrev(lambda th: fixed_point(lambda x, th: x + th - th, np.ones(2), args=(th,),
                                         implicit_solve="dense"))(np.ones(2))
    theta = np.linspace(0.5, 2.0, 8)

    def linear(x, th):
        return A_LS @ x - th ** 2
    with pytest.raises(ValueError, match="did not converge"):
        tg.jacrev(lambda th: least_squares(linear, np.zeros(3), args=(th,), max_nfev=1).x)(theta)
    with pytest.raises(ValueError, match="lies on a bound"):
        tg.jacrev(lambda th: least_squares(linear, np.ones(3), args=(th,), bounds=(0.5, 10.0)).x)(theta)
    with pytest.raises(ValueError, match="loss=<function .*is not differentiated"):
        def own_loss(z):  # SciPy's form for a callable: rho, rho', rho''
            return np.stack([z, np.ones_like(z), np.zeros_like(z)])
        tg.jacrev(lambda th: least_squares(linear, np.zeros(3), args=(th,), loss=own_loss).x)(theta)
    with pytest.raises(TypeError, match="a value of vmap or jit"):
        tg.vmap(lambda th: least_squares(linear, np.zeros(3), args=(th,)).x)(np.stack([theta, theta]))


def test_a_float32_start_with_float64_args():
    # the optimality condition is taken in x0's dtype (it came out float64, which custom_root refused
    # with a message about its own internals)
    t = np.array(8.0)
    x_star = root_scalar(cube, args=(t,), x0=np.float32(1.0), method="newton").root
    assert x_star.dtype == np.float32
    g = tg.grad(lambda t: root_scalar(cube, args=(t,), x0=np.float32(1.0), method="newton").root)(t)
    assert_close(g, 1.0 / 12.0, rtol=1e-6)
