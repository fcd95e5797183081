"""``Module``: a container of Parameters and sub-modules, found through its attributes.

A subclass calls ``super().__init__()``, assigns Parameters and sub-modules as attributes, and defines
``__call__`` (or ``forward``, PyTorch's spelling, or ``construct``, MindSpore's). There is no
registration step: the parameters are found by walking the attributes in the order they were first
assigned (Python keeps a dict's insertion order), depth first, looking into sub-modules and into
lists, tuples and dicts of them. That order is what ``trainable_params()`` returns, and so the order
of the gradients ``grad(..., weights=net.trainable_params())`` gives back (MindSpore's
``Cell.trainable_params``). One walker (:func:`_walk`) serves the parameter lists, the module lists
(``train()``/``eval()``) and the naming of Parameters when they are assigned.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from tapegrad._flags import Flag
from tapegrad._params import Parameter, ParameterTuple, recast
from tapegrad._state_dict import Stateful


class Module(Stateful):
    """Base class of models: Parameters and sub-modules as attributes, a ``training`` flag.

    ``state_dict()`` / ``load_state_dict(state, strict=True, cast=False)`` (PyTorch's) give and take every
    Parameter by its path, frozen ones included (BatchNorm's running statistics, Dropout's key);
    ``tg.save_checkpoint(net, path)`` / ``tg.load_checkpoint(path, net)`` write and read them as files.

    A subclass calls ``super().__init__()``, assigns Parameters and sub-modules (alone or in lists,
    tuples and dicts) as attributes, and defines ``__call__`` (a ``forward`` or MindSpore's
    ``construct`` is called if it does not). An unnamed Parameter takes its dotted attribute path as
    name (``"fc1.weight"``); ``trainable_params()`` lists those with ``requires_grad=True`` in
    attribute-definition order, depth first, as a ``ParameterTuple``. ``train()`` / ``eval()`` set
    the ``training`` flag of the module and every sub-module.

    Raises:
        NotImplementedError: calling a module that defines none of ``__call__``, ``forward`` and
            ``construct``.
        KeyError: ``load_state_dict`` under ``strict`` with missing or unexpected keys.
        ValueError: ``load_state_dict`` with an array of another shape (or dtype without ``cast``).
        TypeError: ``load_state_dict`` given something that is not a mapping of name -> array.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> class Affine(tg.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = tg.Parameter(np.ones(3))
        ...         self.b = tg.Parameter(np.zeros(()))
        ...     def __call__(self, x):
        ...         return x @ self.w + self.b
        >>> Affine().trainable_params()
        ParameterTuple(w, b)
    """

    # whether the module is in training mode; jit notes each read while staging, so that a change
    # stages again only the programs that read it (a subclass that forgot super().__init__(): True)
    training = Flag(True)

    def __init__(self) -> None:
        self.training = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # a subclass that sets `training = False` in its body would hide the Flag, and jit would not
        # see its reads: the value becomes that Flag's default instead
        super().__init_subclass__(**kwargs)
        default = cls.__dict__.get("training")
        if default is not None and not isinstance(default, Flag):
            flag = Flag(default)
            flag.__set_name__(cls, "training")
            cls.training = flag

    # Any, not Array: a subclass's __call__ (or forward) returns what it declares (a pair, a dict...)
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for name in ("forward", "construct"):
            method = getattr(self, name, None)
            if method is not None:
                return method(*args, **kwargs)
        raise NotImplementedError(f"{type(self).__name__} defines no __call__ (or forward); a Module "
                                  "subclass computes its output there")

    def __setattr__(self, name: str, value: Any) -> None:
        """Assign the attribute, then give each Parameter in ``value`` that nobody named its path from
        this module as name (see :func:`_name_parameters`)."""
        object.__setattr__(self, name, value)
        if isinstance(value, (Parameter, Module, list, tuple, dict)):
            _name_parameters(self, name, value)

    # ---- traversal ---------------------------------------------------------------------------------
    def named_parameters(self) -> list[tuple[str, Parameter]]:
        """Every Parameter (frozen ones included) as ``(dotted attribute path, Parameter)`` pairs.

        The order is attribute-definition order, depth first; a Parameter reachable along several
        paths (shared between layers) appears once, under its first path. The paths are from this
        module (``"fc1.weight"``, ``"layers.0.bias"``); nothing is changed, names included.
        """
        return [(path, member) for path, member in _walk(self, "", set()) if isinstance(member, Parameter)]

    def parameters(self) -> ParameterTuple:
        """Every Parameter, trainable or not, in :meth:`named_parameters` order."""
        return ParameterTuple(p for _, p in self.named_parameters())

    def trainable_params(self) -> ParameterTuple:
        """The Parameters with ``requires_grad=True``, in :meth:`named_parameters` order.

        Pass it as ``grad(..., weights=net.trainable_params())``: the gradients come back as a tuple
        in this order. It changes nothing: the Parameters got their names when they were assigned.
        """
        return ParameterTuple(p for _, p in self.named_parameters() if p.requires_grad)

    def _named_state(self) -> list[tuple[str, Parameter]]:
        # the state dict: every Parameter, frozen ones included (BatchNorm's running statistics,
        # Dropout's key), under its path from this module, as PyTorch's buffers are
        return self.named_parameters()

    def untrainable_params(self) -> ParameterTuple:
        """The Parameters with ``requires_grad=False`` (MindSpore's ``Cell.untrainable_params``)."""
        return ParameterTuple(p for _, p in self.named_parameters() if not p.requires_grad)

    def named_modules(self, prefix: str = "") -> list[tuple[str, Module]]:
        """``(dotted path, Module)`` pairs: this module (path ``prefix``) and every sub-module, depth
        first in attribute order, each once."""
        return [(path, member) for path, member in _walk(self, prefix, set()) if isinstance(member, Module)]

    def modules(self) -> list[Module]:
        """This module and all its sub-modules (see :meth:`named_modules`)."""
        return [m for _, m in self.named_modules()]

    # ---- mode --------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set ``training = mode`` on this module and every sub-module; returns ``self``.

        A jitted function whose staging read the ``training`` flag of one of these modules stages
        again at its next call (its program has the old behaviour built in: whether dropout draws,
        whether BatchNorm updates its statistics); the other jitted functions keep their programs.
        """
        mode = bool(mode)  # first: a mode that is not a truth value changes nothing
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        """``train(False)``: evaluation mode for layers that behave differently when training."""
        return self.train(False)

    # ---- dtype -------------------------------------------------------------------------------------
    def astype(self, dtype: DTypeLike) -> Module:
        """Cast every floating-point Parameter of this module and its sub-modules to ``dtype``, in place,
        and return ``self`` (PyTorch's ``module.to(dtype)`` / ``module.half()``).

        The Parameters stay the same objects (an optimiser or a ``weights=`` tuple holding them sees
        the new values); only their arrays are replaced, so the forward pass and its gradients then
        compute in ``dtype`` (an input of another dtype promotes as NumPy does: cast the input too).
        Parameters of integer or boolean dtype (Dropout's key, BatchNorm's ``num_batches_tracked``)
        and complex ones are left as they are, as PyTorch leaves its integer buffers. An optimiser
        built before the cast keeps its state (moments) in the old dtype, and its step would then
        assign values of the promoted dtype, which ``assign`` refuses: build the optimiser after the
        cast, or keep float32 master weights and a float16 copy for the forward pass
        (docs/training.md, mixed precision). A jitted function that read these Parameters stages
        again at its next call.

        Args:
            dtype: a floating-point dtype (``np.float16``, ``"float32"``, ``np.float64``).

        Returns:
            ``self``.

        Raises:
            TypeError: ``dtype`` is not a dtype, or not a floating-point one (cast integer Parameters
                one by one if that is really meant).
            RuntimeError: called inside a function that ``jit`` is staging.
        """
        try:
            target = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"astype: dtype must be a NumPy floating dtype such as np.float16, got {dtype!r}") from None
        if target.kind != "f":
            raise TypeError(f"astype: dtype must be a floating-point dtype (float16, float32, float64), got "
                            f"{target}; Module.astype casts the floating Parameters only")
        recast([p for _, p in self.named_parameters() if np.dtype(p.dtype).kind == "f" and p.dtype != target],
               target)
        return self

    # ---- display -----------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text between the parentheses of this module's ``repr``; subclasses override it."""
        return ""

    def __repr__(self) -> str:
        children = [(path, m) for path, m in _members(vars(self), "", set()) if isinstance(m, Module)]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for path, child in children:
            lines.append(f"  ({path}): " + repr(child).replace("\n", "\n  "))
        return "\n".join(lines) + "\n)"


def _members(value, path: str, seen: set):
    """``(path, member)`` for each Module and Parameter held directly by ``value``: ``value`` itself, or
    the items of a list, tuple or dict (recursively), but not the attributes of a module. A dict of
    attributes (``vars(module)``) is walked as a dict, its keys joined to ``path`` with dots. Each
    container is looked into once (``seen`` takes its id): a list that holds itself ends."""
    if isinstance(value, (Module, Parameter)):
        yield path, value
    elif isinstance(value, (list, tuple, dict)):
        if id(value) in seen:
            return
        seen.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            yield from _members(item, _join(path, key), seen)


def _walk(value, path: str, seen: set):
    """The walker: ``(path, member)`` for each Module and Parameter reachable from ``value`` through
    attributes, lists, tuples and dicts, depth first in attribute order (a module before what it
    holds), each once (``seen``: the ids already given or looked into, shared along the walk)."""
    for member_path, member in _members(value, path, seen):
        if id(member) in seen:
            continue
        seen.add(id(member))
        yield member_path, member
        if isinstance(member, Module):
            yield from _walk(vars(member), member_path, seen)


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _name_parameters(module: Module, attr: str, value) -> None:
    """Name the Parameters reached by ``module.attr = value`` after their paths from ``module``.

    A Parameter takes the name when the user gave it none and no module named it yet, or the module
    that named it is part of ``value`` (it is being placed in ``module``): so ``self.fc1 = Dense()``
    turns the Dense's ``weight`` into ``fc1.weight``, and placing that model in another prefixes
    again. A module placed in a second one (a slice of a ``Sequential``, a shared layer) keeps the
    names of its first place, as does a Parameter reached along several paths.
    """
    reached = list(_walk(value, attr, {id(module)}))
    placed = {id(m) for _, m in reached if isinstance(m, Module)}
    for path, member in reached:
        if isinstance(member, Parameter):
            owner = member.name_owner
            if owner is None or id(owner) in placed:
                member.set_default_name(path, module)
