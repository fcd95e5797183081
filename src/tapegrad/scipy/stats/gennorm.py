"""``tapegrad.scipy.stats.gennorm``: the generalized normal distribution with shape ``beta``, density
``beta exp(-|z|**beta) / (2 Gamma(1/beta) scale)`` with ``z = (x - loc) / scale``, as
``scipy.stats.gennorm`` (``beta = 2`` is a normal with variance ``scale**2 / 2``, ``beta = 1`` the
Laplace distribution).

Every function is differentiable in every argument to any order in both modes; at ``x = loc`` the
log density's derivative in ``beta`` is 0 (not ``0 * log 0 = nan``). ``cdf`` and ``sf`` go through
``tapegrad.scipy.special.gammaincc``, ``ppf`` and ``isf`` through SciPy's ``gammainccinv`` (see
:mod:`tapegrad.scipy.stats.gamma`).
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.scipy.special import gammaincc, gammaln
from tapegrad.scipy.stats._scipy_valued import gammainccinv_p
from tapegrad.scipy.stats._support import LOG_2, guard, log, log_probability, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf", "ppf", "isf"]


def _abs_power(z, beta):
    """``|z|**beta``, 0 at ``z = 0`` with finite derivatives in ``beta`` there."""
    nonzero = z != 0
    return tnp.where(nonzero, tnp.exp(beta * tnp.log(tnp.abs(guard(nonzero, z, 1.0)))), 0.0)


@promoted
def logpdf(x, beta, loc=0.0, scale=1.0):
    """The log density ``log(beta) - log 2 - gammaln(1/beta) - |z|**beta - log(scale)``.
    As ``scipy.stats.gennorm.logpdf``."""
    z = standardize(x, loc, scale)
    return log(beta) - LOG_2 - gammaln(1.0 / beta) - _abs_power(z, beta) - log(scale)


@promoted
def pdf(x, beta, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, beta, loc, scale))``. As ``scipy.stats.gennorm.pdf``."""
    return tnp.exp(logpdf(x, beta, loc, scale))


def _tail(z, beta):
    """``P(Z > |z|) = gammaincc(1/beta, |z|**beta) / 2``."""
    return 0.5 * gammaincc(1.0 / beta, _abs_power(z, beta))


@promoted
def cdf(x, beta, loc=0.0, scale=1.0):
    """The tail ``gammaincc(1/beta, |z|**beta) / 2`` left of ``loc``, one minus it right of it.
    As ``scipy.stats.gennorm.cdf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z < 0, _tail(z, beta), 1.0 - _tail(z, beta))


@promoted
def sf(x, beta, loc=0.0, scale=1.0):
    """``cdf`` mirrored: ``1 - cdf`` without cancellation in the right tail. As ``scipy.stats.gennorm.sf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z > 0, _tail(z, beta), 1.0 - _tail(z, beta))


@promoted
def logcdf(x, beta, loc=0.0, scale=1.0):
    """``log(cdf(x, beta, loc, scale))``. As ``scipy.stats.gennorm.logcdf``."""
    return log_probability(cdf(x, beta, loc, scale))


@promoted
def logsf(x, beta, loc=0.0, scale=1.0):
    """``log(sf(x, beta, loc, scale))``. As ``scipy.stats.gennorm.logsf``."""
    return log_probability(sf(x, beta, loc, scale))


def _standard_ppf(q, beta):
    """``sign(q - 1/2) gammainccinv(1/beta, 2 min(q, 1 - q))**(1/beta)``, from the nearer tail. At
    ``q = 1/2`` exactly (where the power's derivative is ``inf * 0``) it is the tangent line
    ``(q - 1/2) / pdf(0)``: the right value, first and second derivatives (``pdf'(0) = 0``)."""
    median = q == 0.5
    p = guard(median, 0.25, q)
    tail = tnp.where(p < 0.5, p, 1.0 - p)
    size = tnp.exp(tnp.log(bind(gammainccinv_p, 1.0 / beta, 2.0 * tail)) / beta)
    general = tnp.where(p < 0.5, -size, size)
    inverse_density = 2.0 * tnp.exp(gammaln(1.0 / beta)) / beta
    return tnp.where(median, (q - 0.5) * inverse_density, general)


@promoted
def ppf(q, beta, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * F^-1(q)``. As ``scipy.stats.gennorm.ppf``."""
    return loc + scale * _standard_ppf(q, beta)


@promoted
def isf(q, beta, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * F^-1(q)`` (the distribution is symmetric).
    As ``scipy.stats.gennorm.isf``."""
    return loc - scale * _standard_ppf(q, beta)
