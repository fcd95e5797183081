"""JAX's dynamic slices (``lax.dynamic_slice`` and its relatives) composed of ``tapegrad.numpy``
indexing: a start known now is a static slice, a traced start of a slice of length 1 an integer index
(both basic indexing, which jit's compiled executor lowers), a traced start of a longer slice a gather
of ``start + arange(size)``; an update is ``.at[...].set`` with the same index."""
from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy._indexing import IndexUpdateRef, getitem


# ---- start indices -------------------------------------------------------------------------------
def _static_int(value) -> int | None:
    """``value`` as a Python int when it is known now (a Python or NumPy integer, a 0-d NumPy integer
    array), else None (a tracer, or a device array, which is not copied to the host to find out)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def _check_integer(start, fn: str, where: str) -> Array:
    """A traced start index as a 0-d integer array; anything else is a clear TypeError."""
    start = tnp.asarray(start)
    if start.ndim != 0 or np.dtype(start.dtype).kind not in "iu":
        raise TypeError(f"{fn}: {where} must be a scalar integer, got shape {tuple(start.shape)} and dtype "
                        f"{np.dtype(start.dtype).name}; cast it with .astype(int) (a start index is a position)")
    return start


def _clamped_start(start, dim: int, size: int, allow_negative: bool, fn: str, where: str):
    """The start of a ``size``-long slice of an axis of length ``dim``, as XLA takes it: a negative
    start counts from the end (where ``allow_negative``), then it is clamped to ``[0, dim - size]`` so
    the slice fits. A Python int when ``start`` is known now (the slice is then static), else a 0-d
    integer array."""
    known = _static_int(start)
    if known is not None:
        if known < 0 and not allow_negative:  # JAX refuses a known negative index here too
            raise ValueError(f"{fn}: {where} is {known}, negative, with allow_negative_indices=False; pass "
                             "allow_negative_indices=True to count it from the end of the axis")
        known = known + dim if known < 0 else known
        return builtins.min(builtins.max(known, 0), dim - size)
    start = _check_integer(start, fn, where)
    if allow_negative and np.dtype(start.dtype).kind == "i":
        start = tnp.where(start < 0, start + dim, start)
    return tnp.clip(start, 0, dim - size)


def _start_list(start_indices, shape: tuple, fn: str) -> list:
    """One start per axis of ``shape``: a sequence of scalars, or a 1-D array (traced or not)."""
    if not isinstance(start_indices, (list, tuple)):
        starts = tnp.asarray(start_indices)
        if starts.ndim != 1:
            raise ValueError(f"{fn}: start_indices must be a sequence of scalars or a 1-D array, got an array of "
                             f"shape {tuple(starts.shape)}")
        start_indices = [starts[k] for k in range(starts.shape[0])]
    if len(start_indices) != len(shape):
        raise ValueError(f"{fn}: start_indices has {len(start_indices)} entries for an operand of shape {shape}; "
                         f"give one start per dimension ({len(shape)})")
    return list(start_indices)


def _sizes(sizes, shape: tuple, fn: str, name: str) -> tuple:
    """``sizes`` (one per axis of ``shape``) as Python ints in ``[0, dim]``."""
    try:
        sizes = tuple(operator.index(n) for n in sizes)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a sequence of Python ints (static sizes), got {sizes!r}; "
                        "a slice's size cannot be traced (jit needs every shape known)") from None
    if len(sizes) != len(shape):
        raise ValueError(f"{fn}: {name} has {len(sizes)} entries for an operand of shape {shape}; "
                         f"give one size per dimension ({len(shape)})")
    if any(n < 0 or n > d for n, d in zip(sizes, shape)):
        raise ValueError(f"{fn}: {name} {sizes} does not fit in the operand's shape {shape}; each size must be "
                         "in [0, dimension]")
    return sizes


def _flags(allow_negative_indices, ndim: int, fn: str) -> tuple:
    """``allow_negative_indices`` (a bool, or one per axis) as a tuple of bools."""
    if isinstance(allow_negative_indices, (bool, np.bool_)):
        return (bool(allow_negative_indices),) * ndim
    flags = tuple(bool(f) for f in allow_negative_indices)
    if len(flags) != ndim:
        raise ValueError(f"{fn}: allow_negative_indices has {len(flags)} entries for {ndim} dimensions; give a "
                         "bool, or one per dimension")
    return flags


def _slice_plan(shape: tuple, start_indices, sizes: tuple, allow_negative_indices, fn: str) -> list:
    """Per axis, how the slice is taken: a static ``slice`` (a start known now, or the whole axis), a
    0-d traced start (a slice of length 1: an integer index, which drops the axis), or ``(start,)``, a
    traced start of a longer slice (a gather of ``start + arange(size)``). The first two are basic
    indexing, which jit's compiled executor lowers; the gather is not (see docs/lax.md)."""
    starts = _start_list(start_indices, shape, fn)
    flags = _flags(allow_negative_indices, len(shape), fn)
    plan: list = []
    for k, (start, dim, size, allow) in enumerate(zip(starts, shape, sizes, flags)):
        where = f"start_indices[{k}]"
        if size == dim and _static_int(start) is None:  # clamped to 0 whatever it is: only its type matters
            _check_integer(start, fn, where)
            start = 0
        start = _clamped_start(start, dim, size, allow, fn, where)
        if isinstance(start, int):
            plan.append(slice(start, start + size))
        else:
            plan.append(start if size == 1 else (start,))
    return plan


