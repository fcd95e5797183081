"""``Lion`` (Chen et al., 2023): the sign of an interpolated momentum, with decoupled weight decay."""
from __future__ import annotations

from typing import Any, NamedTuple

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.optim._base import Optimizer, _cast_like, _flatten_like, _plain, check_betas, check_nonnegative, rate_like
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten


class LionState(NamedTuple):
    """``Lion``'s state (a NamedTuple, a pytree), as :meth:`Lion.init` makes it and :meth:`Lion.update`
    returns it.

    Args:
        exp_avg: the momentum, a pytree like the parameters, in their dtypes.
    """

    exp_avg: Any


class Lion(Optimizer):
    """Lion, EvoLved Sign Momentum (Chen et al., "Symbolic Discovery of Optimization Algorithms",
    NeurIPS 2023, Algorithm 2).

    Per parameter ``p`` with gradient ``g`` (``m`` starts at 0):

    .. code-block:: text

        c = beta1 * m + (1 - beta1) * g               # the update's direction: an interpolation
        p = p - lr * (sign(c) + weight_decay * p)     # decoupled weight decay
        m = beta2 * m + (1 - beta2) * g               # the momentum, with the other rate

    Every entry moves by ``lr`` (``sign(0) = 0``), so Lion wants a learning rate 3-10 times smaller
    than AdamW's and a weight decay 3-10 times larger (the paper's advice). PyTorch has no Lion; the
    defaults are the paper's betas and those of its authors' PyTorch code (``lion-pytorch``).

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``).
        betas: ``(beta1, beta2)``, each in ``[0, 1)``: the interpolation of the update and the decay
            of the momentum.
        weight_decay: the decoupled decay coefficient (``lambda`` in the paper).

    Functional style: ``state = opt.init(params)`` is a :class:`LionState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr`` or ``weight_decay``; a beta outside ``[0, 1)``.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-4, betas: Any = (0.9, 0.99),
                 weight_decay: float = 0.0) -> None:
        check_nonnegative("Lion", lr=lr, weight_decay=weight_decay)
        self.betas = check_betas("Lion", betas)
        self.weight_decay = float(weight_decay)
        super().__init__(params, lr)

    def init(self, params: PyTree) -> LionState:
        """Zero momentum shaped like ``params``."""
        return LionState(tree_map(tnp.zeros_like, _plain(params)))

    def update(self, grads: PyTree, state: LionState, params: PyTree, learning_rate: Any = None) -> Any:
        """One Lion step, in the functional style.

        The arguments and the return are :meth:`Optimizer.update`'s, with an :class:`LionState` as
        ``state`` (each array keeps its dtype).

        Raises:
            ValueError: ``grads`` or the momentum does not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        m_leaves = _flatten_like(state.exp_avg, treedef, "the momentum (state.exp_avg)")
        lr, (beta1, beta2), wd = self._current_rate(learning_rate, p_leaves), self.betas, self.weight_decay
        new_p, new_m = [], []
        for p, g, m in zip(p_leaves, g_leaves, m_leaves):
            direction = tnp.sign(beta1 * m + (1.0 - beta1) * g)
            if wd:
                direction = direction + wd * p
            new_p.append(_cast_like(p - rate_like(lr, p) * direction, p))
            new_m.append(_cast_like(beta2 * m + (1.0 - beta2) * g, m))
        return tree_unflatten(treedef, new_p), LionState(tree_unflatten(treedef, new_m))
