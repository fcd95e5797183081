"""Joining, inserting and writing: ``append``, ``insert``, ``delete``, ``block``, and the functional
forms of NumPy's in-place writers ``put``, ``put_along_axis``, ``fill_diagonal``.

``insert`` and ``delete`` let NumPy itself lay the result out, on integer tags instead of the data:
``np.insert(tags_of_arr, obj, tags_of_values)`` says, for each output element, which element of
``arr`` or of ``values`` it is, so NumPy's many rules for ``obj`` (ints, slices, sequences, negative
and repeated positions) hold exactly, and the result is a gather that is differentiable in both.

NumPy's ``put``/``put_along_axis``/``fill_diagonal`` (and ``place``, in ``_reorder``) write into
their argument and return None; tapegrad arrays are never written into, so, as in JAX, they return
the new array and require ``inplace=False``: with the default ``inplace=True`` they raise, because
code that expects its array to change would otherwise silently keep the old values.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import Boxed, Tracer
from tapegrad._typing import ArrayLike, Axis
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._indexing import IndexUpdateRef, take
from tapegrad.numpy._reductions import normalize_axis
from tapegrad.numpy._searching import constant_like, host_value
from tapegrad.numpy._statistics import operand


def _static_index(obj, name: str):
    """``obj`` (positions, a slice or a mask) as NumPy takes it: a traced one must be concrete."""
    if not isinstance(obj, (Tracer, Boxed)):
        return obj
    return host_value(obj, f"{name}: the positions decide the result's shape, so they must be concrete (not "
                           "traced by jit or vmap): pass them as a static argument")


def _gather_by_tags(layout, sources):
    """The array whose element ``i`` is ``ravel(sources[s])[j]`` where ``layout`` (NumPy's result on
    tags) holds ``tag = offset_s + j + 1``: one gather from the sources joined end to end."""
    flat = _shape.concatenate([_shape.ravel(s) for s in sources], axis=0)
    return _shape.reshape(take(flat, constant_like(flat, layout - 1)), layout.shape)


def _tags(shape, start: int = 0):
    return np.arange(start + 1, start + 1 + int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


# ---- append, insert, delete ----------------------------------------------------------------------
def append(arr: ArrayLike, values: ArrayLike, axis: Axis = None) -> Array:
    """``values`` joined to the end of ``arr``, as ``numpy.append``: both flattened when ``axis`` is
    None, else joined along ``axis`` (shapes must agree off it). Differentiable in both.

    Raises:
        ValueError: shapes that disagree off ``axis``.
    """
    arr, values = operand(arr), operand(values)
    if axis is None:
        return _shape.concatenate([_shape.ravel(arr), _shape.ravel(values)], axis=0)
    return _shape.concatenate([arr, values], axis=axis)


def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Array:
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (None: of the
    flattened ``arr``), as ``numpy.insert``, with NumPy's rules for ``obj`` (an int, a slice or a
    sequence of ints) and for broadcasting ``values``; ``values`` are cast to ``arr``'s dtype.
    Differentiable in ``arr`` and ``values``; ``obj`` must be concrete.

    Raises:
        IndexError: a position out of range. ValueError: ``values`` that cannot broadcast.
        ConcretizationError: ``obj`` traced under jit or vmap.
    """
    arr, values = operand(arr), operand(values)
    obj = _static_index(obj, "insert")
    arr_shape, val_shape = tuple(_shape.shape(arr)), tuple(_shape.shape(values))
    arr_tags = _tags(arr_shape)
    layout = np.insert(arr_tags, obj, _tags(val_shape, arr_tags.size), axis=axis)
    if np.dtype(values.dtype) != np.dtype(arr.dtype):
        values = ew.astype(values, arr.dtype)
    return _gather_by_tags(layout, [arr, values])


