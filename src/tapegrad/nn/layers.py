"""Layers: ``Dense`` (MindSpore's fully connected layer), ``Embedding``, ``Flatten``, ``Sequential``, and
activation modules."""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._array_type import Array
from tapegrad._backend import default_namespace, is_array
from tapegrad._params import Parameter
from tapegrad._typing import ArrayLike
from tapegrad.nn import functional as F
from tapegrad.nn import init
from tapegrad.nn._args import Activation, Initializer, as_int
from tapegrad.nn._module import Module
from tapegrad.nn._norm import embedding, padding_index

__all__ = ["Dense", "Embedding", "Flatten", "ReLU", "Sequential", "Sigmoid", "Tanh"]

_ACTIVATIONS = {
    "relu": F.relu, "tanh": F.tanh, "sigmoid": F.sigmoid, "gelu": F.gelu, "silu": F.silu, "swish": F.silu,
    "elu": F.elu, "leaky_relu": F.leaky_relu, "softplus": F.softplus, "softmax": F.softmax,
    "log_softmax": F.log_softmax,
}

_INITIALIZERS = {
    "zeros": init.zeros, "ones": init.ones, "xavier_uniform": init.xavier_uniform,
    "xavier_normal": init.xavier_normal, "kaiming_uniform": init.kaiming_uniform,
    "he_uniform": init.kaiming_uniform, "kaiming_normal": init.kaiming_normal, "he_normal": init.kaiming_normal,
}


def _resolve_activation(activation: Activation) -> Callable[[Array], Array] | None:
    if activation is None or callable(activation):
        return activation
    if isinstance(activation, str) and activation.lower() in _ACTIVATIONS:
        return _ACTIVATIONS[activation.lower()]
    raise ValueError(f"activation must be a callable, None or one of {sorted(_ACTIVATIONS)}, got "
                     f"{activation!r}")


def _initial_value(spec: Initializer, shape: tuple, dtype: np.dtype[Any], rng: np.random.Generator, bound: float,
                   what: str) -> Any:
    """The starting array of one Parameter from its ``*_init`` argument (see :class:`Dense`)."""
    value: Any  # an initialiser's result: a concrete array of the default namespace, or a list
    if spec is None:
        value = init.uniform(shape, dtype, rng, -bound, bound)
    elif isinstance(spec, str):
        if spec not in _INITIALIZERS:
            raise ValueError(f"{what}: unknown initialiser {spec!r}; use one of {sorted(_INITIALIZERS)}, "
                             "an array, or a callable (shape, dtype, rng) -> array")
        value = _INITIALIZERS[spec](shape, dtype, rng)
    elif isinstance(spec, numbers.Number) and not isinstance(spec, bool):
        value = init.constant(shape, dtype, rng, spec)
    elif callable(spec) and not isinstance(spec, Parameter):
        value = spec(shape, dtype, rng)
    else:
        value = spec
    if isinstance(value, Parameter):
        value = value.value
    if is_array(value):
        value = value.astype(dtype, copy=True)
    else:
        value = np.array(value, dtype=dtype)
    if tuple(value.shape) != shape:
        raise ValueError(f"{what} has shape {tuple(value.shape)}, but the layer needs {shape}; give an array "
                         f"of shape {shape} or a callable (shape, dtype, rng) -> array")
    return default_namespace().asarray(value) if isinstance(value, np.ndarray) else value


