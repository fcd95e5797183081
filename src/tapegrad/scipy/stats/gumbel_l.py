"""``tapegrad.scipy.stats.gumbel_l``: the left-skewed Gumbel distribution, the mirror image of
:mod:`gumbel_r` (``X ~ gumbel_l(loc, scale)`` when ``-X ~ gumbel_r(-loc, scale)``), as
``scipy.stats.gumbel_l``: ``sf = exp(-exp(z))`` with ``z = (x - loc) / scale``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes.
"""
from __future__ import annotations

from tapegrad.scipy.stats import gumbel_r
from tapegrad.scipy.stats._support import promoted

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``z - exp(z) - log(scale)``. As ``scipy.stats.gumbel_l.logpdf``."""
    return gumbel_r.logpdf(-x, -loc, scale)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.gumbel_l.pdf``."""
    return gumbel_r.pdf(-x, -loc, scale)


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``1 - exp(-exp(z))``: ``gumbel_r``'s survival function at ``-x``. As ``scipy.stats.gumbel_l.cdf``."""
    return gumbel_r.sf(-x, -loc, scale)


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``log(cdf(x, loc, scale))``. As ``scipy.stats.gumbel_l.logcdf``."""
    return gumbel_r.logsf(-x, -loc, scale)


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``exp(-exp(z))``. As ``scipy.stats.gumbel_l.sf``."""
    return gumbel_r.cdf(-x, -loc, scale)


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``-exp(z)``. As ``scipy.stats.gumbel_l.logsf``."""
    return gumbel_r.logcdf(-x, -loc, scale)


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * log(-log1p(-q))``. As ``scipy.stats.gumbel_l.ppf``."""
    return -gumbel_r.isf(q, -loc, scale)


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * log(-log(q))``. As ``scipy.stats.gumbel_l.isf``."""
    return -gumbel_r.ppf(q, -loc, scale)
