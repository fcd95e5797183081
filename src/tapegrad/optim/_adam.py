"""``Adam`` (Kingma & Ba, 2015), as ``torch.optim.Adam``."""
from __future__ import annotations

from typing import Any, NamedTuple

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.optim._base import (
    Optimizer,
    _cast_like,
    _flatten_like,
    _plain,
    check_betas,
    check_nonnegative,
    rate_like,
    zero_step,
)
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten


# ---- Adam ----------------------------------------------------------------------------------------
class AdamState(NamedTuple):
    """``Adam``'s (and ``AdamW``'s) state (a NamedTuple, a pytree), as :meth:`Adam.init` makes it and
    :meth:`Adam.update` returns it.

    Args:
        step: the number of updates done, a 0-d int32 array.
        exp_avg: the first moment estimates, a pytree like the parameters, in their dtypes.
        exp_avg_sq: the second moment estimates, a pytree like the parameters, in their dtypes.
    """

    step: Any
    exp_avg: Any
    exp_avg_sq: Any


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, Algorithm 1), with bias correction, as ``torch.optim.Adam``.

    Per parameter ``p`` with gradient ``g``, at update ``t = 1, 2, ...``:

    .. code-block:: text

        g = g + weight_decay * p                      # L2 penalty, or with decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)               # AdamW's decoupled decay instead (and g unchanged)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    (``m`` and ``v`` start at 0; ``eps`` is added after the bias correction of ``sqrt(v)``, as
    PyTorch does.)

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``, see :class:`Optimizer`).
        betas: ``(beta1, beta2)``, the decay rates of the moment estimates, each in ``[0, 1)``.
        eps: added to the denominator for stability.
        weight_decay: L2 penalty coefficient, added to the gradient; with ``decoupled_weight_decay``
            the decay rate of the decoupled decay.
        decoupled_weight_decay: decay the parameters directly (``p *= 1 - lr * weight_decay``, before
            the Adam step) instead of adding the L2 penalty's gradient: :class:`AdamW` (PyTorch's
            argument of the same name).

    Functional style: ``state = opt.init(params)`` is an :class:`AdamState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; a beta outside ``[0, 1)``.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-3, betas: Any = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False) -> None:
        name = type(self).__name__
        check_nonnegative(name, lr=lr, eps=eps, weight_decay=weight_decay)
        self.betas = check_betas(name, betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        self.decoupled_weight_decay = bool(decoupled_weight_decay)
        super().__init__(params, lr)

    def init(self, params: PyTree) -> AdamState:
        """Step 0 and zero moment estimates shaped like ``params``."""
        params = _plain(params)
        return AdamState(zero_step(params), tree_map(tnp.zeros_like, params), tree_map(tnp.zeros_like, params))

    def update(self, grads: PyTree, state: AdamState, params: PyTree, learning_rate: Any = None) -> Any:
        """One Adam step, in the functional style.

        The arguments and the return are :meth:`Optimizer.update`'s, with an :class:`AdamState` as
        ``state`` (returned with its ``step`` one higher; each array keeps its dtype).

        Raises:
            ValueError: ``grads`` or the moment estimates do not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        m_leaves = _flatten_like(state.exp_avg, treedef, "the first moments (state.exp_avg)")
        v_leaves = _flatten_like(state.exp_avg_sq, treedef, "the second moments (state.exp_avg_sq)")
        beta1, beta2 = self.betas
        lr, eps, wd = self._current_rate(learning_rate, p_leaves), self.eps, self.weight_decay
        step = tnp.asarray(state.step + 1)
        # bias corrections in float64 (from an integer step), cast to each parameter's dtype below
        step_size = lr / (1.0 - tnp.power(beta1, step))
        bias_correction2_sqrt = tnp.sqrt(1.0 - tnp.power(beta2, step))
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(p_leaves, g_leaves, m_leaves, v_leaves):
            if wd and self.decoupled_weight_decay:
                p = _cast_like(p * rate_like(1.0 - lr * wd, p), p)  # Loshchilov & Hutter (2019)
            elif wd:
                g = g + wd * p
            m = _cast_like(beta1 * m + (1.0 - beta1) * g, m)  # state keeps its dtype, as in SGD
            v = _cast_like(beta2 * v + (1.0 - beta2) * (g * g), v)
            denom = tnp.sqrt(v) / tnp.astype(bias_correction2_sqrt, v.dtype) + eps
            new_p.append(_cast_like(p - tnp.astype(step_size, m.dtype) * (m / denom), p))
            new_m.append(m)
            new_v.append(v)
        new_state = AdamState(step, tree_unflatten(treedef, new_m), tree_unflatten(treedef, new_v))
        return tree_unflatten(treedef, new_p), new_state
