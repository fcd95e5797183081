"""``tapegrad.scipy.integrate``: ``trapezoid`` and ``simpson`` quadrature, ``odeint`` (adaptive
Dormand-Prince, differentiable by the adjoint method, as JAX's ``jax.experimental.ode.odeint``) and
``solve_ivp`` (SciPy's ``RK23``, ``RK45`` and ``DOP853``, differentiable through the steps or by the
adjoint method)."""
from tapegrad.scipy.integrate._odeint import odeint, odeint_explain
from tapegrad.scipy.integrate._quadrature import simpson, trapezoid
from tapegrad.scipy.integrate._solve_ivp import OdeResult, OdeSolution, solve_ivp

__all__ = ["OdeResult", "OdeSolution", "odeint", "odeint_explain", "simpson", "solve_ivp", "trapezoid"]
