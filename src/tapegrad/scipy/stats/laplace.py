"""``tapegrad.scipy.stats.laplace``: the Laplace (double exponential) distribution, density
``exp(-|z|) / (2 scale)`` with ``z = (x - loc) / scale``, as ``scipy.stats.laplace``.

Differentiable in ``x``, ``loc`` and ``scale`` to any order in both modes. At ``x = loc`` the density
has a kink; its derivative there is 0 (``abs'(0) = 0``, tapegrad's convention). ``ppf`` at ``q = 1/2``
has the derivative of its left branch, ``2 scale`` (both one-sided derivatives agree).
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import LOG_2, guard, log, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``-|z| - log(2 scale)``. As ``scipy.stats.laplace.logpdf``."""
    return -tnp.abs(standardize(x, loc, scale)) - LOG_2 - log(scale)


@promoted
def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.laplace.pdf``."""
    return tnp.exp(logpdf(x, loc, scale))


def _tail(z):
    """``exp(-|z|) / 2``: the probability beyond ``|z|`` on one side."""
    return 0.5 * tnp.exp(-tnp.abs(z))


@promoted
def cdf(x, loc=0.0, scale=1.0):
    """``exp(z) / 2`` left of ``loc``, ``1 - exp(-z) / 2`` right of it. As ``scipy.stats.laplace.cdf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z < 0, _tail(z), 1.0 - _tail(z))


@promoted
def sf(x, loc=0.0, scale=1.0):
    """``cdf(-z)``: ``1 - cdf`` without cancellation in the right tail. As ``scipy.stats.laplace.sf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z > 0, _tail(z), 1.0 - _tail(z))


@promoted
def logcdf(x, loc=0.0, scale=1.0):
    """``z - log 2`` left of ``loc``, ``log1p(-exp(-z) / 2)`` right of it (finite everywhere).
    As ``scipy.stats.laplace.logcdf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z < 0, -tnp.abs(z) - LOG_2, tnp.log1p(-_tail(z)))


@promoted
def logsf(x, loc=0.0, scale=1.0):
    """``logcdf(-z)``. As ``scipy.stats.laplace.logsf``."""
    z = standardize(x, loc, scale)
    return tnp.where(z > 0, -tnp.abs(z) - LOG_2, tnp.log1p(-_tail(z)))


def _standard_ppf(q):
    """``log(2q)`` for ``q <= 1/2``, ``-log(2 - 2q)`` above: each branch evaluated only on its side."""
    left = q <= 0.5
    return tnp.where(left, tnp.log(2.0 * guard(left, q, 0.25)), -tnp.log(2.0 - 2.0 * guard(left, 0.75, q)))


@promoted
def ppf(q, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * F^-1(q)`` (``-inf`` and ``inf`` at 0 and 1).
    As ``scipy.stats.laplace.ppf``."""
    return loc + scale * _standard_ppf(q)


@promoted
def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``loc - scale * F^-1(q)`` (the distribution is symmetric).
    As ``scipy.stats.laplace.isf``."""
    return loc - scale * _standard_ppf(q)
