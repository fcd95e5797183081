"""``tapegrad.scipy.special``: SciPy's special functions, traceable and differentiable to any order in
both modes.

Values come from ``scipy.special`` (``cupyx.scipy.special`` on CuPy arrays). SciPy is optional: the
package imports without it, ``erf``, ``erfc``, ``gamma`` and ``gammaln`` fall back to the ``math``
module, and the other functions raise an ``ImportError`` that says ``pip install scipy``. Every
derivative is written with other functions of this package (``gammaln' = digamma``,
``digamma' = polygamma(1, .)``, ...), so ``grad``, ``jvp`` and their compositions work to any order.
"""
from tapegrad.scipy.special._bessel import i0, i0e, i1, i1e
from tapegrad.scipy.special._error import erf, erfc, erfcinv, erfcx, erfinv, log_ndtr, ndtr, ndtri
from tapegrad.scipy.special._gamma import betaln, digamma, gamma, gammaln, multigammaln, polygamma, psi
from tapegrad.scipy.special._log import entr, expit, log_expit, log_softmax, logit, logsumexp, softmax, xlog1py, xlogy

__all__ = [
    "betaln", "digamma", "entr", "erf", "erfc", "erfcinv", "erfcx", "erfinv", "expit", "gamma", "gammaln",
    "i0", "i0e", "i1", "i1e", "log_expit", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "softmax", "xlog1py", "xlogy",
]

# ---- block: coverage of jax.scipy.special and the Bessel family ----
from tapegrad.scipy.special._bessel_01 import j0, j1, y0, y1  # noqa: E402
from tapegrad.scipy.special._bessel_orders import bessel_jn, iv, ive, jn, jv, kv, kve, yn, yv  # noqa: E402
from tapegrad.scipy.special._complex_valued import sph_harm_y, wofz  # noqa: E402
from tapegrad.scipy.special._divergence import boxcox, boxcox1p, kl_div, rel_entr  # noqa: E402
from tapegrad.scipy.special._gamma_more import (  # noqa: E402
    beta,
    comb,
    factorial,
    gammasgn,
    loggamma,
    poch,
    rgamma,
)
from tapegrad.scipy.special._hypergeometric import hyp1f1, hyp2f1, owens_t  # noqa: E402
from tapegrad.scipy.special._incomplete import betainc, gammainc, gammaincc  # noqa: E402
from tapegrad.scipy.special._integrals import dawsn, exp1, expi, expn, fresnel, sici, spence  # noqa: E402
from tapegrad.scipy.special._zeta import bernoulli, zeta  # noqa: E402

__all__ += [
    "bernoulli", "bessel_jn", "beta", "betainc", "boxcox", "boxcox1p", "comb", "dawsn", "exp1", "expi",
    "expn", "factorial", "fresnel", "gammainc", "gammaincc", "gammasgn", "hyp1f1", "hyp2f1", "iv", "ive",
    "j0", "j1", "jn", "jv", "kl_div", "kv", "kve", "loggamma", "owens_t", "poch", "rel_entr", "rgamma",
    "sici", "spence", "sph_harm_y", "wofz", "y0", "y1", "yn", "yv", "zeta",
]
# ---- end block: coverage of jax.scipy.special and the Bessel family ----
