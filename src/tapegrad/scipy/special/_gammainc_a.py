"""The derivatives of the regularized incomplete gamma function in its shape parameter ``a``.

``d^k/da^k P(a, x)`` has no closed form. It is computed by running the two classical expansions of
``P`` on jets in ``a`` (``_jets``: forward-mode derivatives of order ``k`` of the recurrence):

- ``x < a + 1``: the series ``P = x^a e^(-x) / gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))``;
- otherwise Legendre's continued fraction for ``Q = 1 - P`` (modified Lentz, as Numerical Recipes'
  ``gcf``); ``Q`` is then small and its derivatives keep their relative precision.

Each order ``k`` is a primitive whose derivative in ``a`` is order ``k + 1`` and in ``x`` the
``k``-th ``a``-derivative of the gamma density (a jet of tapegrad operations), so ``gammainc`` is
differentiable to any order in both arguments.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.scipy.special import _jets as jets
from tapegrad.scipy.special._gamma import gammaln, polygamma
from tapegrad.scipy.special._impl import _module_for, float_dtype
from tapegrad.scipy.special._log import xlogy
from tapegrad.scipy.special._partials import elementwise

EPS = 2.0 ** -52   # relative size of the last term kept (float64 epsilon)
MAX_TERMS = 5000   # the series needs about x + 10 sqrt(x) terms; the fraction far fewer
_TINY = 1e-300


def converged(step, total):
    """Every coefficient of the jet ``step`` is below ``EPS`` relative to ``total``'s."""
    return all(np.all(abs(step[k]) <= EPS * abs(total[k]) + _TINY) for k in step)


def factor_converged(factor):
    """A continued fraction's last factor is 1 to within ``EPS`` in every coefficient (the value's is
    1, the derivatives' 0)."""
    return converged(jets.shift(factor, -1.0), {k: 1.0 for k in factor})


def _series(a, x, order, sp):
    xp = namespace_of(a, x)
    av = jets.variable(a, 0, (order + 1,))
    term = jets.constant(xp.ones_like(a), (order + 1,))
    total = term
    for n in range(1, MAX_TERMS):
        term = jets.scale(jets.div(term, jets.shift(av, float(n))), x)
        total = jets.add(total, term)
        if converged(term, total):
            break
    log_front = jets.sub(jets.shift(jets.scale(av, xp.log(x)), -x),
                         jets.gammaln_of(jets.shift(av, 1.0), sp.gammaln, sp.polygamma))
    return jets.mul(jets.exp(log_front, xp.exp), total)


def _continued_fraction(a, x, order, sp):
    xp = namespace_of(a, x)
    av = jets.variable(a, 0, (order + 1,))
    b = jets.shift(jets.scale(av, -1.0), x + 1.0)
    c = jets.constant(xp.full_like(a, 1 / _TINY), (order + 1,))
    d = jets.recip(b)
    h = d
    for i in range(1, MAX_TERMS):
        an = jets.scale(jets.shift(av, -float(i)), float(i))  # -i (i - a)
        b = jets.shift(b, 2.0)
        d = jets.recip(jets.add(jets.mul(an, d), b))
        c = jets.add(b, jets.div(an, c))
        delta = jets.mul(d, c)
        h = jets.mul(h, delta)
        if factor_converged(delta):
            break
    log_front = jets.sub(jets.shift(jets.scale(av, xp.log(x)), -x), jets.gammaln_of(av, sp.gammaln, sp.polygamma))
    return jets.scale(jets.mul(jets.exp(log_front, xp.exp), h), -1.0)  # P = 1 - Q: the derivatives negated


def _gammainc_da_impl(a, x, *, order):
    xp = namespace_of(a, x)
    dtype = float_dtype(xp, a, x)
    sp = _module_for(xp, "gammainc")
    a, x = (v.astype(np.float64) for v in xp.broadcast_arrays(xp.asarray(a), xp.asarray(x)))
    inside = (a > 0) & (x > 0) & xp.isfinite(x)
    by_series = inside & (x < a + 1.0)
    by_fraction = inside & ~by_series
    with np.errstate(all="ignore"):
        # each expansion runs on every element, with a stand-in that converges at once where the
        # other one (or neither) is used
        series = _series(xp.where(by_series, a, 1.0), xp.where(by_series, x, 0.5), order, sp)
        fraction = _continued_fraction(xp.where(by_fraction, a, 1.0), xp.where(by_fraction, x, 3.0), order, sp)
    out = jets.derivative({(order,): xp.where(by_series, series[(order,)], fraction[(order,)])}, (order,))
    edge = xp.where((x == 0) | (x == np.inf), 0.0, np.nan)  # P is constant in a at x = 0 and x = inf
    return xp.where(inside, out, edge).astype(dtype)


def _density_da(a, x, order):
    """``d^order/da^order`` of the gamma density ``x^(a-1) e^(-x) / gamma(a)``, in tapegrad operations."""
    av = jets.variable(a, 0, (order + 1,))
    log_density = jets.sub(jets.scale(jets.shift(av, -1.0), tnp.log(x)), jets.gammaln_of(av, gammaln, polygamma))
    log_density[(0,)] = xlogy(a - 1, x) - x - gammaln(a)  # finite at x = 0 for a = 1
    return jets.derivative(jets.exp(log_density, tnp.exp), (order,))


gammainc_da_p = elementwise("gammainc_da", [lambda a, x, ans, order: gammainc_da(a, x, order + 1),
                                            lambda a, x, ans, order: _density_da(a, x, order)],
                            impl=_gammainc_da_impl)


def gammainc_da(a, x, order: int = 1):
    """``d^order/da^order gammainc(a, x)``, broadcast (``order >= 1``); NaN outside ``a > 0, x >= 0``."""
    return bind(gammainc_da_p, a, x, order=order)
