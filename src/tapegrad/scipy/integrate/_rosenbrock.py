"""``Rosenbrock23``: the stiff method of ``solve_ivp``, Shampine and Reichelt's L-stable Rosenbrock pair
of orders 2 and 3 (MATLAB's ``ode23s``; "The MATLAB ODE Suite", SIAM J. Sci. Comput. 18, 1997, section 3),
with the Jacobian ``df/dy`` from ``jacfwd`` and ``df/dt`` from one ``jvp``; with ``jac_sparsity``, the Jacobian
by colouring and ``W`` a sparse matrix (``_sparse_rosenbrock.py``).

A Rosenbrock method is linearly implicit: each stage solves a linear system with ``W = I - h d J`` instead
of iterating Newton's method to convergence, so a step is a fixed computation (three solves, two new
evaluations of ``fun``) that reverse mode differentiates through and that fits one ``while_loop`` body,
where an implicit Runge-Kutta or BDF step would nest a Newton loop in it.

One step of ``h`` from ``(t, y)``, ``F0 = f(t, y)``, ``T = df/dt``, ``d = 1 / (2 + sqrt 2)``::

    k1 = W^-1 (F0 + h d T)
    F1 = f(t + h/2, y + h/2 k1),   k2 = W^-1 (F1 - k1) + k1
    y_new = y + h k2,              F2 = f(t + h, y_new)
    k3 = W^-1 (F2 - e32 (k2 - F1) - 2 (k1 - F0) + h d T),   e32 = 6 + sqrt 2
    error = h/6 (k1 - 2 k2 + k3)

and the interpolant ``y(t + s h) = y + h (s (1 - s) k1 + s (s - 2d) k2) / (1 - 2d)``. The error norm and
the step-size control are the explicit methods' (SciPy's RMS norm; ``error_order = 2``).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import tapegrad.numpy as tnp
from tapegrad._api import jvp
from tapegrad._jacobians import jacfwd
from tapegrad.scipy.integrate._runge_kutta import rms
from tapegrad.scipy.integrate._sparse_rosenbrock import sparse_solver

D = 1.0 / (2.0 + math.sqrt(2.0))
E32 = 6.0 + math.sqrt(2.0)


class Rosenbrock(NamedTuple):
    """The method's constants, in the fields ``solve_ivp``'s loop reads from a tableau."""
    name: str = "Rosenbrock23"
    order: int = 2
    error_order: int = 2
    n_stages: int = 2  # new evaluations of fun per attempted step (F0 is the last step's F2)
    n_rows: int = 2  # the interpolant's coefficients: of s and s**2
    D: tuple = ()  # no DOP853-style interpolant: the rows weigh powers of s
    sparsity: Any = None  # a _sparse_rosenbrock.SparseStructure: W is sparse, J by colouring


ROSENBROCK23 = Rosenbrock()


def _dense_solver(fun, t, y, hd):
    """``solve(b) = W^-1 b`` with ``W = I - hd * df/dy(t, y)``, dense."""
    w = tnp.eye(tnp.shape(y)[0], dtype=y.dtype) - hd * jacfwd(lambda z: fun(t, z))(y)
    return lambda b: tnp.linalg.solve(w, b)


def rosenbrock_step(method, fun, t, y, f, h, rtol, atol):
    """One step: ``(y_new, f_new, (k1, k2), error_norm)``."""
    solve = (_dense_solver(fun, t, y, h * D) if method.sparsity is None
             else sparse_solver(method.sparsity, fun, t, y, h * D))
    _, f_t = jvp(lambda s: fun(s, y), (t,), (tnp.ones_like(t),))
    hdt = h * D * f_t
    k1 = solve(f + hdt)
    f1 = fun(t + 0.5 * h, y + 0.5 * h * k1)
    k2 = solve(f1 - k1) + k1
    y_new = y + h * k2
    f2 = fun(t + h, y_new)
    k3 = solve(f2 - E32 * (k2 - f1) - 2.0 * (k1 - f) + hdt)
    scale = atol + rtol * tnp.maximum(tnp.abs(y), tnp.abs(y_new))
    return y_new, f2, (k1, k2), rms((h / 6.0) * (k1 - 2.0 * k2 + k3) / scale)


def rosenbrock_dense_rows(fun, t, y, y_new, f_new, h, k):
    """The interpolant's coefficients of ``s`` and ``s**2`` (``_runge_kutta.dense_eval`` reads them)."""
    k1, k2 = k
    return tnp.stack([h * (k1 - 2.0 * D * k2) / (1.0 - 2.0 * D), h * (k2 - k1) / (1.0 - 2.0 * D)])
