"""``tapegrad.scipy.stats.expon``: the exponential distribution, density ``exp(-z) / scale`` for
``z = (x - loc) / scale >= 0``, as ``scipy.stats.expon``.

Every function broadcasts its arguments and is differentiable in all of them, to any order, in both
modes. Left of ``loc`` the log density is ``-inf``, the density and ``cdf`` 0, ``sf`` 1, with zero
(not NaN) derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import NEG_INF, guard, log, log1mexp, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _z(x, loc, scale):
    z = standardize(x, loc, scale)
    inside = z >= 0
    return guard(inside, z, 1.0), inside


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``-z - log(scale)``; ``-inf`` for ``x < loc``. As ``scipy.stats.expon.logpdf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, -z - log(scale), NEG_INF)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.expon.pdf``."""
    return tnp.exp(logpdf(x, loc, scale))


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``1 - exp(-z)``, computed as ``-expm1(-z)`` (accurate near ``loc``); 0 for ``x < loc``.
    As ``scipy.stats.expon.cdf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, -tnp.expm1(-z), 0.0)


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``log(cdf)``, computed as ``log(1 - exp(-z))`` without cancellation; ``-inf`` for ``x <= loc``.
    As ``scipy.stats.expon.logcdf``."""
    z, inside = _z(x, loc, scale)
    positive = inside & (z > 0)
    return tnp.where(positive, log1mexp(guard(positive, z, 1.0)), NEG_INF)


@promoted
def sf(x, loc=0.0, scale=1.0):
    """The survival function ``exp(-z)``; 1 for ``x < loc``. As ``scipy.stats.expon.sf``."""
    return tnp.exp(logsf(x, loc, scale))


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``log(sf) = -z``; 0 for ``x < loc``. As ``scipy.stats.expon.logsf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, -z, 0.0)


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc - scale * log1p(-q)`` (``inf`` at ``q = 1``). As ``scipy.stats.expon.ppf``."""
    return loc - scale * tnp.log1p(-q)


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * log(q)``. As ``scipy.stats.expon.isf``."""
    return loc - scale * tnp.log(q)
