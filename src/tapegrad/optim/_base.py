"""The optimisers' shared plumbing: the stateful and functional styles over one ``update``, the state
held in Parameters, and the helpers every update uses (see the package docstring)."""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import default_namespace, namespace_of
from tapegrad._params import Parameter, ParameterTuple
from tapegrad._state_dict import Stateful, assign_all
from tapegrad._typing import PyTree
from tapegrad.numpy._creation import at_rest
from tapegrad.tree import tree_flatten, tree_leaves, tree_map, tree_structure


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


def check_number(owner: str, name: str, value) -> None:
    """A ``TypeError`` naming ``name`` unless ``value`` is a real number (Python's or NumPy's, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")


def check_nonnegative(owner: str, **values) -> None:
    """A ``TypeError`` naming the first hyperparameter in ``values`` that is not a real number, or a
    ``ValueError`` naming the first that is negative, infinite or NaN."""
    for name, value in values.items():
        check_number(owner, name, value)
        if not 0 <= value < float("inf"):
            raise ValueError(f"{owner}: {name} must be >= 0 and finite, got {value}")


def check_betas(owner: str, betas) -> tuple:
    """``betas`` as a pair of floats, each in ``[0, 1)``, or a ``ValueError`` naming the bad one."""
    if len(betas) != 2:
        raise ValueError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{owner}: betas[{i}] must be in [0, 1), got {beta}")
    return float(betas[0]), float(betas[1])


def zero_step(params):
    """A step counter at 0: a 0-d int32 array on the device of ``params`` (a pytree of arrays)."""
    leaves = tree_flatten(params)[0]
    return tnp.zeros_like(leaves[0], np.int32, ()) if leaves else tnp.zeros((), np.int32)


def rate_like(lr, p):
    """The learning rate ``lr`` (a 0-d array or tracer, or a Python float) in ``p``'s dtype: a float64
    rate times a float32 array would give float64 under NumPy 2, and a float32 parameter must stay
    float32 (a Python float is weakly typed: it takes ``p``'s dtype by itself)."""
    if isinstance(lr, float) or lr.dtype == p.dtype:
        return lr
    return tnp.astype(lr, p.dtype)


class Optimizer(Stateful):
    """The two styles' shared plumbing; subclasses define ``init`` and ``update``.

    Updates run in the parameters' dtype: keep the Parameters an optimiser updates in float32 (float32
    master weights for float16 compute, see ``LossScaler``); in float16, ``eps=1e-8`` rounds to 0 and
    small second moments underflow, as in PyTorch's non-fused optimisers.

    Args:
        params: the Parameters for the stateful style (a ``ParameterTuple``, list or tuple of
            Parameters), or None for the functional style only.
        lr: the initial learning rate, ``>= 0``.

    Attributes:
        learning_rate: the current learning rate, a 0-d float64 Parameter (MindSpore's attribute
            name; ``requires_grad=False``, named ``"<optimiser>.learning_rate"``, on the parameters'
            device, or the default backend's without ``params``). :meth:`update` reads it at each
            call, so a jitted step reads it fresh: ``opt.learning_rate.assign(...)`` or a schedule
            (``tapegrad.optim.StepLR`` and others) changes the next step without staging again.
            ``state_dict()`` includes it.
        lr: the same rate as a Python float (read and assign it outside transforms; under ``jit``
            reading it raises ``ConcretizationError``: use ``learning_rate`` there).
        initial_lr: the rate the first learning-rate schedule built on this optimiser started from
            (PyTorch's ``param_group["initial_lr"]``); None before any.
        params: the ``ParameterTuple`` that ``step`` updates (None in the functional style).
        state_params: the state as the subclass's state NamedTuple of Parameters (``requires_grad=False``),
            which ``step`` assigns (None in the functional style); :attr:`state` reads their arrays.

    Raises:
        TypeError: ``params`` holds something that is not a Parameter.
        ValueError: ``lr`` is negative or NaN.
    """

    def __init__(self, params: PyTree = None, lr: float = 1e-3) -> None:
        check_nonnegative(type(self).__name__, lr=lr)
        self.initial_lr: float | None = None
        if params is None:
            self.params, self.state_params = None, None
            self.learning_rate = self._rate_parameter(lr, default_namespace())
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
        xp = namespace_of(*(p.value for p in self.params)) if self.params else default_namespace()
        self.learning_rate = self._rate_parameter(lr, xp)
        self.state_params = self._hold(self.init(tuple(p.value for p in self.params)))

    def _rate_parameter(self, lr, xp) -> Parameter:
        return Parameter(xp.asarray(float(lr), dtype=np.float64),
                         name=f"{type(self).__name__.lower()}.learning_rate", requires_grad=False)

    @property
    def lr(self) -> float:
        return float(self.learning_rate.value)

    @lr.setter
    def lr(self, value: float) -> None:
        check_nonnegative(type(self).__name__, lr=value)
        self.learning_rate.assign(namespace_of(self.learning_rate._data).asarray(float(value), np.float64))

    def _current_rate(self, learning_rate, leaves):
        """The rate an update of the arrays ``leaves`` uses: ``learning_rate`` when given (the functional
        style's explicit rate; a number stays a Python float), else ``self.learning_rate``'s value (a
        program input under ``jit``)."""
        if learning_rate is not None:
            return float(learning_rate) if isinstance(learning_rate, (int, float, np.number)) else learning_rate
        rate = self.learning_rate
        if self.params is None and leaves and namespace_of(rate._data) is np:
            xp = namespace_of(*leaves)
            if xp is not np:  # a functional optimiser's rate follows the arrays it updates onto their device
                rate.assign(xp.asarray(float(rate._data), dtype=np.float64))
        return rate.value

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
                             for p, v in zip(self.params or (), value))
            return Parameter(value, name=f"{prefix}.{field}", requires_grad=False)
        return type(state)(*(hold(field, value) for field, value in zip(state._fields, state)))

    @property
    def state(self) -> Any:
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
        assign_all(zip(holders, values))  # a value that does not fit changes nothing

    def _named_state(self) -> list:
        # the state dict: the rate and each state Parameter under its own name ("adam.exp_avg.fc1.weight")
        state = tree_leaves(self.state_params) if self.state_params is not None else []
        return [(p.name, p) for p in (self.learning_rate, *state)]

    def init(self, params: PyTree) -> Any:
        """The initial optimiser state for the pytree ``params`` (functional style); each subclass defines it.

        Args:
            params: a pytree of arrays (or Parameters' values).

        Returns:
            The subclass's state NamedTuple (:class:`SGDState`, :class:`AdamState`, ...), its arrays shaped
            like ``params``.
        """
        raise NotImplementedError

    def update(self, grads: PyTree, state: PyTree, params: PyTree, learning_rate: Any = None) -> Any:
        """One update in the functional style; each subclass defines it (see its docstring for the rule).

        Args:
            grads: gradients, a pytree with the structure of ``params``.
            state: the state from :meth:`init` or the previous update.
            params: the current parameters, a pytree of arrays.
            learning_rate: the rate for this update (a float or 0-d array); None reads
                ``self.learning_rate``.

        Returns:
            ``(new_params, new_state)``, the new parameters in ``params``' structure and dtypes and the
            new state. Nothing is assigned.
        """
        raise NotImplementedError

    def step(self, grads: PyTree) -> None:
        """Update the Parameters given at construction in place, and the state Parameters (the stateful
        style: MindSpore's ``optimizer(grads)``, PyTorch's ``opt.step()`` with the gradients passed).

        Parameters and state are assigned together, all or none. Inside ``jit`` the new values become
        outputs of the program, written back at each call.

        Args:
            grads: one gradient per Parameter, in their order, as ``grad(..., weights=opt.params)``
                returns them (a tuple or list; a single array for one Parameter).

        Returns:
            None.

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
        # the weights and the state together, all or none: an interrupt between them would leave Adam's
        # count behind its weights, and a resumed run would differ
        new_state = _flatten_like(new_state, tree_structure(self.state_params), "the new state", "opt.state_params")
        assign_all([*zip(self.params, new_values), *zip(tree_leaves(self.state_params), new_state)])

    def __call__(self, grads: PyTree) -> None:
        """``step(grads)`` (MindSpore calls an optimiser with the gradients)."""
        self.step(grads)
