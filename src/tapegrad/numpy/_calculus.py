"""Discrete calculus on sampled functions: ``gradient``, ``trapezoid``, ``ediff1d``, ``unwrap``,
``interp``.

Each is a composite of slices, arithmetic, ``where`` and gathers, so derivatives in every mode and to
every order, ``vmap`` and ``jit`` come from those primitives' rules. Conventions a user must know:

- ``interp`` is differentiable in ``x``, ``xp`` and ``fp``. At a knot ``x == xp[j]`` its derivative
  in ``x`` is the slope of the segment to the right of the knot (as JAX's, which looks the segment up
  with ``searchsorted(..., side='right')``), except at the last knot, where only the segment to its
  left exists. Outside ``[xp[0], xp[-1]]`` the value is constant (``left``/``right``): derivative 0.
- ``unwrap`` adds multiples of ``period`` that are piecewise constant in ``p``: its derivative is the
  identity.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._arrays import _along, diff
from tapegrad.numpy._indexing import take
from tapegrad.numpy._reductions import cumsum, normalize_axis
from tapegrad.numpy._reductions import sum as sum_
from tapegrad.numpy._searching import searchsorted
from tapegrad.numpy._sorting import argsort
from tapegrad.numpy._statistics import operand
from tapegrad.numpy._ufuncs import remainder


def _inexact(x):
    """``x`` as an array of a float or complex dtype (integers and booleans: float64, as NumPy)."""
    x = operand(x)
    return x if np.dtype(x.dtype).kind in "fc" else ew.astype(x, np.float64)


# ---- gradient ------------------------------------------------------------------------------------
def gradient(f: Callable[..., Any], *varargs: Any, axis: Axis = None, edge_order: int = 1) -> Array | tuple[Array, ...]:
    """The gradient of ``f`` sampled on a grid, as ``numpy.gradient``: second-order central
    differences inside, first- or second-order (``edge_order``) one-sided differences at the ends.

    Args:
        f: an N-d array of samples.
        *varargs: the spacing: none (1 along every axis), one for all axes, or one per axis of
            ``axis``; each a scalar (uniform steps) or a 1-D array of coordinates along that axis.
        axis: None (every axis), an int or a tuple of ints.
        edge_order: 1 or 2.

    Returns:
        One array (a single axis) or a tuple of arrays (one per axis), of ``f``'s shape and float
        dtype (integers give float64). Differentiable in ``f`` and in the spacings.

    Raises:
        ValueError: ``edge_order`` not 1 or 2; an axis shorter than ``edge_order + 1``; coordinates
            of the wrong length.
        TypeError: the wrong number of spacings (NumPy's error).
    """
    f = _inexact(f)
    axes = normalize_axis(tuple(range(_shape.ndim(f))) if axis is None else axis, _shape.ndim(f))
    if edge_order not in (1, 2):
        raise ValueError(f"'edge_order' must be 1 or 2 but got {edge_order!r}")
    if len(varargs) not in (0, 1, len(axes)):
        raise TypeError(f"gradient: invalid number of spacing arguments ({len(varargs)}); pass none, one, "
                        f"or one per axis ({len(axes)})")
    spacings = list(varargs) * len(axes) if len(varargs) == 1 else list(varargs) or [1.0] * len(axes)
    out = tuple(_gradient_along(f, ax, _steps(h, f, ax), edge_order) for ax, h in zip(axes, spacings))
    return out[0] if len(out) == 1 else out


def _steps(h, f, axis):
    """The spacing along ``axis``: a scalar, or the differences of 1-D coordinates, shaped to
    broadcast along ``axis``."""
    if isinstance(h, numbers.Number) or _shape.ndim(h) == 0:
        return h
    h = _inexact(h)
    n = _shape.shape(f)[axis]
    if _shape.ndim(h) != 1 or _shape.shape(h)[0] != n:
        raise ValueError(f"gradient: the coordinates along axis {axis} must be 1-D of length {n} (f's length "
                         f"there), got shape {tuple(_shape.shape(h))}")
    shape = [1] * _shape.ndim(f)
    shape[axis] = n - 1
    return _shape.reshape(diff(h), tuple(shape))


def _gradient_along(f, axis, h, edge_order):
    n = _shape.shape(f)[axis]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least (edge_order + 1) "
                         f"elements are required (axis {axis} has {n})")
    def at(s):
        return f[_along(axis, s)]

    def step(s):
        return h if isinstance(h, numbers.Number) or _shape.ndim(h) == 0 else h[_along(axis, s)]
    dx1, dx2 = step(slice(None, -1)), step(slice(1, None))
    interior = (-dx2 / (dx1 * (dx1 + dx2)) * at(slice(None, -2)) + (dx2 - dx1) / (dx1 * dx2) * at(slice(1, -1))
                + dx1 / (dx2 * (dx1 + dx2)) * at(slice(2, None)))
    if edge_order == 1:
        first = (at(slice(1, 2)) - at(slice(0, 1))) / step(slice(0, 1))
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / step(slice(-1, None))
    else:
        d1, d2 = step(slice(0, 1)), step(slice(1, 2))
        first = (-(2.0 * d1 + d2) / (d1 * (d1 + d2)) * at(slice(0, 1)) + (d1 + d2) / (d1 * d2) * at(slice(1, 2))
                 - d1 / (d2 * (d1 + d2)) * at(slice(2, 3)))
        d1, d2 = step(slice(-2, -1)), step(slice(-1, None))
        last = (d2 / (d1 * (d1 + d2)) * at(slice(-3, -2)) - (d2 + d1) / (d1 * d2) * at(slice(-2, -1))
                + (2.0 * d2 + d1) / (d2 * (d1 + d2)) * at(slice(-1, None)))
    out = _shape.concatenate([first, interior, last], axis=axis)
    return out if out.dtype == f.dtype else ew.astype(out, f.dtype)


# ---- integrals and differences -------------------------------------------------------------------
def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: float = 1.0, axis: Axis = -1) -> Array:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, as ``numpy.trapezoid``: on the
    sample points ``x`` (1-D, or ``y``'s shape) or, with ``x=None``, on steps of ``dx``.
    Differentiable in ``y``, ``x`` and ``dx``; ``y``'s shape without ``axis``, float dtype."""
    y = _inexact(y)
    axis = normalize_axis(axis, _shape.ndim(y))[0]
    if x is None:
        d = dx
    else:
        x = _inexact(x)
        d = diff(x, axis=-1 if _shape.ndim(x) == 1 else axis)
        if _shape.ndim(x) == 1:
            shape = [1] * _shape.ndim(y)
            shape[axis] = _shape.shape(d)[0]
            d = _shape.reshape(d, tuple(shape))
    mid = (y[_along(axis, slice(1, None))] + y[_along(axis, slice(None, -1))]) / 2.0
    return sum_(d * mid, axis=axis)


def ediff1d(ary: ArrayLike, to_end: Any = None, to_begin: Any = None) -> Array:
    """The differences of consecutive elements of the flattened ``ary``, with ``to_begin`` and
    ``to_end`` (flattened) joined at the ends, as ``numpy.ediff1d``; ``ary``'s dtype.
    Differentiable in all three.

    Raises:
        TypeError: ``to_begin``/``to_end`` whose dtype cannot be cast to ``ary``'s (``same_kind``).
    """
    ary = _shape.ravel(operand(ary))
    pieces = [diff(ary)] if _shape.size(ary) else [ary]
    for name, extra, where in (("to_begin", to_begin, 0), ("to_end", to_end, len(pieces) + 1)):
        if extra is None:
            continue
        extra = _shape.ravel(operand(extra))
        if not np.can_cast(extra.dtype, ary.dtype, casting="same_kind"):
            raise TypeError(f"dtype of `{name}` ({extra.dtype}) must be compatible with input `ary` ({ary.dtype}) "
                            "under the `same_kind` rule.")
        pieces.insert(where, extra if extra.dtype == ary.dtype else ew.astype(extra, ary.dtype))
    return _shape.concatenate(pieces) if len(pieces) > 1 else pieces[0]


def unwrap(p: Any, discont: Any = None, axis: Axis = -1, *, period: Any = 2 * math.pi) -> Array:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` replaced by
    their ``period``-complement, as ``numpy.unwrap``.

    The correction is a piecewise-constant multiple of ``period``, so the derivative in ``p`` is the
    identity. Integer ``p`` gives float64 (NumPy keeps integers when ``period`` is an integer too).
    """
    p = _inexact(p)
    axis = normalize_axis(axis, _shape.ndim(p))[0]
    dd = diff(p, axis=axis)
    discont = period / 2 if discont is None else discont
    high = period / 2
    ddmod = remainder(dd + high, period) - high
    # an exact half-period jump keeps the direction it had (NumPy's rule for the ambiguous boundary)
    ddmod = ew.where(ew.logical_and(ew.equal(ddmod, -high), ew.greater(dd, 0)), high, ddmod)
    correction = ew.where(ew.less(ew.abs(dd), discont), 0.0, ddmod - dd)
    head, tail = p[_along(axis, slice(0, 1))], p[_along(axis, slice(1, None))]
    return _shape.concatenate([head, tail + cumsum(correction, axis=axis)], axis=axis)


# ---- interp --------------------------------------------------------------------------------------
def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: Any = None, right: bool | None = None,
           period: Any = None) -> Array:
    """The piecewise-linear interpolant of the points ``(xp, fp)`` evaluated at ``x``, as
    ``numpy.interp``.

    Args:
        x: the points to evaluate at (any shape).
        xp: 1-D increasing sample coordinates (any order with ``period``).
        fp: 1-D sample values (real or complex), as long as ``xp``.
        left, right: the values for ``x < xp[0]`` and ``x > xp[-1]`` (default ``fp[0]``, ``fp[-1]``);
            ignored with ``period``.
        period: None, or the period of ``xp`` (``x`` and ``xp`` are then taken modulo it).

    Returns:
        ``x``'s shape; float64, or complex128 for complex ``fp`` (NumPy computes in double).
        Differentiable in ``x``, ``xp``, ``fp``, ``left`` and ``right``. At a knot the derivative in
        ``x`` is the right-hand slope (the left-hand one at the last knot); see the module notes.

    Raises:
        ValueError: ``xp``/``fp`` not 1-D, of different lengths or empty; ``period == 0``.
    """
    x, xp, fp = (_inexact(a) for a in (x, xp, fp))
    out_dtype = np.complex128 if np.dtype(fp.dtype).kind == "c" else np.float64
    x, xp, fp = (a if a.dtype == dt else ew.astype(a, dt) for a, dt in
                 ((x, np.float64), (xp, np.float64), (fp, out_dtype)))
    if _shape.ndim(xp) != 1 or _shape.ndim(fp) != 1:
        raise ValueError("Data points must be 1-D sequences")
    if _shape.shape(xp)[0] != _shape.shape(fp)[0]:
        raise ValueError("fp and xp are not of the same length.")
    if _shape.shape(xp)[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:
        if period == 0:
            raise ValueError("period must be a non-zero value")
        x, xp, fp = _periodic(x, xp, fp, abs(period))
    n = _shape.shape(xp)[0]
    if n == 1:  # a constant: every x gets fp[0] (left/right aside)
        f = ew.where(ew.equal(x, x), fp[0], fp[0])
    else:
        # the segment [xp[i-1], xp[i]] holding x, clipped inside: a binary search, O(size(x) log n)
        i = ew.clip(searchsorted(ew.stop_gradient(xp), x, side="right"), 1, n - 1)
        lo_x, lo_f = take(xp, i - 1), take(fp, i - 1)
        dx, df = take(xp, i) - lo_x, take(fp, i) - lo_f
        repeated = ew.less_equal(ew.abs(dx), 0.0)  # a repeated knot: take its right value, as JAX
        f = ew.where(repeated, take(fp, i), lo_f + (x - lo_x) / ew.where(repeated, 1.0, dx) * df)
    if period is None:
        f = ew.where(ew.less(x, xp[0]), fp[0] if left is None else left, f)
        f = ew.where(ew.greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return f if f.dtype == out_dtype else ew.astype(f, out_dtype)


def _periodic(x, xp, fp, period):
    """``x`` and ``xp`` modulo ``period``, ``xp`` sorted, and one period's wrap-around knot added at
    each end."""
    x, xp = remainder(x, period), remainder(xp, period)
    order = argsort(ew.stop_gradient(xp))
    xp, fp = take(xp, order), take(fp, order)
    xp = _shape.concatenate([xp[-1:] - period, xp, xp[:1] + period])
    fp = _shape.concatenate([fp[-1:], fp, fp[:1]])
    return x, xp, fp


