"""The dispatch spine: primitives, the trace stack, tracers and ``bind``.

The layering follows JAX's Autodidax: every operation is a :class:`Primitive`; ``bind`` finds the
highest-level tracer among the operands and hands the primitive to that tracer's trace, which processes
it (usually by binding it again one level down). With no tracer among the operands the primitive runs
its ``impl`` on concrete arrays (the :class:`EvalTrace` at level 0).

Each transform pushes a :class:`MainTrace` with a fresh level onto a stack held in a ``ContextVar``, so
nested transforms in one thread, and concurrent ones in different threads or tasks, never see each
other's state. Tracers keep a reference to their trace; the checks compare with ``is``, which is what
keeps nested transforms from confusing their perturbations.
"""
from __future__ import annotations

import contextlib
import contextvars
import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy

from tapegrad import _config
from tapegrad._backend import namespace_of
from tapegrad._subscripts import numpy_subscript_error
from tapegrad._value_checks import check as check_values
from tapegrad.errors import ConcretizationError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tapegrad._array_type import Array

_checking = False  # tg.config.debug_nans / debug_infs on: check results (a global, tested per primitive)
_config.mirror_checking(globals())


class ShapedArray(NamedTuple):
    """The abstract value of an array: what staging (jit) knows of it (JAX's ``ShapedArray``), a
    NamedTuple.

    Args:
        shape: a tuple of ints.
        dtype: a ``numpy.dtype``, or the Python type ``bool``/``int``/``float``/``complex`` for a
            weakly typed Python scalar.
    """

    shape: tuple
    dtype: Any


