"""Order statistics and averages: ``median``, ``quantile``, ``percentile``, ``average``, ``ptp``.

All are composites of traced operations, so they are differentiable in both modes at every order.
The order statistics gather the sorted samples they need (through :func:`argpartition`, as NumPy
partitions) and interpolate between neighbours exactly as NumPy does (Hyndman and Fan's methods,
NumPy's ``_quantile``), so the gradient of a quantile is split between the two neighbouring order
statistics with the interpolation weights ``1 - gamma`` and ``gamma``; ``median`` averages the middle
one or two (half of the gradient each). Where the sample has ties, the partition's permutation
decides which one of the tied elements an order statistic reads (and receives its gradient). A traced
``q`` is differentiable too: ``d/dq`` is the slope ``(next - previous) * d(virtual index)/dq`` of the
interpolation (0 for the methods that pick one sample).

:func:`order_statistics` and :func:`interpolate` are shared with the NaN-ignoring versions in
:mod:`._nanreductions`, which count only the non-NaN samples of each slice.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import Tracer, bind
from tapegrad._typing import ArrayLike, Axis
from tapegrad.errors import ConcretizationError
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand, full_like, with_dtype
from tapegrad.numpy._indexing import take_along_axis
from tapegrad.numpy._sorting import argpartition_p, argsort_p


# ---- the sample axis -----------------------------------------------------------------------------
def operand(a):
    """``a`` as an operand with a dtype: sequences are stacked, Python scalars become 0-d arrays."""
    a = as_operand(a)
    return with_dtype(a)


def samples_first(a, axis):
    """``(x, axes)``: ``a`` with the reduced ``axes`` merged into one leading axis, ``(n, *kept)``.

    The order of samples within the merged axis does not matter to an order statistic.
    """
    ndim = _shape.ndim(a)
    axes = red.normalize_axis(axis, ndim)
    if axes is None:
        return _shape.ravel(a), axes
    kept = tuple(i for i in range(ndim) if i not in axes)
    shape = _shape.shape(a)
    n = math.prod(shape[i] for i in axes)
    x = _shape.transpose(a, axes + kept)
    return _shape.reshape(x, (n,) + tuple(shape[i] for i in kept)), axes


def reduced_shape(shape: tuple, axes, keepdims: bool) -> tuple:
    """The shape a reduction over ``axes`` leaves (size-1 reduced axes with ``keepdims``)."""
    if keepdims:
        return tuple(1 if axes is None or i in axes else d for i, d in enumerate(shape))
    return () if axes is None else tuple(d for i, d in enumerate(shape) if i not in axes)


def concrete(x):
    """``x`` as a concrete array, or None where a transform holds it abstract (staging)."""
    if not isinstance(x, Tracer):
        return x
    try:
        return x.concrete_value()
    except ConcretizationError:
        return None


def gather_order_statistics(x, order, rows):
    """``x[order[rows]]`` along the sample axis 0: ``rows`` has shape ``Q + B`` (``B`` broadcasts
    against ``x.shape[1:]``); the result has shape ``Q + x.shape[1:]`` and is differentiable in ``x``."""
    kept = tuple(x.shape[1:])
    q_shape = tuple(rows.shape[:_shape.ndim(rows) - len(kept)])
    flat = _shape.reshape(rows, (-1,) + tuple(rows.shape[len(q_shape):]))
    values = take_along_axis(x, take_along_axis(order, flat, axis=0), axis=0)
    return _shape.reshape(values, q_shape + kept)


# ---- Hyndman and Fan's methods, as NumPy spells them ---------------------------------------------
# (alpha, beta) of the continuous methods: virtual index n q + alpha + q (1 - alpha - beta) - 1
_CONTINUOUS = {"interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
               "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0)}
_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")
METHODS = ("linear", "averaged_inverted_cdf", "midpoint") + tuple(_CONTINUOUS) + _DISCRETE


def _discrete_index(method, n, q):
    """The integer order-statistic index of a method that picks one sample (no interpolation)."""
    if method == "lower":
        return ew.floor((n - 1) * q)
    if method == "higher":
        return ew.ceil((n - 1) * q)
    if method == "nearest":
        return ew.round((n - 1) * q)
    index = n * q - 1 if method == "inverted_cdf" else n * q - 1 - 0.5
    previous = ew.floor(index)
    at_boundary = ew.equal(index - previous, 0)
    if method == "closest_observation":  # the even order statistic (1-based) at g = 0
        at_boundary = ew.logical_and(at_boundary, ew.equal(previous - 2 * ew.floor(previous / 2), 1))
    return ew.maximum(ew.where(at_boundary, previous, previous + 1), 0)


def _virtual_index(method, n, q):
    """The fractional order-statistic index of an interpolating method (differentiable in ``q``)."""
    if method == "linear":
        return (n - 1) * q
    if method == "averaged_inverted_cdf":
        return n * q - 1
    if method == "midpoint":
        return 0.5 * (ew.floor((n - 1) * q) + ew.ceil((n - 1) * q))
    alpha, beta = _CONTINUOUS[method]
    return n * q + (alpha + q * (1 - alpha - beta)) - 1


def _fix_gamma(method, gamma, index):
    """The interpolation weight: the fractional part of the index, or a method's fixed weights (in
    the index's dtype, as NumPy's ``_get_gamma`` casts them)."""
    if method == "averaged_inverted_cdf":
        return ew.astype(ew.where(ew.equal(gamma, 0), 0.5, 1.0), _shape.result_type(index))
    if method == "midpoint":
        return ew.astype(ew.where(ew.equal(index, ew.floor(index)), 0.0, 0.5), _shape.result_type(index))
    return gamma


def order_statistics(method: str, n, q):
    """The plan of a quantile: ``(rows, gamma)``.

    ``n`` is the sample count (an int, or an integer array, one per slice), ``q`` the quantiles
    (shaped to broadcast against ``n``). ``rows`` holds one or two integer arrays of order-statistic
    indices, clipped to ``[0, n - 1]``; with two, the quantile is the interpolation between them with
    weight ``gamma`` (differentiable in ``q``), as NumPy's ``_quantile`` computes it.

    Raises:
        ValueError: an unknown ``method``.
    """
    if method not in METHODS:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {METHODS}")
    q_kind = np.dtype(q.dtype).kind if hasattr(q, "dtype") else np.dtype(type(q)).kind
    last = ew.maximum(n - 1, 0)
    if method in _DISCRETE or (method == "linear" and q_kind in "iub"):
        index = (n - 1) * q if method == "linear" else _discrete_index(method, n, q)
        return (_as_index(ew.minimum(index, last)),), None
    index = _virtual_index(method, n, q)
    previous = ew.floor(index)
    gamma = _fix_gamma(method, index - previous, index)
    above, below = ew.greater_equal(index, n - 1), ew.less(index, 0)
    lo = ew.where(above, last, ew.where(below, 0, previous))
    hi = ew.where(above, last, ew.where(below, 0, previous + 1))
    return (_as_index(lo), _as_index(hi)), gamma


def _as_index(index):
    return ew.astype(ew.stop_gradient(index), np.intp)


def interpolate(below, above, gamma, weak_dtype=None):
    """``below + (above - below) * gamma``, computed from the nearer end as NumPy's ``_lerp`` does
    (so the values match NumPy's bit for bit); differentiable in all three.

    ``weak_dtype``: the weights come from a Python-scalar ``q``, which NumPy keeps weakly typed, so
    ``gamma`` and ``1 - gamma`` are rounded to the samples' float type before they are used.
    """
    diff = above - below
    upper, one_minus = ew.greater_equal(gamma, 0.5), 1 - gamma
    if weak_dtype is not None:
        gamma, one_minus = ew.astype(gamma, weak_dtype), ew.astype(one_minus, weak_dtype)
    return ew.where(upper, above - diff * one_minus, below + diff * gamma)


def weak_float_dtype(x):
    """The dtype of ``x`` combined with a Python float (float32 stays float32, integers give float64)."""
    return np.result_type(np.dtype(x.dtype), 1.0)


# ---- quantile, percentile, median ----------------------------------------------------------------
def weak_number(q) -> bool:
    """Whether ``q`` is a Python int or float, which NumPy types weakly, or one staged by ``jit``."""
    return type(q) in (int, float) or (getattr(q, "weak_type", False) and q.dtype.kind in "if")


def checked_q(q, scale: float, name: str):
    """``q / scale`` as an operand, with NumPy's range and rank checks where ``q`` is concrete."""
    q = np.asarray(q) if isinstance(q, (list, tuple)) else q
    if scale != 1:
        q = ew.divide(q, scale)
    known = concrete(q)
    if known is not None:
        values = known if hasattr(known, "min") else np.asarray(known)
        if values.size and not (values.min() >= 0 and values.max() <= 1):  # also refuses NaN
            bound = "[0, 100]" if scale != 1 else "[0, 1]"
            raise ValueError(f"{name} must be in the range {bound}")
    if _shape.ndim(q) > 2:
        raise ValueError("q must be a scalar or 1d")
    return q


def q_on_device_of(a, q):
    """A concrete ``q`` (Python numbers, a list, a NumPy array) moved to ``a``'s device when ``a``
    lives on one: ``q`` is a parameter of the call, which CuPy's ``quantile`` takes from the host too."""
    xp = namespace_of(a)
    return q if xp is np or isinstance(q, Tracer) or namespace_of(q) is not np else xp.asarray(q)


def quantile_of(a, q, axis, method, keepdims, weak_q: bool):
    """:func:`quantile` of a checked ``q`` (see :func:`checked_q`)."""
    a = operand(a)
    q = q_on_device_of(a, q)
    if np.dtype(a.dtype).kind == "c":
        raise TypeError("a must be an array of real numbers")
    x, axes = samples_first(a, axis)
    n = x.shape[0]
    q_shape = tuple(_shape.shape(q))
    q = _shape.reshape(q, q_shape + (1,) * (_shape.ndim(x) - 1))
    rows, gamma = order_statistics(method, n, q)
    order = _order_for(x, rows)
    values = [gather_order_statistics(x, order, r) for r in rows]
    if gamma is None:
        out = values[0]
    else:
        # a Python-scalar q is weakly typed: float32 samples give a float32 quantile
        out = interpolate(values[0], values[1], gamma, weak_float_dtype(x) if weak_q else None)
    if np.dtype(x.dtype).kind in "fc":  # NumPy: a slice holding a NaN has a NaN quantile
        out = ew.where(red.any(ew.isnan(x), axis=0), math.nan, out)
    return _shape.reshape(out, q_shape + reduced_shape(_shape.shape(a), axes, keepdims))


def _order_for(x, rows):
    """Indices that put the needed order statistics in place along axis 0: a partition around them
    when they are known now (as NumPy does), else a full sort."""
    n = x.shape[0]
    known = [concrete(r) for r in rows]
    if n == 0 or any(k is None for k in known):
        return bind(argsort_p, x, axis=0, stable=False)
    kth = tuple(sorted({i for k in known for i in k.ravel().tolist()}))
    return bind(argpartition_p, x, kth=kth, axis=0)


def quantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: str | None = None) -> Array:
    """The ``q``-th quantiles of ``a`` over ``axis`` (None: all), as ``numpy.quantile``.

    Args:
        a: real array (float, int or bool); a complex one is a ``TypeError``.
        q: quantiles in ``[0, 1]``, a scalar or an array of rank 1 or 2 (traced values allowed:
            the result is differentiable in ``q``, piecewise linearly).
        axis: None, an int or a tuple of ints (negatives allowed).
        method: one of NumPy's 13 methods (default ``'linear'``, Hyndman and Fan's 7th).
        keepdims: keep the reduced axes with length 1.

    Returns:
        An array of shape ``q.shape + reduced shape``; its dtype follows NumPy (float32 samples with
        a Python-float ``q`` give float32; integer samples give float64 unless the method picks one
        sample).

    Raises:
        ValueError: ``q`` outside ``[0, 1]`` or of rank > 2, an unknown ``method``.
        TypeError: complex ``a``.
        NotImplementedError: ``out``, ``weights`` or ``interpolation`` given.
    """
    unsupported("quantile", out=out, weights=weights, interpolation=interpolation)
    weak_q = weak_number(q)
    return quantile_of(a, checked_q(q, 1, "Quantiles"), axis, method, keepdims, weak_q)


def percentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None,
               interpolation: str | None = None) -> Array:
    """The ``q``-th percentiles (``q`` in ``[0, 100]``), as ``numpy.percentile``: :func:`quantile`
    of ``q / 100``, with the same arguments, result, derivatives and errors."""
    unsupported("percentile", out=out, weights=weights, interpolation=interpolation)
    weak_q = weak_number(q)
    return quantile_of(a, checked_q(q, 100, "Percentiles"), axis, method, keepdims, weak_q)


def unsupported(name, **given):
    for key, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{name}: {key}= is not supported by tapegrad.numpy")


def median(a: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """The median over ``axis`` (None: all; an int or tuple of ints), as ``numpy.median``.

    The mean of the middle one or two order statistics (so each of two gets half of the gradient);
    NaN where a slice holds a NaN. Integer input gives float64, float32 stays float32.

    Raises:
        NotImplementedError: ``out`` given.
    """
    unsupported("median", out=out)
    a = operand(a)
    x, axes = samples_first(a, axis)
    n = x.shape[0]
    if n == 0:  # NumPy: the mean of an empty slice, NaN (with its RuntimeWarning)
        middle = x
    else:
        kth = (n // 2 - 1, n // 2) if n % 2 == 0 else ((n - 1) // 2,)
        order = bind(argpartition_p, x, kth=kth, axis=0)
        middle = take_along_axis(x, order[kth[0]:kth[-1] + 1], axis=0)
    out = red.mean(middle, axis=0)
    if np.dtype(x.dtype).kind in "fc" and n:
        out = ew.where(red.any(ew.isnan(x), axis=0), math.nan, out)
    return _shape.reshape(out, reduced_shape(_shape.shape(a), axes, keepdims))


# ---- average and ptp -----------------------------------------------------------------------------
def average(a: ArrayLike, axis: Axis = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Array | tuple[Array, Array]:
    """The (weighted) average over ``axis``, as ``numpy.average``: ``sum(a * w) / sum(w)``.

    Differentiable in ``a`` and in ``weights``.

    Args:
        a: the data.
        axis: None (all), an int or a tuple of ints.
        weights: None (equal weights), an array of ``a``'s shape, or one whose shape is that of
            ``a`` along ``axis`` (in ``axis``'s order).
        returned: also return the sum of the weights.
        keepdims: keep the reduced axes with length 1.

    Returns:
        The average; with ``returned=True`` the pair ``(average, sum_of_weights)``, the second
        broadcast to the average's shape (without weights it is the sample count, in the
        average's dtype).

    Raises:
        TypeError: ``weights`` of another shape than ``a`` with ``axis=None``.
        ValueError: ``weights`` whose shape fits neither ``a`` nor ``a`` along ``axis``.
        ZeroDivisionError: the weights sum to zero (checked where they are concrete).
    """
    a = operand(a)
    shape = _shape.shape(a)
    user_axes = None if axis is None else np.lib.array_utils.normalize_axis_tuple(axis, len(shape), "axis")
    if weights is None:
        avg = red.mean(a, axis=user_axes, keepdims=keepdims)
        scale = math.prod(shape) // max(math.prod(_shape.shape(avg)), 1) if math.prod(shape) else 0
        if returned:
            return avg, full_like(avg, scale)
        return avg
    w = operand(weights)
    kind = np.dtype(a.dtype).kind
    dtype = _shape.result_type(a, w, "f8") if kind in "iub" else _shape.result_type(a, w)
    w = _cast(_weights_like(w, shape, user_axes), dtype)
    scale = red.sum(w, axis=user_axes, keepdims=keepdims)
    known = concrete(scale)
    if known is not None and bool((known == 0).any()):
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    avg = red.sum(_cast(a, dtype) * w, axis=user_axes, keepdims=keepdims) / scale
    if returned:
        return avg, _shape.broadcast_to(scale, _shape.shape(avg))
    return avg


def _cast(x, dtype):
    return x if np.dtype(x.dtype) == dtype else ew.astype(x, dtype)


def _weights_like(w, shape, axes):
    """Weights given along ``axes`` only, reshaped to broadcast against ``a`` (NumPy's rules)."""
    w_shape = tuple(_shape.shape(w))
    if w_shape == tuple(shape):
        return w
    if axes is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if w_shape != tuple(shape[ax] for ax in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
    w = _shape.transpose(w, tuple(int(i) for i in np.argsort(axes)))
    return _shape.reshape(w, tuple(s if ax in axes else 1 for ax, s in enumerate(shape)))


def ptp(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """Range of values, ``max - min`` over ``axis``, as ``numpy.ptp``; ties at either extreme share
    the gradient evenly (as ``max`` and ``min`` do)."""
    a = as_operand(a)
    return red.amax(a, axis=axis, keepdims=keepdims) - red.amin(a, axis=axis, keepdims=keepdims)
