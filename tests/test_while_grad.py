"""Reverse mode through ``while_loop`` (which JAX refuses) and ``fori_loop`` with traced bounds: against
the same loop written in Python (its trip count read from the concrete values), eagerly, under
``jit`` (storing every step's residuals, or only checkpoints of the carry), under ``vmap`` with a
different trip count per example, and at second order."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _loops import halvings, python_halvings
from _tol import assert_close
from tapegrad._control_flow import _while_rev
from tapegrad.testing import check_grads

A = np.array([0.9, 1.3, -0.4])


def _step(c, a):
    return (c[0] + 1, tnp.sin(c[1]) * a + 0.1 * c[1])


def looped(a, n=5, **budget):
    """``n`` steps of a loop closing over ``a``, as a while_loop."""
    return tg.while_loop(lambda c: c[0] < n, lambda c: _step(c, a), (0, a), **budget)[1]


def unrolled(a, n=5):
    c = (0, a)
    for _ in range(n):
        c = _step(c, a)
    return c[1]


def _sum(f, **kw):
    return lambda a: tnp.sum(f(a, **kw))


def newton_sqrt(x, tol=1e-12, **budget):
    """Newton's iteration for sqrt(x), stopped by a tolerance: its trip count depends on x."""
    y, _ = tg.while_loop(lambda c: tnp.abs(c[0] - c[1]) > tol * c[0], lambda c: (0.5 * (c[0] + x / c[0]), c[0]),
                         (x, 2.0 * x + 1.0), **budget)
    return y


def python_newton(x, tol=1e-12):
    """The same iteration as a Python loop (each test reads the traced value: fine eagerly)."""
    y, previous = x, 2.0 * x + 1.0
    while tnp.abs(y - previous) > tol * y:
        y, previous = 0.5 * (y + x / y), y
    return y


@pytest.mark.parametrize("n", [0, 1, 4])
def test_grad_equals_the_python_loop_eagerly_and_under_jit(n):
    want = tg.grad(_sum(unrolled, n=n))(A)
    assert_close(tg.grad(_sum(looped, n=n))(A), want)
    assert_close(tg.jit(tg.grad(_sum(looped, n=n)))(A), want)
    assert_close(tg.grad(tg.jit(_sum(looped, n=n)))(A), want)
    out, pullback = tg.vjp(lambda a: looped(a, n), A)
    assert_close(out, unrolled(A, n))
    assert_close(pullback(np.array([1.0, -2.0, 0.5]))[0],
                 tg.vjp(lambda a: unrolled(a, n), A)[1](np.array([1.0, -2.0, 0.5]))[0])


def test_check_grads_to_second_order_in_both_modes_and_under_jit_and_vmap():
    check_grads(looped, (A,), order=2)
    check_grads(tg.jit(looped), (A,), order=2)
    check_grads(tg.vmap(looped), (A[:, None],), order=2)
    check_grads(newton_sqrt, (np.array(7.0),), order=2)  # away from a change of trip count
    assert_close(tg.hessian(_sum(looped))(A), tg.hessian(_sum(unrolled))(A))
    assert_close(tg.grad(tg.grad(newton_sqrt))(np.array(9.0)), tg.grad(tg.grad(python_newton))(np.array(9.0)))
    v = np.array([1.0, -1.0, 2.0])
    assert_close(tg.jvp(tg.grad(_sum(looped)), (A,), (v,))[1], tg.jvp(tg.grad(_sum(unrolled)), (A,), (v,))[1])
    assert_close(tg.grad(tg.grad(tg.jit(newton_sqrt)))(np.array(9.0)), -0.25 * 9.0 ** -1.5)


def test_newton_sqrt_with_a_tolerance_matches_the_python_loop():
    for x in (2.0, 9.0, 1e4):
        x = np.array(x)
        assert_close(newton_sqrt(x), np.sqrt(x))
        want = tg.grad(python_newton)(x)
        assert_close(want, 0.5 / np.sqrt(x))
        for route in (tg.grad, lambda f: tg.jit(tg.grad(f))):
            assert_close(route(newton_sqrt)(x), want)


def test_a_trip_count_decided_by_the_input_and_per_example_under_vmap():
    vs = np.array([0.05, 0.7, 3.0, 40.0])  # 0, 3, 5 and 9 steps
    counts = [python_halvings(v)[0] for v in vs]
    assert len(set(counts)) == 4
    want = np.array([tg.grad(lambda v: python_halvings(v)[1])(v) for v in vs])
    f = tg.grad(lambda v: halvings(v)[1])
    assert_close(np.array([f(v) for v in vs]), want)
    for route in (tg.vmap(f), tg.jit(tg.vmap(f)), tg.vmap(tg.jit(f))):
        assert_close(route(vs), want)
    newton_want = 0.5 / np.sqrt(vs + 1.0)
    assert_close(tg.vmap(tg.grad(newton_sqrt))(vs + 1.0), newton_want)
    assert_close(tg.jit(tg.vmap(tg.grad(newton_sqrt)))(vs + 1.0), newton_want)
    # the Hessian of a batch, each example at its own trip count
    assert_close(tg.vmap(tg.grad(tg.grad(newton_sqrt)))(vs + 1.0), -0.25 * (vs + 1.0) ** -1.5)


