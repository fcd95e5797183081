"""custom_jvp.defjvps (JAX's spelling: one jvp per differentiable argument, the output tangent their
sum): orders 1 to 3 by several routes against the same function without the rule, a rule that differs
from the function's own derivative (so it is seen to be used), pytree arguments, nondiff_argnums, None
entries, the errors, and the peer test against jax.custom_jvp.defjvps."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.testing import check_grads


def plain(x, y):
    return tnp.sin(x) * y + x * tnp.exp(y)


@tg.custom_jvp
def custom(x, y):
    return tnp.sin(x) * y + x * tnp.exp(y)


custom.defjvps(lambda g, ans, x, y: g * (tnp.cos(x) * y + tnp.exp(y)),
               lambda g, ans, x, y: g * (tnp.sin(x) + x * tnp.exp(y)))

X, Y = np.array([0.3, -1.2, 2.0]), np.array([0.5, 0.1, -0.7])


def _scalar(f):
    return lambda v: tnp.sum(f(v[:3], v[3:]))


ROUTES = {
    "grad": lambda f: tg.grad(_scalar(f)),
    "jit-grad": lambda f: tg.jit(tg.grad(_scalar(f))),
    "grad-jit": lambda f: tg.grad(tg.jit(_scalar(f))),
    "jacfwd": lambda f: tg.jacfwd(lambda v: f(v[:3], v[3:])),
    "hessian": lambda f: tg.hessian(_scalar(f)),
    "jacfwd-jacrev": lambda f: tg.jacfwd(tg.jacrev(_scalar(f))),
    "jit-hessian": lambda f: tg.jit(tg.hessian(_scalar(f))),
    "third-jacfwd-jacrev-jacrev": lambda f: tg.jacfwd(tg.jacrev(tg.jacrev(_scalar(f)))),
    "third-jacrev-hessian": lambda f: tg.jacrev(tg.hessian(_scalar(f))),
    "third-jacfwd-jacfwd-grad": lambda f: tg.jacfwd(tg.jacfwd(tg.grad(_scalar(f)))),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_every_route_and_order_agrees_with_the_function_without_the_rule(route):
    v = np.concatenate([X, Y])
    assert_close(ROUTES[route](custom)(v), ROUTES[route](plain)(v), rtol=1e-12)


def test_check_grads_to_third_order():
    check_grads(custom, (X, Y), order=3)


def test_vmap_of_grad_and_of_the_function():
    g = tg.grad(lambda x, y: tnp.sum(custom(x, y)), grad_position=(0, 1))
    xs, ys = np.stack([X, 2 * X]), np.stack([Y, Y - 1.0])
    got = tg.vmap(g)(xs, ys)
    for i in range(2):
        want = tg.grad(lambda x, y: tnp.sum(plain(x, y)), grad_position=(0, 1))(xs[i], ys[i])
        assert_close(got[0][i], want[0], rtol=1e-12)
        assert_close(got[1][i], want[1], rtol=1e-12)
    assert_close(tg.vmap(custom)(xs, ys), tg.vmap(plain)(xs, ys), rtol=1e-14)
    assert_close(tg.jit(tg.vmap(tg.jacfwd(custom)))(xs, ys), tg.vmap(tg.jacfwd(plain))(xs, ys), rtol=1e-12)


# ---- the rule is the one used --------------------------------------------------------------------
@tg.custom_jvp
def straight_through(x, scale):
    """round(x) * scale, whose rule ignores the rounding: d/dx = scale (the function's own is 0)."""
    return tnp.round(x) * scale


straight_through.defjvps(lambda g, ans, x, scale: g * scale, lambda g, ans, x, scale: g * tnp.round(x))


def test_the_rule_replaces_the_functions_own_derivative():
    x, scale = np.array([0.4, 1.6]), np.array(3.0)
    f = lambda x, s: tnp.sum(straight_through(x, s))
    gx, gs = tg.grad(f, grad_position=(0, 1))(x, scale)
    assert_close(gx, [3.0, 3.0])
    assert_close(gs, np.sum(np.round(x)))
    # second derivatives differentiate the rule: d/dscale of (d/dx = scale) is 1, but d/dx of
    # (d/dscale = round(x)) is round's own 0; the rule is no gradient field, so H is not symmetric
    assert_close(tg.hessian(lambda v: straight_through(v[0], v[1]))(np.array([0.4, 3.0])), [[0.0, 1.0], [0.0, 0.0]])
    _, t = tg.jvp(straight_through, (x, scale), (np.ones(2), np.array(0.0)))
    assert_close(t, [3.0, 3.0])


def test_none_is_a_zero_contribution():
    @tg.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda g, ans, x, y: g * y, None)  # y's contribution dropped on purpose
    gx, gy = tg.grad(lambda x, y: tnp.sum(f(x, y)), grad_position=(0, 1))(X, Y)
    assert_close(gx, Y)
    np.testing.assert_array_equal(gy, np.zeros(3))
    _, t = tg.jvp(f, (X, Y), (np.zeros(3), np.ones(3)))
    np.testing.assert_array_equal(t, np.zeros(3))

    @tg.custom_jvp
    def constant(x):
        return tnp.sin(x)

    constant.defjvps(None)  # every contribution None: a zero tangent of the output's shape
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(constant(x)))(X), np.zeros(3))


def test_ans_is_the_output():
    seen = []

    @tg.custom_jvp
    def f(x):
        return tnp.exp(x)

    def jvp(g, ans, x):
        seen.append(ans)
        return g * ans  # exp' = exp: the rule reads the output it is given
    f.defjvps(jvp)
    assert_close(tg.grad(lambda x: tnp.sum(f(x)))(X), np.exp(X))
    assert_close(seen[0], np.exp(X))
    check_grads(f, (X,), order=3)


