"""1-D discrete convolution and cross-correlation: ``convolve`` and ``correlate``, modes ``full``,
``same`` and ``valid``, real or complex.

Each output element is a dot product of a window of ``a`` with the reversed ``v``: the windows are
gathered with one ``take`` (an index matrix fixed by the shapes) and contracted with one
``matmul``, so both are differentiable in both operands, in every mode, and batch and stage as
those primitives do. The cost is ``O(len(out) * min(len(a), len(v)))``, as NumPy's direct method.
"""
from __future__ import annotations

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy._creation import as_operand, with_dtype
from tapegrad.numpy._indexing import take
from tapegrad.numpy._linalg import matmul

_MODES = ("full", "same", "valid")


def _vector(x, name):
    x = as_operand(x)
    x = with_dtype(x)
    if _shape.ndim(x) == 0:
        x = _shape.reshape(x, (1,))
    if _shape.ndim(x) != 1:
        raise ValueError(f"{name}: the inputs must be 1-D, got shape {tuple(_shape.shape(x))}")
    if _shape.shape(x)[0] == 0:
        raise ValueError(f"{name}: the inputs cannot be empty")
    return x


def _check_mode(mode, name):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full") -> Array:
    """The discrete linear convolution ``(a * v)[k] = sum_m a[m] v[k - m]``, as ``numpy.convolve``.

    Args:
        a, v: 1-D arrays (a scalar counts as length 1), real or complex.
        mode: ``"full"`` (length ``N + M - 1``), ``"same"`` (``max(M, N)``, centred as NumPy) or
            ``"valid"`` (``max(M, N) - min(M, N) + 1``).

    Returns:
        A 1-D array of the promoted dtype, differentiable in ``a`` and ``v``.

    Raises:
        ValueError: an empty or non-1-D input, or an unknown mode.
    """
    _check_mode(mode, "convolve")
    a, v = _vector(a, "convolve"), _vector(v, "convolve")
    if _shape.shape(v)[0] > _shape.shape(a)[0]:  # convolution commutes: slide the shorter one
        a, v = v, a
    n, m = _shape.shape(a)[0], _shape.shape(v)[0]
    start, length = {"full": (0, n + m - 1), "same": ((m - 1) // 2, n), "valid": (m - 1, n - m + 1)}[mode]
    # a padded with m - 1 zeros on each side; output k of the full convolution is window k . v reversed
    padded = _shape.pad(a, (m - 1, m - 1))
    windows = take(padded, np.arange(start, start + length)[:, None] + np.arange(m)[None, :])
    return matmul(windows, _shape.flip(v, 0))


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid") -> Array:
    """The cross-correlation ``c[k] = sum_n a[n + k] * conj(v[n])``, as ``numpy.correlate`` (which
    conjugates ``v``, unlike ``scipy.signal.correlate``'s old behaviour).

    Same modes, shapes, dtypes and errors as :func:`convolve`: it is ``convolve(a, conj(v)[::-1])``,
    reversed and conjugated again where ``v`` is the longer input (NumPy's rule).
    """
    _check_mode(mode, "correlate")
    a, v = _vector(a, "correlate"), _vector(v, "correlate")
    if _shape.shape(v)[0] > _shape.shape(a)[0]:
        return _complex.conj(_shape.flip(convolve(v, _shape.flip(_complex.conj(a), 0), mode), 0))
    return convolve(a, _shape.flip(_complex.conj(v), 0), mode)
