"""Evenly spaced ranges: ``linspace``, ``logspace``, ``geomspace``, differentiable in ``start`` and
``stop`` (and ``logspace``'s ``base``).

With concrete endpoints they are NumPy's (or CuPy's) own functions. With a traced endpoint they are
built from tapegrad operations with NumPy's formula, ``start + arange(num) * (stop - start) / div``
(``div = num - 1`` with the endpoint, else ``num``), the last sample set to ``stop`` exactly, so the
derivative with respect to ``start`` is ``1 - i / div`` at sample ``i`` (JAX's and autograd's). Calling
NumPy there would send the tracer back through ``__array_function__`` to this very function.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import array_module, default_namespace, namespace_of
from tapegrad._typing import Axis, DTypeLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import _contains_traced, asarray
from tapegrad.numpy._statistics import concrete


def _num(num, name: str) -> int:
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"{name}: num must be an int, got {type(num).__name__}") from None
    if num < 0:
        raise ValueError(f"{name}: num must be non-negative, got {num}")
    return num


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: DTypeLike = None, axis: Axis = 0) -> Array | tuple[Array, Array]:
    """``num`` evenly spaced samples from ``start`` to ``stop``, as ``numpy.linspace``: shape
    ``(num,) + broadcast(start, stop).shape`` with the samples along ``axis``; dtype
    ``result_type(start, stop, float)`` unless ``dtype`` is given. With ``retstep``, ``(samples, step)``.

    Raises:
        TypeError: ``num`` is not an int. ValueError: ``num`` is negative.
    """
    if not (_contains_traced(start) or _contains_traced(stop)):
        return _xp(start, stop).linspace(start, stop, num, endpoint, retstep, dtype, axis)
    num = _num(num, "linspace")
    start, stop = asarray(start), asarray(stop)
    float_dtype = np.result_type(start.dtype, stop.dtype, 1.0)
    start, stop = ew.astype(start, float_dtype), ew.astype(stop, float_dtype)
    shape = np.broadcast_shapes(tuple(start.shape), tuple(stop.shape))
    div = num - 1 if endpoint else num
    steps = namespace_of(start, stop).arange(num, dtype=float_dtype).reshape((num,) + (1,) * len(shape))
    delta = stop - start
    samples: Any  # traced here: its .at (a tracer's) is not a member of the Array protocol
    if div > 0:
        step = delta / div
        samples = start + steps * step
    else:  # one sample (or none): NumPy's step is nan
        step = ew.multiply(delta, np.nan)
        samples = start + steps * delta
    samples = _shape.broadcast_to(samples, (num,) + shape)
    if endpoint and num > 1:
        samples = samples.at[-1].set(_shape.broadcast_to(stop, shape))
    samples = _shape.moveaxis(samples, 0, axis)
    if dtype is not None:
        samples = ew.astype(samples, dtype)
    return (samples, step) if retstep else samples


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: float = 10.0, dtype: DTypeLike = None,
             axis: Axis = 0) -> Array:
    """``base ** linspace(start, stop, num, endpoint)``, as ``numpy.logspace``."""
    if not (_contains_traced(start) or _contains_traced(stop) or _contains_traced(base)):
        return _xp(start, stop, base).logspace(start, stop, num, endpoint, base, dtype, axis)
    exponents = linspace(start, stop, num, endpoint, axis=axis)
    base = asarray(base)
    if base.ndim:  # an array of bases broadcasts against the endpoints, not the samples
        base = _shape.expand_dims(base, axis)
    out = ew.power(base, exponents)
    return out if dtype is None else ew.astype(out, dtype)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: DTypeLike = None,
              axis: Axis = 0) -> Array:
    """Samples evenly spaced on a log scale from ``start`` to ``stop`` (which share a sign and are not
    zero), as ``numpy.geomspace``; the endpoints are exact.

    Raises:
        ValueError: ``start`` or ``stop`` is 0, where they are concrete (eagerly, or under ``grad``);
            under ``jit`` and ``vmap`` they are not known, and a zero gives nan and inf, as in JAX.
    """
    if not (_contains_traced(start) or _contains_traced(stop)):
        return _xp(start, stop).geomspace(start, stop, num, endpoint, dtype, axis)
    num = _num(num, "geomspace")
    start, stop = asarray(start), asarray(stop)
    known = [concrete(start), concrete(stop)]
    if all(k is not None for k in known) and any(np.any(np.asarray(k) == 0) for k in known):
        raise ValueError("geomspace: a geometric sequence cannot include zero; give non-zero start and stop")
    sign = ew.stop_gradient(ew.sign(start))  # NumPy: the sequence takes start's sign
    samples = sign * logspace(ew.log10(start * sign), ew.log10(stop * sign), num, endpoint, axis=0)
    shape = tuple(samples.shape[1:])
    if num > 0:
        samples = samples.at[0].set(_shape.broadcast_to(start, shape))
    if endpoint and num > 1:
        samples = samples.at[-1].set(_shape.broadcast_to(stop, shape))
    samples = _shape.moveaxis(samples, 0, axis)
    return samples if dtype is None else ew.astype(samples, dtype)


def _xp(*values):
    """The module that makes a range of concrete endpoints: theirs when one is an array of another
    backend (CuPy), else the default backend (endpoints are usually Python scalars)."""
    on_device = any(array_module(v) not in (None, np) for v in values)
    return namespace_of(*values) if on_device else default_namespace()
