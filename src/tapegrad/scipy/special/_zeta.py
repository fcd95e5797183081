"""The Hurwitz zeta function and the Bernoulli numbers: ``zeta bernoulli``.

``d/dq zeta(x, q) = -x zeta(x + 1, q)`` (DLMF 25.11.17), differentiable again. The derivative in the
exponent ``x`` (``-sum log(n + q) / (n + q)^x``) is not a function of this package: differentiating
``zeta`` with respect to ``x`` raises ``NotImplementedError``, as in JAX.
"""
from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad.scipy.special._impl import special_function
from tapegrad.scipy.special._partials import elementwise, no_derivative, static_count

zeta_p = elementwise("zeta", [no_derivative("zeta", "x"), lambda x, q, ans: -x * zeta(x + 1, q)])


def zeta(x, q=None):
    """The Hurwitz zeta function ``sum_{n >= 0} (n + q)^(-x)``, broadcast, as ``scipy.special.zeta``;
    ``q=None`` gives the Riemann zeta function (``q = 1``).

    Derivative in ``q``: ``-x zeta(x + 1, q)``.

    Raises:
        NotImplementedError: when differentiating with respect to ``x``.
    """
    return bind(zeta_p, x, 1.0 if q is None else q)


def bernoulli(n: int):
    """The Bernoulli numbers ``B_0 ... B_n`` (``B_1 = -1/2``), a float64 array of shape ``(n + 1,)``, as
    ``scipy.special.bernoulli``.

    Args:
        n: a non-negative Python integer (the result's shape depends on it, so it cannot be traced).

    Raises:
        ValueError: ``n`` is negative or not an integer.
        ConcretizationError: ``n`` is traced (under ``jit``, make it static).
    """
    return tnp.asarray(special_function(np, "bernoulli")(static_count("bernoulli", "n", n)))
