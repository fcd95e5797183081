"""``tapegrad.scipy.stats.wrapcauchy``: the wrapped Cauchy distribution with shape ``c`` in
``(0, 1)``, density ``(1 - c**2) / (2 pi (1 + c**2 - 2 c cos z) scale)`` for ``z = (x - loc) / scale``
in ``[0, 2 pi]``, as ``scipy.stats.wrapcauchy``.

Every function (``logpdf pdf cdf logcdf sf logsf ppf isf``) is differentiable in all its arguments
to any order in both modes. Outside ``[0, 2 pi]`` the log density is ``-inf``, the density 0 and
``cdf`` 0 or 1, with zero derivatives.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import (
    LOG_2PI,
    NEG_INF,
    constant,
    guard,
    log,
    log_probability,
    promoted,
    standardize,
)

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf", "ppf", "isf"]


@promoted
def logpdf(x, c, loc=0.0, scale=1.0):
    """The log density ``log1p(-c**2) - log(2 pi) - log(1 + c**2 - 2 c cos z) - log(scale)``.
    As ``scipy.stats.wrapcauchy.logpdf``."""
    z = standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 2.0 * math.pi)
    z = guard(inside, z, 1.0)
    density = tnp.log1p(-c * c) - LOG_2PI - tnp.log1p(c * (c - 2.0 * tnp.cos(z))) - log(scale)
    return tnp.where(inside, density, NEG_INF)


@promoted
def pdf(x, c, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, c, loc, scale))``. As ``scipy.stats.wrapcauchy.pdf``."""
    return tnp.exp(logpdf(x, c, loc, scale))


def _standard_cdf(z, c):
    """``arctan(r tan(z/2)) / pi`` left of ``pi``, ``1 - arctan(r tan(pi - z/2)) / pi`` right of it,
    with ``r = (1 + c) / (1 - c)`` (SciPy's two branches, each evaluated on its own side only)."""
    r = (1.0 + c) / (1.0 - c)
    left = z < math.pi
    low = tnp.arctan(r * tnp.tan(0.5 * guard(left, z, 0.5 * math.pi))) / math.pi
    high = 1.0 - tnp.arctan(r * tnp.tan(math.pi - 0.5 * guard(left, 1.5 * math.pi, z))) / math.pi
    return tnp.where(left, low, high)


def _clipped(z):
    """``z`` (1 outside ``[0, 2 pi]``), whether it is inside, and ``z`` itself."""
    inside = (z >= 0) & (z <= 2.0 * math.pi)
    return guard(inside, z, 1.0), inside, z


@promoted
def cdf(x, c, loc=0.0, scale=1.0):
    """``P(X <= x)``; 0 left of ``[0, 2 pi]`` and 1 right of it. As ``scipy.stats.wrapcauchy.cdf``."""
    z, inside, raw = _clipped(standardize(x, loc, scale))
    return tnp.where(inside, _standard_cdf(z, c), constant(raw < 0, 0.0, 1.0, z))


@promoted
def sf(x, c, loc=0.0, scale=1.0):
    """``1 - cdf``, computed as ``cdf`` at ``2 pi - z`` (the density is symmetric about ``pi``).
    As ``scipy.stats.wrapcauchy.sf``."""
    z, inside, raw = _clipped(standardize(x, loc, scale))
    return tnp.where(inside, _standard_cdf(2.0 * math.pi - z, c), constant(raw < 0, 1.0, 0.0, z))


@promoted
def logcdf(x, c, loc=0.0, scale=1.0):
    """``log(cdf(x, c, loc, scale))``. As ``scipy.stats.wrapcauchy.logcdf``."""
    return log_probability(cdf(x, c, loc, scale))


@promoted
def logsf(x, c, loc=0.0, scale=1.0):
    """``log(sf(x, c, loc, scale))``. As ``scipy.stats.wrapcauchy.logsf``."""
    return log_probability(sf(x, c, loc, scale))


def _standard_ppf(q, c):
    """SciPy's inverse: ``2 arctan(s tan(pi q))`` below one half, ``2 pi - 2 arctan(s tan(pi (1 - q)))``
    above, with ``s = (1 - c) / (1 + c)``."""
    s = (1.0 - c) / (1.0 + c)
    low_half = q < 0.5
    low = 2.0 * tnp.arctan(s * tnp.tan(math.pi * guard(low_half, q, 0.25)))
    high = 2.0 * math.pi - 2.0 * tnp.arctan(s * tnp.tan(math.pi * (1.0 - guard(low_half, 0.75, q))))
    return tnp.where(low_half, low, high)


@promoted
def ppf(q, c, loc=0.0, scale=1.0):
    """The quantile function, ``loc + scale * F^-1(q)``. As ``scipy.stats.wrapcauchy.ppf``."""
    return loc + scale * _standard_ppf(q, c)


@promoted
def isf(q, c, loc=0.0, scale=1.0):
    """The inverse survival function, ``loc + scale * (2 pi - F^-1(q))`` (by the symmetry about ``pi``).
    As ``scipy.stats.wrapcauchy.isf``."""
    return loc + scale * (2.0 * math.pi - _standard_ppf(q, c))
