"""``custom_root`` and ``custom_linear_solve``: derivatives by the implicit function theorem against
closed forms and re-solving, to order 2 in both modes, under ``vmap`` and ``jit``, and their errors."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close, eps
from tapegrad.testing import check_grads

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 3))
B = RNG.normal(size=(4,))
M = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])


def newton(f, x0, steps=40):
    """A solver written for concrete values: Newton's method with the Jacobian of ``f`` by ``jacfwd``."""
    x = x0
    for _ in range(steps):
        x = x - f(x) / tg.jacfwd(f)(x)
    return x


def newton_vector(f, x0, steps=30):
    x = x0
    for _ in range(steps):
        x = x - tnp.linalg.solve(tg.jacfwd(f)(x), f(x))
    return x


def scalar_tangent_solve(g, y):
    return y / g(1.0)


def dense_tangent_solve(g, y):
    return tnp.linalg.solve(tg.jacfwd(g)(y), y)


def cube_root(theta):
    return tg.custom_root(lambda x: x ** 3 - theta, tnp.ones_like(theta), newton, scalar_tangent_solve)


def dense_solve(matvec, b):
    return tnp.linalg.solve(tg.jacfwd(matvec)(b), b)


def ridge(lam):
    """The ridge solution ``(A^T A + lam I)^-1 A^T b`` as the minimiser's root of the gradient."""
    def grad_objective(x):
        return A.T @ (A @ x - B) + lam * x
    return tg.custom_root(grad_objective, np.zeros(3), newton_vector, dense_tangent_solve)


def ridge_closed(lam):
    return np.linalg.solve(A.T @ A + lam * np.eye(3), A.T @ B)


# ---- custom_root ---------------------------------------------------------------------------------
def test_root_scalar_closed_form():
    theta = np.array(8.0)
    assert_close(cube_root(theta), 2.0)
    assert_close(tg.grad(cube_root)(theta), theta ** (-2 / 3) / 3)
    assert_close(tg.grad(tg.grad(cube_root))(theta), -2 / 9 * theta ** (-5 / 3))
    assert_close(tg.jvp(cube_root, (theta,), (np.array(1.0),))[1], theta ** (-2 / 3) / 3)


def test_root_ridge_closed_form_and_re_solving():
    lam = np.array(0.7)
    x = ridge(lam)
    assert_close(x, ridge_closed(0.7), ulps=1024)
    dx = tg.jacrev(ridge)(lam)
    closed = -np.linalg.solve(A.T @ A + 0.7 * np.eye(3), ridge_closed(0.7))
    assert_close(dx, closed, ulps=1024)
    assert_close(tg.jacfwd(ridge)(lam), closed, ulps=1024)
    h = 1e-5
    assert_close(dx, (ridge_closed(0.7 + h) - ridge_closed(0.7 - h)) / (2 * h), rtol=1e-7)


@pytest.mark.parametrize("fn, args", [
    (cube_root, (np.array(3.0),)),
    (ridge, (np.array(0.5),)),
    (lambda a, c: tg.custom_root(lambda x: tnp.tanh(x) + a * x - c, np.zeros(2), newton_vector,
                                 dense_tangent_solve), (np.array([1.5, 2.0]), np.array([0.3, -0.2]))),
])
def test_root_check_grads_order_2(fn, args):
    check_grads(fn, args, order=2)
    check_grads(tg.jit(fn), args, order=2)


def test_root_vmap_and_jit():
    thetas = np.array([1.0, 8.0, 27.0])
    assert_close(tg.vmap(cube_root)(thetas), np.cbrt(thetas))
    assert_close(tg.vmap(tg.grad(cube_root))(thetas), thetas ** (-2 / 3) / 3)
    assert_close(tg.jit(tg.grad(cube_root))(np.array(8.0)), 8.0 ** (-2 / 3) / 3)
    check_grads(lambda t: tg.vmap(cube_root)(t), (thetas,), order=2)


