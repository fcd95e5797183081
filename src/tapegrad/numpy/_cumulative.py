"""The array API's running reductions, ``cumulative_sum`` and ``cumulative_prod`` (NumPy 2.1):
``cumsum``/``cumprod`` with a required axis for N-d input and an optional initial element, so their
derivatives are ``cumsum``'s and ``cumprod``'s."""
from __future__ import annotations

from typing import Any

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand, full_like, with_dtype
from tapegrad.numpy._reductions import cumprod, cumsum, normalize_axis


def _running(reduce, identity, x, axis, dtype, include_initial):
    x = as_operand(x)
    x = with_dtype(x)
    if _shape.ndim(x) == 0:
        x = _shape.reshape(x, (1,))
    if axis is None:
        if _shape.ndim(x) > 1:
            raise ValueError("For arrays which have more than one dimension ``axis`` argument is required.")
        axis = 0
    axis = normalize_axis(axis, _shape.ndim(x))[0]
    out = reduce(x, axis=axis, dtype=dtype)
    if not include_initial:
        return out
    shape = tuple(_shape.shape(out))
    first = full_like(out, identity, shape=shape[:axis] + (1,) + shape[axis + 1:])
    return _shape.concatenate([first, out], axis=axis)


def cumulative_sum(x: ArrayLike, /, *, axis: Axis = None, dtype: DTypeLike = None, out: Any = None,
                   include_initial: bool = False) -> Array:
    """Running sum along ``axis``, as ``numpy.cumulative_sum``: ``cumsum`` with, for
    ``include_initial=True``, a leading 0 along ``axis``. 0-d input counts as 1-D.

    Raises:
        ValueError: ``axis=None`` for input of more than one dimension.
        TypeError: ``out=`` (tapegrad never writes into arrays).
    """
    _no_out(out, "cumulative_sum")
    return _running(cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x: ArrayLike, /, *, axis: Axis = None, dtype: DTypeLike = None, out: Any = None,
                    include_initial: bool = False) -> Array:
    """Running product along ``axis``, as ``numpy.cumulative_prod``: ``cumprod`` (exact derivatives
    at zeros) with, for ``include_initial=True``, a leading 1 along ``axis``.

    Raises:
        ValueError: ``axis=None`` for input of more than one dimension.
        TypeError: ``out=``.
    """
    _no_out(out, "cumulative_prod")
    return _running(cumprod, 1, x, axis, dtype, include_initial)


def _no_out(out, name):
    if out is not None:
        raise TypeError(f"{name}: out= is not supported (tapegrad never writes into arrays); use the result")
