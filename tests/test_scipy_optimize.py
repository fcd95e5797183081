"""``tapegrad.scipy.optimize``: SciPy's solvers, with solutions differentiated by the implicit function
theorem, against closed forms and re-solving; and their errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.scipy.optimize import minimize, root

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
    with pytest.raises(TypeError, match="args\\[0\\] is a value of vmap or jit"):
        tg.vmap(lambda lm: minimize(ridge_objective, np.zeros(3), args=(lm,)).x)(np.array([0.5, 0.7]))
    with pytest.raises(ValueError, match="implicit_solve must be"):
        minimize(ridge_objective, np.zeros(3), args=(lam,), implicit_solve="lu")  # type: ignore[arg-type]
