"""The multivariate normal log density for a covariance that may be singular
(``multivariate_normal.logpdf(..., allow_singular=True)``), through the eigendecomposition, as
SciPy's ``_PSD``: eigenvalues below ``cond * max|eigenvalue|`` (``cond`` = ``1e6 eps`` in float64,
``1e3 eps`` in float32) count as zero; the density lives on the span of the others, with the
pseudo-determinant and the pseudo-inverse; a point off that span (its residual in the null space at
least ``1e3`` times the cutoff) has log density ``-inf``.
"""
from __future__ import annotations

import math

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.scipy.stats._support import NEG_INF, guard

_LOG_2PI = math.log(2.0 * math.pi)


def _cutoff(s):
    """SciPy's ``_eigvalsh_to_eps``: which eigenvalues count as zero (no derivative flows through it)."""
    dtype = np.dtype(tnp.result_type(s))
    cond = (1e3 if dtype == np.float32 else 1e6) * float(np.finfo(dtype).eps)
    return cond * tnp.max(tnp.abs(stop_gradient(s)), axis=-1, keepdims=True)


def logpdf(x, mean, cov):
    """The log density of ``N(mean, cov)`` at ``x`` for a symmetric positive semidefinite ``cov``.

    Shapes as ``multivariate_normal.logpdf``: ``x`` and ``mean`` ``(..., d)``, ``cov`` ``(..., d, d)``.
    Differentiable in ``x`` and ``mean``, and in ``cov`` where its eigenvalues are distinct (the
    derivative of ``eigh``; a covariance with two or more zero eigenvalues has none).

    Raises:
        ValueError: ``cov`` has an eigenvalue below ``-cutoff`` (not positive semidefinite; checked
            on a concrete ``cov`` only).
    """
    s, u = tnp.linalg.eigh(cov)
    eps = _cutoff(s)
    if isinstance(s, np.ndarray) and np.any(s < -eps):  # a traced cov cannot be checked
        raise ValueError("multivariate_normal: cov must be symmetric positive semidefinite (an eigenvalue "
                         "is negative beyond rounding)")
    keep = s > eps
    s_safe = guard(keep, s, 1.0)
    whiten = u * tnp.where(keep, 1.0 / tnp.sqrt(s_safe), 0.0)[..., None, :]
    rank = tnp.sum(keep, axis=-1)
    log_pdet = tnp.sum(tnp.where(keep, tnp.log(s_safe), 0.0), axis=-1)
    dev = (x - mean)[..., None, :]
    maha = tnp.sum(tnp.square(tnp.matmul(dev, whiten)[..., 0, :]), axis=-1)
    null_basis = tnp.where(keep[..., None, :], 0.0, stop_gradient(u))
    residual = tnp.sqrt(tnp.sum(tnp.square(tnp.matmul(stop_gradient(dev), null_basis)), axis=(-2, -1)))
    value = -0.5 * (rank * _LOG_2PI + log_pdet + maha)
    return tnp.where(residual < 1e3 * eps[..., 0], value, NEG_INF)
