"""The Riemann and Hurwitz zeta functions and the Bernoulli numbers: ``zeta bernoulli``.

``d/dq zeta(s, q) = -s zeta(s + 1, q)`` (DLMF 25.11.17). The derivatives in the exponent ``s``
(``-sum log(n + q) / (n + q)^s`` and beyond) have no closed form: they come from the Euler-Maclaurin
formula (DLMF 25.11.5, the formula Cephes evaluates ``zeta`` with), run on jets in ``s`` (``_jets``):

    zeta(s, q) = sum_{n<N} (n + q)^-s + (N + q)^(1-s) / (s - 1) + (N + q)^-s / 2
                 + sum_{k=1..M} B_2k / (2k)! (s)(s + 1)...(s + 2k - 2) (N + q)^(-s-2k+1)

with ``N = 40`` and ``M = 12``, whose remainder is below double precision for ``s > 0``. Each order
in ``s`` is a primitive whose derivative in ``s`` is the next order and in ``q`` the Leibniz rule
applied to ``-s zeta(s + 1, q)``, so ``zeta`` is differentiable to any order in both arguments.
"""
from __future__ import annotations

import math

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special import _jets as jets
from tapegrad.scipy.special._impl import _cast, _module_for, float_dtype, special_function
from tapegrad.scipy.special._partials import elementwise, static_count

_N, _M = 40, 12


def _euler_maclaurin(s, q, order):
    """The jet in ``s`` of ``zeta(s, q)`` to ``order``, by the Euler-Maclaurin formula."""
    xp = namespace_of(s, q)
    shape = (order + 1,)
    sv = jets.variable(s, 0, shape)
    total = jets.constant(0.0 * s, shape)
    for n in range(_N):
        total = jets.add(total, jets.exp(jets.scale(sv, -xp.log(n + q)), xp.exp))
    top = _N + q
    tail = jets.exp(jets.scale(sv, -xp.log(top)), xp.exp)  # (N + q)^-s
    total = jets.add(total, jets.scale(jets.div(tail, jets.shift(sv, -1.0)), top))
    total = jets.add(total, jets.scale(tail, 0.5))
    rising = sv  # (s)(s + 1)...(s + 2k - 2)
    bernoulli_numbers = _module_for(np, "bernoulli").bernoulli(2 * _M)
    for k in range(1, _M + 1):
        if k > 1:
            rising = jets.mul(jets.mul(rising, jets.shift(sv, 2.0 * k - 3)), jets.shift(sv, 2.0 * k - 2))
        c = float(bernoulli_numbers[2 * k]) / math.factorial(2 * k)
        total = jets.add(total, jets.scale(jets.mul(rising, tail), c * top ** (1.0 - 2 * k)))
    return total


def _zeta_ds_impl(s, q, *, order):
    xp = namespace_of(s, q)
    dtype = float_dtype(xp, s, q)
    s, q = (v.astype(np.float64) for v in xp.broadcast_arrays(xp.asarray(s), xp.asarray(q)))
    inside = (s > 0) & (s != 1) & (q > 0)
    with np.errstate(all="ignore"):
        out = jets.derivative(_euler_maclaurin(xp.where(inside, s, 2.0), xp.where(inside, q, 1.0), order),
                              (order,))
    return _cast(xp.where(inside, out, np.nan), dtype)


def _leibniz_dq(s, q, order):
    """``d/dq d^k/ds^k zeta(s, q) = -(s d^k zeta(s + 1, q) + k d^(k-1) zeta(s + 1, q))``."""
    lower = zeta(s + 1, q) if order == 1 else zeta_ds(s + 1, q, order - 1)
    return -(s * zeta_ds(s + 1, q, order) + order * lower)


zeta_ds_p = elementwise("zeta_ds", [lambda s, q, ans, order: zeta_ds(s, q, order + 1),
                                    lambda s, q, ans, order: _leibniz_dq(s, q, order)], impl=_zeta_ds_impl)


def zeta_ds(s, q, order: int = 1):
    """``d^order/ds^order zeta(s, q)`` (``order >= 1``), broadcast; NaN outside ``s > 0, s != 1, q > 0``."""
    return bind(zeta_ds_p, s, q, order=order)


hurwitz_zeta_p = elementwise("zeta", [lambda s, q, ans: zeta_ds(s, q), lambda s, q, ans: -s * zeta(s + 1, q)])


def _riemann_impl(s):
    xp = namespace_of(s)
    return _cast(special_function(xp, "zeta")(s), float_dtype(xp, s))


riemann_zeta_p = elementwise("riemann_zeta", [lambda s, ans: zeta_ds(s, 1.0)], impl=_riemann_impl)


def zeta(x: ArrayLike, q: ArrayLike = None) -> Array:
    """The Hurwitz zeta function ``sum_{n >= 0} (n + q)^(-x)``, broadcast, as ``scipy.special.zeta``;
    ``q=None`` gives the Riemann zeta function, for every real ``x`` (SciPy's analytic continuation;
    the Hurwitz form is NaN for ``x < 1``, as SciPy's).

    Derivatives, to any order: ``-x zeta(x + 1, q)`` in ``q``; in ``x`` by the Euler-Maclaurin formula
    on jets (no closed form), for ``x > 0`` (NaN for ``x <= 0``, and at the pole ``x = 1``).
    """
    if q is None:
        return bind(riemann_zeta_p, x)
    return bind(hurwitz_zeta_p, x, q)


def bernoulli(n: int) -> Array:
    """The Bernoulli numbers ``B_0 ... B_n`` (``B_1 = -1/2``), a float64 array of shape ``(n + 1,)``, as
    ``scipy.special.bernoulli``.

    Args:
        n: a non-negative Python integer (the result's shape depends on it, so it cannot be traced).

    Raises:
        ValueError: ``n`` is negative or not an integer.
        ConcretizationError: ``n`` is traced (under ``jit``, make it static).
    """
    return tnp.asarray(special_function(np, "bernoulli")(static_count("bernoulli", "n", n)))
