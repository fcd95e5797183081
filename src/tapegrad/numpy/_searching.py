"""Searching: where the true (non-zero) elements are (``nonzero``, ``flatnonzero``, ``argwhere``,
``count_nonzero``), the selections built on that (``extract``, ``compress``), and where values fall
in a sorted sequence (``searchsorted``, ``digitize``).

Positions are integers, so these are non-differentiable, except ``extract`` and ``compress``, whose
values are a gather of the data (differentiable in it). How many elements are true depends on the
values: with a concrete argument (eagerly, also under ``grad``) the result has exactly that length,
as in NumPy; under ``jit`` and ``vmap`` the values are abstract, so, as in JAX, the caller passes
``size=`` (the result's length: truncated, or padded with ``fill_value``), and without it the call
raises a ``ConcretizationError`` that says so. One primitive, ``true_positions``, finds the first
``size`` true positions along the last axis of a boolean array (with the last axis's length marking
padding); everything else is tapegrad operations around it.
"""
from __future__ import annotations

import operator
from typing import Any, overload

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of, to_host
from tapegrad._core import Boxed, bind
from tapegrad._typing import ArrayLike, Axis, ShapeLike
from tapegrad.errors import ConcretizationError
from tapegrad.extend import def_nondiff, defbatch, defbatch_front, primitive, to_front
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions, _shape, _statistics
from tapegrad.numpy._indexing import take
from tapegrad.numpy._reductions import normalize_axis
from tapegrad.numpy._statistics import operand


def host_value(x, message: str | None = None):
    """``x``'s value as a NumPy array, where it is concrete (a plain array, or an eager tracer's
    value): the one read to the host these functions make, of the positions or counts that decide a
    result's shape. Where a transform holds ``x`` abstract (jit, vmap): None, or with ``message`` a
    ``ConcretizationError`` saying it."""
    value = _statistics.concrete(x.unbox() if isinstance(x, Boxed) else x)
    if value is None:
        if message is None:
            return None
        raise ConcretizationError(message)
    return to_host(value)


def constant_like(like, x):
    """The host constant ``x`` (positions, tags, edges the function made itself) on ``like``'s
    backend: the explicit copy to the device that CuPy asks for, made once per call."""
    xp = namespace_of(like)
    return x if xp is np else xp.asarray(x)


def concrete(x, name: str, size_name: str = "size"):
    """``x``'s value (see :func:`host_value`) for a result whose length it decides; abstract, it
    raises the error that names ``size=``/``fill_value=`` (or ``size_name``) and the ``tnp`` function
    that takes it (NumPy's own, reached through ``np.nonzero(x)`` on a traced ``x``, has no such
    argument)."""
    hint = ("size= (the length of the result) and fill_value= (its padding)" if size_name == "size"
            else f"{size_name}= (the length of the result)") + ", as in JAX"
    if name.isidentifier():  # a function's name (not "histogram with bins='auto'")
        hint += (f", to tapegrad.numpy's own function: tnp.{name}(..., {size_name}=n) (NumPy's np.{name} "
                 f"accepts no {size_name}=)")
        if name == "nonzero":  # np.where(condition) and np.nonzero(a) both come here
            hint += "; for np.where(condition), call tnp.where(condition, size=n)"
    return host_value(x, f"{name}: the length of the result depends on the values of a traced argument, which "
                         f"jit and vmap do not know: pass {hint}")


# ---- the primitive -------------------------------------------------------------------------------
def _true_positions_impl(mask, *, size):
    """The first ``size`` positions of true entries along the last axis (in order), then ``n`` (the
    axis length) as padding; any leading axes are independent rows (the batch rule relies on it)."""
    xp = namespace_of(mask)
    n = mask.shape[-1]
    order = xp.argsort(~mask, axis=-1, kind="stable")  # true positions first, each group in order
    if size > n:
        order = xp.concatenate([order, xp.full(mask.shape[:-1] + (size - n,), n, order.dtype)], axis=-1)
    order = order[..., :size]
    count = mask.sum(axis=-1, keepdims=True)
    return xp.where(xp.arange(size) < count, order, n).astype(np.intp)


true_positions_p = primitive("true_positions", _true_positions_impl)
def_nondiff(true_positions_p)
defbatch_front(true_positions_p)  # the impl works row by row over leading axes


def true_positions(mask, size, name: str):
    """The positions of the true entries of the 1-D boolean ``mask``: all of them (``size`` None,
    ``mask`` concrete), or the first ``size``, padded with ``len(mask)``."""
    if size is None:
        size = int(np.count_nonzero(concrete(mask, name)))
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"{name}: size must be non-negative, got {size}")
    return bind(true_positions_p, mask, size=size)


