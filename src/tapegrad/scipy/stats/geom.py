"""``tapegrad.scipy.stats.geom``: the geometric distribution, the number of trials of probability
``p`` up to the first success (support ``1, 2, ...``), shifted by ``loc``, as ``scipy.stats.geom``.

``logpmf``, ``pmf`` and the distribution functions (closed forms: ``sf(k) = (1 - p)**floor(k)``) are
differentiable in ``p`` to any order in both modes; the derivative in ``k`` is 0 (discrete).
Outside the support the log pmf is ``-inf`` and the pmf 0. ``ppf`` is integer valued and not
differentiable (zero derivative).
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.special import xlog1py
from tapegrad.scipy.stats._support import NEG_INF, guard, lattice, log1mexp, promoted

__all__ = ["logpmf", "pmf", "logsf", "sf", "cdf", "logcdf", "ppf"]


@promoted
def logpmf(k, p, loc=0):
    """``(k - 1) log(1 - p) + log(p)`` on the support, ``-inf`` elsewhere. As ``scipy.stats.geom.logpmf``."""
    k, inside = lattice(k, loc, 1)
    return tnp.where(inside, xlog1py(k - 1.0, -p) + tnp.log(p), NEG_INF)


@promoted
def pmf(k, p, loc=0):
    """``exp(logpmf(k, p, loc))``. As ``scipy.stats.geom.pmf``."""
    return tnp.exp(logpmf(k, p, loc))


def _trials(k, loc):
    k = tnp.floor(k - loc)
    inside = k >= 1
    return guard(inside, k, 1.0), inside


@promoted
def logsf(k, p, loc=0):
    """``floor(k - loc) log(1 - p)``, 0 below ``loc + 1``. As ``scipy.stats.geom.logsf``."""
    k, inside = _trials(k, loc)
    return tnp.where(inside, k * tnp.log1p(-p), 0.0)


@promoted
def sf(k, p, loc=0):
    """``(1 - p)**floor(k - loc)``, 1 below ``loc + 1``. As ``scipy.stats.geom.sf``."""
    return tnp.exp(logsf(k, p, loc))


@promoted
def cdf(k, p, loc=0):
    """``1 - sf``, computed as ``-expm1(log sf)``. As ``scipy.stats.geom.cdf``."""
    return -tnp.expm1(logsf(k, p, loc))


@promoted
def logcdf(k, p, loc=0):
    """``log(1 - (1 - p)**floor(k - loc))`` without cancellation, ``-inf`` below ``loc + 1``.
    As ``scipy.stats.geom.logcdf``."""
    k, inside = _trials(k, loc)
    return tnp.where(inside, log1mexp(-k * tnp.log1p(-p)), NEG_INF)


@promoted
def ppf(q, p, loc=0):
    """The smallest ``k`` with ``cdf(k) >= q`` (SciPy's formula: ``ceil(log1p(-q) / log1p(-p))``,
    one less where rounding overshot). Not differentiable (integer valued). As ``scipy.stats.geom.ppf``."""
    q, p = stop_gradient(q), stop_gradient(p)
    finite = q < 1
    q = guard(finite, q, 0.5)
    k = tnp.ceil(tnp.log1p(-q) / tnp.log1p(-p))
    below = 1.0 - (1.0 - p) ** (k - 1.0)
    k = tnp.where((below >= q) & (k > 0), k - 1.0, k)
    return tnp.where(finite, k, math.inf) + loc