def test_root_pytree_float32_and_has_aux():
    def solve(f, x0):
        x = newton_vector(lambda v: tnp.concatenate([f({"a": v[:1], "b": v[1:]})[k] for k in ("a", "b")]),
                          tnp.concatenate([x0["a"], x0["b"]]))
        return {"a": x[:1], "b": x[1:]}, tnp.asarray(30)

    def fn(theta):
        def f(x):
            return {"a": x["a"] ** 2 - theta[0], "b": x["b"] * x["a"] - theta[1]}
        guess = {"a": np.ones(1, np.float32), "b": np.ones(1, np.float32)}
        out, steps = tg.custom_root(f, guess, solve, dense_tangent_solve_tree, has_aux=True)
        assert int(steps) == 30
        return out["a"][0] + 2 * out["b"][0]

    def dense_tangent_solve_tree(g, y):
        def flat(v):
            out = g({"a": v[:1], "b": v[1:]})
            return tnp.concatenate([out["a"], out["b"]])
        rhs = tnp.concatenate([y["a"], y["b"]])
        x = tnp.linalg.solve(tg.jacfwd(flat)(rhs), rhs)
        return {"a": x[:1], "b": x[1:]}
    theta = np.array([4.0, 6.0], np.float32)
    value, grad = tg.value_and_grad(fn)(theta)
    # a = sqrt(t0), b = t1 / sqrt(t0): d/dt0 = 1/(2 sqrt t0) - t1 / t0^1.5, d/dt1 = 2 / sqrt t0
    assert_close(value, 2.0 + 2 * 3.0, dtype=np.float32)
    assert grad.dtype == np.float32
    assert_close(grad, [0.25 - 6.0 / 8.0, 1.0], dtype=np.float32, ulps=256)


def test_root_integer_closure_gets_no_derivative():
    power = np.array(3)

    def fn(theta):
        return tg.custom_root(lambda x: x ** power - theta, np.array(1.0), newton, scalar_tangent_solve)
    assert_close(tg.grad(fn)(np.array(8.0)), 1 / 12)


def test_root_parameter_is_differentiated():
    theta = tg.Parameter(np.array(8.0), name="theta")

    def loss():
        return tg.custom_root(lambda x: x ** 3 - theta, np.array(1.0), newton, scalar_tangent_solve)
    grads = tg.grad(loss, None, weights=[theta])()
    assert_close(grads[0], 1 / 12)


def test_root_solver_not_differentiated():
    # a solver that cannot be differentiated (it reads floats) gives the implicit derivative
    def solve(f, x0):
        x = float(x0)
        for _ in range(50):
            fx = float(f(np.array(x)))
            x -= fx / (3 * x * x)
        return np.array(x)
    assert_close(tg.grad(lambda t: tg.custom_root(lambda x: x ** 3 - t, np.array(1.0), solve,
                                                   scalar_tangent_solve))(np.array(8.0)), 1 / 12)


def test_root_errors():
    theta = np.array(8.0)
    with pytest.raises(ValueError, match=r"solve returned a point where f is not near zero.*residual_tol"):
        tg.custom_root(lambda x: x ** 3 - theta, np.array(1.0), lambda f, x0: x0, scalar_tangent_solve)
    # a loose tolerance, or none, accepts it
    tg.custom_root(lambda x: x ** 3 - theta, np.array(1.0), lambda f, x0: x0, scalar_tangent_solve,
                   residual_tol=None)
    with pytest.raises(ValueError, match="solve returned leaf 0 of shape"):
        tg.custom_root(lambda x: x ** 3 - theta, np.array(1.0), lambda f, x0: np.ones(2), scalar_tangent_solve)
    with pytest.raises(ValueError, match="f returned a value of pytree structure"):
        tg.custom_root(lambda x: (x, x), np.array(1.0), newton, scalar_tangent_solve)
    with pytest.raises(ValueError, match="tangent_solve returned a value of pytree structure"):
        tg.grad(lambda t: tg.custom_root(lambda x: x ** 3 - t, np.array(1.0), newton,
                                         lambda g, y: (y, y)))(theta)
    with pytest.raises(TypeError, match="solve must be a function"):
        tg.custom_root(lambda x: x, np.array(1.0), None, scalar_tangent_solve)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="residual_tol must be a positive number"):
        tg.custom_root(lambda x: x, np.array(1.0), newton, scalar_tangent_solve, residual_tol=-1.0)
    # the library is usable after each error
    assert_close(tg.grad(cube_root)(theta), 1 / 12)


def test_root_residual_tolerance_scales_with_dtype():
    # a float32 root good to float32 precision passes; float64's default would refuse a 1e-5 residual
    f32 = tg.custom_root(lambda x: x - np.float32(2.0), np.array(0.0, np.float32),
                         lambda f, x0: np.array(2.0 + 1e-5, np.float32), scalar_tangent_solve)
    assert f32.dtype == np.float32
    assert 1e-5 < np.finfo(np.float32).eps ** 0.25
    assert 1e-2 > np.finfo(np.float64).eps ** 0.25 > eps(np.float64)


# ---- custom_linear_solve -------------------------------------------------------------------------
def linear(mat, b):
    return tg.custom_linear_solve(lambda x: mat @ x, b, dense_solve, transpose_solve=dense_solve)