class Primitive:
    """A named operation and all of its rules.

    Array operands are positional; static parameters are keyword-only and hashable. The rules:

    - ``impl(*arrays, **params)``: runs on the backend (``xp`` of the operands);
    - ``abstract_eval(*avals, **params) -> ShapedArray``: shape and dtype, for staging;
    - ``vjp_rules[i](ct, ans, *primals, **params)``: the cotangent of operand ``i`` (None: zero);
    - ``jvp_rule(tangents, ans, *primals, **params)``: the output tangent (None: zero), given one
      tangent per operand (None: zero);
    - ``batch_rule(vals, dims, **params) -> (out, out_dim)``: the rule under ``vmap``;
    - ``out_impl(*arrays, out)``: optional, the NumPy computation writing into ``out`` (a NumPy ufunc
      needs none: it is its own); ``jit``'s buffer reuse gives it the buffer of a dead intermediate;
    - ``fusion``: optional, how ``jit``'s elementwise fusion spells it (``tapegrad.extend.def_fusion``);
    - ``vjp_fwd(*primals, **params) -> (ans, residuals)``: optional, for a primitive with several results:
      how reverse mode applies it when it records it, keeping what its vjp rule needs (``scan`` keeps each
      step's intermediates); the rule then gets them as the keyword ``residuals``.

    ``nondiff`` marks primitives whose derivative is zero everywhere (comparisons, ``floor``,
    ``stop_gradient``): reverse mode then tapes nothing for them.

    ``dependency``: optional, how its outputs depend on its inputs, for sparsity detection
    (``tg.jacobian_sparsity``): ``rule(node) -> list``, one Boolean dependency matrix per result
    (``tapegrad.extend.def_dependency``, ``tapegrad._dependency``); None, the default, means every
    output depends on every input (the dense pattern, which detection reports).

    ``effectful`` marks primitives that do something besides computing their results (a host
    callback such as ``tapegrad.debug.print``): ``jit``'s passes keep such an equation even when
    nothing reads its results, never merge two of them, never run one at compile time, and its
    executors run them in program order.

    With ``multiple_results`` (JAX's name) the primitive has a list of results: ``impl`` returns a
    tuple or list of arrays, ``abstract_eval`` a list of ``ShapedArray``, ``bind`` a list, and the rules
    see lists where a single-result primitive's see one array:

    - ``vjp_rules[i](cts, ans, *primals, **params)``: ``cts`` has one cotangent per result, zeros
      where none reached a float or complex result, None for an integer result (an argmax); ``ans``
      is the list of results;
    - ``jvp_rule(tangents, ans, *primals, **params) -> list``: one tangent per result (None: zero);
    - ``batch_rule(vals, dims, **params) -> (outs, out_dims)``: one batch axis per result.

    Integer results never carry a tangent or a cotangent. ``jit`` never gives such a primitive an
    ``out=`` buffer (``out_impl`` is for single results).

    Args:
        name: the name programs, messages and the registry use (``"mylib.logcosh"``).
        multiple_results: whether it has a list of results.

    :func:`tapegrad.extend.primitive` makes one with its impl and abstract eval and registers it;
    ``Primitive(...)`` alone does neither (:func:`tapegrad.extend.register` registers it).
    ``prim.bind(*args, **params)`` is ``bind(prim, *args, **params)``.
    """

    __slots__ = ("name", "impl", "abstract_eval", "vjp_rules", "jvp_rule", "batch_rule", "nondiff", "out_impl",
                 "fusion", "lowering", "multiple_results", "vjp_fwd", "effectful",
                 "dependency")

    def __init__(self, name: str, multiple_results: bool = False) -> None:
        self.name = name
        self.multiple_results = multiple_results
        # set by def_impl before the primitive is bound (tapegrad.extend.primitive gives every one an impl)
        self.impl: Callable = cast(Callable, None)
        self.abstract_eval: Callable | None = None
        # a tuple of rules, or an object indexable like one (_rules._ArgnumRules, _tape._JointRules)
        self.vjp_rules: Any = None
        self.jvp_rule: Callable | None = None
        self.batch_rule: Callable | None = None
        self.out_impl: Callable | None = None
        self.fusion: Any = None  # jit's fusion template (``tapegrad.extend.def_fusion``)
        self.lowering: Any = None  # jit's compiled-executor lowering (``tapegrad.extend.def_lowering``)
        self.nondiff = False
        self.effectful = False
        self.vjp_fwd: Callable | None = None  # reverse mode's forward, keeping residuals (``defvjp_fwd``)
        self.dependency: Callable | None = None  # sparsity detection's rule (``def_dependency``); None: dense

    def bind(self, *args: Any, **params: Any) -> Any:
        return bind(self, *args, **params)

    def def_impl(self, impl: Callable[..., Any]) -> Any:
        """Set ``impl``; a multiple-results primitive's is wrapped to return a list (``bind``'s result,
        which the transforms index and extend) where it returns a tuple, as NumPy's functions do."""
        self.impl = _listing(impl) if self.multiple_results else impl
        return impl

    def def_abstract_eval(self, rule: Callable[..., Any]) -> Any:
        self.abstract_eval = rule
        return rule

    def __repr__(self):
        return f"Primitive({self.name!r})"


def _listing(impl):
    def listed(*args, **params):
        outs = impl(*args, **params)
        return outs if type(outs) is list else list(outs)
    listed.__wrapped__ = impl  # type: ignore[attr-defined]  # a function takes attributes; Callable has none
    return listed


class MainTrace:
    """One active transform: its level on the stack, its Trace class, and data it keeps while open."""

    __slots__ = ("level", "trace_type", "global_data", "trace", "active")

    def __init__(self, level: int, trace_type: type, global_data: Any = None):
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data
        self.active = True
        self.trace = trace_type(self)

    def close(self) -> None:
        """The transform has ended: its tracers are now escaped values (``bind`` refuses them), and
        the main lets go of its trace and data (tracers still reach the main, not the reverse)."""
        self.active = False
        self.trace = self.global_data = None

    def __repr__(self):
        return f"MainTrace(level={self.level}, {self.trace_type.__name__})"


