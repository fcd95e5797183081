"""The derivatives of the regularized incomplete gamma function in its shape parameter ``a``.

``d^k/da^k P(a, x)`` has no closed form. It is computed here by running the two classical expansions
of ``P`` in truncated Taylor arithmetic in ``a`` (forward-mode derivatives of order ``k``, the way
JAX's ``igamma_grad_a`` differentiates the same recurrences to order 1):

- ``x < a + 1``: the series ``P = x^a e^(-x) / gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))``;
- otherwise Legendre's continued fraction for ``Q = 1 - P`` (modified Lentz), as Numerical Recipes'
  ``gcf``; ``Q`` is then small and its derivatives keep their relative precision.

The prefactors ``exp(g(a))`` are Taylor-expanded exactly (``g' = log x - digamma``, ``g^(j) =
-polygamma(j - 1, .)``). Each order ``k`` is a primitive whose derivative in ``a`` is order ``k + 1``
and in ``x`` the closed form ``d^k/da^k`` of the gamma density, so ``gammainc`` is differentiable to
any order in both arguments.
"""
from __future__ import annotations

import math

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.extend import defbatch_elementwise, defjvp, defvjp, primitive
from tapegrad.numpy._shape import unbroadcast
from tapegrad.scipy.special._gamma import gammaln, polygamma
from tapegrad.scipy.special._impl import _module_for, float_dtype
from tapegrad.scipy.special._log import xlogy

_EPS = 2.0 ** -52   # relative size of the last term kept (float64 epsilon)
_MAX_TERMS = 5000  # the series needs about x + 10 sqrt(x) terms; the fraction far fewer
_TINY = 1e-300


# ---- truncated Taylor arithmetic: a jet is a list of Taylor coefficients f^(j)(a) / j! -----------
def _mul(u, v):
    return [sum(u[j] * v[n - j] for j in range(n + 1)) for n in range(len(u))]


def _recip(u):
    r = [1.0 / u[0]]
    for n in range(1, len(u)):
        r.append(-sum(u[j] * r[n - j] for j in range(1, n + 1)) / u[0])
    return r


def _exp(g):
    e = [np.exp(g[0])]
    for n in range(1, len(g)):
        e.append(sum(k * g[k] * e[n - k] for k in range(1, n + 1)) / n)
    return e


def _log_prefactor(a, x, shift, order, sp):
    """The jet of ``a log x - x - gammaln(a + shift)`` in ``a``."""
    log_x = np.log(x)
    g = [a * log_x - x - sp.gammaln(a + shift), log_x - sp.digamma(a + shift)]
    g += [-sp.polygamma(j - 1, a + shift) / math.factorial(j) for j in range(2, order + 1)]
    return g[:order + 1]


def _converged(term, total):
    return all(np.all(np.abs(t) <= _EPS * np.abs(s) + _TINY) for t, s in zip(term, total))


def _series(a, x, order, sp):
    one = np.ones_like(a)
    term = [one] + [0.0 * one] * order
    total = list(term)
    for n in range(1, _MAX_TERMS):
        denominator = [a + n, one] + [0.0 * one] * (order - 1)
        term = [t * x for t in _mul(term, _recip(denominator[:order + 1]))]
        total = [s + t for s, t in zip(total, term)]
        if _converged(term, total):
            break
    return _mul(_exp(_log_prefactor(a, x, 1, order, sp)), total)


def _continued_fraction(a, x, order, sp):
    zero = [0.0 * a] * order
    b = [x + 1 - a, -np.ones_like(a)] + zero[1:]
    c = [np.full_like(a, 1 / _TINY)] + zero
    d = _recip(b)
    h = d
    for i in range(1, _MAX_TERMS):
        an = [-i * (i - a), np.full_like(a, float(i))] + zero[1:]
        b = [b[0] + 2.0] + b[1:]
        d = _recip([p + q for p, q in zip(_mul(an, d), b)])
        c = [p + q for p, q in zip(b, _mul(an, _recip(c)))]
        delta = _mul(d, c)
        h = _mul(h, delta)
        if _converged([delta[0] - 1.0] + delta[1:], [np.ones_like(a)] * (order + 1)):
            break
    q = _mul(_exp(_log_prefactor(a, x, 0, order, sp)), h)
    return [1.0 - q[0]] + [-t for t in q[1:]]


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
    out = math.factorial(order) * xp.where(by_series, series[order], fraction[order])
    edge = xp.where((x == 0) | (x == np.inf), 0.0, np.nan)  # P is constant in a at x = 0 and x = inf
    return xp.where(inside, out, edge).astype(dtype)


def _density_da(a, x, order):
    """``d^order/da^order`` of the gamma density ``x^(a-1) e^(-x) / gamma(a)``, in tapegrad operations
    (the same exponential-of-a-jet recurrence, with ``g' = log x - digamma(a)``)."""
    g = [None] + [(tnp.log(x) if j == 1 else 0.0) - polygamma(j - 1, a) / math.factorial(j)
                  for j in range(1, order + 1)]
    e = [tnp.exp(xlogy(a - 1, x) - x - gammaln(a))]
    for n in range(1, order + 1):
        e.append(sum(k * g[k] * e[n - k] for k in range(1, n + 1)) / n)
    return math.factorial(order) * e[order]


gammainc_da_p = primitive("gammainc_da", _gammainc_da_impl)
defvjp(gammainc_da_p,
       lambda ct, ans, a, x, *, order: unbroadcast(ct * gammainc_da(a, x, order + 1), a),
       lambda ct, ans, a, x, *, order: unbroadcast(ct * _density_da(a, x, order), x))
defjvp(gammainc_da_p,
       lambda t, ans, a, x, *, order: t * gammainc_da(a, x, order + 1),
       lambda t, ans, a, x, *, order: t * _density_da(a, x, order))
defbatch_elementwise(gammainc_da_p)


def gammainc_da(a, x, order: int = 1):
    """``d^order/da^order gammainc(a, x)``, broadcast (``order >= 1``); NaN outside ``a > 0, x >= 0``."""
    return bind(gammainc_da_p, a, x, order=order)
