"""``tapegrad.scipy.stats.cauchy``: the Cauchy distribution, density ``1 / (pi scale (1 + z**2))``
with ``z = (x - loc) / scale``, as ``scipy.stats.cauchy``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes. The distribution function
is ``arctan2(1, -z) / pi`` rather than SciPy's ``0.5 + arctan(z) / pi``: the same function, without
the cancellation in the left tail (and ``sf`` is ``arctan2(1, z) / pi``, accurate in the right one).
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import LOG_PI, log, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``-log(pi) - log(scale) - log1p(z**2)``. As ``scipy.stats.cauchy.logpdf``."""
    z = standardize(x, loc, scale)
    return -LOG_PI - log(scale) - tnp.log1p(z * z)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.cauchy.pdf``."""
    return tnp.exp(logpdf(x, loc, scale))


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``P(X <= x) = 1/2 + arctan(z) / pi``, computed as ``arctan2(1, -z) / pi``. As ``scipy.stats.cauchy.cdf``."""
    return tnp.arctan2(1.0, -standardize(x, loc, scale)) / math.pi


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``log(cdf(x, loc, scale))``. As ``scipy.stats.cauchy.logcdf``."""
    return tnp.log(cdf(x, loc, scale))


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``1 - cdf``, computed as ``arctan2(1, z) / pi``. As ``scipy.stats.cauchy.sf``."""
    return tnp.arctan2(1.0, standardize(x, loc, scale)) / math.pi


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``log(sf(x, loc, scale))``. As ``scipy.stats.cauchy.logsf``."""
    return tnp.log(sf(x, loc, scale))


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * tan(pi (q - 1/2))``. As ``scipy.stats.cauchy.ppf``."""
    return loc + scale * tnp.tan(math.pi * (q - 0.5))


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * tan(pi (q - 1/2))``. As ``scipy.stats.cauchy.isf``."""
    return loc - scale * tnp.tan(math.pi * (q - 0.5))
