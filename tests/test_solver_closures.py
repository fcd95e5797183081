"""Solvers as JAX and SciPy users write them.

- ``custom_linear_solve``'s ``solve``/``transpose_solve`` and ``custom_root``'s ``tangent_solve`` close
  over the very matrix being differentiated (``lambda mv, r: tnp.linalg.solve(A, r)``): both modes,
  orders 1-3 by several routes, under ``vmap`` and ``jit``, against a twin written without the
  construct (``tnp.linalg.solve``, or Newton's iteration unrolled in Python), and against ``jax.lax``.
- ``tapegrad.scipy.optimize``'s default ``implicit_solve`` on models with a ``scan`` or ``fori_loop``;
  a user's ``jac``/``hess``/``hessp`` called with ``*args`` exactly as SciPy calls them; a failing
  implicit solve that says which solve failed and what to try.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import extend
from tapegrad.scipy import optimize

RNG = np.random.default_rng(0)
A0 = RNG.standard_normal((3, 3)) + 3.0 * np.eye(3)
B0 = RNG.standard_normal(3)
C0 = RNG.standard_normal(3)


# ---- the constructs, as functions of a scalar s that moves the matrix, and their twins ---------------
def _matrix(s):
    return A0 + s * np.diag([1.0, 2.0, -0.5]) + s ** 2 * np.ones((3, 3)) * 0.1


def linear_solve_f(s):
    a = _matrix(s)
    x = tg.custom_linear_solve(lambda v: a @ v, B0 * (1.0 + s), lambda mv, r: tnp.linalg.solve(a, r),
                               transpose_solve=lambda vm, r: tnp.linalg.solve(a.T, r))
    return tnp.sum(C0 * x)


def linear_solve_twin(s):
    return tnp.sum(C0 * tnp.linalg.solve(_matrix(s), B0 * (1.0 + s)))


def _root_residual(a, b):
    return lambda x: a @ x + 0.3 * x ** 3 - b


def _newton(a, b, x, steps):
    for _ in range(steps):
        x = x - tnp.linalg.solve(a + 0.9 * tnp.diag(x ** 2), _root_residual(a, b)(x))
    return x


def root_f(s):
    a, b = _matrix(s), B0 * (1.0 + s)
    # solve iterates on constants; tangent_solve closes over a, which is differentiated
    x = tg.custom_root(_root_residual(a, b), np.zeros(3),
                       lambda f, x0: _newton(tg.stop_gradient(a), tg.stop_gradient(b), x0, 30),
                       lambda g, y: tnp.linalg.solve(a + 0.9 * tnp.diag(_newton(a, b, np.zeros(3), 30) ** 2), y))
    return tnp.sum(C0 * x)


def root_twin(s):
    # Newton's iteration unrolled: its derivatives converge with it (quadratically), to the implicit ones
    return tnp.sum(C0 * _newton(_matrix(s), B0 * (1.0 + s), np.zeros(3), 30))


CONSTRUCTS = {"custom_linear_solve": (linear_solve_f, linear_solve_twin), "custom_root": (root_f, root_twin)}
S = np.array(0.3)
SS = np.array([0.3, -0.2, 0.5])


def _nest(transform, f, k):
    for _ in range(k):
        f = transform(f)
    return f


ROUTES = {
    "grad": lambda f, k: _nest(tg.grad, f, k),
    "jacrev": lambda f, k: _nest(tg.jacrev, f, k),
    "jacfwd-of-jacrev": lambda f, k: tg.jacfwd(_nest(tg.jacrev, f, k - 1)),
    "jacfwd": lambda f, k: _nest(tg.jacfwd, f, k),
    "vmap": lambda f, k: tg.vmap(_nest(tg.grad, f, k)),
    "jit-outside": lambda f, k: tg.jit(_nest(tg.grad, f, k)),
    "jit-inside": lambda f, k: _nest(tg.grad, tg.jit(f), k),
    "grad-of-hessian": lambda f, k: tg.grad(tg.hessian(f)) if k == 3 else _nest(tg.grad, f, k),
}


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("construct", list(CONSTRUCTS))
def test_closed_over_matrix_every_order(construct, route, order):
    f, twin = CONSTRUCTS[construct]
    x = SS if route == "vmap" else S
    got, want = ROUTES[route](f, order)(x), ROUTES[route](twin, order)(x)
    assert np.all(np.abs(want) > 1e-3)  # no order vanishes, so agreement means something
    assert_close(got, want, rtol=1e-9, err_msg=f"{route} of order {order} through {construct}")


def test_linear_solve_closed_form_gradient():
    """JAX's closed form: with x = A^-1 b and L = c.x, dL/dA = -lam x^T and dL/db = lam, lam = A^-T c."""
    def loss(a, b):
        x = tg.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: tnp.linalg.solve(a, r),
                                   transpose_solve=lambda vm, r: tnp.linalg.solve(a.T, r))
        return tnp.sum(C0 * x)
    ga, gb = tg.grad(loss, grad_position=(0, 1))(A0, B0)
    x, lam = np.linalg.solve(A0, B0), np.linalg.solve(A0.T, C0)
    assert_close(ga, -np.outer(lam, x))
    assert_close(gb, lam)
    # symmetric: solve serves as transpose_solve, closing over the matrix too
    spd = A0 @ A0.T
    g_sym = tg.grad(lambda a: tnp.sum(C0 * tg.custom_linear_solve(lambda v: a @ v, B0,
                                                                 lambda mv, r: tnp.linalg.solve(a, r),
                                                                 symmetric=True)))(spd)
    assert_close(g_sym, -np.outer(np.linalg.solve(spd, C0), np.linalg.solve(spd, B0)))


