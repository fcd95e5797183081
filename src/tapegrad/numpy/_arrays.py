"""Moving elements around: ``diff``, ``roll``, ``rot90``, ``fliplr``, ``flipud``, ``select``.

Composites of slices, concatenations, transposes and ``where``, so both modes and every order of
derivative come from those primitives' rules.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._typing import ArrayLike, Axis
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand, full_like
from tapegrad.numpy._reductions import normalize_axis


def _along(axis: int, index) -> tuple:
    """An index that applies ``index`` (a slice) to ``axis`` and keeps the other axes."""
    return (slice(None),) * axis + (index,)


# ---- differences ---------------------------------------------------------------------------------
def _edge(value, a, shape, axis):
    """``prepend``/``append`` as an array on ``a``'s backend; a scalar is broadcast to length 1 along
    ``axis``."""
    if isinstance(value, (int, float, complex, np.generic)):  # NumPy's dtype for it, a's device
        return full_like(a, value, dtype=np.result_type(value), shape=shape[:axis] + (1,) + shape[axis + 1:])
    value = as_operand(value)
    if _shape.ndim(value) == 0:
        return _shape.broadcast_to(value, shape[:axis] + (1,) + shape[axis + 1:])
    return value


def diff(a: ArrayLike, n: int = 1, axis: Axis = -1, prepend: ArrayLike = None, append: ArrayLike = None) -> Array:
    """The ``n``-th discrete difference along ``axis``, ``a[1:] - a[:-1]`` applied ``n`` times, as
    ``numpy.diff`` (``not_equal`` for booleans). ``prepend``/``append`` (None: nothing; a scalar is
    broadcast) are joined to ``a`` first, and are differentiable too.

    Raises:
        ValueError: ``n < 0``, or a 0-d ``a``.
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    a = as_operand(a)
    if n == 0:
        return a
    if _shape.ndim(a) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, _shape.ndim(a))[0]
    shape = tuple(_shape.shape(a))
    pieces = ([_edge(prepend, a, shape, axis)] if prepend is not None else []) + [a] + (
        [_edge(append, a, shape, axis)] if append is not None else [])
    if len(pieces) > 1:
        a = _shape.concatenate(pieces, axis=axis)
    op = ew.not_equal if np.dtype(a.dtype) == np.bool_ else ew.subtract
    for _ in range(n):
        a = op(a[_along(axis, slice(1, None))], a[_along(axis, slice(None, -1))])
    return a


# ---- rolls, rotations and flips ------------------------------------------------------------------
def roll(a: ArrayLike, shift: Any, axis: Axis = None) -> Array:
    """Elements shifted cyclically by ``shift`` along ``axis`` (None: the flattened array, reshaped
    back), as ``numpy.roll``; ``shift`` and ``axis`` may be sequences (broadcast together, shifts on a
    repeated axis add up).

    Raises:
        ValueError: ``shift`` and ``axis`` that are not scalars or 1-D sequences.
    """
    a = as_operand(a)
    if axis is None:
        return _shape.reshape(roll(_shape.ravel(a), shift, 0), _shape.shape(a))
    shape = tuple(_shape.shape(a))
    axes = np.lib.array_utils.normalize_axis_tuple(axis, len(shape), allow_duplicate=True)
    pairs = np.broadcast(np.asarray(shift), np.asarray(axes))
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    shifts = dict.fromkeys(range(len(shape)), 0)
    for sh, ax in pairs:
        shifts[int(ax)] += int(sh)
    for ax, offset in shifts.items():
        offset %= shape[ax] or 1
        if offset:
            cut = shape[ax] - offset
            a = _shape.concatenate([a[_along(ax, slice(cut, None))], a[_along(ax, slice(None, cut))]], axis=ax)
    return a


def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Array:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first axis towards
    the second), as ``numpy.rot90``.

    Raises:
        ValueError: ``axes`` not two distinct axes in range.
    """
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    m = as_operand(m)
    ndim = _shape.ndim(m)
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == ndim:
        raise ValueError("Axes must be different.")
    if not all(-ndim <= ax < ndim for ax in axes):
        raise ValueError(f"Axes={axes} out of range for array of ndim={ndim}.")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return _shape.flip(_shape.flip(m, axes[0]), axes[1])
    perm = list(range(ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return _shape.transpose(_shape.flip(m, axes[1]), perm)
    return _shape.flip(_shape.transpose(m, perm), axes[1])


def fliplr(m: Any) -> Array:
    """``m`` with its columns (axis 1) reversed, as ``numpy.fliplr``.

    Raises:
        ValueError: ``m`` with fewer than 2 dimensions.
    """
    m = as_operand(m)
    if _shape.ndim(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return _shape.flip(m, 1)


def flipud(m: Any) -> Array:
    """``m`` with its rows (axis 0) reversed, as ``numpy.flipud``.

    Raises:
        ValueError: a 0-d ``m``.
    """
    m = as_operand(m)
    if _shape.ndim(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return _shape.flip(m, 0)


# ---- select --------------------------------------------------------------------------------------
def select(condlist: Any, choicelist: Any, default: int = 0) -> Array:
    """Per element, the choice of the first true condition (``default`` where none holds), as
    ``numpy.select``. Differentiable in every choice and in ``default``, never in the conditions.

    The result has the conditions' and choices' broadcast shape and the choices' (and default's)
    promoted dtype, Python scalars weakly typed.

    Raises:
        ValueError: lists of different lengths, or empty ones.
        TypeError: a condition that is not boolean.
    """
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    choices = [c if type(c) in (int, float, complex) else as_operand(c) for c in list(choicelist) + [default]]
    conds = [as_operand(c) for c in condlist]
    conds = [c if hasattr(c, "dtype") else np.asarray(c) for c in conds]
    for i, cond in enumerate(conds):
        if np.dtype(cond.dtype) != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    dtype = _shape.result_type(*choices)
    shape = np.broadcast_shapes(*(tuple(_shape.shape(x)) for x in conds + choices))
    xp = namespace_of(*conds, *choices)  # scalar choices become arrays on the arrays' device
    result = _shape.broadcast_to(_cast(choices[-1], dtype, xp), shape)
    for cond, choice in zip(conds[::-1], choices[-2::-1]):
        result = ew.where(cond, _cast(choice, dtype, xp), result)
    return result


def _cast(x, dtype, xp):
    if not hasattr(x, "dtype") or isinstance(x, np.generic):
        x = xp.asarray(x, dtype=dtype)
    return x if np.dtype(x.dtype) == dtype else ew.astype(x, dtype)
