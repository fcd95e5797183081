"""``tapegrad.scipy.stats.multinomial``: the multinomial distribution of counts ``x`` (last axis) in
``n`` trials over categories of probabilities ``p`` (last axis), as ``scipy.stats.multinomial``.

``logpmf`` and ``pmf`` are differentiable in ``p`` (and ``n``, through ``gammaln``) to any order in
both modes; the derivative in ``x`` is 0 (discrete). Counts that are not whole non-negative numbers
summing to ``n`` have log pmf ``-inf`` and pmf 0.

Difference from SciPy: ``p`` is used as given, as in JAX; SciPy replaces its last entry by
``1 - sum(p[:-1])``, so for a ``p`` that does not sum to 1 the two differ, and SciPy's derivative in
``p[-1]`` is 0.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.scipy.special import gammaln, xlogy
from tapegrad.scipy.stats._support import NEG_INF, guard, is_integer

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """``gammaln(n + 1) + sum(x log(p) - gammaln(x + 1))`` over the last axis. As ``scipy.stats.multinomial.logpmf``.

    Args:
        x: counts, ``(..., k)``.
        n: the number of trials, broadcast against ``x``'s batch shape ``(...)``.
        p: probabilities, ``(..., k)``.

    Returns:
        The log probabilities, of the broadcast batch shape ``(...)``.
    """
    x, n = tnp.asarray(x), tnp.asarray(n)
    inside = tnp.all(is_integer(x) & (x >= 0), axis=-1) & (tnp.sum(x, axis=-1) == n)
    x = guard(inside[..., None], x, 0.0)
    value = gammaln(n + 1.0) + tnp.sum(xlogy(x, p) - gammaln(x + 1.0), axis=-1)
    return tnp.where(inside, value, NEG_INF)


def pmf(x, n, p):
    """``exp(logpmf(x, n, p))``; shapes as :func:`logpmf`. As ``scipy.stats.multinomial.pmf``."""
    return tnp.exp(logpmf(x, n, p))
