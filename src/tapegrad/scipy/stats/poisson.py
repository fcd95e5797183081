"""``tapegrad.scipy.stats.poisson``: the Poisson distribution with mean ``mu``, shifted by ``loc``,
as ``scipy.stats.poisson``.

``logpmf`` and ``pmf`` are differentiable in ``mu`` to any order in both modes. ``cdf`` and ``sf``
take their values from ``scipy.special.gammaincc``/``gammainc`` (``pdtr(k, mu) = gammaincc(k + 1,
mu)``) and are differentiable in ``mu`` (``d cdf / d mu = -pmf(k, mu)``). The derivative in ``k``
is 0 (discrete). Outside the non-negative whole numbers the log pmf is ``-inf`` and the pmf 0.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.special import gammaln, xlogy
from tapegrad.scipy.stats._scipy_cdf import gammainc_p, gammaincc_p
from tapegrad.scipy.stats._support import NEG_INF, guard, lattice, log_probability, promoted


@promoted
def logpmf(k, mu, loc=0):
    """``k log(mu) - gammaln(k + 1) - mu`` on the support, ``-inf`` elsewhere."""
    k, inside = lattice(k, loc, 0)
    return tnp.where(inside, xlogy(k, mu) - gammaln(k + 1.0) - mu, NEG_INF)


@promoted
def pmf(k, mu, loc=0):
    """``exp(logpmf(k, mu, loc))``."""
    return tnp.exp(logpmf(k, mu, loc))


def _shape(k, loc):
    """``floor(k - loc) + 1`` without derivative (1 below the support), and where it is in it."""
    k = stop_gradient(tnp.floor(k - loc))
    inside = k >= 0
    return guard(inside, k, 0.0) + 1.0, inside


@promoted
def cdf(k, mu, loc=0):
    """``P(X <= k) = gammaincc(floor(k - loc) + 1, mu)``, 0 below ``loc``."""
    a, inside = _shape(k, loc)
    value = bind(gammaincc_p, a, mu)
    return tnp.where(inside, value, tnp.zeros_like(value))


@promoted
def sf(k, mu, loc=0):
    """``P(X > k) = gammainc(floor(k - loc) + 1, mu)``, 1 below ``loc``."""
    a, inside = _shape(k, loc)
    value = bind(gammainc_p, a, mu)
    return tnp.where(inside, value, tnp.ones_like(value))


@promoted
def logcdf(k, mu, loc=0):
    """``log(cdf(k, mu, loc))``."""
    return log_probability(cdf(k, mu, loc))


@promoted
def logsf(k, mu, loc=0):
    """``log(sf(k, mu, loc))``."""
    return log_probability(sf(k, mu, loc))
