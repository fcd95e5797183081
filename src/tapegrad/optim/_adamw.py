"""``AdamW`` (Loshchilov & Hutter, 2019), as ``torch.optim.AdamW``: Adam with decoupled weight decay."""
from __future__ import annotations

from typing import Any

from tapegrad._typing import PyTree
from tapegrad.optim._adam import Adam


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay
    Regularization", ICLR 2019, Algorithm 2), as ``torch.optim.AdamW``.

    Per parameter ``p`` with gradient ``g``, at update ``t = 1, 2, ...``:

    .. code-block:: text

        p = p * (1 - lr * weight_decay)               # the decay, applied to p before the Adam step
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    The decay is scaled by the current learning rate, as PyTorch does (the paper's schedule
    multiplier ``eta_t`` is the rate's schedule), so a learning-rate schedule scales it too. This is
    :class:`Adam` with ``decoupled_weight_decay=True`` and another default ``weight_decay``; the state
    and both styles are Adam's (:class:`AdamState`).

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``).
        betas: ``(beta1, beta2)``, each in ``[0, 1)``.
        eps: added to the denominator for stability.
        weight_decay: the decoupled decay coefficient (PyTorch's default 0.01).

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; a beta outside ``[0, 1)``.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-3, betas: Any = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decoupled_weight_decay=True)
