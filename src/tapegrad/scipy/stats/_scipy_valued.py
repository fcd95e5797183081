"""Distribution functions whose values come from SciPy, as elementwise primitives: the regularized
incomplete gamma and beta functions (``gammainc``, ``gammaincc``, ``betainc``), Student's t
distribution function (``stdtr``), and their inverses in the probability (``gammaincinv``,
``gammainccinv``, ``betaincinv``, ``betainccinv``, ``stdtrit``). The discrete distributions' sums
are these functions too (``bdtr(k, n, p) = betainc(n - k, k + 1, 1 - p)``,
``pdtr(k, mu) = gammaincc(k + 1, mu)``).

Each operand has a partial derivative written in tapegrad operations (so it differentiates again):
in ``x``, a distribution function's is the density at ``x``; in ``q``, a quantile function's is one
over the density at the quantile. Otherwise a string:
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
    return lambda ct, ans, *xs: unbroadcast(ct * partial(ans, *xs), xs[position])


def _jvp(partial):
    return lambda t, ans, *xs: t * partial(ans, *xs)


def scipy_valued(name: str, partials):
    """An elementwise primitive ``scipy.stats.<name>`` with value ``scipy.special.<name>(*operands)``.

    Args:
        name: the ``scipy.special`` function.
        partials: one entry per operand: ``partial(ans, *operands)`` (tapegrad operations, ``ans``
            the value), ``None`` (a zero derivative), or a string saying why the derivative is
            missing.
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


def _in_x(density, sign=1.0):
    """The partial of a distribution function in its last operand ``x``: the density there."""
    return lambda ans, *params_x: sign * density(*params_x)


def _in_q(density, sign=1.0):
    """The partial of a quantile function in its last operand ``q``: one over the density at the
    quantile ``ans``."""
    return lambda ans, *params_q: sign / density(*params_q[:-1], ans)


_DF = "Student's t distribution function has no closed-form derivative in df"
gammainc_p = scipy_valued("gammainc", (_SHAPE, _in_x(_gamma_density)))
gammaincc_p = scipy_valued("gammaincc", (_SHAPE, _in_x(_gamma_density, -1.0)))
betainc_p = scipy_valued("betainc", (_SHAPE, _SHAPE, _in_x(_beta_density)))
stdtr_p = scipy_valued("stdtr", (_DF, _in_x(_t_density)))
gammaincinv_p = scipy_valued("gammaincinv", (_SHAPE, _in_q(_gamma_density)))
gammainccinv_p = scipy_valued("gammainccinv", (_SHAPE, _in_q(_gamma_density, -1.0)))
betaincinv_p = scipy_valued("betaincinv", (_SHAPE, _SHAPE, _in_q(_beta_density)))
betainccinv_p = scipy_valued("betainccinv", (_SHAPE, _SHAPE, _in_q(_beta_density, -1.0)))
stdtrit_p = scipy_valued("stdtrit", (_DF, _in_q(_t_density)))
