"""Initialisers: functions ``(shape, dtype=np.float32, rng=None, **options) -> array``.

Each draws from a NumPy ``Generator`` (``rng``; a fresh ``np.random.default_rng()`` when None) and
returns a NumPy array of ``dtype``; ``Dense(weight_init=...)`` takes any of them (bind options with
``functools.partial``). Fans and gains follow ``torch.nn.init``: for a weight of shape
``(out, in, *kernel)``, ``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ShapeLike

__all__ = ["calculate_gain", "constant", "kaiming_normal", "kaiming_uniform", "normal", "ones", "uniform",
           "xavier_normal", "xavier_uniform", "zeros"]


def _rng(rng):
    return np.random.default_rng() if rng is None else rng


def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def _fans(shape) -> tuple[int, int]:
    shape = _shape(shape)
    if len(shape) < 2:
        raise ValueError(f"fan_in and fan_out need a weight of at least 2 dimensions (out, in, ...), "
                         f"got shape {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str = "leaky_relu", param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (``torch.nn.init.calculate_gain``).

    ``linear``/``sigmoid``: 1; ``tanh``: 5/3; ``relu``: sqrt(2); ``leaky_relu`` with slope ``a``
    (``param``, default 0.01): sqrt(2 / (1 + a**2)); ``selu``: 3/4.

    Raises:
        ValueError: an unknown ``nonlinearity``.
    """
    if nonlinearity in ("linear", "identity", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1.0 + slope * slope))
    if nonlinearity == "selu":
        return 0.75
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of 'linear', "
                     "'sigmoid', 'tanh', 'relu', 'leaky_relu', 'selu'")


def zeros(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None) -> Array:
    """All zeros (``torch.nn.init.zeros_``, returning a new array)."""
    return np.zeros(_shape(shape), dtype)


def ones(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None) -> Array:
    """All ones (``torch.nn.init.ones_``, returning a new array)."""
    return np.ones(_shape(shape), dtype)


def constant(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, value: float | numbers.Number = 0.0) -> Array:
    """Every element equal to ``value`` (``torch.nn.init.constant_``, returning a new array)."""
    return np.full(_shape(shape), value, dtype)


def uniform(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, low: float = 0.0, high: float = 1.0) -> Array:
    """Uniform on ``[low, high)`` (``torch.nn.init.uniform_``'s default range is ``[0, 1)``)."""
    return _rng(rng).uniform(low, high, _shape(shape)).astype(dtype)


def normal(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, mean: float = 0.0, std: float = 1.0) -> Array:
    """Normal with mean ``mean`` and standard deviation ``std`` (``torch.nn.init.normal_``, returning a
    new array).
    """
    return _rng(rng).normal(mean, std, _shape(shape)).astype(dtype)


def _kaiming_std(shape, a, mode, nonlinearity) -> float:
    fan_in, fan_out = _fans(shape)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Array:
    """He et al. (2015) uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)``
    (``torch.nn.init.kaiming_uniform_``).

    With ``a = sqrt(5)`` (leaky_relu gain ``sqrt(1/3)``) the bound is ``1 / sqrt(fan_in)``: the
    default weight initialisation of PyTorch's ``Linear`` and MindSpore's ``Dense``.
    """
    bound = math.sqrt(3.0) * _kaiming_std(shape, a, mode, nonlinearity)
    return uniform(shape, dtype, rng, -bound, bound)


def kaiming_normal(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, a: float = 0.0, mode: str = "fan_in",
                   nonlinearity: str = "leaky_relu") -> Array:
    """He et al. (2015) normal: ``N(0, std**2)`` with ``std = gain / sqrt(fan)``
    (``torch.nn.init.kaiming_normal_``: the same ``a``, ``mode`` and ``nonlinearity``).

    Raises:
        ValueError: a shape of fewer than 2 dimensions; an unknown ``mode`` or ``nonlinearity``.
    """
    return normal(shape, dtype, rng, 0.0, _kaiming_std(shape, a, mode, nonlinearity))


def xavier_uniform(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, gain: float = 1.0) -> Array:
    """Glorot & Bengio (2010) uniform: ``U(-b, b)`` with ``b = gain * sqrt(6 / (fan_in + fan_out))``
    (``torch.nn.init.xavier_uniform_``).

    Raises:
        ValueError: a shape of fewer than 2 dimensions.
    """
    fan_in, fan_out = _fans(shape)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(shape, dtype, rng, -bound, bound)


def xavier_normal(shape: ShapeLike, dtype: Any = np.float32, rng: Any = None, gain: float = 1.0) -> Array:
    """Glorot & Bengio (2010) normal: ``N(0, std**2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``
    (``torch.nn.init.xavier_normal_``).

    Raises:
        ValueError: a shape of fewer than 2 dimensions.
    """
    fan_in, fan_out = _fans(shape)
    return normal(shape, dtype, rng, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
