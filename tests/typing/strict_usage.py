"""A typed user program that ``mypy --strict`` must accept (``make lint``, tests/test_typing.py).

It is what a strictly typed code base writes with tapegrad: an ``nn.Module`` subclass whose layers take
their activation and initialisers by name, a loss annotated ``tg.Array`` built from ``tapegrad.numpy``,
a training step with ``value_and_grad`` and an optimiser, and ``vmap``. Under ``--strict`` mypy reports a
call to an untyped function, a function returning ``Any`` where ``tg.Array`` is declared, and an unused
``type: ignore``, so each of those in tapegrad's API would fail this file. ``assert_type`` pins what the
annotations give. The program also runs (``python tests/typing/strict_usage.py``).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import Tracer  # not public: here to check that a traced value is a tg.Array

# a NumPy array is an Array: the protocol's members are ndarray's, as NumPy's stubs declare them
_float64: tg.Array = np.zeros(3)
_float32: tg.Array = np.ones((2, 2), dtype=np.float32)
_ints: tg.Array = np.arange(3)
_bools: tg.Array = np.zeros(3, dtype=bool)
_complex: tg.Array = np.zeros(3, dtype=np.complex128)
_typed: tg.Array = np.zeros(3).view(np.ndarray)


class MLP(tg.nn.Module):
    """Two Dense layers: the activation and the initialisers by name, a callable and a number."""

    def __init__(self, n_in: int, n_hidden: int, n_out: int) -> None:
        super().__init__()
        self.hidden = tg.nn.Dense(n_in, n_hidden, weight_init="xavier_uniform", bias_init="zeros",
                                  activation="relu", seed=0)
        self.out = tg.nn.Dense(n_hidden, n_out, weight_init=partial(tg.nn.init.normal, std=0.1), bias_init=0.0,
                               activation=tnp.tanh, seed=1)

    def __call__(self, x: tg.Array) -> tg.Array:
        return self.out(self.hidden(x))


class Residual(tg.nn.Module):
    """A subclass with a class-level flag and a ``forward`` returning a pair: both are the user's to type."""

    training = False

    def __init__(self, width: int) -> None:
        super().__init__()
        self.inner = tg.nn.Sequential(tg.nn.Dense(width, width), tg.nn.ReLU())

    def forward(self, x: tg.Array) -> tuple[tg.Array, tg.Array]:
        y = self.inner(x)
        return x + y, y


def mse(pred: tg.Array, target: tg.Array) -> tg.Array:
    return tnp.mean((pred - target) ** 2)


def l2(w: tg.Array) -> tg.Array:
    return tnp.sum(w * w) + tnp.abs(tnp.max(w))


def train(steps: int = 3) -> float:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)
    net = MLP(4, 16, 2)
    params: tg.ParameterTuple = net.trainable_params()
    named: list[tuple[str, tg.Parameter]] = net.named_parameters()
    opt = tg.optim.Adam(params, lr=1e-2)

    def loss_fn(x: tg.Array, y: tg.Array) -> tg.Array:
        return mse(net(x), y)

    step = tg.value_and_grad(loss_fn, grad_position=None, weights=params)
    value = 0.0
    for _ in range(steps):
        loss, grads = step(x, y)
        opt.step(grads)
        value = float(loss)
    assert len(named) == len(params)
    return value


def batched_norms() -> tg.Array:
    xs: npt.NDArray[np.float64] = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    per_row = tg.vmap(l2)
    norms = per_row(xs)
    assert_type(norms, tg.Array)  # fn returns an Array: so does the batched function

    def pair(w: tg.Array) -> tuple[tg.Array, float]:
        return w, 1.0

    assert_type(tg.vmap(pair)(xs), Any)  # the float becomes an array: no static type says so
    grads = tg.vmap(tg.grad(l2))(xs)
    total: tg.Array = tnp.sum(norms) + tnp.sum(grads)
    assert_type(tnp.sqrt(total), tg.Array)
    assert_type(total.shape, tuple[int, ...])
    gram = tnp.asarray(xs).T @ tnp.asarray(xs)
    assert_type(gram, tg.Array)
    return total


def shapes(x: tg.Array) -> tuple[int, ...]:
    y = tnp.reshape(x, (-1,)).astype(np.float32)
    z: tg.Array = tnp.concatenate([y, y]) * 2.0 - 1.0
    return z.shape


def apply(activation: Callable[[tg.Array], tg.Array], x: tg.Array) -> tg.Array:
    return activation(x)


if __name__ == "__main__":
    print(train())
    residual = Residual(3)
    pair = residual(np.ones((2, 3), dtype=np.float32))
    print(float(batched_norms()), shapes(np.ones((2, 2))), apply(tnp.exp, np.zeros(2)), len(pair))


def _tracer_is_array(t: Tracer) -> tg.Array:
    return t  # what a transform passes a function is a tg.Array too