def linear_symmetric(mat, b):
    return tg.custom_linear_solve(lambda x: mat @ x, b, dense_solve, symmetric=True)


def test_linear_solve_values_and_closed_form():
    b = np.array([1.0, 2.0, 3.0])
    mat = M + 0.3 * np.triu(np.ones((3, 3)), 1)  # not symmetric
    x = linear(mat, b)
    assert_close(x, np.linalg.solve(mat, b))
    gb = tg.grad(lambda b: tnp.sum(linear(mat, b)))(b)
    assert_close(gb, np.linalg.solve(mat.T, np.ones(3)))
    gm = tg.grad(lambda m: tnp.sum(linear(m, b)))(mat)
    assert_close(gm, -np.outer(np.linalg.solve(mat.T, np.ones(3)), x))


@pytest.mark.parametrize("fn", [linear, linear_symmetric])
def test_linear_solve_check_grads(fn):
    b = np.array([1.0, -2.0, 0.5])
    check_grads(fn, (M, b), order=2)
    check_grads(tg.jit(fn), (M, b), order=2)
    bs = np.stack([b, 2 * b + 1])
    check_grads(lambda m, bs: tg.vmap(fn, in_axes=(None, 0))(m, bs), (M, bs), order=2)
    assert_close(tg.vmap(fn, in_axes=(None, 0))(M, bs), np.linalg.solve(M, bs.T).T)


def test_linear_solve_pytree_and_aux():
    def matvec(x):
        return {"u": 2.0 * x["u"] + x["v"], "v": x["u"] + 3.0 * x["v"]}

    def solve(mv, b):
        det = 5.0
        return {"u": (3.0 * b["u"] - b["v"]) / det, "v": (2.0 * b["v"] - b["u"]) / det}, tnp.asarray(0)
    b = {"u": np.array([1.0, 2.0]), "v": np.array([0.0, 1.0])}
    x, aux = tg.custom_linear_solve(matvec, b, solve, symmetric=True, has_aux=True)
    assert_close(matvec(x)["u"], b["u"])
    assert_close(matvec(x)["v"], b["v"])
    assert int(aux) == 0
    check_grads(lambda u, v: tg.custom_linear_solve(matvec, {"u": u, "v": v}, solve, symmetric=True,
                                                    has_aux=True)[0]["v"], (b["u"], b["v"]), order=2)


def test_linear_solve_reverse_mode_needs_transpose_solve():
    b = np.array([1.0, 2.0, 3.0])

    def fn(m):
        return tnp.sum(tg.custom_linear_solve(lambda x: m @ x, b, dense_solve))
    assert_close(tg.jvp(fn, (M,), (np.eye(3),))[1], tg.jacfwd(fn)(M).trace())  # forward mode works
    with pytest.raises(TypeError, match="needs transpose_solve"):
        tg.grad(fn)(M)
    with pytest.raises(ValueError, match="matvec returned leaf 0 of shape"):
        tg.custom_linear_solve(lambda x: x[:2], b, dense_solve)
    assert_close(tg.grad(lambda m: tnp.sum(linear(m, b)))(M), -np.outer(np.linalg.solve(M, np.ones(3)),
                                                                        np.linalg.solve(M, b)))


def test_root_with_linear_solve_as_tangent_solve():
    # tangent_solve written with custom_linear_solve: reverse mode uses its transpose rule
    def tangent_solve(g, y):
        return tg.custom_linear_solve(g, y, dense_solve, transpose_solve=dense_solve)

    def fn(c):
        return tg.custom_root(lambda x: tnp.tanh(x) + 2.0 * x - c, np.zeros(2), newton_vector, tangent_solve)
    check_grads(fn, (np.array([0.3, -0.4]),), order=2)


@pytest.mark.peer("jax")
def test_matches_jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_root(theta):
        return jax.lax.custom_root(lambda x: x ** 3 - theta, 1.0, lambda f, x0: jnp.cbrt(theta),
                                   lambda g, y: y / g(1.0))
    assert_close(tg.grad(cube_root)(np.array(5.0)), float(jax.grad(jax_root)(5.0)))

    def jax_linear(m, b):
        return jnp.sum(jax.lax.custom_linear_solve(lambda x: m @ x, b, lambda mv, b: jnp.linalg.solve(m, b),
                                                   lambda vm, b: jnp.linalg.solve(m.T, b)))
    b = np.array([1.0, 2.0, 3.0])
    ours = tg.grad(lambda m: tnp.sum(linear(m, b)))(M)
    assert_close(ours, np.asarray(jax.grad(jax_linear)(M, b)))
