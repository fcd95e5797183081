"""``tapegrad.scipy.stats.wrapcauchy``: the wrapped Cauchy distribution with shape ``c`` in
``(0, 1)``, density ``(1 - c**2) / (2 pi (1 + c**2 - 2 c cos z) scale)`` for ``z = (x - loc) / scale``
in ``[0, 2 pi]``, as ``scipy.stats.wrapcauchy``.

Differentiable in ``x``, ``c``, ``loc`` and ``scale`` to any order in both modes. Outside
``[0, 2 pi]`` the log density is ``-inf`` and the density 0, with zero derivatives.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.scipy.stats._support import LOG_2PI, NEG_INF, guard, log, promoted, standardize


@promoted
def logpdf(x, c, loc=0.0, scale=1.0):
    """The log density ``log1p(-c**2) - log(2 pi) - log(1 + c**2 - 2 c cos z) - log(scale)``."""
    z = standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 2.0 * math.pi)
    z = guard(inside, z, 1.0)
    density = tnp.log1p(-c * c) - LOG_2PI - tnp.log1p(c * (c - 2.0 * tnp.cos(z))) - log(scale)
    return tnp.where(inside, density, NEG_INF)


@promoted
def pdf(x, c, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, c, loc, scale))``."""
    return tnp.exp(logpdf(x, c, loc, scale))
