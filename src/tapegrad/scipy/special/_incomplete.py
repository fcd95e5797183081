"""The regularized incomplete gamma and beta functions: ``gammainc gammaincc betainc``.

Derivatives in the integration limit ``x`` are the integrands (DLMF 8.8, 8.17), written in log
space with ``xlogy``/``xlog1py`` so that ``x = 0`` (and ``x = 1``) with a unit exponent gives the right
finite value rather than ``0 * log 0``:

    d/dx gammainc(a, x) = x^(a-1) e^(-x) / gamma(a)  = exp(xlogy(a - 1, x) - x - gammaln(a))
    d/dx betainc(a, b, x) = x^(a-1) (1-x)^(b-1) / B(a, b)

The derivatives in the shape parameters ``a`` (and ``b``) have no closed form in these functions
(JAX computes igamma's with a dedicated series; SciPy offers none): differentiating through them raises
``NotImplementedError`` naming the argument.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad.scipy.special._gamma import betaln, gammaln
from tapegrad.scipy.special._log import xlog1py, xlogy
from tapegrad.scipy.special._partials import elementwise, no_derivative


def _gamma_density(a, x, ans):
    return tnp.exp(xlogy(a - 1, x) - x - gammaln(a))


def _beta_density(a, b, x, ans):
    return tnp.exp(xlogy(a - 1, x) + xlog1py(b - 1, -x) - betaln(a, b))


gammainc_p = elementwise("gammainc", [no_derivative("gammainc", "a"), _gamma_density])
gammaincc_p = elementwise("gammaincc", [no_derivative("gammaincc", "a"),
                                        lambda a, x, ans: -_gamma_density(a, x, ans)])
betainc_p = elementwise("betainc", [no_derivative("betainc", "a"), no_derivative("betainc", "b"),
                                    _beta_density])


def gammainc(a, x):
    """The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``, broadcast,
    as ``scipy.special.gammainc`` (``a > 0``, ``x >= 0``).

    Derivative in ``x``: the gamma density ``x^(a-1) e^(-x) / Gamma(a)``, to any order.

    Raises:
        NotImplementedError: when differentiating with respect to ``a`` (no closed form).
    """
    return bind(gammainc_p, a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, accurate where ``P``
    is close to 1, as ``scipy.special.gammaincc``.

    Derivative in ``x``: ``-x^(a-1) e^(-x) / Gamma(a)``.

    Raises:
        NotImplementedError: when differentiating with respect to ``a``.
    """
    return bind(gammaincc_p, a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)``, broadcast, as ``scipy.special.betainc``
    (``a, b > 0``, ``0 <= x <= 1``).

    Derivative in ``x``: the beta density ``x^(a-1) (1-x)^(b-1) / B(a, b)``, to any order.

    Raises:
        NotImplementedError: when differentiating with respect to ``a`` or ``b`` (no closed form).
    """
    return bind(betainc_p, a, b, x)
