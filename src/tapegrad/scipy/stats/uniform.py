"""``tapegrad.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``, as
``scipy.stats.uniform``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes. Outside the interval the
log density is ``-inf`` and the density 0, with zero derivatives; ``cdf`` is 0 left of it and 1
right of it. The density is discontinuous at both ends: there it takes the inside value (SciPy's
closed interval) and the one-sided derivatives from inside.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import NEG_INF, constant, log, log_probability, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _inside(x, loc, scale):
    z = standardize(x, loc, scale)
    return z, (z >= 0) & (z <= 1)


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """``-log(scale)`` on ``[loc, loc + scale]``, ``-inf`` elsewhere. As ``scipy.stats.uniform.logpdf``."""
    z, inside = _inside(x, loc, scale)
    return tnp.where(inside, tnp.zeros_like(z) - log(scale), NEG_INF)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """``1 / scale`` on ``[loc, loc + scale]``, 0 elsewhere. As ``scipy.stats.uniform.pdf``."""
    return tnp.exp(logpdf(x, loc, scale))


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``(x - loc) / scale`` on the interval, 0 left of it and 1 right of it. As ``scipy.stats.uniform.cdf``."""
    z, inside = _inside(x, loc, scale)
    return tnp.where(inside, z, constant(z < 0, 0.0, 1.0, z))


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``log(cdf(x, loc, scale))``. As ``scipy.stats.uniform.logcdf``."""
    return log_probability(cdf(x, loc, scale))


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``1 - cdf(x, loc, scale)``. As ``scipy.stats.uniform.sf``."""
    z, inside = _inside(x, loc, scale)
    return tnp.where(inside, 1.0 - z, constant(z < 0, 1.0, 0.0, z))


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``log(sf(x, loc, scale))``. As ``scipy.stats.uniform.logsf``."""
    return log_probability(sf(x, loc, scale))


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * q``. As ``scipy.stats.uniform.ppf``."""
    return loc + scale * q


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * (1 - q)``. As ``scipy.stats.uniform.isf``."""
    return loc + scale * (1.0 - q)
