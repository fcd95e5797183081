"""``tapegrad.scipy.stats.binom``: the binomial distribution, the number of successes in ``n``
trials of probability ``p``, shifted by ``loc``, as ``scipy.stats.binom``.

``logpmf`` and ``pmf`` are differentiable in ``p`` (and in ``n`` through ``gammaln``, a continuous
extension) to any order in both modes. ``cdf`` and ``sf`` are ``tapegrad.scipy.special.betainc``
(``bdtr(k, n, p) = betainc(n - k, k + 1, 1 - p)``) and are differentiable in ``p``
(``d cdf / dp = -n pmf(k; n - 1, p)``), and in ``n`` through ``betainc``'s shape derivatives (the
same continuous extension as ``gammaln``'s). Every function has a zero derivative in ``k``
(discrete). Outside ``{0, ..., n}`` the log pmf is ``-inf`` and the pmf 0.
``ppf`` is integer valued and not differentiable.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.special import betainc, gammaln, xlog1py, xlogy
from tapegrad.scipy.stats._discrete_ppf import discrete_ppf
from tapegrad.scipy.stats._support import NEG_INF, constant, guard, lattice, log_probability, promoted

__all__ = ["logpmf", "pmf", "cdf", "sf", "logcdf", "logsf", "ppf"]


@promoted
def logpmf(k, n, p, loc=0):
    """``log C(n, k) + k log(p) + (n - k) log(1 - p)`` on the support, ``-inf`` elsewhere.
    As ``scipy.stats.binom.logpmf``."""
    k, inside = lattice(k, loc, 0, n)
    log_choose = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    return tnp.where(inside, log_choose + xlogy(k, p) + xlog1py(n - k, -p), NEG_INF)


@promoted
def pmf(k, n, p, loc=0):
    """``exp(logpmf(k, n, p, loc))``. As ``scipy.stats.binom.pmf``."""
    return tnp.exp(logpmf(k, n, p, loc))


def _count(k, n, loc):
    """``floor(k - loc)`` without derivative, kept in ``[0, n - 1]`` (where the sums are not 0 or 1),
    where it is in that range, and the count itself."""
    k = stop_gradient(tnp.floor(k - loc))
    between = (k >= 0) & (k < n)
    return guard(between, k, 0.0), between, k


@promoted
def cdf(k, n, p, loc=0):
    """``P(X <= k) = betainc(n - k, k + 1, 1 - p)`` at ``k = floor(k - loc)``. As ``scipy.stats.binom.cdf``."""
    count, between, k = _count(k, n, loc)
    value = betainc(n - count, count + 1.0, 1.0 - p)
    return tnp.where(between, value, constant(k < 0, 0.0, 1.0, value))


@promoted
def sf(k, n, p, loc=0):
    """``P(X > k) = betainc(k + 1, n - k, p)`` (no cancellation in the right tail). As ``scipy.stats.binom.sf``."""
    count, between, k = _count(k, n, loc)
    value = betainc(count + 1.0, n - count, p)
    return tnp.where(between, value, constant(k < 0, 1.0, 0.0, value))


@promoted
def logcdf(k, n, p, loc=0):
    """``log(cdf(k, n, p, loc))``. As ``scipy.stats.binom.logcdf``."""
    return log_probability(cdf(k, n, p, loc))


@promoted
def logsf(k, n, p, loc=0):
    """``log(sf(k, n, p, loc))``. As ``scipy.stats.binom.logsf``."""
    return log_probability(sf(k, n, p, loc))


@promoted
def ppf(q, n, p, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q`` (SciPy's values: ``loc - 1`` at ``q = 0``); integer
    valued, not differentiable (zero derivative). As ``scipy.stats.binom.ppf``."""
    return discrete_ppf("binom", q, n, p) + loc
