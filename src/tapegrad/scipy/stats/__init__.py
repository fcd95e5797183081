"""``tapegrad.scipy.stats``: distributions as modules of functions, as ``jax.scipy.stats``:
``norm`` (``logpdf pdf cdf logcdf sf logsf ppf isf``) and ``multivariate_normal``
(``logpdf pdf cdf logcdf entropy``), differentiable in every argument, and the distributions,
estimators and statistics of the block below (``docs/stats.md``)."""
from tapegrad.scipy.stats import multivariate_normal, norm

__all__ = ["multivariate_normal", "norm"]

# ---- block: the distributions of jax.scipy.stats (issue 15) ----
from tapegrad.numpy._operators import register_alternatives  # noqa: E402

_METHODS = {"logpdf", "pdf", "logpmf", "pmf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "entropy"}
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
from tapegrad.scipy.stats._kde import gaussian_kde  # noqa: E402
from tapegrad.scipy.stats._mode import mode  # noqa: E402
from tapegrad.scipy.stats._rankdata import rankdata  # noqa: E402
from tapegrad.scipy.stats._sem import sem  # noqa: E402

# scipy.stats.rankdata(tracer) and scipy.stats.norm.logpdf(tracer) raise an error that names the
# function here (SciPy converts its arguments to arrays before any protocol can see a traced value)
register_alternatives("scipy.stats", "tapegrad.scipy.stats", ["mode", "rankdata", "sem"])
for _name in ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gennorm",
              "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "multinomial", "multivariate_normal", "nbinom",
              "norm", "pareto", "poisson", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy"]:
    _module = globals()[_name]
    register_alternatives("scipy.stats", "tapegrad.scipy.stats",
                          [f"{_name}.{fn}" for fn in dir(_module) if fn in _METHODS])

__all__ += [
    "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gennorm",
    "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "multinomial", "nbinom", "pareto", "poisson", "t",
    "truncnorm", "uniform", "vonmises", "wrapcauchy",
    "gaussian_kde", "mode", "rankdata", "sem",
]
