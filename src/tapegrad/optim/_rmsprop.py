"""``RMSprop`` (Tieleman & Hinton, 2012), as ``torch.optim.RMSprop``."""
from __future__ import annotations

from typing import Any, NamedTuple

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.optim._base import Optimizer, _cast_like, _flatten_like, _plain, check_nonnegative, rate_like
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten


class RMSpropState(NamedTuple):
    """``RMSprop``'s state (a NamedTuple, a pytree), as :meth:`RMSprop.init` makes it and
    :meth:`RMSprop.update` returns it.

    Args:
        square_avg: the running average of the squared gradients, a pytree like the parameters, in
            their dtypes.
        momentum_buffer: the momentum buffers, the same kind of pytree; None without momentum.
        grad_avg: the running average of the gradients, the same kind of pytree; None unless
            ``centered``.
    """

    square_avg: Any
    momentum_buffer: Any
    grad_avg: Any


class RMSprop(Optimizer):
    """RMSprop (Tieleman & Hinton, Coursera lecture 6.5, 2012; centered form from Graves, 2013), as
    ``torch.optim.RMSprop``.

    Per parameter ``p`` with gradient ``g`` (``v``, ``b`` and ``a`` start at 0):

    .. code-block:: text

        g = g + weight_decay * p                      # L2 penalty, if weight_decay != 0
        v = alpha * v + (1 - alpha) * g**2
        a = alpha * a + (1 - alpha) * g               # centered only
        d = sqrt(v - a**2) + eps   if centered else   sqrt(v) + eps
        b = momentum * b + g / d                      # momentum > 0 only
        p = p - lr * b             if momentum else   p - lr * g / d

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``).
        alpha: smoothing constant of the running averages, in ``[0, 1]``.
        eps: added to the denominator for stability.
        weight_decay: L2 penalty coefficient, added to the gradient.
        momentum: momentum factor; 0 disables the buffers.
        centered: divide by an estimate of the gradient's variance instead of its second moment.

    Functional style: ``state = opt.init(params)`` is an :class:`RMSpropState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``weight_decay`` or ``momentum``; ``alpha`` outside
            ``[0, 1]``.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> None:
        check_nonnegative("RMSprop", lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"RMSprop: alpha must be in [0, 1], got {alpha}")
        self.alpha, self.eps, self.weight_decay = float(alpha), float(eps), float(weight_decay)
        self.momentum, self.centered = float(momentum), bool(centered)
        super().__init__(params, lr)

    def init(self, params: PyTree) -> RMSpropState:
        """Zero averages (and buffers, where used) shaped like ``params``."""
        zeros = tree_map(tnp.zeros_like, _plain(params))
        return RMSpropState(zeros, zeros if self.momentum else None, zeros if self.centered else None)

    def update(self, grads: PyTree, state: RMSpropState, params: PyTree, learning_rate: Any = None) -> Any:
        """One RMSprop step, in the functional style.

        The arguments and the return are :meth:`Optimizer.update`'s, with an :class:`RMSpropState` as
        ``state`` (each array keeps its dtype).

        Raises:
            ValueError: ``grads`` or the state does not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        n = len(p_leaves)
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        v_leaves = _flatten_like(state.square_avg, treedef, "the squared averages (state.square_avg)")
        b_leaves = (_flatten_like(state.momentum_buffer, treedef, "the momentum buffers") if self.momentum
                    else [None] * n)
        a_leaves = (_flatten_like(state.grad_avg, treedef, "the gradient averages (state.grad_avg)")
                    if self.centered else [None] * n)
        lr, alpha, wd = self._current_rate(learning_rate, p_leaves), self.alpha, self.weight_decay
        new_p, new_v, new_b, new_a = [], [], [], []
        for p, g, v, b, a in zip(p_leaves, g_leaves, v_leaves, b_leaves, a_leaves):
            if wd:
                g = g + wd * p
            v = _cast_like(alpha * v + (1.0 - alpha) * (g * g), v)
            if self.centered:
                a = _cast_like(alpha * a + (1.0 - alpha) * g, a)
                step = g / (tnp.sqrt(v - a * a) + self.eps)
            else:
                step = g / (tnp.sqrt(v) + self.eps)
            if self.momentum:
                b = step = _cast_like(self.momentum * b + step, b)
            new_p.append(_cast_like(p - rate_like(lr, p) * step, p))
            new_v.append(v)
            new_b.append(b)
            new_a.append(a)

        def rebuild(leaves, used):
            return tree_unflatten(treedef, leaves) if used else None
        new_state = RMSpropState(rebuild(new_v, True), rebuild(new_b, self.momentum), rebuild(new_a, self.centered))
        return tree_unflatten(treedef, new_p), new_state
