"""Nesting: perturbation confusion, higher order to any depth, and routes that must agree."""
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack


def test_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] at x = 1 is 1, not 2 (Siskind and Pearlmutter)
    def f(x):
        return x * tg.grad(lambda y: x + y)(1.0)
    assert_close(tg.grad(f)(1.0), 1.0)

    def g(x):  # the inner function closes over x and differentiates with respect to it too
        return tg.grad(lambda y: x * y)(x)
    assert_close(tg.grad(g)(3.0), 1.0)


def test_tenth_derivative_of_sin():
    f = tnp.sin
    for _ in range(10):
        f = tg.grad(f)
    x = np.array(0.7)
    assert_close(f(x), -np.sin(x), rtol=1e-12)


@pytest.mark.parametrize("n", range(1, 7))
def test_nth_derivative_of_exp_times_polynomial(n):
    f = lambda x: tnp.exp(2.0 * x) * x  # noqa: E731  d^n/dx^n = 2^n e^{2x} x + n 2^{n-1} e^{2x}
    for _ in range(n):
        f = tg.grad(f)
    x = 0.3
    assert_close(f(x), 2 ** n * math.exp(2 * x) * x + n * 2 ** (n - 1) * math.exp(2 * x), rtol=1e-10)


def _hessian_by_grad_of_grad(f, x):
    return np.stack([tg.grad(lambda x, i=i: tg.grad(f)(x)[i])(x) for i in range(x.size)])


def test_hessian_routes_agree():
    a = np.array([[2.0, 1.0, 0.0], [0.5, -1.0, 3.0]])

    def f(x):
        return tnp.sum(tnp.exp(a @ x)) + 0.5 * tnp.sum(x ** 3)
    x = np.array([0.1, -0.2, 0.3])
    analytic = a.T @ np.diag(np.exp(a @ x)) @ a + np.diag(3 * x)
    assert_close(_hessian_by_grad_of_grad(f, x), analytic, rtol=1e-12)
    # vjp of grad with basis cotangents
    _, pullback = tg.vjp(tg.grad(f), x)
    rows = np.stack([pullback(e)[0] for e in np.eye(3)])
    assert_close(rows, analytic, rtol=1e-12)


def test_grad_of_vjp_and_vjp_of_vjp():
    f = lambda x: tnp.sin(x) * x  # noqa: E731
    x = np.array([0.5, 1.5])
    df = lambda x: np.cos(x) * x + np.sin(x)  # noqa: E731
    d2f = lambda x: -np.sin(x) * x + 2 * np.cos(x)  # noqa: E731
    ct = np.array([2.0, -1.0])
    g = tg.grad(lambda x: tg.vjp(f, x)[1](ct)[0].sum())(x)
    assert_close(g, ct * d2f(x))
    out, pullback = tg.vjp(lambda x: tg.vjp(f, x)[1](ct)[0], x)
    assert_close(out, ct * df(x))
    assert_close(pullback(np.ones(2))[0], ct * d2f(x))


def test_gradient_with_respect_to_cotangent():
    # vjp is linear in the cotangent; its gradient there is the Jacobian row sums
    x = np.array([0.5, 1.5])
    g = tg.grad(lambda ct: tg.vjp(lambda x: x * x, x)[1](ct)[0].sum())(np.ones(2))
    assert_close(g, 2 * x)


def test_nested_weights_substitution():
    w = tg.Parameter(np.array(3.0), name="w")

    def inner(x):
        return tg.grad(lambda x: w * x * x, grad_position=None, weights=w)(x)  # d/dw = x^2

    def outer(x):
        return inner(x) * w  # x^2 * w
    gx, gw = tg.grad(outer, grad_position=0, weights=w)(np.array(2.0))
    assert_close(gx, 2 * 2.0 * 3.0)
    assert_close(gw, 4.0)
    assert trace_stack() == ()


def test_long_chain_has_no_recursion_limit():
    def f(x):
        for _ in range(100_000):
            x = x + 1e-5
        return x.sum()
    assert_close(tg.grad(f)(np.ones(2)), [1.0, 1.0])


def test_grad_of_grad_on_tape_of_reused_values():
    def f(x):
        y = x * x
        return y * y + y  # x^4 + x^2
    x = 1.5
    assert_close(tg.grad(tg.grad(f))(x), 12 * x ** 2 + 2)


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


# ---- vmap routes: every combination with grad, jvp, vjp, jacobians and itself ---------------------
def _batch(rng, n=4, shape=(3,)):
    return rng.normal(size=(n,) + shape)


def _f(x):
    return tnp.sum(tnp.sin(x) * tnp.exp(0.5 * x)) + tnp.sum(x) ** 2


def test_vmap_of_grad_is_per_example_gradients():
    xs = _batch(np.random.default_rng(0))
    assert_close(tg.vmap(tg.grad(_f))(xs), np.stack([tg.grad(_f)(x) for x in xs]), rtol=1e-12)


def test_grad_of_vmap_is_gradient_of_the_sum():
    xs = _batch(np.random.default_rng(1))
    g = tg.grad(lambda xs: tnp.sum(tg.vmap(_f)(xs)))(xs)
    assert_close(g, np.stack([tg.grad(_f)(x) for x in xs]), rtol=1e-12)


