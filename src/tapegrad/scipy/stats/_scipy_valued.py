"""Distribution functions whose values come from SciPy, as elementwise primitives: Student's t
distribution function (``stdtr``) and the inverses in the probability of the regularized incomplete
gamma and beta functions and of ``stdtr`` (``gammaincinv``, ``gammainccinv``, ``betaincinv``,
``betainccinv``, ``stdtrit``). The incomplete functions themselves are
``tapegrad.scipy.special.gammainc``, ``gammaincc`` and ``betainc``.

Each operand has a partial derivative written in tapegrad operations (so it differentiates again):
in ``x``, a distribution function's is the density at ``x`` (``stdtr``'s in ``df`` comes from
``stdtr(df, t) = betainc(df/2, 1/2, df/(df + t**2)) / 2`` left of 0); in ``q``, a quantile
function's is one over the density at the quantile ``x``; in a shape parameter ``a``, a quantile
function's is ``-(dF/da) / density`` at ``x`` (implicit differentiation of ``F(a, x) = q``, with
``tapegrad.scipy.special``'s derivatives of the incomplete functions in their shapes). An entry may
also be ``None`` (a zero derivative) or a string saying why the derivative is missing: then
differentiating in that operand raises a ``NotImplementedError`` that names the function, the
operand and that string.
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.extend import defbatch_elementwise, defjvp, defvjp, primitive, unbroadcast
from tapegrad.scipy.special import betaln, gammaln, xlog1py, xlogy
from tapegrad.scipy.special._betainc_ab import betainc_dab
from tapegrad.scipy.special._gammainc_a import gammainc_da
from tapegrad.scipy.special._impl import scipy_impl
from tapegrad.scipy.stats._support import guard


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
    vjps: list
    jvps: list
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


def _in_shape(d_shape, density):
    """The partial of a quantile function ``x(params, q)`` in a shape parameter, from ``F(params, x) =
    q``: ``-(dF/d shape) / density`` at ``x = ans`` (the same for the complement ``1 - F = q``)."""
    return lambda ans, *params_q: -d_shape(*params_q[:-1], ans) / density(*params_q[:-1], ans)


def _stdtr_ddf(df, t):
    """``d stdtr(df, t) / d df``. With ``x = df / (df + t**2)``, ``stdtr = I(df/2, 1/2, x) / 2`` left
    of 0 and one minus that right of it, so the derivative is ``+-(I_a / 2 + I_x t**2 / (df + t**2)**2)
    / 2``; 0 at ``t = 0``, where ``stdtr = 1/2`` for every ``df`` (and ``I_x`` is infinite)."""
    zero = t == 0
    t = guard(zero, 1.0, t)
    x = df / (df + t * t)
    slope = 0.5 * betainc_dab(0.5 * df, 0.5, x, (1, 0)) + _beta_density(0.5 * df, 0.5, x) * (t / (df + t * t)) ** 2
    return tnp.where(zero, 0.0, tnp.where(t < 0, 0.5 * slope, -0.5 * slope))


stdtr_p = scipy_valued("stdtr", (_in_x(_stdtr_ddf), _in_x(_t_density)))
stdtrit_p = scipy_valued("stdtrit", (_in_shape(_stdtr_ddf, _t_density), _in_q(_t_density)))
_GAMMA_A = _in_shape(gammainc_da, _gamma_density)
gammaincinv_p = scipy_valued("gammaincinv", (_GAMMA_A, _in_q(_gamma_density)))
gammainccinv_p = scipy_valued("gammainccinv", (_GAMMA_A, _in_q(_gamma_density, -1.0)))
_BETA_A = _in_shape(lambda a, b, x: betainc_dab(a, b, x, (1, 0)), _beta_density)
_BETA_B = _in_shape(lambda a, b, x: betainc_dab(a, b, x, (0, 1)), _beta_density)
betaincinv_p = scipy_valued("betaincinv", (_BETA_A, _BETA_B, _in_q(_beta_density)))
betainccinv_p = scipy_valued("betainccinv", (_BETA_A, _BETA_B, _in_q(_beta_density, -1.0)))
