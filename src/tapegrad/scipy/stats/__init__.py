"""``tapegrad.scipy.stats``: distributions as modules of functions, as ``jax.scipy.stats``:
``norm`` (``logpdf pdf cdf logcdf sf logsf ppf isf``) and ``multivariate_normal``
(``logpdf pdf cdf logcdf``), differentiable in every argument."""
from tapegrad.scipy.stats import multivariate_normal, norm

__all__ = ["multivariate_normal", "norm"]
