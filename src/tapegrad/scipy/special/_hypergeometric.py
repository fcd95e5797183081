"""The confluent and Gauss hypergeometric functions ``hyp1f1 hyp2f1``, and Owen's T function.

Derivatives in the argument (DLMF 13.3.15, 15.5.1) are hypergeometric functions again:

    d/dx 1F1(a; b; x) = a/b 1F1(a + 1; b + 1; x)
    d/dx 2F1(a, b; c; x) = a b / c 2F1(a + 1, b + 1; c + 1; x)

The derivatives in the parameters have no closed form here: they raise ``NotImplementedError``.
Owen's T (Owen 1956): ``T(h, a) = 1/(2 pi) integral_0^a e^(-h^2 (1 + t^2)/2) / (1 + t^2) dt``, so

    d/da T = e^(-h^2 (1 + a^2)/2) / (2 pi (1 + a^2)),   d/dh T = -e^(-h^2/2) erf(a h / sqrt 2) / (2 sqrt(2 pi)).
"""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._error import erf
from tapegrad.scipy.special._impl import SQRT_2, SQRT_2PI, binary
from tapegrad.scipy.special._partials import elementwise, no_derivative

hyp1f1_p = elementwise("hyp1f1", [no_derivative("hyp1f1", "a"), no_derivative("hyp1f1", "b"),
                                  lambda a, b, x, ans: a / b * hyp1f1(a + 1, b + 1, x)])
hyp2f1_p = elementwise("hyp2f1", [no_derivative("hyp2f1", "a"), no_derivative("hyp2f1", "b"),
                                  no_derivative("hyp2f1", "c"),
                                  lambda a, b, c, x, ans: a * b / c * hyp2f1(a + 1, b + 1, c + 1, x)])
owens_t_p = binary(
    "owens_t",
    lambda h, a, ans: -tnp.exp(-0.5 * (h * h)) * erf(a * h / SQRT_2) / (2.0 * SQRT_2PI),
    lambda h, a, ans: tnp.exp(-0.5 * (h * h) * (1.0 + a * a)) / (2.0 * math.pi * (1.0 + a * a)),
)


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """Kummer's confluent hypergeometric function ``1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!``,
    broadcast, as ``scipy.special.hyp1f1``.

    Derivative in ``x``: ``a/b hyp1f1(a + 1, b + 1, x)``.

    Raises:
        NotImplementedError: when differentiating with respect to ``a`` or ``b``.
    """
    return bind(hyp1f1_p, a, b, x)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Array:
    """The Gauss hypergeometric function ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!``,
    broadcast, as ``scipy.special.hyp2f1`` (real ``x``).

    Derivative in ``x``: ``a b / c hyp2f1(a + 1, b + 1, c + 1, x)``.

    Raises:
        NotImplementedError: when differentiating with respect to ``a``, ``b`` or ``c``.
    """
    return bind(hyp2f1_p, a, b, c, x)


def owens_t(h: ArrayLike, a: ArrayLike) -> Array:
    """Owen's T function ``T(h, a)``, the probability of ``X > h, 0 < Y < a X`` for independent
    standard normals, broadcast, as ``scipy.special.owens_t``.

    Derivatives: ``-exp(-h^2/2) erf(a h / sqrt 2) / (2 sqrt(2 pi))`` in ``h`` and
    ``exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))`` in ``a``.
    """
    return bind(owens_t_p, h, a)
