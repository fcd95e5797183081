"""``tapegrad.scipy.stats.bernoulli``: the Bernoulli distribution, ``P(1) = p`` and ``P(0) = 1 - p``,
shifted by ``loc``, as ``scipy.stats.bernoulli``.

``logpmf``, ``pmf`` and the distribution functions are differentiable in ``p`` to any order in both
modes; their derivative in ``k`` is 0 (a discrete variable: they are piecewise constant in it).
Outside ``{loc, loc + 1}`` (a ``k`` that is not a whole number too) the log pmf is ``-inf`` and the
pmf 0, with a zero derivative. ``ppf`` is integer valued and not differentiable (zero derivative).
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.special import xlog1py, xlogy
from tapegrad.scipy.stats._support import NEG_INF, constant, lattice, log_probability, promoted

__all__ = ["logpmf", "pmf", "cdf", "sf", "logcdf", "logsf", "ppf"]


@promoted
def logpmf(k, p, loc=0):
    """``k log(p) + (1 - k) log(1 - p)`` at ``k - loc`` in ``{0, 1}``, ``-inf`` elsewhere.
    As ``scipy.stats.bernoulli.logpmf``."""
    k, inside = lattice(k, loc, 0, 1)
    return tnp.where(inside, xlogy(k, p) + xlog1py(1.0 - k, -p), NEG_INF)


@promoted
def pmf(k, p, loc=0):
    """``exp(logpmf(k, p, loc))``. As ``scipy.stats.bernoulli.pmf``."""
    return tnp.exp(logpmf(k, p, loc))


@promoted
def cdf(k, p, loc=0):
    """``P(X <= k)``: 0 below ``loc``, ``1 - p`` up to ``loc + 1``, 1 from there. As ``scipy.stats.bernoulli.cdf``."""
    k = k - loc
    q = 1.0 - p
    return tnp.where(k >= 1, tnp.ones_like(q), tnp.where(k >= 0, q, tnp.zeros_like(q)))


@promoted
def sf(k, p, loc=0):
    """``P(X > k)``: 1 below ``loc``, ``p`` up to ``loc + 1``, 0 from there. As ``scipy.stats.bernoulli.sf``."""
    k = k - loc
    p = p + tnp.zeros_like(tnp.asarray(p))  # an array, for ones_like below
    return tnp.where(k >= 1, tnp.zeros_like(p), tnp.where(k >= 0, p, tnp.ones_like(p)))


@promoted
def logcdf(k, p, loc=0):
    """``log(cdf(k, p, loc))``. As ``scipy.stats.bernoulli.logcdf``."""
    return log_probability(cdf(k, p, loc))


@promoted
def logsf(k, p, loc=0):
    """``log(sf(k, p, loc))``. As ``scipy.stats.bernoulli.logsf``."""
    return log_probability(sf(k, p, loc))


@promoted
def ppf(q, p, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q``: ``loc`` for ``q <= 1 - p``, ``loc + 1`` above, and
    ``loc - 1`` at ``q = 0`` (SciPy's convention). Not differentiable (integer valued).
    As ``scipy.stats.bernoulli.ppf``."""
    q = tnp.asarray(q)
    k = constant(q > 1.0 - p, 1.0, 0.0, q)
    return tnp.where(q == 0, -1.0, k) + loc