@pytest.mark.python_executor  # the Python loop's residual counters
def test_jit_stores_the_residuals_in_one_equation():
    program = tg.make_program(tg.grad(_sum(looped)))(A)
    names = [eqn.prim.name for eqn in program.eqns]
    assert names.count("while_grad") == 1  # the forward loop, storing, and the backward loop
    value, slope = tg.jit(tg.value_and_grad(_sum(looped)))(A)
    assert_close(value, tnp.sum(unrolled(A)))
    assert_close(slope, tg.grad(_sum(unrolled))(A))
    assert _while_rev.STORED["steps"] == 5 and _while_rev.STORED["carries"] == 0


@pytest.mark.parametrize("n,max_steps,checkpoints", [(0, 4, 2), (5, 5, 5), (9, 12, 3), (10, 10, 1), (7, 100, 10)])
def test_checkpoints_give_the_same_numbers_within_the_budget(n, max_steps, checkpoints):
    want = tg.grad(_sum(unrolled, n=n))(A)
    f = _sum(looped, n=n, max_steps=max_steps, checkpoints=checkpoints)
    for route in (tg.grad, lambda f: tg.jit(tg.grad(f))):
        assert_close(route(f)(A), want)
        segment = math.ceil(max_steps / checkpoints)
        assert _while_rev.STORED["carries"] <= checkpoints
        assert _while_rev.STORED["carries"] == math.ceil(n / segment)
        assert _while_rev.STORED["steps"] == min(segment, n)
    assert_close(tg.vmap(tg.grad(f))(np.stack([A, 2 * A])), np.stack([want, tg.grad(_sum(unrolled, n=n))(2 * A)]))
    assert_close(f(A), tnp.sum(unrolled(A, n)))


def test_fori_loop_with_traced_bounds_differentiates_in_reverse_mode():
    def body(i, y):
        return y * tnp.cos(y) + 0.1 * i

    def f(lower, upper, y):
        return tnp.sum(tg.fori_loop(lower, upper, body, y))

    def python(lower, upper, y):
        for i in range(lower, upper):
            y = body(i, y)
        return tnp.sum(y)
    for lower, upper in ((0, 0), (0, 3), (2, 6)):
        want = tg.grad(python, 2)(lower, upper, A)
        bounds = (np.array(lower), np.array(upper))
        assert_close(tg.jit(tg.grad(f, 2))(*bounds, A), want)
        assert_close(tg.grad(f, 2)(*bounds, A), want)
    check_grads(lambda y: f(np.array(1), np.array(4), y), (A,), order=2)
    uppers = np.array([1, 3, 4])  # a trip count per example
    assert_close(tg.vmap(tg.grad(f, 2), in_axes=(None, 0, None))(np.array(0), uppers, A),
                 np.stack([tg.grad(python, 2)(0, int(u), A) for u in uppers]))


def test_errors_name_the_argument_and_leave_the_library_working():
    forever = (lambda c: c < 1e300, lambda c: c * 2.0)
    for route in (lambda f: f, tg.grad, lambda f: tg.jit(tg.grad(f))):
        with pytest.raises(RuntimeError, match="max_steps=8 steps; raise max_steps"):
            route(lambda x: tg.while_loop(*forever, x, max_steps=8))(np.array(1.0))
        with pytest.raises(RuntimeError, match="max_steps=8"):
            route(lambda x: tg.while_loop(*forever, x, max_steps=8, checkpoints=2))(np.array(1.0))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_steps must be a positive int"):
            tg.while_loop(*forever, 1.0, max_steps=bad)
        with pytest.raises(ValueError, match="checkpoints must be a positive int"):
            tg.while_loop(*forever, 1.0, max_steps=4, checkpoints=bad)
    with pytest.raises(ValueError, match="checkpoints needs max_steps"):
        tg.while_loop(*forever, 1.0, checkpoints=3)
    with pytest.raises(NotImplementedError, match=r"tg\.grad\(tg\.grad\(tg\.jit\(f\)\)\)"):
        tg.jit(tg.grad(tg.grad(_sum(looped))))(A)
    with pytest.raises(NotImplementedError, match="not differentiable again"):
        tg.grad(tg.grad(_sum(looped, max_steps=6, checkpoints=2)))(A)
    assert_close(tg.grad(_sum(looped))(A), tg.grad(_sum(unrolled))(A))  # nothing left behind
    assert_close(tg.jit(tg.grad(_sum(looped)))(A), tg.grad(_sum(unrolled))(A))


def test_parameters_and_integer_carries():
    w = tg.Parameter(np.array([0.5, -0.3, 0.8]))

    def loss():
        return tnp.sum(tg.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, tnp.tanh(c[1] * w)), (0, A))[1])

    def python():
        h = A
        for _ in range(4):
            h = tnp.tanh(h * w)
        return tnp.sum(h)
    want = tg.grad(python, None, weights=[w])()
    assert_close(tg.grad(loss, None, weights=[w])()[0], want[0])
    assert_close(tg.jit(tg.grad(loss, None, weights=[w]))()[0], want[0])
