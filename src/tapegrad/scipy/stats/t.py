"""``tapegrad.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom, as
``scipy.stats.t``.

Every function is differentiable in every argument to any order in both modes. ``cdf``, ``sf`` and
their logs take their values from ``scipy.special.stdtr``, ``ppf`` and ``isf`` from ``stdtrit``, in
primitives whose derivative in ``x`` is the density (in ``q`` its inverse at the quantile) and in
``df`` comes from ``stdtr(df, t) = betainc(df/2, 1/2, df/(df + t**2)) / 2`` (left of 0), through
``tapegrad.scipy.special``'s derivatives of ``betainc`` in its shapes.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.scipy.special import gammaln
from tapegrad.scipy.stats._scipy_valued import stdtr_p, stdtrit_p
from tapegrad.scipy.stats._support import LOG_PI, log, log_probability, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, df, loc=0.0, scale=1.0):
    """The log density ``gammaln((df+1)/2) - gammaln(df/2) - log(df pi)/2 - (df+1)/2 log1p(z**2/df)
    - log(scale)``. As ``scipy.stats.t.logpdf``."""
    z = standardize(x, loc, scale)
    half = 0.5 * (df + 1.0)
    return (gammaln(half) - gammaln(0.5 * df) - 0.5 * (log(df) + LOG_PI)
            - half * tnp.log1p(z * z / df) - log(scale))


@promoted
def pdf(x, df, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, df, loc, scale))``. As ``scipy.stats.t.pdf``."""
    return tnp.exp(logpdf(x, df, loc, scale))


@promoted
def cdf(x, df, loc=0.0, scale=1.0):
    """``stdtr(df, z)``. As ``scipy.stats.t.cdf``."""
    return bind(stdtr_p, df, standardize(x, loc, scale))


@promoted
def logcdf(x, df, loc=0.0, scale=1.0):
    """``log(cdf(x, df, loc, scale))``. As ``scipy.stats.t.logcdf``."""
    return log_probability(cdf(x, df, loc, scale))


@promoted
def sf(x, df, loc=0.0, scale=1.0):
    """``stdtr(df, -z)`` (the distribution is symmetric; no cancellation in the right tail). As ``scipy.stats.t.sf``."""
    return bind(stdtr_p, df, -standardize(x, loc, scale))


@promoted
def logsf(x, df, loc=0.0, scale=1.0):
    """``log(sf(x, df, loc, scale))``. As ``scipy.stats.t.logsf``."""
    return log_probability(sf(x, df, loc, scale))


@promoted
def ppf(q, df, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * stdtrit(df, q)``. As ``scipy.stats.t.ppf``."""
    return loc + scale * bind(stdtrit_p, df, q)


@promoted
def isf(q, df, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * stdtrit(df, q)`` (the distribution is symmetric).
    As ``scipy.stats.t.isf``."""
    return loc - scale * bind(stdtrit_p, df, q)
