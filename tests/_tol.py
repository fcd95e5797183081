"""Tolerances that hold on any machine: derived from the dtype's epsilon and the reference's magnitude.

A bare ``rtol`` fails wherever an entry is formed by cancellation (a 2e-3 entry among entries of size
5 carries the rounding error of the size-5 terms, 1e-7 absolute in float32, 5e-5 relative). So every
comparison here also allows an absolute error of ``rtol * max |desired|``: the error a correctly
rounded computation of that magnitude may make, whatever BLAS kernel or summation order produced it.
"""
from __future__ import annotations

import numpy as np

# rtol per precision, in multiples of the dtype's epsilon: room for a few dozen roundings (a
# reduction, a BLAS kernel that sums in another order, a transcendental function's last ulp)
ULPS = 64


def eps(dtype) -> float:
    """Machine epsilon of ``dtype`` (a complex dtype: its real part's; integers and bools: 0)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0
    return float(np.finfo(dtype).eps)


def default_rtol(dtype, ulps: int = ULPS) -> float:
    """``ulps`` epsilons of ``dtype``: the relative tolerance of a comparison in that precision."""
    return ulps * eps(dtype)


def _least_precise(*arrays):
    floats = [np.dtype(a.dtype) for a in arrays if np.dtype(a.dtype).kind in "fc"]
    if not floats:
        return np.dtype(np.float64)
    return max(floats, key=lambda d: np.finfo(d).eps)


def magnitude(desired) -> float:
    """``max |desired|`` over its finite entries: the scale a computation of ``desired`` works at
    (1 where there are no finite entries, or all are 0)."""
    desired = np.asarray(desired)
    finite = np.abs(desired[np.isfinite(desired)]) if desired.dtype.kind in "fc" else np.abs(desired)
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def assert_close(actual, desired, *, rtol=None, atol=None, scale=None, ulps: int = ULPS, dtype=None,
                 err_msg: str = ""):
    """``actual`` equals ``desired`` (shapes equal, NaNs in the same places) to a tolerance derived
    from the precision and the reference's magnitude.

    Each entry may differ by ``atol + rtol * |desired|``, where ``atol`` is never less than
    ``rtol * scale``: an entry formed by cancellation carries the rounding error of the magnitude it
    was computed from, not of its own size. A 0-d ``actual`` or ``desired`` broadcasts against the
    other (as in ``np.testing.assert_allclose``); any other shape difference fails.

    Args:
        rtol: relative tolerance; default ``ulps`` epsilons of ``dtype``.
        atol: absolute tolerance; raised to ``rtol * scale`` where it is smaller (default that).
        scale: the magnitude the computation works at; default ``max |desired|`` over its finite
            entries (1 where there are none, or all are 0).
        ulps: the default ``rtol`` in epsilons.
        dtype: the precision; default the least precise float dtype of ``actual`` and ``desired``.
    """
    actual, desired = np.asarray(actual), np.asarray(desired)
    if actual.shape != desired.shape and actual.ndim and desired.ndim:
        raise AssertionError(f"shapes differ: {actual.shape} against {desired.shape}. {err_msg}")
    dtype = _least_precise(actual, desired) if dtype is None else np.dtype(dtype)
    if rtol is None:
        rtol = default_rtol(dtype, ulps)
    floor = rtol * (magnitude(desired) if scale is None else scale)
    atol = floor if atol is None else max(atol, floor)
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg)