# ---- nonzero and friends -------------------------------------------------------------------------
def nonzero(a: ArrayLike, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> tuple[Array, ...]:
    """The indices of the non-zero elements, one ``intp`` array per dimension, as ``numpy.nonzero``
    (row-major order). Non-differentiable.

    Args:
        size: under jit/vmap, the number of indices to return (the first ``size``; padding after the
            last true one): required there, optional elsewhere (as in ``jax.numpy.nonzero``).
        fill_value: the padding (default 0), one for all dimensions or a tuple with one per dimension.

    Raises:
        ValueError: a 0-d ``a`` (NumPy 2 refuses it too; use ``atleast_1d``).
        ConcretizationError: under jit/vmap without ``size``.
    """
    a = operand(a)
    shape = tuple(_shape.shape(a))
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() instead.")
    pos = true_positions(_shape.ravel(a) != 0, size, "nonzero")
    valid = pos < _shape.size(a)
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of {len(shape)} dimensions")
    coords, stride = [], 1
    for dim in reversed(shape):
        coords.append((pos // stride) % dim)
        stride *= dim
    return tuple(ew.where(valid, c, 0 if f is None else f) for c, f in zip(coords[::-1], fills))


# the result's type depends on whether x and y are given: one overload per form, the common one first
@overload
def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike, *, size: int | None = None,
          fill_value: ArrayLike = None) -> Array: ...
@overload
def where(condition: ArrayLike, x: None = None, y: None = None, *, size: int | None = None,
          fill_value: ArrayLike = None) -> tuple[Array, ...]: ...
def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None, *, size: int | None = None,
          fill_value: ArrayLike = None) -> Array | tuple[Array, ...]:
    """Elements of ``x`` where ``condition`` holds, else of ``y`` (broadcast together), as
    ``numpy.where``; gradients flow to ``x`` and ``y``, never to ``condition``. With ``condition``
    alone, ``nonzero(condition)`` (NumPy's one-argument form; ``size`` and ``fill_value`` as for
    :func:`nonzero`, as in ``jax.numpy.where``).

    Raises:
        ValueError: only one of ``x`` and ``y``.
        ConcretizationError: the one-argument form under jit/vmap without ``size``.
    """
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (then it is nonzero(condition))")
    return ew.where(condition, x, y)


def flatnonzero(a: ArrayLike, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> Array:
    """The indices of the non-zero elements of ``a`` flattened, as ``numpy.flatnonzero`` (``size``
    and ``fill_value``, default 0, as for :func:`nonzero`). Non-differentiable.

    Raises:
        ConcretizationError: under jit/vmap without ``size``.
    """
    flat = _shape.ravel(operand(a))
    pos = true_positions(flat != 0, size, "flatnonzero")
    return ew.where(pos < _shape.size(flat), pos, 0 if fill_value is None else fill_value)


def argwhere(a: ArrayLike, *, size: ShapeLike | None = None, fill_value: ArrayLike = None) -> Array:
    """The indices of the non-zero elements as rows, shape ``(count, a.ndim)``, as ``numpy.argwhere``
    (``size`` and ``fill_value`` as for :func:`nonzero`). Non-differentiable.

    Raises:
        ConcretizationError: under jit/vmap without ``size``.
    """
    a = operand(a)
    if _shape.ndim(a) == 0:  # NumPy: one row of no coordinates where the scalar is non-zero
        pos = true_positions(_shape.reshape(a != 0, (1,)), size, "argwhere")
        return pos[:, None][:, :0]
    return _shape.stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def count_nonzero(a: ArrayLike, axis: Axis = None, *, keepdims: bool = False) -> Array:
    """The number of non-zero elements along ``axis`` (None: all), as ``numpy.count_nonzero``: an
    ``intp`` array (0-d for ``axis=None``). Non-differentiable; its shape never depends on values."""
    a = operand(a)
    return ew.astype(_reductions.sum(a != 0, axis=axis, keepdims=keepdims), np.intp)


def extract(condition: ArrayLike, arr: ArrayLike, *, size: ShapeLike | None = None, fill_value: ArrayLike = 0) -> Array:
    """The elements of ``arr`` (flattened) where ``condition`` (flattened) is non-zero, as
    ``numpy.extract``. Differentiable in ``arr``.

    Args:
        size, fill_value: the result's length and its padding (default 0), required under jit/vmap,
            as in ``jax.numpy.extract``.

    Raises:
        ConcretizationError: under jit/vmap without ``size``.
    """
    flat, cond = _shape.ravel(operand(arr)), _shape.ravel(operand(condition)) != 0
    if _shape.size(cond) > _shape.size(flat):
        raise ValueError(f"extract: condition has {_shape.size(cond)} elements, arr only {_shape.size(flat)}")
    pos = true_positions(cond, size, "extract")
    valid = pos < _shape.size(cond)
    values = take(flat, ew.where(valid, pos, 0)) if _shape.size(flat) else _shape.reshape(flat, (0,))
    return values if size is None else ew.where(valid, values, fill_value)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: int | None = None,
             fill_value: ArrayLike = 0, out: Any = None) -> Array:
    """The slices of ``a`` along ``axis`` (None: of ``a`` flattened) where the 1-D ``condition`` is
    true, as ``numpy.compress`` (a shorter ``condition`` counts as false beyond its end).
    Differentiable in ``a``.

    Args:
        size, fill_value: the number of slices to return and their padding (default 0), required
            under jit/vmap, as in ``jax.numpy.compress``.

    Raises:
        ValueError: ``condition`` not 1-D, or longer than the axis with a true entry past its end.
        NotImplementedError: ``out`` given.
        ConcretizationError: under jit/vmap without ``size``.
    """
    if out is not None:
        raise NotImplementedError("compress: out= is not supported (tapegrad never writes into arrays)")
    a, cond = operand(a), operand(condition)
    if _shape.ndim(cond) != 1:
        raise ValueError("condition must be a 1-d array")
    if axis is None:
        a, axis = _shape.ravel(a), 0
    axis = normalize_axis(operator.index(axis), _shape.ndim(a))[0]
    n = _shape.shape(a)[axis]
    cond = cond != 0
    if _shape.size(cond) > n:
        if size is None and bool(np.any(concrete(cond[n:], "compress"))):
            raise ValueError(f"compress: condition has a true entry past the axis length {n}")
        cond = cond[:n]
    pos = true_positions(cond, size, "compress")
    valid = pos < _shape.size(cond)
    values = take(a, ew.where(valid, pos, 0), axis=axis)
    if size is None:
        return values
    view = [1] * _shape.ndim(a)
    view[axis] = -1
    return ew.where(_shape.reshape(valid, tuple(view)), values, fill_value)


# ---- searchsorted --------------------------------------------------------------------------------
def _searchsorted_impl(a, v, *, side):
    return namespace_of(a, v).searchsorted(a, v, side=side).astype(np.intp)


def _count_below(a, v, side):
    """``searchsorted`` by comparing every pair: ``a`` (..., n) and ``v`` (..., m...) with the same
    leading (batch) axes: the number of ``a`` entries before each ``v`` (``<``, or ``<=`` on the right)."""
    lead = _shape.ndim(a) - 1
    extra = _shape.ndim(v) - lead
    a = _shape.reshape(a, tuple(_shape.shape(a))[:-1] + (1,) * extra + (_shape.shape(a)[-1],))
    v = _shape.expand_dims(v, -1)
    below = ew.less(a, v) if side == "left" else ew.less_equal(a, v)
    return ew.astype(_reductions.sum(below, axis=-1), np.intp)


def _searchsorted_batch(vals, dims, *, side):
    """Shared sorted ``a``: one search for every example's ``v``. Mapped ``a``: every pair compared
    (one bind for the batch, O(n m) work per example)."""
    (a, v), (da, dv) = vals, dims
    if da is None:
        return bind(searchsorted_p, a, v, side=side), dv
    a = to_front(a, da)
    size = _shape.shape(a)[0]
    v = to_front(v, dv) if dv is not None else _shape.broadcast_to(v, (size,) + tuple(_shape.shape(v)))
    return _count_below(a, v, side), 0


searchsorted_p = primitive("searchsorted", _searchsorted_impl)
def_nondiff(searchsorted_p)
defbatch(searchsorted_p, _searchsorted_batch)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: Any = None, *,
                 method: str | None = None) -> Array:
    """The indices where ``v``'s elements would be inserted into the sorted 1-D ``a`` to keep it
    sorted, as ``numpy.searchsorted``: ``side='left'`` gives the first such place, ``'right'`` the
    last; ``sorter`` sorts an unsorted ``a``. An ``intp`` array of ``v``'s shape; non-differentiable.
    (``method`` is accepted for JAX's signature and ignored: NumPy's binary search runs.)

    Raises:
        ValueError: ``a`` not 1-D, or ``side`` not ``'left'``/``'right'``.
    """
    a, v = operand(a), operand(v)
    if _shape.ndim(a) != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got shape {_shape.shape(a)}")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    if sorter is not None:
        a = take(a, operand(sorter))
    return bind(searchsorted_p, a, v, side=side)


