"""Second order through a ``custom_vjp`` whose rules run Python loops: HIPS autograd's
``fixed_points`` example (a square root as the fixed point of ``x -> x - 0.05 (x^2 - a)``, solved to
``|x_k - x_{k-1}| <= 1e-4``, whose reverse rule solves the adjoint fixed point with the same solver).

autograd gives 0.35338076161609844 and -0.08809989985285249 (first and second derivative at a = 2,
autograd at commit bff107b8, the example as written); the analytic second derivative of sqrt is
-1/(4 a^1.5) = -0.08838834764831845. Every difference below is the loops' truncation: with a
tolerance of 1e-12, every variant agrees with the analytic value. What a variant differentiates
decides its number at 1e-4:

- ``fixed_point`` called by its own ``fwd`` and by ``bwd`` for the adjoint solve (autograd's
  structure: there ``fixed_point`` is a primitive, so the second-order pass reaches both solves
  through their implicit rule) gives autograd's numbers to every digit;
- the loops written out in ``fwd`` and ``bwd`` are differentiated through (as JAX differentiates a
  ``custom_vjp``'s residuals and ``bwd`` at second order): the second derivative is then the exact
  derivative of the first-derivative computation, as central differences of it confirm;
- the port in the report (loop in ``fwd``, adjoint solved by ``fixed_point``): the residual ``x*``
  is differentiated through the forward loop (``dx*/da`` = 0.35239, the truncated loop's) where
  autograd uses the rule's 0.35338, which is the whole gap from -0.0880999 to -0.0878731.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

AUTOGRAD_D1, AUTOGRAD_D2 = 0.35338076161609844, -0.08809989985285249  # autograd bff107b8, tol 1e-4
ANALYTIC_D2 = -0.25 * 2.0 ** -1.5


def grad_descent_sqrt_iter(a):
    return lambda x: x - 0.05 * (x ** 2 - a)


def distance(x, y):
    return tnp.abs(x - y)


def solve(f, a, x0, tol):
    """autograd's solver: iterate ``f(a)`` from ``x0`` until two iterates are within ``tol``."""
    step = f(a)
    x, x_prev = step(x0), x0
    while distance(x, x_prev) > tol:
        x, x_prev = step(x), x
    return x


def make_fixed_point(fwd_solves_by_rule: bool, adjoint_by_rule: bool):
    """``fixed_point(f, a, x0, tol)`` as a ``custom_vjp`` with autograd's reverse rule. ``fwd`` gets
    ``x*`` by calling ``fixed_point`` (so an outer derivative of ``x*`` uses this rule again) or by
    the loop itself (differentiated through); ``bwd`` solves the adjoint fixed point
    ``xbar = xbar df/dx + g`` with ``fixed_point`` or with a loop written out."""

    @functools.partial(tg.custom_vjp, nondiff_argnums=(0, 3))
    def fixed_point(f, a, x0, tol):
        return solve(f, a, x0, tol)

    def fwd(f, a, x0, tol):
        x = fixed_point(f, a, x0, tol) if fwd_solves_by_rule else solve(f, a, x0, tol)
        return x, (a, x)

    def adjoint_iter(f):
        def rev(params):
            a, x_star, g = params
            _, vjp_x = tg.vjp(f(a), x_star)
            return lambda xbar: vjp_x(xbar)[0] + g
        return rev

    def bwd(f, tol, res, g):
        a, x_star = res
        params, zero = (a, x_star, g), tnp.zeros_like(x_star)
        if adjoint_by_rule:  # autograd: fixed_point(rev_iter, (a, x_star, g), zeros, ...)
            xbar = fixed_point(adjoint_iter(f), params, zero, tol)
        else:
            xbar = solve(adjoint_iter(f), params, zero, tol)
        _, vjp_a = tg.vjp(lambda a: f(a)(x_star), a)
        return vjp_a(xbar)[0], None

    fixed_point.defvjp(fwd, bwd)
    return fixed_point


VARIANTS = {"autograd's structure": (True, True), "loops differentiated through": (False, False),
            "the report's port": (False, True), "adjoint loop written out": (True, False)}


def sqrt_of(variant, tol=1e-4):
    fixed_point = make_fixed_point(*VARIANTS[variant])
    return lambda a: fixed_point(grad_descent_sqrt_iter, a, tnp.asarray(10.0), tol)


