"""More of the gamma family: ``beta rgamma loggamma gammasgn poch factorial comb``.

Derivatives (DLMF 5.2, 5.12), each written with :func:`digamma` so they differentiate again:

    beta:  d/da B(a, b) = B(a, b) (digamma(a) - digamma(a + b))      (symmetric in b)
    poch:  d/dz (z)_m = (z)_m (digamma(z + m) - digamma(z)),  d/dm (z)_m = (z)_m digamma(z + m)
    rgamma' = -rgamma * digamma,   loggamma' = digamma,   gammasgn' = 0 (piecewise constant)

``factorial`` and ``comb`` are SciPy's real extensions ``gamma(n + 1)`` and ``binom(N, k)`` (0 outside
``0 <= k <= N``), differentiable in their real arguments as those functions are.
"""
from __future__ import annotations

from typing import Any

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import def_nondiff, defbatch_elementwise, primitive, unary_abstract_eval
from tapegrad.scipy.special._gamma import digamma, gamma
from tapegrad.scipy.special._impl import binary, scipy_impl, unary

beta_p = binary("beta", lambda a, b, ans: ans * (digamma(a) - digamma(a + b)),
                lambda a, b, ans: ans * (digamma(b) - digamma(a + b)))
rgamma_p = unary("rgamma", lambda x, ans: -ans * digamma(x))
loggamma_p = unary("loggamma", lambda x, ans: digamma(x))
poch_p = binary("poch", lambda z, m, ans: ans * (digamma(z + m) - digamma(z)),
                lambda z, m, ans: ans * digamma(z + m))
_binom_p = binary("binom", lambda n, k, ans: ans * (digamma(n + 1) - digamma(n - k + 1)),
                  lambda n, k, ans: ans * (digamma(n - k + 1) - digamma(k + 1)))

gammasgn_p = primitive("gammasgn", scipy_impl("gammasgn"), unary_abstract_eval)
def_nondiff(gammasgn_p)
defbatch_elementwise(gammasgn_p)


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``B(a, b) = gamma(a) gamma(b) / gamma(a + b)``, broadcast, as
    ``scipy.special.beta``.

    Derivatives: ``B(a, b) (digamma(a) - digamma(a + b))`` in ``a``, symmetrically in ``b``. Float
    dtypes are kept (Python scalars are weak); integers give float64.
    """
    return bind(beta_p, a, b)


def rgamma(x: ArrayLike) -> Array:
    """The reciprocal gamma function ``1 / gamma(x)``, entire (0 at ``x = 0, -1, -2, ...``), as
    ``scipy.special.rgamma``.

    Derivative ``-rgamma(x) digamma(x)``: NaN exactly at the poles of ``gamma`` (where ``digamma`` is
    infinite and ``rgamma`` is 0), correct everywhere else.
    """
    return bind(rgamma_p, x)


def loggamma(x: ArrayLike) -> Array:
    """The principal branch of ``log(gamma(x))``, as ``scipy.special.loggamma``.

    For real ``x`` it is real, and NaN for ``x < 0`` (SciPy's convention; :func:`gammaln` gives
    ``log|gamma(x)|`` there). Complex input gives the complex principal branch and its first derivative
    (``digamma`` takes complex arguments); SciPy's ``polygamma`` does not, so second derivatives need a
    real argument. Derivative: ``digamma(x)``.
    """
    return bind(loggamma_p, x)


def gammasgn(x: ArrayLike) -> Array:
    """The sign of the gamma function (``+1`` or ``-1``; 0 at ``x = 0, -1, -2, ...``), as
    ``scipy.special.gammasgn``. Piecewise constant: not differentiable (its derivative is 0)."""
    return bind(gammasgn_p, x)


def poch(z: ArrayLike, m: Any) -> Array:
    """The Pochhammer symbol (rising factorial) ``(z)_m = gamma(z + m) / gamma(z)``, broadcast, as
    ``scipy.special.poch``.

    Derivatives: ``(z)_m (digamma(z + m) - digamma(z))`` in ``z`` and ``(z)_m digamma(z + m)`` in ``m``.
    """
    return bind(poch_p, z, m)


def _refuse_exact(fn: str, exact):
    if exact:
        raise ValueError(f"{fn}: exact=True (Python integers) is not traceable; call "
                         f"scipy.special.{fn}(..., exact=True) on concrete integers, or pass exact=False")


def factorial(n: int, exact: bool = False) -> Array:
    """``n!`` as SciPy's real extension ``gamma(n + 1)``, and 0 for ``n < 0``, as
    ``scipy.special.factorial(n, exact=False)`` (and JAX's).

    Args:
        n: the argument, elementwise; integers give float64.
        exact: must be False (SciPy's exact Python-integer result cannot be traced).

    Differentiable in a real ``n`` as ``gamma(n + 1)`` is: ``gamma(n + 1) digamma(n + 1)`` (0 for
    ``n < 0``).

    Raises:
        ValueError: ``exact=True``.
    """
    _refuse_exact("factorial", exact)
    n = tnp.asarray(n)
    negative = n < 0
    # double where: the branch not taken gets an argument where gamma and its derivative are finite
    return tnp.where(negative, 0.0, gamma(tnp.where(negative, 0, n) + 1))


def comb(N: ArrayLike, k: ArrayLike, *, exact: bool = False,  # noqa: N803 - SciPy's argument name
         repetition: bool = False) -> Array:
    """The number of combinations of ``N`` things taken ``k`` at a time, as
    ``scipy.special.comb(N, k, exact=False)``: ``binom(N, k)`` where ``0 <= k <= N``, else 0.

    Args:
        N, k: broadcast together; real values give SciPy's real extension of the binomial coefficient.
        exact: must be False (SciPy's exact Python-integer result cannot be traced).
        repetition: count combinations with repetition, ``comb(N + k - 1, k)``.

    Derivatives (where ``0 <= k <= N``; 0 elsewhere): ``binom(N, k) (digamma(N + 1) - digamma(N - k + 1))``
    in ``N`` and ``binom(N, k) (digamma(N - k + 1) - digamma(k + 1))`` in ``k``.

    Raises:
        ValueError: ``exact=True``.
    """
    _refuse_exact("comb", exact)
    N, k = tnp.asarray(N), tnp.asarray(k)
    if repetition:
        N = N + k - 1
    valid = (k <= N) & (N >= 0) & (k >= 0)
    # double where: binom's derivative may be infinite outside the valid region
    return tnp.where(valid, bind(_binom_p, tnp.where(valid, N, 1), tnp.where(valid, k, 0)), 0.0)
