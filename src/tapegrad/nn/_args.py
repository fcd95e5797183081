"""Argument checks shared by ``tapegrad.nn``: integers, tuples of integers (PyTorch's ``kernel_size``,
``stride``, ...) and non-negative floats. Each error names the function and the argument. Also the types
of the layers' ``activation`` and ``*_init`` arguments: what ``nn.layers`` accepts at run time."""
from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

from tapegrad._array_type import Array
from tapegrad._params import Parameter

Activation: TypeAlias = "str | Callable[[Array], Array] | None"
"""``Dense``'s ``activation``: a name (``"relu"``, ``"tanh"``, ...), a function or module applied to the
layer's output (it receives an ``Array``: a tracer under a transform), or None."""

Initializer: TypeAlias = ("str | float | Callable[[tuple[int, ...], np.dtype[Any], np.random.Generator], Any] | "
                          "Array | Parameter | Sequence[Any] | None")
"""A layer's ``weight_init``/``bias_init``: an initialiser's name (``"xavier_uniform"``), a number (every
element), a callable ``(shape, dtype, rng) -> array`` (``nn.init.normal``, a ``functools.partial`` of
one), an array, a Parameter or a nested list of the Parameter's shape, or None (the layer's default)."""


def _is_int(value) -> bool:
    """An int or a NumPy integer, not a bool (``True`` is an ``int`` to Python, never a size here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _bound(minimum: int) -> str:
    return {0: "non-negative", 1: "positive"}.get(minimum, f">= {minimum}")


def as_int(value, name: str, fn: str, minimum: int | None = None, expected: str = "an int") -> int:
    """``value`` as a Python int.

    Raises:
        TypeError: ``value`` is not an int (bools and floats are refused, not truncated); the message
            says ``"{fn}: {name} must be {expected}"``.
        ValueError: ``value < minimum`` (when ``minimum`` is given).
    """
    if not _is_int(value):
        raise TypeError(f"{fn}: {name} must be {expected}, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{fn}: {name} must be {_bound(minimum)}, got {value}")
    return int(value)


def as_ints(value, n: int, name: str, fn: str, minimum: int = 1) -> tuple:
    """``value`` as a tuple of ``n`` Python ints, each ``>= minimum``. As PyTorch, ``value`` is an int,
    a sequence of 1 int (both broadcast to ``n``) or a sequence of ``n`` ints.

    Raises:
        TypeError: a bool, a float, a non-sequence, or a sequence of another length or holding non-ints.
        ValueError: an entry below ``minimum``.
    """
    if _is_int(value):
        items = (value,)
    elif (isinstance(value, Sequence) and not isinstance(value, (str, bytes))) or \
            (isinstance(value, np.ndarray) and value.ndim == 1):
        items = tuple(value)
    else:
        items = ()
    if len(items) not in (1, n) or not all(_is_int(v) for v in items):
        raise TypeError(f"{fn}: {name} must be an int or a tuple of {n} ints (or of 1, broadcast), "
                        f"got {value!r}")
    if any(v < minimum for v in items):
        raise ValueError(f"{fn}: {name} must be {_bound(minimum)}, got {value!r}")
    return tuple(int(v) for v in items) * (n if len(items) == 1 else 1)


def as_nonnegative_float(value, name: str, fn: str, allow_none: bool = False):
    """``value`` as a Python float ``>= 0`` (``eps``, ``momentum``), or None where ``allow_none``.

    Raises:
        ValueError: anything else (bools, strings, negative or NaN numbers), as PyTorch's layers.
    """
    if value is None and allow_none:
        return None
    # numbers.Real declares no comparison with a number on its left (typeshed): mypy refuses the one below
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:  # type: ignore[operator]
        raise ValueError(f"{fn}: {name} must be a non-negative number{' or None' if allow_none else ''}, "
                         f"got {value!r}")
    return float(value)
