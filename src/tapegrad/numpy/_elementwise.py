"""Elementwise primitives: NumPy's unary and binary ufuncs, comparisons, ``where`` and ``clip``.

Derivatives follow the usual tables (HIPS autograd's ``numpy_vjps.py`` / ``numpy_jvps.py``, JAX's
``lax`` rules). An elementwise function's Jacobian is diagonal, so one rule ``g * f'(x)`` serves as
both its vjp (``g`` the output cotangent) and its jvp (``g`` the operand's tangent); a binary vjp
then sums the broadcast axes away. For complex operands this is JAX's convention for holomorphic
functions (no conjugation in either mode: ``vjp(ct) = ct * f'(z)``, ``jvp(t) = f'(z) * t``).

The conventions at kinks and ties (JAX's and autograd's, docs/numpy.md): ``abs'(0) = 0``, ``sign' = 0``,
``d/dx x**0 = 0``, ``maximum``/``minimum`` split the gradient evenly between tied operands, ``clip``
passes the gradient to ``x`` on the boundary, ``sqrt'(0) = inf``.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tapegrad import _lowerings
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import Primitive, ShapedArray, bind
from tapegrad._dependency import Structural, elementwise
from tapegrad._structural import astype as astype  # re-exported: tnp's names for them
from tapegrad._structural import astype_p as astype_p
from tapegrad._structural import shape_of
from tapegrad._structural import stop_gradient as stop_gradient
from tapegrad._structural import stop_gradient_p as stop_gradient_p
from tapegrad._typing import ArrayLike
from tapegrad.extend import (
    ARITHMETIC_NS,
    broadcast_shapes,
    def_dependency,
    def_fusion,
    def_lowering,
    def_nondiff,
    def_shape_rule,
    defbatch_elementwise,
    defjvp,
    defjvp_joint,
    defvjp,
    primitive,
    result_dtype,
    unary_abstract_eval,
)
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy._complex import imag, is_complex, real
from tapegrad.numpy._creation import as_operand, zeros_like
from tapegrad.numpy._linalg import LETTERS, einsum_p

LN2 = math.log(2.0)  # Python floats: NumPy 2 treats them as weak, so float32 stays float32
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _ufunc_impl(name):
    """NumPy's ufunc object itself: on CuPy arrays it dispatches to CuPy's ufunc through
    ``__array_ufunc__`` (NEP 13), so one call serves both backends with no lookup per call."""
    return getattr(np, name)


def _unary(name: str, rule: Callable | None = None, jvp: Callable | None = None, float_valued: bool = True,
           fusion_ns: tuple[float, float] | None = None) -> tuple[Primitive, Callable[[ArrayLike], Array]]:
    """A unary ufunc primitive and its public function.

    ``rule(g, ans, x)`` is ``g * f'(x)``: the vjp, and also the jvp unless ``jvp`` is given (it is
    for functions that are not holomorphic on complex inputs, like ``abs``). ``rule=None`` marks the
    function non-differentiable (derivative zero everywhere). ``float_valued=False``: the output dtype
    is not "the input's float dtype" (``negative`` keeps integers, ``abs`` of complex is real), so the
    abstract eval asks NumPy itself. ``fusion_ns``, where given, lets jit fuse it by its NumPy name, at
    that extra time per element (float32, float64 ns: ``def_fusion``).
    """
    abstract_eval = unary_abstract_eval if rule is not None and float_valued else None
    prim = primitive(name, _ufunc_impl(name), abstract_eval)
    defbatch_elementwise(prim)
    def_dependency(prim, "elementwise")
    if fusion_ns is not None:
        def_fusion(prim, name, fusion_ns)
    if name in _lowerings.NUMBA_UFUNCS:
        def_lowering(prim, _lowerings.elementwise(name))
    if rule is None:
        def_nondiff(prim)
    else:
        defvjp(prim, rule)
        defjvp(prim, jvp or rule)

    def fn(x: ArrayLike) -> Array:
        return bind(prim, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``, as ``numpy.{name}``; differentiable: {rule is not None}."
    return prim, fn


def _zero(*args, **params):
    return None


def cotangent(g, ans, *primals, **params):
    """The partial-derivative rule ``g * 1`` (``add``, ``subtract``'s first operand): ``g`` itself."""
    return g


def summed_to_operand(rule, argnum: int):
    """The vjp rule made of a partial-derivative rule ``rule(g, ans, *primals) = g * df/dx_argnum``:
    broadcasting is undone (and a real operand of a complex result keeps the real part).

    The common case, an operand of the result's shape and dtype, returns the product as it is, with no
    further call, and :func:`cotangent` as ``rule`` is not called at all: the vjp of ``add`` is one
    Python call, where a wrapper, the rule and ``unbroadcast`` were three.
    """
    if rule is None:
        return _zero

    def vjp(ct, ans, *primals, **params):
        if rule is cotangent:
            g = ct
        else:
            g = rule(ct, ans, *primals, **params)
            if g is None:
                return None
        x = primals[argnum]
        return g if g.shape == x.shape and g.dtype == x.dtype else _shape.unbroadcast(g, x)
    return vjp


def _binary(name: str, dx: Callable | None = None, dy: Callable | None = None, nondiff: bool = False,
            fusion_ns: tuple[float, float] | None = None) -> tuple[Primitive, Callable[[ArrayLike, ArrayLike], Array]]:
    """A binary ufunc primitive (NumPy broadcasting) and its public function.

    ``dx(g, ans, x, y)`` is ``g * df/dx`` elementwise (``dy`` likewise); None means ``f`` does not
    depend on that operand. The jvp uses them as they are; the vjp sums them to the operand's shape.
    ``fusion_ns``: as for :func:`_unary`.
    """
    prim = primitive(name, _ufunc_impl(name))
    defbatch_elementwise(prim)
    def_dependency(prim, "elementwise")
    if fusion_ns is not None:
        def_fusion(prim, name, fusion_ns)
    if name in _lowerings.NUMBA_UFUNCS:
        def_lowering(prim, _lowerings.elementwise(name))
    if nondiff:
        def_nondiff(prim)
    else:
        defvjp(prim, summed_to_operand(dx, 0), summed_to_operand(dy, 1))
        defjvp(prim, dx, dy)

    def fn(x: ArrayLike, y: ArrayLike) -> Array:
        return bind(prim, x, y)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting, as ``numpy.{name}``."
    return prim, fn


# ---- unary ---------------------------------------------------------------------------------------
def _abs_vjp(ct, ans, x):
    """``ct * conj(sign(x))``: for real ``x`` the sign (``abs'(0) = 0``); for complex ``z`` it is the
    transpose of the R-linear ``t -> Re(conj(z) t) / |z|`` (JAX's convention)."""
    return ct * _complex.conj(sign(x))


def _abs_jvp(t, ans, x):
    return _complex.real(t * _complex.conj(sign(x)))


negative_p, negative = _unary("negative", lambda g, ans, x: -g, float_valued=False, fusion_ns=ARITHMETIC_NS)
abs_p, abs = _unary("absolute", _abs_vjp, _abs_jvp, float_valued=False, fusion_ns=(2.4, 2.1))
absolute = abs
sign_p = _unary("sign")[0]  # the public sign (below) also handles complex inputs
exp_p, exp = _unary("exp", lambda g, ans, x: g * ans, fusion_ns=(3.4, 5.5))
expm1_p, expm1 = _unary("expm1", lambda g, ans, x: g * (ans + 1.0), fusion_ns=(7.8, 5.5))
log_p, log = _unary("log", lambda g, ans, x: g / x, fusion_ns=(3.8, 4.9))
log1p_p, log1p = _unary("log1p", lambda g, ans, x: g / (x + 1.0), fusion_ns=(8.9, 7.7))
log2_p, log2 = _unary("log2", lambda g, ans, x: g / (x * LN2))
log10_p, log10 = _unary("log10", lambda g, ans, x: g / (x * LN10), fusion_ns=(7.6, 8.4))
def _strong_zero_times(g, d):
    """``g * d``, but exactly 0 where ``d == 0`` even when ``g`` is infinite or nan: a derivative that is
    exactly zero stops the flow. This is what makes ``sqrt(sum(x**2))`` have gradient 0 (not nan) at
    ``x = 0``, where ``sqrt'(0) = inf`` meets ``d(x**2)/dx = 0`` (docs/numpy.md, "Conventions")."""
    # masked only where g is not finite: a mask wherever d == 0 would make the result a constant there,
    # with no derivative in x (the Hessian of sum(x**2) at 0 came out 0) and none in g
    return where(equal(d, 0) & logical_not(isfinite(g)), 0.0, g * d)


def _sqrt_rule(g, ans, x):
    """``g / (2 sqrt(x))``; a zero ``g`` stays zero at ``x = 0`` (the forward-mode side of the same
    convention: a zero tangent into ``sqrt(0)`` gives a zero tangent, not nan).

    Written ``g * scale`` so that it stays linear in ``g``: ``scale`` is ``1 / (2 sqrt(x))``, or 0 at
    ``x = 0`` where ``g`` is 0 (so ``0 * inf`` never happens). A mask on ``g``'s value that returned
    the constant 0 (``where(g == 0, 0, ...)``) had the right value but no derivative in ``g`` at
    ``g = 0``, and that derivative is what transposing the rule (``custom_root``'s reverse mode, a
    Jacobian of a ``jvp`` taken at a zero tangent) reads."""
    half_reciprocal = 1.0 / (ans * 2.0)
    return g * where(equal(g, 0) & equal(ans, 0), 0.0, half_reciprocal)


sqrt_p, sqrt = _unary("sqrt", _sqrt_rule, fusion_ns=(0.9, 1.2))
square_p, square = _unary("square", lambda g, ans, x: _strong_zero_times(g, x * 2.0), float_valued=False,
                          fusion_ns=ARITHMETIC_NS)
reciprocal_p, reciprocal = _unary("reciprocal", lambda g, ans, x: -g * (ans * ans), float_valued=False,
                                  fusion_ns=ARITHMETIC_NS)
sin_p, sin = _unary("sin", lambda g, ans, x: g * cos(x), fusion_ns=(2.8, 0.9))
cos: Callable[[ArrayLike], Array]  # declared: sin's rule above reads it
cos_p, cos = _unary("cos", lambda g, ans, x: -g * sin(x), fusion_ns=(2.9, 1.0))
tan_p, tan = _unary("tan", lambda g, ans, x: g * (ans * ans + 1.0), fusion_ns=(8.9, 10.1))
tanh_p, tanh = _unary("tanh", lambda g, ans, x: g * (1.0 - ans * ans), fusion_ns=(15.2, 7.9))
sinh_p, sinh = _unary("sinh", lambda g, ans, x: g * cosh(x), fusion_ns=(15.1, 8.8))
cosh: Callable[[ArrayLike], Array]
cosh_p, cosh = _unary("cosh", lambda g, ans, x: g * sinh(x), fusion_ns=(11.1, 5.1))
arcsin_p, arcsin = _unary("arcsin", lambda g, ans, x: g / sqrt(1.0 - x * x), fusion_ns=(4.8, 5.4))
arccos_p, arccos = _unary("arccos", lambda g, ans, x: -g / sqrt(1.0 - x * x), fusion_ns=(5.7, 6.0))
arctan_p, arctan = _unary("arctan", lambda g, ans, x: g / (x * x + 1.0), fusion_ns=(5.9, 8.1))
floor_p, floor = _unary("floor")
ceil_p, ceil = _unary("ceil")
isfinite_p, isfinite = _unary("isfinite")
isnan_p, isnan = _unary("isnan")
isinf_p, isinf = _unary("isinf")
logical_not_p, logical_not = _unary("logical_not", fusion_ns=ARITHMETIC_NS)


def sign(x: ArrayLike) -> Array:
    """Elementwise sign, as ``numpy.sign``: -1, 0 or 1 for real ``x`` (derivative zero everywhere);
    ``z / |z|`` (0 at 0) for complex ``z``, as NumPy 2, which is differentiable away from 0."""
    if is_complex(x):
        r = abs(x)
        at_zero, at_inf = equal(r, 0), isinf(r)
        finite = where(at_zero, 0.0, x / where(at_zero | at_inf, 1.0, r))
        return where(at_inf, _sign_at_infinity(x), finite)
    return bind(sign_p, x)


def _sign_at_infinity(z):
    """NumPy 2's sign of a complex infinity (``z / |z|`` would be NaN): the sign of the infinite part,
    along its axis; NaN when both parts are infinite."""
    re, im = _complex.real(z), _complex.imag(z)
    return where(isinf(re), where(isinf(im), complex(np.nan, np.nan), sign(re)), 1j * sign(im))


round_p = primitive("round", lambda x, *, decimals: namespace_of(x).round(x, decimals))
def_nondiff(round_p)
defbatch_elementwise(round_p)


def round(x: ArrayLike, decimals: int = 0) -> Array:
    """Round to ``decimals`` places (half to even), as ``numpy.round``; its derivative is zero."""
    return bind(round_p, x, decimals=int(decimals))


around = round


# ---- binary --------------------------------------------------------------------------------------
add_p, add = _binary("add", cotangent, cotangent, fusion_ns=ARITHMETIC_NS)
subtract_p, subtract = _binary("subtract", cotangent, lambda g, ans, x, y: -g, fusion_ns=ARITHMETIC_NS)
multiply_p, multiply = _binary("multiply", lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x,
                               fusion_ns=ARITHMETIC_NS)


def _multiply_vjp(argnum: int):
    """``multiply``'s vjp for operand ``argnum``: ``ct * other`` summed to the operand's shape. Where the
    operand was broadcast against an ``other`` of the result's shape, that is one contraction (an
    einsum), and the product never exists at the result's size: reverse over forward multiplies a
    primal by a batch of tangents, and under the outer batch the product and its sum were
    100 x 100 x 200 arrays (1.7 ms where the einsum takes 0.6)."""
    def vjp(ct, ans, x, y):
        operand, other = (x, y) if argnum == 0 else (y, x)
        shape, out_shape = shape_of(operand), shape_of(ct)
        if shape == out_shape:  # nothing to sum (the hot path: one product, as summed_to_operand's)
            g = ct * other
            return g if g.dtype == operand.dtype else _shape.unbroadcast(g, operand)
        if shape_of(other) != out_shape:  # a broadcast other: the product is no bigger than needed
            return _shape.unbroadcast(ct * other, operand)
        letters = LETTERS[:len(out_shape)]
        lead = len(out_shape) - len(shape)
        kept = "".join(letters[lead + i] for i, d in enumerate(shape) if d == out_shape[lead + i])
        summed = bind(einsum_p, ct, other, subscripts=f"{letters},{letters}->{kept}", optimize=False)
        return _shape.unbroadcast(_shape.reshape(summed, shape), operand)  # the operand's unit axes, dtype
    return vjp


defvjp(multiply_p, _multiply_vjp(0), _multiply_vjp(1))  # in place of _binary's product-then-sum
def_dependency(multiply_p, "product")  # a known zero factor (a zero cotangent) cuts the other's dependency
divide_p, divide = _binary("divide", lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y,
                           fusion_ns=(0.6, 0.55))
true_divide = divide


def balanced_eq(x, ans, y, g):
    """``g`` where ``x`` won, half of it where ``x`` and ``y`` tie, 0 elsewhere (as JAX and autograd).

    Multiplies by masks rather than selecting with ``where``: on an unpatterned mask (``maximum(h, 0)``
    as a ReLU) NumPy's ``where`` mispredicts branches and is ~20x slower than a multiply.
    """
    won = astype(equal(x, ans), g.dtype)
    tied = astype(equal(y, ans), g.dtype)
    return g * (won * (1.0 - 0.5 * tied))


# the rules of maximum and minimum (and fmax, fmin): the operand equal to the result gets g, halved at ties
TIE_SPLIT_RULES = (lambda g, ans, x, y: balanced_eq(x, ans, y, g), lambda g, ans, x, y: balanced_eq(y, ans, x, g))
maximum_p, maximum = _binary("maximum", *TIE_SPLIT_RULES, fusion_ns=(1.9, 1.8))
minimum_p, minimum = _binary("minimum", *TIE_SPLIT_RULES, fusion_ns=(1.9, 1.8))
logaddexp_p, logaddexp = _binary("logaddexp", lambda g, ans, x, y: g * exp(x - ans),
                                 lambda g, ans, x, y: g * exp(y - ans))
arctan2_p, arctan2 = _binary("arctan2", lambda g, ans, y, x: g * x / (x * x + y * y),
                             lambda g, ans, y, x: -g * y / (x * x + y * y), fusion_ns=(17.7, 10.8))


def _power_dx(g, ans, x, y):
    """``y * x**(y-1)``, and exactly 0 where ``y == 0`` (``d/dx x**0 = 0``, also at ``x = 0``)."""
    if isinstance(y, (int, float, complex)):
        if y == 0:
            return None
        d = y * (x if y == 2 else x ** (y - 1))  # x**1 is x: one operation fewer for every square
        return _strong_zero_times(g, d) if isinstance(y, (int, float)) and y > 1 else g * d
    # guard only the point x = y = 0 (where x**(y-1) is inf and y is 0): elsewhere the product stays
    # differentiable in y, so the mixed partial d/dy (y x**(y-1)) = 1/x at y = 0 comes out right
    base = where(logical_and(equal(x, 0), equal(y, 0)), 1.0, x)
    return g * (y * base ** (y - 1.0))


def _power_dy(g, ans, x, y):
    """``log(x) * x**y``, taken as 0 where ``x == 0`` (the limit from above; autograd's choice)."""
    return g * ans * _log_of_base(x)


def _log_of_base(x):
    """``log(x)``, 0 where ``x == 0``; a Python base gives a Python scalar (weak: no upcast), nan for
    a negative real one, as ``log`` of a negative array gives."""
    if isinstance(x, complex):
        import cmath  # here, not at the top: a Python complex base is rare, and imports add up
        return cmath.log(x) if x != 0 else 0.0
    if isinstance(x, (int, float)):
        return math.log(x) if x > 0 else (0.0 if x == 0 else math.nan)
    return log(where(equal(x, 0), 1.0, x))


power_p, power = _binary("power", _power_dx, _power_dy, fusion_ns=(6.1, 8.1))


def float_power(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``x1 ** x2`` computed in float64 (at least), as ``numpy.float_power``."""
    return power(astype(x1, _shape.result_type(x1, np.float64)), x2)


equal_p, equal = _binary("equal", nondiff=True, fusion_ns=ARITHMETIC_NS)
not_equal_p, not_equal = _binary("not_equal", nondiff=True, fusion_ns=ARITHMETIC_NS)
less_p, less = _binary("less", nondiff=True, fusion_ns=ARITHMETIC_NS)
less_equal_p, less_equal = _binary("less_equal", nondiff=True, fusion_ns=ARITHMETIC_NS)
greater_p, greater = _binary("greater", nondiff=True, fusion_ns=ARITHMETIC_NS)
greater_equal_p, greater_equal = _binary("greater_equal", nondiff=True, fusion_ns=ARITHMETIC_NS)
logical_and_p, logical_and = _binary("logical_and", nondiff=True, fusion_ns=ARITHMETIC_NS)
logical_or_p, logical_or = _binary("logical_or", nondiff=True, fusion_ns=ARITHMETIC_NS)
logical_xor_p, logical_xor = _binary("logical_xor", nondiff=True)
bitwise_and_p, bitwise_and = _binary("bitwise_and", nondiff=True)
bitwise_or_p, bitwise_or = _binary("bitwise_or", nondiff=True)
# jit fuses only float and bool operands, and on bools ``&`` and ``|`` are the logical operations
def_fusion(bitwise_and_p, lambda f, x, y: x & y)
def_fusion(bitwise_or_p, lambda f, x, y: x | y)
bitwise_xor_p, bitwise_xor = _binary("bitwise_xor", nondiff=True)
invert_p, invert = _unary("invert")


# ---- where and clip (stop_gradient and astype are structural: tapegrad._structural) -------------------
def _where_jvp(tangents, ans, c, x, y):
    _, tx, ty = tangents
    return where(c, 0.0 if tx is None else tx, 0.0 if ty is None else ty)


where_p = primitive("where", lambda c, x, y: namespace_of(c, x, y).where(c, x, y))
def_shape_rule(where_p, lambda c, x, y: ShapedArray(broadcast_shapes(c.shape, x.shape, y.shape), result_dtype(x, y)))
defvjp(where_p, None,
       lambda ct, ans, c, x, y: _shape.unbroadcast(where(c, ct, 0.0), x),
       lambda ct, ans, c, x, y: _shape.unbroadcast(where(c, 0.0, ct), y))
defjvp_joint(where_p, _where_jvp)
defbatch_elementwise(where_p)
# a known condition selects exactly; a traced one (computed from x) may select either operand
def_dependency(where_p, Structural(data=(1, 2), otherwise=elementwise))
def_fusion(where_p, "where")
def_lowering(where_p, _lowerings.elementwise("where"))


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Array:
    """Elements of ``x`` where ``condition`` holds, else of ``y`` (broadcast together).

    Only the three-argument form; for indices of true elements use ``numpy.nonzero`` on a concrete
    array. Gradients flow to ``x`` and ``y``, never to ``condition``.
    """
    return bind(where_p, condition, x, y)


def _clip_dx(g, ans, x, lo, hi):
    return where(logical_and(x >= lo, x <= hi), g, 0.0)


def _clip_dlo(g, ans, x, lo, hi):
    return where(x < lo, g, 0.0)


def _clip_dhi(g, ans, x, lo, hi):
    return where(x > hi, g, 0.0)


clip_p = primitive("clip", lambda x, lo, hi: namespace_of(x, lo, hi).clip(x, lo, hi))
def_shape_rule(clip_p, lambda x, lo, hi: ShapedArray(broadcast_shapes(x.shape, lo.shape, hi.shape),
                                                     result_dtype(x, lo, hi)))
defvjp(clip_p, *[summed_to_operand(rule, i) for i, rule in enumerate((_clip_dx, _clip_dlo, _clip_dhi))])
defjvp(clip_p, _clip_dx, _clip_dlo, _clip_dhi)
defbatch_elementwise(clip_p)
def_dependency(clip_p, "elementwise")
def _clip_template(f, x, lo, hi):
    """``x`` kept where it ties a bound (as the Python executor's clip keeps a signed zero), and a NaN
    operand propagating."""
    m = f.where((x < lo) | (lo != lo), lo, x)
    return f.where((m > hi) | (hi != hi), hi, m)


def_lowering(clip_p, _lowerings.elementwise(_clip_template))


def clip(a: ArrayLike, a_min: ArrayLike = None, a_max: ArrayLike = None, *,
         min: ArrayLike = None, max: ArrayLike = None) -> Array:  # noqa: A002 (NumPy 2.1's names)
    """Limit ``a`` to ``[a_min, a_max]`` (either or both may be None: no bound), as ``numpy.clip``;
    ``min=``/``max=`` are NumPy 2.1's keyword spellings of the bounds.

    The gradient reaches ``a`` where ``a_min <= a <= a_max`` (boundary included: the convention of
    JAX and PyTorch) and reaches a bound where ``a`` lies strictly beyond it.

    Raises:
        TypeError: a bound given twice (``a_min`` and ``min``, or ``a_max`` and ``max``).
    """
    if (a_min is not None and min is not None) or (a_max is not None and max is not None):
        raise TypeError("clip: give each bound once, as a_min/a_max or as min=/max=, not both")
    a = as_operand(a)
    lo, hi = min if a_min is None else a_min, max if a_max is None else a_max
    # a missing bound is the dtype's end: an infinity would promote an integer array to float64 (and
    # round integers beyond 2**53)
    ends = (int(np.iinfo(a.dtype).min), int(np.iinfo(a.dtype).max)) if np.dtype(a.dtype).kind in "iu" \
        else (-math.inf, math.inf)
    return bind(clip_p, a, ends[0] if lo is None else lo, ends[1] if hi is None else hi)


def angle(z: ArrayLike, deg: bool = False) -> Array:
    """The argument of ``z`` in ``(-pi, pi]`` (degrees if ``deg``), as ``numpy.angle``.

    Computed as ``arctan2(imag(z), real(z))``, so for complex ``z`` the derivative is that of
    ``arctan2`` (undefined, nan, at ``z = 0``). On real ``z`` it is 0 or pi, a constant: the
    derivative is 0.
    """
    z = as_operand(z)
    if is_complex(z):
        out = arctan2(imag(z), real(z))
    else:
        out = stop_gradient(arctan2(zeros_like(z), z))
    return out * (180.0 / math.pi) if deg else out