# ---- pytrees and nondiff_argnums -----------------------------------------------------------------
def test_pytree_arguments_and_outputs():
    @tg.custom_jvp
    def f(params, x):
        return {"y": params["w"] * x + params["b"], "z": tnp.sum(x)}

    f.defjvps(lambda g, ans, params, x: {"y": g["w"] * x + g["b"], "z": 0.0},
              lambda g, ans, params, x: {"y": params["w"] * g, "z": tnp.sum(g)})
    params = {"w": np.array([1.0, 2.0, 3.0]), "b": np.array(0.5)}
    loss = lambda p, x: tnp.sum(f(p, x)["y"] ** 2) + f(p, x)["z"] ** 2
    want = tg.grad(lambda p, x: tnp.sum((p["w"] * x + p["b"]) ** 2) + tnp.sum(x) ** 2, grad_position=(0, 1))(params, X)
    got = tg.grad(loss, grad_position=(0, 1))(params, X)
    for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
        assert_close(g, w, rtol=1e-12)
    check_grads(lambda w, b, x: f({"w": w, "b": b}, x)["y"], (params["w"], params["b"], X), order=2)


def test_nondiff_argnums():
    @functools.partial(tg.custom_jvp, nondiff_argnums=(1,))
    def power_sum(x, n, y):
        return x ** n + n * y

    # one jvp per differentiable argument (x, y); each still sees every argument in its position
    power_sum.defjvps(lambda g, ans, x, n, y: n * x ** (n - 1) * g, lambda g, ans, x, n, y: n * g)
    reference = lambda x, y: x ** 3 + 3 * y
    for route in (tg.grad, lambda f: tg.jit(tg.grad(f)), lambda f: tg.grad(tg.grad(tg.grad(f)))):
        assert_close(route(lambda x: power_sum(x, 3, 0.5))(1.7), route(lambda x: reference(x, 0.5))(1.7), rtol=1e-12)
    assert_close(tg.grad(lambda y: power_sum(2.0, 3, y))(0.5), 3.0)
    check_grads(lambda x, y: power_sum(x, 3, y), (X, Y), order=3)


# ---- errors --------------------------------------------------------------------------------------
def test_wrong_number_of_jvps():
    @tg.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda g, ans, x, y: g * y)
    np.testing.assert_array_equal(f(X, Y), X * Y)  # no derivative asked: no rule runs
    with pytest.raises(TypeError, match=re.escape("f.defjvps was given 1 jvp functions, but the call has 2 "
                                                  "differentiable arguments")):
        tg.grad(lambda x: tnp.sum(f(x, Y)))(X)
    with pytest.raises(TypeError, match="give one function \\(or None\\) per differentiable argument"):
        f.defjvps()
    with pytest.raises(TypeError, match="per differentiable argument, got \\(2.0,\\)"):
        f.defjvps(2.0)


def test_contribution_of_the_wrong_structure():
    @tg.custom_jvp
    def f(x):
        return (tnp.sin(x), tnp.cos(x))

    f.defjvps(lambda g, ans, x: tnp.cos(x) * g)  # one array for a pair
    with pytest.raises(ValueError, match="f.defjvps: jvp 0 returned a tangent of structure"):
        tg.jvp(f, (X,), (np.ones(3),))

    f.defjvps(lambda g, ans, x: (tnp.cos(x) * g, tnp.ones(5)))  # the right structure, a wrong shape
    with pytest.raises(ValueError, match="has shape \\(5,\\)"):
        tg.jvp(f, (X,), (np.ones(3),))


# ---- against JAX ---------------------------------------------------------------------------------
@pytest.mark.peer("jax")
def test_matches_jax_defjvps():
    """The same function and rules in JAX and tapegrad: values, gradients, Hessians and a third
    derivative agree in float64. The rule for x is deliberately not the function's own derivative
    (a factor 2), so agreement means both use the rules."""
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    @jax.custom_jvp
    def jf(x, y):
        return jnp.sin(x) * y + x * jnp.exp(y)

    jf.defjvps(lambda g, ans, x, y: 2.0 * g * (jnp.cos(x) * y + jnp.exp(y)),
               lambda g, ans, x, y: g * (jnp.sin(x) + x * jnp.exp(y)) + 0.1 * g * ans)

    @tg.custom_jvp
    def tf(x, y):
        return tnp.sin(x) * y + x * tnp.exp(y)

    tf.defjvps(lambda g, ans, x, y: 2.0 * g * (tnp.cos(x) * y + tnp.exp(y)),
               lambda g, ans, x, y: g * (tnp.sin(x) + x * tnp.exp(y)) + 0.1 * g * ans)
    v = np.concatenate([X, Y])
    js = lambda v: jnp.sum(jf(v[:3], v[3:]))
    ts = lambda v: tnp.sum(tf(v[:3], v[3:]))
    assert_close(ts(v), float(js(v)), rtol=1e-14)
    assert_close(tg.grad(ts)(v), np.asarray(jax.grad(js)(v)), rtol=1e-12)
    assert_close(tg.jacfwd(lambda v: tf(v[:3], v[3:]))(v), np.asarray(jax.jacfwd(lambda v: jf(v[:3], v[3:]))(v)),
                 rtol=1e-12)
    assert_close(tg.hessian(ts)(v), np.asarray(jax.hessian(js)(v)), rtol=1e-12)
    assert_close(tg.jacfwd(tg.jacrev(tg.jacrev(ts)))(v), np.asarray(jax.jacfwd(jax.jacrev(jax.jacrev(js)))(v)),
                 rtol=1e-11)
    assert_close(tg.jit(tg.grad(ts))(v), np.asarray(jax.jit(jax.grad(js))(v)), rtol=1e-12)
