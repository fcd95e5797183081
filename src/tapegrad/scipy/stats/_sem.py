"""``tapegrad.scipy.stats.sem``: the standard error of the mean, as ``scipy.stats.sem``."""
from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad._typing import Array, ArrayLike, Axis

NAN_POLICIES = ("propagate", "omit")


def sem(a: ArrayLike, axis: Axis = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False) -> Array:
    """``std(a, axis, ddof) / sqrt(n)``, ``n`` the number of values along ``axis``.

    Differentiable in ``a`` to any order in both modes (it is composed of ``tnp.std``).

    Args:
        a: the data.
        axis: the axis (or tuple of axes) to reduce; None for the flattened ``a``.
        ddof: delta degrees of freedom of the standard deviation (SciPy's default 1).
        nan_policy: ``"propagate"`` (a NaN gives NaN) or ``"omit"`` (NaNs are left out, ``n``
            counts the others). SciPy's ``"raise"`` needs the values at trace time: use
            ``numpy.isnan`` on a concrete array before the call.
        keepdims: keep the reduced axis, with length 1.

    Returns:
        The standard errors, ``a``'s float dtype, ``a``'s shape without ``axis``.

    Raises:
        ValueError: an unknown ``nan_policy`` (``"raise"`` included).
    """
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"sem: nan_policy must be one of {NAN_POLICIES} (check for NaNs with numpy.isnan "
                         f"before the call instead of 'raise'); got {nan_policy!r}")
    a = tnp.asarray(a)
    if axis is None:
        a, axis = tnp.ravel(a), 0
    if nan_policy == "omit":
        n = tnp.sum(~tnp.isnan(a), axis=axis, keepdims=keepdims)
        return tnp.nanstd(a, axis=axis, ddof=ddof, keepdims=keepdims) / tnp.sqrt(n)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)  # scipy.stats.sem takes a tuple of axes too
    n = math.prod(a.shape[i] for i in axes)
    return tnp.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / n ** 0.5
