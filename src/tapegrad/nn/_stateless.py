"""``functional_call``: a module evaluated with given values for its Parameters (``torch.func.functional_call``).

It reuses the substitution scope that ``grad(weights=...)`` uses (``tapegrad._params.substitute``):
within the call, each named Parameter's ``value`` is the given array or traced value. A Parameter so
substituted cannot be assigned during the call (``_params.holding``: the new value, computed from
the given one, would have no place to go); the others are assigned as in a plain call. An exception
puts back every Parameter of the module as it was (``_params.restored_on_error``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tapegrad._core import Boxed, Tracer
from tapegrad._params import Parameter, holding, restored_on_error, substitute
from tapegrad.nn._module import Module, _members


def _value(label: str, value: Any, param: Parameter) -> Any:
    """``value`` as what ``param`` reads during the call: an array or traced value of its shape."""
    if isinstance(value, Boxed):
        value = value.unbox()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"functional_call: params{label} is a {type(value).__name__}, not an array; pass an array "
                        f"(NumPy, CuPy, a traced value or a Parameter) of shape {tuple(param.shape)}")
    given = type(value).__name__
    if not isinstance(value, Tracer) and not (hasattr(value, "shape") and hasattr(value, "dtype")):
        value = np.asarray(value)
    if not isinstance(value, Tracer) and np.dtype(value.dtype).kind not in "biufc":
        raise TypeError(f"functional_call: params{label} is a {given} of dtype {value.dtype} as an array, not a "
                        f"numeric array; pass a numeric array of shape {tuple(param.shape)}")
    if tuple(value.shape) != tuple(param.shape):
        raise ValueError(f"functional_call: params{label} has shape {tuple(value.shape)}, but the module's "
                         f"Parameter {param.name!r} has shape {tuple(param.shape)}; pass a value of that shape")
    return value


def _parameter_paths(module: Module) -> dict:
    """``{path: Parameter}`` for every path to a Parameter, a tied one (``b.weight = a.weight``, a shared
    layer) under each of its paths: ``named_parameters`` keeps only the first."""
    paths: dict = {}

    def walk(value, path, ancestors):
        for member_path, member in _members(value, path, set()):
            if isinstance(member, Parameter):
                paths.setdefault(member_path, member)
            elif id(member) not in ancestors:  # a module holding one of its ancestors: no cycle
                walk(vars(member), member_path, ancestors | {id(member)})
    walk(vars(module), "", frozenset({id(module)}))
    return paths


def _substitutions(module: Module, params: Any, strict: bool) -> tuple[dict, dict]:
    """``{Parameter: value}`` for ``params`` (a mapping by path or a sequence in ``trainable_params()``
    order) and ``{Parameter: key}`` (the key of ``params`` that gave it), with the errors that name
    the bad key."""
    named = dict(module.named_parameters())
    if isinstance(params, Mapping):
        paths = _parameter_paths(module)
        unknown = [k for k in params if k not in paths]
        if unknown:
            aliases = sorted(set(paths) - set(named))
            raise KeyError(f"functional_call: {sorted(map(str, unknown))} name no Parameter of the "
                           f"{type(module).__name__}; its names (state_dict() keys) are {sorted(named)}"
                           + (f", and the other paths of its tied Parameters {aliases}" if aliases else ""))
        mapping: dict = {}
        keys: dict = {}
        for k, v in params.items():
            p = paths[k]
            if p in keys:
                if params[keys[p]] is not v:
                    raise ValueError(f"functional_call: params[{keys[p]!r}] and params[{k!r}] are the same (tied) "
                                     f"Parameter {p.name!r} with two different values; give it one value, under "
                                     "either path")
                continue
            mapping[p] = _value(f"[{k!r}]", v, p)
            keys[p] = k
        if strict:
            missing = [path for path, p in named.items() if p not in mapping]
            if missing:
                raise KeyError(f"functional_call(strict=True): no value given for {missing}; pass every "
                               "Parameter of the module, or strict=False to keep the module's own values")
        return mapping, keys
    if isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
        trainable = module.trainable_params()
        if len(params) != len(trainable):
            raise ValueError(f"functional_call: params is a sequence of {len(params)} values, but the module "
                             f"has {len(trainable)} trainable Parameters ({', '.join(p.name for p in trainable)}); "
                             "pass one value per Parameter of trainable_params(), in its order, or a dict by name")
        if strict:
            frozen = [path for path, p in named.items() if not p.requires_grad]
            if frozen:
                raise KeyError(f"functional_call(strict=True): a sequence gives the trainable Parameters only, and "
                               f"no value is given for {frozen} (requires_grad=False); pass a dict with every "
                               "name of state_dict(), or strict=False to keep the module's own values")
        return ({p: _value(f"[{i}] (Parameter {p.name!r})", v, p) for i, (p, v) in enumerate(zip(trainable, params))},
                {p: i for i, p in enumerate(trainable)})
    raise TypeError(f"functional_call: params must be a dict of name -> array (the names of state_dict()) or a "
                    f"tuple/list of arrays in trainable_params() order, got {type(params).__name__}")


def functional_call(module: Module, params: Mapping[str, Any] | Sequence[Any], args: Any = (),
                    kwargs: Mapping[str, Any] | None = None, *, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` computed with ``params`` in place of its Parameters' values, without
    replacing the values of those Parameters (PyTorch's ``torch.func.functional_call``).

    The given values are what the Parameters read during the call (the substitution ``grad(weights=...)``
    makes), so the result is a function of them that every transform differentiates, batches and
    stages: ``tg.grad``, ``tg.hvp``, ``tg.jacrev``, ``tg.vmap`` and ``tg.jit`` over a dict of arrays.

    What the module assigns while it runs (BatchNorm's running statistics and ``num_batches_tracked``,
    Dropout's key, in training mode):

    - to a Parameter given in ``params``: refused with a RuntimeError. The new value would be computed
      from the given one, and it has no place to go (``params`` is not written, as PyTorch writes
      into the tensors passed; the module's stored value was not what was used).
    - to a Parameter not given: assigned as in a plain call, computed from the values used in the
      call (a float16 forward pass of a BatchNorm net updates the module's float32 running
      statistics from float16 batch statistics).

    Call ``module.eval()`` first for a pure function of ``params`` that changes nothing. If the call
    raises, every Parameter of the module is put back as it was before the call.

    Args:
        module: the module to call.
        params: the values, either a dict of name -> array under the module's Parameter paths (the
            keys of ``module.state_dict()``, ``"fc1.weight"``; a Parameter reachable along several
            paths, tied or in a shared layer, may be named by any of them, and given once), or a
            tuple/list with one value per Parameter of ``module.trainable_params()``, in that order
            (the order of the gradients ``grad(..., weights=module.trainable_params())`` returns).
            Values are numeric arrays (NumPy, CuPy), traced values or Parameters (read as their
            values), each of its Parameter's shape; a dtype may differ (the module then computes in
            it). A Parameter not named keeps its own value (PyTorch's default, ``strict=False``).
        args: the positional arguments of the call: a tuple, or one value that is not a tuple
            (PyTorch's rule: pass ``(x,)`` for a single tuple argument).
        kwargs: the keyword arguments of the call.
        strict: require a value for every Parameter of the module. With a sequence (trainable
            Parameters only), the module must then have no ``requires_grad=False`` Parameter.

    Returns:
        Whatever ``module(*args, **kwargs)`` returns, computed from the given values.

    Raises:
        KeyError: a name that is no Parameter path of ``module`` (the message lists the bad names and
            the module's); with ``strict=True``, a Parameter with no value given.
        ValueError: a value of another shape than its Parameter's; a sequence whose length is not the
            number of trainable Parameters; one tied Parameter given two different values.
        TypeError: a value that is not a numeric array (a str, an object array); ``params`` neither a
            dict nor a tuple/list; ``module`` not a ``Module``; ``strict`` not a bool.
        RuntimeError: the module assigns a Parameter given in ``params`` (see above); nothing of the
            module is changed.

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
    mapping, keys = _substitutions(module, params, strict)
    call_args = args if isinstance(args, tuple) else (args,)
    with restored_on_error(module.parameters()), substitute(mapping), holding(keys):
        return module(*call_args, **(kwargs or {}))
