"""``tapegrad.scipy.stats.nbinom``: the negative binomial distribution, the number of failures
before the ``n``-th success in trials of probability ``p``, shifted by ``loc``, as
``scipy.stats.nbinom``.

``logpmf``, ``pmf``, ``cdf`` and ``sf`` (``nbdtr(k, n, p) = betainc(n, k + 1, p)``, through
``tapegrad.scipy.special.betainc``) are differentiable in ``n`` and ``p`` to any order in both
modes; the derivative in ``k`` is 0 (discrete). Outside the non-negative whole numbers the log pmf is
``-inf`` and the pmf 0.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.special import betainc, gammaln, xlog1py, xlogy
from tapegrad.scipy.stats._discrete_ppf import discrete_ppf
from tapegrad.scipy.stats._support import NEG_INF, guard, lattice, log_probability, promoted

__all__ = ["logpmf", "pmf", "cdf", "sf", "logcdf", "logsf", "ppf"]


@promoted
def logpmf(k, n, p, loc=0):
    """``gammaln(n + k) - gammaln(k + 1) - gammaln(n) + n log(p) + k log(1 - p)`` on the support.
    As ``scipy.stats.nbinom.logpmf``."""
    k, inside = lattice(k, loc, 0)
    log_choose = gammaln(n + k) - gammaln(k + 1.0) - gammaln(n)
    return tnp.where(inside, log_choose + xlogy(n, p) + xlog1py(k, -p), NEG_INF)


@promoted
def pmf(k, n, p, loc=0):
    """``exp(logpmf(k, n, p, loc))``. As ``scipy.stats.nbinom.pmf``."""
    return tnp.exp(logpmf(k, n, p, loc))


def _shape(k, loc):
    """``floor(k - loc) + 1`` without derivative (1 below the support), and where it is in it."""
    k = stop_gradient(tnp.floor(k - loc))
    inside = k >= 0
    return guard(inside, k, 0.0) + 1.0, inside


@promoted
def cdf(k, n, p, loc=0):
    """``P(X <= k) = betainc(n, floor(k - loc) + 1, p)``, 0 below ``loc``. As ``scipy.stats.nbinom.cdf``."""
    b, inside = _shape(k, loc)
    value = betainc(n, b, p)
    return tnp.where(inside, value, tnp.zeros_like(value))


@promoted
def sf(k, n, p, loc=0):
    """``P(X > k) = betainc(floor(k - loc) + 1, n, 1 - p)``, 1 below ``loc``. As ``scipy.stats.nbinom.sf``."""
    b, inside = _shape(k, loc)
    value = betainc(b, n, 1.0 - p)
    return tnp.where(inside, value, tnp.ones_like(value))


@promoted
def logcdf(k, n, p, loc=0):
    """``log(cdf(k, n, p, loc))``. As ``scipy.stats.nbinom.logcdf``."""
    return log_probability(cdf(k, n, p, loc))


@promoted
def logsf(k, n, p, loc=0):
    """``log(sf(k, n, p, loc))``. As ``scipy.stats.nbinom.logsf``."""
    return log_probability(sf(k, n, p, loc))


@promoted
def ppf(q, n, p, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q`` (SciPy's values: ``loc - 1`` at ``q = 0``); integer
    valued, not differentiable (zero derivative). As ``scipy.stats.nbinom.ppf``."""
    return discrete_ppf("nbinom", q, n, p) + loc