class Dense(Module):
    """Fully connected layer ``activation(x @ weight.T + bias)`` (MindSpore's ``nn.Dense``, PyTorch's
    ``nn.Linear``).

    Args:
        in_channels: size of the last axis of the input.
        out_channels: size of the last axis of the output.
        weight_init: how ``weight`` (shape ``(out_channels, in_channels)``) starts:

            - None: ``U(-1/sqrt(in_channels), 1/sqrt(in_channels))``, PyTorch's default (the same as
              ``init.kaiming_uniform(a=sqrt(5))`` and MindSpore's ``HeUniform(sqrt(5))``);
            - an array of that shape (copied, cast to ``dtype``);
            - a Python number: every element equal to it;
            - a callable ``(shape, dtype, rng) -> array``, e.g. ``nn.init.xavier_uniform`` or
              ``functools.partial(nn.init.normal, std=0.01)``;
            - a name: ``"zeros"``, ``"ones"``, ``"xavier_uniform"``, ``"xavier_normal"``,
              ``"kaiming_uniform"``/``"he_uniform"``, ``"kaiming_normal"``/``"he_normal"`` (the
              functions of ``nn.init`` with their default options).
        bias_init: the same for ``bias`` (shape ``(out_channels,)``); None also draws from
            ``U(-1/sqrt(in_channels), 1/sqrt(in_channels))``, as PyTorch.
        has_bias: False leaves the bias out (``self.bias`` is None).
        activation: applied to the output: None, a callable (a function or a module such as
            ``nn.ReLU()``), or a name: ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"gelu"``, ``"silu"``
            (``"swish"``), ``"elu"``, ``"leaky_relu"``, ``"softplus"``, ``"softmax"``,
            ``"log_softmax"``.
        dtype: of the Parameters (float32 by default).
        seed: for the random initialisers (``np.random.default_rng(seed)``); None draws fresh entropy.

    Input ``(..., in_channels)``; output ``(..., out_channels)``, of the result dtype of the input and
    the weights (float32 weights on a float32 input give float32).

    Raises:
        ValueError: a non-positive size; an initial array of the wrong shape; an unknown activation
            or initialiser name; (at the call) an input whose last axis is not ``in_channels``.
        TypeError: sizes that are not integers.
    """

    def __init__(self, in_channels: int, out_channels: int, weight_init: Initializer = None,
                 bias_init: Initializer = None, has_bias: bool = True,
                 activation: Activation = None, dtype: Any = np.float32,
                 seed: int | None = None) -> None:
        super().__init__()
        self.in_channels = as_int(in_channels, "in_channels", "Dense", minimum=1)
        self.out_channels = as_int(out_channels, "out_channels", "Dense", minimum=1)
        self.has_bias = bool(has_bias)
        self.activation_name = activation if isinstance(activation, str) else getattr(
            activation, "__name__", None if activation is None else type(activation).__name__)
        self.activation = _resolve_activation(activation)
        dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.in_channels)
        self.weight = Parameter(_initial_value(weight_init, (self.out_channels, self.in_channels), dtype, rng,
                                               bound, "Dense weight_init"))
        self.bias = Parameter(_initial_value(bias_init, (self.out_channels,), dtype, rng, bound,
                                             "Dense bias_init")) if self.has_bias else None

    def __call__(self, x: ArrayLike) -> Array:
        shape = getattr(x, "shape", None)
        if shape is not None and (len(shape) == 0 or shape[-1] != self.in_channels):
            raise ValueError(f"Dense({self.in_channels}, {self.out_channels}): the input's last axis must "
                             f"have length {self.in_channels}, got an input of shape {tuple(shape)}")
        out = tnp.matmul(x, tnp.transpose(self.weight.value))
        if self.bias is not None:
            out = out + self.bias.value
        if self.activation is not None:
            out = self.activation(out)
        return out

    def extra_repr(self) -> str:
        text = f"in_channels={self.in_channels}, out_channels={self.out_channels}"
        if not self.has_bias:
            text += ", has_bias=False"
        if self.activation_name is not None:
            text += f", activation={self.activation_name}"
        return text


class Sequential(Module):
    """Layers called one after the other: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Args:
        *layers: Modules or plain callables (``tnp.tanh``, a lambda); a single list or tuple of them
            is accepted too. They are kept in ``self.layers``, so their Parameters are named
            ``"layers.0.weight"``, ``"layers.2.bias"``, ...

    Indexing gives a layer (``seq[0]``), slicing a new ``Sequential`` sharing the layers.

    Raises:
        TypeError: a layer that is not callable.
    """

    def __init__(self, *layers: Any) -> None:
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: layer {i} is a {type(layer).__name__}, which is not callable; "
                                "pass Modules or functions")
        self.layers = list(layers)

    def __call__(self, x: ArrayLike) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x

    def append(self, layer: Any) -> Sequential:
        """Add ``layer`` at the end (PyTorch's ``nn.Sequential.append``).

        Args:
            layer: a Module or a callable.

        Returns:
            The Sequential itself.

        Raises:
            TypeError: ``layer`` is not callable.
        """
        if not callable(layer):
            raise TypeError(f"Sequential.append: a {type(layer).__name__} is not callable")
        self.layers.append(layer)
        self.layers = self.layers  # assigned again, so that the new layer's Parameters are named ("layers.3.weight")
        return self

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(self.layers[index])
        return self.layers[index]

    def __repr__(self):
        lines = ["Sequential("]
        for i, layer in enumerate(self.layers):
            text = repr(layer) if isinstance(layer, Module) else getattr(layer, "__name__", repr(layer))
            lines.append(f"  ({i}): " + text.replace("\n", "\n  "))
        return "\n".join(lines) + "\n)"


class ReLU(Module):
    """``max(x, 0)`` as a module (:func:`tapegrad.nn.functional.relu`)."""

    def __call__(self, x: ArrayLike) -> Array:
        return F.relu(x)


