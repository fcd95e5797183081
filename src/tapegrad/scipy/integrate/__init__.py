"""``tapegrad.scipy.integrate``: ``trapezoid`` and ``simpson`` quadrature, and ``odeint`` (adaptive
Dormand-Prince, differentiable by the adjoint method, as JAX's ``jax.experimental.ode.odeint``)."""
from tapegrad.scipy.integrate._odeint import odeint
from tapegrad.scipy.integrate._quadrature import simpson, trapezoid

__all__ = ["odeint", "simpson", "trapezoid"]
