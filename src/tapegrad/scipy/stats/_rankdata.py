"""``tapegrad.scipy.stats.rankdata``: ranks of the data, ties by ``method``, as
``scipy.stats.rankdata``.

A non-differentiable primitive (ranks are piecewise constant: their derivative is zero wherever it
exists) whose values come from SciPy; it works under ``jit`` and ``vmap`` (the output shape does not
depend on the values).
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import scipy_module
from tapegrad._typing import Array, ArrayLike, Axis
from tapegrad.extend import bind, def_nondiff, defbatch_single_axis, primitive
from tapegrad.scipy.stats._support import host_only

METHODS = ("average", "min", "max", "dense", "ordinal")
NAN_POLICIES = ("propagate", "omit", "raise")


def _impl(a, *, axis, method, nan_policy):
    host_only("rankdata", a)  # cupyx.scipy.stats has no rankdata
    return scipy_module(np, "stats").rankdata(a, method=method, axis=axis, nan_policy=nan_policy)


rankdata_p = primitive("scipy.stats.rankdata", _impl)
def_nondiff(rankdata_p)
defbatch_single_axis(rankdata_p)


def rankdata(a: ArrayLike, method: str = "average", *, axis: Axis = None, nan_policy: str = "propagate") -> Array:
    """The ranks of ``a``'s entries, from 1, along ``axis`` (``None``: of the flattened array), as
    ``scipy.stats.rankdata``.

    Args:
        a: the data.
        method: how tied entries are ranked: ``"average"`` (the mean of their ranks), ``"min"``,
            ``"max"``, ``"dense"`` (ranks without gaps), ``"ordinal"`` (in order of appearance).
        axis: the axis to rank along; None ranks the flattened ``a`` and returns a 1-d array.
        nan_policy: ``"propagate"`` (a slice holding a NaN ranks as all NaN), ``"omit"`` (NaNs keep
            NaN ranks, the others are ranked among themselves) or ``"raise"`` (a ``ValueError`` when
            the values are computed).

    Returns:
        float64 ranks for ``"average"`` (and wherever a NaN is involved), int64 otherwise, shaped as
        ``a`` (1-d for ``axis=None``). Not differentiable: the derivative is zero.

    Raises:
        ValueError: an unknown ``method`` or ``nan_policy``.
    """
    if method not in METHODS:
        raise ValueError(f"rankdata: method must be one of {METHODS}; got {method!r}")
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"rankdata: nan_policy must be one of {NAN_POLICIES}; got {nan_policy!r}")
    return bind(rankdata_p, a, axis=axis, method=method, nan_policy=nan_policy)