def test_root_tangent_solve_closing_over_the_matrix():
    """The issue's case: custom_root(f, x0, solve, lambda g, y: solve(A, y)) with A differentiated."""
    def loss(a, b):
        x = tg.custom_root(lambda x: a @ x - b, np.zeros(3), lambda f, x0: tnp.linalg.solve(a, b),
                           lambda g, y: tnp.linalg.solve(a, y))
        return tnp.sum(C0 * x)
    ga, gb = tg.grad(loss, grad_position=(0, 1))(A0, B0)
    lam = np.linalg.solve(A0.T, C0)
    assert_close(ga, -np.outer(lam, np.linalg.solve(A0, B0)))
    assert_close(gb, lam)
    # jacfwd, and under vmap over a batch of right-hand sides
    assert_close(tg.jacfwd(loss, grad_position=1)(A0, B0), lam)
    bs = np.stack([B0, 2 * B0, -B0])
    assert_close(tg.vmap(tg.grad(loss), in_axes=(None, 0))(A0, bs), np.stack([-np.outer(lam, np.linalg.solve(A0, b))
                                                                              for b in bs]))


def test_solvers_that_iterate_in_python_still_work():
    """A solve that converts to NumPy (it cannot be staged) and closes over no traced value runs as it is."""
    def host_solve(mv, r):
        m = np.stack([np.asarray(mv(e)) for e in np.eye(3)], axis=1)
        return np.linalg.solve(m, np.asarray(r))

    def loss(b):
        return tnp.sum(C0 * tg.custom_linear_solve(lambda v: A0 @ v, b, host_solve, transpose_solve=host_solve))
    assert_close(tg.grad(loss)(B0), np.linalg.solve(A0.T, C0))


@pytest.mark.peer("jax")
def test_closed_over_matrix_matches_jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_linear(a, b):
        x = jax.lax.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: jnp.linalg.solve(a, r),
                                        transpose_solve=lambda vm, r: jnp.linalg.solve(a.T, r))
        return jnp.sum(C0 * x)

    def ours_linear(a, b):
        x = tg.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: tnp.linalg.solve(a, r),
                                   transpose_solve=lambda vm, r: tnp.linalg.solve(a.T, r))
        return tnp.sum(C0 * x)
    for ours, theirs in zip(tg.grad(ours_linear, grad_position=(0, 1))(A0, B0), jax.grad(jax_linear, (0, 1))(A0, B0)):
        assert_close(ours, np.asarray(theirs))
    assert_close(tg.hessian(ours_linear, grad_position=1)(A0, B0), np.asarray(jax.hessian(jax_linear, 1)(A0, B0)),
                 scale=1.0)

    def jax_root(a, b):
        x = jax.lax.custom_root(lambda x: a @ x + 0.3 * x ** 3 - b, jnp.zeros(3),
                                lambda f, x0: _jax_newton(a, b, x0, jnp),
                                lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y), y))
        return jnp.sum(C0 * x)

    def ours_root(a, b):
        x = tg.custom_root(_root_residual(a, b), np.zeros(3),
                           lambda f, x0: _newton(tg.stop_gradient(a), tg.stop_gradient(b), x0, 30),
                           lambda g, y: tnp.linalg.solve(tg.jacfwd(g)(y), y))
        return tnp.sum(C0 * x)
    for ours, theirs in zip(tg.grad(ours_root, grad_position=(0, 1))(A0, B0), jax.grad(jax_root, (0, 1))(A0, B0)):
        assert_close(ours, np.asarray(theirs), rtol=1e-10)


