"""``tapegrad.scipy.stats.logistic``: the logistic distribution, ``cdf = expit(z)`` with
``z = (x - loc) / scale``, as ``scipy.stats.logistic``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes; every function goes
through ``expit``, ``log_expit`` and ``logit``, so the tails neither overflow nor cancel.
"""
from __future__ import annotations

from tapegrad.scipy.special import expit, log_expit, logit
from tapegrad.scipy.stats._support import log, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``log_expit(z) + log_expit(-z) - log(scale)``. As ``scipy.stats.logistic.logpdf``."""
    z = standardize(x, loc, scale)
    return log_expit(z) + log_expit(-z) - log(scale)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``expit(z) expit(-z) / scale``. As ``scipy.stats.logistic.pdf``."""
    z = standardize(x, loc, scale)
    return expit(z) * expit(-z) / scale


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``expit(z)``. As ``scipy.stats.logistic.cdf``."""
    return expit(standardize(x, loc, scale))


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``log_expit(z)``. As ``scipy.stats.logistic.logcdf``."""
    return log_expit(standardize(x, loc, scale))


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``expit(-z)``. As ``scipy.stats.logistic.sf``."""
    return expit(-standardize(x, loc, scale))


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``log_expit(-z)``. As ``scipy.stats.logistic.logsf``."""
    return log_expit(-standardize(x, loc, scale))


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * logit(q)``. As ``scipy.stats.logistic.ppf``."""
    return loc + scale * logit(q)


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * logit(q)``. As ``scipy.stats.logistic.isf``."""
    return loc - scale * logit(q)
