"""``Adagrad`` (Duchi, Hazan & Singer, 2011), as ``torch.optim.Adagrad``."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._typing import PyTree
from tapegrad.optim._base import Optimizer, _cast_like, _flatten_like, _plain, check_nonnegative, rate_like, zero_step
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten


class AdagradState(NamedTuple):
    """``Adagrad``'s state (a NamedTuple, a pytree), as :meth:`Adagrad.init` makes it and
    :meth:`Adagrad.update` returns it.

    Args:
        step: the number of updates done, a 0-d int32 array.
        sum: the sums of squared gradients (PyTorch's name), a pytree like the parameters, in their
            dtypes.
    """

    step: Any
    sum: Any


class Adagrad(Optimizer):
    """Adagrad (Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online Learning and
    Stochastic Optimization", JMLR 2011), as ``torch.optim.Adagrad``.

    Per parameter ``p`` with gradient ``g``, at update ``t = 1, 2, ...`` (``s`` starts at
    ``initial_accumulator_value``):

    .. code-block:: text

        g = g + weight_decay * p                      # L2 penalty, if weight_decay != 0
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g**2
        p = p - clr * g / (sqrt(s) + eps)

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate (the initial value of ``opt.learning_rate``).
        lr_decay: the rate's decay per update, as above.
        weight_decay: L2 penalty coefficient, added to the gradient.
        initial_accumulator_value: the starting value of the sums of squares.
        eps: added to the denominator for stability (PyTorch's default 1e-10).

    Functional style: ``state = opt.init(params)`` is an :class:`AdagradState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``lr_decay``, ``weight_decay``, ``initial_accumulator_value``
            or ``eps``.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> None:
        check_nonnegative("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                          initial_accumulator_value=initial_accumulator_value, eps=eps)
        self.lr_decay, self.weight_decay = float(lr_decay), float(weight_decay)
        self.initial_accumulator_value, self.eps = float(initial_accumulator_value), float(eps)
        super().__init__(params, lr)

    def init(self, params: PyTree) -> AdagradState:
        """Step 0, and sums of squares filled with ``initial_accumulator_value``, shaped like ``params``."""
        params = _plain(params)
        return AdagradState(zero_step(params),
                            tree_map(lambda p: tnp.full_like(p, self.initial_accumulator_value), params))

    def update(self, grads: PyTree, state: AdagradState, params: PyTree, learning_rate: Any = None) -> Any:
        """One Adagrad step, in the functional style.

        The arguments and the return are :meth:`Optimizer.update`'s, with an :class:`AdagradState` as
        ``state`` (returned with its ``step`` one higher; each array keeps its dtype).

        Raises:
            ValueError: ``grads`` or the sums do not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        s_leaves = _flatten_like(state.sum, treedef, "the sums of squares (state.sum)")
        step = tnp.asarray(state.step + 1)
        # the decayed rate in float64 (from an integer step), cast to each parameter's dtype below
        clr = self._current_rate(learning_rate, p_leaves) / (1.0 + tnp.astype(step - 1, np.float64) * self.lr_decay)
        new_p, new_s = [], []
        for p, g, s in zip(p_leaves, g_leaves, s_leaves):
            if self.weight_decay:
                g = g + self.weight_decay * p
            s = _cast_like(s + g * g, s)
            new_p.append(_cast_like(p - rate_like(clr, p) * (g / (tnp.sqrt(s) + self.eps)), p))
            new_s.append(s)
        return tree_unflatten(treedef, new_p), AdagradState(step, tree_unflatten(treedef, new_s))
