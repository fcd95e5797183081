"""``tapegrad.scipy.stats.betabinom``: the beta-binomial distribution, a binomial count whose success
probability is ``Beta(a, b)``, shifted by ``loc``, as ``scipy.stats.betabinom``.

``logpmf`` and ``pmf`` are differentiable in ``a`` and ``b`` (and ``n``, through ``betaln``) to any
order in both modes; the derivative in ``k`` is 0 (discrete). Outside ``{0, ..., n}`` the log pmf
is ``-inf`` and the pmf 0.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.special import betaln
from tapegrad.scipy.stats._discrete_ppf import discrete_ppf
from tapegrad.scipy.stats._support import NEG_INF, lattice, promoted

__all__ = ["logpmf", "pmf", "ppf"]


@promoted
def logpmf(k, n, a, b, loc=0):
    """``-log(n + 1) - betaln(n - k + 1, k + 1) + betaln(k + a, n - k + b) - betaln(a, b)``.
    As ``scipy.stats.betabinom.logpmf``."""
    k, inside = lattice(k, loc, 0, n)
    log_choose = -tnp.log1p(n + 0.0 * k) - betaln(n - k + 1.0, k + 1.0)
    return tnp.where(inside, log_choose + betaln(k + a, n - k + b) - betaln(a, b), NEG_INF)


@promoted
def pmf(k, n, a, b, loc=0):
    """``exp(logpmf(k, n, a, b, loc))``. As ``scipy.stats.betabinom.pmf``."""
    return tnp.exp(logpmf(k, n, a, b, loc))


@promoted
def ppf(q, n, a, b, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q`` (SciPy's values: ``loc - 1`` at ``q = 0``); integer
    valued, not differentiable (zero derivative). As ``scipy.stats.betabinom.ppf``."""
    return discrete_ppf("betabinom", q, n, a, b) + loc
