"""Floating-point and integer ufuncs: ``ldexp``, ``frexp``, ``modf``, ``divmod``, ``heaviside``,
``nextafter``, ``spacing``, ``rint``, ``fix``, ``positive``, ``gcd``, ``lcm``.

Derivatives, where one exists (JAX's conventions):

- ``ldexp(x, e) = x * 2**e``: ``d/dx = 2**e``; the exponent is an integer;
- ``frexp``'s mantissa ``x * 2**-e`` has ``d/dx = 2**-e`` (the exponent is held fixed: it is
  piecewise constant), the exponent has none;
- ``modf``'s fractional part ``x - trunc(x)`` has derivative 1, its integral part 0;
- ``divmod``: the quotient is ``floor_divide``'s (piecewise constant, derivative 0), the remainder
  ``mod``'s;
- ``heaviside(x1, x2)``: 0 in ``x1`` (a step), and ``x2``'s value is passed where ``x1 == 0``, so the
  gradient reaches ``x2`` there;
- ``positive`` is the identity.

``nextafter``, ``spacing``, ``rint``, ``fix``, ``gcd`` and ``lcm`` are integer-valued or piecewise
constant: non-differentiable (derivative 0 in both modes).
"""
from __future__ import annotations

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import (
    def_dependency,
    def_nondiff,
    defbatch_elementwise,
    defjvp,
    defvjp,
    primitive,
    unary_abstract_eval,
)
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._elementwise import _binary, _unary, equal, summed_to_operand
from tapegrad.numpy._operators import floor_divide
from tapegrad.numpy._ufuncs import remainder, trunc


# ---- scaling by powers of two --------------------------------------------------------------------
def _ldexp_dx(g, ans, x, e):
    return ldexp(g, e)


ldexp_p = primitive("ldexp", np.ldexp)
defvjp(ldexp_p, summed_to_operand(_ldexp_dx, 0), None)
defjvp(ldexp_p, _ldexp_dx, None)
defbatch_elementwise(ldexp_p)
def_dependency(ldexp_p, "elementwise")


def ldexp(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``x1 * 2**x2`` elementwise with broadcasting (``x2`` integers), as ``numpy.ldexp``: ``x1``'s
    float dtype. Differentiable in ``x1`` (``d/dx1 = 2**x2``); the exponent is an integer.

    Raises:
        TypeError: a float exponent (NumPy's rule).
    """
    return bind(ldexp_p, as_operand(x1), as_operand(x2))


frexp_exponent_p = primitive("frexp_exponent", lambda x: np.frexp(x)[1])
def_nondiff(frexp_exponent_p)
defbatch_elementwise(frexp_exponent_p)
def_dependency(frexp_exponent_p, "elementwise")


def frexp(x: ArrayLike) -> tuple[Array, ...]:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``
    (0 for ``x = 0``; inf and nan are kept with exponent 0), as ``numpy.frexp``.

    The mantissa has ``x``'s float dtype and derivative ``2**-exponent``; the exponent is int32 and
    non-differentiable.
    """
    x = as_operand(x)
    exponent = frexp_exponent_p.bind(x)
    return ldexp(x, -exponent), exponent


# ---- integral and fractional parts ---------------------------------------------------------------
modf_fraction_p = primitive("modf_fraction", lambda x: np.modf(x)[0], unary_abstract_eval)
defvjp(modf_fraction_p, lambda ct, ans, x: ct)
defjvp(modf_fraction_p, lambda t, ans, x: t)
defbatch_elementwise(modf_fraction_p)
def_dependency(modf_fraction_p, "elementwise")
modf_integral_p = primitive("modf_integral", lambda x: np.modf(x)[1], unary_abstract_eval)
def_nondiff(modf_integral_p)
defbatch_elementwise(modf_integral_p)
def_dependency(modf_integral_p, "elementwise")


def modf(x: ArrayLike) -> tuple[Array, ...]:
    """``(fractional, integral)`` parts of ``x`` elementwise, both with ``x``'s sign and float dtype,
    as ``numpy.modf``. The fractional part has derivative 1, the integral part 0."""
    x = as_operand(x)
    return modf_fraction_p.bind(x), modf_integral_p.bind(x)


def divmod(x1: ArrayLike, x2: ArrayLike) -> tuple[Array, ...]:
    """``(floor_divide(x1, x2), mod(x1, x2))``, as ``numpy.divmod``. The quotient is piecewise
    constant (derivative 0); the remainder has ``mod``'s derivatives (1 in ``x1``,
    ``-floor(x1 / x2)`` in ``x2``)."""
    x1, x2 = as_operand(x1), as_operand(x2)
    return floor_divide(x1, x2), remainder(x1, x2)


# ---- steps and neighbours ------------------------------------------------------------------------
heaviside_p, heaviside = _binary("heaviside", None, lambda g, ans, x1, x2: g * equal(x1, 0))
heaviside.__doc__ = """The step function: 0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0``, as
``numpy.heaviside``. Derivative 0 in ``x1``; in ``x2``, 1 where ``x1 == 0`` and 0 elsewhere."""
nextafter_p, nextafter = _binary("nextafter", lambda g, ans, x1, x2: g)
nextafter.__doc__ = """The next float after ``x1`` towards ``x2``, as ``numpy.nextafter``. It is ``x1`` moved by
one unit in the last place, so its derivative is 1 in ``x1`` and 0 in ``x2`` (JAX defines none; 0 in
``x1`` would be a wrong derivative, not a convention)."""
spacing_p, spacing = _unary("spacing")
spacing.__doc__ = """The distance from ``x`` to the next float away from 0, as ``numpy.spacing``;
non-differentiable."""
rint_p, rint = _unary("rint")
rint.__doc__ = """``x`` rounded to the nearest integer (ties to even), as ``numpy.rint``; non-differentiable."""
positive_p, positive = _unary("positive", lambda g, ans, x: g, float_valued=False)
positive.__doc__ = """``+x``, as ``numpy.positive``: a copy of ``x`` with its dtype; derivative 1."""
gcd_p, gcd = _binary("gcd", nondiff=True)
gcd.__doc__ = """The greatest common divisor of integers ``|x1|`` and ``|x2|``, as ``numpy.gcd``; non-differentiable."""
lcm_p, lcm = _binary("lcm", nondiff=True)
lcm.__doc__ = """The least common multiple of integers ``|x1|`` and ``|x2|``, as ``numpy.lcm``; non-differentiable."""


def fix(x: ArrayLike) -> Array:
    """``x`` rounded towards zero, as ``numpy.fix`` (``trunc``; integers are returned as they are).
    Non-differentiable (derivative 0)."""
    x = as_operand(x)
    return trunc(x) if np.dtype(getattr(x, "dtype", np.result_type(x))).kind in "fc" else x
