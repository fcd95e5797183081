"""``tapegrad.scipy.optimize`` hands SciPy its function and derivatives staged by ``jit``: once per
(function, shapes and dtypes), reused across solves and across ``args`` values (traced inputs of the
program, not constants), with the same solutions as the eager route; a function ``jit`` cannot stage
falls back to the eager route, and the result says so (``executor``, ``executor_reason``); the
solution stays differentiable by the implicit function theorem.

Stagings are counted through a side effect in the function's body, which runs only while ``jit``
stages it (and at every call on the eager route).
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.scipy.optimize import fixed_point, least_squares, minimize, root, root_scalar

STAGED = ("numba", "python", "python+numba")


def counted(body):
    """A fresh function object running ``body`` (so that no other test shares its programs), and the
    list whose length counts its runs."""
    runs = []

    def fun(x, *args, **kwargs):
        runs.append(1)
        return body(x, *args, **kwargs)
    return fun, runs


def on_the_eager_route(body):
    """``body`` with a Python ``if`` on a traced value: eagerly a plain branch, under ``jit`` a
    ConcretizationError, so the solver falls back to the eager route."""
    def fun(x, *args, **kwargs):
        if tnp.sum(x) > -np.inf:
            return body(x, *args, **kwargs)
        raise AssertionError("unreachable")
    return fun


def quartic(x, a):
    return tnp.sum((x - a) ** 2) + 0.1 * tnp.sum(x ** 4)


def cubic(x, a):
    return x ** 3 + x - a


def residuals(x, a):
    return tnp.concatenate([x - a, 0.3 * x ** 2])


def contraction(x, a):
    return 0.5 * tnp.cos(x) + a


# name -> (body, solve(fun, a, x0) -> (solution, result or None), x0 of n unknowns)
SOLVES = {
    "minimize BFGS": (quartic, lambda f, a, x0: _pair(minimize(f, x0, args=(a,), method="BFGS", tol=1e-10))),
    "minimize Newton-CG": (quartic, lambda f, a, x0: _pair(minimize(f, x0, args=(a,), method="Newton-CG",
                                                                    tol=1e-10))),
    "minimize trust-exact": (quartic, lambda f, a, x0: _pair(minimize(f, x0, args=(a,), method="trust-exact"))),
    "minimize Nelder-Mead": (quartic, lambda f, a, x0: _pair(minimize(f, x0, args=(a,), method="Nelder-Mead"))),
    "root hybr": (cubic, lambda f, a, x0: _pair(root(f, x0, args=(a,), tol=1e-12))),
    "root lm": (cubic, lambda f, a, x0: _pair(root(f, x0, args=(a,), method="lm", tol=1e-12))),
    "least_squares": (residuals, lambda f, a, x0: _pair(least_squares(f, x0, args=(a,)))),
    "fixed_point": (contraction, lambda f, a, x0: (fixed_point(f, x0, args=(a,), xtol=1e-12), None)),
    "root_scalar newton": (cubic, lambda f, a, x0: _scalar(root_scalar(f, args=(_number(a),), x0=0.5))),
    "root_scalar halley": (cubic, lambda f, a, x0: _scalar(root_scalar(f, args=(_number(a),), x0=0.5,
                                                                       method="halley"))),
}


def _pair(res):
    return res.x, res


def _scalar(res):
    return res.root, res


def _number(a):
    # root_scalar is scalar: its other "shape" is an argument of another dtype
    return a.sum() if a.size == 2 else np.float32(a.sum())


def _start(n):
    return np.full(n, 0.5)


@pytest.mark.parametrize("name", list(SOLVES))
def test_staged_once_per_shapes_and_reused_across_args(name):
    body, solve = SOLVES[name]
    fun, runs = counted(body)
    a1, a2 = np.array([1.0, -2.0]), np.array([0.5, 1.5])
    x1, res1 = solve(fun, a1, _start(2))
    stagings = len(runs)
    assert stagings >= 1
    x2, res2 = solve(fun, a2, _start(2))
    assert len(runs) == stagings, "a new args value staged again"
    if res1 is not None:
        assert res1.executor in STAGED and res1.executor_reason is None
        assert res2.executor == res1.executor
    assert not np.allclose(x1, x2)  # the args are inputs of the program, not constants baked in
    # the same solutions (and evaluations) as the eager route
    for a, x, res in ((a1, x1, res1), (a2, x2, res2)):
        eager_x, eager = solve(on_the_eager_route(body), a, _start(2))
        assert_close(x, eager_x, rtol=1e-9, atol=1e-12)
        if res is not None:
            assert eager.executor == "eager"
            count = "function_calls" if name.startswith("root_scalar") else "nfev"
            assert getattr(res, count) == getattr(eager, count)
    # other shapes (root_scalar: an argument of another dtype) stage once more, then are reused too
    solve(fun, np.array([1.0, -2.0, 0.3]), _start(3))
    assert len(runs) > stagings
    stagings = len(runs)
    solve(fun, np.array([0.2, 0.1, 0.3]), _start(3))
    assert len(runs) == stagings


def test_number_args_are_traced_and_static_args_key_the_program():
    fun, runs = counted(lambda x, lam, mode: (tnp.sum((x - 1.0) ** 2) + lam * tnp.sum(x ** 2)) *
                        (1.0 if mode == "plain" else 2.0))
    x_half = minimize(fun, np.zeros(2), args=(0.5, "plain")).x
    stagings = len(runs)
    x_one = minimize(fun, np.zeros(2), args=(1.0, "plain")).x  # a Python float: a traced input
    assert len(runs) == stagings
    assert_close(x_half, np.full(2, 1 / 1.5), rtol=1e-6)
    assert_close(x_one, np.full(2, 0.5), rtol=1e-6)
    res = minimize(fun, np.zeros(2), args=(1.0, "doubled"))  # a string: static, part of the key
    assert len(runs) > stagings and res.executor in STAGED
    assert_close(res.x, np.full(2, 0.5), rtol=1e-6)


def test_a_function_jit_cannot_stage_falls_back_visibly():
    a = np.array([1.0, -2.0])
    res = minimize(on_the_eager_route(quartic), np.zeros(2), args=(a,))
    assert res.executor == "eager"
    assert "could not stage the function's value_and_grad" in res.executor_reason
    assert "ConcretizationError" in res.executor_reason
    assert_close(res.x, minimize(quartic, np.zeros(2), args=(a,)).x, rtol=1e-8)

    def host_call(x, a):  # NumPy on the input: a host call jit cannot trace (and grad cannot either)
        return tnp.sum((tnp.asarray(np.asarray(x)) - a) ** 2)
    res = minimize(host_call, np.zeros(2), args=(a,), method="Nelder-Mead", options={"xatol": 1e-10})
    assert res.executor == "eager" and "TracerArrayConversionError" in res.executor_reason
    assert_close(res.x, a, atol=1e-6)
    # remembered on the function: the next solve goes to the eager route at once, with the reason
    again = minimize(host_call, np.zeros(2), args=(a,), method="Nelder-Mead", options={"xatol": 1e-10})
    assert again.executor_reason == res.executor_reason
    root_res = root(on_the_eager_route(cubic), np.ones(2), args=(a,))
    assert root_res.executor == "eager" and root_res.executor_reason.startswith("jit could not stage")


def test_an_argument_neither_array_nor_hashable_keeps_the_eager_route():
    a = np.array([1.0, -2.0])
    res = minimize(lambda x, a, names: quartic(x, a), np.zeros(2), args=(a, ["u", "v"]))
    assert res.executor == "eager" and "args[1] is a list" in res.executor_reason
    assert_close(res.x, minimize(quartic, np.zeros(2), args=(a,)).x, rtol=1e-8)


def test_parameters_read_by_the_function_are_read_at_every_call():
    target = tg.Parameter(np.array([1.0, -2.0]))
    fun, runs = counted(lambda x: tnp.sum((x - target) ** 2))
    assert_close(minimize(fun, np.zeros(2)).x, [1.0, -2.0], atol=1e-6)
    stagings = len(runs)
    target.assign(np.array([3.0, 0.5]))
    res = minimize(fun, np.zeros(2))
    assert len(runs) == stagings and res.executor in STAGED
    assert_close(res.x, [3.0, 0.5], atol=1e-6)


@pytest.mark.parametrize("method", ["BFGS", "Newton-CG"])
def test_the_solution_stays_differentiable(method):
    fun, _ = counted(quartic)
    executors = []

    def solution(a):
        res = minimize(fun, np.zeros(2), args=(a,), method=method, options={"gtol": 1e-9} if method == "BFGS"
                       else {"xtol": 1e-12})
        executors.append(res.executor)
        return res.x
    a = np.array([1.0, -2.0])
    jac = tg.jacrev(solution)(a)
    assert executors and set(executors) <= set(STAGED)  # under jacrev too: SciPy sees concrete args
    assert_close(tg.jacfwd(solution)(a), jac, rtol=1e-8)
    # x* solves 2 (x - a) + 0.4 x^3 = 0: dx*/da = diag(2 / (2 + 1.2 x*^2))
    x = solution(a)
    assert_close(jac, np.diag(2 / (2 + 1.2 * x ** 2)), rtol=1e-7)
    # central differences of solutions to near machine precision (Newton's steps converge quadratically)
    def precise(a):
        return minimize(fun, x, args=(a,), method="Newton-CG", options={"xtol": 1e-15}).x
    h = 1e-5
    fd = np.stack([(precise(a + h * e) - precise(a - h * e)) / (2 * h) for e in np.eye(2)], axis=1)
    assert_close(jac, fd, rtol=1e-6)
    assert_close(tg.grad(lambda a: tnp.sum(solution(a)))(a), jac.sum(axis=0), rtol=1e-8)


def test_a_start_traced_by_vmap_runs_the_traced_minimiser():
    starts = np.array([[0.0, 0.0], [2.0, -1.0], [-3.0, 0.5]])
    got = tg.vmap(lambda x0: minimize(quartic, x0, args=(np.ones(2),), options={"gtol": 1e-10}).x)(starts)
    want = minimize(quartic, np.zeros(2), args=(np.ones(2),), options={"gtol": 1e-10}).x
    assert_close(got, np.stack([want] * 3), rtol=1e-7)


def test_the_staged_programs_go_with_the_function():
    import gc
    import weakref
    fun, _ = counted(quartic)
    minimize(fun, np.zeros(2), args=(np.ones(2),), method="Newton-CG")
    alive = weakref.ref(fun)
    del fun
    gc.collect()
    assert alive() is None


def test_least_squares_kwargs_and_a_tuple_returning_f_are_staged():
    a = np.array([1.0, -2.0])
    fun, runs = counted(lambda x, a, scale=1.0: scale * (x - a) + 0.1 * x ** 3)
    first = least_squares(fun, np.zeros(2), args=(a,), kwargs={"scale": 2.0})
    stagings = len(runs)
    second = least_squares(fun, np.zeros(2), args=(a,), kwargs={"scale": 3.0})  # a traced input: no staging
    assert len(runs) == stagings and first.executor in STAGED and second.executor in STAGED
    for res, scale in ((first, 2.0), (second, 3.0)):
        assert_close(scale * (res.x - a) + 0.1 * res.x ** 3, np.zeros(2), atol=1e-8)
    # f returning (f, f'): halley's f'' is the derivative of f' taken from f's first value
    f, runs = counted(lambda x, t: (x ** 3 - t, 3 * x ** 2))
    sol = root_scalar(f, args=(8.0,), x0=1.0, fprime=True, method="halley")
    stagings = len(runs)
    again = root_scalar(f, args=(27.0,), x0=1.0, fprime=True, method="halley")
    assert len(runs) == stagings and sol.executor in STAGED
    assert_close(sol.root, 2.0)
    assert_close(again.root, 3.0)