_trace_stack: contextvars.ContextVar[tuple] = contextvars.ContextVar("tapegrad_trace_stack", default=())
# whether the staging under way is jit's (its program runs on jit's executor), not an eager loop body's or
# make_program's: a vmap staged by jit may become a loop over the batch (_control_flow/_batch_loop.py)
for_jit: contextvars.ContextVar[bool] = contextvars.ContextVar("tapegrad_staging_for_jit", default=False)


class _Scope:
    """What a scope set a variable to, and what its end sets again."""

    __slots__ = ("var", "value", "previous", "on_end", "finalised", "ended")

    def __init__(self, var: contextvars.ContextVar, value, on_end, previous):
        self.var, self.value, self.previous, self.on_end = var, value, previous, on_end
        self.finalised = self.ended = False

    def end(self) -> None:
        """Set the previous value again (idempotent: the two ``finally`` blocks of ``_scope`` both
        call it).

        A scope finalised without its with block having ended (an interrupt in CPython's window
        between ``__enter__`` and the block left its generator suspended; it goes only with the
        exception that holds it) may go after the scopes around it have ended, or while a later
        scope runs. Setting its previous value then would bring an ended scope's value back over
        the current one: it does so only while the variable still holds its own value, and hands
        its previous value to any open scope that would otherwise put its value back at its end.
        """
        if self.ended:  # the second finally, after a first end that no interrupt cut short
            return
        if not self.finalised or self.var.get() is self.value:
            self.var.set(self.previous)
        if self.finalised:
            for scope in tuple(_open_scopes.values()):
                if scope.var is self.var and scope.previous is self.value:
                    scope.previous = self.previous
        _open_scopes.pop(id(self), None)
        if self.on_end is not None:
            self.on_end()
        self.ended = True


# the scopes, of all threads, whose end has not run
_open_scopes: dict[int, _Scope] = {}


def _scope(var: contextvars.ContextVar, value, on_end, result, previous):
    """The body of a scope, as a plain generator that ``scoped`` and ``new_main`` delegate to (``yield
    from``: one generator frame per transform, not a context manager inside another). Yields
    ``result``; its end sets ``previous``.

    Safe against an exception raised before any one line (a ``KeyboardInterrupt``): the value is
    set inside the ``try``, and two nested ``finally`` blocks end the scope, each as its first
    line, so the outer one does what an interrupt made the inner one skip (setting a value, unlike
    ``reset(token)``, may be repeated). ``_Scope.end`` says what a scope finalised later puts back.
    """
    scope = _Scope(var, value, on_end, previous)
    try:
        try:
            _open_scopes[id(scope)] = scope
            var.set(value)
            yield result
        except GeneratorExit:  # finalised: the with block never ran
            scope.finalised = True
            raise
        finally:
            scope.end()
    finally:
        scope.end()


@contextlib.contextmanager
def scoped(var: contextvars.ContextVar, value, on_end: Callable[[], None] | None = None):
    """``var`` is ``value`` within the block; then the previous value again, and ``on_end()``.
    Interrupt-safe (see ``_scope``)."""
    yield from _scope(var, value, on_end, value, var.get())


@contextlib.contextmanager
def new_main(trace_type: type, global_data: Any = None):
    """Push a transform with a fresh level; pop it on exit, also when ``fn`` raises.

    Interrupt-safe as ``scoped`` is. The exit also closes the main, which breaks the cycle between
    it and its trace (and the builder that staging keeps in ``global_data``), so a program's
    constants go with their last reference, not at the next garbage collection.
    """
    stack = _trace_stack.get()
    if stack and not stack[-1].active:  # left by an interrupt in CPython's own with-statement window
        stack = tuple(m for m in stack if m.active)
    main = MainTrace(len(stack) + 1, trace_type, global_data)
    # its end sets the filtered stack: what an interrupt left behind goes for good
    yield from _scope(_trace_stack, stack + (main,), main.close, main, stack)


