"""More of NumPy's elementwise functions, each with a vjp and a jvp (HIPS autograd's remaining ufuncs).

Built with the helpers of ``_elementwise``: one rule ``g * f'(x)`` per operand serves both modes. The
conventions at kinks, documented on each function and tested:

- ``fabs'(0) = 0`` (as ``abs``); ``copysign(x, y)``: ``d/dx = sign(x) * sign(y)`` (0 at ``x = 0``),
  ``d/dy = 0``;
- ``mod``/``remainder``: ``d/dx = 1``, ``d/dy = -floor(x / y)``; ``fmod``: ``d/dy = -trunc(x / y)``
  (autograd's and JAX's rules; the jumps where the quotient crosses an integer have no derivative);
- ``fmax``/``fmin`` split ties evenly (as ``maximum``) and give the whole gradient to the non-nan
  operand;
- ``hypot``'s gradient at ``(0, 0)`` is 0 (a subgradient, the convention of ``norm`` at 0);
- ``cbrt'(0) = inf`` (as ``sqrt'(0)``); ``sinc`` has its exact derivatives at 0 (``sinc'(0) = 0``,
  ``sinc''(0) = -pi**2 / 3``); ``nan_to_num`` passes the gradient where ``x`` is finite and gives 0
  where it replaced a value.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import ArrayLike
from tapegrad.extend import def_dependency, defbatch_elementwise, defjvp, defvjp, primitive, unary_abstract_eval
from tapegrad.numpy import _complex
from tapegrad.numpy._creation import as_operand, asarray
from tapegrad.numpy._elementwise import (
    LN2,
    TIE_SPLIT_RULES,
    _binary,
    _unary,
    abs,
    cos,
    cotangent,
    equal,
    floor,
    is_complex,
    isnan,
    less,
    sign,
    sqrt,
    stop_gradient,
    where,
)

DEG = math.pi / 180.0  # Python floats: weak scalars, so float32 stays float32
RAD = 180.0 / math.pi

# ---- unary ---------------------------------------------------------------------------------------
exp2_p, exp2 = _unary("exp2", lambda g, ans, x: g * (ans * LN2))
fabs_p, fabs = _unary("fabs", lambda g, ans, x: g * sign(x))
cbrt_p, cbrt = _unary("cbrt", lambda g, ans, x: g / (ans * ans * 3.0))
arcsinh_p, arcsinh = _unary("arcsinh", lambda g, ans, x: g / sqrt(x * x + 1.0))
# sqrt(x - 1) sqrt(x + 1), not sqrt(x*x - 1): the same for real x > 1, and right on the complex plane
arccosh_p, arccosh = _unary("arccosh", lambda g, ans, x: g / (sqrt(x - 1.0) * sqrt(x + 1.0)))
arctanh_p, arctanh = _unary("arctanh", lambda g, ans, x: g / (1.0 - x * x))
deg2rad_p, deg2rad = _unary("deg2rad", lambda g, ans, x: g * DEG)
rad2deg_p, rad2deg = _unary("rad2deg", lambda g, ans, x: g * RAD)
radians, degrees = deg2rad, rad2deg
trunc_p, trunc = _unary("trunc")
signbit_p, signbit = _unary("signbit")

# sinc'(x) / pi = S'(pi x) with S(u) = sin(u) / u = sum_n (-1)^n u^(2n) / (2n+1)!; its coefficients
# (-1)^n 2n / (2n+1)! for n = 1..7, highest first (Horner in u^2), truncated below 1e-17 for |u| < 0.5
_SINC_SERIES = [(-1) ** n * 2 * n / math.factorial(2 * n + 1) for n in range(7, 0, -1)]


def _sinc_derivative(x):
    """``sinc'(x) = (cos(pi x) - sinc(x)) / x``: its Maclaurin series where ``|pi x| < 0.5``, where the
    difference cancels (and is 0/0 at 0), so every order of derivative is finite and right at 0."""
    near_zero = less(abs(stop_gradient(x)), 0.5 / math.pi)
    safe_x = where(near_zero, 1.0, x)
    u = x * math.pi
    u2 = u * u
    series = _SINC_SERIES[0]
    for c in _SINC_SERIES[1:]:
        series = series * u2 + c
    return where(near_zero, series * u * math.pi, (cos(safe_x * math.pi) - sinc(safe_x)) / safe_x)


sinc_p = primitive("sinc", lambda x: namespace_of(x).sinc(x), unary_abstract_eval)
defvjp(sinc_p, lambda g, ans, x: g * _sinc_derivative(x))
defjvp(sinc_p, lambda g, ans, x: g * _sinc_derivative(x))
defbatch_elementwise(sinc_p)
def_dependency(sinc_p, "elementwise")


def sinc(x: ArrayLike) -> Array:
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0, as ``numpy.sinc``; same shape, float dtype.

    Differentiable to any order, also at 0 (``sinc'(0) = 0``, ``sinc''(0) = -pi**2 / 3``): near 0 the
    derivative is evaluated from its Maclaurin series (as JAX does at 0), which also avoids the
    cancellation in ``(cos(pi x) - sinc(x)) / x``.
    """
    return bind(sinc_p, x)


# ---- binary --------------------------------------------------------------------------------------
fmax_p, fmax = _binary("fmax", *TIE_SPLIT_RULES)
fmin_p, fmin = _binary("fmin", *TIE_SPLIT_RULES)
logaddexp2_p, logaddexp2 = _binary("logaddexp2", lambda g, ans, x, y: g * exp2(x - ans),
                                   lambda g, ans, x, y: g * exp2(y - ans))
remainder_p, remainder = _binary("remainder", cotangent, lambda g, ans, x, y: -g * floor(x / y))
mod = remainder
fmod_p, fmod = _binary("fmod", cotangent, lambda g, ans, x, y: -g * trunc(x / y))


def _hypot_partial(g, ans, x):
    """``g * x / hypot(x, y)``, 0 where both are 0."""
    at_zero = equal(ans, 0)
    return g * where(at_zero, 0.0, x / where(at_zero, 1.0, ans))


hypot_p, hypot = _binary("hypot", lambda g, ans, x, y: _hypot_partial(g, ans, x),
                         lambda g, ans, x, y: _hypot_partial(g, ans, y))
copysign_p, copysign = _binary("copysign", lambda g, ans, x, y: where(signbit(y), -g, g) * sign(x))


# ---- nan_to_num ----------------------------------------------------------------------------------
def nan_to_num(x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Array:
    """``x`` with nan, +inf and -inf replaced, as ``numpy.nan_to_num`` (``copy`` is accepted and
    ignored: tapegrad never writes into arrays).

    ``posinf``/``neginf`` default to the largest/smallest finite value of ``x``'s dtype. Complex ``x``
    has its real and imaginary parts treated separately. The gradient passes where ``x`` is finite and
    is 0 at the replaced elements.
    """
    x = as_operand(x)
    if not hasattr(x, "dtype"):  # a Python scalar
        x = asarray(x)
    if is_complex(x):
        parts = [nan_to_num(part, copy, nan, posinf, neginf) for part in (_complex.real(x), _complex.imag(x))]
        return parts[0] + parts[1] * 1j
    if np.dtype(x.dtype).kind != "f":
        return x
    finfo = np.finfo(x.dtype)
    posinf = float(finfo.max) if posinf is None else posinf
    neginf = float(finfo.min) if neginf is None else neginf
    out = where(equal(x, math.inf), posinf, x)
    out = where(equal(x, -math.inf), neginf, out)
    return where(isnan(x), nan, out)
