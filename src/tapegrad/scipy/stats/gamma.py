"""``tapegrad.scipy.stats.gamma``: the gamma distribution with shape ``a``, density
``z**(a - 1) exp(-z) / (Gamma(a) scale)`` for ``z = (x - loc) / scale >= 0``, as
``scipy.stats.gamma``.

Every function is differentiable in ``x`` (or ``q``), ``a``, ``loc`` and ``scale`` to any order in
both modes. ``cdf``, ``sf`` and their logs are ``tapegrad.scipy.special.gammainc``/``gammaincc``
(whose derivative in ``a`` runs the functions' own series); ``ppf``/``isf`` take their values from
``scipy.special.gammaincinv``/``gammainccinv``, with derivatives by implicit differentiation (one
over the density in ``q``, ``-(dP/da) / density`` in ``a``). Left of ``loc`` the log density is
``-inf``, the density and ``cdf`` 0, ``sf`` 1, with zero derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.scipy.special import gammainc, gammaincc, gammaln, xlogy
from tapegrad.scipy.stats._scipy_valued import gammainccinv_p, gammaincinv_p
from tapegrad.scipy.stats._support import NEG_INF, guard, log, log_probability, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _z(x, loc, scale):
    z = standardize(x, loc, scale)
    inside = z >= 0
    return guard(inside, z, 1.0), inside


@promoted
def logpdf(x, a, loc=0.0, scale=1.0):
    """The log density ``(a - 1) log(z) - z - gammaln(a) - log(scale)``; ``-inf`` for ``x < loc``.
    As ``scipy.stats.gamma.logpdf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, xlogy(a - 1.0, z) - z - gammaln(a) - log(scale), NEG_INF)


@promoted
def pdf(x, a, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, a, loc, scale))``. As ``scipy.stats.gamma.pdf``."""
    return tnp.exp(logpdf(x, a, loc, scale))


@promoted
def cdf(x, a, loc=0.0, scale=1.0):
    """``gammainc(a, z)``, 0 for ``x < loc``. As ``scipy.stats.gamma.cdf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, gammainc(a, z), 0.0)


@promoted
def logcdf(x, a, loc=0.0, scale=1.0):
    """``log(cdf(x, a, loc, scale))``. As ``scipy.stats.gamma.logcdf``."""
    return log_probability(cdf(x, a, loc, scale))


@promoted
def sf(x, a, loc=0.0, scale=1.0):
    """``gammaincc(a, z)`` (no cancellation in the right tail), 1 for ``x < loc``. As ``scipy.stats.gamma.sf``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, gammaincc(a, z), 1.0)


@promoted
def logsf(x, a, loc=0.0, scale=1.0):
    """``log(sf(x, a, loc, scale))``. As ``scipy.stats.gamma.logsf``."""
    return log_probability(sf(x, a, loc, scale))


@promoted
def ppf(q, a, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * gammaincinv(a, q)``. As ``scipy.stats.gamma.ppf``."""
    return loc + scale * bind(gammaincinv_p, a, q)


@promoted
def isf(q, a, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * gammainccinv(a, q)`` (keeps a small ``q``'s
    precision). As ``scipy.stats.gamma.isf``."""
    return loc + scale * bind(gammainccinv_p, a, q)
