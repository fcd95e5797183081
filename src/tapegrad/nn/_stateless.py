"""``functional_call``: a module evaluated with given values for its Parameters (``torch.func.functional_call``).

It reuses the substitution scope that ``grad(weights=...)`` uses (``tapegrad._params.substitute``):
within the call, each named Parameter's ``value`` is the given array or traced value, and nothing is
assigned, so the module is untouched whether the call returns or raises.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tapegrad._core import Boxed, Tracer
from tapegrad._params import Parameter, substitute
from tapegrad.nn._module import Module


def _value(name: str, value: Any, param: Parameter) -> Any:
    """``value`` as what ``param`` reads during the call: an array or traced value of its shape."""
    if isinstance(value, Boxed):
        value = value.unbox()
    if not isinstance(value, Tracer) and not (hasattr(value, "shape") and hasattr(value, "dtype")):
        value = np.asarray(value)
    if tuple(value.shape) != tuple(param.shape):
        raise ValueError(f"functional_call: params[{name!r}] has shape {tuple(value.shape)}, but the module's "
                         f"Parameter {name!r} has shape {tuple(param.shape)}; pass a value of that shape")
    return value


def _substitutions(module: Module, params: Any, strict: bool) -> dict:
    """``{Parameter: value}`` for ``params`` (a mapping by path or a sequence in ``trainable_params()``
    order), with the errors that name the bad key."""
    named = dict(module.named_parameters())
    if isinstance(params, Mapping):
        unknown = [k for k in params if k not in named]
        if unknown:
            raise KeyError(f"functional_call: {sorted(map(str, unknown))} name no Parameter of the "
                           f"{type(module).__name__}; its names (state_dict() keys) are {sorted(named)}")
        if strict:
            missing = sorted(set(named) - set(params))
            if missing:
                raise KeyError(f"functional_call(strict=True): no value given for {missing}; pass every "
                               "Parameter of the module, or strict=False to keep the module's own values")
        return {named[k]: _value(k, v, named[k]) for k, v in params.items()}
    if isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
        trainable = module.trainable_params()
        if len(params) != len(trainable):
            raise ValueError(f"functional_call: params is a sequence of {len(params)} values, but the module "
                             f"has {len(trainable)} trainable Parameters ({', '.join(p.name for p in trainable)}); "
                             "pass one value per Parameter of trainable_params(), in its order, or a dict by name")
        return {p: _value(p.name, v, p) for p, v in zip(trainable, params)}
    raise TypeError(f"functional_call: params must be a dict of name -> array (the names of state_dict()) or a "
                    f"tuple/list of arrays in trainable_params() order, got {type(params).__name__}")


def functional_call(module: Module, params: Mapping[str, Any] | Sequence[Any], args: Any = (),
                    kwargs: Mapping[str, Any] | None = None, *, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` computed with ``params`` in place of its Parameters' values, without
    changing the module (PyTorch's ``torch.func.functional_call``).

    The given values are what the Parameters read during the call (the substitution ``grad(weights=...)``
    makes), so the result is a function of them that every transform differentiates, batches and
    stages: ``tg.grad``, ``tg.hvp``, ``tg.jacrev``, ``tg.vmap`` and ``tg.jit`` over a dict of arrays,
    with no Parameter assigned. The module's stored values are never replaced, also when the call
    raises. Assignments the module itself makes while it runs (BatchNorm's running statistics and
    Dropout's key in training mode) go to its Parameters as in a plain call; call ``module.eval()``
    first for a pure function.

    Args:
        module: the module to call.
        params: the values, either a dict of name -> array under the module's Parameter paths (the
            keys of ``module.state_dict()``, ``"fc1.weight"``), or a tuple/list with one value per
            Parameter of ``module.trainable_params()``, in that order (the order of the gradients
            ``grad(..., weights=module.trainable_params())`` returns). Values are arrays (NumPy,
            CuPy), traced values or Parameters (read as their values), each of its Parameter's
            shape; a dtype may differ (the module then computes in it). A Parameter not named keeps
            its own value (PyTorch's default, ``strict=False``).
        args: the positional arguments of the call: a tuple, or one value that is not a tuple
            (PyTorch's rule: pass ``(x,)`` for a single tuple argument).
        kwargs: the keyword arguments of the call.
        strict: require a value for every Parameter of the module (a dict only).

    Returns:
        Whatever ``module(*args, **kwargs)`` returns, computed from the given values.

    Raises:
        KeyError: a name that is no Parameter path of ``module`` (the message lists the bad names and
            the module's); with ``strict=True``, a Parameter with no value given.
        ValueError: a value of another shape than its Parameter's; a sequence whose length is not the
            number of trainable Parameters.
        TypeError: ``params`` neither a dict nor a tuple/list; ``module`` not a ``Module``; ``strict``
            not a bool.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> net = tg.nn.Dense(2, 1, has_bias=False)
        >>> w = {"weight": np.array([[1.0, 2.0]], np.float32)}
        >>> tg.nn.functional_call(net, w, np.array([[3.0, 4.0]], np.float32))
        array([[11.]], dtype=float32)
        >>> tg.grad(lambda p: tg.nn.functional_call(net, p, np.array([[3.0, 4.0]], np.float32)).sum())(w)
        {'weight': array([[3., 4.]], dtype=float32)}
    """
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: module must be a tg.nn.Module, got {type(module).__name__}")
    if not isinstance(strict, bool):
        raise TypeError(f"functional_call: strict must be a bool (True or False), got {strict!r}")
    mapping = _substitutions(module, params, strict)
    call_args = args if isinstance(args, tuple) else (args,)
    with substitute(mapping):
        return module(*call_args, **(kwargs or {}))