def test_vmap_of_vmap_maps_two_axes():
    xs = np.random.default_rng(2).normal(size=(3, 4, 5))
    f = lambda x: tnp.tanh(x) @ tnp.cos(x)  # noqa: E731  a scalar per (i, j)
    out = tg.vmap(tg.vmap(f, in_axes=0), in_axes=1)(xs)
    assert_close(out, np.array([[np.tanh(xs[i, j]) @ np.cos(xs[i, j]) for i in range(3)]
                                              for j in range(4)]), rtol=1e-12)


def test_vmap_of_jvp_and_jvp_of_vmap():
    rng = np.random.default_rng(3)
    xs, ts = _batch(rng), _batch(rng)
    per_example = np.stack([tg.jvp(_f, (x,), (t,))[1] for x, t in zip(xs, ts)])
    assert_close(tg.vmap(lambda x, t: tg.jvp(_f, (x,), (t,))[1])(xs, ts), per_example, rtol=1e-12)
    assert_close(tg.jvp(tg.vmap(_f), (xs,), (ts,))[1], per_example, rtol=1e-12)


def test_vmap_of_vjp_with_a_shared_primal():
    rng = np.random.default_rng(4)
    x, cts = rng.normal(size=3), rng.normal(size=(5, 3))
    f = lambda x: tnp.sin(x) * tnp.sum(x ** 2)  # noqa: E731
    _, pullback = tg.vjp(f, x)
    assert_close(tg.vmap(pullback)(cts)[0], np.stack([pullback(c)[0] for c in cts]), rtol=1e-12)


def test_vmap_of_grad_of_grad_and_grad_of_vmap_of_grad():
    xs = _batch(np.random.default_rng(5), shape=())
    f = lambda x: tnp.sin(x) * x ** 3  # noqa: E731
    d2 = tg.grad(tg.grad(f))
    assert_close(tg.vmap(d2)(xs), [d2(x) for x in xs], rtol=1e-12)
    g = tg.grad(lambda xs: tnp.sum(tg.vmap(tg.grad(f))(xs)))(xs)
    assert_close(g, [d2(x) for x in xs], rtol=1e-12)


def test_vmap_of_hessian_and_jacobians_of_vmap():
    xs = _batch(np.random.default_rng(6))
    hs = tg.vmap(tg.hessian(_f))(xs)
    assert_close(hs, np.stack([tg.hessian(_f)(x) for x in xs]), rtol=1e-10)
    jac = tg.jacrev(tg.vmap(_f))(xs)  # (4,) + (4, 3): block diagonal in the examples
    expected = np.zeros((4, 4, 3))
    for i, x in enumerate(xs):
        expected[i, i] = tg.grad(_f)(x)
    assert_close(jac, expected, rtol=1e-12)
    assert_close(tg.jacfwd(tg.vmap(_f))(xs), expected, rtol=1e-12)


def test_perturbation_confusion_across_vmap_and_grad():
    # vmap over y of d/dx [x * d/dy (x * y)] keeps the two perturbations apart: d/dx [x * x] = 2x
    ys = np.array([1.0, 2.0, 3.0])
    out = tg.vmap(lambda y: tg.grad(lambda x: x * tg.grad(lambda y: x * y)(y))(1.5))(ys)
    assert_close(out, [3.0, 3.0, 3.0])


def test_vmap_of_custom_rules_and_checkpoint_keep_their_rules():
    @tg.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (tnp.clip(g, -1.0, 1.0),))
    xs = np.array([0.5, -2.0, 3.0])
    # each example's gradient of 5 * x is clipped to 1
    assert_close(tg.vmap(tg.grad(lambda x: 5.0 * clip_gradient(x)))(xs), [1.0, 1.0, 1.0])
    assert_close(tg.grad(lambda xs: tnp.sum(tg.vmap(lambda x: 5.0 * clip_gradient(x))(xs)))(xs),
                 [1.0, 1.0, 1.0])
    g = tg.grad(lambda xs: tnp.sum(tg.vmap(tg.checkpoint(_f))(xs)))(xs[:, None] * np.ones(3))
    assert_close(g, np.stack([tg.grad(_f)(x) for x in xs[:, None] * np.ones(3)]), rtol=1e-12)


def test_vmap_leaves_the_trace_stack_empty_after_an_error():
    with pytest.raises(ValueError):
        tg.vmap(lambda x: tnp.reshape(x, (7,)))(np.ones((2, 3)))
    assert trace_stack() == ()


def test_vmap_edge_cases_constant_outputs_and_control_flow():
    xs = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(tg.vmap(lambda x: 1.0)(xs), np.ones(3))  # broadcast to the batch
    out, none = tg.vmap(lambda x: (x, None))(xs)
    assert none is None
    np.testing.assert_array_equal(tg.vmap(lambda: tnp.ones(2), axis_size=3)(), np.ones((3, 2)))
    with pytest.raises(tg.errors.ConcretizationError, match="tnp.where"):
        tg.vmap(lambda x: x if x[0] > 0 else -x)(xs)
    assert trace_stack() == ()


def test_check_grads_through_vmap_to_second_order_in_both_modes():
    from tapegrad.testing import check_grads
    rng = np.random.default_rng(7)
    xs, w = rng.normal(size=(4, 3)), rng.normal(size=(3, 2))
    f = lambda x, w: tnp.tanh(x @ w) * tnp.sum(x ** 2)  # noqa: E731
    check_grads(tg.vmap(f, in_axes=(0, None)), (xs, w), order=2, name="vmap of matmul-tanh")
    check_grads(tg.vmap(tg.grad(lambda x, w: tnp.sum(f(x, w))), in_axes=(0, None)), (xs, w), order=1,
                name="vmap of grad")
