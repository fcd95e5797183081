"""``tapegrad.scipy.stats.pareto``: the Pareto distribution with shape ``b``, density
``b / z**(b + 1) / scale`` for ``z = (x - loc) / scale >= 1``, as ``scipy.stats.pareto``.

Differentiable in ``x``, ``b``, ``loc`` and ``scale`` to any order in both modes. Below the support
the log density is ``-inf``, the density and ``cdf`` 0, ``sf`` 1, with zero derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import NEG_INF, guard, log, log1mexp, promoted, standardize

__all__ = ["logpdf", "pdf", "logsf", "sf", "cdf", "logcdf", "ppf", "isf"]


def _log_z(x, loc, scale):
    z = standardize(x, loc, scale)
    inside = z >= 1
    return tnp.log(guard(inside, z, 2.0)), inside


@promoted
def logpdf(x, b, loc=0.0, scale=1.0):
    """The log density ``log(b) - (b + 1) log(z) - log(scale)``; ``-inf`` below ``loc + scale``.
    As ``scipy.stats.pareto.logpdf``."""
    log_z, inside = _log_z(x, loc, scale)
    return tnp.where(inside, log(b) - (b + 1.0) * log_z - log(scale), NEG_INF)


@promoted
def pdf(x, b, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, b, loc, scale))``. As ``scipy.stats.pareto.pdf``."""
    return tnp.exp(logpdf(x, b, loc, scale))


@promoted
def logsf(x, b, loc=0.0, scale=1.0):
    """``log(sf) = -b log(z)``; 0 below the support. As ``scipy.stats.pareto.logsf``."""
    log_z, inside = _log_z(x, loc, scale)
    return tnp.where(inside, -b * log_z, 0.0)


@promoted
def sf(x, b, loc=0.0, scale=1.0):
    """``z**-b``; 1 below the support. As ``scipy.stats.pareto.sf``."""
    return tnp.exp(logsf(x, b, loc, scale))


@promoted
def cdf(x, b, loc=0.0, scale=1.0):
    """``1 - z**-b``, computed as ``-expm1(-b log z)``; 0 below the support. As ``scipy.stats.pareto.cdf``."""
    return -tnp.expm1(logsf(x, b, loc, scale))


@promoted
def logcdf(x, b, loc=0.0, scale=1.0):
    """``log(1 - z**-b)`` without cancellation; ``-inf`` at and below ``loc + scale``.
    As ``scipy.stats.pareto.logcdf``."""
    log_z, inside = _log_z(x, loc, scale)
    positive = inside & (log_z > 0)
    return tnp.where(positive, log1mexp(guard(positive, b * log_z, 1.0)), NEG_INF)


@promoted
def ppf(q, b, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * (1 - q)**(-1/b)``. As ``scipy.stats.pareto.ppf``."""
    return loc + scale * tnp.exp(-tnp.log1p(-q) / b)


@promoted
def isf(q, b, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * q**(-1/b)``. As ``scipy.stats.pareto.isf``."""
    return loc + scale * tnp.exp(-tnp.log(q) / b)
