"""Elementwise divergences and the Box-Cox transforms: ``kl_div rel_entr boxcox boxcox1p``.

``rel_entr(x, y) = x log(x/y)`` and ``kl_div(x, y) = x log(x/y) - x + y`` (0 at ``x = 0, y >= 0``,
``inf`` outside the domain), as SciPy defines them. Partial derivatives (``x, y > 0``):

    rel_entr: log(x/y) + 1  in x,   -x/y    in y
    kl_div:   log(x/y)      in x,   1 - x/y in y

Box-Cox ``boxcox(x, l) = (x^l - 1) / l`` (``log x`` at ``l = 0``): with ``L = log x`` it is
``expm1(l L) / l``, so ``d/dx = x^(l - 1)`` and ``d/dl = (L x^l - boxcox(x, l)) / l``, which cancels
catastrophically as ``l -> 0``; there its Taylor series ``sum_k (k-1) l^(k-2) L^k / k!`` (``L^2 / 2`` at
``l = 0``) is used instead. ``boxcox1p(x, l) = boxcox(1 + x, l)`` uses ``L = log1p(x)``.
"""
from __future__ import annotations

import math
from typing import Any

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._impl import binary

rel_entr_p = binary("rel_entr", lambda x, y, ans: tnp.log(x / y) + 1.0, lambda x, y, ans: -x / y)
kl_div_p = binary("kl_div", lambda x, y, ans: tnp.log(x / y), lambda x, y, ans: 1.0 - x / y)

# the series of d/dl expm1(l L)/l in powers of u = l L, times L^2: sum_{k>=2} (k-1)/k! u^(k-2); seven
# terms leave < u^7 / 7! relative, below 1e-24 within the radius
_BOXCOX_SERIES = [(k - 1) / math.factorial(k) for k in range(2, 9)]
_BOXCOX_RADIUS = 1e-3


def _boxcox_dlmbda(log_x, lmbda, ans):
    u = lmbda * log_x
    near = tnp.abs(u) < _BOXCOX_RADIUS
    u_near = tnp.where(near, u, 0.0)
    l_far = tnp.where(near, 1.0, lmbda)  # double where: the branch not taken never divides by 0
    series = _BOXCOX_SERIES[-1]
    for c in reversed(_BOXCOX_SERIES[:-1]):
        series = series * u_near + c
    far = (log_x * tnp.exp(l_far * log_x) - tnp.where(near, 0.0, ans)) / l_far
    return tnp.where(near, series * (log_x * log_x), far)


boxcox_p = binary("boxcox", lambda x, lmbda, ans: tnp.exp((lmbda - 1) * tnp.log(x)),
                  lambda x, lmbda, ans: _boxcox_dlmbda(tnp.log(x), lmbda, ans))
boxcox1p_p = binary("boxcox1p", lambda x, lmbda, ans: tnp.exp((lmbda - 1) * tnp.log1p(x)),
                    lambda x, lmbda, ans: _boxcox_dlmbda(tnp.log1p(x), lmbda, ans))


def rel_entr(x: ArrayLike, y: ArrayLike) -> Array:
    """The elementwise relative entropy ``x log(x / y)`` (0 at ``x = 0``, ``inf`` outside
    ``x, y >= 0``), broadcast, as ``scipy.special.rel_entr``; its sum is the Kullback-Leibler
    divergence of two distributions.

    Derivatives: ``log(x/y) + 1`` in ``x`` (``-inf`` at ``x = 0``), ``-x/y`` in ``y``.
    """
    return bind(rel_entr_p, x, y)


def kl_div(x: ArrayLike, y: ArrayLike) -> Array:
    """``x log(x / y) - x + y`` (``y`` at ``x = 0``, ``inf`` outside ``x, y >= 0``), broadcast, as
    ``scipy.special.kl_div`` (the form that stays non-negative for unnormalised measures).

    Derivatives: ``log(x/y)`` in ``x``, ``1 - x/y`` in ``y``.
    """
    return bind(kl_div_p, x, y)


def boxcox(x: ArrayLike, lmbda: Any) -> Array:
    """The Box-Cox transform ``(x^lmbda - 1) / lmbda``, and ``log(x)`` at ``lmbda = 0``, broadcast, as
    ``scipy.special.boxcox`` (``x > 0``).

    Derivatives: ``x^(lmbda - 1)`` in ``x``; in ``lmbda``, ``(log(x) x^lmbda - boxcox(x, lmbda)) / lmbda``,
    and its series near ``lmbda log(x) = 0`` (``log(x)^2 / 2`` at ``lmbda = 0``), accurate to every order.
    """
    return bind(boxcox_p, x, lmbda)


def boxcox1p(x: ArrayLike, lmbda: Any) -> Array:
    """``boxcox(1 + x, lmbda)``, computed accurately for small ``x`` (``log1p``), broadcast, as
    ``scipy.special.boxcox1p`` (``x > -1``). Derivatives as :func:`boxcox`'s, with ``log1p(x)``."""
    return bind(boxcox1p_p, x, lmbda)
