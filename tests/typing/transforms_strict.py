"""The transforms' results keep a typed program's types under ``mypy --strict`` (``make lint``).

``grad`` and ``value_and_grad`` with the default ``grad_position=0`` give the gradient the type of the
function's first parameter (a pytree type like ``Params`` included), ``vjp`` and ``jvp`` keep the output
and primal types, and what no type can spell (other positions, weights, Jacobians) is ``Any``.
``assert_type`` pins each overload; a ``type: ignore[code]`` line is a usage mypy must reject, since
``--strict`` reports an ignore that no longer silences anything.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import tapegrad as tg
import tapegrad.numpy as tnp

Vec = npt.NDArray[np.complex128]


class Params(NamedTuple):
    w: Vec
    b: Vec


class Stats(NamedTuple):
    norm: Vec


def loss(params: Params, x: Vec) -> Vec:
    return params.w * x + params.b  # grad sums the outputs (MindSpore's convention)


def loss_with_stats(params: Params, x: Vec) -> tuple[Vec, Stats]:
    out = loss(params, x)
    return out, Stats(out * out)


def cube(z: Vec) -> Vec:
    return z * z * z


def cube_with_stats(z: Vec) -> tuple[Vec, Stats]:
    return cube(z), Stats(z)


def gradient_step(params: Params, x: Vec, lr: float) -> Params:
    """A typed training step: the gradient is a ``Params``, so no "Returning Any" and no cast."""
    g = tg.grad(loss)(params, x)
    assert_type(g, Params)
    return Params(params.w - lr * g.w, params.b - lr * g.b)


def gradients(params: Params, x: Vec) -> None:
    assert_type(tg.grad(loss, holomorphic=True)(params, x), Params)
    assert_type(tg.grad(loss, 0)(params, x), Params)
    assert_type(tg.grad(loss_with_stats, has_aux=True)(params, x), tuple[Params, tuple[Any, ...]])
    assert_type(tg.value_and_grad(loss)(params, x), tuple[Vec, Params])
    assert_type(tg.value_and_grad(loss_with_stats, has_aux=True)(params, x), tuple[tuple[Vec, Stats], Params])
    # other positions, several of them, weights or return_ids: the structure follows values, so Any
    assert_type(tg.grad(loss, grad_position=1)(params, x), Any)
    assert_type(tg.grad(loss, (0, 1))(params, x), Any)
    assert_type(tg.grad(loss, return_ids=True)(params, x), Any)
    assert_type(tg.value_and_grad(loss, grad_position=1)(params, x), tuple[Vec, Any])
    scale = tg.Parameter(np.ones(2, np.complex128), name="scale")

    def weight_loss() -> Any:  # a loss of the weights alone takes no argument
        return tnp.sum(tnp.square(scale))
    assert_type(tg.grad(weight_loss, None, scale)(), Any)
    # the gradient function keeps the loss's parameters
    keep: Callable[[Params, Vec], Params] = tg.grad(loss)
    del keep


def products(z: Vec) -> None:
    out, vjp_fn = tg.vjp(cube, z, holomorphic=True)
    assert_type(out, Vec)
    assert_type(vjp_fn(np.ones_like(z)), tuple[Vec])
    out2, vjp_fn2, stats = tg.vjp(cube_with_stats, z, has_aux=True)
    assert_type((out2, stats), tuple[Vec, Stats])
    assert_type(tg.jvp(cube, (z,), (np.ones_like(z),)), tuple[Vec, Vec])
    assert_type(tg.jvp(cube_with_stats, (z,), (z,), has_aux=True), tuple[Vec, Vec, Stats])
    # a Jacobian's structure is the output's with input-shaped blocks: Any, the arguments still checked
    assert_type(tg.jacrev(cube, holomorphic=True)(z), Any)
    assert_type(tg.jacfwd(cube)(z), Any)
    assert_type(tg.hessian(lambda z: tnp.sum(cube(z)), holomorphic=True)(z), Any)
    assert_type(tg.jacrev(lambda z: (cube(z), 1), has_aux=True)(z), tuple[Any, Any])
    del vjp_fn2


def rejected(params: Params, x: Vec) -> None:
    # each line must be an error: an unused ignore is one under --strict
    tg.grad(loss)(params)  # type: ignore[call-arg]
    tg.jacrev(cube)(x, x)  # type: ignore[call-arg]
    tg.jacrev(cube, grad_position=None)  # type: ignore[call-overload]
    wrong: Vec = tg.grad(loss)(params, x)  # type: ignore[assignment]
    tg.grad(loss, holomorphic="yes")  # type: ignore[call-overload]
    shape = tg.value_and_grad(loss)(params, x).shape  # type: ignore[attr-defined]
    del wrong, shape


if __name__ == "__main__":
    p, xs = Params(np.array([1.0 + 1j, 2.0]), np.array([0.5j, 0.0])), np.array([1.0 - 1j, 2.0 + 0j])
    print(gradient_step(p, xs, 0.1))
    gradients(p, xs)
    products(xs)
