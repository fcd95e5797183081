"""``tapegrad.scipy.stats.norm``: the normal distribution with location ``loc`` and scale ``scale``.

Every function broadcasts ``x`` (or ``q``), ``loc`` and ``scale`` together, as ``scipy.stats.norm``
does, and is differentiable in all three (to any order, in both modes): each is a short composition
of tapegrad operations and the special functions ``ndtr``, ``log_ndtr`` and ``ndtri``. The tails
are accurate: ``logcdf`` and ``logsf`` go through ``log_ndtr``, ``sf`` through ``ndtr(-z)`` and
``isf`` through ``-ndtri(q)``, never through ``1 - cdf``.
"""
from __future__ import annotations

import math

from tapegrad.numpy import _elementwise as ew
from tapegrad.scipy.special import log_ndtr, ndtr, ndtri

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _log(scale):
    # a Python scalar stays a Python scalar, which NumPy 2 treats as weak: float32 stays float32
    return math.log(scale) if isinstance(scale, (int, float)) else ew.log(scale)


def _standardize(x, loc, scale):
    return (x - loc) / scale


def logpdf(x, loc=0.0, scale=1.0):
    """The log density ``-z**2/2 - log(scale) - log(2 pi)/2`` with ``z = (x - loc) / scale``.
    As ``scipy.stats.norm.logpdf``."""
    z = _standardize(x, loc, scale)
    return -0.5 * (z * z) - _log(scale) - _HALF_LOG_2PI


def pdf(x, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, loc, scale))``. As ``scipy.stats.norm.pdf``."""
    return ew.exp(logpdf(x, loc, scale))


def cdf(x, loc=0.0, scale=1.0):
    """The distribution function ``ndtr((x - loc) / scale)``. As ``scipy.stats.norm.cdf``."""
    return ndtr(_standardize(x, loc, scale))


def logcdf(x, loc=0.0, scale=1.0):
    """``log(cdf(x, loc, scale))`` as ``log_ndtr(z)``: accurate far into the left tail, and so is its
    gradient (see ``tapegrad.scipy.special.log_ndtr``). As ``scipy.stats.norm.logcdf``."""
    return log_ndtr(_standardize(x, loc, scale))


def sf(x, loc=0.0, scale=1.0):
    """The survival function ``1 - cdf``, computed as ``ndtr(-z)`` (accurate in the right tail).
    As ``scipy.stats.norm.sf``."""
    return ndtr(-_standardize(x, loc, scale))


def logsf(x, loc=0.0, scale=1.0):
    """``log(sf(x, loc, scale))`` as ``log_ndtr(-z)``: accurate far into the right tail.
    As ``scipy.stats.norm.logsf``."""
    return log_ndtr(-_standardize(x, loc, scale))


def ppf(q, loc=0.0, scale=1.0):
    """The quantile function (inverse of :func:`cdf`): ``loc + scale * ndtri(q)`` for ``q`` in
    ``(0, 1)``; ``-inf`` and ``inf`` at 0 and 1. As ``scipy.stats.norm.ppf``."""
    return loc + scale * ndtri(q)


def isf(q, loc=0.0, scale=1.0):
    """The inverse survival function ``ppf(1 - q)``, computed as ``loc - scale * ndtri(q)`` so that a
    small ``q`` keeps its precision. As ``scipy.stats.norm.isf``."""
    return loc - scale * ndtri(q)
