"""``tapegrad.scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom, as
``scipy.stats.chi2``: the gamma distribution with shape ``df / 2`` and scale ``2 scale``.

Every function is differentiable in every argument to any order in both modes (see
:mod:`tapegrad.scipy.stats.gamma`).
"""
from __future__ import annotations

from tapegrad.scipy.stats import gamma
from tapegrad.scipy.stats._support import promoted

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, df, loc=0.0, scale=1.0):
    """The log density ``(df/2 - 1) log(z) - z/2 - gammaln(df/2) - (df/2) log 2 - log(scale)``.
    As ``scipy.stats.chi2.logpdf``."""
    return gamma.logpdf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def pdf(x, df, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, df, loc, scale))``. As ``scipy.stats.chi2.pdf``."""
    return gamma.pdf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def cdf(x, df, loc=0.0, scale=1.0):
    """``gammainc(df / 2, z / 2)``, 0 for ``x < loc``. As ``scipy.stats.chi2.cdf``."""
    return gamma.cdf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def logcdf(x, df, loc=0.0, scale=1.0):
    """``log(cdf(x, df, loc, scale))``. As ``scipy.stats.chi2.logcdf``."""
    return gamma.logcdf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def sf(x, df, loc=0.0, scale=1.0):
    """``gammaincc(df / 2, z / 2)``, 1 for ``x < loc``. As ``scipy.stats.chi2.sf``."""
    return gamma.sf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def logsf(x, df, loc=0.0, scale=1.0):
    """``log(sf(x, df, loc, scale))``. As ``scipy.stats.chi2.logsf``."""
    return gamma.logsf(x, 0.5 * df, loc, 2.0 * scale)


@promoted
def ppf(q, df, loc=0.0, scale=1.0):
    """The quantile function ``loc + 2 scale gammaincinv(df / 2, q)``. As ``scipy.stats.chi2.ppf``."""
    return gamma.ppf(q, 0.5 * df, loc, 2.0 * scale)


@promoted
def isf(q, df, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + 2 scale gammainccinv(df / 2, q)``. As ``scipy.stats.chi2.isf``."""
    return gamma.isf(q, 0.5 * df, loc, 2.0 * scale)
