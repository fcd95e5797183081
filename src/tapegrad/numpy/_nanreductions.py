"""Reductions that ignore NaNs: ``nansum nanprod nanmean nanvar nanstd nanmax nanmin nanargmax
nanargmin nancumsum nancumprod nanmedian nanquantile nanpercentile``.

Each one is its reduction applied to ``where(isnan(a), identity, a)``, so the NaN entries get a zero
gradient (and tangent contribution) in both modes, at every order, and the values match NumPy's. A
slice with no numbers gives what NumPy gives (NaN for ``nanmean``/``nanmax``/``nanmedian``... with a
``RuntimeWarning``; 0 for ``nansum``; a ``ValueError`` for ``nanargmax``), and a zero gradient.
Integer and boolean arrays hold no NaN: they go to the plain reductions.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import bind
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _statistics as stats
from tapegrad.numpy._sorting import argsort_p


def _inexact(a) -> bool:
    return np.dtype(a.dtype).kind in "fc"


def _replace_nan(a, value):
    """``(a with NaNs replaced by value, NaN mask or None)``; the mask is a constant."""
    a = stats.operand(a)
    if not _inexact(a):
        return a, None
    mask = ew.isnan(a)
    return ew.where(mask, value, a), mask


def _warn_if_any(condition, message: str):
    """NumPy's ``RuntimeWarning`` for empty slices, where ``condition`` is concrete."""
    known = stats.concrete(condition)
    if known is not None and bool(known.any()):
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _count(mask, axis, keepdims):
    """The number of non-NaN entries per slice (an integer constant)."""
    return red.sum(ew.logical_not(mask), axis=axis, dtype=np.intp, keepdims=keepdims)


