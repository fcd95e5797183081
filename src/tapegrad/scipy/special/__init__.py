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