def _is_gather(item) -> bool:
    return isinstance(item, tuple)


def _is_index(item) -> bool:
    return not isinstance(item, (slice, tuple))


# ---- dynamic slices ------------------------------------------------------------------------------
def dynamic_slice(operand: ArrayLike, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """The slice of ``operand`` of static size ``slice_sizes`` starting at ``start_indices`` (JAX's
    ``lax.dynamic_slice``, XLA's ``DynamicSlice``).

    A start may be traced (a loop counter under ``jit``, a batched index under ``vmap``). A negative
    start counts from the end of its axis (``allow_negative_indices``), then every start is clamped to
    ``[0, dim - size]`` so that the slice fits: asking for 3 elements at 8 of an axis of 10 gives
    elements 7, 8, 9, as XLA does (no error, no wrap-around).

    Args:
        operand: the array (any dtype; differentiable in it, to any order).
        start_indices: one integer scalar per dimension (a sequence, or a 1-D integer array), traced or not.
        slice_sizes: one non-negative Python int per dimension, at most that dimension.
        allow_negative_indices: a bool, or one per dimension: whether a negative start counts from the
            end (JAX's default, True) or is clamped to 0 (False; a known negative start is then an error,
            as in JAX).

    Returns:
        An array of shape ``slice_sizes`` and ``operand``'s dtype.

    Raises:
        ValueError: ``start_indices`` or ``slice_sizes`` does not have one entry per dimension, or a
            size exceeds its dimension.
        TypeError: a start is not an integer scalar, or a size is not a Python int.

    Example:
        >>> import numpy as np
        >>> from tapegrad import lax
        >>> x = np.arange(12.0).reshape(3, 4)
        >>> lax.dynamic_slice(x, (1, 1), (2, 3))  # rows 1-2, columns 1-3
        array([[ 5.,  6.,  7.],
               [ 9., 10., 11.]])
        >>> lax.dynamic_slice(x, (1, 1), (2, 4))  # the column start is clamped to 0
        array([[ 4.,  5.,  6.,  7.],
               [ 8.,  9., 10., 11.]])
    """
    x = tnp.asarray(operand)
    shape = tuple(x.shape)
    sizes = _sizes(slice_sizes, shape, "dynamic_slice", "slice_sizes")
    plan = _slice_plan(shape, start_indices, sizes, allow_negative_indices, "dynamic_slice")
    basic = tuple(slice(None) if _is_gather(item) else item for item in plan)
    whole = all(isinstance(item, slice) and item == slice(0, dim) for item, dim in zip(basic, shape))
    y = x if whole else getitem(x, basic)  # getitem, not x[basic]: x may be a NumPy array, the start traced
    dropped = 0  # the axes a 0-d index removed before the one being gathered
    for k, item in enumerate(plan):
        if _is_index(item):
            dropped += 1
        elif _is_gather(item):
            y = tnp.take(y, item[0] + namespace_of(x).arange(sizes[k]), axis=k - dropped)
    return y if tuple(y.shape) == sizes else tnp.reshape(y, sizes)


def dynamic_slice_in_dim(operand: ArrayLike, start_index: ArrayLike, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Array:
    """:func:`dynamic_slice` along one axis (JAX's ``lax.dynamic_slice_in_dim``): ``slice_size``
    elements from ``start_index`` (traced or not, clamped so that they fit) along ``axis``, every
    element of the other axes.

    Returns:
        An array of ``operand``'s shape with ``slice_size`` at ``axis``, and its dtype.

    Raises:
        ValueError: ``axis`` out of range, or ``slice_size`` larger than that axis.
    """
    x = tnp.asarray(operand)
    axis = _axis(axis, x.ndim, "dynamic_slice_in_dim")
    starts: list = [0] * x.ndim
    starts[axis] = start_index
    sizes = list(x.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: ArrayLike, index: ArrayLike, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Array:
    """The element at ``index`` (traced or not, clamped into the axis) along ``axis`` (JAX's
    ``lax.dynamic_index_in_dim``).

    Returns:
        An array of ``operand``'s shape with 1 at ``axis`` (``keepdims=True``, JAX's default) or without
        that axis (``keepdims=False``), and ``operand``'s dtype.
    """
    x = tnp.asarray(operand)
    axis = _axis(axis, x.ndim, "dynamic_index_in_dim")
    y = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return y if keepdims else tnp.squeeze(y, axis=axis)


def dynamic_update_slice(operand: ArrayLike, update: ArrayLike, start_indices: Any, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """``operand`` with ``update`` written over the slice of ``update``'s shape at ``start_indices``
    (JAX's ``lax.dynamic_update_slice``, XLA's ``DynamicUpdateSlice``); a new array, as ``.at[].set``.

    Starts are treated as in :func:`dynamic_slice`: traced or not, negative counted from the end,
    clamped to ``[0, dim - update.shape[k]]`` so that the whole update is written.

    Args:
        operand: the array written into (differentiable: its gradient is zero over the written slice).
        update: an array of ``operand``'s rank, each dimension at most ``operand``'s (differentiable);
            its dtype must cast to ``operand``'s by NumPy's ``same_kind`` rule.
        start_indices: one integer scalar per dimension (a sequence, or a 1-D integer array).
        allow_negative_indices: as in :func:`dynamic_slice`.

    Returns:
        An array of ``operand``'s shape and dtype.

    Raises:
        ValueError: ``update``'s rank differs from ``operand``'s, it does not fit, or ``start_indices``
            does not have one entry per dimension.
        TypeError: a start is not an integer scalar, or the update's dtype does not cast.
    """
    x, u = tnp.asarray(operand), tnp.asarray(update)
    shape = tuple(x.shape)
    if u.ndim != x.ndim:
        raise ValueError(f"dynamic_update_slice: update has shape {tuple(u.shape)}, rank {u.ndim}, for an operand "
                         f"of shape {shape}; give it the operand's rank (add unit axes with tnp.expand_dims)")
    sizes = _sizes(u.shape, shape, "dynamic_update_slice", "update's shape")
    plan = _slice_plan(shape, start_indices, sizes, allow_negative_indices, "dynamic_update_slice")
    if not any(_is_gather(item) for item in plan):  # basic indexing: a 0-d index drops its axis of update
        kept = tuple(n for item, n in zip(plan, sizes) if not _is_index(item))
        return IndexUpdateRef(x, tuple(plan)).set(u if kept == sizes else tnp.reshape(u, kept))
    # integer arrays on every axis (an open mesh, as np.ix_), so that the written block keeps update's layout
    index, xp = [], namespace_of(x)  # positions on the operand's device, as a traced start is
    for k, (item, n) in enumerate(zip(plan, sizes)):
        positions = xp.arange(item.start, item.stop) if isinstance(item, slice) else (
            (item[0] if _is_gather(item) else item) + xp.arange(n))
        index.append(tnp.reshape(positions, (1,) * k + (n,) + (1,) * (len(shape) - k - 1)))
    return IndexUpdateRef(x, tuple(index)).set(u)


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: ArrayLike, axis: int, *,
                                allow_negative_indices: bool = True) -> Array:
    """:func:`dynamic_update_slice` along one axis (JAX's ``lax.dynamic_update_slice_in_dim``):
    ``update`` (``operand``'s rank) written from ``start_index`` along ``axis``, from 0 along the others.

    Returns:
        An array of ``operand``'s shape and dtype.
    """
    x = tnp.asarray(operand)
    axis = _axis(axis, x.ndim, "dynamic_update_slice_in_dim")
    starts: list = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: ArrayLike, axis: int, *,
                                allow_negative_indices: bool = True) -> Array:
    """``operand`` with ``update`` written at ``index`` along ``axis`` (JAX's
    ``lax.dynamic_update_index_in_dim``). ``update`` has ``operand``'s rank (1 at ``axis``) or one
    less (it is given the axis).

    Returns:
        An array of ``operand``'s shape and dtype.
    """
    x, u = tnp.asarray(operand), tnp.asarray(update)
    axis = _axis(axis, x.ndim, "dynamic_update_index_in_dim")
    if u.ndim == x.ndim - 1:
        u = tnp.expand_dims(u, axis)
    return dynamic_update_slice_in_dim(x, u, index, axis, allow_negative_indices=allow_negative_indices)


def _axis(axis, ndim: int, fn: str) -> int:
    """``axis`` (negative counts from the end) as an index into ``ndim`` axes."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} is out of range for an operand of {ndim} dimensions")
    return axis % ndim
