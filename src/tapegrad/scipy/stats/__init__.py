"""``tapegrad.scipy.stats``: distributions as modules of functions, as ``jax.scipy.stats``:
``norm`` (``logpdf pdf cdf logcdf sf logsf ppf isf``) and ``multivariate_normal``
(``logpdf pdf cdf logcdf``), differentiable in every argument, and the distributions, estimators and
statistics of the block below (``docs/stats.md``)."""
from tapegrad.scipy.stats import multivariate_normal, norm

__all__ = ["multivariate_normal", "norm"]

# ---- block: the distributions of jax.scipy.stats (issue 15) ----
from tapegrad.scipy.stats import (  # noqa: E402
    beta,
    cauchy,
    chi2,
    expon,
    gamma,
    gennorm,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    pareto,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)

__all__ += [
    "beta", "cauchy", "chi2", "expon", "gamma", "gennorm", "gumbel_l", "gumbel_r", "laplace", "logistic",
    "pareto", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy",
]
