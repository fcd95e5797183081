"""Nesting: perturbation confusion, higher order to any depth, and routes that must agree."""
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import trace_stack


def test_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] at x = 1 is 1, not 2 (Siskind and Pearlmutter)
    def f(x):
        return x * tg.grad(lambda y: x + y)(1.0)
    assert tg.grad(f)(1.0) == pytest.approx(1.0)

    def g(x):  # the inner function closes over x and differentiates with respect to it too
        return tg.grad(lambda y: x * y)(x)
    assert tg.grad(g)(3.0) == pytest.approx(1.0)


def test_tenth_derivative_of_sin():
    f = tnp.sin
    for _ in range(10):
        f = tg.grad(f)
    x = np.array(0.7)
    np.testing.assert_allclose(f(x), -np.sin(x), rtol=1e-12)


@pytest.mark.parametrize("n", range(1, 7))
def test_nth_derivative_of_exp_times_polynomial(n):
    f = lambda x: tnp.exp(2.0 * x) * x  # noqa: E731  d^n/dx^n = 2^n e^{2x} x + n 2^{n-1} e^{2x}
    for _ in range(n):
        f = tg.grad(f)
    x = 0.3
    np.testing.assert_allclose(f(x), 2 ** n * math.exp(2 * x) * x + n * 2 ** (n - 1) * math.exp(2 * x), rtol=1e-10)


def _hessian_by_grad_of_grad(f, x):
    return np.stack([tg.grad(lambda x: tg.grad(f)(x)[i])(x) for i in range(x.size)])


def test_hessian_routes_agree():
    a = np.array([[2.0, 1.0, 0.0], [0.5, -1.0, 3.0]])

    def f(x):
        return tnp.sum(tnp.exp(a @ x)) + 0.5 * tnp.sum(x ** 3)
    x = np.array([0.1, -0.2, 0.3])
    analytic = a.T @ np.diag(np.exp(a @ x)) @ a + np.diag(3 * x)
    np.testing.assert_allclose(_hessian_by_grad_of_grad(f, x), analytic, rtol=1e-12)
    # vjp of grad with basis cotangents
    _, pullback = tg.vjp(tg.grad(f), x)
    rows = np.stack([pullback(e)[0] for e in np.eye(3)])
    np.testing.assert_allclose(rows, analytic, rtol=1e-12)


def test_grad_of_vjp_and_vjp_of_vjp():
    f = lambda x: tnp.sin(x) * x  # noqa: E731
    x = np.array([0.5, 1.5])
    df = lambda x: np.cos(x) * x + np.sin(x)  # noqa: E731
    d2f = lambda x: -np.sin(x) * x + 2 * np.cos(x)  # noqa: E731
    ct = np.array([2.0, -1.0])
    g = tg.grad(lambda x: tg.vjp(f, x)[1](ct)[0].sum())(x)
    np.testing.assert_allclose(g, ct * d2f(x))
    out, pullback = tg.vjp(lambda x: tg.vjp(f, x)[1](ct)[0], x)
    np.testing.assert_allclose(out, ct * df(x))
    np.testing.assert_allclose(pullback(np.ones(2))[0], ct * d2f(x))


def test_gradient_with_respect_to_cotangent():
    # vjp is linear in the cotangent; its gradient there is the Jacobian row sums
    x = np.array([0.5, 1.5])
    g = tg.grad(lambda ct: tg.vjp(lambda x: x * x, x)[1](ct)[0].sum())(np.ones(2))
    np.testing.assert_allclose(g, 2 * x)


def test_nested_weights_substitution():
    w = tg.Parameter(np.array(3.0), name="w")

    def inner(x):
        return tg.grad(lambda x: w * x * x, grad_position=None, weights=w)(x)  # d/dw = x^2

    def outer(x):
        return inner(x) * w  # x^2 * w
    gx, gw = tg.grad(outer, grad_position=0, weights=w)(np.array(2.0))
    np.testing.assert_allclose(gx, 2 * 2.0 * 3.0)
    np.testing.assert_allclose(gw, 4.0)
    assert trace_stack() == ()


def test_long_chain_has_no_recursion_limit():
    def f(x):
        for _ in range(100_000):
            x = x + 1e-5
        return x.sum()
    np.testing.assert_allclose(tg.grad(f)(np.ones(2)), [1.0, 1.0])


def test_grad_of_grad_on_tape_of_reused_values():
    def f(x):
        y = x * x
        return y * y + y  # x^4 + x^2
    x = 1.5
    np.testing.assert_allclose(tg.grad(tg.grad(f))(x), 12 * x ** 2 + 2)


def test_leaked_tracer_is_reported():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0
    tg.grad(f)(1.0)
    with pytest.raises(RuntimeError, match="leaked"):
        leaked[0] * 3.0  # on its own
    with pytest.raises(RuntimeError, match="leaked"):
        tg.grad(lambda y: y * leaked[0])(1.0)  # beside a live tracer of the same level
    assert trace_stack() == ()
