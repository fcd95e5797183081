"""``state_dict`` / ``load_state_dict`` for every object whose state is held in Parameters (modules,
optimisers, loss scalers): one implementation, so that the rules for names, checks and the
all-or-nothing load are the same everywhere.

A class mixes in :class:`Stateful` and defines ``_named_state()``, the ``(name, Parameter)`` pairs
of everything a checkpoint must restore. The state dict is PyTorch's flat ``name -> array`` map;
the names are the Parameters' own (``"fc1.weight"``, ``"adam.exp_avg.fc1.weight"``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from tapegrad._backend import namespace_of, to_host
from tapegrad._typing import PyTree


class LoadResult(NamedTuple):
    """What ``load_state_dict(..., strict=False)`` skipped (PyTorch's ``_IncompatibleKeys``): the names
    the object has that ``state`` lacked, and the names in ``state`` the object does not have."""

    missing_keys: list
    unexpected_keys: list


class Stateful:
    """Adds :meth:`state_dict` and :meth:`load_state_dict` to a class defining ``_named_state()``."""

    def _named_state(self) -> list:
        """``(name, Parameter)`` pairs: everything :meth:`state_dict` returns, in a fixed order."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """A flat ``dict`` of name -> array: the current value of each Parameter of the state.

        The arrays are the Parameters' own (no copy): ``Parameter.assign`` replaces an array rather
        than writing into it, so a state dict taken now keeps these values after later steps. NumPy
        or CuPy, as the Parameters hold them.

        Raises:
            ValueError: two Parameters of the state share a name (name them apart).
        """
        return {name: p.value for name, p in _checked_names(self)}

    def load_state_dict(self, state: PyTree, strict: bool = True, cast: bool = False) -> LoadResult:
        """Assign each Parameter of the state the array of its name in ``state``: all or nothing.

        Every entry is checked before any Parameter changes, and an exception while assigning (an
        interrupt) restores the ones already assigned, so a failed load leaves the object as it was.

        Args:
            state: a mapping of name -> array (a :meth:`state_dict`, or ``tg.load``'s result). Arrays
                are moved to the device of the Parameter they replace (NumPy into CuPy or back).
            strict: whether every name of the state must be in ``state`` and nothing else
                (PyTorch's ``strict``). With False, the names on either side are skipped and listed
                in the result.
            cast: whether a value of another dtype is cast to the Parameter's (``same_kind``
                casting only: float64 to float16, not float to int). Without it a dtype mismatch is an
                error. Shapes must always match.

        Returns:
            :class:`LoadResult` ``(missing_keys, unexpected_keys)``, both empty under ``strict``.

        Raises:
            TypeError: ``state`` is not a mapping; a value is not an array.
            KeyError: under ``strict``, names are missing from ``state`` or unexpected in it (the
                message names them).
            ValueError: a value's shape differs from its Parameter's, or its dtype without ``cast``
                (the message names the key).
        """
        return load_state_dicts([(self, state)], strict=strict, cast=cast)[0]


def load_state_dicts(pairs, strict: bool = True, cast: bool = False) -> list:
    """Load several objects at once, all or nothing across all of them: ``pairs`` is a list of
    ``(Stateful, state)``; every state is checked against its object before any Parameter of any of
    them changes (a model and its optimiser from one checkpoint: a bad optimiser entry leaves the
    model as it was too).

    Returns:
        One :class:`LoadResult` per pair, in order. Errors as :meth:`Stateful.load_state_dict`.
    """
    plans = [_plan(obj, state, strict, cast) for obj, state in pairs]  # phase 1: check everything
    assign_all([assignment for assignments, _ in plans for assignment in assignments])  # phase 2
    return [result for _, result in plans]


def _plan(obj, state, strict: bool, cast: bool) -> tuple:
    """``([(Parameter, new value)], LoadResult)`` for loading ``state`` into ``obj``; changes nothing,
    raises what a load would."""
    owner = type(obj).__name__
    if not isinstance(state, Mapping):
        raise TypeError(f"{owner}.load_state_dict: state must be a mapping of name -> array "
                        f"(a state_dict() or tg.load's result), got {type(state).__name__}")
    named = dict(_checked_names(obj))
    missing = [name for name in named if name not in state]
    unexpected = [name for name in state if name not in named]
    if strict and (missing or unexpected):
        raise KeyError(f"{owner}.load_state_dict: missing keys {missing}, unexpected keys {unexpected}; load "
                       "a state saved from the same structure, or pass strict=False to load the names both "
                       "sides have")
    assignments = [(param, _conformed(name, param, state[name], cast, owner))
                   for name, param in named.items() if name in state]
    return assignments, LoadResult(missing, unexpected)


def _checked_names(obj) -> list:
    pairs = obj._named_state()
    seen: dict = {}
    for name, p in pairs:
        if name in seen and seen[name] is not p:
            raise ValueError(f"{type(obj).__name__}: two Parameters of the state are named {name!r}, so a state "
                             "dict cannot tell them apart; give them distinct names (Parameter(..., name=...))")
        seen[name] = p
    return list(seen.items())


def _conformed(name: str, param, value, cast: bool, owner: str):
    """``value`` as an array of ``param``'s backend, shape and dtype, or an error naming ``name``."""
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise TypeError(f"{owner}.load_state_dict: the value of {name!r} is a {type(value).__name__}, not an "
                        "array")
    if tuple(value.shape) != param.shape:
        raise ValueError(f"{owner}.load_state_dict: {name!r} has shape {tuple(value.shape)} in the state but "
                         f"{param.shape} here; the state comes from a model of another size")
    if value.dtype != param.dtype:
        if not cast:
            raise ValueError(f"{owner}.load_state_dict: {name!r} has dtype {value.dtype} in the state but "
                             f"{param.dtype} here; pass cast=True to convert it")
        if not np.can_cast(value.dtype, param.dtype, casting="same_kind"):
            raise ValueError(f"{owner}.load_state_dict: {name!r} has dtype {value.dtype} in the state, which "
                             f"does not cast to {param.dtype} (same_kind casting) even with cast=True")
    xp = namespace_of(param.value)
    if namespace_of(value) is not xp:
        value = to_host(value) if xp is np else xp.asarray(value)  # an explicit, asked-for transfer
    return xp.asarray(value, dtype=param.dtype).copy()  # a copy: the state's owner may change its arrays


def assign_all(assignments: Iterable[tuple[Any, Any]]) -> None:
    """Assign each ``(Parameter, value)``, all or none: an exception midway (a shape or dtype that
    ``Parameter.assign`` refuses, an interrupt) restores the ones done, then propagates."""
    done = []
    try:
        for param, value in assignments:
            done.append((param, param.value))
            param.assign(value)
    except BaseException:
        for param, old in reversed(done):
            param.assign(old)
        raise
