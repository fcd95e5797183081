"""``SGD`` (momentum, weight decay, Nesterov) and MindSpore's ``Momentum``."""
from __future__ import annotations

from typing import Any, NamedTuple

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.optim._base import Optimizer, _cast_like, _flatten_like, _plain, check_nonnegative, rate_like
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten


# ---- SGD -----------------------------------------------------------------------------------------
class SGDState(NamedTuple):
    """``SGD``'s state (a NamedTuple, a pytree), as :meth:`SGD.init` makes it and :meth:`SGD.update`
    returns it.

    Args:
        momentum_buffer: the momentum buffers, a pytree like the parameters (each buffer keeping the
            dtype :meth:`SGD.init` gave it); None without momentum.
    """

    momentum_buffer: Any


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay.

    Per parameter ``p`` with gradient ``g`` (PyTorch's ``torch.optim.SGD`` with ``dampening=0``):

    .. code-block:: text

        g = g + weight_decay * p                      # L2 penalty, if weight_decay != 0
        b = momentum * b + g                          # b starts at 0, so b_1 = g_1 (if momentum != 0)
        g = g + momentum * b   if nesterov else   b   # Sutskever et al. (2013), in PyTorch's form
        p = p - lr * g

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``, see :class:`Optimizer`).
        momentum: momentum factor; 0 disables the buffers.
        weight_decay: L2 penalty coefficient, added to the gradient.
        nesterov: Nesterov momentum (needs ``momentum > 0``).

    Functional style: ``state = opt.init(params)`` is an :class:`SGDState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay``; ``nesterov`` with
            ``momentum == 0``.
    """

    def __init__(self, params: PyTree = None, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        check_nonnegative(type(self).__name__, lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and momentum == 0:
            raise ValueError("SGD: nesterov=True needs momentum > 0")
        self.momentum = float(momentum)
        self.weight_decay, self.nesterov = float(weight_decay), bool(nesterov)
        super().__init__(params, lr)

    def init(self, params: PyTree) -> SGDState:
        """Zero momentum buffers shaped like ``params`` (None when ``momentum == 0``)."""
        if not self.momentum:
            return SGDState(None)
        return SGDState(tree_map(tnp.zeros_like, _plain(params)))

    def update(self, grads: PyTree, state: SGDState, params: PyTree, learning_rate: Any = None) -> Any:
        """One SGD step, in the functional style.

        The arguments and the return are :meth:`Optimizer.update`'s, with an :class:`SGDState` as
        ``state`` (each buffer keeps its dtype).

        Raises:
            ValueError: ``grads`` or the state's buffers do not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        lr, mu, wd = self._current_rate(learning_rate, p_leaves), self.momentum, self.weight_decay
        b_leaves = (_flatten_like(state.momentum_buffer, treedef, "the momentum buffers") if mu
                    else [None] * len(p_leaves))
        new_p, new_b = [], []
        for p, g, b in zip(p_leaves, g_leaves, b_leaves):
            if wd:
                g = g + wd * p
            if mu:
                b = _cast_like(mu * b + g, b)  # state keeps its dtype, so that step() can assign it
                g = g + mu * b if self.nesterov else b
            new_p.append(_cast_like(p - rate_like(lr, p) * g, p))
            new_b.append(b)
        new_state = SGDState(tree_unflatten(treedef, new_b) if mu else None)
        return tree_unflatten(treedef, new_p), new_state


class Momentum(SGD):
    """MindSpore's ``nn.Momentum``: :class:`SGD` with momentum, under MindSpore's argument names.

    ``accum = momentum * accum + g``; ``p -= learning_rate * accum``, or with ``use_nesterov``
    ``p -= learning_rate * (g + momentum * accum)`` (the same rule as ``SGD(momentum=...)``).
    ``weight_decay`` adds ``weight_decay * p`` to the gradient. The state is an :class:`SGDState`;
    both styles are :class:`SGD`'s. MindSpore's ``loss_scale`` argument has no counterpart here: use
    :class:`LossScaler`.

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        learning_rate: the learning rate (SGD's ``lr``).
        momentum: the momentum factor (MindSpore requires it; 0.9 by default here).
        weight_decay: L2 penalty coefficient, added to the gradient.
        use_nesterov: Nesterov momentum (SGD's ``nesterov``; needs ``momentum > 0``).

    Raises:
        ValueError: a negative ``learning_rate``, ``momentum`` or ``weight_decay``; ``use_nesterov``
            with ``momentum == 0``.
    """

    def __init__(self, params: PyTree = None, learning_rate: float = 0.01, momentum: float = 0.9,
                 weight_decay: float = 0.0, use_nesterov: bool = False) -> None:
        super().__init__(params, lr=learning_rate, momentum=momentum, weight_decay=weight_decay,
                         nesterov=use_nesterov)
