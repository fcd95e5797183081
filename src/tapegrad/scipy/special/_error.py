"""The error function family and the normal distribution's CDF: ``erf erfc erfcx erfinv erfcinv ndtr
log_ndtr ndtri``.

Derivatives (DLMF 7.10, and the inverse-function rule ``(f^-1)'(y) = 1 / f'(f^-1(y))``):

    erf'(x)   =  2/sqrt(pi) exp(-x^2)          erfinv'(y) = sqrt(pi)/2 exp(erfinv(y)^2)
    erfc'(x)  = -2/sqrt(pi) exp(-x^2)          ndtri'(q)  = sqrt(2 pi) exp(ndtri(q)^2 / 2)
    erfcx'(x) =  2 x erfcx(x) - 2/sqrt(pi)     ndtr'(x)   = exp(-x^2 / 2) / sqrt(2 pi)
    log_ndtr'(x) = ndtr'(x) / ndtr(x)  (the inverse Mills ratio; see ``log_ndtr`` for its stable form)
"""
from __future__ import annotations

import math

from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.scipy.special._impl import SQRT_2, SQRT_2PI, SQRT_PI, unary

_TWO_OVER_SQRT_PI = 2.0 / SQRT_PI
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

erf_p = unary("erf", lambda x, ans: _TWO_OVER_SQRT_PI * ew.exp(-(x * x)), fallback=math.erf)
erfc_p = unary("erfc", lambda x, ans: -_TWO_OVER_SQRT_PI * ew.exp(-(x * x)), fallback=math.erfc)
erfcx_p = unary("erfcx", lambda x, ans: 2.0 * x * ans - _TWO_OVER_SQRT_PI)
erfinv_p = unary("erfinv", lambda y, ans: 0.5 * SQRT_PI * ew.exp(ans * ans))
ndtr_p = unary("ndtr", lambda x, ans: ew.exp(-0.5 * (x * x)) / SQRT_2PI)
ndtri_p = unary("ndtri", lambda q, ans: SQRT_2PI * ew.exp(0.5 * (ans * ans)))


def _inverse_mills_ratio(x):
    """``ndtr'(x) / ndtr(x)``, accurate for every ``x``.

    Left of 0 it is ``sqrt(2/pi) / erfcx(-x/sqrt(2))``: from ``ndtr(x) = erfc(-x/sqrt 2) / 2`` and
    ``erfc(u) = exp(-u^2) erfcx(u)`` the Gaussian factors cancel exactly, so nothing underflows however
    far into the tail ``x`` lies, and the ratio tends to ``-x`` (``erfcx(u) ~ 1/(u sqrt(pi))``). Right
    of 0, ``ndtr(x) >= 1/2`` and the plain quotient is exact, while ``erfcx`` would overflow. Each
    branch gets a clamped input (the double-``where`` idiom) so the branch not taken never produces
    an inf or a nan whose zero cotangent would turn the derivative into a nan.
    """
    left = ew.less(x, 0.0)
    x_left = ew.where(left, x, 0.0)
    x_right = ew.where(left, 0.0, x)
    return ew.where(left, _SQRT_2_OVER_PI / erfcx(-x_left / SQRT_2),
                    ew.exp(-0.5 * (x_right * x_right)) / (SQRT_2PI * ndtr(x_right)))


log_ndtr_p = unary("log_ndtr", lambda x, ans: _inverse_mills_ratio(x))


def erf(x: ArrayLike) -> Array:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``, elementwise.

    Runs on ``scipy.special.erf`` (``cupyx.scipy.special.erf`` on CuPy), or ``math.erf`` elementwise
    without SciPy. Float dtypes are kept; integers give float64.
    """
    return bind(erf_p, x)


def erfc(x: ArrayLike) -> Array:
    """The complementary error function ``1 - erf(x)``, as ``scipy.special.erfc``: accurate where
    ``erf(x)`` is close to 1.

    Runs on SciPy, or ``math.erfc`` elementwise without it.
    """
    return bind(erfc_p, x)


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x**2) * erfc(x)``, as ``scipy.special.erfcx``
    (needs SciPy).

    Finite where ``erfc`` underflows (``erfcx(x) ~ 1 / (x sqrt(pi))`` for large ``x``); its derivative
    ``2 x erfcx(x) - 2/sqrt(pi)`` keeps that property.
    """
    return bind(erfcx_p, x)


def erfinv(y: ArrayLike) -> Array:
    """The inverse of :func:`erf` on ``(-1, 1)``, as ``scipy.special.erfinv``; ``±inf`` at ``±1``
    (needs SciPy).

    Derivative ``sqrt(pi)/2 * exp(erfinv(y)**2)``, from the inverse-function rule.
    """
    return bind(erfinv_p, y)


def erfcinv(y: ArrayLike) -> Array:
    """The inverse of :func:`erfc` on ``(0, 2)``, as ``scipy.special.erfcinv`` (needs SciPy).

    Computed as ``-ndtri(y / 2) / sqrt(2)``, which keeps full precision for ``y`` near 0 where
    ``erfinv(1 - y)`` would lose it.
    """
    return -ndtri(0.5 * y) / SQRT_2


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``, as ``scipy.special.ndtr``
    (needs SciPy).

    Derivative: the standard normal density ``exp(-x**2 / 2) / sqrt(2 pi)``.
    """
    return bind(ndtr_p, x)


def log_ndtr(x: ArrayLike) -> Array:
    """``log(ndtr(x))``, as ``scipy.special.log_ndtr``: accurate far into both tails (needs SciPy).

    The value is ``scipy.special.log_ndtr``. The derivative is the inverse Mills ratio
    ``phi(x) / Phi(x)``; left of 0 it is computed as ``sqrt(2/pi) / erfcx(-x / sqrt 2)``, the exact
    asymptotic form of ``log Phi(x) = -x**2/2 - log 2 + log erfcx(-x/sqrt 2)``, so it stays finite and
    accurate where ``phi`` and ``Phi`` both underflow (``log_ndtr'(x) ~ -x - 1/x`` as ``x -> -inf``;
    ``log_ndtr'(-1e5) = 1e5`` exactly in float64). Higher derivatives differentiate that form through
    ``erfcx``'s rule; they tend to the right limits (``log_ndtr'' -> -1``) but, by cancellation in
    ``2 u erfcx(u) - 2/sqrt(pi)``, lose relative precision of order ``eps * x**2`` far in the left tail.
    """
    return bind(log_ndtr_p, x)


def ndtri(q: ArrayLike) -> Array:
    """The inverse of :func:`ndtr` (the standard normal quantile) on ``(0, 1)``, as
    ``scipy.special.ndtri`` (needs SciPy).

    Derivative ``sqrt(2 pi) * exp(ndtri(q)**2 / 2)`` (the inverse-function rule).
    """
    return bind(ndtri_p, q)