def delete(arr: ArrayLike, obj: Any, axis: int | None = None) -> Array:
    """``arr`` without the sub-arrays at ``obj`` along ``axis`` (None: of the flattened ``arr``), as
    ``numpy.delete`` (``obj``: an int, a slice, a sequence of ints or a boolean mask).
    Differentiable in ``arr``; ``obj`` must be concrete.

    Raises:
        IndexError: a position out of range. ConcretizationError: ``obj`` traced under jit or vmap.
    """
    arr = operand(arr)
    obj = _static_index(obj, "delete")
    layout = np.delete(_tags(tuple(_shape.shape(arr))), obj, axis=axis)
    return _gather_by_tags(layout, [arr])


# ---- block ---------------------------------------------------------------------------------------
def _depths(arrays, where=()):
    """The list depth of each leaf of the nested lists ``arrays``, checked to be all the same."""
    if isinstance(arrays, tuple):
        raise TypeError(f"arrays{_where(where)} is a tuple. Only lists can be used to arrange blocks, and "
                        "np.block does not allow implicit conversion from tuple to ndarray.")
    if not isinstance(arrays, list):
        return len(where)
    if not arrays:
        raise ValueError(f"List at arrays{_where(where)} cannot be empty")
    depths = {_depths(a, where + (i,)) for i, a in enumerate(arrays)}
    if len(depths) != 1:
        raise ValueError(f"List depths are mismatched at arrays{_where(where)}: found depths {sorted(depths)}")
    return depths.pop()


def _where(where) -> str:
    return "".join(f"[{i}]" for i in where)


def _max_ndim(arrays) -> int:
    if isinstance(arrays, list):
        return max(_max_ndim(a) for a in arrays)
    return _shape.ndim(operand(arrays))


def block(arrays: Any) -> Array:
    """An array assembled from nested lists of blocks, as ``numpy.block``: the innermost lists are
    joined along the last axis, the next ones along the one before, and so on; blocks of lower rank
    get leading unit axes first. Differentiable in every block.

    Raises:
        ValueError: lists nested to different depths, an empty list, or blocks that do not fit.
        TypeError: a tuple where a list is expected.
    """
    depth = _depths(arrays)
    ndim = max(_max_ndim(arrays), depth)
    dtype = np.result_type(*(getattr(x, "dtype", x) for x in _leaves(arrays)))  # Python scalars weak

    def assemble(item, level):
        if not isinstance(item, list):
            x = operand(item)
            x = _shape.reshape(x, (1,) * (ndim - _shape.ndim(x)) + tuple(_shape.shape(x)))
            return x if np.dtype(x.dtype) == dtype else ew.astype(x, dtype)
        parts = [assemble(a, level + 1) for a in item]
        return _shape.concatenate(parts, axis=ndim - depth + level)
    return assemble(arrays, 0)


def _leaves(arrays):
    if isinstance(arrays, list):
        return [leaf for a in arrays for leaf in _leaves(a)]
    return [arrays if type(arrays) in (int, float, complex, bool) else operand(arrays)]


# ---- the in-place writers, functionally ----------------------------------------------------------
def _refuse_inplace(inplace: bool, name: str):
    if inplace:
        raise ValueError(f"tapegrad.numpy.{name} cannot modify an array in place (NumPy's numpy.{name} "
                         "writes into its argument and returns None; tapegrad arrays are never written "
                         f"into): call {name}(..., inplace=False), which returns the updated array, as "
                         f"jax.numpy.{name} does")


