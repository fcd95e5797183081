"""``tapegrad.scipy.stats.vonmises``: the von Mises (circular normal) distribution with concentration
``kappa``, density ``exp(kappa cos(z)) / (2 pi I0(kappa) scale)`` for ``z = (x - loc) / scale`` in
``[-pi, pi]``, as ``scipy.stats.vonmises``.

Differentiable in ``x``, ``kappa``, ``loc`` and ``scale`` to any order in both modes. The
normalization goes through the scaled Bessel function ``i0e(kappa) = exp(-kappa) I0(kappa)``, so a
large ``kappa`` does not overflow. Outside ``[-pi, pi]`` the density continues periodically, as
SciPy's does (JAX's is 0 there).

``cdf`` and ``sf`` take their values from ``scipy.stats.vonmises`` (Hill's series, a normal
approximation for large ``kappa``; like SciPy's they keep counting past ``pi``: ``cdf(pi + t) =
1 + cdf(t - pi)``), in a primitive whose derivative in ``x`` is the density; differentiable in
``x``, ``loc`` and ``scale``, while differentiating them in ``kappa`` raises ``NotImplementedError``.
NumPy arrays only.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import scipy_module
from tapegrad.extend import bind, defbatch_elementwise, defjvp, defvjp, primitive, unbroadcast
from tapegrad.scipy.special import i0e
from tapegrad.scipy.special._impl import float_dtype
from tapegrad.scipy.stats._support import LOG_2PI, host_only, log, promoted, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf"]


@promoted
def logpdf(x, kappa, loc=0.0, scale=1.0):
    """The log density ``kappa (cos(z) - 1) - log(2 pi i0e(kappa)) - log(scale)``.
    As ``scipy.stats.vonmises.logpdf``."""
    z = standardize(x, loc, scale)
    return kappa * (tnp.cos(z) - 1.0) - LOG_2PI - tnp.log(i0e(kappa)) - log(scale)


@promoted
def pdf(x, kappa, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, kappa, loc, scale))``. As ``scipy.stats.vonmises.pdf``."""
    return tnp.exp(logpdf(x, kappa, loc, scale))


def _standard_cdf_impl(z, kappa):
    host_only("vonmises.cdf", z, kappa)
    return np.asarray(scipy_module(np, "stats").vonmises.cdf(z, kappa), dtype=float_dtype(np, z, kappa))


def _no_kappa_derivative(*_args, **_params):
    raise NotImplementedError("the derivative of vonmises.cdf in operand 1 (kappa) is not implemented: SciPy's "
                              "series has no closed-form derivative here. Keep kappa out of grad_position or "
                              "wrap it in tg.stop_gradient")


_cdf_p = primitive("scipy.stats.vonmises.cdf", _standard_cdf_impl)
defvjp(_cdf_p, lambda ct, ans, z, kappa: unbroadcast(ct * pdf(z, kappa), z), _no_kappa_derivative)
defjvp(_cdf_p, lambda t, ans, z, kappa: t * pdf(z, kappa), _no_kappa_derivative)
defbatch_elementwise(_cdf_p)


@promoted
def cdf(x, kappa, loc=0.0, scale=1.0):
    """``P(X <= x)`` from ``-pi`` on (SciPy's values; past ``pi`` it keeps counting periods).
    As ``scipy.stats.vonmises.cdf``."""
    return bind(_cdf_p, standardize(x, loc, scale), kappa)


@promoted
def sf(x, kappa, loc=0.0, scale=1.0):
    """``1 - cdf(x, kappa, loc, scale)``, as SciPy's. As ``scipy.stats.vonmises.sf``."""
    return 1.0 - cdf(x, kappa, loc, scale)
