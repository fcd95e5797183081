"""``tapegrad.scipy.stats.gamma``: the gamma distribution with shape ``a``, density
``z**(a - 1) exp(-z) / (Gamma(a) scale)`` for ``z = (x - loc) / scale >= 0``, as
``scipy.stats.gamma``.

``logpdf`` and ``pdf`` are differentiable in ``x``, ``a``, ``loc`` and ``scale`` to any order in both
modes. ``cdf``, ``sf`` and their logs take their values from ``scipy.special.gammainc`` and
``gammaincc``, and ``ppf``/``isf`` from their inverses: differentiable in ``x`` (``q``), ``loc`` and
``scale`` (the derivative in ``x`` is the density, in ``q`` its inverse at the quantile), while
differentiating them in ``a`` raises ``NotImplementedError``. Left of ``loc`` the log
density is ``-inf``, the density and ``cdf`` 0, ``sf`` 1, with zero derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.extend import bind
from tapegrad.scipy.special import gammaln, xlogy
from tapegrad.scipy.stats._scipy_valued import gammainc_p, gammaincc_p, gammainccinv_p, gammaincinv_p
from tapegrad.scipy.stats._support import NEG_INF, guard, log, log_probability, promoted, standardize


def _z(x, loc, scale):
    z = standardize(x, loc, scale)
    inside = z >= 0
    return guard(inside, z, 1.0), inside


@promoted
def logpdf(x, a, loc=0.0, scale=1.0):
    """The log density ``(a - 1) log(z) - z - gammaln(a) - log(scale)``; ``-inf`` for ``x < loc``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, xlogy(a - 1.0, z) - z - gammaln(a) - log(scale), NEG_INF)


@promoted
def pdf(x, a, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, a, loc, scale))``."""
    return tnp.exp(logpdf(x, a, loc, scale))


@promoted
def cdf(x, a, loc=0.0, scale=1.0):
    """``gammainc(a, z)``, 0 for ``x < loc``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, bind(gammainc_p, a, z), 0.0)


@promoted
def logcdf(x, a, loc=0.0, scale=1.0):
    """``log(cdf(x, a, loc, scale))``."""
    return log_probability(cdf(x, a, loc, scale))


@promoted
def sf(x, a, loc=0.0, scale=1.0):
    """``gammaincc(a, z)`` (no cancellation in the right tail), 1 for ``x < loc``."""
    z, inside = _z(x, loc, scale)
    return tnp.where(inside, bind(gammaincc_p, a, z), 1.0)


@promoted
def logsf(x, a, loc=0.0, scale=1.0):
    """``log(sf(x, a, loc, scale))``."""
    return log_probability(sf(x, a, loc, scale))


@promoted
def ppf(q, a, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * gammaincinv(a, q)``."""
    return loc + scale * bind(gammaincinv_p, a, q)


@promoted
def isf(q, a, loc=0.0, scale=1.0):
    """The inverse survival function ``loc + scale * gammainccinv(a, q)`` (keeps a small ``q``'s
    precision)."""
    return loc + scale * bind(gammainccinv_p, a, q)