def _jax_newton(a, b, x, jnp):
    for _ in range(30):
        x = x - jnp.linalg.solve(a + 0.9 * jnp.diag(x ** 2), a @ x + 0.3 * x ** 3 - b)
    return x


# ---- tapegrad.scipy.optimize on models with loops ---------------------------------------------------
TARGET = np.array([[1.0, 2.0], [1.5, 3.0], [2.0, 4.5]])


def scan_model(th, a):
    def body(y, _):
        y = y * th + a
        return y, y
    _, ys = tg.scan(body, tnp.ones(2), None, length=3)
    return ys


def fori_model(th, a):
    return tg.fori_loop(0, 3, lambda i, y: y * th + a * (i + 1), tnp.ones(2))


def _scan_loss(th, a):
    return tnp.sum((scan_model(th, a) - TARGET) ** 2) + 0.1 * tnp.sum(th ** 2)


def _fori_loss(th, a):
    return tnp.sum((fori_model(th, a) - TARGET[-1]) ** 2) + 0.1 * tnp.sum(th ** 2)


def _fixed_point_map(th, a):
    return 0.5 * tnp.tanh(scan_model(th, a)[-1] * 0.1) + a


SOLVES = {
    "minimize-scan": lambda a, **kw: optimize.minimize(_scan_loss, np.array([0.5, 1.0]), args=(a,), **kw).x,
    "minimize-fori_loop": lambda a, **kw: optimize.minimize(_fori_loss, np.array([0.5, 1.0]), args=(a,), **kw).x,
    "root-scan": lambda a, **kw: optimize.root(lambda th, a: tg.grad(_scan_loss)(th, a), np.array([0.9, 1.4]),
                                               args=(a,), **kw).x,
    "least_squares-scan": lambda a, **kw: optimize.least_squares(
        lambda th, a: tnp.concatenate([tnp.ravel(scan_model(th, a) - TARGET), 0.3 * th]), np.array([0.5, 1.0]),
        args=(a,), **kw).x,
    "fixed_point-scan": lambda a, **kw: optimize.fixed_point(_fixed_point_map, np.array([0.5, 0.5]), args=(a,),
                                                            **kw),
}


@pytest.mark.parametrize("name", list(SOLVES))
def test_default_implicit_solve_on_loop_models(name):
    """The default implicit_solve differentiates a solution of a scan/fori_loop model (it raised before),
    agreeing with 'cg'/'gmres' and with central differences of re-solving."""
    solve, a = SOLVES[name], np.array(0.3)
    jac = tg.jacrev(solve)(a)
    other = "gmres" if name.startswith(("root", "fixed_point")) else "cg"
    assert_close(jac, tg.jacrev(lambda a: solve(a, implicit_solve=other))(a), rtol=1e-6)
    h = 1e-5
    fd = (solve(a + h) - solve(a - h)) / (2 * h)
    # central differences of a solution good to the solver's tolerance (~1e-8): error ~ 1e-8 / h + h^2
    assert_close(jac, fd, rtol=1e-6, atol=2e-3 * np.abs(fd).max())
    # and a second order, forward over reverse
    assert np.all(np.isfinite(tg.jacfwd(tg.jacrev(solve))(a)))


# ---- a user's jac, hess and hessp get *args, as SciPy gives them ------------------------------------
def _recorder(calls, name, fn):
    def record(*xs):
        calls.append((name, len(xs), [np.asarray(v).tolist() for v in xs[1:]]))
        return fn(*xs)
    return record


@pytest.mark.parametrize("method, keys", [("BFGS", ("jac",)), ("Newton-CG", ("jac", "hess")),
                                          ("trust-ncg", ("jac", "hessp"))])
