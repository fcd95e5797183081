"""The gamma function family: ``gamma gammaln digamma polygamma betaln multigammaln``.

Derivatives (DLMF 5.2, 5.15): ``gammaln' = digamma``, ``digamma' = polygamma(1, .)``,
``polygamma(n, .)' = polygamma(n + 1, .)``, ``gamma' = gamma * digamma``, and
``d/da betaln(a, b) = digamma(a) - digamma(a + b)`` (symmetrically in ``b``). Each is written with the
next function of the family, so derivatives of any order are available.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._backend import is_array, namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import def_dependency, defbatch_elementwise, defjvp, defvjp, primitive
from tapegrad.numpy._shape import unbroadcast
from tapegrad.scipy.special._impl import binary, scipy_impl, unary

gammaln_p = unary("gammaln", lambda x, ans: digamma(x), fallback=math.lgamma)
digamma_p = unary("digamma", lambda x, ans: polygamma(1, x))
gamma_p = unary("gamma", lambda x, ans: ans * digamma(x), fallback=math.gamma)
betaln_p = binary("betaln", lambda a, b, ans: digamma(a) - digamma(a + b),
                  lambda a, b, ans: digamma(b) - digamma(a + b))

_scipy_polygamma = scipy_impl("polygamma", dtype_from=(1,))


def _polygamma_impl(n, x):
    xp = namespace_of(n, x)
    if xp is not np and not is_array(n):
        # cupyx's polygamma ends in cupy.where(n == 0, ...), which needs an array: a Python order
        # fails there ("'bool' object has no attribute 'astype'"). The order is a number the caller
        # wrote, so moving it to the device is no implicit copy of the caller's data.
        n = xp.asarray(n)
    return _scipy_polygamma(n, x)


# the order n is an operand (it may be an array broadcast against x) with no derivative
polygamma_p = primitive("polygamma", _polygamma_impl)
defvjp(polygamma_p, None, lambda ct, ans, n, x: unbroadcast(ct * polygamma(n + 1, x), x))
defjvp(polygamma_p, None, lambda t, ans, n, x: t * polygamma(n + 1, x))
defbatch_elementwise(polygamma_p)
def_dependency(polygamma_p, "elementwise")


def gammaln(x: ArrayLike) -> Array:
    """``log|gamma(x)|``, elementwise, as ``scipy.special.gammaln`` (``math.lgamma`` without SciPy).

    Derivative: ``digamma(x)``. Float dtypes are kept; integers give float64.
    """
    return bind(gammaln_p, x)


def digamma(x: ArrayLike) -> Array:
    """The digamma function ``psi(x) = gamma'(x) / gamma(x)``, as ``scipy.special.digamma`` (and
    ``scipy.special.psi``, which ``psi`` here also is; needs SciPy). Derivative: ``polygamma(1, x)``."""
    return bind(digamma_p, x)


psi = digamma


def polygamma(n: int, x: ArrayLike) -> Array:
    """The ``n``-th derivative of :func:`digamma`, as ``scipy.special.polygamma`` (needs SciPy).

    Args:
        n: a non-negative integer or integer array, broadcast against ``x``; not differentiable.
            With device (CuPy) ``x``, a Python or NumPy integer ``n`` is made a device array first,
            as ``cupyx.scipy.special.polygamma`` needs.
        x: the argument. The result has ``x``'s float dtype (float64 for integer ``x``).

    Derivative in ``x``: ``polygamma(n + 1, x)``.
    """
    return bind(polygamma_p, n, x)


def gamma(x: ArrayLike) -> Array:
    """The gamma function, as ``scipy.special.gamma`` (``math.gamma`` without SciPy).

    Derivative: ``gamma(x) * digamma(x)``.
    """
    return bind(gamma_p, x)


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """``log|B(a, b)|`` with ``B(a, b) = gamma(a) gamma(b) / gamma(a + b)``, broadcast, as
    ``scipy.special.betaln`` (needs SciPy).

    Derivatives: ``digamma(a) - digamma(a + b)`` in ``a``, ``digamma(b) - digamma(a + b)`` in ``b``.
    """
    return bind(betaln_p, a, b)


def multigammaln(a: ArrayLike, d: int) -> Array:
    """The log of the multivariate gamma function of dimension ``d``, as ``scipy.special.multigammaln``:
    ``d (d - 1) / 4 * log(pi) + sum_{j=1..d} gammaln(a - (j - 1) / 2)``.

    Args:
        a: the argument (elementwise); must exceed ``(d - 1) / 2``.
        d: the dimension, a positive Python integer.
    """
    d = int(d)
    if d < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d}")
    terms = [gammaln(a - 0.5 * j) for j in range(d)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total + 0.25 * d * (d - 1) * math.log(math.pi)
