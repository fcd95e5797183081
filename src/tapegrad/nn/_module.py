"""``Module``: a container of Parameters and sub-modules, found through its attributes.

A subclass calls ``super().__init__()``, assigns Parameters and sub-modules as attributes, and defines
``__call__`` (or ``forward``, PyTorch's spelling, or ``construct``, MindSpore's). There is no
registration step: the parameters are found by walking the attributes in the order they were first
assigned (Python keeps a dict's insertion order), depth first, looking into sub-modules and into
lists, tuples and dicts of them. That order is what ``trainable_params()`` returns, and so the order
of the gradients ``grad(..., weights=net.trainable_params())`` gives back (MindSpore's
``Cell.trainable_params``).
"""
from __future__ import annotations

from tapegrad._jit.api import modes_changed
from tapegrad._params import Parameter, ParameterTuple


class Module:
    """Base class of models: Parameters and sub-modules as attributes, a ``training`` flag.

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

    training = True  # also right for a subclass that forgot super().__init__()

    def __init__(self):
        self.training = True

    def __call__(self, *args, **kwargs):
        for name in ("forward", "construct"):
            method = getattr(self, name, None)
            if method is not None:
                return method(*args, **kwargs)
        raise NotImplementedError(f"{type(self).__name__} defines no __call__ (or forward); a Module "
                                  "subclass computes its output there")

    # ---- traversal ---------------------------------------------------------------------------------
    def _walk(self, prefix: str, seen_modules: set, seen_params: set):
        """``(dotted name, Parameter)`` pairs, depth first in attribute order, each Parameter once."""
        if id(self) in seen_modules:
            return
        seen_modules.add(id(self))
        for name, value in vars(self).items():
            yield from _walk_value(value, prefix + name, seen_modules, seen_params)

    def named_parameters(self) -> list:
        """Every Parameter (frozen ones included) as ``(dotted attribute path, Parameter)`` pairs.

        The order is attribute-definition order, depth first; a Parameter reachable along several
        paths (shared between layers) appears once, under its first path. Each Parameter the user
        did not name is given its path as name (``"fc1.weight"``, ``"layers.0.bias"``); a
        user-given name is kept.
        """
        pairs = list(self._walk("", set(), set()))
        for path, param in pairs:
            param.set_default_name(path)
        return pairs

    def parameters(self) -> ParameterTuple:
        """Every Parameter, trainable or not, in :meth:`named_parameters` order."""
        return ParameterTuple(p for _, p in self.named_parameters())

    def trainable_params(self) -> ParameterTuple:
        """The Parameters with ``requires_grad=True``, in :meth:`named_parameters` order.

        Pass it as ``grad(..., weights=net.trainable_params())``: the gradients come back as a tuple
        in this order. Calling it names unnamed Parameters after their attribute paths.
        """
        return ParameterTuple(p for _, p in self.named_parameters() if p.requires_grad)

    def untrainable_params(self) -> ParameterTuple:
        """The Parameters with ``requires_grad=False`` (MindSpore's ``Cell.untrainable_params``)."""
        return ParameterTuple(p for _, p in self.named_parameters() if not p.requires_grad)

    def named_modules(self, prefix: str = "") -> list:
        """``(dotted path, Module)`` pairs: this module (path ``prefix``) and every sub-module, depth
        first in attribute order, each once."""
        out, seen, stack = [], set(), [(prefix, self)]
        while stack:
            path, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            out.append((path, module))
            children = list(_child_modules(vars(module), path + "." if path else ""))
            stack.extend(reversed(children))
        return out

    def modules(self) -> list:
        """This module and all its sub-modules (see :meth:`named_modules`)."""
        return [m for _, m in self.named_modules()]

    # ---- mode --------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set ``training = mode`` on this module and every sub-module; returns ``self``.

        A change of mode makes ``jit`` stage its functions again at their next call, since a program
        staged in training mode has the training behaviour (dropout, statistics updates) built in.
        """
        changed = False
        for module in self.modules():
            changed |= module.training != bool(mode)
            module.training = bool(mode)
        if changed:
            modes_changed()
        return self

    def eval(self) -> Module:
        """``train(False)``: evaluation mode for layers that behave differently when training."""
        return self.train(False)

    # ---- display -----------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text between the parentheses of this module's ``repr``; subclasses override it."""
        return ""

    def __repr__(self):
        children = list(_child_modules(vars(self), ""))
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for path, child in children:
            lines.append(f"  ({path}): " + repr(child).replace("\n", "\n  "))
        return "\n".join(lines) + "\n)"


def _walk_value(value, path: str, seen_modules: set, seen_params: set):
    if isinstance(value, Parameter):
        if id(value) not in seen_params:
            seen_params.add(id(value))
            yield path, value
    elif isinstance(value, Module):
        yield from value._walk(path + ".", seen_modules, seen_params)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk_value(item, f"{path}.{i}", seen_modules, seen_params)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk_value(item, f"{path}.{key}", seen_modules, seen_params)


def _child_modules(attributes: dict, prefix: str):
    """The modules directly held by ``attributes`` (also inside lists, tuples and dicts)."""
    for name, value in attributes.items():
        yield from _modules_in(value, prefix + name)


def _modules_in(value, path: str):
    if isinstance(value, Module):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _modules_in(item, f"{path}.{i}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _modules_in(item, f"{path}.{key}")
