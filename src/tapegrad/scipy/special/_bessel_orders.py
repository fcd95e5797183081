"""Bessel functions of real order: ``jv jn yv yn iv ive kv kve bessel_jn`` (orders 0 and 1,
``j0 j1 y0 y1``, are in ``_bessel_01``: their derivatives need no other order).

Derivatives in the argument are the recurrences of DLMF 10.6.1 and 10.29.1, written with the same
function at neighbouring orders, so they differentiate again to any order:

    C_v'(z) = (C_(v-1)(z) - C_(v+1)(z)) / 2   for C = J, Y
    I_v'(z) = (I_(v-1)(z) + I_(v+1)(z)) / 2   K_v'(z) = -(K_(v-1)(z) + K_(v+1)(z)) / 2

The scaled ``ive = e^(-|z|) iv`` and ``kve = e^z kv`` add ``-sign(z) ive`` and ``+kve``. The
derivative in a real order ``v`` has no closed form in these functions: differentiating through ``v``
raises ``NotImplementedError``. Integer orders (``n`` of ``jn``, ``yn``, ``bessel_jn``) carry no
derivative.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._partials import elementwise, no_derivative, static_count


def _real_order(name, d_z):
    return elementwise(name, [no_derivative(name, "v"), d_z])


jv_p = _real_order("jv", lambda v, z, ans: 0.5 * (jv(v - 1, z) - jv(v + 1, z)))
yv_p = _real_order("yv", lambda v, z, ans: 0.5 * (yv(v - 1, z) - yv(v + 1, z)))
iv_p = _real_order("iv", lambda v, z, ans: 0.5 * (iv(v - 1, z) + iv(v + 1, z)))
kv_p = _real_order("kv", lambda v, z, ans: -0.5 * (kv(v - 1, z) + kv(v + 1, z)))
ive_p = _real_order("ive", lambda v, z, ans: 0.5 * (ive(v - 1, z) + ive(v + 1, z)) - tnp.sign(z) * ans)
kve_p = _real_order("kve", lambda v, z, ans: ans - 0.5 * (kve(v - 1, z) + kve(v + 1, z)))
# an integer order has no derivative; a float array of orders differentiated (SciPy computes jv/yv of
# it) is refused, never a silent zero
jn_p = elementwise("jn", [no_derivative("jn", "n"), lambda n, z, ans: 0.5 * (jn(n - 1, z) - jn(n + 1, z))],
                   dtype_from=(1,))
yn_p = elementwise("yn", [no_derivative("yn", "n"), lambda n, z, ans: 0.5 * (yn(n - 1, z) - yn(n + 1, z))],
                   dtype_from=(1,))


def jv(v: ArrayLike, z: ArrayLike) -> Array:
    """The Bessel function of the first kind of real order ``v``, broadcast, as ``scipy.special.jv``
    (real ``z``; NaN where the value is complex, ``z < 0`` with non-integer ``v``).

    Derivative in ``z``: ``(jv(v - 1, z) - jv(v + 1, z)) / 2``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(jv_p, v, z)


def jn(n: int, z: ArrayLike) -> Array:
    """The Bessel function of the first kind of integer order ``n``, as ``scipy.special.jn``; ``n`` is
    not differentiable and does not change the result's dtype (``z``'s). Derivative in ``z``:
    ``(jn(n - 1, z) - jn(n + 1, z)) / 2``."""
    return bind(jn_p, n, z)


def yv(v: ArrayLike, z: ArrayLike) -> Array:
    """The Bessel function of the second kind of real order ``v``, as ``scipy.special.yv`` (``z > 0``).

    Derivative in ``z``: ``(yv(v - 1, z) - yv(v + 1, z)) / 2``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(yv_p, v, z)


def yn(n: int, z: ArrayLike) -> Array:
    """The Bessel function of the second kind of integer order ``n``, as ``scipy.special.yn``; ``n`` is
    not differentiable. Derivative in ``z``: ``(yn(n - 1, z) - yn(n + 1, z)) / 2``."""
    return bind(yn_p, n, z)


def iv(v: ArrayLike, z: ArrayLike) -> Array:
    """The modified Bessel function of the first kind of real order ``v``, as ``scipy.special.iv``.

    Derivative in ``z``: ``(iv(v - 1, z) + iv(v + 1, z)) / 2``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(iv_p, v, z)


def ive(v: ArrayLike, z: ArrayLike) -> Array:
    """The exponentially scaled ``exp(-|z|) iv(v, z)``, finite where ``iv`` overflows, as
    ``scipy.special.ive``.

    Derivative in ``z``: ``(ive(v - 1, z) + ive(v + 1, z)) / 2 - sign(z) ive(v, z)``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(ive_p, v, z)


def kv(v: ArrayLike, z: ArrayLike) -> Array:
    """The modified Bessel function of the second kind of real order ``v``, as ``scipy.special.kv``
    (``z > 0``).

    Derivative in ``z``: ``-(kv(v - 1, z) + kv(v + 1, z)) / 2``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(kv_p, v, z)


def kve(v: ArrayLike, z: ArrayLike) -> Array:
    """The exponentially scaled ``exp(z) kv(v, z)``, finite where ``kv`` underflows, as
    ``scipy.special.kve``.

    Derivative in ``z``: ``kve(v, z) - (kve(v - 1, z) + kve(v + 1, z)) / 2``.

    Raises:
        NotImplementedError: when differentiating with respect to ``v``.
    """
    return bind(kve_p, v, z)


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """The Bessel functions of the first kind of orders ``0, 1, ..., v`` at ``z``, stacked: shape
    ``(v + 1,) + z.shape``, as ``jax.scipy.special.bessel_jn``.

    Args:
        z: the argument (real).
        v: the highest order, a non-negative Python integer (it sets the result's length).
        n_iter: accepted for JAX's signature (its backward recurrence's length); the values here come
            from SciPy's ``jv``, accurate to rounding, so it has no effect.

    Differentiable in ``z`` (each row as :func:`jn`).

    Raises:
        ValueError: ``v`` is negative or not an integer.
        ConcretizationError: ``v`` is traced (under ``jit``, make it static).
    """
    return tnp.stack([jn(k, z) for k in range(static_count("bessel_jn", "v", v) + 1)])
