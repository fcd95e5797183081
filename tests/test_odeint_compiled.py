"""``odeint`` staged once and run as programs: an eager call (and the backward pass of an eager ``grad``)
runs the cached programs without calling ``func`` again, ``jit`` of ``grad`` and ``hessian`` agree with
the eager routes, the backward pass (a reverse ``scan`` over the output intervals) nests to order 2
against finite differences and against JAX's ``jax.experimental.ode.odeint`` (same algorithm, same
accepted steps), and the cache keeps no ``func`` alive."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.integrate as tsi
from _tol import assert_close
from tapegrad.scipy.integrate import odeint_explain
from tapegrad.scipy.integrate._odeint import _accepted_steps
from tapegrad.testing import check_grads

Y0 = np.array([10.0, 10.0])
THETA = np.array([1.1, 0.4, 0.1, 0.4])
TIMES = np.array([0.0, 0.5, 1.0])
W = np.array([[0.3, -0.7], [1.1, 0.2], [0.8, -1.3]])  # weights on the outputs
TOL = dict(rtol=1e-10, atol=1e-10)


def predator_prey(y, t, theta):
    """Lotka-Volterra, its four rates in one vector argument."""
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    return tnp.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def objective(theta, func=predator_prey, **options):
    return tnp.sum(W * tsi.odeint(func, Y0, TIMES, theta, **(options or TOL)))


def counting(func):
    """``func``, counting its Python calls (which happen only while a program is staged)."""
    def counted(*args):
        counted.calls += 1
        return func(*args)
    counted.calls = 0
    return counted


def test_eager_calls_run_the_staged_programs():
    func = counting(predator_prey)
    first = tg.value_and_grad(objective)(THETA, func)
    staged = func.calls
    assert staged > 0
    other = THETA * 1.05
    value, grad = tg.value_and_grad(objective)(other, func)
    assert func.calls == staged  # neither the solver nor its backward pass was staged again
    fresh = tg.value_and_grad(objective)(other)  # a function never seen: staged anew
    assert_close(value, fresh[0])
    assert_close(grad, fresh[1])
    assert not np.allclose(first[1], grad)


def test_jit_routes_agree_with_eager_ones():
    grad = tg.grad(objective)(THETA)
    assert_close(tg.jit(tg.grad(objective))(THETA), grad, rtol=1e-12)
    assert_close(tg.jit(tg.hessian(objective))(THETA), tg.hessian(objective)(THETA), rtol=1e-10)
    assert_close(tg.grad(tg.jit(objective))(THETA), grad, rtol=1e-12)


def test_second_order_against_finite_differences():
    """Reverse over reverse meets the custom rule inside the backward pass's scan body, and forward over
    reverse transposes it: both nest."""
    check_grads(lambda theta: tsi.odeint(predator_prey, Y0, TIMES, theta, rtol=1e-11, atol=1e-11),
                (THETA,), order=2, name="predator_prey")


@pytest.mark.peer("jax")
def test_derivatives_and_steps_match_jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.ode import odeint as jax_odeint

    def jax_rhs(y, t, theta):
        a, b, d, g = theta
        return jax.numpy.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])

    def jax_objective(theta):
        return jax.numpy.sum(W * jax_odeint(jax_rhs, Y0, TIMES, theta, **TOL))
    assert_close(tg.grad(objective)(THETA), np.asarray(jax.grad(jax_objective)(THETA)), rtol=1e-8)
    # JAX's custom_vjp has no forward mode: its Hessian is reverse over reverse
    assert_close(tg.hessian(objective)(THETA), np.asarray(jax.jacrev(jax.grad(jax_objective))(THETA)), rtol=1e-8)
    assert _accepted_steps(predator_prey, Y0, TIMES, THETA, **TOL) == _jax_accepted_steps(jax_rhs, THETA)


def _jax_accepted_steps(jax_rhs, theta):
    """JAX's forward solve (``jax.experimental.ode._odeint``'s loop, with its own step functions), counting
    the steps it accepts."""
    import jax
    from jax.experimental import ode
    func = lambda y, t: jax_rhs(y, t, theta)  # noqa: E731
    t, y, f = TIMES[0], Y0, func(Y0, TIMES[0])
    dt = ode.initial_step_size(func, t, y, 4, TOL["rtol"], TOL["atol"], f)
    accepted = 0
    step = jax.jit(lambda y, f, t, dt: ode.runge_kutta_step(func, y, f, t, dt))
    for target in TIMES[1:]:
        while t < target:
            next_y, next_f, error, _ = step(y, f, t, dt)
            ratio = ode.mean_error_ratio(error, TOL["rtol"], TOL["atol"], y, next_y)
            if ratio <= 1.0:
                accepted, y, f, t = accepted + 1, next_y, next_f, t + dt
            dt = ode.optimal_step_size(dt, ratio)
    return accepted


def test_vmap_of_grad_against_a_loop():
    thetas = THETA * np.array([[1.0], [1.03], [0.97]])
    batched = tg.vmap(tg.grad(objective))(thetas)
    for row, theta in zip(batched, thetas):
        assert_close(row, tg.grad(objective)(theta), rtol=1e-7)  # each example takes the slowest's steps


def test_the_cache_keeps_no_function_alive():
    def func(y, t, theta):
        return predator_prey(y, t, theta)
    tg.grad(objective)(THETA, func)
    ref = weakref.ref(func)
    del func
    gc.collect()
    assert ref() is None


def test_odeint_explain_names_each_program_and_why():
    lines = odeint_explain(predator_prey, Y0, TIMES, THETA, **TOL).split("\n")
    assert [line.split(":")[0] for line in lines] == ["solver", "backward"]
    for line in lines:
        executor = line.split(": ")[1]
        assert executor in ("numba", "python+numba", "python")
        assert ("not compiled whole because" in line) == (executor != "numba")
    previous = tg.config.compiled_executor
    tg.config.compiled_executor = False
    try:  # a new function: its programs are compiled (or not) with the switch as it is now
        lines = odeint_explain(lambda y, t, theta: predator_prey(y, t, theta), Y0, TIMES, THETA, **TOL)
    finally:
        tg.config.compiled_executor = previous
    assert lines.count("python: not compiled whole because the compiled executor is off") == 2


def test_options_must_be_numbers():
    with pytest.raises(TypeError, match="rtol must be a number"):
        tsi.odeint(predator_prey, Y0, TIMES, THETA, rtol=[1e-8])
    assert_close(tsi.odeint(predator_prey, Y0, TIMES, THETA, rtol=np.array(1e-10), atol=1e-10),
                 tsi.odeint(predator_prey, Y0, TIMES, THETA, **TOL))


class _Slotted:
    """A callable that takes no weak reference (and so is not cached: staged again at every call)."""
    __slots__ = ()

    def __call__(self, y, t, theta):
        return predator_prey(y, t, theta)


def test_a_function_without_weak_references_is_staged_at_each_call():
    assert_close(tg.value_and_grad(objective)(THETA, _Slotted())[1], tg.grad(objective)(THETA), rtol=1e-12)