def central_difference(fn, a, h=1e-5):
    return (fn(a + h) - fn(a - h)) / (2 * h)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_first_derivative_is_the_same_in_every_variant(variant):
    sqrt = sqrt_of(variant)
    assert_close(tg.grad(sqrt)(np.array(2.0)), AUTOGRAD_D1, ulps=16)


def test_autograds_structure_gives_autograds_second_derivative():
    # both solves are fixed_point: the second-order pass uses the implicit rule for x* and for the
    # adjoint, as autograd's primitive does; the same number, to the last few roundings
    sqrt = sqrt_of("autograd's structure")
    assert_close(tg.grad(tg.grad(sqrt))(np.array(2.0)), AUTOGRAD_D2, ulps=64)


def test_loops_differentiated_through_give_the_exact_derivative_of_the_first_derivative():
    # the independent reference: central differences of the first derivative (the loops take the same
    # number of steps within a +-1e-5 step, so the computation is smooth there; the difference's
    # error is O(h^2) + eps |d1| / h, about 1e-11)
    sqrt = sqrt_of("loops differentiated through")
    a = np.array(2.0)
    d2 = tg.grad(tg.grad(sqrt))(a)
    assert_close(d2, central_difference(tg.grad(sqrt), a), rtol=1e-8)
    assert_close(d2, -0.08794812876588337, ulps=64)
    # forward-over-reverse gives the same number
    assert_close(tg.jvp(tg.grad(sqrt), (a,), (np.array(1.0),))[1], d2, ulps=64)


def test_the_reports_port_differs_from_autograd_by_the_residuals_derivative_only():
    # loop in fwd, adjoint by fixed_point: -0.0878731 in the report. Written as
    # d2 = dB/da + dB/dx* . dx*/da, with B(a, x*) the first derivative bwd computes (g = 1), it takes
    # dx*/da from the forward loop (0.35239); autograd's number takes it from the rule (about the
    # rule's 0.35338). No term is dropped or counted twice: the parts, each by its own grad, add up to
    # both numbers
    fixed_point = make_fixed_point(False, True)
    a, tol = np.array(2.0), 1e-4
    x_star = solve(grad_descent_sqrt_iter, a, np.array(10.0), tol)

    def first_derivative_at(a, x_star):  # bwd's computation, with x* an argument of its own
        def rev(params):
            aa, xs, g = params
            _, vjp_x = tg.vjp(grad_descent_sqrt_iter(aa), xs)
            return lambda xbar: vjp_x(xbar)[0] + g
        xbar = fixed_point(rev, (a, x_star, tnp.asarray(1.0)), tnp.zeros_like(x_star), tol)
        return tg.vjp(lambda a: grad_descent_sqrt_iter(a)(x_star), a)[1](xbar)[0]

    d_a, d_x = tg.grad(first_derivative_at, grad_position=(0, 1))(a, x_star)
    loop_dx = tg.grad(lambda a: solve(grad_descent_sqrt_iter, a, np.array(10.0), tol))(a)
    assert_close(loop_dx, 0.3523899590482217, ulps=64)
    reported = tg.grad(tg.grad(sqrt_of("the report's port")))(a)
    assert_close(reported, -0.08787310704880968, ulps=64)
    assert_close(reported, d_a + d_x * loop_dx, ulps=64)
    # autograd's: the same dB/da and dB/dx*, with x*'s part from the rule (its adjoint solve, seeded
    # with dB/dx*), not from the loop
    by_rule = make_fixed_point(True, True)
    _, vjp_x_star = tg.vjp(lambda a: by_rule(grad_descent_sqrt_iter, a, tnp.asarray(10.0), tol), a)
    assert_close(AUTOGRAD_D2, d_a + vjp_x_star(d_x)[0], ulps=64)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_converges_to_the_analytic_second_derivative(variant):
    # the differences above are the 1e-4 tolerance's: solved to 1e-12, all agree with -1/(4 a^1.5)
    sqrt = sqrt_of(variant, tol=1e-12)
    assert_close(tg.grad(tg.grad(sqrt))(np.array(2.0)), ANALYTIC_D2, rtol=1e-9)