def trace_stack() -> tuple:
    """The open transforms, innermost last (for tests and error messages)."""
    return tuple(m for m in _trace_stack.get() if m.active)


class Trace:
    """How one transform processes primitives; one instance per MainTrace."""

    __slots__ = ("main", "level")

    def __init__(self, main: MainTrace | None):
        # None only for the EvalTrace at level 0, whose main no code reads: every other trace has one
        self.main: MainTrace = cast(MainTrace, main)
        self.level = 0 if main is None else main.level

    def process_primitive(self, prim: Primitive, args: tuple, params: dict):
        raise NotImplementedError

    def process_joint(self, call, args: tuple):
        """Apply a function with user-given or recomputing rules (``custom_vjp``, ``custom_jvp``,
        ``checkpoint``) to the flat ``args``; ``call`` is the interface of ``bind_joint``."""
        raise NotImplementedError(f"{type(self).__name__} cannot process {call.name}")


class EvalTrace(Trace):
    """Level 0: run the primitive on concrete arrays."""

    __slots__ = ()

    def process_primitive(self, prim, args, params):
        try:
            ans = prim.impl(*args, **params)
        except TypeError:
            check_one_backend(args)
            raise
        if _checking:  # tg.config.debug_nans / debug_infs
            check_values(prim, args, ans)
        return ans


def check_one_backend(args) -> None:
    """Raise tapegrad's ``TypeError`` (which names the fix) when ``args`` mix host and device arrays.
    Called where a primitive's impl raised a ``TypeError``: CuPy refuses a host operand first, with
    its own message ("Unsupported type <class 'numpy.ndarray'>"), which names neither the operation
    nor what to do. Costs nothing until an impl fails."""
    namespace_of(*args)


eval_trace: Trace = EvalTrace(None)


