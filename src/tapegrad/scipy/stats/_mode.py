"""``tapegrad.scipy.stats.mode``: the most frequent value along an axis and how often it occurs, as
``scipy.stats.mode``.

A non-differentiable primitive with two results (the mode is one of the data's values, chosen by a
count: it is piecewise constant in the sense that matters, and tapegrad gives it a zero
derivative, documented) whose values come from SciPy; it works under ``jit`` and ``vmap``.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from tapegrad._backend import scipy_module
from tapegrad.extend import (
    bind,
    def_nondiff,
    defbatch,
    primitive,
    shape_of,
    to_front,
)
from tapegrad.numpy import _shape
from tapegrad.scipy.stats._support import host_only

ModeResult = collections.namedtuple("ModeResult", ["mode", "count"])
NAN_POLICIES = ("propagate", "omit", "raise")


def _impl(a, *, axis, nan_policy, keepdims):
    host_only("mode", a)  # cupyx.scipy.stats has no mode
    result = scipy_module(np, "stats").mode(a, axis=axis, nan_policy=nan_policy, keepdims=keepdims)
    return np.asarray(result.mode), np.asarray(result.count)


def _batch(vals, dims, *, axis, nan_policy, keepdims):
    """The batch axis to the front; ``axis=None`` flattens each example (its mode is over all of it)."""
    (a,), (d,) = vals, dims
    a = to_front(a, d)
    if axis is None:
        a = _shape.reshape(a, (shape_of(a)[0], math.prod(shape_of(a)[1:])))
        outs = bind(mode_p, a, axis=1, nan_policy=nan_policy, keepdims=False)
        if keepdims:  # the example's reduced shape is all ones
            outs = [_shape.reshape(o, (shape_of(o)[0],) + (1,) * (len(shape_of(vals[0])) - 1)) for o in outs]
        return list(outs), [0, 0]
    axis = axis % (len(shape_of(a)) - 1) + 1
    return list(bind(mode_p, a, axis=axis, nan_policy=nan_policy, keepdims=keepdims)), [0, 0]


mode_p = primitive("scipy.stats.mode", _impl, multiple_results=True)
def_nondiff(mode_p)
defbatch(mode_p, _batch)


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value of ``a`` along ``axis`` (the smallest one among ties), and its count.

    Args:
        a: the data.
        axis: the axis to reduce; None for the flattened ``a``.
        nan_policy: ``"propagate"`` (NaN is a value like the others), ``"omit"`` (NaNs are left out)
            or ``"raise"`` (a ``ValueError`` when the values are computed).
        keepdims: keep the reduced axis, with length 1.

    Returns:
        ``ModeResult(mode, count)``: the modes, in ``a``'s dtype, and their counts (int64), both of
        ``a``'s shape without ``axis`` (with it as 1 for ``keepdims=True``). Not differentiable: the
        derivative is zero.

    Raises:
        ValueError: an unknown ``nan_policy``.
    """
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"mode: nan_policy must be one of {NAN_POLICIES}; got {nan_policy!r}")
    return ModeResult(*bind(mode_p, a, axis=axis, nan_policy=nan_policy, keepdims=keepdims))
