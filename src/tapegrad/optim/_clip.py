"""Gradient clipping by global norm and by value, as PyTorch's ``torch.nn.utils.clip_grad_norm_`` and
``clip_grad_value_``: pure functions in ``tapegrad.numpy`` operations, so they work under ``jit`` and
``vmap`` (per-example clipping) and are differentiable."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.numpy._creation import at_rest
from tapegrad.optim._base import _plain, rate_like
from tapegrad.tree import tree_flatten, tree_unflatten


def clip_grad_norm(grads: PyTree, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Any:
    """Scale ``grads`` so that their global norm is at most ``max_norm``.

    The global norm is the ``norm_type``-norm of the vector of every leaf's ``norm_type``-norm (the
    norm of all entries together); each leaf is multiplied by

    .. code-block:: text

        coef = min(1, max_norm / (total_norm + 1e-6))

    which is PyTorch's ``clip_grad_norm_`` formula (Pascanu, Mikolov & Bengio, 2013, with the 1e-6
    guard), out of place.

    Non-finite gradients follow PyTorch's default ``error_if_nonfinite=False``: the total norm is inf
    or NaN and is returned as such, ``coef`` is 0 (inf norm) or NaN, so the clipped gradients hold 0
    or NaN; check ``total_norm`` (or use ``tg.optim.LossScaler``) to skip such a step.

    Args:
        grads: a pytree of gradient arrays (the tuple ``grad(..., weights=...)`` returns, a dict...).
        max_norm: the largest global norm, ``>= 0``.
        norm_type: ``p`` of the p-norm, ``> 0``, or ``inf`` (``float("inf")``, the largest ``|g|``).
        error_if_nonfinite: raise if the total norm is inf or NaN. Needs a concrete norm, so under
            ``jit`` or ``vmap`` it raises ``ConcretizationError``; the default False works anywhere.

    Returns:
        ``(clipped_grads, total_norm)``, the gradients in ``grads``' structure, each leaf in its dtype,
        and the global norm before clipping, a 0-d array in the gradients' result dtype (float32 for
        float16 gradients, whose norm would overflow past 65504; float64 for no leaves).

    Raises:
        ValueError: ``max_norm`` is negative or NaN; ``norm_type`` is not positive; with
            ``error_if_nonfinite``, a non-finite total norm.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not max_norm >= 0:
        raise ValueError(f"clip_grad_norm: max_norm must be >= 0, got {max_norm}")
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm: norm_type must be > 0 or inf, got {norm_type}")
    leaves, treedef = tree_flatten(_plain(grads))
    if not leaves:
        return grads, tnp.zeros((), np.float64)
    norms = tnp.stack([_vector_norm(g, norm_type) for g in leaves])
    total_norm = at_rest(_vector_norm(norms, norm_type))
    if error_if_nonfinite and not bool(tnp.isfinite(total_norm)):
        raise ValueError(f"clip_grad_norm: the total norm of order {norm_type} of the gradients is "
                         f"{float(total_norm)}; with error_if_nonfinite=False the clipped gradients are 0 or NaN")
    coef = tnp.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_unflatten(treedef, [at_rest(g * rate_like(coef, g)) for g in leaves]), total_norm


def _vector_norm(x, norm_type: float):
    """The ``norm_type``-norm of all the entries of ``x``; float16 entries in float32, since a global norm
    past 65504 is inf in float16, which would zero every gradient (PyTorch's foreach path does the same)."""
    if x.dtype == np.float16:
        x = tnp.astype(x, np.float32)
    if math.isinf(norm_type):
        return tnp.max(tnp.abs(x))
    return tnp.linalg.norm(tnp.ravel(x), ord=norm_type)


def clip_grad_value(grads: PyTree, clip_value: float) -> Any:
    """Clip every gradient entry to ``[-clip_value, clip_value]``, as PyTorch's ``clip_grad_value_``
    (out of place).

    The derivative of the clipped entries with respect to the gradients is 1 inside the interval and
    at its ends, 0 outside (``tnp.clip``'s convention).

    Args:
        grads: a pytree of gradient arrays.
        clip_value: the largest ``|g|``, ``>= 0``.

    Returns:
        The clipped gradients in ``grads``' structure, each leaf in its dtype.

    Raises:
        ValueError: ``clip_value`` is negative or NaN.
    """
    clip_value = float(clip_value)
    if not clip_value >= 0:
        raise ValueError(f"clip_grad_value: clip_value must be >= 0, got {clip_value}")
    leaves, treedef = tree_flatten(_plain(grads))
    return tree_unflatten(treedef, [tnp.clip(g, -clip_value, clip_value) for g in leaves])