class Tracer:
    """A value inside a transform. Subclasses hold what their trace needs (a primal, a tape node...).

    Array behaviour (operators, methods, NumPy's protocols) is installed on this class by
    ``tapegrad.numpy`` when it is imported (``tapegrad.numpy._operators.install``): the spine knows
    nothing of the functions an operator calls.
    """

    __slots__ = ("_trace",)
    _trace: Trace

    if TYPE_CHECKING:  # each subclass has them, as a property or from its variable
        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def dtype(self) -> Any: ...

        def __array__(self, dtype: Any = None, copy: Any = None) -> Any: ...  # tapegrad.numpy._operators

        # what tapegrad.numpy._operators installs, declared as tapegrad._array_type.Array has it, so that a
        # checker sees a tracer as a tg.Array
        @property
        def T(self) -> Array: ...
        @property
        def real(self) -> Array: ...
        @property
        def imag(self) -> Array: ...
        def __add__(self, other: Any, /) -> Array: ...
        def __radd__(self, other: Any, /) -> Array: ...
        def __sub__(self, other: Any, /) -> Array: ...
        def __rsub__(self, other: Any, /) -> Array: ...
        def __mul__(self, other: Any, /) -> Array: ...
        def __rmul__(self, other: Any, /) -> Array: ...
        def __truediv__(self, other: Any, /) -> Array: ...
        def __rtruediv__(self, other: Any, /) -> Array: ...
        def __floordiv__(self, other: Any, /) -> Array: ...
        def __rfloordiv__(self, other: Any, /) -> Array: ...
        def __mod__(self, other: Any, /) -> Array: ...
        def __rmod__(self, other: Any, /) -> Array: ...
        def __pow__(self, other: Any, /) -> Array: ...
        def __rpow__(self, other: Any, /) -> Array: ...
        def __matmul__(self, other: Any, /) -> Array: ...
        def __rmatmul__(self, other: Any, /) -> Array: ...
        def __neg__(self) -> Array: ...
        def __pos__(self) -> Array: ...
        def __abs__(self) -> Array: ...
        def __lt__(self, other: Any, /) -> Array: ...
        def __le__(self, other: Any, /) -> Array: ...
        def __gt__(self, other: Any, /) -> Array: ...
        def __ge__(self, other: Any, /) -> Array: ...
        def __eq__(self, other: Any, /) -> Array: ...  # type: ignore[override]  # elementwise
        def __ne__(self, other: Any, /) -> Array: ...  # type: ignore[override]
        def __and__(self, other: Any, /) -> Array: ...
        def __or__(self, other: Any, /) -> Array: ...
        def __xor__(self, other: Any, /) -> Array: ...
        def __invert__(self) -> Array: ...
        def __getitem__(self, key: Any, /) -> Any: ...
        def __iter__(self) -> Iterator[Any]: ...
        def astype(self, dtype: Any, /) -> Array: ...
        def reshape(self, shape: Any, /, *more: Any) -> Array: ...
        def transpose(self, *axes: Any) -> Array: ...
        def squeeze(self, axis: Any = ...) -> Array: ...
        def ravel(self) -> Array: ...
        def flatten(self) -> Array: ...
        def copy(self) -> Array: ...
        def conj(self) -> Array: ...
        def dot(self, other: Any, /) -> Array: ...
        def sum(self, axis: Any = ..., dtype: Any = ..., *, keepdims: bool = ...) -> Array: ...
        def mean(self, axis: Any = ..., dtype: Any = ..., *, keepdims: bool = ...) -> Array: ...
        def prod(self, axis: Any = ..., dtype: Any = ..., *, keepdims: bool = ...) -> Array: ...
        def max(self, axis: Any = ..., *, keepdims: bool = ...) -> Array: ...
        def min(self, axis: Any = ..., *, keepdims: bool = ...) -> Array: ...
        def all(self, axis: Any = ..., *, keepdims: bool = ...) -> Any: ...
        def any(self, axis: Any = ..., *, keepdims: bool = ...) -> Any: ...
        def cumsum(self, axis: Any = ..., dtype: Any = ...) -> Array: ...
        def clip(self, min: Any, max: Any = ...) -> Array: ...

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def array_namespace(self):
        """The array module (numpy or cupy) of the arrays this tracer stands for."""
        raise NotImplementedError

    def concrete_value(self):
        """The concrete array behind this tracer, where the transform has one (eager reverse mode):
        what ``bool()`` and Python control flow read."""
        raise ConcretizationError(
            f"{self!r} is abstract here, so Python cannot branch on it or convert it with "
            "float()/int()/bool(): branch with tg.cond or tg.while_loop, select with tnp.where, or (a Python "
            "scalar argument of jit) mark the argument static (static_argnums)")

    def carries_derivative(self) -> bool:
        """Whether a derivative transform differentiates this value, so that converting it to a
        Python or NumPy scalar would silently drop the derivative."""
        return False

    def to_scalar(self, conversion: str):
        """The concrete value for ``conversion`` (``"float()"``, ``".item()"``...).

        Raises:
            ConcretizationError: the value carries a derivative (the conversion would lose it), or it
                is abstract (jit, vmap).
        """
        try:
            if self.carries_derivative():
                raise ConcretizationError(lost_derivative_message(conversion, self))
            return self.concrete_value()
        except ConcretizationError:
            _raise_for_numpy_subscript(self, sys._getframe(2))  # to_scalar <- float() <- the user's y[0] = x
            raise

    # bool() stays eager (Python control flow on values, as autograd and PyTorch allow); the
    # conversions below would turn a differentiated value into a constant without a word
    def __bool__(self):
        try:
            return bool(self.concrete_value())
        except ConcretizationError:
            _raise_for_numpy_subscript(self, sys._getframe(1))  # a bool array's y[0] = x under jit
            raise

    def __float__(self):
        return float(self.to_scalar("float()"))

    def __int__(self):
        return int(self.to_scalar("int()"))

    def __complex__(self):
        return complex(self.to_scalar("complex()"))

    def __index__(self):
        return operator.index(self.to_scalar("operator.index()"))

    def __round__(self, ndigits=None):
        return round(self.to_scalar("round()"), ndigits)

    def __format__(self, spec):
        if not spec:  # f"{x}" prints the tracer; a numeric spec ("{x:.3f}") needs the number
            return repr(self)
        return format(self.to_scalar(f"format spec {spec!r}"), spec)

    def item(self, *args):
        value = self.to_scalar(".item()")
        return value.item(*args) if hasattr(value, "item") else value

    def tolist(self):
        return self.to_scalar(".tolist()").tolist()

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]


