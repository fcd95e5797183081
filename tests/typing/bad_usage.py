"""A typed user program with mistakes that mypy must reject (tests/test_typing.py, `make lint`).

Each line ending in ``# expect: [code]`` must get exactly that mypy error, and no other line an error:
a checker configuration that fails for another reason (a missing import, a syntax error) fails the check.
The program is never run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp


def loss(w: Any, x: Any) -> Any:
    return tnp.sum((x @ w) ** 2)


w, x = np.ones(3), np.ones((4, 3))

# grad_position is an int or a tuple of ints, not a string (nor a list)
tg.grad(loss, grad_position="0")  # expect: [call-overload]
tg.value_and_grad(loss, grad_position=[0, 1])  # expect: [call-overload]

# has_aux is a bool
tg.grad(loss, has_aux="yes")  # expect: [call-overload]

# value_and_grad returns (value, gradients), not an array
print(tg.value_and_grad(loss)(w, x).shape)  # expect: [attr-defined]

# the gradient function takes loss's arguments
tg.grad(loss)(w)  # expect: [call-arg]

# a misspelt name
tg.value_and_gradient(loss)  # expect: [attr-defined]

# a layer's activation is a name, a callable of an Array, or None; an initialiser is not any object
tg.nn.Dense(3, 2, activation=1)  # expect: [arg-type]
tg.nn.Dense(3, 2, weight_init=object())  # expect: [arg-type]

# tapegrad.numpy returns tg.Array: no in-place writes (a traced value has none), and it is not an ndarray
tnp.zeros(3)[0] = 1.0  # expect: [index]
table: np.ndarray = tnp.sin(w)  # expect: [assignment]
tnp.sum(w).numpy()  # expect: [attr-defined]
