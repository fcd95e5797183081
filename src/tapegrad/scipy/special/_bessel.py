"""Modified Bessel functions of the first kind, orders 0 and 1: ``i0 i1 i0e i1e``.

Derivatives (DLMF 10.29): ``i0' = i1`` and ``i1'(x) = i0(x) - i1(x)/x``; the scaled forms
``i0e(x) = exp(-|x|) i0(x)`` and ``i1e(x) = exp(-|x|) i1(x)`` add ``-sign(x)`` times themselves.

``i1(x)/x`` is an even entire function equal to 1/2 at 0. Near 0 it is evaluated from its power
series ``sum_k (x^2/4)^k / (2 k! (k+1)!)`` rather than as a quotient, so ``i1'(0) = 1/2`` comes out
exactly and every higher derivative at and near 0 is the series' own (no 0/0, no cancellation).
"""
from __future__ import annotations

import math

from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.scipy.special._impl import unary

# i1(x)/x = sum_k c_k x^(2k) with c_k = 1 / (2 * 4^k * k! * (k+1)!); for |x| < 1 the terms past k = 9
# are below 1e-19 of the sum
_I1_OVER_X = [0.5 / (4.0 ** k * math.factorial(k) * math.factorial(k + 1)) for k in range(10)]
_SERIES_RADIUS = 1.0


def _i1_over_x_series(x):
    x2 = x * x
    out = _I1_OVER_X[-1]
    for c in reversed(_I1_OVER_X[:-1]):
        out = out * x2 + c
    return out


def _over_x(x, large, small):
    """``large(x) / x`` away from 0 and the series ``small(x)`` within ``_SERIES_RADIUS``; each branch
    gets a clamped input (double ``where``) so the branch not taken never makes a 0/0."""
    near = ew.less(ew.abs(x), _SERIES_RADIUS)
    x_far = ew.where(near, 1.0, x)
    x_near = ew.where(near, x, 0.0)
    return ew.where(near, small(x_near), large(x_far) / x_far)


def _i1_over_x(x):
    return _over_x(x, i1, _i1_over_x_series)


def _i1e_over_x(x):
    return _over_x(x, i1e, lambda x: ew.exp(-ew.abs(x)) * _i1_over_x_series(x))


i0_p = unary("i0", lambda x, ans: i1(x))
i1_p = unary("i1", lambda x, ans: i0(x) - _i1_over_x(x))
i0e_p = unary("i0e", lambda x, ans: i1e(x) - ew.sign(x) * ans)
i1e_p = unary("i1e", lambda x, ans: i0e(x) - _i1e_over_x(x) - ew.sign(x) * ans)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind of order 0, as ``scipy.special.i0`` (needs
    SciPy). Derivative: ``i1(x)``."""
    return bind(i0_p, x)


def i1(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind of order 1, as ``scipy.special.i1`` (needs
    SciPy). Derivative: ``i0(x) - i1(x)/x``, which is 1/2 at 0 (``i1(x)/x`` from its series near 0)."""
    return bind(i1_p, x)


def i0e(x: ArrayLike) -> Array:
    """The exponentially scaled ``exp(-|x|) * i0(x)``, finite where ``i0`` overflows, as
    ``scipy.special.i0e`` (needs SciPy). Derivative: ``i1e(x) - sign(x) * i0e(x)`` (0 at the kink
    ``x = 0``, the convention of ``abs``)."""
    return bind(i0e_p, x)


def i1e(x: ArrayLike) -> Array:
    """The exponentially scaled ``exp(-|x|) * i1(x)``, as ``scipy.special.i1e`` (needs SciPy).
    Derivative: ``i0e(x) - i1e(x)/x - sign(x) * i1e(x)``."""
    return bind(i1e_p, x)
