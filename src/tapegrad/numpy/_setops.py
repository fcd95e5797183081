"""Set operations: ``unique`` (and the array API's ``unique_all``, ``unique_counts``,
``unique_inverse``, ``unique_values``), ``isin``, ``intersect1d``, ``union1d``, ``setdiff1d``,
``setxor1d``.

All are built on one sort: ``x`` flattened and sorted stably, the first element of each run of
equal values marked; the marked positions (``true_positions``) give the values, the first
occurrences, the counts and the inverse. So:

- the values are a gather of the input (the first occurrence of each value), differentiable in it,
  in both modes; the indices, the inverse, the counts and ``isin`` are integers or booleans,
  non-differentiable;
- the number of distinct values depends on the data: eagerly (``grad`` too) the result has exactly
  that length, as in NumPy; under ``jit``/``vmap`` pass ``size=`` (and ``fill_value=``, default the
  smallest value), as in JAX, or a ``ConcretizationError`` says so.
"""
from __future__ import annotations

import operator
from typing import NamedTuple, cast

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis, ShapeLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import full_like, zeros_like
from tapegrad.numpy._indexing import IndexUpdateRef, take
from tapegrad.numpy._reductions import cumsum
from tapegrad.numpy._searching import concrete, constant_like, host_value, searchsorted, true_positions
from tapegrad.numpy._sorting import argsort
from tapegrad.numpy._statistics import operand


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


# ---- the sorted runs -----------------------------------------------------------------------------
class _Runs:
    """``x`` (1-D) sorted stably (``order``, ``sorted``) and ``first``: True at the first element of
    each run of equal values (NaNs one run with ``equal_nan``)."""

    def __init__(self, x, equal_nan: bool = True):
        self.n = _shape.size(x)
        self.order = argsort(x, stable=True)
        self.sorted = take(x, self.order)
        if self.n == 0:
            self.first = _shape.reshape(self.sorted != self.sorted, (0,))
            return
        s = self.sorted
        new = s[1:] != s[:-1]
        if equal_nan and np.dtype(s.dtype).kind in "fc":
            new = new & ~(ew.isnan(s[1:]) & ew.isnan(s[:-1]))
        self.first = _shape.concatenate([full_like(new, True, shape=(1,)), new], axis=0)

    def starts(self, keep, size, name):
        """The first ``size`` (None: all; concrete ``keep`` only) marked positions, padded with
        ``n``, and one more after them (the next run's start, for the counts)."""
        if size is None:
            size = int(np.count_nonzero(concrete(keep, name)))
        return true_positions(keep, operator.index(size) + 1, name)


def _picked(runs, starts, fill_value):
    """``(values, valid, safe)``: the sorted values at ``starts`` (``safe`` in range), padding
    filled with ``fill_value`` (default: the smallest value, JAX's choice)."""
    valid = starts < runs.n
    safe = ew.where(valid, starts, 0)
    values = take(runs.sorted, safe)
    if fill_value is not None:
        values = ew.where(valid, values, ew.astype(operand(fill_value), values.dtype))
    return values, valid, safe


