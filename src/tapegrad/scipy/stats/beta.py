"""``tapegrad.scipy.stats.beta``: the beta distribution with shapes ``a`` and ``b``, density
``z**(a - 1) (1 - z)**(b - 1) / (B(a, b) scale)`` for ``z = (x - loc) / scale`` in ``[0, 1]``, as
``scipy.stats.beta``.

Every function is differentiable in every argument to any order in both modes. ``cdf``, ``sf`` and
their logs are ``tapegrad.scipy.special.betainc``; ``ppf`` and ``isf`` take their values from
``scipy.special.betaincinv``/``betainccinv``, with derivatives by implicit differentiation. Outside
``[loc, loc + scale]`` the log density is ``-inf``, the density 0, ``cdf`` 0 or 1, with zero
derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.scipy.special import betainc, betaln, xlog1py, xlogy
from tapegrad.scipy.stats._scipy_valued import betainccinv_p, betaincinv_p
from tapegrad.scipy.stats._support import NEG_INF, constant, guard, log, log_probability, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _z(x, loc, scale):
    z = standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    return guard(inside, z, 0.5), inside, z


@promoted
def logpdf(x, a, b, loc=0.0, scale=1.0):
    """The log density ``(a-1) log(z) + (b-1) log(1-z) - betaln(a, b) - log(scale)``. As ``scipy.stats.beta.logpdf``."""
    z, inside, _ = _z(x, loc, scale)
    return tnp.where(inside, xlogy(a - 1.0, z) + xlog1py(b - 1.0, -z) - betaln(a, b) - log(scale), NEG_INF)


@promoted
def pdf(x, a, b, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, a, b, loc, scale))``. As ``scipy.stats.beta.pdf``."""
    return tnp.exp(logpdf(x, a, b, loc, scale))


@promoted
def cdf(x, a, b, loc=0.0, scale=1.0):
    """``betainc(a, b, z)``; 0 left of the support, 1 right of it. As ``scipy.stats.beta.cdf``."""
    z, inside, raw = _z(x, loc, scale)
    return tnp.where(inside, betainc(a, b, z), constant(raw < 0, 0.0, 1.0, z))


@promoted
def logcdf(x, a, b, loc=0.0, scale=1.0):
    """``log(cdf(x, a, b, loc, scale))``. As ``scipy.stats.beta.logcdf``."""
    return log_probability(cdf(x, a, b, loc, scale))


@promoted
def sf(x, a, b, loc=0.0, scale=1.0):
    """``betainc(b, a, 1 - z)`` (no cancellation near the right end); 1 left of the support, 0 right.
    As ``scipy.stats.beta.sf``."""
    z, inside, raw = _z(x, loc, scale)
    return tnp.where(inside, betainc(b, a, 1.0 - z), constant(raw < 0, 1.0, 0.0, z))


@promoted
def logsf(x, a, b, loc=0.0, scale=1.0):
    """``log(sf(x, a, b, loc, scale))``. As ``scipy.stats.beta.logsf``."""
    return log_probability(sf(x, a, b, loc, scale))


@promoted
def ppf(q, a, b, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * betaincinv(a, b, q)``. As ``scipy.stats.beta.ppf``."""
    return loc + scale * bind(betaincinv_p, a, b, q)


@promoted
def isf(q, a, b, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * betainccinv(a, b, q)``. As ``scipy.stats.beta.isf``."""
    return loc + scale * bind(betainccinv_p, a, b, q)
