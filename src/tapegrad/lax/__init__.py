"""``tapegrad.lax``: JAX's ``lax`` spellings over tapegrad's operations, so that a ported program can
write ``from tapegrad import lax`` and keep its calls.

What is here:

- **Dynamic slices** (:func:`dynamic_slice`, :func:`dynamic_slice_in_dim`, :func:`dynamic_index_in_dim`,
  :func:`dynamic_update_slice`, :func:`dynamic_update_slice_in_dim`, :func:`dynamic_update_index_in_dim`):
  slices of a static size at start indices that may be traced (under ``jit``, ``vmap``, ``grad``),
  clamped so that the slice fits, as XLA's ``DynamicSlice`` does.
- **Windowed reductions** (:func:`reduce_window` with :data:`max`, :data:`min` or :data:`add`, and
  :func:`padtype_to_pads`): what stax's pooling layers and DP-SGD's max-pool call.
- **Control flow and derivative controls** under their ``lax`` names: ``cond``, ``switch``, ``scan``,
  ``fori_loop``, ``while_loop``, ``map``, ``stop_gradient``, ``custom_root``, ``custom_linear_solve``
  (the same objects as ``tg.cond`` and friends), and :func:`select`.

Everything is composed of ``tapegrad.numpy`` operations (static slices, integer-array gathers,
``.at[...].set``, stacking and reductions), so every transform, every derivative order and jit's
executors serve it with no rules of its own. ``docs/lax.md`` is the guide: the semantics, the
differences from JAX (ties in ``max``/``min`` split the gradient evenly), and what runs compiled.

The elementwise ``lax`` functions (``lax.exp``, ``lax.mul``, ...) are not repeated here: ``tapegrad.numpy``
has them under NumPy's names, and a second spelling of each would be a second thing to keep in step.
"""
from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad._api import stop_gradient
from tapegrad._control_flow import cond, custom_linear_solve, custom_root, fori_loop, map, scan, switch, while_loop
from tapegrad._typing import Array, ArrayLike
from tapegrad.lax._slicing import (
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice,
    dynamic_update_slice_in_dim,
)
from tapegrad.lax._windows import padtype_to_pads, reduce_window

__all__ = [
    "add", "cond", "custom_linear_solve", "custom_root", "dynamic_index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "fori_loop", "map", "max", "min", "padtype_to_pads", "reduce_window", "scan", "select", "stop_gradient",
    "switch", "while_loop",
]

# JAX's names for the binary operations reduce_window takes: the same functions as tapegrad.numpy's
add = tnp.add
max = tnp.maximum
min = tnp.minimum


def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Array:
    """``on_true`` where ``pred`` is true, else ``on_false`` (JAX's ``lax.select``; ``tnp.where``).

    Args:
        pred: a boolean array (or scalar) that broadcasts with the two values.
        on_true, on_false: the values, differentiable; the gradient of each is zero where it is not chosen.

    Returns:
        An array of the broadcast shape and the values' promoted dtype (JAX requires equal shapes and
        dtypes; broadcasting here is NumPy's, a superset).
    """
    return tnp.where(pred, on_true, on_false)
