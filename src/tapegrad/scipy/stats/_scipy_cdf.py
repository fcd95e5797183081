"""Distribution functions whose values come from SciPy: the regularized incomplete gamma and beta
functions (``gammainc``, ``gammaincc``, ``betainc``) and Student's t distribution function
(``stdtr``), as elementwise primitives. The discrete distributions' sums are these functions too
(``bdtr(k, n, p) = betainc(n - k, k + 1, 1 - p)``, ``pdtr(k, mu) = gammaincc(k + 1, mu)``).

Each operand has a partial derivative written in tapegrad operations (so it differentiates again),
``None`` for an integer operand (a count, whose derivative is zero where it is defined), or a string:
the derivative has no closed form tapegrad offers yet (the incomplete gamma and beta functions in
their shape parameters), and differentiating in that operand raises a ``NotImplementedError`` that
names the function, the operand and that string.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.extend import defbatch_elementwise, defjvp, defvjp, primitive, unbroadcast
from tapegrad.scipy.special import betaln, gammaln, xlog1py, xlogy
from tapegrad.scipy.special._impl import scipy_impl


def _missing(name, position, why):
    def rule(*_args, **_params):
        raise NotImplementedError(
            f"the derivative of {name} in operand {position} is not implemented: {why}. Differentiate "
            "in the other arguments only (wrap this one in tg.stop_gradient, or keep it out of "
            "grad_position)")
    return rule


def _vjp(partial, position):
    return lambda ct, ans, *xs: unbroadcast(ct * partial(*xs), xs[position])


def _jvp(partial):
    return lambda t, ans, *xs: t * partial(*xs)


def scipy_cdf(name: str, partials):
    """An elementwise primitive ``stats.<name>`` with value ``scipy.special.<name>(*operands)``.

    Args:
        name: the ``scipy.special`` function.
        partials: one entry per operand: ``partial(*operands)`` (tapegrad operations), ``None`` (a
            zero derivative: an integer count), or a string saying why the derivative is missing.
    """
    prim = primitive(f"scipy.stats.{name}", scipy_impl(name))
    vjps, jvps = [], []
    for i, partial in enumerate(partials):
        if partial is None:
            vjps.append(None)
            jvps.append(None)
        elif isinstance(partial, str):
            vjps.append(_missing(name, i, partial))
            jvps.append(_missing(name, i, partial))
        else:
            vjps.append(_vjp(partial, i))
            jvps.append(_jvp(partial))
    defvjp(prim, *vjps)
    defjvp(prim, *jvps)
    defbatch_elementwise(prim)
    return prim


# ---- the functions: partial derivatives in closed form ------------------------------------------------
_SHAPE = "the incomplete gamma and beta functions have no closed-form derivative in their shape parameters"


def _gamma_density(a, x):
    return tnp.exp(xlogy(a - 1.0, x) - x - gammaln(a))


def _beta_density(a, b, x):
    return tnp.exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b))


def _t_density(df, t):
    return tnp.exp(gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * tnp.log(df * math.pi)
                   - 0.5 * (df + 1.0) * tnp.log1p(t * t / df))


gammainc_p = scipy_cdf("gammainc", (_SHAPE, _gamma_density))
gammaincc_p = scipy_cdf("gammaincc", (_SHAPE, lambda a, x: -_gamma_density(a, x)))
betainc_p = scipy_cdf("betainc", (_SHAPE, _SHAPE, _beta_density))
stdtr_p = scipy_cdf("stdtr", ("Student's t distribution function has no closed-form derivative in df",
                              _t_density))
