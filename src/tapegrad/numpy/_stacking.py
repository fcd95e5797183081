"""Stacking and splitting: ``atleast_1d/2d/3d``, ``vstack``, ``hstack``, ``dstack``, ``column_stack``,
``array_split``, ``hsplit``, ``vsplit``, ``dsplit``.

All are reshapes, concatenations and slices, so they are linear and their derivatives (both modes,
every order) come from those primitives' rules.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._reductions import normalize_axis


# ---- at least n dimensions -----------------------------------------------------------------------
def _reshaped_each(arys, to_shape):
    out = []
    for a in arys:
        a = as_operand(a)
        shape = tuple(_shape.shape(a))
        new = to_shape(shape)
        out.append(a if new == shape else _shape.reshape(a, new))
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys: ArrayLike) -> Array:
    """Each input with at least one axis (a scalar becomes shape ``(1,)``), as ``numpy.atleast_1d``.

    Returns one array for one input, else a tuple of arrays (NumPy 2).
    """
    return _reshaped_each(arys, lambda s: s or (1,))


def atleast_2d(*arys: ArrayLike) -> Array:
    """Each input with at least two axes: ``()`` -> ``(1, 1)``, ``(N,)`` -> ``(1, N)``, as
    ``numpy.atleast_2d``; one array for one input, else a tuple."""
    return _reshaped_each(arys, lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else s)


def atleast_3d(*arys: ArrayLike) -> Array:
    """Each input with at least three axes: ``()`` -> ``(1, 1, 1)``, ``(N,)`` -> ``(1, N, 1)``,
    ``(M, N)`` -> ``(M, N, 1)``, as ``numpy.atleast_3d``; one array for one input, else a tuple."""
    def to_3d(s):
        return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
    return _reshaped_each(arys, to_3d)


# ---- stacking ------------------------------------------------------------------------------------
def _join(arrays, axis, dtype, name):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}: need at least one array to concatenate")
    if dtype is not None:
        arrays = [ew.astype(a, dtype) for a in arrays]
    return _shape.concatenate(arrays, axis=axis)


def _at_least(fn, tup) -> list:
    """``fn(*tup)`` as a list (``tup`` may be any sequence of arrays, or an array of rows)."""
    arrays = list(tup)
    if not arrays:
        return []
    result = fn(*arrays)
    return list(result) if isinstance(result, tuple) else [result]


def vstack(tup: ArrayLike, *, dtype: DTypeLike = None, casting: str = "same_kind") -> Array:
    """Stack arrays vertically (row-wise): ``concatenate(atleast_2d(*tup), axis=0)``, as
    ``numpy.vstack``. ``dtype`` converts the inputs first; ``casting`` is accepted and not checked.

    Raises:
        ValueError: an empty ``tup``, or shapes that do not line up.
    """
    return _join(_at_least(atleast_2d, tup), 0, dtype, "vstack")


def hstack(tup: ArrayLike, *, dtype: DTypeLike = None, casting: str = "same_kind") -> Array:
    """Stack arrays horizontally (column-wise), as ``numpy.hstack``: along axis 0 for 1-D inputs,
    else along axis 1."""
    arrays = _at_least(atleast_1d, tup)
    axis = 0 if arrays and _shape.ndim(arrays[0]) == 1 else 1
    return _join(arrays, axis, dtype, "hstack")


def dstack(tup: ArrayLike) -> Array:
    """Stack arrays along the third axis: ``concatenate(atleast_3d(*tup), axis=2)``, as
    ``numpy.dstack``."""
    return _join(_at_least(atleast_3d, tup), 2, None, "dstack")


def column_stack(tup: ArrayLike) -> Array:
    """Stack 1-D arrays as columns of a 2-D array (2-D inputs are stacked as they are), as
    ``numpy.column_stack``."""
    arrays = []
    for v in tup:
        v = as_operand(v)
        shape = tuple(_shape.shape(v))
        arrays.append(_shape.reshape(v, (shape[0] if shape else 1, 1)) if len(shape) < 2 else v)
    return _join(arrays, 1, None, "column_stack")


# ---- splitting -----------------------------------------------------------------------------------
def array_split(ary: ArrayLike, indices_or_sections: Any, axis: Axis = 0) -> list[Array]:
    """Split ``ary`` into pieces along ``axis``, as ``numpy.array_split``.

    Args:
        ary: the array.
        indices_or_sections: an int ``N`` (``N`` pieces, the first ``len % N`` one longer), or a
            sequence of split points (sliced as Python slices: out-of-range points give empty pieces).
        axis: the axis to split.

    Returns:
        A list of arrays (views' equivalents are slices, so the gradient of each lands in its place).

    Raises:
        ValueError: a number of sections ``<= 0``.
    """
    ary = as_operand(ary)
    axis = normalize_axis(axis, _shape.ndim(ary))[0]
    total = _shape.shape(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extras = divmod(total, sections)
        sizes = [each + 1] * extras + [each] * (sections - extras)
        points = [0]
        for size in sizes:
            points.append(points[-1] + size)
    else:
        points = [0] + [operator.index(i) for i in indices_or_sections] + [total]
    lead = (slice(None),) * axis
    return [ary[lead + (slice(start, end),)] for start, end in zip(points[:-1], points[1:])]


def _split_checked(ary, indices_or_sections, axis):
    ary = as_operand(ary)
    if isinstance(indices_or_sections, (int, np.integer)) and indices_or_sections > 0:
        if _shape.shape(ary)[axis] % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> Array:
    """Split along axis 1 (axis 0 for 1-D input) into equal pieces or at indices, as
    ``numpy.hsplit``.

    Raises:
        ValueError: a 0-d ``ary``, or sections that do not divide the axis equally.
    """
    ndim = _shape.ndim(as_operand(ary))
    if ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return _split_checked(ary, indices_or_sections, 1 if ndim > 1 else 0)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> Array:
    """Split along axis 0, as ``numpy.vsplit`` (for arrays of 2 or more dimensions).

    Raises:
        ValueError: ``ary`` with fewer than 2 dimensions, or an unequal division.
    """
    if _shape.ndim(as_operand(ary)) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return _split_checked(ary, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> Array:
    """Split along axis 2, as ``numpy.dsplit`` (for arrays of 3 or more dimensions).

    Raises:
        ValueError: ``ary`` with fewer than 3 dimensions, or an unequal division.
    """
    if _shape.ndim(as_operand(ary)) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return _split_checked(ary, indices_or_sections, 2)
