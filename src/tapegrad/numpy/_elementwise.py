"""Elementwise primitives: NumPy's unary and binary ufuncs, comparisons, ``where`` and ``clip``.

Derivatives follow the usual tables (HIPS autograd's ``numpy_vjps.py``, JAX's ``lax`` rules). The
conventions at kinks and ties (DESIGN.md §1.4): ``abs'(0) = 0``, ``sign' = 0``, ``d/dx x**0 = 0``,
``maximum``/``minimum`` split the gradient evenly between tied operands, ``clip`` passes the gradient to
``x`` on the boundary, ``sqrt'(0) = inf``.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.numpy import _reductions, _shape
from tapegrad.numpy._creation import zeros_like
from tapegrad.numpy._rules import def_nondiff, defvjp, primitive, unary_abstract_eval

LN2 = math.log(2.0)  # Python floats: NumPy 2 treats them as weak, so float32 stays float32
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _ufunc_impl(name):
    """NumPy's ufunc object itself: on CuPy arrays it dispatches to CuPy's ufunc through
    ``__array_ufunc__`` (NEP 13), so one call serves both backends with no lookup per call."""
    return getattr(np, name)


def _unary(name: str, vjp=None):
    """A unary ufunc primitive and its public function; ``vjp=None`` marks it non-differentiable."""
    prim = primitive(name, _ufunc_impl(name), unary_abstract_eval)
    if vjp is None:
        def_nondiff(prim)
    else:
        defvjp(prim, vjp)

    def fn(x):
        return bind(prim, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``, as ``numpy.{name}``; differentiable: {vjp is not None}."
    return prim, fn


def _binary(name: str, vjp_x=None, vjp_y=None, nondiff=False):
    prim = primitive(name, _ufunc_impl(name))
    if nondiff:
        def_nondiff(prim)
    else:
        defvjp(prim, vjp_x, vjp_y)

    def fn(x, y):
        return bind(prim, x, y)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting, as ``numpy.{name}``."
    return prim, fn


# ---- unary ---------------------------------------------------------------------------------------
negative_p, negative = _unary("negative", lambda ct, ans, x: -ct)
abs_p, abs = _unary("absolute", lambda ct, ans, x: ct * sign(x))
absolute = abs
sign_p, sign = _unary("sign")
exp_p, exp = _unary("exp", lambda ct, ans, x: ct * ans)
expm1_p, expm1 = _unary("expm1", lambda ct, ans, x: ct * (ans + 1.0))
log_p, log = _unary("log", lambda ct, ans, x: ct / x)
log1p_p, log1p = _unary("log1p", lambda ct, ans, x: ct / (x + 1.0))
log2_p, log2 = _unary("log2", lambda ct, ans, x: ct / (x * LN2))
log10_p, log10 = _unary("log10", lambda ct, ans, x: ct / (x * LN10))
sqrt_p, sqrt = _unary("sqrt", lambda ct, ans, x: ct / (ans * 2.0))
square_p, square = _unary("square", lambda ct, ans, x: ct * (x * 2.0))
reciprocal_p, reciprocal = _unary("reciprocal", lambda ct, ans, x: -ct * (ans * ans))
sin_p, sin = _unary("sin", lambda ct, ans, x: ct * cos(x))
cos_p, cos = _unary("cos", lambda ct, ans, x: -ct * sin(x))
tan_p, tan = _unary("tan", lambda ct, ans, x: ct * (ans * ans + 1.0))
tanh_p, tanh = _unary("tanh", lambda ct, ans, x: ct * (1.0 - ans * ans))
sinh_p, sinh = _unary("sinh", lambda ct, ans, x: ct * cosh(x))
cosh_p, cosh = _unary("cosh", lambda ct, ans, x: ct * sinh(x))
arcsin_p, arcsin = _unary("arcsin", lambda ct, ans, x: ct / sqrt(1.0 - x * x))
arccos_p, arccos = _unary("arccos", lambda ct, ans, x: -ct / sqrt(1.0 - x * x))
arctan_p, arctan = _unary("arctan", lambda ct, ans, x: ct / (x * x + 1.0))
floor_p, floor = _unary("floor")
ceil_p, ceil = _unary("ceil")
isfinite_p, isfinite = _unary("isfinite")
isnan_p, isnan = _unary("isnan")
isinf_p, isinf = _unary("isinf")
logical_not_p, logical_not = _unary("logical_not")

round_p = primitive("round", lambda x, *, decimals: namespace_of(x).round(x, decimals))
def_nondiff(round_p)


def round(x, decimals: int = 0):
    """Round to ``decimals`` places (half to even), as ``numpy.round``; its derivative is zero."""
    return bind(round_p, x, decimals=int(decimals))


around = round


# ---- binary --------------------------------------------------------------------------------------
add_p, add = _binary("add", lambda ct, ans, x, y: _shape.unbroadcast(ct, x),
                     lambda ct, ans, x, y: _shape.unbroadcast(ct, y))
subtract_p, subtract = _binary("subtract", lambda ct, ans, x, y: _shape.unbroadcast(ct, x),
                               lambda ct, ans, x, y: _shape.unbroadcast(-ct, y))
multiply_p, multiply = _binary("multiply", lambda ct, ans, x, y: _shape.unbroadcast(ct * y, x),
                               lambda ct, ans, x, y: _shape.unbroadcast(ct * x, y))
divide_p, divide = _binary("divide", lambda ct, ans, x, y: _shape.unbroadcast(ct / y, x),
                           lambda ct, ans, x, y: _shape.unbroadcast(-ct * ans / y, y))
true_divide = divide


def _balanced_eq(x, ans, y, ct):
    """``ct`` where ``x`` won, half of it where ``x`` and ``y`` tie, 0 elsewhere (as JAX and autograd).

    Multiplies by masks rather than selecting with ``where``: on an unpatterned mask (``maximum(h, 0)``
    as a ReLU) NumPy's ``where`` mispredicts branches and is ~20x slower than a multiply.
    """
    won = astype(equal(x, ans), ct.dtype)
    tied = astype(equal(y, ans), ct.dtype)
    return ct * (won * (1.0 - 0.5 * tied))


maximum_p, maximum = _binary("maximum", lambda ct, ans, x, y: _shape.unbroadcast(_balanced_eq(x, ans, y, ct), x),
                             lambda ct, ans, x, y: _shape.unbroadcast(_balanced_eq(y, ans, x, ct), y))
minimum_p, minimum = _binary("minimum", lambda ct, ans, x, y: _shape.unbroadcast(_balanced_eq(x, ans, y, ct), x),
                             lambda ct, ans, x, y: _shape.unbroadcast(_balanced_eq(y, ans, x, ct), y))
logaddexp_p, logaddexp = _binary("logaddexp", lambda ct, ans, x, y: _shape.unbroadcast(ct * exp(x - ans), x),
                                 lambda ct, ans, x, y: _shape.unbroadcast(ct * exp(y - ans), y))
arctan2_p, arctan2 = _binary("arctan2", lambda ct, ans, y, x: _shape.unbroadcast(ct * x / (x * x + y * y), y),
                             lambda ct, ans, y, x: _shape.unbroadcast(-ct * y / (x * x + y * y), x))


def _power_vjp_x(ct, ans, x, y):
    """``y * x**(y-1)``, and exactly 0 where ``y == 0`` (``d/dx x**0 = 0``, also at ``x = 0``)."""
    if isinstance(y, (int, float)):
        return _shape.unbroadcast(ct * (y * x ** (y - 1)), x) if y != 0 else zeros_like(x)
    # guard only the point x = y = 0 (where x**(y-1) is inf and y is 0): elsewhere the product stays
    # differentiable in y, so the mixed partial d/dy (y x**(y-1)) = 1/x at y = 0 comes out right
    base = where(logical_and(equal(x, 0), equal(y, 0)), 1.0, x)
    return _shape.unbroadcast(ct * (y * base ** (y - 1.0)), x)


def _power_vjp_y(ct, ans, x, y):
    """``log(x) * x**y``, taken as 0 where ``x == 0`` (the limit from above; autograd's choice)."""
    x_is_0 = equal(x, 0)
    safe_log_x = log(where(x_is_0, 1.0, x))
    return _shape.unbroadcast(ct * ans * safe_log_x, y)


power_p, power = _binary("power", _power_vjp_x, _power_vjp_y)


def float_power(x1, x2):
    """``x1 ** x2`` computed in float64 (at least), as ``numpy.float_power``."""
    return power(astype(x1, _shape.result_type(x1, np.float64)), x2)

equal_p, equal = _binary("equal", nondiff=True)
not_equal_p, not_equal = _binary("not_equal", nondiff=True)
less_p, less = _binary("less", nondiff=True)
less_equal_p, less_equal = _binary("less_equal", nondiff=True)
greater_p, greater = _binary("greater", nondiff=True)
greater_equal_p, greater_equal = _binary("greater_equal", nondiff=True)
logical_and_p, logical_and = _binary("logical_and", nondiff=True)
logical_or_p, logical_or = _binary("logical_or", nondiff=True)
logical_xor_p, logical_xor = _binary("logical_xor", nondiff=True)
bitwise_and_p, bitwise_and = _binary("bitwise_and", nondiff=True)
bitwise_or_p, bitwise_or = _binary("bitwise_or", nondiff=True)
bitwise_xor_p, bitwise_xor = _binary("bitwise_xor", nondiff=True)
invert_p, invert = _unary("invert")


# ---- where, clip, stop_gradient, astype ----------------------------------------------------------
where_p = primitive("where", lambda c, x, y: namespace_of(c, x, y).where(c, x, y))
defvjp(where_p, None,
       lambda ct, ans, c, x, y: _shape.unbroadcast(where(c, ct, 0.0), x),
       lambda ct, ans, c, x, y: _shape.unbroadcast(where(c, 0.0, ct), y))


def where(condition, x, y):
    """Elements of ``x`` where ``condition`` holds, else of ``y`` (broadcast together).

    Only the three-argument form; for indices of true elements use ``numpy.nonzero`` on a concrete
    array. Gradients flow to ``x`` and ``y``, never to ``condition``.
    """
    return bind(where_p, condition, x, y)


clip_p = primitive("clip", lambda x, lo, hi: namespace_of(x, lo, hi).clip(x, lo, hi))
defvjp(clip_p,
       lambda ct, ans, x, lo, hi: _shape.unbroadcast(where(logical_and(x >= lo, x <= hi), ct, 0.0), x),
       lambda ct, ans, x, lo, hi: _shape.unbroadcast(where(x < lo, ct, 0.0), lo),
       lambda ct, ans, x, lo, hi: _shape.unbroadcast(where(x > hi, ct, 0.0), hi))


def clip(a, a_min=None, a_max=None):
    """Limit ``a`` to ``[a_min, a_max]`` (either may be None), as ``numpy.clip``.

    The gradient reaches ``a`` where ``a_min <= a <= a_max`` (boundary included: the convention of
    JAX and PyTorch) and reaches a bound where ``a`` lies strictly beyond it.
    """
    if a_min is None and a_max is None:
        raise ValueError("clip: give a_min, a_max or both; both are None")
    return bind(clip_p, a, -math.inf if a_min is None else a_min, math.inf if a_max is None else a_max)


stop_gradient_p = primitive("stop_gradient", lambda x: x)
def_nondiff(stop_gradient_p)


def stop_gradient(x):
    """``x`` itself, seen by every transform as a constant: no gradient flows through it."""
    return bind(stop_gradient_p, x)

astype_p = primitive("astype", lambda x, *, dtype: x.astype(dtype, copy=False))
defvjp(astype_p, lambda ct, ans, x, *, dtype: astype(ct, x.dtype))


def astype(x, dtype):
    """``x`` converted to ``dtype``. Converting to an integer or boolean dtype stops the gradient."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return bind(astype_p, stop_gradient(x), dtype=dtype)
    return bind(astype_p, x, dtype=dtype)
