"""``trapezoid`` and ``simpson``: quadrature of sampled values, composed of tapegrad operations, so
differentiable in the samples ``y`` and the abscissae ``x`` to any order, in both modes."""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad._typing import Array, ArrayLike, Axis
from tapegrad.numpy.linalg._common import float_operand


def _spacings(y, x, dx, axis, name):
    """The spacings along ``axis``: ``dx``, or ``diff(x)`` shaped to broadcast against ``y``."""
    if x is None:
        return dx
    x = float_operand(x)
    n = tnp.shape(y)[axis]
    if tnp.ndim(x) == 1:
        if tnp.shape(x)[0] != n:
            raise ValueError(f"{name}: x has {tnp.shape(x)[0]} points, but y has {n} along axis {axis}")
        shape = [1] * tnp.ndim(y)
        shape[axis] = n
        x = tnp.reshape(x, tuple(shape))
    elif tnp.ndim(x) != tnp.ndim(y) or tnp.shape(x)[axis] != n:
        raise ValueError(f"{name}: x must be 1-D with y's length along axis, or y's shape; got x "
                         f"{tnp.shape(x)} and y {tnp.shape(y)}")
    return tnp.diff(x, axis=axis)


def _take(a, axis, start, stop=None, step=1):
    """``a[..., start:stop:step, ...]`` along ``axis``."""
    index = [slice(None)] * tnp.ndim(a)
    index[axis] = slice(start, stop, step)
    return a[tuple(index)]


def _at(a, axis, i):
    """``a[..., i, ...]`` along ``axis`` (the axis dropped); a Python number as it is."""
    if not tnp.ndim(a):
        return a
    index = [slice(None)] * tnp.ndim(a)
    index[axis] = i
    return a[tuple(index)]


def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: float = 1.0, axis: Axis = -1) -> Array:
    """The integral of the samples ``y`` by the trapezoidal rule, as ``scipy.integrate.trapezoid``.

    Args:
        y: the samples.
        x: their abscissae: 1-D (``y``'s length along ``axis``) or ``y``'s shape; default evenly
            spaced by ``dx``.
        dx: the spacing when ``x`` is None.
        axis: the axis to integrate along.

    Returns:
        ``y``'s shape without ``axis``; differentiable in ``y`` and ``x``.

    Raises:
        ValueError: ``x`` of a shape that does not fit ``y``.
    """
    y = float_operand(y)
    d = _spacings(y, x, dx, axis, "trapezoid")
    return tnp.sum(d * (_take(y, axis, 1) + _take(y, axis, 0, -1)) / 2.0, axis=axis)


def _ratio(num, den):
    """``num / den``, 0 where ``den`` is 0 (SciPy's ``true_divide(..., where=den != 0)``), with finite
    derivatives there ("double where")."""
    if not tnp.ndim(num) and not tnp.ndim(den) and isinstance(den, (int, float)):  # a spacing dx
        return num / den if den else 0.0
    zero = den == 0
    return tnp.where(zero, 0.0, num / tnp.where(zero, 1.0, den))


def _basic_simpson(y, stop, h, axis):
    """Simpson's rule over the intervals ``0 .. stop`` (pairs), ``h`` the spacings (or a number)."""
    y0, y1, y2 = (_take(y, axis, k, stop + k, 2) for k in range(3))
    if not tnp.ndim(h):
        return tnp.sum(y0 + 4.0 * y1 + y2, axis=axis) * (h / 3.0)
    h0, h1 = _take(h, axis, 0, stop, 2), _take(h, axis, 1, stop + 1, 2)
    hsum, hprod = h0 + h1, h0 * h1
    h0_h1 = _ratio(h0, h1)
    terms = hsum / 6.0 * (y0 * (2.0 - _ratio(1.0, h0_h1)) + y1 * (hsum * _ratio(hsum, hprod)) + y2 * (2.0 - h0_h1))
    return tnp.sum(terms, axis=axis)


def simpson(y: ArrayLike, x: ArrayLike = None, *, dx: float = 1.0, axis: int = -1) -> Array:
    """The integral of the samples ``y`` by Simpson's rule, as ``scipy.integrate.simpson`` (SciPy 1.11+).

    With an odd number of samples, composite Simpson over pairs of intervals; with an even number,
    Simpson over all but the last interval and Cartwright's correction for the last one (SciPy's
    rule since 1.11); with two samples, the trapezoid. Unequal spacings follow SciPy's formulas.

    Args:
        y, x, dx, axis: as :func:`trapezoid`.

    Returns:
        ``y``'s shape without ``axis``; differentiable in ``y`` and ``x``.

    Raises:
        ValueError: ``x`` of a shape that does not fit ``y``.
    """
    y = float_operand(y)
    axis = axis % tnp.ndim(y)
    n = tnp.shape(y)[axis]
    h = _spacings(y, x, dx, axis, "simpson")
    if n % 2:
        return _basic_simpson(y, n - 2, h, axis)
    last, before = _at(y, axis, -1), _at(y, axis, -2)
    if n == 2:
        return 0.5 * _at(h, axis, -1) * (last + before)
    h0, h1 = (_at(h, axis, -2), _at(h, axis, -1)) if tnp.ndim(h) else (h, h)
    alpha = _ratio(2 * h1 ** 2 + 3 * h0 * h1, 6 * (h1 + h0))
    beta = _ratio(h1 ** 2 + 3.0 * h0 * h1, 6 * h0)
    eta = _ratio(h1 ** 3, 6 * h0 * (h0 + h1))
    return _basic_simpson(y, n - 3, h, axis) + alpha * last + beta * before - eta * _at(y, axis, -3)
