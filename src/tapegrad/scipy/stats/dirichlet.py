"""``tapegrad.scipy.stats.dirichlet``: the Dirichlet distribution on the simplex, with concentration
``alpha``, as ``scipy.stats.dirichlet``.

``logpdf`` and ``pdf`` are differentiable in ``x`` and ``alpha`` to any order in both modes. As in
SciPy, the components run along ``x``'s first axis (``x`` is ``(K,)`` or ``(K, N)`` for ``N``
points), and ``x`` may leave out its last component (``K - 1`` rows), which is then
``1 - sum(x)``.

Difference from SciPy: a point off the simplex (a component outside ``[0, 1]``, or components whose
sum is further from 1 than SciPy's ``1e-9``, or ``1000 eps`` in float32) gives ``-inf`` (JAX's
convention) rather than SciPy's ``ValueError``: a traced value cannot be checked when it is traced.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.scipy.special import gammaln, xlogy
from tapegrad.scipy.stats._support import NEG_INF, guard

__all__ = ["logpdf", "pdf"]


def _components(x, alpha):
    """``x`` with its last component, and ``alpha`` shaped to broadcast along ``x``'s first axis."""
    x, alpha = tnp.asarray(x), tnp.asarray(alpha)
    k = alpha.shape[0]
    if alpha.ndim != 1 or k < 2:
        raise ValueError(f"dirichlet: alpha must be a 1-d array of at least 2 concentrations; got shape "
                         f"{alpha.shape}")
    if x.shape[0] == k - 1:
        x = tnp.concatenate([x, 1.0 - tnp.sum(x, axis=0, keepdims=True)], axis=0)
    elif x.shape[0] != k:
        raise ValueError(f"dirichlet: x must have {k} or {k - 1} components along its first axis, as "
                         f"alpha has {k}; got shape {x.shape}")
    return x, tnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))


def logpdf(x, alpha):
    """``sum((alpha - 1) log x) + gammaln(sum alpha) - sum(gammaln(alpha))``. As ``scipy.stats.dirichlet.logpdf``.

    Args:
        x: points, ``(K,)`` or ``(K, N)`` (or ``K - 1`` rows).
        alpha: concentrations, ``(K,)``, positive.

    Returns:
        The log densities, ``x.shape[1:]``.

    Raises:
        ValueError: ``alpha`` is not 1-d with at least 2 entries, or ``x``'s first axis matches
            neither ``K`` nor ``K - 1``.
    """
    x, alpha = _components(x, alpha)
    tol = max(1e-9, 1000.0 * float(np.finfo(tnp.result_type(x, 1.0)).eps))
    inside = tnp.all((x >= 0) & (x <= 1), axis=0) & (tnp.abs(tnp.sum(x, axis=0) - 1.0) <= tol)
    x = guard(inside, x, 1.0 / x.shape[0])
    norm = gammaln(tnp.sum(alpha, axis=0)) - tnp.sum(gammaln(alpha), axis=0)
    return tnp.where(inside, tnp.sum(xlogy(alpha - 1.0, x), axis=0) + norm, NEG_INF)


def pdf(x, alpha):
    """``exp(logpdf(x, alpha))``; shapes as :func:`logpdf`. As ``scipy.stats.dirichlet.pdf``."""
    return tnp.exp(logpdf(x, alpha))