def _raise_for_numpy_subscript(value, frame) -> None:
    """Raise the error naming the fix when the failed conversion of ``value`` was NumPy indexing one of
    its own arrays from ``frame`` (``y[0] = x``, ``table[i]``: ``tapegrad._subscripts``); else return."""
    error = numpy_subscript_error(value, frame)
    if error is not None:
        raise error from None


def lost_derivative_message(conversion: str, value) -> str:
    """Why ``conversion`` of a differentiated ``value`` is refused, and the two ways out."""
    return (f"{conversion} of a value that carries a derivative ({value!r}) would turn it into a "
            "constant and the derivative would be lost without a word. Compute with tapegrad.numpy "
            "(import tapegrad.numpy as tnp; tnp.exp(x) rather than math.exp(x), x rather than "
            "float(x)), or, if the value is meant as a constant (logging, a Python-side decision), "
            "convert tg.stop_gradient(x) instead")


def is_inexact(x) -> bool:
    """Whether ``x`` has a float or complex dtype: the values that carry derivatives."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and numpy.dtype(dtype).kind in "fc"


def holds_tracers_of(trace, values) -> bool:
    """Whether ``values`` hold tracers of ``trace`` itself. A joint call (``bind_joint``) whose results
    do used a value of the running transform that is not among its operands: a closure over a traced
    value, or a traced static argument."""
    return any(isinstance(v, Tracer) and v._trace is trace for v in values)


class PrimalTracer(Tracer):
    """A tracer that carries its primal value (reverse and forward mode): shape, dtype and backend are
    the primal's, and so is its concrete value where the primal is concrete (eager mode), so Python
    control flow and ``float()`` work on it."""

    __slots__ = ("primal",)
    primal: Any

    # a primal may be a tracer of the transform outside (nested grad): the loops reach the innermost
    # value in one frame, where a property per level would cost one call per level
    @property
    def shape(self):
        primal = self.primal
        while isinstance(primal, PrimalTracer):
            primal = primal.primal
        return primal.shape

    @property
    def dtype(self):
        primal = self.primal
        while isinstance(primal, PrimalTracer):
            primal = primal.primal
        return primal.dtype

    def array_namespace(self):
        primal = self.primal
        while isinstance(primal, PrimalTracer):
            primal = primal.primal
        return namespace_of(primal)

    def concrete_value(self):
        primal = self.primal
        return primal.concrete_value() if isinstance(primal, Tracer) else primal

    def carries_derivative(self) -> bool:
        return is_inexact(self.primal)


class Boxed:
    """A holder that operations see through (``Parameter``): ``bind`` replaces it with ``unbox()``.
    Like :class:`Tracer`, it gets its array behaviour from ``tapegrad.numpy``."""

    __slots__ = ()

    if TYPE_CHECKING:  # Parameter's
        @property
        def dtype(self) -> Any: ...

    def unbox(self) -> Any:
        raise NotImplementedError


_CONCRETE_TYPES = frozenset([numpy.ndarray, float, int, bool, complex, numpy.float16, numpy.float32,
                             numpy.float64, numpy.int32, numpy.int64, numpy.bool_, numpy.complex64,
                             numpy.complex128])


def bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``prim``: find the highest-level trace among the operands and let it process ``prim``
    (Autodidax's ``bind``); with no traced operand, ``prim.impl`` runs on the arrays.

    Args:
        prim: the primitive.
        *args: its array operands (arrays, tracers, Parameters, Python scalars; lists and tuples are
            converted to arrays).
        **params: its static parameters, keyword-only and hashable.

    Returns:
        Its result (an array, or a tracer inside a transform), or the list of its results for a
        primitive with ``multiple_results``.

    Raises:
        RuntimeError: an operand is a tracer of a transform that is no longer running (a value
            leaked out of ``grad``/``vjp``: the message names the primitive that met it).
    """
    top = eval_trace
    for arg in args:
        if type(arg) in _CONCRETE_TYPES:  # the common case, decided with one set lookup
            continue
        if isinstance(arg, Tracer):
            trace = arg._trace
            if trace.level > top.level:
                top = trace
            elif trace.level == top.level and trace is not top:
                _raise_escaped(prim, args)
        elif isinstance(arg, (Boxed, list, tuple)):
            return bind(prim, *[_lift_operand(a) for a in args], **params)
    if top is eval_trace:  # the EvalTrace, inlined: this is the hot path of every operation
        try:
            ans = prim.impl(*args, **params)
        except TypeError:
            check_one_backend(args)
            raise
        if _checking:  # tg.config.debug_nans / debug_infs
            check_values(prim, args, ans)
        return ans
    if not top.main.active:
        _raise_escaped(prim, args)
    return top.process_primitive(prim, args, params)


