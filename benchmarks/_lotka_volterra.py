"""The Lotka-Volterra fit that ``bench_science.py``'s rows share: a predator-prey model, its data, and
the loss of its four rates, in tapegrad and (for the references) in NumPy and JAX.

The model: ``d(prey)/dt = a prey - b prey pred``, ``d(pred)/dt = d prey pred - g pred``, from
``Y0 = (10, 10)``, observed at ``N_OBS`` times ``DT_OBS`` apart (t = 0.25 ... 10). The fixed-step loss
integrates with ``SUBSTEPS`` classical RK4 steps between observations: a ``fori_loop`` inside a
``scan``, 160 steps in all. The data are the model at ``TRUE`` with 2 % multiplicative noise (seeded).
"""
from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp

N_OBS, SUBSTEPS, DT_OBS = 40, 4, 0.25
TRUE = np.array([1.1, 0.4, 0.1, 0.4])
Y0 = np.array([10.0, 10.0])
START = np.array([1.0, 0.5, 0.12, 0.5])  # where a fit starts
TIMES = DT_OBS * np.arange(N_OBS + 1)  # t[0] = 0 is the initial state; the data are at t[1:]


def rhs(y, t, theta):
    """The vector field, ``func(y, t, *args)`` as ``odeint`` takes it (written in ``tnp``)."""
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    prey, pred = y[0], y[1]
    return tnp.stack([a * prey - b * prey * pred, d * prey * pred - g * pred])


def _rk4(y, theta, h):
    k1 = rhs(y, 0.0, theta)
    k2 = rhs(y + 0.5 * h * k1, 0.0, theta)
    k3 = rhs(y + 0.5 * h * k2, 0.0, theta)
    k4 = rhs(y + h * k3, 0.0, theta)
    return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def simulate(theta, y0=Y0):
    """The states at the ``N_OBS`` observation times after ``t = 0``: ``(N_OBS, 2)``."""
    h = DT_OBS / SUBSTEPS

    def observe(y, _):
        y = tg.fori_loop(0, SUBSTEPS, lambda i, y: _rk4(y, theta, h), y)
        return y, y
    _, ys = tg.scan(observe, tnp.asarray(y0), None, length=N_OBS)
    return ys


def data(seed: int = 0, theta=TRUE) -> np.ndarray:
    """The observations: the model at ``theta`` times ``1 + 0.02 N(0, 1)``."""
    clean = np.asarray(simulate(theta))
    return clean * (1.0 + 0.02 * np.random.default_rng(seed).standard_normal(clean.shape))


def loss(theta, observed):
    """The mean squared error of the fixed-step model against ``observed``."""
    return tnp.mean((simulate(theta) - observed) ** 2)


def datasets(n: int) -> np.ndarray:
    """``n`` data sets ``(n, N_OBS, 2)``: the model at rates spread around ``TRUE``, each with its noise."""
    rng = np.random.default_rng(1234)
    rates = TRUE * (1.0 + 0.05 * rng.standard_normal((n, 4)))
    return np.stack([data(seed=i, theta=r) for i, r in enumerate(rates)])


# ---- references -----------------------------------------------------------------------------------
def _jax():
    """``(jax, jax.numpy)`` in float64, or None where JAX does not import."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def jax_rhs(y, t, theta):
    """:func:`rhs` in JAX."""
    import jax.numpy as jnp
    a, b, d, g = theta
    return jnp.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def jax_odeint_grad(rtol: float, atol: float):
    """A call of JAX's ``jit(grad)`` of the sum of ``jax.experimental.ode.odeint`` of the model at ``TIMES``
    (from ``Y0``, at ``TRUE``), waiting for its result; None where JAX does not import."""
    if _jax() is None:
        return None
    jax, jnp = _jax()
    from jax.experimental.ode import odeint
    grad = jax.jit(jax.grad(lambda theta: jnp.sum(odeint(jax_rhs, jnp.asarray(Y0), jnp.asarray(TIMES), theta,
                                                         rtol=rtol, atol=atol))))
    theta = jnp.asarray(TRUE)
    return lambda: grad(theta).block_until_ready()


def jax_loss():
    """The same loss in JAX (float64), and :func:`jax_rhs`; None where JAX does not import."""
    if _jax() is None:
        return None
    jax, jnp = _jax()

    def jsimulate(theta):
        h = DT_OBS / SUBSTEPS

        def rk4(i, y):
            k1 = jax_rhs(y, 0.0, theta)
            k2 = jax_rhs(y + 0.5 * h * k1, 0.0, theta)
            k3 = jax_rhs(y + 0.5 * h * k2, 0.0, theta)
            k4 = jax_rhs(y + h * k3, 0.0, theta)
            return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

        def observe(y, _):
            y = jax.lax.fori_loop(0, SUBSTEPS, rk4, y)
            return y, y
        return jax.lax.scan(observe, jnp.asarray(Y0), None, length=N_OBS)[1]

    def jloss(theta, observed):
        return jnp.mean((jsimulate(theta) - observed) ** 2)
    return jloss, jax_rhs
