"""Optimisers: ``SGD`` (with momentum, weight decay, Nesterov), MindSpore's ``Momentum``, and ``Adam``.

Each class works in two styles, on the same object:

- stateful (PyTorch, MindSpore): construct it with the Parameters
  (``Adam(net.trainable_params(), lr=1e-3)``), then ``opt.step(grads)`` with the tuple of gradients
  that ``grad(..., weights=net.trainable_params())`` returns; it assigns the new values
  (``Parameter.assign``, same shape and dtype). ``opt(grads)`` is the same call (MindSpore's
  spelling). The optimiser state lives in Parameters of its own (``opt.state_params``, named like
  ``"adam.exp_avg.fc1.weight"``, ``requires_grad=False``); ``opt.state`` reads their values.
- functional (optax): ``state = opt.init(params)`` and
  ``new_params, new_state = opt.update(grads, state, params)`` over any pytree of arrays; nothing is
  mutated, so the update can run inside ``jit`` or ``vmap``.

The stateful step is the functional update applied to the Parameters' values. Keeping the state in
Parameters is what lets ``opt.step`` run inside ``jit``: a jitted function reads every Parameter fresh
at each call and writes back the ones it assigns, so momentum buffers, moments and Adam's step
counter (a 0-d array, not a Python int) carry over from one jitted step to the next. State kept as
arrays in Python attributes would instead be baked into the program at its first call, and the new
values, tracers, would leak out of it. Updates are written in
``tapegrad.numpy`` operations, with hyperparameters as Python floats, so float32 parameters stay
float32. The update rules are PyTorch's (``torch.optim.SGD`` and ``torch.optim.Adam`` with their
default flags), checked against hand-written NumPy references in the tests.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._params import Parameter, ParameterTuple
from tapegrad.numpy._creation import at_rest
from tapegrad.tree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

__all__ = ["Adam", "AdamState", "Momentum", "Optimizer", "SGD", "SGDState"]


def _plain(tree):
    """A ParameterTuple (a tuple subclass, so a pytree leaf to optree) as a plain tuple."""
    return tuple(tree) if isinstance(tree, ParameterTuple) else tree


def _flatten_like(tree, treedef, what: str, reference: str = "the parameters"):
    leaves, found = tree_flatten(tree)
    if found != treedef:
        hint = (" (e.g. the tuple that grad(..., weights=params) returns for a ParameterTuple)"
                if reference == "the parameters" else "")
        raise ValueError(f"{what} has pytree structure {found}, but {reference} have {treedef}; pass "
                         f"{what} in the same structure as {reference}{hint}")
    return leaves


def _cast_like(new, old):
    """``new`` in ``old``'s dtype (a float64 gradient must not turn a float32 parameter into float64),
    and an array: NumPy returns scalars from 0-d arithmetic, and arrays at rest are arrays."""
    if new.dtype != old.dtype:
        new = tnp.astype(new, old.dtype)
    return at_rest(new)


class Optimizer:
    """The two styles' shared plumbing; subclasses define ``init`` and ``update``.

    Args:
        params: the Parameters for the stateful style (a ``ParameterTuple``, list or tuple of
            Parameters), or None for the functional style only.

    Attributes:
        params: the ``ParameterTuple`` that ``step`` updates (None in the functional style).
        state_params: the state as the subclass's state NamedTuple of Parameters (``requires_grad=False``),
            which ``step`` assigns (None in the functional style).
        state: the same NamedTuple with the Parameters' current arrays; assignable.

    Raises:
        TypeError: ``params`` holds something that is not a Parameter.
    """

    def __init__(self, params=None):
        if params is None:
            self.params, self.state_params = None, None
            return
        if isinstance(params, Parameter):
            params = (params,)
        params = tuple(params)
        for i, p in enumerate(params):
            if not isinstance(p, Parameter):
                raise TypeError(f"{type(self).__name__}: params must be Parameters (e.g. "
                                f"net.trainable_params()), element {i} is a {type(p).__name__}; for arrays "
                                "use the functional style: state = opt.init(params); "
                                "params, state = opt.update(grads, state, params)")
        self.params = ParameterTuple(params)
        self.state_params = self._hold(self.init(tuple(p.value for p in self.params)))

    def _hold(self, state):
        """``state`` (a NamedTuple of None, one array, or a tuple with one array per Parameter) with each
        array in a Parameter of its own, ``requires_grad=False``, named ``"<optimiser>.<field>"`` or
        ``"<optimiser>.<field>.<parameter name>"`` (``"adam.exp_avg.fc1.weight"``)."""
        prefix = type(self).__name__.lower()

        def hold(field, value):
            if value is None:
                return None
            if isinstance(value, tuple):
                return tuple(Parameter(v, name=f"{prefix}.{field}.{p.name}", requires_grad=False)
                             for p, v in zip(self.params, value))
            return Parameter(value, name=f"{prefix}.{field}", requires_grad=False)
        return type(state)(*(hold(field, value) for field, value in zip(state._fields, state)))

    @property
    def state(self):
        """The optimiser state's current values (the subclass's state NamedTuple, as :meth:`init` and
        :meth:`update` use it), read from ``state_params``; None without ``params``. Assigning a state
        of the same structure, shapes and dtypes (a saved one, say) assigns each Parameter."""
        if self.state_params is None:
            return None
        return tree_map(lambda s: s.value, self.state_params)

    @state.setter
    def state(self, state) -> None:
        if self.state_params is None:
            raise RuntimeError(f"{type(self).__name__} was built without Parameters, so it holds no state: in "
                               "the functional style the state is the value that opt.init/opt.update return")
        holders = tree_leaves(self.state_params)
        values = _flatten_like(state, tree_structure(self.state_params), "the state", "opt.state_params")
        for holder, value in zip(holders, values):
            holder.assign(value)

    def init(self, params):
        """The initial optimiser state for the pytree ``params``."""
        raise NotImplementedError

    def update(self, grads, state, params):
        """``(new_params, new_state)``; see the subclass."""
        raise NotImplementedError

    def step(self, grads) -> None:
        """Update the Parameters given at construction in place, from ``grads`` (one per Parameter, in
        their order, as ``grad(..., weights=opt.params)`` returns them), and the state Parameters.

        Inside ``jit`` the new values become outputs of the program, written back at each call.

        Raises:
            RuntimeError: the optimiser was built without ``params``.
            ValueError: the number of gradients, or a gradient's shape, differs from the Parameters'.
        """
        if self.params is None:
            raise RuntimeError(f"{type(self).__name__}.step needs the Parameters: construct it with them "
                               f"({type(self).__name__}(net.trainable_params(), ...)), or use the functional "
                               "style: params, state = opt.update(grads, state, params)")
        grads = tuple(grads) if isinstance(grads, (list, tuple)) else (grads,)
        if len(grads) != len(self.params):
            raise ValueError(f"{type(self).__name__}.step got {len(grads)} gradients for {len(self.params)} "
                             "Parameters; pass the tuple that grad(..., weights=opt.params) returns")
        for p, g in zip(self.params, grads):
            if tuple(g.shape) != p.shape:
                raise ValueError(f"{type(self).__name__}.step: the gradient for Parameter {p.name!r} has shape "
                                 f"{tuple(g.shape)}, but the Parameter has shape {p.shape}")
        values = tuple(p.value for p in self.params)
        new_values, new_state = self.update(grads, self.state, values)
        for p, value in zip(self.params, new_values):
            p.assign(value)
        self.state = new_state

    def __call__(self, grads) -> None:
        """``step(grads)`` (MindSpore calls an optimiser with the gradients)."""
        self.step(grads)


# ---- SGD -----------------------------------------------------------------------------------------
class SGDState(NamedTuple):
    """``SGD``'s state: the momentum buffers (a pytree like the parameters, each buffer keeping the dtype
    :meth:`SGD.init` gave it; None without momentum)."""

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
        lr: learning rate.
        momentum: momentum factor; 0 disables the buffers.
        weight_decay: L2 penalty coefficient, added to the gradient.
        nesterov: Nesterov momentum (needs ``momentum > 0``).

    Functional style: ``state = opt.init(params)`` is an :class:`SGDState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay``; ``nesterov`` with
            ``momentum == 0``.
    """

    def __init__(self, params=None, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        for what, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            if value < 0:
                raise ValueError(f"{type(self).__name__}: {what} must be >= 0, got {value}")
        if nesterov and momentum == 0:
            raise ValueError("SGD: nesterov=True needs momentum > 0")
        self.lr, self.momentum = float(lr), float(momentum)
        self.weight_decay, self.nesterov = float(weight_decay), bool(nesterov)
        super().__init__(params)

    def init(self, params) -> SGDState:
        """Zero momentum buffers shaped like ``params`` (None when ``momentum == 0``)."""
        if not self.momentum:
            return SGDState(None)
        return SGDState(tree_map(tnp.zeros_like, _plain(params)))

    def update(self, grads, state: SGDState, params):
        """One SGD step.

        Args:
            grads: gradients, a pytree with the structure of ``params``.
            state: the :class:`SGDState` from :meth:`init` or the previous update.
            params: the current parameters (a pytree of arrays).

        Returns:
            ``(new_params, new_state)``: new parameters in ``params``' structure and dtypes, and the
            new :class:`SGDState` (each buffer keeps its dtype).

        Raises:
            ValueError: ``grads`` or the state's buffers do not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        lr, mu, wd = self.lr, self.momentum, self.weight_decay
        b_leaves = (_flatten_like(state.momentum_buffer, treedef, "the momentum buffers") if mu
                    else [None] * len(p_leaves))
        new_p, new_b = [], []
        for p, g, b in zip(p_leaves, g_leaves, b_leaves):
            if wd:
                g = g + wd * p
            if mu:
                b = _cast_like(mu * b + g, b)  # state keeps its dtype, so that step() can assign it
                g = g + mu * b if self.nesterov else b
            new_p.append(_cast_like(p - lr * g, p))
            new_b.append(b)
        new_state = SGDState(tree_unflatten(treedef, new_b) if mu else None)
        return tree_unflatten(treedef, new_p), new_state


class Momentum(SGD):
    """MindSpore's ``nn.Momentum``: :class:`SGD` with momentum, under MindSpore's argument names.

    ``accum = momentum * accum + g``; ``p -= learning_rate * accum``, or with ``use_nesterov``
    ``p -= learning_rate * (g + momentum * accum)`` (the same rule as ``SGD(momentum=...)``).
    ``weight_decay`` adds ``weight_decay * p`` to the gradient.
    """

    def __init__(self, params=None, learning_rate: float = 0.01, momentum: float = 0.9,
                 weight_decay: float = 0.0, use_nesterov: bool = False):
        super().__init__(params, lr=learning_rate, momentum=momentum, weight_decay=weight_decay,
                         nesterov=use_nesterov)


# ---- Adam ----------------------------------------------------------------------------------------
class AdamState(NamedTuple):
    """``Adam``'s state: the number of updates done (a 0-d int32 array), and the first and second
    moment estimates ``exp_avg`` and ``exp_avg_sq`` (pytrees like the parameters, in their dtypes)."""

    step: Any
    exp_avg: Any
    exp_avg_sq: Any


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, Algorithm 1), with bias correction, as ``torch.optim.Adam``.

    Per parameter ``p`` with gradient ``g``, at update ``t = 1, 2, ...``:

    .. code-block:: text

        g = g + weight_decay * p                      # L2 penalty (not AdamW's decoupled decay)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    (``m`` and ``v`` start at 0; ``eps`` is added after the bias correction of ``sqrt(v)``, as
    PyTorch does.)

    Args:
        params: Parameters for the stateful style (``opt.step(grads)``), or None.
        lr: learning rate.
        betas: ``(beta1, beta2)``, the decay rates of the moment estimates, each in ``[0, 1)``.
        eps: added to the denominator for stability.
        weight_decay: L2 penalty coefficient, added to the gradient.

    Functional style: ``state = opt.init(params)`` is an :class:`AdamState`;
    ``new_params, new_state = opt.update(grads, state, params)``.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``; a beta outside ``[0, 1)``.
    """

    def __init__(self, params=None, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        for what, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if value < 0:
                raise ValueError(f"Adam: {what} must be >= 0, got {value}")
        beta1, beta2 = betas
        for i, beta in enumerate((beta1, beta2)):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Adam: betas[{i}] must be in [0, 1), got {beta}")
        self.lr, self.betas = float(lr), (float(beta1), float(beta2))
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        super().__init__(params)

    def init(self, params) -> AdamState:
        """Step 0 and zero moment estimates shaped like ``params``."""
        params = _plain(params)
        leaves = tree_flatten(params)[0]  # the step count lives on the parameters' device
        step = tnp.zeros_like(leaves[0], np.int32, ()) if leaves else tnp.zeros((), np.int32)
        return AdamState(step, tree_map(tnp.zeros_like, params), tree_map(tnp.zeros_like, params))

    def update(self, grads, state: AdamState, params):
        """One Adam step.

        Args:
            grads: gradients, a pytree with the structure of ``params``.
            state: the :class:`AdamState` from :meth:`init` or the previous update.
            params: the current parameters (a pytree of arrays).

        Returns:
            ``(new_params, new_state)``: new parameters in ``params``' structure and dtypes, and the
            new :class:`AdamState` (its ``step`` one higher; each array keeps its dtype).

        Raises:
            ValueError: ``grads`` or the moment estimates do not have ``params``' structure.
        """
        p_leaves, treedef = tree_flatten(_plain(params))
        g_leaves = _flatten_like(_plain(grads), treedef, "grads")
        m_leaves = _flatten_like(state.exp_avg, treedef, "the first moments (state.exp_avg)")
        v_leaves = _flatten_like(state.exp_avg_sq, treedef, "the second moments (state.exp_avg_sq)")
        beta1, beta2 = self.betas
        lr, eps, wd = self.lr, self.eps, self.weight_decay
        step = tnp.asarray(state.step + 1)
        # bias corrections in float64 (from an integer step), cast to each parameter's dtype below
        step_size = lr / (1.0 - tnp.power(beta1, step))
        bias_correction2_sqrt = tnp.sqrt(1.0 - tnp.power(beta2, step))
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(p_leaves, g_leaves, m_leaves, v_leaves):
            if wd:
                g = g + wd * p
            m = _cast_like(beta1 * m + (1.0 - beta1) * g, m)  # state keeps its dtype, as in SGD
            v = _cast_like(beta2 * v + (1.0 - beta2) * (g * g), v)
            denom = tnp.sqrt(v) / tnp.astype(bias_correction2_sqrt, v.dtype) + eps
            new_p.append(_cast_like(p - tnp.astype(step_size, m.dtype) * (m / denom), p))
            new_m.append(m)
            new_v.append(v)
        new_state = AdamState(step, tree_unflatten(treedef, new_m), tree_unflatten(treedef, new_v))
        return tree_unflatten(treedef, new_p), new_state
