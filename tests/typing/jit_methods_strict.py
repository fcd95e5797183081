"""A method decorated with ``@tg.jit`` keeps its signature, less ``self``, under ``mypy --strict``
(``make lint``): the bound method takes the method's other parameters and returns its return type."""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import tapegrad as tg


class Model:
    def __init__(self, scale: float) -> None:
        self.scale = scale

    @tg.jit
    def apply(self, x: npt.NDArray[np.float64], shift: float) -> npt.NDArray[np.float64]:
        return x * self.scale + shift


def use() -> npt.NDArray[np.float64]:
    model = Model(2.0)
    out = model.apply(np.ones(2), 1.0)
    assert_type(out, npt.NDArray[np.float64])
    return out
