"""JAX's ``lax.reduce_window`` for max, min and sum, composed of ``tapegrad.numpy`` operations: the
operand dilated and padded with the reduction's identity (``.at[strided slices].set`` on a constant),
one strided slice per window offset, reduced elementwise."""
from __future__ import annotations

import builtins
import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._core import Tracer
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy._indexing import IndexUpdateRef

# ---- windowed reductions -------------------------------------------------------------------------
# reduce_window's computations: lax's names, tapegrad.numpy's and NumPy's functions, and operator.add
_COMPUTATIONS = (("max", (tnp.maximum, np.maximum)), ("min", (tnp.minimum, np.minimum)),
                 ("add", (tnp.add, np.add, operator.add)))
_REDUCERS = {"max": tnp.max, "min": tnp.min}
_COMBINERS = {"max": tnp.maximum, "min": tnp.minimum, "add": tnp.add}


def _computation_name(computation) -> str:
    for name, functions in _COMPUTATIONS:
        if any(computation is f for f in functions):
            return name
    raise NotImplementedError(
        f"reduce_window: computation {computation!r} is not supported; pass lax.max, lax.min or lax.add (or "
        "tnp.maximum, tnp.minimum, tnp.add), the reductions a window is made with here")


def _identity(name: str, dtype) -> Any:
    """The value that leaves ``name``'s reduction unchanged in ``dtype``: what padding and the holes of
    base dilation hold, so that they count for nothing (XLA skips them; only ``init_value`` counts)."""
    dtype = np.dtype(dtype)
    if name == "add":
        return 0
    if dtype.kind == "b":
        return name == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if name == "max" else info.max
    return -np.inf if name == "max" else np.inf


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list:
    """The ``(low, high)`` padding of each axis that ``padding`` names (JAX's ``lax.padtype_to_pads``).

    Args:
        in_shape, window_shape, window_strides: one int per axis (the window's extent after dilation).
        padding: ``"VALID"`` (no padding), ``"SAME"`` (the output has ``ceil(n / stride)`` elements,
            the extra padding going to the high end) or ``"SAME_LOWER"`` (the extra to the low end);
            case-insensitive.

    Returns:
        A list of ``(low, high)`` pairs of Python ints, one per axis.

    Raises:
        ValueError: ``padding`` is another string.
    """
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding {padding!r} is not one of 'VALID', 'SAME', 'SAME_LOWER'; pass one of those, or "
                         "a sequence of (low, high) pairs, one per dimension")
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        total = builtins.max(0, (-(-n // s) - 1) * s + w - n)
        low = total // 2 if kind == "SAME" else total - total // 2
        pads.append((low, total - low))
    return pads


def _window_ints(values, default: int, ndim: int, name: str) -> tuple:
    """A per-axis tuple of positive Python ints (``default`` everywhere for None)."""
    if values is None:
        return (default,) * ndim
    try:
        values = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"reduce_window: {name} must be a sequence of Python ints, got {values!r}") from None
    if len(values) != ndim:
        raise ValueError(f"reduce_window: {name} has {len(values)} entries for an operand of {ndim} dimensions; "
                         "give one per dimension (1 for an axis the window does not span)")
    if any(v < 1 for v in values):
        raise ValueError(f"reduce_window: {name} {values} must be positive")
    return values


def _pads(padding, shape: tuple, window: tuple, strides: tuple) -> tuple:
    """``padding`` (a string, or one ``(low, high)`` pair per axis) as a tuple of int pairs."""
    if isinstance(padding, str):
        return tuple(padtype_to_pads(shape, window, strides, padding))
    try:
        pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"reduce_window: padding must be 'VALID', 'SAME', 'SAME_LOWER' or a sequence of "
                        f"(low, high) pairs of ints, got {padding!r}") from None
    if len(pads) != len(shape):
        raise ValueError(f"reduce_window: padding has {len(pads)} pairs for an operand of {len(shape)} "
                         "dimensions; give one (low, high) pair per dimension")
    return pads


def _dilated_padded(x, fill, pads: tuple, base_dilation: tuple):
    """``x`` with ``base_dilation - 1`` holes between neighbours and ``pads`` at the ends (negative:
    cropped), the holes and the padding holding ``fill``. Written as ``.at[strided slices].set`` on a
    constant, which every transform and jit's compiled executor take."""
    if all(b == 1 for b in base_dilation) and all(p == (0, 0) for p in pads):
        return x
    dilated = [(n - 1) * b + 1 if n else 0 for n, b in zip(x.shape, base_dilation)]
    grown = tuple(n + builtins.max(lo, 0) + builtins.max(hi, 0) for n, (lo, hi) in zip(dilated, pads))
    at = tuple(slice(builtins.max(lo, 0), builtins.max(lo, 0) + n, b)
               for n, (lo, _), b in zip(dilated, pads, base_dilation))
    y = IndexUpdateRef(tnp.full_like(x, fill, shape=grown), at).set(x)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        y = y[tuple(slice(-builtins.min(lo, 0), n + builtins.min(hi, 0)) for n, (lo, hi) in zip(grown, pads))]
    return y


def _windows(y, window: tuple, strides: tuple, dilation: tuple) -> tuple[list, tuple]:
    """For each window offset (row-major), the strided slice of ``y`` holding that element of every
    window; and the output's shape."""
    extent = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    out = tuple(builtins.max(0, (n - e) // s + 1) if n >= e else 0 for n, e, s in zip(y.shape, extent, strides))
    views = []
    for offset in itertools.product(*(range(w) for w in window)):
        starts = [o * d for o, d in zip(offset, dilation)]
        views.append(y[tuple(slice(a, a + s * (m - 1) + 1 if m else a, s)
                             for a, s, m in zip(starts, strides, out))])
    return views, out


def reduce_window(operand: ArrayLike, init_value: ArrayLike, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: str | Sequence[tuple[int, int]] = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Array:
    """The max, min or sum over every window of ``operand`` (JAX's ``lax.reduce_window``, XLA's
    ``ReduceWindow``), with ``init_value`` as each window's starting value.

    The windows slide over every dimension of ``operand`` (1 in ``window_dimensions`` for an axis they
    do not span, such as the batch and channel axes of a pooling layer). Padding and the holes of base
    dilation count for nothing, as in XLA: each output is ``computation(init_value, reduction of the
    window's elements of operand)``, so a max-pool passes ``-inf`` and a sum-pool ``0``.

    Args:
        operand: an array of any rank (differentiable to any order; under ``vmap`` and ``jit``).
        init_value: a scalar (traced or not; differentiable), cast to ``operand``'s dtype.
        computation: :data:`max`, :data:`min` or :data:`add` (``lax.max``...; also ``tnp.maximum``,
            ``tnp.minimum``, ``tnp.add``, NumPy's and ``operator.add``).
        window_dimensions: the window's size on each axis (positive ints).
        window_strides: the step between windows on each axis (default all 1).
        padding: ``"VALID"``, ``"SAME"`` or ``"SAME_LOWER"`` (:func:`padtype_to_pads`, computed on
            ``operand``'s shape as in JAX), or one ``(low, high)`` pair of ints per axis (negative crops).
        base_dilation: ``d - 1`` holes between neighbouring elements of ``operand`` on each axis (default 1).
        window_dilation: the distance between a window's elements on each axis (default 1).

    Returns:
        An array of ``operand``'s dtype; on each axis ``floor((n' - e) / stride) + 1`` elements (0 if
        the window does not fit), where ``n'`` is the dilated and padded length and ``e = (w - 1) *
        window_dilation + 1`` the window's extent.

    Raises:
        NotImplementedError: ``computation`` is not one of the three above (names them).
        ValueError: a per-axis argument does not have one entry per dimension, a stride, window or
            dilation is not positive, or ``padding`` is an unknown string.
        TypeError: a per-axis argument is not made of ints, or ``init_value`` is not a scalar.

    Ties: a max (or min) tied between several elements of a window sends each an equal share of the
    gradient, as ``tnp.max`` does; JAX sends all of it to one element (``docs/lax.md``).

    Example:
        >>> import numpy as np
        >>> from tapegrad import lax
        >>> x = np.array([1.0, 5.0, 2.0, 4.0, 3.0])
        >>> lax.reduce_window(x, -np.inf, lax.max, (2,), (2,), "SAME")  # the last window is padded
        array([5., 4., 3.])
        >>> lax.reduce_window(x, 0.0, lax.add, (3,), (1,), "VALID")
        array([ 8., 11.,  9.])

        stax's ``MaxPool((2, 2))`` on NHWC images is JAX's call, unchanged:
        ``lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")``.
    """
    name = _computation_name(computation)
    x = tnp.asarray(operand)
    ndim = x.ndim
    window = _window_ints(window_dimensions, 1, ndim, "window_dimensions")
    strides = _window_ints(window_strides, 1, ndim, "window_strides")
    base = _window_ints(base_dilation, 1, ndim, "base_dilation")
    dilation = _window_ints(window_dilation, 1, ndim, "window_dilation")
    extent = tuple((w - 1) * d + 1 for w, d in zip(window, dilation))
    pads = _pads(padding, tuple(x.shape), extent, strides)
    identity = _identity(name, x.dtype)
    views, out = _windows(_dilated_padded(x, identity, pads, base), window, strides, dilation)
    reduced = _reduce(name, views)
    if _changes_nothing(name, init_value, identity):  # JAX's -inf for max, 0 for sum: nothing to combine
        return reduced
    return _COMBINERS[name](reduced, _init(init_value, x.dtype))


def _reduce(name: str, views: list) -> Array:
    """The elementwise reduction of the window views. A sum is a chain of adds, which jit's compiled
    executor lowers; a max or min is ``tnp.max``/``tnp.min`` over the views stacked, which splits the
    gradient evenly between tied elements (a chain of ``tnp.maximum`` would halve it at each link) but
    is a reduction over one axis of an array, which that executor does not lower (docs/lax.md)."""
    if len(views) == 1:
        return views[0]
    if name == "add":
        return functools.reduce(tnp.add, views)
    return _REDUCERS[name](tnp.stack(views), axis=0)


def _changes_nothing(name: str, init_value, identity) -> bool:
    """Whether a known ``init_value`` leaves every window's result as it is: the identity, or for max
    (min) anything at or below (above) it, such as ``-inf`` for an integer operand."""
    if isinstance(init_value, Tracer) or not isinstance(init_value, (int, float, np.number, np.ndarray, np.bool_)):
        return False
    if np.ndim(init_value) != 0 or np.dtype(np.asarray(init_value).dtype).kind not in "biuf":
        return False
    value = init_value.item() if isinstance(init_value, (np.ndarray, np.generic)) else init_value
    return bool(value == identity if name == "add" else value <= identity if name == "max" else value >= identity)


def _init(init_value, dtype) -> Array:
    """``init_value`` as a 0-d value of ``dtype``: a NumPy scalar when it is known on the host (it then
    combines with an operand on any device), else a 0-d array (traced, or on a device)."""
    init = tnp.asarray(init_value)
    if init.ndim != 0:
        raise TypeError(f"reduce_window: init_value must be a scalar, got an array of shape {tuple(init.shape)}; "
                        "it starts every window's reduction")
    if isinstance(init, np.ndarray):
        return np.dtype(dtype).type(init.item())
    return tnp.astype(init, dtype)
