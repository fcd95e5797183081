"""``isposinf`` and ``isneginf``: boolean tests, constants for every transform."""
from __future__ import annotations

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._creation import as_operand


def isposinf(x: ArrayLike) -> Array:
    """Where ``x`` is +inf, as ``numpy.isposinf``: a boolean array of ``x``'s shape.

    Raises:
        TypeError: ``x`` is complex (NumPy's rule: the sign of a complex infinity is undefined).
    """
    x = _real_operand(x, "isposinf")
    return ew.logical_and(ew.isinf(x), ew.greater(x, 0))


def isneginf(x: ArrayLike) -> Array:
    """Where ``x`` is -inf, as ``numpy.isneginf``: a boolean array of ``x``'s shape.

    Raises:
        TypeError: ``x`` is complex.
    """
    x = _real_operand(x, "isneginf")
    return ew.logical_and(ew.isinf(x), ew.less(x, 0))


def _real_operand(x, name):
    x = as_operand(x)
    if np.dtype(x.dtype).kind == "c":
        raise TypeError(f"{name}: x is complex ({x.dtype}), whose infinities have no sign; test tnp.real(x) "
                        "and tnp.imag(x) separately")
    return x