def digitize(x: ArrayLike, bins: Any, right: bool = False) -> Array:
    """The index of the bin each element of ``x`` falls in, as ``numpy.digitize``: for increasing
    ``bins``, ``i`` with ``bins[i-1] <= x < bins[i]`` (``<`` and ``<=`` swapped with ``right=True``);
    for decreasing ``bins`` the mirror image. An ``intp`` array; non-differentiable.

    Raises:
        ValueError: ``bins`` not 1-D, or (when concrete) not monotonic.
    """
    x, bins = operand(x), operand(bins)
    if _shape.ndim(bins) != 1:
        raise ValueError("object too deep for desired array")
    side = "left" if right else "right"
    n = _shape.size(bins)
    increasing = lambda: searchsorted(bins, x, side=side)  # noqa: E731
    decreasing = lambda: n - searchsorted(_shape.flip(bins, 0), x, side=side)  # noqa: E731
    b = host_value(bins)
    if b is None:  # traced bins: their direction is read from the ends
        return ew.where(bins[0] > bins[-1], decreasing(), increasing()) if n > 1 else increasing()
    if np.all(b[1:] >= b[:-1]):
        return increasing()
    if np.all(b[1:] <= b[:-1]):
        return decreasing()
    raise ValueError("bins must be monotonically increasing or decreasing")

__all__ = [
    "argwhere", "compress", "count_nonzero", "digitize", "extract", "flatnonzero", "nonzero", "searchsorted",
    "where",
]
