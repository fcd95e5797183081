"""Reductions: sum, max/min, prod, cumsum, cumprod, arg-reductions, all/any; mean, var and std on top.

Axes are normalised to a sorted tuple of non-negative ints (or None for all axes) before binding, so
the static parameters are hashable and rules see one spelling.
"""
from __future__ import annotations

import numpy as np

from tapegrad import _lowerings
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._jvp import jvp_flat
from tapegrad._structural import keep_reduced, normalize_axis, reduce_impl, sum_p
from tapegrad._tape import vjp_flat
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.extend import (
    def_dependency,
    def_lowering,
    def_nondiff,
    def_shape_rule,
    defbatch_reduction,
    defbatch_single_axis,
    defjvp,
    deflinear,
    defvjp,
    primitive,
    reduction_abstract_eval,
    summed_dtype,
)
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._complex import conj, real
from tapegrad.numpy._creation import as_operand, ones_like
from tapegrad.numpy._float16 import accumulates_in_float32, in_float32, is_float16


def _reduce(prim, a, axis, keepdims):
    a = as_operand(a)
    return bind(prim, a, axis=normalize_axis(axis, _shape.ndim(a)), keepdims=bool(keepdims))


def sum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` (None: all), as ``numpy.sum``; ``dtype`` converts ``a`` first. float16 is
    added in float32 and the sum rounded to float16 (NumPy adds it in float16)."""
    if dtype is not None:
        a = ew.astype(as_operand(a), dtype)
    return _reduce(sum_p, a, axis, keepdims)


accumulates_in_float32("sum", "NumPy adds float16 in float16 (2048 + 1 == 2048 along a strided axis)")


# ---- max and min ---------------------------------------------------------------------------------
def _tie_weights(ans, x, axis, keepdims):
    """1/k at the k elements equal to the extreme along the reduced axes, 0 elsewhere (a constant)."""
    winners = ew.astype(ew.equal(x, keep_reduced(ans, x.shape, axis, keepdims)), x.dtype)
    return winners / sum(winners, axis=axis, keepdims=True)


def _minmax_vjp(ct, ans, x, *, axis, keepdims):
    """The gradient goes to the elements equal to the extreme, split evenly among ties (as JAX)."""
    return keep_reduced(ct, x.shape, axis, keepdims) * _tie_weights(ans, x, axis, keepdims)


def _minmax_jvp(t, ans, x, *, axis, keepdims):
    """The mean of the tangents at the tied extremes: the transpose of the vjp's even split."""
    return sum(t * _tie_weights(ans, x, axis, keepdims), axis=axis, keepdims=keepdims)


amax_p = primitive("amax", reduce_impl("max"))
amin_p = primitive("amin", reduce_impl("min"))
def_shape_rule(amax_p, reduction_abstract_eval(lambda dtype: dtype))
def_shape_rule(amin_p, reduction_abstract_eval(lambda dtype: dtype))
defvjp(amax_p, _minmax_vjp)
defvjp(amin_p, _minmax_vjp)
defjvp(amax_p, _minmax_jvp)
defjvp(amin_p, _minmax_jvp)


def amax(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Maximum over ``axis`` (None: all), as ``numpy.max`` (``numpy.amax``; ``tnp.max`` is this
    function); ties share the gradient evenly (as autograd and JAX).
    """
    return _reduce(amax_p, a, axis, keepdims)


def amin(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Minimum over ``axis`` (None: all), as ``numpy.min`` (``numpy.amin``; ``tnp.min`` is this
    function); ties share the gradient evenly (as autograd and JAX).
    """
    return _reduce(amin_p, a, axis, keepdims)


max = amax
min = amin


# ---- prod ----------------------------------------------------------------------------------------
def _prod_tree(x, axis, keepdims):
    """``prod`` as a tree of pairwise multiplications (JAX's ``_reduce_prod_tree``).

    Differentiating the tree gives every order of derivative exactly, zeros in ``x`` included, with
    O(n) work and no division by ``x``.
    """
    shape = tuple(x.shape)
    axes = tuple(range(len(shape))) if axis is None else axis
    rest = tuple(i for i in range(len(shape)) if i not in axes)
    n = 1
    for i in axes:
        n *= shape[i]
    if n == 0:  # the empty product is the constant 1 (JAX: an empty zero gradient)
        return ones_like(x, shape=tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims
                         else tuple(shape[i] for i in rest))
    x = _shape.reshape(_shape.transpose(x, rest + axes), tuple(shape[i] for i in rest) + (n,))
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = _shape.concatenate([x, ones_like(x, shape=tuple(x.shape[:-1]) + (1,))], axis=-1)
        x = x[..., 0::2] * x[..., 1::2]
    if keepdims:
        return _shape.reshape(x, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return _shape.reshape(x, tuple(shape[i] for i in rest))


def _prod_vjp(ct, ans, x, *, axis, keepdims):
    _, pullback = vjp_flat(lambda x: [_prod_tree(x, axis, keepdims)], [x])
    return pullback([ct])[0]


def _prod_jvp(t, ans, x, *, axis, keepdims):
    return jvp_flat(lambda x: [_prod_tree(x, axis, keepdims)], [x], [t])[1][0]


prod_p = primitive("prod", reduce_impl("prod"))
def_shape_rule(prod_p, reduction_abstract_eval(summed_dtype))
defvjp(prod_p, _prod_vjp)
defjvp(prod_p, _prod_jvp)


def prod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Product over ``axis`` (None: all), as ``numpy.prod``; ``dtype`` converts ``a`` first. Its
    gradient is exact where ``a`` has zeros, at every order.
    """
    if dtype is not None:
        a = ew.astype(as_operand(a), dtype)
    return _reduce(prod_p, a, axis, keepdims)


# ---- cumsum --------------------------------------------------------------------------------------
def _cumsum_impl(x, *, axis):
    if is_float16(x):  # a running float16 sum stops growing at 2048 for terms of 1
        return namespace_of(x).cumsum(x, axis=axis, dtype=np.float32).astype(np.float16)
    return namespace_of(x).cumsum(x, axis=axis)


cumsum_p = primitive("cumsum", _cumsum_impl)
accumulates_in_float32("cumsum", "a running float16 sum stops growing at 2048 for terms of 1")
defvjp(cumsum_p, lambda ct, ans, x, *, axis: _shape.flip(cumsum(_shape.flip(ct, axis), axis), axis))
deflinear(cumsum_p)


def _cumulative(prim, a, axis, dtype):
    """A running reduction along ``axis`` (None: over the flattened array), ``a`` cast to ``dtype``."""
    a = as_operand(a)
    if dtype is not None:
        a = ew.astype(a, dtype)
    if axis is None:
        a, axis = _shape.ravel(a), 0
    return bind(prim, a, axis=normalize_axis(axis, _shape.ndim(a))[0])


def cumsum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """Running sum along ``axis`` (None: over the flattened array), as ``numpy.cumsum``. float16 is
    added in float32 and each partial sum rounded to float16."""
    return _cumulative(cumsum_p, a, axis, dtype)


# ---- cumprod -------------------------------------------------------------------------------------
def _cumprod_scan(x, axis):
    """``cumprod`` as a log-depth scan of multiplications (Hillis and Steele): after the step with
    shift ``s``, each entry holds the product of the ``2s`` entries ending at it.

    Only multiplications, so differentiating it gives every order of derivative exactly, zeros in
    ``x`` included, with no division by ``x`` (the reason JAX computes cumprod by an associative scan).
    O(n log n) work along ``axis``; used for the derivatives only, the value comes from NumPy.
    """
    n = _shape.shape(x)[axis]
    shift = 1
    while shift < n:
        before = x[(slice(None),) * axis + (slice(0, n - shift),)]
        widths = tuple((shift, 0) if i == axis else (0, 0) for i in range(_shape.ndim(x)))
        x = x * _shape.pad(before, widths, constant_values=1.0)
        shift *= 2
    return x


def _cumprod_vjp(ct, ans, x, *, axis):
    _, pullback = vjp_flat(lambda x: [_cumprod_scan(x, axis)], [x])
    return pullback([ct])[0]


def _cumprod_jvp(t, ans, x, *, axis):
    return jvp_flat(lambda x: [_cumprod_scan(x, axis)], [x], [t])[1][0]


cumprod_p = primitive("cumprod", lambda x, *, axis: namespace_of(x).cumprod(x, axis=axis))
defvjp(cumprod_p, _cumprod_vjp)
defjvp(cumprod_p, _cumprod_jvp)


def cumprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """Running product along ``axis`` (None: over the flattened array), as ``numpy.cumprod``: same
    shape (1-D when ``axis`` is None) and dtype as ``a`` (or ``dtype``, which converts ``a`` first).

    Its derivatives are exact where ``a`` has zeros (one or several), at every order: they are the
    derivatives of a scan of multiplications, never a division by ``a``.
    """
    return _cumulative(cumprod_p, a, axis, dtype)


# ---- integer and boolean results -----------------------------------------------------------------
argmax_p = primitive("argmax", reduce_impl("argmax"))
argmin_p = primitive("argmin", reduce_impl("argmin"))
all_p = primitive("all", reduce_impl("all"))
any_p = primitive("any", reduce_impl("any"))
def_shape_rule(argmax_p, reduction_abstract_eval(lambda dtype: np.dtype(np.intp)))
def_shape_rule(argmin_p, reduction_abstract_eval(lambda dtype: np.dtype(np.intp)))
def_shape_rule(all_p, reduction_abstract_eval(lambda dtype: np.dtype(bool)))
def_shape_rule(any_p, reduction_abstract_eval(lambda dtype: np.dtype(bool)))
for _p in (argmax_p, argmin_p, all_p, any_p):
    def_nondiff(_p)
defbatch_reduction(sum_p, amax_p, amin_p, prod_p, all_p, any_p)
for _p, _kind in ((amax_p, "max"), (amin_p, "min"), (prod_p, "prod"), (all_p, "all"), (any_p, "any")):
    def_lowering(_p, _lowerings.reduction(_kind))
def_lowering(cumsum_p, _lowerings.cumulative("sum"))
def_lowering(cumprod_p, _lowerings.cumulative("prod"))
defbatch_single_axis(argmax_p, argmin_p, cumsum_p, cumprod_p)
# amax and amin conservatively: the derivative reaches only the extreme element, which values decide
def_dependency(amax_p, "reduction", amin_p, prod_p)
def_dependency(cumsum_p, "cumulative", cumprod_p)


def _single_axis(axis, a, name):
    """One axis, normalised; a tuple of axes is a TypeError as in NumPy (taking its first would be a
    silent wrong answer)."""
    if axis is None:
        return None
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{name}'s axis must be one int or None (as numpy.{name}), got {axis!r}; for several "
                        "axes, move them together and reshape first")
    return normalize_axis(axis, _shape.ndim(a))[0]


def argmax(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Index of the largest element along ``axis`` (None: of the flattened array), as ``numpy.argmax``:
    an ``intp`` array (the first index among ties); not differentiable (its derivative is zero).
    """
    a = as_operand(a)
    return bind(argmax_p, a, axis=_single_axis(axis, a, "argmax"), keepdims=bool(keepdims))


def argmin(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Index of the smallest element along ``axis`` (None: of the flattened array), as ``numpy.argmin``:
    an ``intp`` array (the first index among ties); not differentiable (its derivative is zero).
    """
    a = as_operand(a)
    return bind(argmin_p, a, axis=_single_axis(axis, a, "argmin"), keepdims=bool(keepdims))


def all(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether every element along ``axis`` (None: all) is true, as ``numpy.all``: a bool array;
    not differentiable.
    """
    return _reduce(all_p, a, axis, keepdims)


def any(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Whether any element along ``axis`` (None: all) is true, as ``numpy.any``: a bool array;
    not differentiable.
    """
    return _reduce(any_p, a, axis, keepdims)


# ---- composites ----------------------------------------------------------------------------------
def _count(a, axis) -> int:
    shape = a.shape if hasattr(a, "shape") else np.shape(a)
    axes = normalize_axis(axis, len(shape))
    n = 1
    for i, d in enumerate(shape):
        if axes is None or i in axes:
            n *= d
    return n


def mean(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Arithmetic mean over ``axis``, as ``numpy.mean``: ``sum / count`` (float32 stays float32). As NumPy, float16
    input is summed in float32 and the mean cast back to float16 (a float16 sum of two 65504s would
    be inf)."""
    a = as_operand(a)
    if dtype is not None:
        a = ew.astype(a, dtype)
    if is_float16(a):
        return in_float32(mean, a, axis=axis, keepdims=keepdims)
    return sum(a, axis=axis, keepdims=keepdims) / _count(a, axis)


accumulates_in_float32("mean", "as numpy.mean: a float16 sum of two 65504s would be inf")


def var(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
    """Variance ``sum((a - mean)**2) / (count - ddof)``, as ``numpy.var``. float16 input is computed in
    float32 and the variance rounded to float16 (its squares would overflow past 256)."""
    a = as_operand(a)
    if dtype is not None:
        a = ew.astype(a, dtype)
    if is_float16(a):
        return in_float32(var, a, axis=axis, ddof=ddof, keepdims=keepdims)
    centred = a - mean(a, axis=axis, keepdims=True)
    squares = real(centred * conj(centred)) if np.dtype(a.dtype).kind == "c" else centred * centred
    return sum(squares, axis=axis, keepdims=keepdims) / (_count(a, axis) - ddof)


def std(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
    """Standard deviation, ``sqrt(var)``, as ``numpy.std`` (real for complex input). float16 input is
    computed in float32 and the deviation rounded to float16 (its variance may exceed 65504).

    Its gradient is infinite where the variance is 0 over several elements. Over one element the
    deviation is the constant 0 whatever the value, so every derivative is 0 in both modes (not the
    ``0 * inf = nan`` of differentiating ``sqrt`` at 0).
    """
    a = as_operand(a)
    if dtype is None and is_float16(a):  # a variance above 65504 is inf in float16, its root is not
        return in_float32(std, a, axis=axis, ddof=ddof, keepdims=keepdims)
    variance = var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    return ew.sqrt(ew.stop_gradient(variance) if _count(a, axis) == 1 else variance)


accumulates_in_float32("var", "the squares overflow float16 past 256 and their sum loses digits")
accumulates_in_float32("std", "the variance overflows float16 past 65504 where the deviation does not")
