"""The derivatives of the regularized incomplete beta function ``I_x(a, b)`` in ``a`` and ``b``.

They have no closed form. They are computed by running the continued fraction of ``I_x(a, b)``
(Numerical Recipes' ``betacf``, modified Lentz) on jets in ``(a, b)`` (``_jets``): the partial
derivatives of the recurrence, to the order asked. As in ``betacf``, the fraction is used where it
converges fast, ``x < (a + 1) / (a + b + 2)``, and the symmetry ``I_x(a, b) = 1 - I_(1-x)(b, a)``
elsewhere (with the roles of the two jet variables swapped).

Each order ``(i, j)`` is a primitive whose derivatives in ``a`` and ``b`` are the orders ``(i + 1, j)``
and ``(i, j + 1)``, and in ``x`` the ``(i, j)`` partial of the beta density (a jet of tapegrad
operations), so ``betainc`` is differentiable to any order in all three arguments.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.scipy.special import _jets as jets
from tapegrad.scipy.special._gamma import betaln, gammaln, polygamma
from tapegrad.scipy.special._gammainc_a import MAX_TERMS, factor_converged
from tapegrad.scipy.special._impl import _module_for, float_dtype
from tapegrad.scipy.special._log import xlog1py, xlogy
from tapegrad.scipy.special._partials import elementwise


def _log_beta(av, bv, lgamma):
    """``betaln`` of two jets: ``gammaln(a) + gammaln(b) - gammaln(a + b)``."""
    return jets.sub(jets.add(lgamma(av), lgamma(bv)), lgamma(jets.add(av, bv)))


def _continued_fraction(av, bv, x, sp):
    """``I_x(a, b)`` as a jet, for jets ``av``, ``bv`` (``betacf`` times its prefactor)."""
    xp = namespace_of(x)
    lgamma = lambda u: jets.gammaln_of(u, sp.gammaln, sp.polygamma)  # noqa: E731
    shape = tuple(max(k[i] for k in av) + 1 for i in range(2))
    one = jets.constant(xp.ones_like(x), shape)
    qab, qap, qam = jets.add(av, bv), jets.shift(av, 1.0), jets.shift(av, -1.0)
    c = one
    d = jets.recip(jets.sub(one, jets.scale(jets.div(qab, qap), x)))
    h = d
    for m in range(1, MAX_TERMS):
        m2 = 2.0 * m
        even = jets.scale(jets.div(jets.scale(jets.shift(bv, -m), float(m)),
                                   jets.mul(jets.shift(qam, m2), jets.shift(av, m2))), x)
        odd = jets.scale(jets.div(jets.mul(jets.shift(av, m), jets.shift(qab, m)),
                                  jets.mul(jets.shift(av, m2), jets.shift(qap, m2))), -x)
        delta = None
        for aa in (even, odd):
            d = jets.recip(jets.add(one, jets.mul(aa, d)))
            c = jets.add(one, jets.div(aa, c))
            delta = jets.mul(d, c)
            h = jets.mul(h, delta)
        if factor_converged(delta):
            break
    log_front = jets.sub(jets.add(jets.scale(av, xp.log(x)), jets.scale(bv, xp.log1p(-x))),
                         jets.add(_log_beta(av, bv, lgamma), jets.log_of(av, xp.log)))
    a, b = av[(0, 0)], bv[(0, 0)]
    log_front[(0, 0)] = sp.xlogy(a, x) + sp.xlog1py(b, -x) - sp.betaln(a, b) - xp.log(a)  # no cancellation
    return jets.mul(jets.exp(log_front, xp.exp), h)


def _betainc_dab_impl(a, b, x, *, order):
    xp = namespace_of(a, b, x)
    dtype = float_dtype(xp, a, b, x)
    sp = _module_for(xp, "betainc")
    a, b, x = (v.astype(np.float64) for v in xp.broadcast_arrays(xp.asarray(a), xp.asarray(b), xp.asarray(x)))
    shape = (order[0] + 1, order[1] + 1)
    inside = (a > 0) & (b > 0) & (x > 0) & (x < 1)
    direct = inside & (x < (a + 1) / (a + b + 2))
    swapped = inside & ~direct
    with np.errstate(all="ignore"):
        # both run on every element, with a stand-in (a = b = 1, x = 0.25) where the other is used
        fwd = _continued_fraction(jets.variable(xp.where(direct, a, 1.0), 0, shape),
                                  jets.variable(xp.where(direct, b, 1.0), 1, shape), xp.where(direct, x, 0.25), sp)
        rev = _continued_fraction(jets.variable(xp.where(swapped, b, 1.0), 1, shape),
                                  jets.variable(xp.where(swapped, a, 1.0), 0, shape),
                                  xp.where(swapped, 1.0 - x, 0.25), sp)
    # order != (0, 0), so the derivatives of 1 - I_(1-x)(b, a) are those of -I_(1-x)(b, a)
    out = jets.derivative({order: xp.where(direct, fwd[order], -rev[order])}, order)
    edge = xp.where((x == 0) | (x == 1), 0.0, np.nan)  # I is 0 and 1 there, whatever a and b
    return xp.where(inside, out, edge).astype(dtype)


def _density_dab(a, b, x, order):
    """The ``order = (i, j)`` partial in ``(a, b)`` of the beta density, in tapegrad operations."""
    shape = (order[0] + 1, order[1] + 1)
    av, bv = jets.variable(a, 0, shape), jets.variable(b, 1, shape)
    lgamma = lambda u: jets.gammaln_of(u, gammaln, polygamma)  # noqa: E731
    log_density = jets.sub(jets.add(jets.scale(jets.shift(av, -1.0), tnp.log(x)),
                                    jets.scale(jets.shift(bv, -1.0), tnp.log1p(-x))),
                           _log_beta(av, bv, lgamma))
    log_density[(0, 0)] = xlogy(a - 1, x) + xlog1py(b - 1, -x) - betaln(a, b)
    return jets.derivative(jets.exp(log_density, tnp.exp), order)


def _raised(order, axis):
    return tuple(n + (i == axis) for i, n in enumerate(order))


betainc_dab_p = elementwise(
    "betainc_dab",
    [lambda a, b, x, ans, order: betainc_dab(a, b, x, _raised(order, 0)),
     lambda a, b, x, ans, order: betainc_dab(a, b, x, _raised(order, 1)),
     lambda a, b, x, ans, order: _density_dab(a, b, x, order)],
    impl=_betainc_dab_impl,
)


def betainc_dab(a, b, x, order):
    """The partial derivative ``d^(i+j) / da^i db^j betainc(a, b, x)`` for ``order = (i, j) != (0, 0)``,
    broadcast; NaN outside ``a, b > 0, 0 <= x <= 1``."""
    return bind(betainc_dab_p, a, b, x, order=tuple(order))