class Tanh(Module):
    """``tanh(x)`` as a module."""

    def __call__(self, x: ArrayLike) -> Array:
        return F.tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` as a module (:func:`tapegrad.nn.functional.sigmoid`)."""

    def __call__(self, x: ArrayLike) -> Array:
        return F.sigmoid(x)


class Embedding(Module):
    """A lookup table: ``Embedding(n, d)(idx) == weight[idx]`` (``torch.nn.Embedding``).

    Args:
        num_embeddings: ``n``, the number of rows (the vocabulary size).
        embedding_dim: ``d``, the length of each row.
        padding_idx: a row that gets no gradient (:func:`tapegrad.nn.functional.embedding`), set to
            zeros at initialisation; a negative index counts from the end. None: no such row.
        weight_init: how ``weight`` (shape ``(n, d)``) starts: None draws from ``N(0, 1)``, PyTorch's
            default; otherwise as :class:`Dense`'s ``weight_init`` (an array, a number, a callable
            ``(shape, dtype, rng) -> array`` or an initialiser's name). The ``padding_idx`` row is then
            zeroed, except when an array is given: its values are kept as they are (as PyTorch's
            ``Embedding.from_pretrained``).
        dtype: of ``weight`` (float32 by default).
        seed: for the random initialisers (``np.random.default_rng(seed)``); None draws fresh entropy.

    Input: integer indices of any shape, in ``[0, n)``; output ``input.shape + (d,)``, of ``weight``'s
    dtype.

    Raises:
        TypeError: sizes that are not ints; (at the call) non-integer indices.
        ValueError: a non-positive size; ``padding_idx`` outside ``[-n, n)``; an initial array of the
            wrong shape.
        IndexError: (at the call) an index outside ``[0, n)``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 weight_init: Initializer = None, dtype: Any = np.float32,
                 seed: int | None = None) -> None:
        super().__init__()
        self.num_embeddings = as_int(num_embeddings, "num_embeddings", "Embedding", minimum=1)
        self.embedding_dim = as_int(embedding_dim, "embedding_dim", "Embedding", minimum=1)
        padding_idx = padding_index(padding_idx, self.num_embeddings, "Embedding")
        self.padding_idx = padding_idx
        shape, dtype = (self.num_embeddings, self.embedding_dim), np.dtype(dtype)
        given = hasattr(weight_init, "shape") and not callable(weight_init)
        value = _initial_value(init.normal if weight_init is None else weight_init, shape, dtype,
                               np.random.default_rng(seed), 1.0, "Embedding weight_init")
        if padding_idx is not None and not given:
            value[padding_idx] = 0  # a fresh array of our own, not yet a Parameter
        self.weight = Parameter(value)

    def __call__(self, input: ArrayLike) -> Array:
        return embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text if self.padding_idx is None else text + f", padding_idx={self.padding_idx}"


class Flatten(Module):
    """Merges axes ``start_dim`` to ``end_dim`` (inclusive) into one (``torch.nn.Flatten``).

    Args:
        start_dim: the first axis to merge (1 by default: the batch axis 0 is kept).
        end_dim: the last axis to merge (-1: the last). Negative axes count from the end.

    Input of shape ``(d0, ..., dk)``; output of shape ``(d0, ..., d[start-1], d[start] * ... *
    d[end], d[end+1], ...)``, same dtype; a view-like reshape (the gradient is reshaped back).

    Raises:
        TypeError: axes that are not ints.
        numpy.exceptions.AxisError: (at the call) an axis out of range for the input, or ``start_dim``
            after ``end_dim``. It is both a ``ValueError`` and an ``IndexError`` (PyTorch raises
            ``IndexError``).
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = as_int(start_dim, "start_dim", "Flatten")
        self.end_dim = as_int(end_dim, "end_dim", "Flatten")

    def __call__(self, x: ArrayLike) -> Array:
        shape = tuple(x.shape)
        rank = max(len(shape), 1)  # a 0-d input is flattened as if it were (1,), as torch.flatten
        start, end = self.start_dim, self.end_dim
        for what, dim in (("start_dim", start), ("end_dim", end)):
            if not -rank <= dim < rank:
                raise np.exceptions.AxisError(f"Flatten: {what}={dim} is out of range for an input of shape "
                                              f"{shape} (axes -{rank} to {rank - 1})")
        start, end = start % rank, end % rank
        if start > end:
            raise np.exceptions.AxisError(f"Flatten: start_dim={self.start_dim} comes after end_dim="
                                          f"{self.end_dim} for an input of shape {shape}")
        if not shape:
            return tnp.reshape(x, (1,))
        merged = math.prod(shape[start:end + 1])
        return tnp.reshape(x, shape[:start] + (merged,) + shape[end + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
