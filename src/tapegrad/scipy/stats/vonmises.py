"""``tapegrad.scipy.stats.vonmises``: the von Mises (circular normal) distribution with concentration
``kappa``, density ``exp(kappa cos(z)) / (2 pi I0(kappa) scale)`` for ``z = (x - loc) / scale`` in
``[-pi, pi]``, as ``scipy.stats.vonmises``.

Differentiable in ``x``, ``kappa``, ``loc`` and ``scale`` to any order in both modes. The
normalization goes through the scaled Bessel function ``i0e(kappa) = exp(-kappa) I0(kappa)``, so a
large ``kappa`` does not overflow. Outside ``[-pi, pi]`` the density continues periodically, as
SciPy's does (JAX's is 0 there).
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.special import i0e
from tapegrad.scipy.stats._support import LOG_2PI, log, promoted, standardize


@promoted
def logpdf(x, kappa, loc=0.0, scale=1.0):
    """The log density ``kappa (cos(z) - 1) - log(2 pi i0e(kappa)) - log(scale)``."""
    z = standardize(x, loc, scale)
    return kappa * (tnp.cos(z) - 1.0) - LOG_2PI - tnp.log(i0e(kappa)) - log(scale)


@promoted
def pdf(x, kappa, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, kappa, loc, scale))``."""
    return tnp.exp(logpdf(x, kappa, loc, scale))
