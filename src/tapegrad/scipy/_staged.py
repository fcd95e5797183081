"""How ``tapegrad.scipy.optimize`` hands SciPy a user's function and its derivatives: staged once by
``jit`` and called as a compiled program at every SciPy evaluation, or, where ``jit`` cannot stage the
function, called eagerly, with the reason kept for the result.

A solver call makes one :class:`Route` from the function, its concrete ``args`` (and ``kwargs``) and asks
it for host functions, one per derivative ``kind`` (:data:`_DERIVED`). The jitted derivatives live on the
user's function (a ``WeakKeyDictionary``): one ``jit`` object per (function, kind, which arguments are
static), which itself keeps one program per argument shapes and dtypes. Array ``args`` are traced inputs
of that program, so a new value of them does not stage again; ``args`` that are not arrays (a string, a
callable) are static: hashed into the key, as ``jit``'s ``static_argnums``.

Each host function probes its first calls: one where the user's function fails to stage (an operation
``jit`` cannot trace, such as ``np.asarray`` of a tracer or Python ``if`` on a value) switches the route
to the eager derivative, remembered on the function so that later solves go there directly (an error
of ``jit`` itself, or of the compiled program, propagates); a call that staged again right after a
staging, or a result that is a tracer, means the function reads a value of an outer transform (a
closed-over traced value or a traced Parameter), which ``jit`` cannot keep: the route then goes eager
for this solve. From the first call that reuses the cached program on, each call is the bare ``jit``
call.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import _tree
from tapegrad._api import grad, value_and_grad
from tapegrad._core import Tracer
from tapegrad._jacobians import hessian, hvp, jacfwd
from tapegrad._jit.api import jit, traceable

# kind -> the derivative of ``fun(x, *args, **kwargs)`` in x that SciPy gets, as a function of the same
# arguments (hessp: of ``(x, p, *args, **kwargs)``)
_DERIVED: dict[str, Callable[[Callable], Callable]] = {
    "value": lambda fun: fun,
    "value_and_grad": value_and_grad,
    "grad": grad,
    "grad2": lambda fun: grad(grad(fun)),
    # root_scalar's f returning (f, f'[, f'']) (fprime=True or fprime2=True): derivatives of its first value
    "grad[0]": lambda fun: grad(lambda x, *args, **kwargs: fun(x, *args, **kwargs)[0]),
    "grad2[0]": lambda fun: grad(grad(lambda x, *args, **kwargs: fun(x, *args, **kwargs)[0])),
    "hessian": hessian,
    "hessp": lambda fun: lambda x, p, *args, **kwargs: hvp(lambda y: fun(y, *args, **kwargs), (x,), (p,))[1][0],
    "jacobian": jacfwd,
}
# how compiled each executor is, for the least compiled of a solve's functions
_ORDER = {"numba": 0, "python+numba": 1, "python": 2, "eager": 3}

# fun -> {(kind, static positions, static names): its _Staged, or the reason it cannot stage}
_STAGED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _first_line(error: BaseException, limit: int = 160) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(error).__name__}: {line[:limit]}{'...' if len(line) > limit else ''}"


def _static_split(args, kwargs) -> tuple[tuple, tuple, str | None]:
    """The positions of ``args`` (counted after ``x``, and ``hessp``'s ``p`` where there is one: they are
    counted from 0 here) and the names of ``kwargs`` that ``jit`` must take as static (an argument with a
    leaf that is not an array or a number), and the reason none can stage (a static one that is not
    hashable), or None."""
    positions: list[int] = []
    names: list[str] = []
    for where, value in [(k, v) for k, v in enumerate(args)] + list(kwargs.items()):
        if type(value) is np.ndarray or all(traceable(leaf) is not None for leaf in _tree.tree_leaves(value)):
            continue
        try:
            hash(value)
        except TypeError:
            label = f"args[{where}]" if isinstance(where, int) else f"kwargs[{where!r}]"
            return (), (), (f"{label} is a {type(value).__name__} that is neither arrays nor hashable, so jit can "
                            "neither trace it nor key its program on it: pass arrays, or a hashable value")
        (positions if isinstance(where, int) else names).append(where)
    return tuple(positions), tuple(names), None


class _Staged:
    """The ``jit`` of one derivative of a user's function, with what the probe asks of it: how many times
    it staged (its body runs only while ``jit`` stages it), the error the user's function raised while
    staging (told from an error of ``jit`` itself, or of the compiled program, which propagate), and its
    executor by argument signature."""

    __slots__ = ("jitted", "stagings", "failure", "executors")

    def __init__(self, fun: Callable, kind: str, static_argnums: tuple, static_argnames: tuple) -> None:
        self.stagings: int = 0
        self.failure: BaseException | None = None
        self.executors: dict[tuple, str] = {}
        # a weak reference: the table holds this on fun's key, and a strong one would keep fun alive
        ref: Callable[[], Any]
        try:
            ref = weakref.ref(fun)
        except TypeError:  # no weak reference: the table is this call's own (Route)
            def strong() -> Callable:
                return fun
            ref = strong

        def body(*args, **kwargs):
            self.stagings += 1
            live: Any = ref()  # alive while it stages: the Route that calls it holds it
            try:
                return _DERIVED[kind](live)(*args, **kwargs)
            except Exception as error:
                self.failure = error
                raise
        self.jitted = jit(body, static_argnums=static_argnums, static_argnames=static_argnames)

    def staging_error(self, error: BaseException) -> bool:
        """Whether ``error`` (or what it was raised from) is the user's function failing to stage."""
        while error is not None:
            if error is self.failure:
                return True
            error = error.__cause__ or error.__context__
        return False

    def executor(self, args, kwargs) -> str:
        """``jit(...).executor(*args, **kwargs)``, kept by the arguments' shapes and dtypes (asking ``jit``
        again inspects the program's loops: milliseconds, once per solve otherwise)."""
        # a number is a traced input (its type is jit's key); another leaf is static (its value is)
        leaves = args if not kwargs and all(type(x) is np.ndarray for x in args) else _tree.tree_leaves((args, kwargs))
        key = tuple((x.shape, x.dtype) if type(x) is np.ndarray else (np.shape(x), np.result_type(x))
                    if hasattr(x, "dtype") else type(x) if type(x) in (bool, int, float, complex) else (type(x), x)
                    for x in leaves)
        try:
            return self.executors[key]
        except KeyError:
            found = self.executors[key] = self.jitted.executor(*args, **kwargs)
            return found
        except TypeError:  # an unhashable static value: not kept
            return self.jitted.executor(*args, **kwargs)


