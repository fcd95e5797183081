"""``jit`` and ``make_program``: the pytree wrappers of staging, the cache and the executor."""
from __future__ import annotations

import collections
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import numpy as np

from tapegrad import _config, _tree
from tapegrad._backend import is_array
from tapegrad._config import config
from tapegrad._core import Boxed, Tracer, for_jit, scoped
from tapegrad._flags import flags_read
from tapegrad._jit import misses, native, passes
from tapegrad._jit.codegen import compile_program, evaluate
from tapegrad._jit.passes import optimize
from tapegrad._jit.program import Program
from tapegrad._jit.staging import abstractify, stage
from tapegrad._owned import owned
from tapegrad._params import recasts, write_back
from tapegrad._value_checks import first_bad, made

_SCALARS = (bool, int, float, complex)
P = ParamSpec("P")
Q = ParamSpec("Q")  # a method's parameters after self
R = TypeVar("R")
S = TypeVar("S")  # a method's self


def _static_positions(fn, static_argnums, static_argnames):
    """The static positions and names, each completed from the other through ``fn``'s signature (as
    JAX does), so that a static argument is static whether passed by position or by name."""
    nums: Collection[int] = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names: Collection[str] = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    for n in nums:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"jit: static_argnums must be ints, got {n!r}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return frozenset(nums), frozenset(names)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = set(nums) | {positional.index(name) for name in names if name in positional}
    names = set(names) | {positional[n] for n in nums if n < len(positional)
                          and params[n].kind is params[n].POSITIONAL_OR_KEYWORD}
    return frozenset(nums), frozenset(names)


def _check_hashable(value, where: str):
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"jit: the static argument {where} is a {type(value).__name__}, which is not hashable, "
                         "so it cannot be part of the cache key: pass a hashable value (a tuple instead of a "
                         "list, say), or make it a traced array argument") from None


def traceable(x):
    """``x`` as a traced leaf: an array (a Parameter reads as its value) or a Python scalar (weakly
    typed); None when it is neither."""
    if isinstance(x, Boxed):
        x = x.unbox()
    if type(x) in _SCALARS or isinstance(x, np.generic) or is_array(x):
        return x
    return None


def _leaves(leaves) -> list:
    """The traced argument leaves (:func:`traceable`), or a TypeError naming the first that is not."""
    out = []
    for k, x in enumerate(leaves):
        leaf = x if type(x) is np.ndarray else traceable(x)  # the common case, without the probes
        if leaf is None:
            raise TypeError(f"jit: argument leaf {k} holds a {type(x).__name__}, which cannot be traced; mark "
                            f"that argument static (static_argnums=...) or pass arrays"
                            f"{_tree.unregistered_container_hint(x)}")
        out.append(leaf)
    return out


def _signature(x):
    """The part of the cache key for one leaf: shape, dtype and backend (a Python scalar: its type)."""
    if type(x) in _SCALARS:
        return type(x)
    if isinstance(x, Tracer):
        return (tuple(x.shape), np.dtype(x.dtype), x.array_namespace().__name__)
    return (tuple(x.shape), x.dtype, type(x).__module__)


