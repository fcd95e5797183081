"""``tapegrad.scipy.stats.gumbel_r``: the right-skewed Gumbel (extreme value type I) distribution,
``cdf = exp(-exp(-z))`` with ``z = (x - loc) / scale``, as ``scipy.stats.gumbel_r``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes. ``sf`` and ``logsf`` go
through ``expm1``, so they keep their precision in the right tail.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import log, promoted, standardize

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``-z - exp(-z) - log(scale)``. As ``scipy.stats.gumbel_r.logpdf``."""
    z = standardize(x, loc, scale)
    return -z - tnp.exp(-z) - log(scale)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.gumbel_r.pdf``."""
    return tnp.exp(logpdf(x, loc, scale))


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``-exp(-z)``. As ``scipy.stats.gumbel_r.logcdf``."""
    return -tnp.exp(-standardize(x, loc, scale))


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``exp(-exp(-z))``. As ``scipy.stats.gumbel_r.cdf``."""
    return tnp.exp(logcdf(x, loc, scale))


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``1 - cdf``, computed as ``-expm1(-exp(-z))``. As ``scipy.stats.gumbel_r.sf``."""
    return -tnp.expm1(logcdf(x, loc, scale))


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``log(sf(x, loc, scale))``. As ``scipy.stats.gumbel_r.logsf``."""
    return tnp.log(sf(x, loc, scale))


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc - scale * log(-log(q))``. As ``scipy.stats.gumbel_r.ppf``."""
    return loc - scale * tnp.log(-tnp.log(q))


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * log(-log1p(-q))``. As ``scipy.stats.gumbel_r.isf``."""
    return loc - scale * tnp.log(-tnp.log1p(-q))
