"""tapegrad.scipy.integrate: trapezoid and simpson against SciPy (every spacing kind, odd and even
sample counts, any axis) with derivatives to order 2 in both modes; odeint against SciPy's odeint,
its adjoint derivatives against finite differences (order 2 in both modes) and against reverse mode
through a fine fixed-step RK4 in ``tg.fori_loop`` (discretize-then-differentiate), under jit and vmap,
with pytree states."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.integrate as tsi
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.testing import check_grads

# ---- quadrature ----------------------------------------------------------------------------------
# (name, y shape, axis, x kind): x kind None (dx), "1d" (sorted abscissae), "full" (y's shape)
QUAD_CASES = [(name, shape, axis, x_kind, dtype)
              for name in ("trapezoid", "simpson")
              for shape, axis in (((7,), -1), ((6,), 0), ((2, 5), -1), ((4, 3), 0), ((2,), -1), ((3, 2, 4), 1))
              for x_kind in (None, "1d", "full")
              for dtype in (np.float64, np.float32)
              if not (dtype == np.float32 and x_kind is not None)]


def _quad_args(shape, axis, x_kind, dtype, rng):
    y = rng.standard_normal(shape).astype(dtype)
    n = shape[axis]
    if x_kind is None:
        return (y,)
    x = np.cumsum(rng.uniform(0.2, 1.0, n))
    if x_kind == "full":
        shape_1d = [1] * len(shape)
        shape_1d[axis] = n
        x = np.broadcast_to(x.reshape(shape_1d), shape) * rng.uniform(0.5, 1.5, shape)
        x = np.sort(x, axis=axis)
    return y, x.astype(dtype)


@pytest.mark.parametrize("name,shape,axis,x_kind,dtype", QUAD_CASES,
                         ids=[f"{n}-{s}-{a}-{x}-{np.dtype(d).name}" for n, s, a, x, d in QUAD_CASES])
def test_quadrature(name, shape, axis, x_kind, dtype):
    args = _quad_args(shape, axis, x_kind, dtype, np.random.default_rng(len(shape) * 10 + shape[axis]))
    ours = lambda *a: getattr(tsi, name)(*a, axis=axis) if x_kind else getattr(tsi, name)(a[0], dx=0.3, axis=axis)  # noqa: E731
    ref = (getattr(scipy.integrate, name)(*args, axis=axis) if x_kind else
           getattr(scipy.integrate, name)(args[0], dx=0.3, axis=axis))
    out = ours(*args)
    assert np.shape(out) == np.shape(ref) and np.result_type(out) == dtype
    assert_close(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(ours, args, order=2, name=name)


@pytest.mark.parametrize("name", ["trapezoid", "simpson"])
def test_quadrature_vmap_and_jit(name):
    rng = np.random.default_rng(5)
    y, x = rng.standard_normal(6), np.cumsum(rng.uniform(0.2, 1.0, 6))
    fn = lambda y, x: getattr(tsi, name)(y, x)  # noqa: E731
    check_vmap(fn, (y, x), in_axes=(0, None))
    check_vmap(fn, (y, x), in_axes=(0, 0))
    assert_close(tg.jit(fn)(y, x), fn(y, x), rtol=1e-12)


def test_simpson_is_exact_for_cubics_with_uneven_spacing():
    """Simpson's rule with SciPy's uneven-spacing formulas integrates quadratics exactly, and with an
    even count (Cartwright's correction on the last interval) too."""
    x = np.array([0.0, 0.3, 1.0, 1.2, 2.0, 2.9])
    for n in (5, 6):
        assert_close(tsi.simpson(x[:n] ** 2, x=x[:n]), x[n - 1] ** 3 / 3, rtol=1e-12)


@pytest.mark.parametrize("x", [np.arange(4.0), np.ones((2, 5, 1))])
def test_quadrature_rejects_x_that_does_not_fit(x):
    for name in ("trapezoid", "simpson"):
        with pytest.raises(ValueError, match="x"):
            getattr(tsi, name)(np.ones((2, 5)), x)


# ---- odeint --------------------------------------------------------------------------------------
TIGHT = dict(rtol=1e-11, atol=1e-11)


def _decay(y, t, k):
    return -k * y + tnp.sin(t) * y[::-1]


def _lotka_volterra(y, t, a, b):
    prey, predator = y[0], y[1]
    return tnp.stack([a * prey - b * prey * predator, b * prey * predator - a * predator])


def _scipy(func, y0, t, *args):
    as_numpy = lambda y, t: np.asarray(func(y, t, *args))  # noqa: E731
    return scipy.integrate.odeint(as_numpy, y0, t, rtol=1e-12, atol=1e-12)


ODE_CASES = [
    ("decay", _decay, np.array([1.0, 2.0]), np.linspace(0.0, 2.0, 4), (np.array(0.7),)),
    ("lotka_volterra", _lotka_volterra, np.array([1.0, 0.5]), np.array([0.0, 0.4, 1.5]),
     (np.array(1.2), np.array(0.8))),
    ("two_points", _decay, np.array([[0.5, -1.0], [1.5, 0.3]]), np.array([0.2, 1.0]), (np.array(1.3),)),
]


@pytest.mark.parametrize("name,func,y0,t,args", ODE_CASES, ids=[c[0] for c in ODE_CASES])
def test_odeint_matches_scipy(name, func, y0, t, args):
    ys = tsi.odeint(func, y0, t, *args, **TIGHT)
    flat = lambda y, t, *a: tnp.reshape(func(tnp.reshape(y, y0.shape), t, *a), (-1,))  # noqa: E731
    ref = _scipy(flat, y0.ravel(), t, *args).reshape((len(t),) + y0.shape)
    assert ys.shape == ref.shape and ys.dtype == np.float64
    assert_close(ys, ref, rtol=1e-9, atol=1e-10)
    assert_close(tsi.odeint(func, y0, t, *args), ref, rtol=1e-6)  # default tolerances: 1.4e-8 per step


@pytest.mark.parametrize("name,func,y0,t,args", ODE_CASES, ids=[c[0] for c in ODE_CASES])
def test_odeint_derivatives_first_order_both_modes(name, func, y0, t, args):
    check_grads(lambda y0, t, *a: tsi.odeint(func, y0, t, *a, **TIGHT), (y0, t) + args, order=1, name=name)


def test_odeint_derivatives_second_order_both_modes():
    """Order 2 (each mode over each mode); two output times keep it quick (each order nests one more
    adjoint solve per output interval)."""
    _, func, y0, _, args = ODE_CASES[0]
    t = np.array([0.0, 0.8])
    check_grads(lambda y0, t, *a: tsi.odeint(func, y0, t, *a, **TIGHT), (y0, t) + args, order=2, name="decay")


def _rk4(func, y0, t0, t1, args, steps=400):
    """A fixed-step RK4 from t0 to t1 in a fori_loop: reverse mode differentiates through its steps."""
    h = (t1 - t0) / steps

    def body(i, y):
        t = t0 + i * h
        k1 = func(y, t, *args)
        k2 = func(y + h / 2 * k1, t + h / 2, *args)
        k3 = func(y + h / 2 * k2, t + h / 2, *args)
        k4 = func(y + h * k3, t + h, *args)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return tg.fori_loop(0, steps, body, y0)


def test_adjoint_gradient_matches_differentiating_a_fine_fixed_step_solver():
    _, func, y0, t, args = ODE_CASES[1]
    w = np.array([0.3, -1.1])
    adjoint = tg.grad(lambda y0, t1, a, b: tnp.sum(w * tsi.odeint(func, y0, tnp.stack([0.0, t1]), a, b, **TIGHT)[-1]),
                      grad_position=(0, 1, 2, 3))
    discrete = tg.grad(lambda y0, t1, a, b: tnp.sum(w * _rk4(func, y0, 0.0, t1, (a, b))), grad_position=(0, 1, 2, 3))
    point = (y0, np.array(1.5)) + args
    for g_adjoint, g_discrete in zip(adjoint(*point), discrete(*point)):
        assert_close(g_adjoint, g_discrete, rtol=1e-8)


def test_odeint_pytree_state_under_jit_and_vmap():
    def func(state, t, k):
        return {"x": state["v"], "v": -k * state["x"]}  # a harmonic oscillator: x = cos(sqrt(k) t)

    t, k = np.linspace(0.0, 1.0, 3), np.array(4.0)
    state = {"x": np.array(1.0), "v": np.array(0.0)}
    solve = lambda state, k: tsi.odeint(func, state, t, k, **TIGHT)  # noqa: E731
    out = tg.jit(solve)(state, k)
    assert_close(out["x"], np.cos(2.0 * t), rtol=1e-9, atol=1e-10)
    assert_close(out["v"], -2.0 * np.sin(2.0 * t), rtol=1e-9, atol=1e-10)
    g = tg.grad(lambda k: solve(state, k)["x"][-1])(k)
    assert_close(g, -np.sin(2.0) * 1.0 / (2 * np.sqrt(4.0)), rtol=1e-8)  # d/dk cos(sqrt(k) t) at t = 1
    ks = np.array([1.0, 4.0, 9.0])
    assert_close(tg.vmap(lambda k: solve(state, k)["x"][-1])(ks), np.cos(np.sqrt(ks)), rtol=1e-9)


def test_odeint_vmap_against_a_loop():
    _, func, y0, t, args = ODE_CASES[0]
    check_vmap(lambda y0, k: tsi.odeint(func, y0, t, k, **TIGHT), (y0, args[0]), in_axes=(0, 0), slack=1e3)


def test_odeint_float32_keeps_its_dtype():
    _, func, y0, t, args = ODE_CASES[0]
    ys = tsi.odeint(func, y0.astype(np.float32), t.astype(np.float32), np.float32(0.7), rtol=1e-6, atol=1e-6)
    assert ys.dtype == np.float32
    assert_close(ys, _scipy(func, y0, t, *args), rtol=1e-5)


def test_odeint_closure_over_a_traced_value_is_refused():
    _, func, y0, t, args = ODE_CASES[0]
    with pytest.raises(TypeError, match="differentiable argument"):
        tg.grad(lambda k: tnp.sum(tsi.odeint(lambda y, t: func(y, t, k), y0, t)))(args[0])


def test_odeint_rejects_times_that_are_not_1d():
    with pytest.raises(ValueError, match="1-D"):
        tsi.odeint(_decay, np.ones(2), np.ones((2, 2)), 1.0)
