"""``i0``, the modified Bessel function of the first kind and order 0, differentiable to any order.

One primitive, ``I_n`` for an integer order ``n`` (a static parameter), closes the derivatives:
``I_n' = (I_{n-1} + I_{n+1}) / 2`` with ``I_{-1} = I_1`` (Abramowitz & Stegun 9.6.26), so ``i0' = I_1``
and every further derivative is again a sum of ``I_k``. Order 0 is NumPy's own ``i0`` (Cephes'
Chebyshev fits); higher orders are summed from their power series, whose terms are all positive,
so the sum carries no cancellation.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import def_dependency, defbatch_elementwise, defjvp, defvjp, primitive, unary_abstract_eval
from tapegrad.numpy._creation import as_operand, with_dtype

# Terms of the series I_n(x) = sum_k (x/2)^(2k+n) / (k! (k+n)!) peak near k = |x|/2 and are below
# the dtype's epsilon about 6 sqrt(|x|/2) terms later; so many terms cover every |x| whose I_n is
# finite (|x| < 714 in float64, < 90 in float32). Fixed counts keep the kernel free of
# device-to-host reads.
_TERMS = {np.dtype(np.float64): 500, np.dtype(np.float32): 120, np.dtype(np.float16): 40}


def _series(x, n: int):
    """``I_n(x)`` summed from its power series, in ``x``'s precision."""
    half = x / 2
    quarter_x2 = half * half
    term = half ** n / math.factorial(n)
    total = term
    for k in range(1, _TERMS[np.dtype(x.dtype)]):
        term = term * quarter_x2 / (k * (k + n))
        total = total + term
    return total


def _bessel_i_impl(x, *, n: int):
    xp = namespace_of(x)
    if np.dtype(x.dtype).kind not in "f":
        x = x.astype(np.float64)
    return xp.i0(x) if n == 0 else _series(x, n)


def _bessel_i_derivative(g, ans, x, *, n):
    """``g * I_n'(x)``, ``I_n' = (I_{n-1} + I_{n+1}) / 2`` (``I_{-1} = I_1``)."""
    if n == 0:
        return g * bessel_i(x, 1)
    return g * ((bessel_i(x, n - 1) + bessel_i(x, n + 1)) * 0.5)


bessel_i_p = primitive("modified_bessel_i", _bessel_i_impl, lambda aval, *, n: unary_abstract_eval(aval))
defvjp(bessel_i_p, _bessel_i_derivative)
defjvp(bessel_i_p, _bessel_i_derivative)
defbatch_elementwise(bessel_i_p)
def_dependency(bessel_i_p, "elementwise")


def bessel_i(x, n: int):
    """``I_n(x)``, the modified Bessel function of the first kind of integer order ``n >= 0``."""
    x = as_operand(x)
    return bind(bessel_i_p, with_dtype(x), n=n)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind and order 0, elementwise, as ``numpy.i0``.

    Real input only (NumPy refuses complex too); integers and booleans give float64, float32 stays
    float32. Differentiable to any order in both modes: ``i0' = I_1`` (JAX and SciPy's ``i1``),
    ``i0'' = (I_0 + I_2) / 2``, where ``I_1, I_2, ...`` are summed from their power series.

    Raises:
        TypeError: complex ``x``.
    """
    x = as_operand(x)
    x = with_dtype(x)
    if np.dtype(x.dtype).kind == "c":
        raise TypeError("i0: complex input is not supported (as in NumPy); pass the real or the absolute value")
    return bessel_i(x, 0)
