"""tapegrad.scipy.integrate.solve_ivp: SciPy's values, step counts (``nfev``, the number of accepted
steps) and ``OdeSolution`` for RK23, RK45 and DOP853, forwards and backwards in time; derivatives
through the steps (``adjoint=False``) and by the adjoint method against each other, finite differences
and JAX's ``odeint``, eagerly and under jit; the errors that name what to change."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.scipy.integrate import OdeResult, solve_ivp
from tapegrad.testing import check_grads

THETA = np.array([1.1, 0.4, 0.1, 0.4])  # Lotka-Volterra rates
Y0 = np.array([10.0, 10.0])
T_EVAL = np.linspace(0.0, 4.0, 9)
METHODS = ("RK23", "RK45", "DOP853")


def lotka_volterra(t, y, theta):
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    return tnp.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def lotka_volterra_np(t, y, theta):
    a, b, d, g = theta
    return np.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def both(t_span=(0.0, 4.0), method="RK45", **kwargs):
    """tapegrad's and SciPy's solves of the Lotka-Volterra model."""
    ours = solve_ivp(lotka_volterra, t_span, Y0, method=method, args=(THETA,), **kwargs)
    theirs = scipy.integrate.solve_ivp(lotka_volterra_np, t_span, Y0, method=method, args=(THETA,), **kwargs)
    return ours, theirs


# ---- values and steps against SciPy --------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_span, t_eval", [((0.0, 4.0), T_EVAL), ((4.0, 0.0), T_EVAL[::-1]), ((0.0, 4.0), None)])
def test_matches_scipy(method, t_span, t_eval):
    ours, theirs = both(t_span, method, t_eval=t_eval, rtol=1e-6, atol=1e-8)
    assert ours.status == theirs.status == 0 and ours.success and ours.message == theirs.message
    assert ours.nfev == theirs.nfev  # the same starting step, attempts and accepted steps
    assert ours.y.shape == theirs.y.shape and ours.t.shape == theirs.t.shape
    # the error estimate cancels: rounding moves later steps by ~1e-10 relative, outputs alike
    assert_close(ours.t, theirs.t, rtol=1e-8, atol=1e-9)
    assert_close(ours.y, theirs.y, rtol=1e-7)
    assert ours.t_events is None and ours.y_events is None and ours.njev == ours.nlu == 0


def test_result_fields():
    ours, _ = both(t_eval=T_EVAL)
    assert isinstance(ours, OdeResult) and ours.y is ours["y"] and ours.sol is None
    assert set(ours) == {"t", "y", "sol", "t_events", "y_events", "nfev", "njev", "nlu", "status", "message",
                         "success"}
    with pytest.raises(AttributeError):
        ours.x  # noqa: B018


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_span", [(0.0, 4.0), (4.0, 0.0)])
def test_dense_output_matches_scipy(method, t_span):
    ours, theirs = both(t_span, method=method, dense_output=True, rtol=1e-6, atol=1e-8)
    assert ours.sol.n_segments == theirs.sol.n_segments
    t = np.array([0.0, 0.37, 1.3, 2.9, 4.0, -0.1, 4.2])  # the last two extrapolate, as SciPy's
    assert_close(ours.sol(t), theirs.sol(t), rtol=1e-7)
    assert_close(ours.sol(1.3), theirs.sol(1.3), rtol=1e-7)


def test_float32_state_stays_float32():
    ours = solve_ivp(lotka_volterra, (0.0, 4.0), Y0.astype(np.float32), t_eval=T_EVAL, args=(THETA,))
    theirs = scipy.integrate.solve_ivp(lotka_volterra_np, (0.0, 4.0), Y0, t_eval=T_EVAL, args=(THETA,))
    assert ours.y.dtype == np.float32 and ours.t.dtype == np.float32 and ours.success
    assert_close(ours.y, theirs.y.astype(np.float32), rtol=1e-4)


def test_max_steps_and_max_step():
    ours = solve_ivp(lotka_volterra, (0.0, 4.0), Y0, t_eval=T_EVAL, args=(THETA,), max_steps=5)
    assert ours.status == -1 and not ours.success and "max_steps=5" in ours.message
    assert np.isnan(np.asarray(ours.y)[:, -1]).all()  # outputs the solve did not reach
    ours, theirs = both(t_eval=T_EVAL, max_step=0.05, first_step=0.01)
    assert ours.nfev == theirs.nfev
    assert_close(ours.y, theirs.y, rtol=1e-9)


# ---- derivatives ---------------------------------------------------------------------------------
TIGHT = dict(rtol=1e-10, atol=1e-10)


def observed(theta, y0=Y0, adjoint=False, method="RK45", t_eval=T_EVAL, **kwargs):
    return solve_ivp(lotka_volterra, (0.0, 4.0), y0, method=method, t_eval=t_eval, args=(theta,),
                     adjoint=adjoint, **{**TIGHT, **kwargs}).y


def loss(theta, y0=Y0, adjoint=False, method="RK45"):
    return tnp.sum(observed(theta, y0, adjoint, method) ** 2)


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_adjoint_and_direct_agree(method):
    direct = tg.grad(loss, grad_position=(0, 1))(THETA, Y0, False, method)
    adjoint = tg.grad(loss, grad_position=(0, 1))(THETA, Y0, True, method)
    for d, a in zip(direct, adjoint):
        assert_close(d, a, rtol=1e-7)


def test_direct_is_the_discrete_derivative():
    # at a loose tolerance the steps differ from the exact solution's, and the direct derivative is
    # still the finite difference of the solver's output (the step sizes move smoothly with theta)
    def fn(theta):
        return observed(theta, rtol=1e-4, atol=1e-6)[:, 1:]
    check_grads(fn, (THETA,), order=1, modes=("rev",), eps=1e-6, rtol=1e-6)


def test_adjoint_against_finite_differences():
    def fn(theta, y0):
        return observed(theta, y0, adjoint=True)[:, 1:]
    check_grads(fn, (THETA, Y0), order=1, modes=("rev",), eps=1e-4, rtol=1e-6)


@pytest.mark.parametrize("adjoint", [False, True])
def test_time_derivatives(adjoint):
    def fn(t0, t1, t_eval):
        return tnp.sum(solve_ivp(lotka_volterra, tnp.stack([t0, t1]), Y0, t_eval=t_eval, args=(THETA,),
                                 adjoint=adjoint, **TIGHT).y)
    t_eval = np.array([0.5, 1.5, 3.0])
    grads = tg.grad(fn, grad_position=(0, 1, 2))(np.float64(0.2), np.float64(4.0), t_eval)

    def shifted(i, eps):
        args = [0.2, 4.0, t_eval.copy()]
        if i < 2:
            args[i] += eps
        else:
            args[2] = t_eval + eps * np.eye(3)[i - 2]
        return float(fn(*(np.float64(a) if np.ndim(a) == 0 else a for a in args)))
    finite = [(shifted(i, 1e-6) - shifted(i, -1e-6)) / 2e-6 for i in range(5)]
    assert_close(np.concatenate([np.ravel(grads[0]), np.ravel(grads[1]), grads[2]]), np.array(finite), rtol=1e-5,
                 atol=1e-6)


@pytest.mark.parametrize("adjoint", [False, True])
def test_jit_matches_eager(adjoint):
    eager = tg.value_and_grad(loss)(THETA, Y0, adjoint)
    staged = tg.jit(tg.value_and_grad(loss), static_argnums=2)(THETA, Y0, adjoint)
    assert_close(staged[0], eager[0], rtol=1e-12)
    assert_close(staged[1], eager[1], rtol=1e-10)


def test_jit_forward_values():
    staged = tg.jit(lambda theta: observed(theta))(THETA)
    assert_close(staged, observed(THETA), rtol=1e-12)
    result = tg.jit(lambda theta: solve_ivp(lotka_volterra, (0.0, 4.0), Y0, t_eval=T_EVAL, args=(theta,)).nfev)
    assert int(result(THETA)) == both(t_eval=T_EVAL)[1].nfev


def test_dense_output_derivative():
    t = 2.35

    def at(theta, dense):
        if dense:
            return solve_ivp(lotka_volterra, (0.0, 4.0), Y0, args=(theta,), dense_output=True, **TIGHT).sol(t)
        return observed(theta, t_eval=np.array([t]))[:, 0]
    assert_close(tg.jacrev(lambda th: at(th, True))(THETA), tg.jacrev(lambda th: at(th, False))(THETA), rtol=1e-6)


def test_vmap_matches_a_loop():
    rates = THETA * (1.0 + 0.1 * np.arange(3))[:, None]  # each example takes its own steps
    batched = tg.vmap(lambda theta: observed(theta, rtol=1e-6, atol=1e-8))(rates)
    assert_close(batched, np.stack([observed(theta, rtol=1e-6, atol=1e-8) for theta in rates]), rtol=1e-12)


def test_forward_mode_and_second_order():
    def fn(theta):
        return observed(theta, t_eval=np.array([0.0, 0.5]), rtol=1e-4, atol=1e-6)[:, 1]
    assert_close(tg.jacfwd(fn)(THETA), tg.jacrev(fn)(THETA), rtol=1e-12)
    check_grads(lambda theta: tnp.sum(fn(theta)), (THETA,), order=2, modes=("rev",), eps=1e-4, rtol=1e-5)
    with pytest.raises(TypeError, match="adjoint=True, the derivative is reverse mode"):
        tg.jvp(lambda theta: observed(theta, adjoint=True), (THETA,), (THETA,))


@pytest.mark.peer("jax")
@pytest.mark.parametrize("adjoint", [False, True])
def test_matches_jax_odeint(adjoint):
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.ode import odeint

    def jax_loss(theta, y0):
        def f(y, t, theta):
            a, b, d, g = theta
            return jax.numpy.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])
        return jax.numpy.sum(odeint(f, y0, T_EVAL, theta, rtol=1e-12, atol=1e-12) ** 2)
    theirs = jax.grad(jax_loss, argnums=(0, 1))(THETA, Y0)
    ours = tg.grad(loss, grad_position=(0, 1))(THETA, Y0, adjoint, "DOP853")
    for a, b in zip(ours, theirs):
        assert_close(a, np.asarray(b), rtol=1e-8)


# ---- errors --------------------------------------------------------------------------------------
def test_errors():
    call = dict(fun=lotka_volterra, t_span=(0.0, 1.0), y0=Y0, args=(THETA,))
    with pytest.raises(ValueError, match="method must be one of"):
        solve_ivp(**call, method="BDF")
    with pytest.raises(ValueError, match="Rosenbrock23"):
        solve_ivp(**call, method="Radau")
    with pytest.raises(NotImplementedError, match="events"):
        solve_ivp(**call, events=lambda t, y, th: y[0])
    with pytest.raises(TypeError, match="args must be a tuple"):
        solve_ivp(lotka_volterra, (0.0, 1.0), Y0, args=THETA)
    with pytest.raises(ValueError, match="not within t_span"):
        solve_ivp(**call, t_eval=[0.5, 2.0])
    with pytest.raises(ValueError, match="properly sorted"):
        solve_ivp(**call, t_eval=[0.5, 0.2])
    with pytest.raises(ValueError, match="y0 must be a 1-D"):
        solve_ivp(lotka_volterra, (0.0, 1.0), np.ones((2, 1)), args=(THETA,))
    with pytest.raises(ValueError, match="under jit, t_eval=None"):
        tg.jit(lambda th: solve_ivp(lotka_volterra, (0.0, 1.0), Y0, args=(th,)).y)(THETA)
    with pytest.warns(UserWarning, match="no effect"):
        solve_ivp(**call, t_eval=[1.0], jac=None)


# ---- the stiff method ----------------------------------------------------------------------------
RATES = np.array([0.04, 3e7, 1e4])  # Robertson's chemical kinetics


def robertson(t, y, k):
    return tnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2], k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                      k[1] * y[1] ** 2])


def robertson_np(t, y, k):
    return np.array([-k[0] * y[0] + k[2] * y[1] * y[2], k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                     k[1] * y[1] ** 2])


STIFF = dict(t_span=(0.0, 5.0), y0=np.array([1.0, 0.0, 0.0]), args=(RATES,))


def test_rosenbrock_takes_hundredfold_fewer_steps_on_robertson():
    stiff = solve_ivp(robertson, method="Rosenbrock23", **STIFF)  # SciPy's default tolerances
    assert stiff.success and stiff.njev > 0 and stiff.nlu == 3 * stiff.njev
    steps = len(stiff.t) - 1
    # the explicit methods' steps are SciPy's (test_matches_scipy checks they are tapegrad's too)
    for method in ("RK23", "DOP853"):
        with np.errstate(all="ignore"):  # their rejected trial steps overflow
            explicit = scipy.integrate.solve_ivp(robertson_np, method=method, **STIFF)
        assert explicit.success and len(explicit.t) - 1 > 100 * steps, (method, len(explicit.t) - 1, steps)
    # RK45 is unstable at these tolerances: it overflows and stops with a step too small, as SciPy's (the
    # trajectories part once the instability amplifies rounding, so the counts are not compared)
    with np.errstate(all="ignore"):
        ours = solve_ivp(robertson, method="RK45", **STIFF)
        theirs = scipy.integrate.solve_ivp(robertson_np, method="RK45", **STIFF)
    assert ours.status == theirs.status == -1 and ours.message == theirs.message
    assert ours.t[-1] < 5.0 and ours.y.shape == (3, len(ours.t))


def test_rosenbrock_values_and_dense_output():
    ours = solve_ivp(robertson, method="Rosenbrock23", t_eval=[0.1, 1.0, 5.0], rtol=1e-6, atol=1e-10,
                     dense_output=True, **STIFF)
    exact = scipy.integrate.solve_ivp(robertson_np, method="Radau", t_eval=[0.1, 1.0, 5.0], rtol=1e-12,
                                      atol=1e-14, **STIFF)
    assert_close(ours.y, exact.y, rtol=1e-5, atol=1e-10)
    assert_close(ours.sol(np.array([0.1, 1.0, 5.0])), ours.y, rtol=1e-12, atol=1e-14)


def test_rosenbrock_derivative():
    def fn(log_rates):
        return solve_ivp(robertson, STIFF["t_span"], STIFF["y0"], method="Rosenbrock23", t_eval=[1.0, 5.0],
                         args=(tnp.exp(log_rates),), rtol=1e-5, atol=1e-9).y
    check_grads(fn, (np.log(RATES),), order=1, modes=("rev",), eps=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="adjoint=True is not available with method='Rosenbrock23'"):
        solve_ivp(robertson, method="Rosenbrock23", adjoint=True, **STIFF)
