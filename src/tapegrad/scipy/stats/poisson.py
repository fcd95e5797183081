"""``tapegrad.scipy.stats.poisson``: the Poisson distribution with mean ``mu``, shifted by ``loc``,
as ``scipy.stats.poisson``.

``logpmf`` and ``pmf`` are differentiable in ``mu`` to any order in both modes. ``cdf`` and ``sf``
are ``tapegrad.scipy.special.gammaincc``/``gammainc`` (``pdtr(k, mu) = gammaincc(k + 1, mu)``) and
are differentiable in ``mu`` (``d cdf / d mu = -pmf(k, mu)``). The derivative in ``k``
is 0 (discrete). Outside the non-negative whole numbers the log pmf is ``-inf`` and the pmf 0.
``entropy(mu)`` is JAX's function (SciPy's method), differentiable in ``mu`` too.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.special import gammainc, gammaincc, gammaln, xlogy
from tapegrad.scipy.stats._discrete_ppf import discrete_ppf
from tapegrad.scipy.stats._support import NEG_INF, guard, lattice, log_probability, promoted

__all__ = ["logpmf", "pmf", "cdf", "sf", "logcdf", "logsf", "entropy", "ppf"]


@promoted
def logpmf(k, mu, loc=0):
    """``k log(mu) - gammaln(k + 1) - mu`` on the support, ``-inf`` elsewhere. As ``scipy.stats.poisson.logpmf``."""
    k, inside = lattice(k, loc, 0)
    return tnp.where(inside, xlogy(k, mu) - gammaln(k + 1.0) - mu, NEG_INF)


@promoted
def pmf(k, mu, loc=0):
    """``exp(logpmf(k, mu, loc))``. As ``scipy.stats.poisson.pmf``."""
    return tnp.exp(logpmf(k, mu, loc))


def _shape(k, loc):
    """``floor(k - loc) + 1`` without derivative (1 below the support), and where it is in it."""
    k = stop_gradient(tnp.floor(k - loc))
    inside = k >= 0
    return guard(inside, k, 0.0) + 1.0, inside


@promoted
def cdf(k, mu, loc=0):
    """``P(X <= k) = gammaincc(floor(k - loc) + 1, mu)``, 0 below ``loc``. As ``scipy.stats.poisson.cdf``."""
    a, inside = _shape(k, loc)
    value = gammaincc(a, mu)
    return tnp.where(inside, value, tnp.zeros_like(value))


@promoted
def sf(k, mu, loc=0):
    """``P(X > k) = gammainc(floor(k - loc) + 1, mu)``, 1 below ``loc``. As ``scipy.stats.poisson.sf``."""
    a, inside = _shape(k, loc)
    value = gammainc(a, mu)
    return tnp.where(inside, value, tnp.ones_like(value))


@promoted
def logcdf(k, mu, loc=0):
    """``log(cdf(k, mu, loc))``. As ``scipy.stats.poisson.logcdf``."""
    return log_probability(cdf(k, mu, loc))


@promoted
def logsf(k, mu, loc=0):
    """``log(sf(k, mu, loc))``. As ``scipy.stats.poisson.logsf``."""
    return log_probability(sf(k, mu, loc))


_TERMS = 256  # k = 0..255: for mu < 100 the mass beyond is below 1e-40
_SERIES_FROM = 100.0


@promoted
def entropy(mu, loc=0):
    """The Shannon entropy ``-sum_k pmf(k) log pmf(k)`` (``loc`` does not change it).
    As ``scipy.stats.poisson.entropy``.

    Below ``mu = 100`` it is the sum ``mu - mu log(mu) + sum_k pmf(k) gammaln(k + 1)`` over
    ``k = 0..255`` (``E[k] = mu`` gives the first two terms exactly); from 100 the asymptotic series
    ``log(2 pi e mu) / 2 - 1/(12 mu) - 1/(24 mu**2) - 19/(360 mu**3)``, whose next term is below
    ``1e-9`` relative there. Within ``1e-9`` of SciPy's summation everywhere (JAX's is ``1e-5``),
    0 at ``mu = 0``, and differentiable in ``mu`` to any order in both modes.
    """
    summed = mu < _SERIES_FROM
    small = guard(summed, mu, 1.0)
    k = tnp.reshape(tnp.arange(_TERMS, dtype=tnp.result_type(mu)), (_TERMS,) + (1,) * tnp.ndim(mu))
    log_factorial = gammaln(k + 1.0)
    probabilities = tnp.exp(xlogy(k, small) - small - log_factorial)
    total = small - xlogy(small, small) + tnp.sum(probabilities * log_factorial, axis=0)
    large = guard(summed, _SERIES_FROM, mu)
    series = (0.5 * tnp.log(2.0 * math.pi * math.e * large) - 1.0 / (12.0 * large) - 1.0 / (24.0 * large ** 2)
              - 19.0 / (360.0 * large ** 3))
    return tnp.where(summed, total, series) + 0 * loc  # broadcast against loc, which changes nothing


@promoted
def ppf(q, mu, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q`` (SciPy's values: ``loc - 1`` at ``q = 0``); integer
    valued, not differentiable (zero derivative). As ``scipy.stats.poisson.ppf``."""
    return discrete_ppf("poisson", q, mu) + loc
