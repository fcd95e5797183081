"""``tapegrad.scipy.stats.gaussian_kde``: kernel density estimation with Gaussian kernels, as
``scipy.stats.gaussian_kde`` (same constructor, bandwidth rules and methods).

Everything is composed of tapegrad operations, so the estimate is differentiable, in every mode and
to any order, in the points it is evaluated at, in the data set, the weights and a scalar bandwidth,
and works under ``jit`` and ``vmap`` (build the estimator inside the transformed function).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.linalg import solve_triangular
from tapegrad.scipy.special import logsumexp, ndtr

_LOG_2PI = math.log(2.0 * math.pi)


def _gaussian_log_mass(diff, cov):
    """``log N(diff; 0, cov)`` for ``diff`` of shape ``(d, ...)``: the whitened squares and the
    log determinant, through one Cholesky factor."""
    L = tnp.linalg.cholesky(cov)
    d = diff.shape[0]
    z = solve_triangular(L, tnp.reshape(diff, (d, -1)), lower=True)
    log_det = tnp.sum(tnp.log(tnp.diagonal(L)))
    return tnp.reshape(-0.5 * tnp.sum(z * z, axis=0), diff.shape[1:]) - log_det - 0.5 * d * _LOG_2PI


class gaussian_kde:  # noqa: N801 (SciPy's name)
    """A Gaussian kernel density estimate of ``dataset``, as ``scipy.stats.gaussian_kde``.

    Args:
        dataset: ``(d, n)`` data points (``(n,)`` for one dimension).
        bw_method: ``"scott"`` (default), ``"silverman"``, a scalar (the bandwidth factor itself),
            or a callable of the estimator returning the factor.
        weights: ``(n,)`` non-negative weights of the points (normalized to sum to 1); default
            equal weights.

    Attributes (SciPy's): ``dataset``, ``d``, ``n``, ``weights``, ``neff`` (the effective number
    of points, ``1 / sum(weights**2)``), ``factor``, ``covariance`` (the kernel's: the data's
    weighted covariance times ``factor**2``), ``inv_cov``.

    Raises:
        ValueError: ``dataset`` has fewer than 2 points or more than 2 axes, ``weights`` is not one
            per point, or ``bw_method`` is not one of the above.
    """

    def __init__(self, dataset: ArrayLike, bw_method: Any = None, weights: Any = None) -> None:
        dataset = tnp.asarray(dataset)
        if dataset.ndim > 2:
            raise ValueError(f"gaussian_kde: dataset must be (d, n) or (n,); got shape {dataset.shape}")
        self.dataset = tnp.reshape(dataset, (1, -1)) if dataset.ndim < 2 else dataset
        self.d, self.n = self.dataset.shape
        if self.n < 2:
            raise ValueError(f"gaussian_kde: dataset needs more than one point; got {self.n}")
        if weights is None:
            self.weights = tnp.zeros_like(self.dataset[0], dtype=tnp.result_type(self.dataset, 1.0)) + 1.0 / self.n
        else:
            weights = tnp.asarray(weights)
            if weights.shape != (self.n,):
                raise ValueError(f"gaussian_kde: weights must have shape ({self.n},), one per point; got "
                                 f"{weights.shape}")
            self.weights = weights / tnp.sum(weights)
        self.neff = 1.0 / tnp.sum(self.weights ** 2)
        self.set_bandwidth(bw_method)

    # ---- bandwidth ----
    def scotts_factor(self) -> Array:
        """Scott's rule, ``neff ** (-1 / (d + 4))``."""
        return self.neff ** (-1.0 / (self.d + 4))

    def silverman_factor(self) -> Array:
        """Silverman's rule, ``(neff (d + 2) / 4) ** (-1 / (d + 4))``."""
        return (self.neff * (self.d + 2.0) / 4.0) ** (-1.0 / (self.d + 4))

    covariance_factor: Callable[[], Any] = scotts_factor  # type: ignore[assignment]  # an instance's may be a lambda

    def set_bandwidth(self, bw_method: Any = None) -> None:
        """Choose the bandwidth factor (``bw_method`` as the constructor's) and recompute the kernel."""
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            self.covariance_factor = self.scotts_factor
        elif isinstance(bw_method, str) and bw_method == "silverman":
            self.covariance_factor = self.silverman_factor
        elif callable(bw_method):
            self.covariance_factor = lambda: bw_method(self)
        elif isinstance(bw_method, str) or tnp.ndim(bw_method) != 0:
            raise ValueError("gaussian_kde: bw_method must be 'scott', 'silverman', a scalar or a callable; "
                             f"got {bw_method!r}")
        else:
            self.covariance_factor = lambda: bw_method
        self._compute_covariance()

    def _compute_covariance(self):
        """The data's weighted covariance (``numpy.cov`` with ``aweights``, ``ddof=1``) times
        ``factor**2``."""
        self.factor = self.covariance_factor()
        mean = tnp.sum(self.dataset * self.weights, axis=1, keepdims=True)
        centered = self.dataset - mean
        data_cov = (centered * self.weights) @ centered.T / (1.0 - tnp.sum(self.weights ** 2))
        self.covariance = data_cov * self.factor ** 2
        self.inv_cov = tnp.linalg.inv(self.covariance)

    # ---- evaluation ----
    def _points(self, points):
        points = tnp.atleast_2d(tnp.asarray(points))
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:  # one point given as a row
                return tnp.reshape(points, (self.d, 1))
            raise ValueError(f"gaussian_kde: points have dimension {d}, the data set {self.d}; pass (d, m)")
        return points

    def logpdf(self, points: ArrayLike) -> Array:
        """The log of the estimated density at ``points``, ``(d, m)`` (or ``(m,)`` for ``d = 1``):
        a ``logsumexp`` over the kernels, accurate far from the data. Returns ``(m,)``."""
        points = self._points(points)
        diff = points[:, :, None] - self.dataset[:, None, :]  # (d, m, n)
        log_kernels = _gaussian_log_mass(diff, self.covariance) + tnp.log(self.weights)
        return logsumexp(log_kernels, axis=-1)

    def evaluate(self, points: ArrayLike) -> Array:
        """The estimated density at ``points`` (``(d, m)``, or ``(m,)`` for ``d = 1``): ``(m,)``."""
        return tnp.exp(self.logpdf(points))

    __call__ = evaluate
    pdf = evaluate

    # ---- integrals ----
    def integrate_gaussian(self, mean: ArrayLike, cov: Any) -> Array:
        """The integral of the estimate times the Gaussian ``N(mean, cov)`` (``mean`` ``(d,)``,
        ``cov`` ``(d, d)``)."""
        mean = tnp.reshape(tnp.asarray(mean), (self.d, 1))
        cov = tnp.reshape(tnp.asarray(cov), (self.d, self.d))
        log_mass = _gaussian_log_mass(self.dataset - mean, self.covariance + cov)
        return tnp.sum(self.weights * tnp.exp(log_mass))

    def integrate_box_1d(self, low: ArrayLike, high: ArrayLike) -> Array:
        """The estimate's mass between ``low`` and ``high`` (one-dimensional data only).

        Raises:
            ValueError: the data set has more than one dimension.
        """
        if self.d != 1:
            raise ValueError("gaussian_kde.integrate_box_1d: the data set must be one-dimensional; "
                             f"it has {self.d} dimensions")
        sd = tnp.sqrt(self.covariance[0, 0])
        data = self.dataset[0]
        return tnp.sum(self.weights * (ndtr((high - data) / sd) - ndtr((low - data) / sd)))

    def integrate_kde(self, other: Any) -> Array:
        """The integral of the product of this estimate and ``other`` (another ``gaussian_kde`` of the
        same dimension)."""
        if other.d != self.d:
            raise ValueError(f"gaussian_kde.integrate_kde: dimensions differ ({self.d} and {other.d})")
        diff = self.dataset[:, :, None] - other.dataset[:, None, :]
        log_mass = _gaussian_log_mass(diff, self.covariance + other.covariance)
        return tnp.sum(self.weights[:, None] * other.weights[None, :] * tnp.exp(log_mass))

    def resample(self, size: int | None = None, seed: int | None = None) -> Array:
        """``size`` draws from the estimate, ``(d, size)`` (default ``size``: ``int(neff)``): data points
        picked by weight plus the kernel's Gaussian noise, both from ``numpy.random.default_rng(seed)``
        (the same distribution as SciPy's, not the same draws for a seed: the noise is
        ``cholesky(covariance) @ standard_normal``).
        Differentiable in the data set and the bandwidth (the draws are reparameterized); the
        weights and ``neff`` are read as concrete values (traced ones raise tapegrad's conversion
        error)."""
        rng = np.random.default_rng(seed)
        size = int(np.asarray(self.neff)) if size is None else int(size)
        idx = rng.choice(self.n, size=size, p=np.asarray(self.weights))
        noise = rng.standard_normal((self.d, size))
        return self.dataset[:, idx] + tnp.linalg.cholesky(self.covariance) @ noise