# ---- unique --------------------------------------------------------------------------------------
def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: Axis = None, *, equal_nan: bool = True, size: ShapeLike | None = None, fill_value: ArrayLike = None,
           sorted: bool = True) -> Array | tuple[Array, ...]:
    """The sorted distinct values of ``ar`` (flattened, or the distinct slices along ``axis``), as
    ``numpy.unique``; with the flags, a tuple ``(values, index, inverse, counts)`` holding the ones
    asked for: the first occurrence of each value, for each element of ``ar`` the position of its
    value (shaped like ``ar`` for ``axis=None``), and how often each value occurs.

    The values are differentiable in ``ar`` (each is its first occurrence); everything else is an
    ``intp`` constant. NaNs are one value with ``equal_nan=True`` (NumPy's default). ``sorted`` is
    accepted for NumPy's signature; the values always come sorted.

    Args:
        size: the number of values to return (truncated, or padded with ``fill_value``): required
            under jit/vmap, as in ``jax.numpy.unique``; padded slots have count 0 and index 0.
        fill_value: the padding; default the smallest value.

    Raises:
        ConcretizationError: under jit/vmap without ``size``, or with ``axis``.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    ar = operand(ar)
    if axis is not None:
        return _unique_along(ar, axis, return_index, return_inverse, return_counts, equal_nan)
    runs = _Runs(_shape.ravel(ar), equal_nan)
    starts = runs.starts(runs.first, size, "unique")
    values, valid, safe = _picked(runs, starts[:-1], fill_value)
    extra = []
    if return_index:
        extra.append(ew.where(valid, take(runs.order, safe), 0))
    if return_inverse:
        extra.append(_shape.reshape(_inverse(runs), _shape.shape(ar)))
    if return_counts:
        extra.append(starts[1:] - starts[:-1])
    return (values, *extra) if extra else values


def _inverse(runs):
    """For each element (in ``x``'s order) the number of its value among the sorted distinct ones."""
    if runs.n == 0:
        return _shape.reshape(runs.order, (0,))
    group = cumsum(ew.astype(runs.first, np.intp)) - 1
    return IndexUpdateRef(zeros_like(runs.order), runs.order).set(group)


def _unique_along(ar, axis, return_index, return_inverse, return_counts, equal_nan):
    """``unique`` of the slices along ``axis``: NumPy finds them on the concrete values; the values
    are the gather of those slices (differentiable), the rest constants."""
    value = host_value(ar, "unique(axis=...): NumPy finds the distinct slices, so the values must be concrete; "
                           "under jit/vmap use axis=None with size=")
    _, index, inverse, counts = np.unique(value, True, True, True, axis=axis, equal_nan=equal_nan)
    values = take(ar, index, axis=axis)
    extra = [r for r, asked in ((index, return_index), (inverse, return_inverse), (counts, return_counts)) if asked]
    return (values, *extra) if extra else values


def unique_all(x: ArrayLike, /, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> UniqueAllResult:
    """``UniqueAllResult(values, indices, inverse_indices, counts)`` of ``x``, as ``numpy.unique_all``
    (``inverse_indices`` shaped like ``x``); sorted values. ``size``/``fill_value`` as :func:`unique`."""
    return UniqueAllResult(*unique(x, True, True, True, size=size, fill_value=fill_value))


def unique_counts(x: ArrayLike, /, *, size: ShapeLike | None = None,
                  fill_value: ArrayLike = None) -> UniqueCountsResult:
    """``UniqueCountsResult(values, counts)`` of ``x``, as ``numpy.unique_counts``."""
    return UniqueCountsResult(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x: ArrayLike, /, *, size: ShapeLike | None = None,
                   fill_value: ArrayLike = None) -> UniqueInverseResult:
    """``UniqueInverseResult(values, inverse_indices)`` of ``x``, as ``numpy.unique_inverse``."""
    return UniqueInverseResult(*unique(x, return_inverse=True, size=size, fill_value=fill_value))


def unique_values(x: ArrayLike, /, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> Array:
    """The distinct values of ``x``, as ``numpy.unique_values``, always sorted (NumPy's order is
    unspecified, and NumPy 2.3+ returns them unsorted). ``size``/``fill_value`` as :func:`unique`."""
    return cast(Array, unique(x, size=size, fill_value=fill_value))  # no flag asked: the values alone


# ---- membership ----------------------------------------------------------------------------------
def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         kind: str | None = None) -> Array:
    """Whether each element of ``element`` is among ``test_elements``, as ``numpy.isin``: a boolean
    array shaped like ``element`` (negated with ``invert``); NaN is never found (NaN != NaN).
    Found by binary search in the sorted test elements (O((n + m) log m)); ``assume_unique`` and
    ``kind`` are accepted for NumPy's signature. Non-differentiable.
    """
    element = operand(element)
    test = test_elements if hasattr(test_elements, "shape") else constant_like(element, np.asarray(test_elements))
    test = _shape.ravel(test)
    if _shape.size(test) == 0:
        found = zeros_like(element, dtype=np.bool_)
    else:
        dtype = np.result_type(element.dtype, test.dtype)
        element_c = element if np.dtype(element.dtype) == dtype else ew.astype(element, dtype)
        test = test if np.dtype(test.dtype) == dtype else ew.astype(test, dtype)
        table = take(test, argsort(test))
        at = ew.clip(searchsorted(table, element_c), 0, _shape.size(table) - 1)
        found = take(table, at) == element_c
    return ~found if invert else found


# ---- two sets ------------------------------------------------------------------------------------
def _select(runs, keep, size, fill_value, name):
    starts = runs.starts(keep, size, name)
    return _picked(runs, starts[:-1], fill_value)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> Array:
    """The sorted distinct values found in either array (both flattened), as ``numpy.union1d``.
    Differentiable: each value comes from its first occurrence in ``ar1``, else in ``ar2``.
    ``size``/``fill_value`` as :func:`unique`."""
    joined = _shape.concatenate([_shape.ravel(operand(ar1)), _shape.ravel(operand(ar2))], axis=0)
    return cast(Array, unique(joined, size=size, fill_value=fill_value))  # the values alone


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, return_indices: bool = False, *,
                size: ShapeLike | None = None, fill_value: ArrayLike = None) -> Array | tuple[Array, Array, Array]:
    """The sorted distinct values found in both arrays (flattened), as ``numpy.intersect1d``; with
    ``return_indices``, also the index of each value's first occurrence in ``ar1`` and in ``ar2``.
    Differentiable in ``ar1`` (the values are gathered from it). ``size``/``fill_value`` as
    :func:`unique` (padded indices are 0).
    """
    a, b = _shape.ravel(operand(ar1)), _shape.ravel(operand(ar2))
    runs = _Runs(a)
    values, valid, safe = _select(runs, runs.first & isin(runs.sorted, b), size, fill_value, "intersect1d")
    if not return_indices:
        return values
    index1 = ew.where(valid, take(runs.order, safe), 0)
    order2 = argsort(b, stable=True)
    sorted2 = take(b, order2)
    at = ew.clip(searchsorted(sorted2, take(runs.sorted, safe)), 0, max(_shape.size(b) - 1, 0))
    index2 = ew.where(valid, take(order2, at), 0) if _shape.size(b) else ew.where(valid, safe, 0)
    return values, index1, index2


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: ShapeLike | None = None,
              fill_value: ArrayLike = None) -> Array:
    """The values of ``ar1`` not in ``ar2``, as ``numpy.setdiff1d``: sorted and distinct, or, with
    ``assume_unique=True``, in ``ar1``'s order (NumPy's behaviour). Differentiable in ``ar1``.
    ``size``/``fill_value`` as :func:`unique`."""
    a, b = _shape.ravel(operand(ar1)), _shape.ravel(operand(ar2))
    if assume_unique:
        keep = isin(a, b, invert=True)
        starts = true_positions(keep, size, "setdiff1d")
        valid = starts < _shape.size(a)
        values = take(a, ew.where(valid, starts, 0)) if _shape.size(a) else a
        return values if fill_value is None else ew.where(valid, values, fill_value)
    runs = _Runs(a)
    return _select(runs, runs.first & isin(runs.sorted, b, invert=True), size, fill_value, "setdiff1d")[0]


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: ShapeLike | None = None,
             fill_value: ArrayLike = None) -> Array:
    """The sorted distinct values found in exactly one of the arrays, as ``numpy.setxor1d``.
    Differentiable (each value from the array that holds it). NaN, never equal to itself, is left
    out (NumPy keeps one NaN from each array that has one). ``size``/``fill_value`` as :func:`unique`.
    """
    a, b = _shape.ravel(operand(ar1)), _shape.ravel(operand(ar2))
    runs = _Runs(_shape.concatenate([a, b], axis=0))
    keep = runs.first & (isin(runs.sorted, a) != isin(runs.sorted, b))
    return _select(runs, keep, size, fill_value, "setxor1d")[0]


__all__ = [
    "intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all", "unique_counts",
    "unique_inverse", "unique_values",
]
