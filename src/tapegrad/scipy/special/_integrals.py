"""Exponential, sine/cosine and Fresnel integrals, Dawson's integral and the dilogarithm: ``expi exp1
expn sici fresnel dawsn spence``.

Each is an integral of an elementary function, so its derivative is that integrand (DLMF 6.2, 6.4,
7.2, 7.10, 25.12):

    expi'(x) = e^x / x          exp1'(x) = -e^(-x) / x       expn'(n, x) = -expn(n - 1, x)  (n >= 1)
    Si'(x) = sin(x) / x         Ci'(x) = cos(x) / x          dawsn'(x) = 1 - 2 x dawsn(x)
    S'(x) = sin(pi x^2 / 2)     C'(x) = cos(pi x^2 / 2)      spence'(z) = log(z) / (1 - z)
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._impl import unary
from tapegrad.scipy.special._partials import elementwise, scipy_part

expi_p = unary("expi", lambda x, ans: tnp.exp(x) / x)
exp1_p = unary("exp1", lambda x, ans: -tnp.exp(-x) / x)
dawsn_p = unary("dawsn", lambda x, ans: 1.0 - 2.0 * x * ans)


def _expn_dx(n, x, ans):
    # E_0(x) = e^(-x) / x has derivative -E_0(x) (1 + 1/x); for n >= 1, E_n' = -E_(n-1)
    return tnp.where(n >= 1, -expn(tnp.maximum(n - 1, 0), x), -ans * (1.0 + 1.0 / x))


expn_p = elementwise("expn", [None, _expn_dx], dtype_from=(1,))


def _primitive_of_part(name, index, derivative):
    """A unary primitive for result ``index`` of ``scipy.special.<name>``, with ``derivative(x)``."""
    return elementwise(f"{name}_{index}", [lambda x, ans: derivative(x)], impl=scipy_part(name, index))


_si_p = _primitive_of_part("sici", 0, lambda x: tnp.sinc(x / math.pi))  # sin(x)/x, 1 at 0
_ci_p = _primitive_of_part("sici", 1, lambda x: tnp.cos(x) / x)
_fresnel_s_p = _primitive_of_part("fresnel", 0, lambda x: tnp.sin(0.5 * math.pi * (x * x)))
_fresnel_c_p = _primitive_of_part("fresnel", 1, lambda x: tnp.cos(0.5 * math.pi * (x * x)))

# -log1p(u)/u = -(1 - u/2 + u^2/3 - ...) near u = z - 1 = 0: six terms leave < u^6/7 < 1e-18 there
_SPENCE_SERIES = [-1.0 / (k + 1) * (-1.0) ** k for k in range(6)]
_SPENCE_RADIUS = 1e-3


def _spence_dz(z, ans):
    u = z - 1.0
    near = tnp.abs(u) < _SPENCE_RADIUS
    u_near, u_far = tnp.where(near, u, 0.0), tnp.where(near, 1.0, u)  # double where: no 0/0
    series = _SPENCE_SERIES[-1]
    for c in reversed(_SPENCE_SERIES[:-1]):
        series = series * u_near + c
    return tnp.where(near, series, -tnp.log1p(u_far) / u_far)


spence_p = unary("spence", _spence_dz)


def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x) = -PV integral_{-x}^inf e^(-t)/t dt``, as ``scipy.special.expi``.
    Derivative ``e^x / x``."""
    return bind(expi_p, x)


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E_1(x) = integral_1^inf e^(-x t)/t dt`` for ``x > 0``, as
    ``scipy.special.exp1``. Derivative ``-e^(-x) / x``."""
    return bind(exp1_p, x)


def expn(n: ArrayLike, x: ArrayLike) -> Array:
    """The generalized exponential integral ``E_n(x) = integral_1^inf e^(-x t)/t^n dt``, broadcast, as
    ``scipy.special.expn``.

    Args:
        n: a non-negative integer order (an array is broadcast against ``x``); not differentiable.
        x: the argument, ``x > 0``; the result has its float dtype.

    Derivative in ``x``: ``-expn(n - 1, x)``, and ``-E_0(x) (1 + 1/x)`` for ``n = 0``.
    """
    return bind(expn_p, n, x)


def sici(x: ArrayLike) -> tuple[Array, ...]:
    """The sine and cosine integrals ``(Si(x), Ci(x))``, as ``scipy.special.sici``:
    ``Si(x) = integral_0^x sin(t)/t dt`` and ``Ci(x) = gamma + log|x| + integral_0^x (cos t - 1)/t dt``
    (for ``x < 0`` SciPy returns the real part, ``Ci(|x|)``).

    Returns:
        A pair of arrays of ``x``'s shape and float dtype. Derivatives ``sin(x)/x`` (1 at 0) and
        ``cos(x)/x``. Each part is its own primitive, so SciPy is called once per part used.
    """
    return bind(_si_p, x), bind(_ci_p, x)


def fresnel(x: ArrayLike) -> tuple[Array, ...]:
    """The Fresnel integrals ``(S(x), C(x))`` with ``S(x) = integral_0^x sin(pi t^2/2) dt`` and
    ``C(x) = integral_0^x cos(pi t^2/2) dt``, as ``scipy.special.fresnel`` (note SciPy's order: S first).

    Returns:
        A pair of arrays of ``x``'s shape and float dtype; derivatives ``sin(pi x^2/2)`` and
        ``cos(pi x^2/2)``.
    """
    return bind(_fresnel_s_p, x), bind(_fresnel_c_p, x)


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``e^(-x^2) integral_0^x e^(t^2) dt``, as ``scipy.special.dawsn``. Derivative
    ``1 - 2 x dawsn(x)``."""
    return bind(dawsn_p, x)


def spence(z: ArrayLike) -> Array:
    """SciPy's dilogarithm ``spence(z) = integral_1^z log(t) / (1 - t) dt`` for real ``z >= 0``
    (``Li_2(1 - z)``), as ``scipy.special.spence``.

    Derivative ``log(z) / (1 - z)``, evaluated as ``-log1p(u) / u`` with ``u = z - 1`` and by its series
    within ``1e-3`` of ``z = 1`` (where it is ``-1``), so it is accurate to every order there.
    """
    return bind(spence_p, z)
