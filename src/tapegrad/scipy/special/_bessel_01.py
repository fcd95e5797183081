"""Bessel functions of orders 0 and 1: ``j0 j1 y0 y1``, differentiable to any order with these four
functions alone (``cupyx.scipy.special`` has them, but not ``jv`` or ``yv``).

Derivatives (DLMF 10.6.2, ``C_0' = -C_1`` and ``C_1' = C_0 - C_1 / x`` for ``C = J, Y``):

    j0' = -j1      j1' = j0 - j1 / x      y0' = -y1      y1' = y0 - y1 / x

Every derivative of these is again ``j0``, ``j1``, ``y0``, ``y1`` and powers of ``1 / x``, so no other
order is needed at any depth. ``j1 / x`` is entire (``1/2`` at 0); below ``|x| = 1`` it is its power
series (DLMF 10.2.2), whose derivatives are exact where the quotient's would cancel (the quotient's
``m``-th derivative loses about ``eps / |x|**(m + 1)``) and stay finite at 0.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._impl import unary

# J_1(x) / x = sum_k (-1)^k (x^2 / 4)^k / (2 k! (k + 1)!); at |x| < 1 the term k = 10 is below 1e-20
_J1_OVER_X = [(-1) ** k / (2 * math.factorial(k) * math.factorial(k + 1)) for k in range(10)]


def _j1_over_x(x):
    """``j1(x) / x``: the series where ``|x| < 1``, the quotient elsewhere ("double where": each
    branch gets an argument where it and its derivatives are finite)."""
    small = tnp.abs(x) < 1.0
    xs = tnp.where(small, x, 0.0)
    u = xs * xs * 0.25
    series = _J1_OVER_X[-1]
    for c in reversed(_J1_OVER_X[:-1]):
        series = series * u + c
    xl = tnp.where(small, 1.0, x)
    return tnp.where(small, series, j1(xl) / xl)


j0_p = unary("j0", lambda x, ans: -j1(x))
j1_p = unary("j1", lambda x, ans: j0(x) - _j1_over_x(x))
y0_p = unary("y0", lambda x, ans: -y1(x))
y1_p = unary("y1", lambda x, ans: y0(x) - y1(x) / x)  # y1 is singular at 0: no removable 0/0 there


def j0(x: ArrayLike) -> Array:
    """The Bessel function of the first kind of order 0, as ``scipy.special.j0``. Derivative
    ``-j1(x)``."""
    return bind(j0_p, x)


def j1(x: ArrayLike) -> Array:
    """The Bessel function of the first kind of order 1, as ``scipy.special.j1``. Derivative
    ``j0(x) - j1(x) / x`` (DLMF 10.6.2), ``1/2`` at 0 (``j1(x) / x`` is summed from its series near 0)."""
    return bind(j1_p, x)


def y0(x: ArrayLike) -> Array:
    """The Bessel function of the second kind of order 0, as ``scipy.special.y0`` (``x > 0``).
    Derivative ``-y1(x)``."""
    return bind(y0_p, x)


def y1(x: ArrayLike) -> Array:
    """The Bessel function of the second kind of order 1, as ``scipy.special.y1`` (``x > 0``).
    Derivative ``y0(x) - y1(x) / x`` (DLMF 10.6.2)."""
    return bind(y1_p, x)
