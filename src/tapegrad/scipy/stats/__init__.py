"""``tapegrad.scipy.stats``: distributions as modules of functions, as ``jax.scipy.stats``:
``norm`` (``logpdf pdf cdf logcdf sf logsf ppf isf``) and ``multivariate_normal``
(``logpdf pdf cdf logcdf``), differentiable in every argument, and the distributions, estimators and
statistics of the block below (``docs/stats.md``)."""
from tapegrad.scipy.stats import multivariate_normal, norm

__all__ = ["multivariate_normal", "norm"]

# ---- block: the distributions of jax.scipy.stats (issue 15) ----
from tapegrad.scipy.stats import (  # noqa: E402
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    nbinom,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)

__all__ += [
    "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gennorm",
    "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "multinomial", "nbinom", "pareto", "poisson", "t",
    "truncnorm", "uniform", "vonmises", "wrapcauchy",
]