def test_user_derivatives_get_args_as_scipy_gives_them(method, keys):
    import scipy.optimize
    a = np.array([1.0, -2.0])
    funs = {"jac": lambda x, a: 2 * (x - a), "hess": lambda x, a: 2 * np.eye(2),
            "hessp": lambda x, p, a: 2 * np.asarray(p)}
    ours, theirs = [], []
    got = optimize.minimize(lambda x, a: tnp.sum((x - a) ** 2), np.zeros(2), args=(a,), method=method,
                            **{k: _recorder(ours, k, funs[k]) for k in keys})
    want = scipy.optimize.minimize(lambda x, a: np.sum((x - a) ** 2), np.zeros(2), args=(a,), method=method,
                                   **{k: _recorder(theirs, k, funs[k]) for k in keys})
    assert ours == theirs and ours  # the same calls, with the same extra arguments
    assert_close(got.x, want.x)


def test_root_and_least_squares_jac_get_args():
    a = np.array([1.0, -2.0])
    got = optimize.root(lambda x, a: x ** 3 - a, np.ones(2), args=(a,), jac=lambda x, a: np.diag(3 * x ** 2)).x
    assert_close(got, np.cbrt(a))
    fit = optimize.least_squares(lambda x, a, scale=1.0: scale * (x - a), np.zeros(2), args=(a,),
                                 kwargs={"scale": 2.0}, jac=lambda x, a, scale=1.0: scale * np.eye(2)).x
    assert_close(fit, a)


# ---- an implicit solve that fails says which one and what to try ------------------------------------
# unregistered (extend.Primitive, not extend.primitive): the registry's completeness tests must not see it
_no_jvp_p = extend.Primitive("tests.square_without_jvp")
_no_jvp_p.def_impl(lambda x: x * x)
_no_jvp_p.def_abstract_eval(extend.unary_abstract_eval)
extend.defvjp(_no_jvp_p, lambda ct, ans, x: 2.0 * x * ct)


def test_a_failing_implicit_solve_names_itself():
    def loss(x, a):
        return tnp.sum(extend.bind(_no_jvp_p, x - a))  # reverse mode only: the dense solve needs forward mode
    a = np.array([1.0, 2.0])
    assert_close(optimize.minimize(loss, np.zeros(2), args=(a,)).x, a, atol=1e-5)
    with pytest.raises(NotImplementedError, match=r"minimize: the implicit derivative failed differentiating f at "
                                                  r"the root: jvp rule for 'tests.square_without_jvp'.*optimality "
                                                  r"condition.*needs its jvp and vjp rules"):
        tg.grad(lambda a: tnp.sum(optimize.minimize(loss, np.zeros(2), args=(a,)).x))(a)
    # and the library is usable after it
    assert_close(tg.grad(lambda a: tnp.sum(optimize.minimize(lambda x, a: tnp.sum((x - a) ** 2), np.zeros(2),
                                                             args=(a,)).x))(a), np.ones(2))


@pytest.mark.parametrize("method", ["Newton-CG", "trust-exact", "trust-ncg", "BFGS"])
def test_an_x0_of_several_axes_with_tapegrads_and_a_users_derivatives(method):
    """SciPy sees x flattened: tapegrad's own Hessian, and a user's jac/hess/hessp that get x (and p) in
    x0's shape, are handed back to it flattened."""
    a = np.arange(4.0).reshape(2, 2)

    def fun(x, a):
        return tnp.sum((x - a) ** 2) + 0.1 * tnp.sum(x ** 4)
    want = optimize.minimize(fun, np.zeros((2, 2)), args=(a,), method=method).x
    assert want.shape == (2, 2)
    users = {"jac": lambda x, a: 2 * (x - a) + 0.4 * x ** 3}
    if method in ("Newton-CG", "trust-exact"):
        users["hess"] = lambda x, a: np.diag((2 + 1.2 * x ** 2).ravel())
    if method == "trust-ncg":
        users["hessp"] = lambda x, p, a: (2 + 1.2 * x ** 2) * p
    got = optimize.minimize(fun, np.zeros((2, 2)), args=(a,), method=method, **users).x
    assert got.shape == (2, 2)
    assert_close(got, want, rtol=1e-6)