def _divide_by_count(total, count):
    """``total / count`` in ``total``'s dtype (NumPy's ``_divide_by_count``): NaN where count is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / ew.astype(count, total.dtype)


# ---- sums and products ---------------------------------------------------------------------------
def nansum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Sum over ``axis`` treating NaNs as 0, as ``numpy.nansum`` (0 for an all-NaN slice)."""
    a, _ = _replace_nan(a, 0.0)
    return red.sum(a, axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Product over ``axis`` treating NaNs as 1, as ``numpy.nanprod``; exact gradients at zeros."""
    a, _ = _replace_nan(a, 1.0)
    return red.prod(a, axis=axis, dtype=dtype, keepdims=keepdims)


def nancumsum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """Running sum along ``axis`` (None: flattened) treating NaNs as 0, as ``numpy.nancumsum``."""
    a, _ = _replace_nan(a, 0.0)
    return red.cumsum(a, axis=axis, dtype=dtype)


def nancumprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """Running product along ``axis`` (None: flattened) treating NaNs as 1, as ``numpy.nancumprod``."""
    a, _ = _replace_nan(a, 1.0)
    return red.cumprod(a, axis=axis, dtype=dtype)


# ---- mean, variance, standard deviation ----------------------------------------------------------
def nanmean(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
    """Mean of the non-NaN entries over ``axis``, as ``numpy.nanmean``.

    The result has the dtype of the sum (float32 stays float32). An all-NaN slice gives NaN and a
    ``RuntimeWarning`` ("Mean of empty slice").
    """
    a, mask = _replace_nan(a, 0.0)
    if mask is None:
        return red.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)
    count = _count(mask, axis, keepdims)
    _warn_if_any(ew.equal(count, 0), "Mean of empty slice")
    return _divide_by_count(red.sum(a, axis=axis, dtype=dtype, keepdims=keepdims), count)


def nanvar(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
    """Variance of the non-NaN entries over ``axis``, as ``numpy.nanvar``:
    ``sum(|a - mean|**2) / (count - ddof)`` over the numbers of each slice (real for complex ``a``).

    NaN (with a ``RuntimeWarning``) where ``count - ddof <= 0``.
    """
    a = stats.operand(a)
    if dtype is not None:
        a = ew.astype(a, dtype)
    x, mask = _replace_nan(a, 0.0)
    if mask is None:
        return red.var(x, axis=axis, ddof=ddof, keepdims=keepdims)
    count = _count(mask, axis, True)
    mean = _divide_by_count(red.sum(x, axis=axis, keepdims=True), count)
    centred = ew.where(mask, 0.0, x - mean)
    squares = _complex.real(centred * _complex.conj(centred))
    dof = _count(mask, axis, keepdims) - ddof
    bad = ew.less_equal(dof, 0)
    _warn_if_any(bad, "Degrees of freedom <= 0 for slice.")
    var = _divide_by_count(red.sum(squares, axis=axis, keepdims=keepdims), dof)
    return ew.where(bad, math.nan, var)


def nanstd(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
    """``sqrt(nanvar(...))``, as ``numpy.nanstd``; its gradient is infinite where the variance is 0."""
    return ew.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


# ---- extremes ------------------------------------------------------------------------------------
def _nan_extreme(a, axis, keepdims, reduce, fill):
    a, mask = _replace_nan(a, fill)
    out = reduce(a, axis=axis, keepdims=keepdims)
    if mask is None:
        return out
    empty = red.all(mask, axis=axis, keepdims=keepdims)
    _warn_if_any(empty, "All-NaN slice encountered")
    return ew.where(empty, math.nan, out)


def nanmax(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Maximum over ``axis`` ignoring NaNs, as ``numpy.nanmax``; ties share the gradient evenly; an
    all-NaN slice gives NaN (and a ``RuntimeWarning``)."""
    return _nan_extreme(a, axis, keepdims, red.amax, -math.inf)


def nanmin(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Minimum over ``axis`` ignoring NaNs, as ``numpy.nanmin``; ties share the gradient evenly; an
    all-NaN slice gives NaN (and a ``RuntimeWarning``)."""
    return _nan_extreme(a, axis, keepdims, red.amin, math.inf)


def _nan_arg(a, axis, keepdims, reduce, fill):
    a, mask = _replace_nan(a, fill)
    if mask is not None and _shape.size(mask):
        known = stats.concrete(red.all(mask, axis=axis))
        if known is not None and bool(known.any()):
            raise ValueError("All-NaN slice encountered")
    return reduce(a, axis=axis, keepdims=keepdims)


def nanargmax(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Index of the maximum ignoring NaNs, as ``numpy.nanargmax`` (an integer constant).

    Raises:
        ValueError: a slice holds only NaNs ("All-NaN slice encountered").
    """
    return _nan_arg(a, axis, keepdims, red.argmax, -math.inf)


def nanargmin(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Index of the minimum ignoring NaNs, as ``numpy.nanargmin`` (an integer constant).

    Raises:
        ValueError: a slice holds only NaNs ("All-NaN slice encountered").
    """
    return _nan_arg(a, axis, keepdims, red.argmin, math.inf)


# ---- order statistics ----------------------------------------------------------------------------
def _valid_samples_first(a, axis):
    """``(x, axes, order, count)``: samples on axis 0, the indices that sort them (NaNs last) and the
    number of non-NaN samples per slice."""
    x, axes = stats.samples_first(a, axis)
    order = bind(argsort_p, x, axis=0, stable=False)
    return x, axes, order, _count(ew.isnan(x), 0, False)


def nanmedian(a: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Array:
    """Median of the non-NaN entries over ``axis``, as ``numpy.nanmedian``: the mean of the middle
    one or two of each slice's numbers (half of the gradient to each of two). An all-NaN slice gives
    NaN (and a ``RuntimeWarning``).

    Raises:
        NotImplementedError: ``out`` given.
    """
    stats.unsupported("nanmedian", out=out)
    a = stats.operand(a)
    if not _inexact(a):
        return stats.median(a, axis=axis, keepdims=keepdims)
    x, axes, order, count = _valid_samples_first(a, axis)
    if x.shape[0] == 0:
        return stats.median(a, axis=axis, keepdims=keepdims)
    lower = ew.maximum((count - 1) // 2, 0)
    upper = count // 2
    below = stats.gather_order_statistics(x, order, lower)
    above = stats.gather_order_statistics(x, order, upper)
    out = ew.where(ew.equal(lower, upper), below, (below + above) / 2)
    out = _all_nan_to_nan(out, count)
    return _shape.reshape(out, stats.reduced_shape(_shape.shape(a), axes, keepdims))


def _all_nan_to_nan(out, count):
    empty = ew.equal(count, 0)
    _warn_if_any(empty, "All-NaN slice encountered")
    return ew.where(empty, math.nan, out)


def _nanquantile(a, q, axis, method, keepdims, weak_q: bool):
    a = stats.operand(a)
    q = stats.q_on_device_of(a, q)
    if not _inexact(a):
        return stats.quantile_of(a, q, axis, method, keepdims, weak_q)
    if np.dtype(a.dtype).kind == "c":
        raise TypeError("a must be an array of real numbers")
    x, axes, order, count = _valid_samples_first(a, axis)
    q_shape = tuple(_shape.shape(q))
    q = _shape.reshape(q, q_shape + (1,) * (_shape.ndim(x) - 1))
    q_dtype = np.dtype(q.dtype) if hasattr(q, "dtype") else np.dtype(type(q))
    # NumPy counts each slice with a Python int, which takes q's float type
    n = ew.astype(count, q_dtype) if q_dtype.kind == "f" else count
    rows, gamma = stats.order_statistics(method, n, q)
    values = [stats.gather_order_statistics(x, order, r) for r in rows]
    if gamma is None:
        out = values[0]
    else:
        out = stats.interpolate(values[0], values[1], gamma, stats.weak_float_dtype(x) if weak_q else None)
    out = _all_nan_to_nan(out, count)
    return _shape.reshape(out, q_shape + stats.reduced_shape(_shape.shape(a), axes, keepdims))


def nanquantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                interpolation: str | None = None) -> Array:
    """:func:`quantile` of the non-NaN entries of each slice, as ``numpy.nanquantile`` (same
    arguments, result shape, dtypes and derivatives; NaN entries get a zero gradient). An all-NaN
    slice gives NaN (and a ``RuntimeWarning``).

    Raises:
        ValueError: ``q`` outside ``[0, 1]`` or of rank > 2, an unknown ``method``.
        NotImplementedError: ``out``, ``weights`` or ``interpolation`` given.
    """
    stats.unsupported("nanquantile", out=out, weights=weights, interpolation=interpolation)
    weak_q = stats.weak_number(q)
    return _nanquantile(a, stats.checked_q(q, 1, "Quantiles"), axis, method, keepdims, weak_q)


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                  interpolation: str | None = None) -> Array:
    """:func:`nanquantile` of ``q / 100`` (``q`` in ``[0, 100]``), as ``numpy.nanpercentile``."""
    stats.unsupported("nanpercentile", out=out, weights=weights, interpolation=interpolation)
    weak_q = stats.weak_number(q)
    return _nanquantile(a, stats.checked_q(q, 100, "Percentiles"), axis, method, keepdims, weak_q)
