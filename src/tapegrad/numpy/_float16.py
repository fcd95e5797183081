"""float16 inputs that are computed in float32 and rounded back: the table ``docs/coverage_page.py`` reads.

float16 keeps 11 significant bits and overflows past 65504, so a sum of a few thousand terms added one
at a time stops growing (2048 + 1 rounds to 2048) and a square of 256 is inf. The functions recorded
here take float16 operands, accumulate in float32 and return float16, as PyTorch's autocast runs its
"float32 list" (sum, softmax, norms) and as GPUs accumulate float16 matrix products in float32.
Everything not recorded computes in float16 end to end (and keeps float16 as its result dtype).
"""
from __future__ import annotations

import numpy as np

from tapegrad.numpy import _elementwise as ew

FLOAT16 = np.dtype(np.float16)
FLOAT32_ACCUMULATION: dict = {}
"""Public name (as ``tapegrad.numpy`` or ``tapegrad.nn.functional`` spells it) -> why it upcasts."""


def accumulates_in_float32(name: str, why: str) -> None:
    """Record that ``name`` computes float16 operands in float32 and rounds its result to float16."""
    FLOAT32_ACCUMULATION[name] = why


def is_float16(x) -> bool:
    """``x`` is a float16 array or tracer (one dtype check: the float32 path pays nothing more)."""
    return getattr(x, "dtype", None) == FLOAT16


def in_float32(fn, a, *args, **kwargs):
    """``fn(a, ...)`` on ``a`` cast to float32, the result cast back to float16.

    Composed of ``astype`` (whose rules cast the cotangent and tangent), so every derivative of the
    result is float16 as well, and correct to any order.
    """
    return ew.astype(fn(ew.astype(a, np.float32), *args, **kwargs), np.float16)
