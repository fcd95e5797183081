"""Window functions for spectral analysis: ``bartlett``, ``blackman``, ``hamming``, ``hanning``,
``kaiser``, as NumPy defines them (symmetric windows of ``M`` points, float64, on the default
backend). ``M`` is a static integer; ``kaiser`` is differentiable in ``beta``."""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._bessel import i0
from tapegrad.numpy._creation import arange, ones, zeros


def _points(M, name):
    """``(n, M)`` with ``n = 1 - M, 3 - M, ..., M - 1`` (NumPy's symmetric grid), or None with the
    trivial window for ``M < 2``."""
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"{name}: M must be an integer number of points, got {M!r}") from None
    if M < 1:
        return None, zeros((0,))
    if M == 1:
        return None, ones((1,))
    return arange(1 - M, M, 2, dtype=np.float64), M


def _cosine_sum(M, name, *weights):
    """``sum_k w_k cos(k pi n / (M - 1))``: the cosine-sum windows."""
    n, M = _points(M, name)
    if n is None:
        return M
    return sum(w * ew.cos(n * (k * math.pi / (M - 1))) for k, w in enumerate(weights))


def hamming(M: int) -> Array:
    """The Hamming window ``0.54 + 0.46 cos(pi n / (M - 1))``, ``n = 1-M, 3-M, ..., M-1``, as
    ``numpy.hamming``: ``(M,)`` float64 (empty for ``M < 1``, ``[1.]`` for ``M = 1``)."""
    return _cosine_sum(M, "hamming", 0.54, 0.46)


def hanning(M: int) -> Array:
    """The Hann window ``0.5 + 0.5 cos(pi n / (M - 1))``, as ``numpy.hanning``."""
    return _cosine_sum(M, "hanning", 0.5, 0.5)


def blackman(M: int) -> Array:
    """The Blackman window ``0.42 + 0.5 cos(pi n / (M-1)) + 0.08 cos(2 pi n / (M-1))``, as
    ``numpy.blackman``."""
    return _cosine_sum(M, "blackman", 0.42, 0.5, 0.08)


def bartlett(M: int) -> Array:
    """The triangular Bartlett window ``1 - |n| / (M - 1)``, as ``numpy.bartlett``."""
    n, M = _points(M, "bartlett")
    if n is None:
        return M
    return ew.where(ew.less_equal(n, 0), 1.0 + n / (M - 1), 1.0 - n / (M - 1))


def kaiser(M: int, beta: Any) -> Array:
    """The Kaiser window ``i0(beta sqrt(1 - (2k / (M-1) - 1)**2)) / i0(beta)``, ``k = 0..M-1``, as
    ``numpy.kaiser``: ``(M,)`` float64, differentiable in ``beta`` (through ``i0' = I_1``)."""
    n, M = _points(M, "kaiser")
    if n is None:
        return M
    ratio = n / (M - 1)  # (k - alpha) / alpha with alpha = (M - 1) / 2
    return i0(beta * ew.sqrt(1.0 - ratio * ratio)) / i0(beta)
