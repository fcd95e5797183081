"""Choosing values by an index or by conditions: ``choose`` and ``piecewise``.

Both are gathers and ``where`` selections of their operands, so they are differentiable in the
values chosen from (never in the index or the conditions) in every mode.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import zeros_like
from tapegrad.numpy._indexing import take_along_axis
from tapegrad.numpy._searching import constant_like, host_value
from tapegrad.numpy._statistics import operand


def _choice_index(a, n: int, mode: str):
    """``a`` made a valid index into ``n`` choices by ``mode`` (``'raise'`` checks a concrete ``a``)."""
    if mode == "wrap":
        return a % n
    if mode == "clip":
        return ew.clip(a, 0, n - 1)
    if mode != "raise":
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    value = host_value(a, "choose: mode='raise' needs a concrete index array to check it; under jit or vmap "
                          "pass mode='wrap' or mode='clip'")
    if value.size and (value.min() < 0 or value.max() >= n):
        raise ValueError(f"invalid entry in choice array: entries must lie in [0, {n})")
    return a


def choose(a: ArrayLike, choices: Any, out: Any = None, mode: str = "raise") -> Array:
    """Per element, the entry of the choice that the integer array ``a`` names, as ``numpy.choose``:
    ``a`` and every choice broadcast together, the result has the choices' common dtype.
    ``mode``: ``'raise'`` (a concrete ``a`` is checked), ``'wrap'`` or ``'clip'``. Differentiable in
    the choices.

    Raises:
        ValueError: an entry of ``a`` out of range with ``mode='raise'``; an unknown ``mode``.
        TypeError: ``a`` not an integer array. NotImplementedError: ``out`` given.
        ConcretizationError: ``mode='raise'`` with ``a`` traced under jit or vmap.
    """
    if out is not None:
        raise NotImplementedError("choose: out= is not supported (tapegrad never writes into arrays)")
    a = operand(a)
    if np.dtype(a.dtype).kind not in "iu":
        raise TypeError(f"choose: the index array a must be integer, got dtype {a.dtype}")
    choices = [operand(c) for c in choices]
    dtype = np.result_type(*(c.dtype for c in choices))
    a = _choice_index(a, len(choices), mode)
    shape = np.broadcast_shapes(tuple(_shape.shape(a)), *(tuple(_shape.shape(c)) for c in choices))
    stacked = _shape.stack([_shape.broadcast_to(c if np.dtype(c.dtype) == dtype else ew.astype(c, dtype), shape)
                            for c in choices])
    index = _shape.expand_dims(_shape.broadcast_to(a, shape), 0)
    return _shape.squeeze(take_along_axis(stacked, index, axis=0), axis=0)


def _condition_list(x, condlist) -> list:
    """NumPy's reading of ``condlist``: one condition (a boolean scalar, an array of ``x``'s rank, a
    flat list of booleans for a non-scalar ``x``) or a sequence of them."""
    if isinstance(condlist, (bool, np.bool_)) or (hasattr(condlist, "shape") and
                                                   _shape.ndim(condlist) == _shape.ndim(x)):
        return [condlist]
    first = condlist[0] if len(condlist) else None
    is_array = isinstance(first, list) or (hasattr(first, "shape") and not isinstance(first, np.generic))
    if not is_array and _shape.ndim(x) != 0:
        return [condlist]
    return list(condlist)


def piecewise(x: ArrayLike, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Array:
    """A piecewise-defined function of ``x``, as ``numpy.piecewise``: where ``condlist[k]`` holds the
    result is ``funclist[k](x, *args, **kw)`` (or the constant ``funclist[k]``); a later condition
    wins where several hold; one function more than conditions is the default, elsewhere 0. Same
    shape and dtype as ``x``. Differentiable in ``x`` through the function that applies at each point.

    Unlike NumPy, each function is called on the whole of ``x`` (``where`` then selects), as in JAX:
    it must accept every element, and its derivative must be finite everywhere, or the gradient
    picks up NaN from ``0 * inf`` (guard the function's input, ``tnp.where(cond, x, safe)``).

    Raises:
        ValueError: ``len(funclist)`` neither ``len(condlist)`` nor one more.
    """
    x = operand(x)
    conds = [ew.astype(operand(c), np.bool_) for c in _condition_list(x, condlist)]
    if len(funclist) == len(conds) + 1:
        otherwise = conds[0] if len(conds) == 1 else ew.logical_or(conds[0], conds[1])
        for c in conds[2:]:
            otherwise = ew.logical_or(otherwise, c)
        conds.append(ew.logical_not(otherwise) if conds else np.True_)
    elif len(funclist) != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or {len(conds) + 1} functions are "
                         f"expected, got {len(funclist)}")
    y = zeros_like(x)
    for cond, func in zip(conds, funclist):
        value = func(x, *args, **kw) if callable(func) else func
        value = value if hasattr(value, "shape") else constant_like(x, np.asarray(value))
        y = ew.where(cond, value if np.dtype(value.dtype) == np.dtype(x.dtype) else ew.astype(value, x.dtype), y)
    return y


__all__ = ["choose", "piecewise"]