def _holds_tracer(out) -> bool:
    if type(out) is np.ndarray or type(out) is float:
        return False
    return any(isinstance(leaf, Tracer) for leaf in _tree.tree_leaves(out))


class Route:
    """One solver call's way of evaluating ``fun`` (and its derivatives) on host values for SciPy.

    Args:
        fun: the user's function, ``fun(x, *args, **kwargs)``, written in tapegrad operations.
        args, kwargs: its extra arguments, concrete (host arrays, numbers, or constants).
    """

    def __init__(self, fun: Callable, args, kwargs: dict | None = None) -> None:
        self.fun, self.args, self.kwargs = fun, tuple(args), dict(kwargs or {})
        self.static_positions, self.static_names, self.reason = _static_split(self.args, self.kwargs)
        self.executors: dict[str, str] = {}
        self._pending: dict[str, tuple] = {}  # kinds called once, staging then: (_Staged, args, kwargs)
        try:
            self._table = _STAGED.setdefault(fun, {})
        except TypeError:  # no weak reference (a builtin): staged for this call only
            self._table = {}

    def host(self, kind: str, convert: Callable[[Any], Any], shape: tuple, dtype: Any = None) -> Callable:
        """SciPy's function for ``kind``: ``x`` (and ``hessp``'s ``p``) flat as SciPy passes them, given
        to the derivative in ``shape`` (cast to ``dtype`` when given), its result ``convert``-ed to what
        SciPy takes (a float, a flat array). Extra positional arguments from SciPy are ignored (it is
        handed ``args=()``)."""
        args, kwargs = self.args, self.kwargs
        cell: list[Any] = [self._call(kind)]
        if cell[0] is None:
            cell[0] = self._probe(kind, cell)
        if kind == "hessp":
            def hessp_fn(x, p, *_):
                return convert(cell[0](x.reshape(shape), p.reshape(shape), *args, **kwargs))
            return hessp_fn
        if dtype is not None:
            def cast_fn(x, *_):
                return convert(cell[0](np.asarray(x, dtype=dtype).reshape(shape), *args, **kwargs))
            return cast_fn

        def host_fn(x, *_):
            return convert(cell[0](x.reshape(shape), *args, **kwargs))
        return host_fn

    def _call(self, kind: str) -> Callable | None:
        """The eager derivative where this route cannot stage, else None (the probe decides)."""
        if self.reason is None:
            found = self._table.get(self._key(kind))
            if isinstance(found, str):
                self.reason = found
        if self.reason is not None:
            self.executors[kind] = "eager"
            return _DERIVED[kind](self.fun)
        return None

    def _key(self, kind: str) -> tuple:
        # hessp's p comes before args: the positions the jitted function sees are shifted by it
        if not self.static_positions:
            return kind, (), self.static_names
        shift = 2 if kind == "hessp" else 1
        return kind, tuple(k + shift for k in self.static_positions), self.static_names

    def _staged(self, kind: str) -> _Staged:
        """The cached ``jit`` of ``kind``'s derivative of ``fun``."""
        key = self._key(kind)
        found = self._table.get(key)
        if found is None:
            found = self._table[key] = _Staged(self.fun, kind, key[1], key[2])
        return found

    def _probe(self, kind: str, cell: list) -> Callable:
        """The first calls of ``kind``: staged by ``jit`` where it can, eager (and the reason kept) where
        it cannot. Once a call reused the cached program (no staging), ``cell`` holds the bare jitted
        function."""
        staged = self._staged(kind)
        staged_once: list[bool] = []  # a first call staged: the next call must not stage again

        def fall_back(reason: str, remember: bool) -> Callable:
            self.reason = reason
            self.executors[kind] = "eager"
            self._pending.pop(kind, None)
            if remember:
                self._table[self._key(kind)] = reason
            cell[0] = _DERIVED[kind](self.fun)
            return cell[0]

        def probe(*args, **kwargs):
            before = staged.stagings
            try:
                out = staged.jitted(*args, **kwargs)
            except Exception as error:
                told, staged.failure = staged.staging_error(error), None  # (its traceback holds fun's frames)
                if not told:
                    raise
                reason = f"jit could not stage the function's {kind} ({_first_line(error)})"
                return fall_back(reason, True)(*args, **kwargs)  # an error of the function itself raises again
            if _holds_tracer(out) or (staged_once and staged.stagings > before):
                fall_back("the function reads a value of an outer transform (a traced value it closes over, or "
                          "a traced Parameter), which a staged program cannot keep: pass it in args", False)
            elif staged.stagings > before:
                staged_once.append(True)
                self._pending[kind] = (staged, args, kwargs)
            else:
                self._pending.pop(kind, None)
                self.executors[kind] = staged.executor(args, kwargs)
                cell[0] = staged.jitted
            return out
        return probe

    @property
    def executor(self) -> str | None:
        """The least compiled executor among the functions SciPy called (``"numba"``, ``"python+numba"``,
        ``"python"`` or ``"eager"``), None when it called none of them."""
        if self.reason is not None:
            return "eager"
        for kind, (staged, args, kwargs) in list(self._pending.items()):  # called once: its program is cached
            self.executors[kind] = staged.executor(args, kwargs)
        self._pending.clear()
        return max(self.executors.values(), key=_ORDER.__getitem__, default=None)

    def report(self, result: Any) -> Any:
        """``result`` with ``executor`` and ``executor_reason`` (None unless eager) set."""
        result.executor = self.executor
        result.executor_reason = self.reason if result.executor == "eager" else None
        return result