class _Identity:
    """A cache-key part that compares by identity and keeps its object alive (so that its id cannot
    be reused by another object while the program, which may read its Parameters, is cached). Only
    for an instance that takes no weak reference: the others get a cache of their own (``_Programs``)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj


def _any_tracer(values) -> bool:
    for x in values:
        if type(x) is not np.ndarray and isinstance(x, Tracer):
            return True
    return False


def _c_order(value):
    """``value`` in C order: a copy when it is not C-contiguous, else ``value`` itself.

    A program's results take the layout of whatever computed them: a weight's gradient is often a
    transposed view (``(x.T @ ct).T``), the ufuncs and fused kernels that read it follow its Fortran
    order, and a buffer reused with ``out=`` keeps its own. State written back in such a layout would
    change the next call's arithmetic (a matmul's rounding depends on its operands' layout), while a
    checkpoint loads C-ordered arrays: a resumed run would then differ from an uninterrupted one.
    Written-back state is therefore always C-ordered (NumPy's and CuPy's ``copy(order="C")``). A value
    under an outer transform (a tracer) passes through.
    """
    if type(value) is np.ndarray:
        flags = value.flags
    elif isinstance(value, Tracer):
        return value
    else:  # CuPy's arrays have NumPy's flags and copy(order=)
        flags = getattr(value, "flags", None)
    if flags is not None and not flags.c_contiguous:
        return value.copy(order="C")
    return value


class _Entry:
    """One compiled program: the program, its executor, and what the call must supply and write."""

    def __init__(self, program, builder, out_tree, n_out, donated=()):
        self.program, self.out_tree, self.n_out = program, out_tree, n_out
        self.donated = donated  # indices of program inputs whose buffers the program may reuse
        self.params_read = list(builder.params)
        self.params_written = list(builder.writes)
        self.captured = list(builder.captured)
        # the flags staging read (a module's training): the program is stale once one of them changes
        self.flags = flags_read(builder)
        # the type (shape, dtype) the program gives each Parameter it reads (an input) or writes (an
        # output): only Module.astype (_params.recast) changes a Parameter's dtype after staging
        program = self.program
        read_vars = program.invars[len(program.invars) - len(self.params_read):]
        written_vars = program.outputs[n_out:]
        self.param_types = [(p, tuple(v.aval.shape), np.dtype(v.aval.dtype))
                            for p, v in zip(self.params_read + self.params_written, read_vars + written_vars)]
        self.recasts = recasts[0]  # the recast count at which param_types was last found to hold
        self._run = None
        self.native_loops = False  # set when compiled: whether its loops run compiled (native.in_jit)
        self.reason = ""  # set when compiled: why the program keeps the Python executor
        self._loops_lower: bool | None = None  # whether a loop of the program compiles alone

    def valid(self) -> bool:
        """Whether the cached program still computes what the function would: every flag it read
        (a module's ``training``) has the value it was staged with, and, once a Parameter has been
        recast since the last check, every Parameter it reads or writes has the shape and dtype the
        program gives it (a stale program would feed or write back values of the old dtype)."""
        if self.flags is not None and not self.flags.hold():
            return False
        return self.recasts == recasts[0] or self.params_hold()

    def params_hold(self) -> bool:
        """Whether every Parameter the program reads or writes still has the shape and dtype it was
        staged with (only ``Module.astype`` changes a dtype: ``_params.recast``)."""
        count = recasts[0]
        for p, shape, dtype in self.param_types:
            data = p._data
            if np.dtype(data.dtype) != dtype or tuple(data.shape) != shape:
                return False
        self.recasts = count
        return True

    def _compile(self):
        """The executor of the optimised program: numba's compiled function where
        ``config.compiled_executor`` is on, numba imports and the program lowers
        (``tapegrad._jit.native``), else the Python executor's function."""
        program, donated = self.program, self.donated

        def python():  # reads no ``self``: the compiled function keeps it, and the entry keeps that
            return compile_program(optimize(program), donate=donated)
        # the switch as it is now decides for this program for good, its loops included
        self.native_loops = config.compiled_executor and native.available()
        if not config.compiled_executor:
            self.reason = ("the compiled executor is off (tg.config.compiled_executor, "
                           "TAPEGRAD_COMPILED_EXECUTOR=0)")
        elif not self.native_loops:
            self.reason = "numba is not installed (pip install 'tapegrad[jit]')"
        else:
            run = native.compile_native(passes.optimize(program, fuse=False), python)
            if run:
                return run
            self.reason = run.reason
        return python()

    @property
    def executor(self) -> str:
        """Which executor runs this program: ``"numba"`` (compiled whole), ``"python+numba"`` (the
        Python executor, with loops compiled alone) or ``"python"``."""
        if self._run is None:
            self._run = self._compile()
        executor = getattr(self._run, "executor", "python")
        if executor == "python" and self.native_loops:
            if self._loops_lower is None:  # writing the loops' source takes milliseconds: once
                self._loops_lower = any(native.loop_lowers(eqn) for eqn in self.program.eqns)
            if self._loops_lower:
                return "python+numba"
        return executor

    def explain(self) -> str:
        """:attr:`executor` and, unless it is ``"numba"``, why the program is not compiled whole."""
        executor = self.executor
        if executor == "numba":
            return "numba: the program is compiled whole"
        reason = getattr(self._run, "reason", "") or self.reason
        loops = "; its loops compile alone" if executor == "python+numba" else ""
        return f"{executor}: not compiled whole because {reason}{loops}"

    def run(self, leaves):
        inputs = leaves
        if self.captured or self.params_read:
            inputs = leaves + self.captured + [p.value for p in self.params_read]
        if _any_tracer(inputs):  # under an outer transform: primitives, via bind
            outs = evaluate(self.program, inputs)
        else:
            if self._run is None:
                self._run = self._compile()
            # whether its loops may compile, on the Python executor: set only where it changes, so that
            # a call where numba plays no part pays nothing for it
            token = native.in_jit.set(self.native_loops) if native.in_jit.get() != self.native_loops else None
            try:
                outs = self._run(*inputs)
            except TypeError:
                # CuPy refuses a host operand (a closed-over NumPy constant) with a message that names no
                # fix: replayed through bind, the equation that mixes them raises tapegrad's own
                evaluate(self.program, inputs)
                raise
            finally:
                if token is not None:
                    native.in_jit.reset(token)
        if _config.checking and not _any_tracer(inputs):  # before any Parameter changes
            _check_outputs(outs, self.n_out)
        if self.params_written:  # every new value is checked before any Parameter changes
            write_back(zip(self.params_written, [_c_order(value) for value in outs[self.n_out:]]))
        # an output may be an input, a constant or a view of one: the caller gets its own buffer
        # (a donated input is the caller's to give, so it may come back as it is)
        kept = [x for i, x in enumerate(inputs) if i not in self.donated] if self.donated else inputs
        return _tree.tree_unflatten(self.out_tree, owned(outs[:self.n_out], caller=kept + self.program.consts))


class _BadOutput(FloatingPointError):
    """A compiled program's output holds a NaN or an infinity (``tg.config.debug_nans``/``debug_infs``):
    ``jit`` then runs the function again op by op to find the primitive that made it."""


def _check_outputs(outs, n_out: int) -> None:
    for k, out in enumerate(outs):
        bad = first_bad(out)
        if bad is not None:
            what = f"output {k}" if k < n_out else f"the new value of Parameter {k - n_out} it writes"
            raise _BadOutput(f"{what} holds {made(bad)} (shape {np.shape(out)}, {np.result_type(out)})")


DEFAULT_CACHE_SIZE = 128


class _Programs(collections.OrderedDict):
    """The compiled programs of one function (or of one instance, for a method), by cache key: at
    most ``size`` (None: no bound), the least recently used evicted first, as
    ``functools.lru_cache(maxsize)``. A hit moves its key to the end (``_Jitted._call``, inline: it
    is on every call's path)."""

    def __init__(self, size: int | None):
        super().__init__()
        self.size = size
        self.lock = threading.Lock()

    def put(self, key, entry) -> None:
        with self.lock:
            self[key] = entry
            while self.size is not None and len(self) > self.size:
                self.popitem(last=False)


def _check_cache_size(cache_size):
    if cache_size is None:
        return None
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
        raise ValueError(f"jit: cache_size must be an int >= 0 (0: keep no program) or None (no bound), "
                         f"got {cache_size!r}")
    return cache_size


class _Jitted(Generic[P, R]):
    """The callable ``jit`` returns."""

    def __init__(self, fn: Callable[P, R], static_argnums: int | Sequence[int], static_argnames: str | Sequence[str],
                 donate_argnums: int | Sequence[int], cache_size: int | None = DEFAULT_CACHE_SIZE) -> None:
        # first, and without copying fn.__dict__: a wrapped function (grad of a jitted one) carries
        # the inner jit's attributes, which must not replace this one's
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.static_nums, self.static_names = _static_positions(fn, static_argnums, static_argnames)
        self._static_order = sorted(self.static_nums)
        self.donate_argnums = frozenset((donate_argnums,) if isinstance(donate_argnums, int) else donate_argnums)
        self.cache_size = _check_cache_size(cache_size)
        self._cache = _Programs(self.cache_size)
        self._instances: dict = {}  # id(instance) -> (weak reference, _Programs): a method's per-instance caches
        self._staged = False  # whether fn has been staged once: a later staging is a cache miss

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> _Jitted[P, R]: ...
    @overload
    def __get__(self: _Jitted[Concatenate[S, Q], R], obj: S, objtype: Any = None) -> Callable[Q, R]: ...
    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # on a method: the instance is a static argument
        if obj is None:
            return self
        return functools.partial(self._call, (obj,))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._call((), *args, **kwargs)

    def _call(self, bound, *args, **kwargs):
        cache = self._programs_of(bound) if bound else self._cache
        key, leaves, rebuild = self._split(bound, args, kwargs, shared=cache is self._cache)
        entry = cache.get(key)
        if entry is None or not entry.valid():
            if config.explain_cache_misses and self._staged:
                self._explain_miss(key, cache, entry)
            entry = self._stage(leaves, rebuild)
            entry.donated = self._donated_leaves(args)
            if not entry.captured:  # values of outer transforms differ at every call: never reused
                cache.put(key, entry)  # (replacing a stale program of the same key)
            if entry.flags is not None:  # read again, so that a jit staging this call depends on them too
                entry.flags.hold()
        elif cache.size is not None:
            try:
                cache.move_to_end(key)  # now the most recently used
            except KeyError:  # another thread evicted it in between: it still runs this time
                pass
        try:
            return entry.run(leaves)
        except _BadOutput as bad:  # debug_nans / debug_infs
            self._run_op_by_op(bound, args, kwargs, bad, entry.params_written)

    def _run_op_by_op(self, bound, args, kwargs, bad: _BadOutput, params_written):
        """A compiled call gave a NaN or an infinity: run ``fn`` again without jit, where each primitive
        is checked and the first bad one raises (JAX's de-optimised rerun). Raises in any case, leaving
        the Parameters the function writes as they were before the call."""
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        before = [p.value for p in params_written]
        try:
            self.fn(*bound, *args, **kwargs)
        except FloatingPointError as found:  # the primitive: its message, with jit's finding as the cause
            raise found from bad
        finally:
            write_back(zip(params_written, before))
        raise FloatingPointError(
            f"the jit-compiled function {name}: {bad}, but running it again op by op (without jit) made "
            "none: the compiled program computes it differently (a fused or reordered expression). Look at "
            "jit(f).explain(...) and tg.make_program(f)(...) for the program, or call f without jit") from bad

    def _explain_miss(self, key, cache, stale) -> None:
        """Log why this call stages again (``tg.config.explain_cache_misses``)."""
        if stale is not None:
            misses.explain_stale(self.fn, stale.flags, stale.param_types)
        else:
            misses.explain_new_key(self.fn, key, cache, self._cache_size())

    def _programs_of(self, bound) -> _Programs:
        """The cache for a call of a method: its instance has its own, which dies with the instance
        (the cache never keeps it alive); an instance without weak references uses the function's
        (whose key then holds the instance: ``_Identity``)."""
        obj = bound[0]
        slot = self._instances.get(id(obj))
        if slot is not None and slot[0]() is obj:
            return slot[1]
        instances, key = self._instances, id(obj)

        def forget(ref):
            if instances.get(key, (None,))[0] is ref:
                instances.pop(key, None)
        try:
            ref = weakref.ref(obj, forget)
        except TypeError:  # no __weakref__ slot
            return self._cache
        programs = _Programs(self.cache_size)
        instances[id(obj)] = (ref, programs)
        return programs

    def _split(self, bound, args, kwargs, shared=True):
        """The cache key, the traced leaves, and how to rebuild the full arguments from them. In the
        function's ``shared`` cache, the key holds the bound instance."""
        static = []
        dynamic_args = list(args)
        for i in self._static_order:
            if i >= len(args):  # passed by name (static_argnames has it too), or left to its default
                continue
            _check_hashable(args[i], f"at position {i}")
            static.append((i, args[i]))
            dynamic_args[i] = None
        dynamic_kwargs = dict(kwargs)
        for name in sorted(self.static_names & kwargs.keys()) if kwargs else ():
            _check_hashable(kwargs[name], f"{name!r}")
            static.append((name, kwargs[name]))
            dynamic_kwargs[name] = None
        leaves, treedef = _tree.tree_flatten((dynamic_args, dynamic_kwargs))
        leaves = _leaves(leaves)
        owner = tuple(_Identity(b) for b in bound) if shared else ()
        key = (owner, treedef, tuple([_signature(x) for x in leaves]), tuple(static))

        def rebuild(traced):
            call_args, call_kwargs = _tree.tree_unflatten(treedef, list(traced))
            for where, value in static:
                if isinstance(where, int):
                    call_args[where] = value
                else:
                    call_kwargs[where] = value
            return bound + tuple(call_args), call_kwargs
        return key, leaves, rebuild

    def _donated_leaves(self, args) -> tuple:
        """The indices, among the traced leaves, of the leaves of the donated positional arguments
        (the leaves of each argument are contiguous, in argument order)."""
        donated: list[int] = []
        start = 0
        for i, arg in enumerate(args):
            n = 0 if i in self.static_nums else len(_tree.tree_leaves(arg))
            if i in self.donate_argnums:
                donated.extend(range(start, start + n))
            start += n
        return tuple(donated)

    def _stage(self, leaves, rebuild):
        self._staged = True
        avals, backends = zip(*[abstractify(x) for x in leaves]) if leaves else ((), ())
        out_tree = []

        def flat_fun(*traced):
            call_args, call_kwargs = rebuild(traced)
            out_leaves, treedef = _tree.tree_flatten(self.fn(*call_args, **call_kwargs))
            out_tree.append(treedef)
            return out_leaves
        scalars = [i for i, x in enumerate(leaves) if isinstance(x, np.generic)]
        with scoped(for_jit, True):
            program, builder = stage(flat_fun, avals, backends, scalars)
        return _Entry(program, builder, out_tree[0], out_tree[0].num_leaves)

    def _cache_size(self) -> int:
        """How many compiled programs this function holds (one per argument signature and, for a
        method, per live instance)."""
        return len(self._cache) + sum(len(p) for _, p in list(self._instances.values()))

    def executor(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Which executor runs the program for these arguments (staged, cached and compiled as a call
        would, without running it): ``"numba"`` (one function compiled by numba, with
        ``tg.config.compiled_executor`` on), ``"python+numba"`` (the generated Python function, its
        loops compiled by numba) or ``"python"`` (the generated Python function). docs/jit.md, "The
        compiled executor (numba)", says which programs compile."""
        return self._kept_entry(args, kwargs).executor

    def explain(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """One line: which executor runs the program for these arguments (as :meth:`executor`) and,
        when it is not ``"numba"``, why: the compiled executor off or numba missing, the value, dtype
        or primitive that does not lower, the compile budget, or numba refusing the source. For
        example ``"python+numba: not compiled whole because its source is 521 statements and 8 array
        operations, past the compile budget (...); its loops compile alone"``. docs/jit.md, "When is it
        fast", lists the reasons and what to do about each."""
        return self._kept_entry(args, kwargs).explain()

    def _kept_entry(self, args, kwargs) -> _Entry:
        """The entry for these arguments, cached as a call would keep it."""
        key, entry = self._entry(args, kwargs)
        if not entry.captured:
            self._cache.put(key, entry)
        return entry

    def program(self, *args: P.args, **kwargs: P.kwargs) -> Program:
        """The staged :class:`~tapegrad._jit.program.Program` for these arguments."""
        return self._entry(args, kwargs)[1].program

    def _entry(self, args, kwargs) -> tuple:
        """``(key, entry)``: the cached entry for these arguments, or a new one staged (not cached)
        when there is none or it is stale."""
        key, leaves, rebuild = self._split((), args, kwargs)
        entry = self._cache.get(key)
        if entry is None or not entry.valid():
            entry = self._stage(leaves, rebuild)
            entry.donated = self._donated_leaves(args)
        return key, entry


# jit(fn) keeps fn's type (its parameters and result); jit(static_argnums=...) is a decorator that does
@overload
def jit(fn: Callable[P, R], *, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
        donate_argnums: int | Sequence[int] = (), cache_size: int | None = DEFAULT_CACHE_SIZE) -> _Jitted[P, R]: ...
@overload
def jit(fn: None = None, *, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
        donate_argnums: int | Sequence[int] = (),
        cache_size: int | None = DEFAULT_CACHE_SIZE) -> Callable[[Callable[P, R]], _Jitted[P, R]]: ...
def jit(fn: Callable[P, R] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        cache_size: int | None = DEFAULT_CACHE_SIZE) -> _Jitted[P, R] | Callable[[Callable[P, R]], _Jitted[P, R]]:
    """Compile ``fn``: stage it once per argument signature into a program of primitives, optimise it,
    and run it with no tracing overhead (JAX's ``jit``).

    Args:
        fn: a function of pytrees of arrays (and Python scalars, traced with weak types) returning a
            pytree of arrays. Usable as ``@jit``, ``@jit(static_argnums=...)`` and on methods (the
            instance is static).
        static_argnums / static_argnames: arguments that are Python values, not traced: they must be
            hashable and are part of the cache key (a new value stages a new program).
        donate_argnums: arguments whose buffers the program may reuse.
        cache_size: how many compiled programs to keep (128 by default; None: no bound; 0: none),
            the least recently used dropped first, as ``functools.lru_cache(maxsize=...)``. A method
            keeps this many per instance, in a cache that goes with the instance.

    Returns:
        A function with ``fn``'s signature and results. ``f._cache_size()`` says how many programs it
        holds: one per (pytree structure, shapes, dtypes, backend, static arguments). A program
        staged while a module's ``training`` flag was read is staged again (and replaced) after
        that flag changes (``net.eval()``); so is a program that reads or writes a Parameter whose
        dtype ``Module.astype`` changed; other programs stay. With ``tg.config.explain_cache_misses``
        each staging after the first logs, on the logger ``"tapegrad.jit"``, what changed.

    Parameters read inside ``fn`` are implicit inputs, read fresh at every call (``p.assign`` between
    calls is seen); ``p.assign(new)`` inside ``fn`` (``optimizer.step``) makes the new value an output
    that the call writes back. Under an outer transform (``grad(jit(f))``, ``vmap(jit(f))``) the
    program is evaluated through ``bind``, so the outer transform sees its primitives; ``fn`` is not
    traced again. Arrays that ``fn`` closes over (not arguments, not Parameters) are constants of the
    program, fixed when it is staged, as in JAX: pass an array that changes as an argument.

    Raises:
        ValueError: an unhashable static argument, or a ``cache_size`` that is neither None nor an
            int >= 0.
        TypeError: an argument leaf that is neither an array nor a Python scalar; under an outer
            transform, a Parameter written with a traced value (no Parameter of the call changes).
        ConcretizationError: Python control flow on a traced value (the message suggests
            ``static_argnums`` or ``tnp.where``).
    """
    if fn is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, cache_size=cache_size)
    return _Jitted(fn, static_argnums, static_argnames, donate_argnums, cache_size)


def make_program(fn: Callable[P, Any], static_argnums: int | Sequence[int] = ()) -> Callable[P, Program]:
    """The program ``jit`` stages for given arguments, printable: JAX's ``make_jaxpr``.

    Args:
        fn: a function of pytrees of arrays and Python scalars, as for :func:`jit`.
        static_argnums: an int or tuple of ints: positional arguments that are Python values, not
            traced; they appear in the program as literals (``power a 3``).

    Returns:
        A function of ``fn``'s arguments returning a ``Program`` that lists its inputs (one variable per array
        leaf, with shape and dtype), its equations (one primitive each) and its outputs.
        ``str(program)`` prints them (``{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b) }``);
        ``program.typecheck()`` checks every equation against its primitive's abstract evaluation.
        Nothing runs: only shapes and dtypes of the arguments are used.

    Raises:
        ValueError: a static argument that is not hashable.
        TypeError: an argument leaf that is neither an array nor a Python scalar.
        ConcretizationError: Python control flow or ``float()`` on a traced value inside ``fn`` (the
            message suggests ``static_argnums`` or ``tnp.where``).
    """
    jitted = _Jitted(fn, static_argnums, (), ())

    @functools.wraps(fn)
    def make(*args, **kwargs):
        return jitted.program(*args, **kwargs)
    return make

