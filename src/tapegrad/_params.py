"""Parameters: identity-bearing, mutable holders of one array (MindSpore ``Parameter``, Flax NNX
``Variable``), and the substitution scope through which transforms see them.

Reading ``p.value`` inside ``grad(..., weights=...)`` returns the tracer that ``grad`` substituted
for ``p``; the map lives in a ``ContextVar``, so nested and concurrent transforms each see their own.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from tapegrad._backend import default_namespace, is_array
from tapegrad._core import Boxed, Tracer, scoped
from tapegrad._typing import ArrayLike

_substitutions: contextvars.ContextVar = contextvars.ContextVar("tapegrad_parameter_substitutions",
                                                                default=None)
_staging: contextvars.ContextVar = contextvars.ContextVar("tapegrad_parameter_staging", default=None)
_writes: contextvars.ContextVar = contextvars.ContextVar("tapegrad_parameter_writes", default=None)
_held: contextvars.ContextVar = contextvars.ContextVar("tapegrad_parameter_held", default=())
_unnamed = itertools.count()


def staging_parameters(builder):
    """While ``jit`` stages a function, Parameters read through ``builder`` (implicit inputs) and
    ``assign`` of a staged value records a write (an output the call writes back)."""
    builder.outer_substitutions = _substitutions.get() or {}
    return scoped(_staging, builder)


def recording_writes():
    """Within the block, each Parameter's value before its first ``assign`` is kept in the yielded
    dict (``checkpoint`` restores them to recompute a function that updates state, such as a
    Dropout key or BatchNorm's running statistics, exactly as it first ran)."""
    return scoped(_writes, {})


# CPython itself has a window no code of ours can close: an interrupt that lands between a context
# manager's __enter__ setting a value and the with block starting leaves the value set until the
# generator behind it is collected. So what the scopes set is checked where it is read: a value of a
# transform that has ended is ignored, never used, and nothing an interrupt leaves behind can break
# the next call.
def _live(value) -> bool:
    """Whether a substituted value belongs to a running transform (a plain array always does)."""
    return not isinstance(value, Tracer) or value._trace.main.active


def _staging_builder():
    """The builder of the jit staging in progress, if any (one left by an interrupt is ignored)."""
    builder = _staging.get()
    return builder if builder is not None and builder.trace.main.active else None


class _NoSubstitution:
    """What ``substitute({})`` returns: nothing to do, and no generator to run (it is on every
    ``grad`` call's path)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_SUBSTITUTION = _NoSubstitution()


def substitute(mapping: dict):
    """Within the block, ``p.value`` is ``mapping[p]`` for each Parameter ``p`` in ``mapping``."""
    if not mapping:
        return _NO_SUBSTITUTION
    current = _substitutions.get()
    return scoped(_substitutions, {**current, **mapping} if current else dict(mapping))


class _Held:
    """The Parameters one ``functional_call`` substitutes, each with the ``params`` key that gave its
    value; ``active`` until that call ends (a scope an interrupt left behind is then ignored)."""

    __slots__ = ("keys", "active")

    def __init__(self, keys: dict):
        self.keys = keys
        self.active = True


@contextlib.contextmanager
def holding(keys: dict):
    """Within the block, ``assign`` refuses the Parameters of ``keys`` (``{Parameter: params key}``):
    their value there is ``functional_call``'s, so a new value computed from it has no place to go."""
    token = _Held(keys)
    try:
        with scoped(_held, (*_held.get(), token)):
            yield
    finally:
        token.active = False


@contextlib.contextmanager
def restored_on_error(params):
    """Within the block, an exception (an interrupt too) puts back each of ``params``'s stored arrays
    as it was at the start (``assign`` replaces arrays, never writes into them), then propagates."""
    before = [(p, p._data) for p in params]
    try:
        yield
    except BaseException:
        for p, data in before:
            p._data = data
        raise


def recast(params, dtype) -> None:
    """Give each Parameter of ``params`` its value cast to ``dtype``: the one path that changes a
    Parameter's dtype (``Module.astype``; ``assign`` keeps shape and dtype). Every cast is made before
    any Parameter changes, so an exception leaves them all as they were.

    Raises:
        RuntimeError: called while ``jit`` stages a function (the cast would happen once, at staging).
    """
    if _staging_builder() is not None:
        raise RuntimeError("a module's dtype cannot change inside a jit-compiled function (it would change "
                           "once, while the function is staged): call astype outside jit")
    cast = [(p, p._data.astype(dtype)) for p in params]
    for p, value in cast:
        p._data = value
    if cast:
        recasts[0] += 1  # jit's cached programs that read or write a Parameter check its dtype again


def write_back(assignments: Iterable[tuple[Parameter, Any]]) -> None:
    """``p.assign(v)`` for each ``(p, v)``, all or nothing: every value is checked (concrete or staged
    by the jit staging in progress, of its Parameter's shape and dtype, none held by
    ``functional_call``) before any Parameter changes, so a bad one leaves them all as they were; an
    interrupt while they are stored puts back those already stored. ``jit`` writes a program's
    Parameter outputs back this way (``_state_dict.assign_all``, for loads and optimiser steps,
    goes through ``Parameter.assign`` one by one and rolls back instead).

    Raises:
        ValueError / TypeError / RuntimeError: as ``Parameter.assign``, for the first bad value.
    """
    builder = _staging_builder()
    checked = [(p, p._checked(v, builder)) for p, v in assignments]
    with restored_on_error([p for p, _ in checked]):
        for p, new in checked:
            p._store(new, builder)


# the number of recast() calls that changed a Parameter: a cached jit program staged at another count
# checks the dtypes of the Parameters it reads and writes before it runs (and stages again when one changed)
recasts = [0]


def _as_array(value):
    if isinstance(value, Boxed):
        value = value.unbox()
    if isinstance(value, Tracer):
        raise TypeError("a Parameter holds a concrete array, not a traced value: return the new value "
                        "from the transformed function and assign it outside")
    if isinstance(value, np.generic):  # an immutable scalar: held as a 0-d array of its dtype
        return np.asarray(value)
    if is_array(value):
        return value
    return default_namespace().asarray(value)


class Parameter(Boxed):
    """A named, mutable array that models and ``grad(weights=...)`` refer to by identity.

    Args:
        value: the initial array (NumPy or CuPy; scalars and lists are converted with the default
            backend).
        name: a name for ``return_ids`` and ``get_grad``. Left None, it is ``"param<k>"`` (``k``
            counts the Parameters made), until a module it is assigned to names it after its dotted
            attribute path (``"fc1.weight"``, see ``nn.Module``).
        requires_grad: whether ``Module.trainable_params()`` lists it.

    It behaves as its value in expressions (operators, ``tnp`` and ``np`` functions); outside
    transforms ``np.asarray(p)`` is the array. Parameters hash and compare by identity in dicts.
    ``p.value`` reads the current value (inside a transform that substitutes ``p``, its traced
    value); ``p.assign(v)`` replaces it, keeping shape and dtype. In-place operators (``p += v``)
    raise ``TypeError``: write ``p.assign(p.value + v)``.

    Raises:
        TypeError: ``name`` is not a str or None; ``value`` is a traced value (return the new value
            from the transformed function and assign it outside).
    """

    __slots__ = ("_data", "_name", "_auto_named", "_name_owner", "requires_grad", "__weakref__")
    __hash__ = object.__hash__

    def __init__(self, value: ArrayLike, name: str | None = None, requires_grad: bool = True) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Parameter: name must be a str or None, got {type(name).__name__}")
        self._data = _as_array(value)
        self._name = f"param{next(_unnamed)}" if name is None else name
        self._auto_named = name is None  # a module may (re)name it with its attribute path
        self._name_owner: weakref.ref | None = None  # a weak reference to that module
        self.requires_grad = bool(requires_grad)

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str):
        self._name = name
        self._auto_named = False
        self._name_owner = None

    def set_default_name(self, name: str, owner: Any) -> None:
        """Name it ``name``, a path of attributes from ``owner``, unless the user gave it a name
        (``nn.Module`` calls this when a Parameter is assigned to it, directly or inside a module)."""
        if self._auto_named:
            self._name = name
            self._name_owner = weakref.ref(owner)

    def __getstate__(self):
        """Pickling and copying keep all but the owner of the name (a weak reference): the copy is a
        Parameter no module has named yet, under the same name."""
        return None, {"_data": self._data, "_name": self._name, "_auto_named": self._auto_named,
                      "_name_owner": None, "requires_grad": self.requires_grad}

    @property
    def name_owner(self) -> Any:
        """The object whose attribute path the name is (a module), or None: a user-given name, a
        ``"param<k>"``, or an owner that is gone."""
        return None if self._name_owner is None else self._name_owner()

    @property
    def value(self) -> Any:
        """The current value: the substituted tracer inside a transform, the program's implicit input
        while ``jit`` stages, else the stored array."""
        subs = _substitutions.get()
        builder = _staging_builder()
        if subs:
            v = subs.get(self)
            # a substitution made outside the jit being staged (grad(jit(f), weights=...)) is read at
            # each call like the stored value: an implicit input, so the program stays reusable
            if v is not None and _live(v) and (builder is None or builder.outer_substitutions.get(self) is not v):
                return v
        if builder is not None:
            return builder.read_parameter(self)
        return self._data

    def unbox(self) -> Any:
        return self.value

    def assign(self, value: ArrayLike) -> Parameter:
        """Replace the stored array, keeping shape and dtype (MindSpore's ``Parameter.set_data``).

        Inside ``jit`` a value computed by the jitted function is allowed: it becomes an output of the
        program, written back at each call (``optimizer.step`` under ``jit`` works this way).

        Args:
            value: an array (or scalar, list) of the Parameter's shape and dtype; it is stored as given
                (no copy), on its own backend.

        Returns:
            The Parameter itself.

        Raises:
            ValueError: ``value`` has another shape or dtype (cast it, or make a new Parameter).
            TypeError: ``value`` is a traced value of ``grad``/``vjp``/``vmap`` (return it from the
                transformed function and assign it outside).
            RuntimeError: inside ``nn.functional_call``, to a Parameter whose value its ``params``
                gives (the message says to call ``module.eval()`` or leave the key out).
        """
        builder = _staging_builder()
        self._store(self._checked(value, builder), builder)
        return self

    def _refuse_if_held(self) -> None:
        """The RuntimeError of ``assign`` inside a ``functional_call`` that substitutes this Parameter."""
        for token in _held.get():
            key = token.keys.get(self) if token.active else None
            if key is not None:
                raise RuntimeError(
                    f"Parameter {self.name!r}.assign inside functional_call, whose params[{key!r}] stands for "
                    "this Parameter: the new value (computed from the given one, such as BatchNorm's running "
                    "statistics or Dropout's key in training mode) has no place to go, as params is not "
                    "written and the module's own value was not used. Call module.eval() first for a pure "
                    f"function, or leave {key!r} out of params so that the module updates its own value as "
                    "in a plain call")

    def _checked(self, value, builder):
        """``value`` as the new value (an array, or a value staged by ``builder``, the jit staging in
        progress), if this Parameter may take it; else the exception of ``assign``."""
        self._refuse_if_held()
        # inside jit, a staged value: the new value becomes an output that the call writes back
        staged = builder is not None and isinstance(value, Tracer) and value._trace is builder.trace
        new = value if staged else _as_array(value)
        if tuple(new.shape) != tuple(self._data.shape) or new.dtype != self._data.dtype:
            raise ValueError(f"Parameter {self.name!r}.assign: expected shape {tuple(self._data.shape)} and "
                             f"dtype {self._data.dtype}, got {tuple(new.shape)} {new.dtype}; cast or reshape "
                             "the value first")
        return new

    def _store(self, new, builder) -> None:
        """Make ``new`` (checked) the value: a write of the jit staging ``builder`` when staged by it."""
        if builder is not None and isinstance(new, Tracer) and new._trace is builder.trace:
            builder.writes[self] = new
            return
        log = _writes.get()
        if log is not None and self not in log:
            log[self] = self._data
        self._data = new

    @property
    def shape(self) -> Any:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> Any:
        return self._data.dtype

    @property
    def ndim(self) -> Any:
        return self._data.ndim

    @property
    def size(self) -> Any:
        return self._data.size

    def __len__(self):
        return len(self._data)

    def __array__(self, dtype=None, copy=None):
        value = self.value
        if isinstance(value, Tracer):
            return value.__array__(dtype)
        return np.asarray(value, dtype=dtype)

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)

    def __bool__(self):
        return bool(self.value)

    def _refuse_inplace(self, other):
        raise TypeError(f"in-place arithmetic on Parameter {self.name!r} would replace it with a plain "
                        "array; write p.assign(p.value + v) (or -, *, /) to change its value")

    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ipow__ = __imatmul__ = _refuse_inplace

    def __repr__(self):
        return f"Parameter(name={self._name!r}, shape={self.shape}, dtype={self.dtype})"


