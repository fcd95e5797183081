"""Applying a function along axes: ``apply_along_axis`` and ``apply_over_axes``.

``apply_along_axis`` calls the function on each 1-D slice, as NumPy does (so the function may be
any Python, with control flow on concrete values), and stacks the results; ``apply_over_axes``
applies it once per axis. Derivatives come from the operations the function performs.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _shape
from tapegrad.numpy._reductions import normalize_axis
from tapegrad.numpy._statistics import operand


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Array:
    """``func1d`` applied to each 1-D slice of ``arr`` along ``axis``, as ``numpy.apply_along_axis``:
    the result has shape ``arr.shape[:axis] + r.shape + arr.shape[axis+1:]``, where ``r`` is one
    call's result (every call must return the same shape). ``func1d`` runs once per slice (a Python
    loop, as in NumPy; ``tg.vmap(func1d)`` batches it in one call where it is traceable).

    Raises:
        ValueError: an iteration axis of length 0, or calls returning different shapes.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    arr = operand(arr)
    nd = _shape.ndim(arr)
    axis = normalize_axis(operator.index(axis), nd)[0]
    moved = _shape.moveaxis(arr, axis, -1)
    outer = tuple(_shape.shape(moved))[:-1]
    if any(d == 0 for d in outer):
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [operand(func1d(moved[index], *args, **kwargs)) for index in np.ndindex(*outer)]
    shapes = {tuple(_shape.shape(r)) for r in results}
    if len(shapes) != 1:
        raise ValueError(f"apply_along_axis: func1d returned arrays of different shapes {sorted(shapes)}")
    inner = shapes.pop()
    out = _shape.reshape(_shape.stack(results), outer + inner)
    # the result's own axes go where ``axis`` was
    order = list(range(axis)) + list(range(len(outer), len(outer) + len(inner))) + list(range(axis, len(outer)))
    return _shape.transpose(out, order)


def apply_over_axes(func: Callable[..., Any], a: ArrayLike, axes: Any) -> Array:
    """``func(a, axis)`` applied for each axis in ``axes`` in turn, each result kept at ``a``'s rank
    (a reduced axis comes back as length 1), as ``numpy.apply_over_axes``.

    Raises:
        ValueError: ``func`` returning an array that is neither ``a``'s rank nor one less.
    """
    val = operand(a)
    n = _shape.ndim(val)
    for axis in (axes,) if np.ndim(axes) == 0 else axes:
        axis = operator.index(axis)
        axis = axis + n if axis < 0 else axis
        res = operand(func(val, axis))
        if _shape.ndim(res) != _shape.ndim(val):
            res = _shape.expand_dims(res, axis)
            if _shape.ndim(res) != _shape.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


__all__ = ["apply_along_axis", "apply_over_axes"]
