"""Dropout (Srivastava et al. 2014, PyTorch's inverted form): the functional ``dropout`` with an
explicit key, and the ``Dropout`` module that keeps its own key in a Parameter."""
from __future__ import annotations

import numbers
from typing import cast

import numpy as np

import tapegrad.numpy as tnp
from tapegrad import random
from tapegrad._array_type import Array
from tapegrad._core import Boxed, Tracer, bind
from tapegrad._params import Parameter
from tapegrad._random import check_key, uniform_p
from tapegrad._typing import ArrayLike
from tapegrad.nn._args import as_int
from tapegrad.nn._module import Module


def _check_p(p, fn: str) -> float:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise TypeError(f"{fn}: p must be a float in [0, 1], got {type(p).__name__} {p!r}")
    if not 0.0 <= p <= 1.0:  # type: ignore[operator]  # PyTorch's message; typeshed's Real has no reflected <=
        raise ValueError(f"{fn}: dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def dropout(input: ArrayLike, p: float = 0.5, training: bool = True, *, key: ArrayLike = None) -> Array:
    """Zero each element of ``input`` with probability ``p`` and scale the kept ones by ``1 / (1 - p)``
    (``torch.nn.functional.dropout``, inverted dropout), so the expected value is unchanged.

    The result is ``input * mask`` with ``mask = keep / (1 - p)`` in ``input``'s dtype (PyTorch's
    formula), ``keep = uniform(key, input.shape) < 1 - p`` drawn in ``input``'s dtype (float32 for a
    float16 input). The mask is a constant, so the gradient is ``mask * ct`` at every order.

    Args:
        input: a real float array (or a traced one).
        p: the probability of zeroing an element, in ``[0, 1]``. ``p = 1`` gives ``input * 0`` (zeros,
            NaN where ``input`` is NaN, as PyTorch); ``p = 0`` gives ``input``.
        training: False returns ``input`` unchanged (evaluation mode).
        key: a key from :mod:`tapegrad.random` (keyword only); required when ``training`` and
            ``0 < p < 1``. The same key gives the same mask; split the key for each call. Under
            ``vmap`` a batched key gives each example its own mask and a shared key the same mask.

    Returns:
        An array of ``input``'s shape and dtype (``input`` itself where nothing is dropped).

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
        TypeError: ``p`` not a number; ``training`` not a bool; ``key`` missing when it is needed or
            not a key; ``input`` not a real float array.
    """
    p = _check_p(p, "dropout")
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"dropout: training must be a bool, got {type(training).__name__} {training!r}")
    if not training or p == 0.0:
        return input
    if isinstance(input, Boxed):
        input = input.unbox()
    if not isinstance(input, Tracer):
        input = tnp.asarray(input)
    dtype = np.dtype(input.dtype)
    if dtype.kind != "f":
        raise TypeError(f"dropout: input must be a real float array, got dtype {dtype}; cast it first")
    if p == 1.0:
        return input * 0.0
    if key is None:
        raise TypeError("dropout: key is required when training with 0 < p < 1: pass key=tg.random.key(seed) "
                        "(a fresh split for each call), or use nn.Dropout, which keeps a key of its own")
    key = check_key(key, "dropout")
    draw_dtype = np.dtype(np.float32) if dtype == np.float16 else dtype
    keep = bind(uniform_p, key, shape=tuple(input.shape), dtype=draw_dtype) < 1.0 - p
    mask = tnp.astype(keep, dtype) / (1.0 - p)
    return input * mask


class Dropout(Module):
    """Dropout as a module (``torch.nn.Dropout``): :func:`dropout` in training mode, the identity in
    evaluation mode (``eval()``).

    The layer keeps its key in ``self.key``, a ``Parameter`` with ``requires_grad=False`` (so
    ``trainable_params()`` leaves it out). Each training call without ``key=`` splits it, draws the
    mask from one child and stores the other with ``Parameter.assign``: consecutive calls get
    different masks, and the sequence is reproducible from ``seed``. Under ``jit`` the key is an
    implicit input and the new key a written-back output, so a jitted training step advances it too.

    Args:
        p: the probability of zeroing an element, in ``[0, 1]``.
        seed: an int, or a key from :mod:`tapegrad.random` (``split`` one key to give several layers
            their own); None (default) draws fresh entropy, so two layers never share masks (as
            ``nn.Dense``'s ``seed=None``). Give a seed for reproducible masks, and give each layer
            its own: layers with the same seed draw the same masks for inputs of the same shape.

    A call ``layer(x, key=k)`` uses ``k`` and leaves ``self.key`` alone (to manage keys yourself).
    Under ``checkpoint`` the recomputation starts from the key the forward pass saw, so it draws the
    same mask and the key advances once. Under
    ``vmap`` the layer's key is shared, so every example gets the same mask (JAX's semantics); pass a
    batched ``key=`` for per-example masks.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. TypeError: ``p`` not a number; ``seed`` neither an int,
        a key nor None.
    """

    def __init__(self, p: float = 0.5, seed: int | None = None) -> None:
        super().__init__()
        self.p = _check_p(p, "Dropout")
        self.key = Parameter(_initial_key(seed), requires_grad=False)

    def __call__(self, x: ArrayLike, *, key: ArrayLike = None) -> Array:
        if not self.training or self.p in (0.0, 1.0):
            return dropout(x, self.p, self.training, key=key)
        if key is not None:
            return dropout(x, self.p, True, key=key)
        keys = random.split(self.key.value)
        out = dropout(x, self.p, True, key=keys[1])
        self.key.assign(keys[0])  # only after a successful draw: a refused input leaves the key as it was
        return out

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _initial_key(seed):
    if seed is None:
        return random.key(cast(int, np.random.SeedSequence().entropy))  # an int: no entropy was given
    if hasattr(seed, "shape") and not isinstance(seed, np.integer):
        return check_key(seed, "Dropout").copy()  # the layer's own key, on the seed's backend
    return random.key(as_int(seed, "seed", "Dropout", expected="an int, a key or None"))
