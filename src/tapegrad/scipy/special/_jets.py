"""Truncated multivariate Taylor arithmetic ("jets"), for the parameter derivatives that have no closed
form (``gammainc`` in ``a``, ``betainc`` in ``a`` and ``b``): running a function's own series or
continued fraction on jets gives its partial derivatives to the order asked, with the accuracy of the
expansion itself (forward-mode differentiation of the recurrence, as JAX's ``igamma_grad_a`` does to
order 1).

A jet of ``shape`` ``(n_0, n_1, ...)`` is a dict from multi-indices ``k`` (``k_i < n_i``) to the
Taylor coefficients ``d^k f / k!`` (arrays, or Python numbers for known constants). The operations
use only ``+``, ``*``, ``/`` and the ``exp`` they are given, so the same code runs on NumPy or CuPy
arrays in an impl and on tapegrad arrays in a derivative rule.
"""
from __future__ import annotations

import itertools
import math


def indices(shape):
    """The multi-indices of a jet of ``shape``, in lexicographic order (every index after those it
    dominates)."""
    return list(itertools.product(*(range(n) for n in shape)))


def _below(k):
    """The multi-indices ``p <= k`` componentwise."""
    return itertools.product(*(range(n + 1) for n in k))


def _minus(k, p):
    return tuple(a - b for a, b in zip(k, p))


def constant(value, shape):
    zero = (0,) * len(shape)
    return {k: value if k == zero else 0.0 for k in indices(shape)}


def variable(value, axis, shape):
    """The jet of the variable along ``axis`` at ``value``."""
    unit = tuple(int(i == axis) for i in range(len(shape)))
    jet = constant(value, shape)
    if unit in jet:
        jet[unit] = 1.0
    return jet


def add(u, v):
    return {k: u[k] + v[k] for k in u}


def sub(u, v):
    return {k: u[k] - v[k] for k in u}


def scale(u, c):
    return {k: u[k] * c for k in u}


def shift(u, c):
    """``u + c`` for a scalar or array ``c``."""
    zero = (0,) * len(next(iter(u)))
    return {k: u[k] + c if k == zero else u[k] for k in u}


def mul(u, v):
    return {k: sum(u[p] * v[_minus(k, p)] for p in _below(k)) for k in u}


def recip(u):
    zero = (0,) * len(next(iter(u)))
    r = {}
    for k in u:  # lexicographic: every r[k - p] with p != 0 is known
        if k == zero:
            r[k] = 1.0 / u[zero]
        else:
            r[k] = -sum(u[p] * r[_minus(k, p)] for p in _below(k) if p != zero) / u[zero]
    return r


def div(u, v):
    return mul(u, recip(v))


def exp(g, exp_fn):
    """``exp`` of the jet ``g``: ``k_d e_k = sum_{p <= k, p_d > 0} p_d g_p e_(k-p)`` along an axis ``d``
    where ``k_d > 0``."""
    zero = (0,) * len(next(iter(g)))
    e = {}
    for k in g:
        if k == zero:
            e[k] = exp_fn(g[zero])
            continue
        d = next(i for i, n in enumerate(k) if n > 0)
        e[k] = sum(p[d] * g[p] * e[_minus(k, p)] for p in _below(k) if p[d] > 0) / k[d]
    return e


def compose(u, coefficients):
    """``f(u)`` for the jet ``u``, given ``f``'s Taylor coefficients ``f^(n)(u_0) / n!`` at ``u``'s value
    (as many as the jet's total degree plus one)."""
    zero = (0,) * len(next(iter(u)))
    delta = {k: 0.0 if k == zero else u[k] for k in u}
    out = {k: coefficients[0] if k == zero else 0.0 for k in u}
    power = {k: 1.0 if k == zero else 0.0 for k in u}
    for c in coefficients[1:]:
        power = mul(power, delta)
        out = add(out, scale(power, c))
    return out


def degree(u):
    """The highest total degree a jet holds."""
    return max(sum(k) for k in u)


def gammaln_of(u, gammaln, polygamma):
    """``gammaln(u)`` of a jet (``gammaln' = polygamma(0, .)``, ...), with the given functions."""
    u0 = u[(0,) * len(next(iter(u)))]
    return compose(u, [gammaln(u0)] + [polygamma(n - 1, u0) / math.factorial(n) for n in range(1, degree(u) + 1)])


def log_of(u, log):
    """``log(u)`` of a jet."""
    u0 = u[(0,) * len(next(iter(u)))]
    return compose(u, [log(u0)] + [(-1.0) ** (n + 1) / (n * u0 ** n) for n in range(1, degree(u) + 1)])


def derivative(jet, k):
    """``d^k f`` from its jet: the coefficient times ``k!``."""
    return jet[k] * math.prod(math.factorial(n) for n in k)
