"""``tapegrad.scipy.stats.truncnorm``: the normal distribution truncated to ``[a, b]`` (in standard
units: the interval is ``[loc + a scale, loc + b scale]``), as ``scipy.stats.truncnorm``.

Differentiable in ``x``, ``a``, ``b``, ``loc`` and ``scale`` to any order in both modes. The
normalizing mass ``ndtr(b) - ndtr(a)`` is computed in logs, by the formula that keeps its precision
for the interval at hand (both ends in the left tail, both in the right tail by symmetry, or around
the mode), so intervals far in a tail (``a = 30``) keep full relative precision, as in SciPy and
JAX; ``ppf`` and ``isf`` invert in log space the same way, from the nearer tail. Outside the
interval the log density is ``-inf``, the density 0, ``cdf`` 0 or 1, with zero derivatives.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.special import log_ndtr, ndtr, ndtri
from tapegrad.scipy.stats import norm
from tapegrad.scipy.stats._support import LOG_2, NEG_INF, constant, guard, log, promoted, standardize

__all__ = ["logpdf", "pdf", "logcdf", "logsf", "cdf", "sf", "ppf", "isf"]


def _log_diff(log_p, log_q):
    """``log(p - q)`` from ``log p > log q``."""
    return log_p + tnp.log1p(-tnp.exp(log_q - log_p))


def log_gauss_mass(a, b):
    """``log(ndtr(b) - ndtr(a))`` for ``a < b``, accurate in both tails.

    An interval right of 0 is mirrored to ``[-b, -a]`` (the same mass); then both ends are left of 0
    (a difference of ``log_ndtr``s, which do not underflow) or the interval holds 0 (``1`` minus two
    tails, each below one half: no cancellation). Each formula runs on ends guarded into its own
    case, so the one ``where`` leaves out has finite derivatives.
    """
    mirror = a > 0
    lo, hi = tnp.where(mirror, -b, a), tnp.where(mirror, -a, b)
    in_tail = hi <= 0
    tail = _log_diff(log_ndtr(guard(in_tail, hi, 0.0)), log_ndtr(guard(in_tail, lo, -1.0)))
    central = tnp.log1p(-ndtr(guard(in_tail, -1.0, lo)) - ndtr(-guard(in_tail, 1.0, hi)))
    return tnp.where(in_tail, tail, central)


def _z(x, a, b, loc, scale):
    z = standardize(x, loc, scale)
    inside = (z >= a) & (z <= b)
    return guard(inside, z, 0.5 * (a + b)), inside, z


@promoted
def logpdf(x, a, b, loc=0.0, scale=1.0):
    """``norm.logpdf(z) - log(ndtr(b) - ndtr(a)) - log(scale)`` on the interval, ``-inf`` outside.
    As ``scipy.stats.truncnorm.logpdf``."""
    z, inside, _ = _z(x, a, b, loc, scale)
    return tnp.where(inside, norm.logpdf(z) - log(scale) - log_gauss_mass(a, b), NEG_INF)


@promoted
def pdf(x, a, b, loc=0.0, scale=1.0):
    """The density ``exp(logpdf(x, a, b, loc, scale))``. As ``scipy.stats.truncnorm.pdf``."""
    return tnp.exp(logpdf(x, a, b, loc, scale))


def _log_parts(x, a, b, loc, scale):
    """``(log cdf, log sf, strictly inside, z)``: each part from its own mass, and the one above one half
    as ``log1p(-other)``, which keeps the small complement's precision (the masses of an interval
    far in a tail are logs of size ~z**2/2, whose difference loses the digits of a probability near 1)."""
    z, inside, raw = _z(x, a, b, loc, scale)
    strict = inside & (raw > a) & (raw < b)
    z = guard(strict, z, 0.5 * (a + b))
    total = log_gauss_mass(a, b)
    lower, upper = log_gauss_mass(a, z) - total, log_gauss_mass(z, b) - total
    lower, upper = (tnp.where(lower > -LOG_2, tnp.log1p(-tnp.exp(upper)), lower),
                    tnp.where(upper > -LOG_2, tnp.log1p(-tnp.exp(lower)), upper))
    return lower, upper, strict, raw


@promoted
def logcdf(x, a, b, loc=0.0, scale=1.0):
    """``log((ndtr(z) - ndtr(a)) / (ndtr(b) - ndtr(a)))``; ``-inf`` at and left of the interval, 0 at
    and right of it. As ``scipy.stats.truncnorm.logcdf``."""
    lower, _, strict, raw = _log_parts(x, a, b, loc, scale)
    return tnp.where(strict, lower, constant(raw <= a, NEG_INF, 0.0, lower))


@promoted
def logsf(x, a, b, loc=0.0, scale=1.0):
    """``log((ndtr(b) - ndtr(z)) / (ndtr(b) - ndtr(a)))``; 0 at and left of the interval, ``-inf`` at
    and right of it. As ``scipy.stats.truncnorm.logsf``."""
    _, upper, strict, raw = _log_parts(x, a, b, loc, scale)
    return tnp.where(strict, upper, constant(raw <= a, 0.0, NEG_INF, upper))


@promoted
def cdf(x, a, b, loc=0.0, scale=1.0):
    """``exp(logcdf(x, a, b, loc, scale))``. As ``scipy.stats.truncnorm.cdf``."""
    return tnp.exp(logcdf(x, a, b, loc, scale))


@promoted
def sf(x, a, b, loc=0.0, scale=1.0):
    """``exp(logsf(x, a, b, loc, scale))``. As ``scipy.stats.truncnorm.sf``."""
    return tnp.exp(logsf(x, a, b, loc, scale))


def _ndtri_exp(log_p):
    """The standard normal quantile of ``exp(log_p)``: ``ndtri(p)`` below one half and
    ``-ndtri(1 - p)``, with ``1 - p = -expm1(log_p)``, above (so a ``p`` near 1 keeps its tail)."""
    low = log_p < -LOG_2
    return tnp.where(low, ndtri(tnp.exp(guard(low, log_p, -1.0))),
                     -ndtri(-tnp.expm1(guard(low, -0.5, log_p))))


def _standard_ppf(q, a, b):
    """The quantile ``x`` from ``log Phi(x) = logaddexp(log Phi(a), log q + log mass)`` where ``x``
    is left of 0, and from the mirror image ``log Phi(-x) = logaddexp(log Phi(-b), log(1 - q) + log
    mass)`` where it is right of 0 (as SciPy, which picks by the interval's side alone): each
    formula is then exact in its own tail, for intervals far in a tail too. ``a`` at ``q = 0`` and
    ``b`` at ``q = 1``."""
    interior = (q > 0) & (q < 1)
    p = guard(interior, q, 0.5)
    total = log_gauss_mass(a, b)
    log_lower = tnp.logaddexp(log_ndtr(a), tnp.log(p) + total)
    log_upper = tnp.logaddexp(log_ndtr(-b), tnp.log1p(-p) + total)
    use_lower = (b <= 0) | ((a < 0) & (log_lower < -LOG_2))
    x = tnp.where(use_lower, _ndtri_exp(guard(use_lower, log_lower, -1.0)),
                  -_ndtri_exp(guard(use_lower, -1.0, log_upper)))
    return tnp.where(interior, x, tnp.where(q <= 0, a + 0.0 * x, b + 0.0 * x))


@promoted
def ppf(q, a, b, loc=0.0, scale=1.0):
    """The quantile function ``loc + scale * F^-1(q)`` (``a`` and ``b`` at ``q = 0`` and 1).
    As ``scipy.stats.truncnorm.ppf``."""
    return loc + scale * _standard_ppf(q, a, b)


@promoted
def isf(q, a, b, loc=0.0, scale=1.0):
    """The inverse survival function: by the symmetry ``-X ~ truncnorm(-b, -a)``,
    ``loc - scale * F^-1(q; -b, -a)``. As ``scipy.stats.truncnorm.isf``."""
    return loc - scale * _standard_ppf(q, -b, -a)