class ParameterTuple(tuple):
    """An ordered tuple of Parameters (MindSpore's ``ParameterTuple``): ``weights=`` gives a tuple of
    gradients in this order.

    ``in``, ``index`` and ``count`` compare by identity (``==`` on Parameters is elementwise, as on
    arrays). ``nn.Module.trainable_params()`` returns one.

    Args:
        params: an iterable of Parameters (a list, a tuple, a generator); empty by default.

    Raises:
        TypeError: an element is not a Parameter.
    """

    def __new__(cls, params: Iterable[Parameter] = ()) -> ParameterTuple:
        params = tuple(params)
        for i, p in enumerate(params):
            if not isinstance(p, Parameter):
                raise TypeError(f"ParameterTuple: element {i} is a {type(p).__name__}, not a Parameter")
        return super().__new__(cls, params)

    def __contains__(self, item) -> bool:
        """Membership by identity (``==`` on Parameters is elementwise, as on arrays)."""
        return any(p is item for p in self)

    def index(self, item: Any, *args: Any) -> int:
        for i, p in enumerate(self):
            if p is item:
                return i
        raise ValueError(f"{item!r} is not in this ParameterTuple")

    def count(self, item: Any) -> int:
        return sum(p is item for p in self)

    def __repr__(self):
        return f"ParameterTuple({', '.join(p.name for p in self)})"


def traced_parameters() -> dict:
    """The Parameters that a running transform has substituted with traced values, and those values
    (``checkpoint`` makes them explicit inputs, so it can recompute with them)."""
    subs = _substitutions.get()
    return {p: v for p, v in subs.items() if isinstance(v, Tracer) and _live(v)} if subs else {}