def _cycled(values, n: int, a):
    """``n`` values taken in turn from ``values`` flattened (NumPy's ``a.flat[i] = values``), in
    ``a``'s dtype and on its backend."""
    dtype = a.dtype
    values = _shape.ravel(values if hasattr(values, "shape") else constant_like(a, np.asarray(values)))
    if np.dtype(values.dtype) != np.dtype(dtype):
        values = ew.astype(values, dtype)
    if _shape.size(values) == n:
        return values
    if _shape.size(values) == 0:
        if n:
            raise ValueError("cannot write an empty sequence of values into a non-empty selection")
        return values
    return take(values, constant_like(values, np.arange(n) % _shape.size(values)))


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str = "raise", *, inplace: bool = True) -> Array:
    """A copy of ``a`` with its flattened elements at ``ind`` replaced by ``v`` (repeated in turn if
    shorter), as ``numpy.put`` done functionally (``inplace=False`` is required, as in JAX).
    ``mode``: ``'raise'`` (concrete positions checked), ``'wrap'`` or ``'clip'``. Where ``ind``
    repeats a position, the last write wins, as in NumPy. Differentiable in ``a`` and ``v``.

    Raises:
        ValueError: ``inplace=True``; an unknown ``mode``.
        IndexError: a position out of range with ``mode='raise'``.
    """
    _refuse_inplace(inplace, "put")
    a = operand(a)
    ind = _shape.ravel(ind if hasattr(ind, "shape") else constant_like(a, np.asarray(ind)))
    size = _shape.size(a)
    if mode == "wrap":
        ind = ind % size
    elif mode == "clip":
        ind = ew.clip(ind, 0, size - 1)
    elif mode == "raise":
        ind = _checked_positions(ind, size, "put")
    else:
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    flat = IndexUpdateRef(_shape.ravel(a), ind).set(_cycled(v, _shape.size(ind), a))
    return _shape.reshape(flat, _shape.shape(a))


def _checked_positions(ind, size: int, name: str):
    """Flat positions in ``[-size, size)``, negatives counted from the end, checked where concrete."""
    value = host_value(ind, f"{name}: mode='raise' needs concrete positions to check them; under jit or vmap "
                            "pass mode='wrap' or mode='clip'")
    if value.size and (value.min() < -size or value.max() >= size):
        raise IndexError(f"{name}: index out of range for an array of size {size}")
    return ind


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int, inplace: bool = True, *,
                   mode: str | None = None) -> Array:
    """A copy of ``arr`` with ``values`` written at ``indices`` along ``axis`` (the transpose of
    ``take_along_axis``), as ``numpy.put_along_axis`` done functionally (``inplace=False`` is
    required, as in JAX). ``values`` broadcast against ``indices``; ``axis=None`` works on the
    flattened ``arr``. ``mode`` is accepted for JAX's signature: NumPy's indexing rules apply (an
    index out of range raises). Differentiable in ``arr`` and ``values``.

    Raises:
        ValueError: ``inplace=True``; ``indices`` not of ``arr``'s rank.
    """
    _refuse_inplace(inplace, "put_along_axis")
    arr, indices = operand(arr), operand(indices)
    if axis is None:
        flat = IndexUpdateRef(_shape.ravel(arr), _shape.ravel(indices)).set(_shape.ravel(operand(values)))
        return _shape.reshape(flat, _shape.shape(arr))
    shape = tuple(_shape.shape(arr))
    if _shape.ndim(indices) != len(shape):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    axis = normalize_axis(operator.index(axis), len(shape))[0]
    index = tuple(indices if d == axis else
                  constant_like(arr, np.arange(n).reshape([-1 if k == d else 1 for k in range(len(shape))]))
                  for d, n in enumerate(shape))
    return IndexUpdateRef(arr, index).set(values)


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *, inplace: bool = True) -> Array:
    """A copy of ``a`` with its main diagonal set to ``val`` (repeated in turn if shorter), as
    ``numpy.fill_diagonal`` done functionally (``inplace=False`` is required, as in JAX). For a tall
    2-D ``a``, ``wrap=True`` restarts the diagonal every ``ncols + 1`` rows, as NumPy does.
    Differentiable in ``a`` and ``val``.

    Raises:
        ValueError: ``inplace=True``; ``a`` of fewer than 2 dimensions, or of unequal ones (beyond 2-D).
    """
    _refuse_inplace(inplace, "fill_diagonal")
    a = operand(a)
    shape = tuple(_shape.shape(a))
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) == 2:
        step, end = shape[1] + 1, (None if wrap else shape[1] * shape[1])
    else:
        if len(set(shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    positions = np.arange(_shape.size(a))[:end:step]
    flat = _shape.ravel(a)
    flat = IndexUpdateRef(flat, constant_like(a, positions)).set(_cycled(val, positions.size, a))
    return _shape.reshape(flat, shape)


__all__ = ["append", "block", "delete", "fill_diagonal", "insert", "put", "put_along_axis"]
