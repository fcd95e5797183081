"""``tapegrad.scipy.stats.mode``: the most frequent value along an axis and how often it occurs, as
``scipy.stats.mode``.

A non-differentiable primitive on SciPy finds where the mode is (its first occurrence) and its count;
the value is then gathered from the data, so its derivative goes to that element, as JAX's does (it
is ``min`` where all values differ; at ties, where the mode jumps, it is a convention like ``max``'s).
It works under ``jit`` and ``vmap``.
"""
from __future__ import annotations

import collections

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import scipy_module
from tapegrad._typing import Array, ArrayLike
from tapegrad.extend import (
    bind,
    def_nondiff,
    defbatch,
    primitive,
    shape_of,
    to_front,
)
from tapegrad.scipy.stats._support import host_only

ModeResult = collections.namedtuple("ModeResult", ["mode", "count"])
NAN_POLICIES = ("propagate", "omit", "raise")


def _impl(a, *, axis, nan_policy):
    """The position along ``axis`` (kept, length 1) of the first occurrence of the mode, and its count."""
    host_only("mode", a)  # cupyx.scipy.stats has no mode
    result = scipy_module(np, "stats").mode(a, axis=axis, nan_policy=nan_policy, keepdims=True)
    same = (a == result.mode) | (np.isnan(a) & np.isnan(result.mode))
    return np.argmax(same, axis=axis, keepdims=True), np.asarray(result.count)


def _batch(vals, dims, *, axis, nan_policy):
    """The batch axis to the front, ``axis`` one further."""
    (a,), (d,) = vals, dims
    a = to_front(a, d)
    return list(bind(mode_p, a, axis=axis % (len(shape_of(a)) - 1) + 1, nan_policy=nan_policy)), [0, 0]


mode_p = primitive("scipy.stats.mode", _impl, multiple_results=True)
def_nondiff(mode_p)
defbatch(mode_p, _batch)


def mode(a: ArrayLike, axis: int = 0, nan_policy: str = "propagate", keepdims: bool = False) -> Array:
    """The most frequent value of ``a`` along ``axis`` (the smallest one among ties), and its count,
    as ``scipy.stats.mode``.

    Args:
        a: the data.
        axis: the axis to reduce; None for the flattened ``a``.
        nan_policy: ``"propagate"`` (NaN is a value like the others), ``"omit"`` (NaNs are left out)
            or ``"raise"`` (a ``ValueError`` when the values are computed).
        keepdims: keep the reduced axis, with length 1.

    Returns:
        ``ModeResult(mode, count)``, the modes, in ``a``'s dtype, and their counts (int64), both of
        ``a``'s shape without ``axis`` (with it as 1 for ``keepdims=True``; 0-d for ``axis=None``).
        The mode's derivative is the gather's: 1 for the element chosen (its first occurrence).

    Raises:
        ValueError: an unknown ``nan_policy``.
    """
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"mode: nan_policy must be one of {NAN_POLICIES}; got {nan_policy!r}")
    a = tnp.asarray(a)
    kept = (1,) * a.ndim if axis is None else None  # SciPy keeps every axis, as 1, for axis=None
    if axis is None:
        a, axis = tnp.ravel(a), 0
    position, count = bind(mode_p, a, axis=axis, nan_policy=nan_policy)
    value = tnp.take_along_axis(a, position, axis=axis)  # a gather: the derivative goes to that element
    if not keepdims:
        return ModeResult(tnp.squeeze(value, axis=axis), tnp.squeeze(count, axis=axis))
    if kept is not None:
        value, count = tnp.reshape(value, kept), tnp.reshape(count, kept)
    return ModeResult(value, count)
