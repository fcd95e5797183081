"""A typed user program that mypy must accept (tests/test_typing.py, `make lint`).

It uses the API as a user's typed code does: grad with grad_position and weights, value_and_grad
with has_aux, jit, vmap, checkpoint, custom_vjp, an nn.Module with Parameters, an optimiser step and
tapegrad.numpy. assert_type pins what the overloads give, so a change to them shows here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from typing_extensions import assert_type

import tapegrad as tg
import tapegrad.numpy as tnp


class MLP(tg.nn.Module):
    def __init__(self, n_in: int, n_hidden: int, n_out: int) -> None:
        super().__init__()
        self.fc1 = tg.nn.Dense(n_in, n_hidden)
        self.fc2 = tg.nn.Dense(n_hidden, n_out)
        self.scale = tg.Parameter(np.ones((), np.float32), name="scale")

    def __call__(self, x: Any) -> Any:
        return self.fc2(tnp.tanh(self.fc1(x))) * self.scale


def mse(pred: Any, target: Any) -> Any:
    return tnp.mean((pred - target) ** 2)


def train(steps: int = 3) -> float:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)
    net = MLP(4, 16, 2)
    params = net.trainable_params()
    opt = tg.optim.Adam(params, lr=1e-2)

    def loss_fn(x: Any, y: Any) -> tuple[Any, Any]:
        pred = net(x)
        return mse(pred, y), pred

    step = tg.value_and_grad(loss_fn, grad_position=None, weights=params, has_aux=True)
    assert_type(step(x, y), tuple[tuple[Any, Any], Any])  # the value is what loss_fn returns
    loss = 0.0
    for _ in range(steps):
        (value, _pred), grads = step(x, y)
        opt.step(grads)
        loss = float(value)
    return loss


def input_gradients() -> None:
    def f(a: Any, b: Any, scale: float) -> Any:
        return tnp.sum(tnp.sin(a) * b) * scale

    a, b = np.linspace(0.0, 1.0, 5), np.ones(5)
    df = tg.grad(f, grad_position=(0, 1))
    keep: Callable[[Any, Any, float], Any] = df  # f's parameters, kept
    da, db = df(a, b, 2.0)

    def with_aux(a: Any) -> tuple[Any, Any]:
        return tnp.sum(a ** 2), tnp.max(a)

    g, aux = tg.grad(with_aux, has_aux=True)(a)
    assert_type(tg.grad(with_aux, has_aux=True)(a), tuple[Any, tuple[Any, ...]])
    value, grads = tg.value_and_grad(f)(a, b, 1.0)
    np.testing.assert_allclose(tg.get_grad(tg.grad(f, return_ids=True)(a, b, 1.0), 0), g * 0 + np.cos(a))
    del da, db, aux, value, grads, keep


def transforms() -> None:
    def energy(x: Any) -> Any:
        return tnp.sum(tnp.exp(-x) * tnp.cos(x))

    fast = tg.jit(energy)
    batched = tg.vmap(tg.grad(energy))
    saved = tg.checkpoint(energy)
    assert_type(saved(np.ones(4)), Any)
    xs = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    np.testing.assert_allclose(fast(xs[0]), energy(xs[0]))
    _ = batched(xs), saved(xs[0]), tg.make_program(energy)(xs[0])

    @tg.jit(static_argnums=1)
    def power(x: Any, n: int) -> Any:
        return x ** n

    power(xs, 3)

    @tg.custom_vjp
    def clip_gradient(x: Any) -> Any:
        return x

    def fwd(x: Any) -> tuple[Any, None]:
        return x, None

    def bwd(res: None, g: Any) -> tuple[Any]:
        return (tnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(fwd, bwd)
    _ = tg.grad(lambda x: tnp.sum(clip_gradient(x) * 10.0))(xs)
    _ = tg.jvp(energy, (xs[0],), (np.ones(4),)), tg.vjp(energy, xs[0])


if __name__ == "__main__":
    print(train())
    input_gradients()
    transforms()