def bind_joint(call, *args):
    """Apply ``call`` (a function of flat arrays with rules of its own) under the top trace of ``args``.

    ``call`` provides ``name``; ``fun(*args) -> list of outputs``; for reverse mode
    ``forward(*primals) -> (outputs, residuals)`` and ``backward(residuals, out_cts) -> in_cts`` (one
    per argument, None for zero); for forward mode ``jvp(primals, tangents) -> (outputs, out_tangents)``
    (None for a zero tangent); and ``on_capture(args)``, what to do when the results show that the
    call used a traced value of the running transform that is not among ``args`` (a closure).
    With no tracer among ``args`` this is ``call.fun(*args)``.
    """
    args = tuple([_lift_operand(a) for a in args])
    top = eval_trace
    for arg in args:
        if isinstance(arg, Tracer):
            if arg._trace.level > top.level:
                top = arg._trace
            elif arg._trace.level == top.level and arg._trace is not top:
                _raise_escaped(call, args)
    if top is eval_trace:
        return call.fun(*args)
    if not top.main.active:
        _raise_escaped(call, args)
    return top.process_joint(call, tuple(args))


def _lift_operand(a):
    if isinstance(a, Boxed):
        return a.unbox()
    if isinstance(a, (list, tuple)):
        return sequence_to_array(a)
    return a


def sequence_to_array(seq):
    """A list or tuple operand as an array. One that holds traced values (or Parameters) is stacked
    with ``numpy.stack``, which NumPy's ``__array_function__`` protocol hands to the traced values'
    own ``stack`` (installed by ``tapegrad.numpy``), so the elements stay differentiable; nested
    sequences are stacked level by level."""
    if not _holds_traced(seq):
        return numpy.asarray(seq)
    return numpy.stack([sequence_to_array(e) if isinstance(e, (list, tuple)) else e for e in seq])


def _holds_traced(seq) -> bool:
    return any(isinstance(e, (Tracer, Boxed)) or (isinstance(e, (list, tuple)) and _holds_traced(e)) for e in seq)


def _raise_escaped(prim, operands):
    raise RuntimeError(
        f"'{prim.name}' got a tracer of a transform that is no longer running ({operands!r}). A value "
        "computed inside grad/vjp leaked out (stored in a global, a closure or a Parameter); return "
        "it from the function instead.")
