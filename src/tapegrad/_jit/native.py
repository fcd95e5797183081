"""The compiled executor: a program whose equations all have a lowering (``tapegrad.extend.def_lowering``,
``tapegrad._lowerings``) becomes the source of one Python function that numba compiles to machine code
(``njit(cache=True)``); loops (``scan``, ``fori_loop``, ``while_loop``, the reverse sweeps that
``grad`` stages) are native loops in it, and ``cond``/``switch`` native branches.

Which programs (:func:`compile_native` returns None otherwise, and jit keeps the Python executor):
every value on NumPy with dtype float64, float32, int64 or bool (weak Python scalars included), every
equation's primitive lowered, and no value outside a loop's stacked inputs and outputs larger than
:data:`MAX_ELEMENTS` elements: past that NumPy's own loops (and numexpr's fusion) already run at
compiled speed, and numba's code would gain nothing for its compile time; and the source within
:data:`BUDGET` (:data:`LOOP_BUDGET` with a loop; numba's compile time grows with it). A value of at most
:data:`UNROLL_LIMIT` elements (every 0-d value) is unrolled: one scalar local per element, so a
loop over a small state runs in registers with no allocation.

A program that does not compile as a whole still has its loops compiled alone where their bodies
lower (:func:`compile_loop`, called by ``scan``'s and ``while``'s impl under jit): it then says
``"python+numba"``.

Compile once: the source goes to a file named by its hash under the cache directory
(``TAPEGRAD_NUMBA_CACHE_DIR``, else ``~/.cache/tapegrad/numba``), imported from there, so that numba's
``cache=True`` keeps the machine code on disk for the next process; in a process each program compiles
once (its jit entry keeps the function, and equal source shares one module). numba compiles at the
first call: should it refuse a program (a typing error: a bug in a lowering), that program logs why at
DEBUG on ``tapegrad.jit`` and runs with the Python executor from then on, with the same numbers.

Numbers: ``error_model="numpy"`` (a division by zero gives inf/NaN, as NumPy, without its warning); no
fastmath. Elementwise results equal NumPy's up to the last bit of the transcendental functions; sums
of unrolled values add in index order, where NumPy sums pairwise past 8 elements.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.util
import logging
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tapegrad._jit.program import Eqn, Literal, Program, Var
from tapegrad._lowerings import (
    NotLowerable,
    Value,
    cast,
    concrete,
    dtype_text,
    is_literal,
    literal_text,
    scalar,
    unrolled,
)
from tapegrad._rules import aval_of

UNROLL_LIMIT = 16
MAX_ELEMENTS = 1024
# numba's compile time grows with the source: ~2 ms a scalar statement, ~80 ms an array operation (each
# is a loop of its own to type and optimise), measured on a program's first call on this project's
# machine. A program past BUDGET such statements (~2 s) keeps the Python executor, whose fusion serves
# long straight-line programs about as well (a 100-step chain of 16 floats: 45 us on the Python
# executor, 61 us compiled after two minutes of compiling).
BUDGET, ARRAY_WEIGHT = 800, 40
# A program with a loop gets more: the Python executor runs each step of a loop at ~1 us an equation, so
# compiling pays back at every call however long it takes, and the disk cache makes it once per machine.
# 4,000 statements take numba ~8 s on the loaded 2-core machine (an adaptive ODE solver's adjoint: ~1,200).
LOOP_BUDGET = 4000
log = logging.getLogger("tapegrad.jit")
in_jit: contextvars.ContextVar[bool] = contextvars.ContextVar("tapegrad_native_in_jit", default=False)


def available() -> bool:
    """Whether numba is installed (found, not imported: a process whose programs do not lower never
    pays numba's import)."""
    global _available
    if _available is None:
        _available = importlib.util.find_spec("numba") is not None
    return _available


_available: bool | None = None


class Context:
    """What a lowering sees (``tapegrad._lowerings``): the result's aval (``out``), and the means to
    write the generated function's lines."""

    def __init__(self):
        self.lines: list[str] = []
        self.indent = "    "
        self.count = 0
        self.unroll_limit = UNROLL_LIMIT
        self.consts: list = []  # the arrays the generated function takes after its inputs
        self.out = None
        self.out_vars: list = []  # the results of the equation being lowered
        # a loop body's results that a loop inside it writes straight into the outer loop's stack:
        # id(Var) -> the row of the outer stack (see ``stacks``)
        self.destinations: dict[int, str] = {}
        self.array_ops = 0
        self.has_loop = False  # a control-flow loop was written (LOOP_BUDGET), not an elementwise one
        self._scopes: list[dict] = [{}]  # per block: loads and arrays built there (not valid outside it)
        self._kept: list = []  # the element arrays keyed by id in a scope: kept alive, so no id is reused

    # ---- writing lines ----
    def fresh(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    def loop(self, header: str) -> None:
        """Write the header of a control-flow loop (``scan``, ``while``): its body runs at every step,
        which is what the larger :data:`LOOP_BUDGET` is for."""
        self.has_loop = True
        self.emit(header)

    @contextlib.contextmanager
    def block(self):
        self.indent += "    "
        self._scopes.append({})
        try:
            yield
        finally:
            self._scopes.pop()
            self.indent = self.indent[:-4]

    def let(self, expr: str, prefix: str = "t") -> str:
        """A name bound to ``expr`` (``expr`` itself when it is a name or a number already: a literal
        stays in the expressions that use it, where the lowerings see its value)."""
        if expr.isidentifier() or is_literal(expr):
            return expr
        name = self.fresh(prefix)
        self.emit(f"{name} = {expr}")
        return name

    def _cached(self, key, make):
        for scope in reversed(self._scopes):
            if key in scope:
                return scope[key]
        value = self._scopes[-1][key] = make()
        return value

    # ---- the two forms of a value ----
    def unrolls(self, shape) -> bool:
        return math.prod(shape) <= self.unroll_limit

    def texts(self, value: Value) -> np.ndarray:
        """The element expressions of ``value`` (an array's elements loaded once per block)."""
        if value.unrolled:
            return value.texts

        def load():
            texts = np.empty(value.shape, dtype=object)
            for index in np.ndindex(*value.shape):
                texts[index] = self.let(_element(value.name, index))
            return texts
        return self._cached(("texts", value.name), load)

    def array(self, value: Value, shape=None) -> str:
        """An array expression of ``value`` (broadcast to ``shape`` when given); a 0-d value without
        ``shape`` stays a scalar, which numba broadcasts."""
        if value.unrolled and not value.shape and shape is None:
            return value.texts[()]
        if value.unrolled and not value.size:
            name = self.let(f"np.empty({value.shape!r}, {dtype_text(value.dtype)})")
        elif value.unrolled:
            texts = value.texts
            self._kept.append(texts)

            def build():  # element by element: numba types np.array of a list as a function of its own
                name = self.let(f"np.empty({value.shape!r}, {dtype_text(value.dtype)})", "a")
                for index in np.ndindex(*value.shape):
                    self.emit(f"{_element(name, index)} = {texts[index]}")
                return name
            name = self._cached(("array", id(texts)), build)
        else:
            name = value.name
        if shape is not None and tuple(shape) != value.shape:
            return self.let(f"np.ascontiguousarray(np.broadcast_to({name}, {tuple(shape)!r}))")
        return name

    def zeros(self, shape, dtype) -> Value:
        dtype = concrete(dtype)
        if self.unrolls(shape):
            return unrolled(np.full(shape, literal_text(0, dtype), dtype=object), dtype)
        return self.array_value(f"np.zeros({tuple(shape)!r}, {dtype_text(dtype)})", shape, dtype)

    def array_value(self, expr: str, shape, dtype) -> Value:
        self.array_ops += 1
        return Value(shape, dtype, name=self.let(expr, "a"))

    def elementwise_loop(self, shape, dtype, operands: list[Value], element: Callable) -> Value:
        """An array of ``shape`` and ``dtype`` filled by a loop over its elements: ``element(texts)``
        gives the source of one element from the operands' elements there (broadcast as NumPy does).
        numba types a loop of scalar code far faster than its array functions, which each compile an
        implementation of their own (``np.power`` on arrays, ``np.where``, broadcasting)."""
        sources = [self._source(x) for x in operands]  # before the loop: what every element reads
        name = self.let(f"np.empty({tuple(shape)!r}, {dtype_text(dtype)})", "a")
        with self.loops(shape) as index:
            texts = [self._at(source, x, index, len(shape)) for source, x in zip(sources, operands)]
            self.emit(f"{_element(name, index)} = {element(texts)}")
        return Value(shape, dtype, name=name)

    def fold_loop(self, x: Value, start: str, combine: Callable, dtype) -> Value:
        """``start`` combined with every element of the array ``x`` in index order (a reduction over
        all its axes), as a loop: ``combine(acc, element)`` gives the source of the next value."""
        source = self._source(x)
        acc = self.fresh("s")
        self.emit(f"{acc} = {start}")
        with self.loops(x.shape) as index:
            self.emit(f"{acc} = {combine(acc, self._at(source, x, index, x.ndim))}")
        return scalar(acc, dtype)

    @contextlib.contextmanager
    def loops(self, shape):
        """Nested loops over every index of ``shape`` (C order); yields the index names."""
        with contextlib.ExitStack() as stack:
            index = []
            for n in shape:
                i = self.fresh("j")
                self.emit(f"for {i} in range({n}):")
                stack.enter_context(self.block())
                index.append(i)
            yield index

    def _source(self, x: Value) -> str:
        """What a loop reads ``x``'s elements from: its one element's text, or an array's name."""
        if x.size == 1:
            return self.texts(x).reshape(-1)[0]
        return self.array(x)

    @staticmethod
    def _at(source: str, x: Value, index, ndim: int) -> str:
        """The element of ``x`` (read from ``source``) that broadcasting puts at ``index`` of a result
        of ``ndim`` axes."""
        if x.size == 1:
            return source
        offset = ndim - x.ndim
        return _element(source, [index[offset + k] if n != 1 else 0 for k, n in enumerate(x.shape)])

    @property
    def cost(self) -> int:
        """The compile time of the source so far, in scalar statements (:data:`BUDGET`)."""
        return len(self.lines) + ARRAY_WEIGHT * self.array_ops

    def convert(self, value: Value, dtype) -> Value:
        """``value`` in ``dtype`` (a weak value takes it without a cast of its own type)."""
        dtype = concrete(dtype)
        if concrete(value.dtype) == dtype and not value.weak:
            return value
        if concrete(value.dtype) == dtype:
            return Value(value.shape, dtype, value.texts, value.name)
        if value.unrolled:
            texts = np.empty(value.shape, dtype=object)
            for index in np.ndindex(*value.shape):
                texts[index] = self.let(cast(value.texts[index], dtype))
            return unrolled(texts, dtype)
        return self.array_value(f"{value.name}.astype({dtype_text(dtype)})", value.shape, dtype)

    # ---- programs ----
    def constant(self, array) -> Value:
        array = np.asarray(array)
        dtype = concrete(array.dtype)
        if array.ndim == 0:
            return scalar(literal_text(array.item(), dtype), dtype)
        name = f"k{len(self.consts)}"
        self.consts.append(np.ascontiguousarray(array))
        return Value(array.shape, dtype, name=name)

    def inline(self, program: Program, inputs: list[Value]) -> list[Value]:
        """Emit ``program``'s equations on ``inputs``; returns its outputs."""
        values: dict[int, Value] = {}
        for v, value in zip(program.invars, inputs, strict=True):
            if value.weak and isinstance(v.aval.dtype, np.dtype):
                # a branch or loop staged with a strong dtype for what is a weak scalar at run time: the
                # Python executor keeps it weak (float32 * 2.0 stays float32), so must this
                raise NotLowerable("a weak Python scalar enters a sub-program typed strongly")
            values[id(v)] = value
        for v, c in zip(program.constvars, program.consts):
            values[id(v)] = self.constant(c)

        def read(x):
            if isinstance(x, Literal):
                if not isinstance(x.value, (bool, int, float)):
                    raise NotLowerable(f"literal {x.value!r}")
                return scalar(literal_text(x.value, type(x.value)), type(x.value))
            return values[id(x)]
        for eqn in program.eqns:
            for out, value in zip(eqn.outs, self.equation(eqn, [read(x) for x in eqn.inputs]), strict=True):
                values[id(out)] = value
        return [read(x) for x in program.outputs]

    def equation(self, eqn: Eqn, operands: list[Value]) -> list[Value]:
        lowering = eqn.prim.lowering
        if lowering is None:
            raise NotLowerable(f"{eqn.prim.name} has no lowering")
        saved, saved_vars = self.out, self.out_vars
        self.out = eqn.outs[0].aval if len(eqn.outs) == 1 else None
        self.out_vars = eqn.outs
        try:
            result = lowering(self, *operands, **eqn.params)
        except NotLowerable as error:
            raise NotLowerable(f"{eqn.prim.name}: {error}") from None
        except Exception as error:  # a lowering's bug: said, never a program that computes otherwise
            raise RuntimeError(f"jit's compiled executor: the lowering of {eqn.prim.name} failed on operands "
                               f"{[(v.shape, v.dtype) for v in operands]} with {eqn.params}: {error!r}") from error
        finally:
            self.out, self.out_vars = saved, saved_vars
        results = list(result) if eqn.prim.multiple_results else [result]
        for out, value in zip(eqn.outs, results, strict=True):
            if tuple(out.aval.shape) != value.shape:
                raise NotLowerable(f"the lowering of {eqn.prim.name} gave shape {value.shape}, "
                                   f"the program has {tuple(out.aval.shape)}")
        return results

    # ---- loops and branches (the control-flow primitives' lowerings) ----
    def state(self, value: Value) -> Value:
        """Fresh variables holding ``value``: a loop's carry or a branch's result."""
        value = self.convert(value, value.dtype)  # a weak value takes its concrete dtype
        if self.unrolls(value.shape):
            texts = self.texts(value)
            names = np.empty(value.shape, dtype=object)
            for index in np.ndindex(*value.shape):
                names[index] = self.fresh("s")
                self.emit(f"{names[index]} = {texts[index]}")
            return unrolled(names, value.dtype)
        name = self.fresh("s")
        self.emit(f"{name} = np.ascontiguousarray({self.array(value)})")
        return Value(value.shape, value.dtype, name=name)

    def assign(self, states: list[Value], values: list[Value]) -> None:
        """``states`` take ``values`` at once (each cast to its state's dtype, so numba types every
        state the same at every step)."""
        targets, exprs = [], []
        for state, value in zip(states, values, strict=True):
            value = self.convert(value, state.dtype)
            if state.unrolled:
                targets += list(state.texts.reshape(-1))
                exprs += list(self.texts(value).reshape(-1))
            else:
                targets.append(state.name)
                exprs.append(f"np.ascontiguousarray({self.array(value, state.shape)})")
        if targets:
            self.emit(f"{', '.join(targets)}, = {', '.join(exprs)},")

    def row(self, stack: str, i: str, shape, dtype) -> Value:
        """Row ``i`` of the array ``stack`` (a loop's slice of ``xs``): a scalar, or a view whose
        elements are read where they are used (``texts``). A view binds no array variable, and
        numba's compile time grows with those (~80 ms each); a loop inside the body that scans the
        row indexes ``stack`` itself."""
        if not shape:
            return scalar(self.let(_element(stack, (i,))), dtype)
        return Value(shape, dtype, name=_element(stack, (i,)))

    def store(self, stack: str, i: str, value: Value) -> None:
        """Row ``i`` of the array ``stack`` set to ``value`` (nothing to do where a loop wrote it there)."""
        if value.unrolled:
            for index in np.ndindex(*value.shape):
                self.emit(f"{_element(stack, (i, *index))} = {value.texts[index]}")
        elif value.name != _element(stack, (i,)):
            self.emit(f"{_element(stack, (i,))} = {value.name}")

    def stacks(self, length: int, avals, outs=()) -> list[str]:
        """The arrays a loop of ``length`` steps stacks its per-step values of ``avals`` in: one
        allocation per dtype and shape, each value a view of it (``Y[j]``), since numba's compile time
        grows with every array a function binds, not with their size. A value among ``outs`` (the
        loop's results) that an enclosing loop stacks too is written straight into that loop's row
        (``self.destinations``)."""
        names: list[str | None] = [self.destinations.pop(id(v), None) for v in outs]
        names += [None] * (len(avals) - len(names))
        groups: dict = {}
        for j, aval in enumerate(avals):
            if names[j] is None:
                groups.setdefault((concrete(aval.dtype), tuple(aval.shape)), []).append(j)
        for (dtype, shape), members in groups.items():
            if len(members) == 1:
                names[members[0]] = self.let(f"np.empty({(length, *shape)!r}, {dtype_text(dtype)})", "y")
                continue
            packed = self.let(f"np.empty({(len(members), length, *shape)!r}, {dtype_text(dtype)})", "y")
            for k, j in enumerate(members):
                names[j] = f"{packed}[{k}]"
        return names  # type: ignore[return-value]

    @contextlib.contextmanager
    def destined(self, outputs, stacks: list[str], i: str):
        """While a loop body is inlined: its results ``outputs`` (a loop's stacked values, row ``i``
        of ``stacks``) are destinations for a loop inside the body that makes them."""
        fresh = {id(v): _element(stack, (i,)) for v, stack in zip(outputs, stacks) if isinstance(v, Var)}
        self.destinations.update(fresh)
        try:
            yield
        finally:
            for key in fresh:
                self.destinations.pop(key, None)


def _element(array: str, index) -> str:
    """The source of ``array[index]`` for a tuple of ints and names; indexing a view (``Y[j]``)
    indexes its array (``Y[j, index]``): one subscript, no view made."""
    if array.endswith("]"):
        return f"{array[:-1]}, {', '.join(map(str, index))}]"
    return f"{array}[{', '.join(map(str, index))}]"


def _strict() -> bool:
    """``TAPEGRAD_NATIVE_STRICT`` (``make test-native``): what would fall back to the Python executor
    because of a lowering's bug raises instead."""
    return bool(os.environ.get("TAPEGRAD_NATIVE_STRICT"))


def source(program: Program):
    """``(text, consts)``: the source of ``run(*inputs, *consts)``, which returns the outputs' tuple.
    A 0-d input is a scalar argument; an output that is 0-d comes back as a scalar."""
    ctx = Context()
    inputs = []
    for k, v in enumerate(program.invars):
        dtype = concrete(v.aval.dtype)
        if v.backend is not np:
            raise NotLowerable(f"input {k} is not a NumPy array")
        shape = tuple(v.aval.shape)
        inputs.append(scalar(f"in{k}", v.aval.dtype) if not shape else Value(shape, dtype, name=f"in{k}"))
    outs = ctx.inline(program, inputs)
    budget = LOOP_BUDGET if ctx.has_loop else BUDGET
    if ctx.cost > budget:
        raise NotLowerable(f"its source is {len(ctx.lines)} statements and {ctx.array_ops} array operations, "
                           f"past the compile budget ({budget} statements, an array operation counting "
                           f"{ARRAY_WEIGHT}): numba would take seconds")
    texts = [o.texts[()] if o.unrolled and not o.shape else ctx.array(o) for o in outs]
    params = [f"in{k}" for k in range(len(program.invars))] + [f"k{j}" for j in range(len(ctx.consts))]
    lines = ["import numpy as np", "", "", f"def run({', '.join(params)}):", *ctx.lines,
             f"    return ({''.join(t + ', ' for t in texts)})", ""]
    return "\n".join(lines), ctx.consts


# ---- which programs ----------------------------------------------------------------------------------
def check(program: Program) -> None:
    """Raise NotLowerable unless every variable is a NumPy value of a lowered dtype, and none outside
    the control-flow primitives' own operands and results is larger than :data:`MAX_ELEMENTS`."""
    for v in [*program.invars, *program.constvars]:
        _check_var(v, big=True)
    for eqn in program.eqns:
        sub = [p for p in eqn.params.values() if hasattr(p, "program")]
        sub += [b for p in eqn.params.values() if isinstance(p, tuple) for b in p if hasattr(b, "program")]
        for x in [*eqn.inputs, *eqn.outs]:
            if isinstance(x, Var):
                _check_var(x, big=bool(sub))
        for closed in sub:
            check(closed.program)


def _check_var(v: Var, big: bool) -> None:
    if v.backend is not np:
        raise NotLowerable(f"{v!r} is not a NumPy value")
    concrete(v.aval.dtype)
    if not big and math.prod(v.aval.shape) > MAX_ELEMENTS:
        raise NotLowerable(f"{v!r} has more than {MAX_ELEMENTS} elements: NumPy runs it at compiled speed")


# ---- compiling ----------------------------------------------------------------------------------------
def _cache_dir() -> Path:
    root = os.environ.get("TAPEGRAD_NUMBA_CACHE_DIR") or Path.home() / ".cache" / "tapegrad" / "numba"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _load(text: str):
    """The function ``run`` of the module with source ``text``, written once under the cache directory
    (a file of its own: numba's disk cache keys on it)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    name = f"tapegrad_native_{digest}"
    with _loading:  # threads that stage the same program import one module
        if name not in sys.modules:
            sys.modules[name] = _import(name, text)
    return sys.modules[name].run


_loading = threading.Lock()


def _import(name: str, text: str):
    path = _cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: another process may be reading it
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file's path always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scalar_or_array(value, dtype):
    """An argument as numba takes it: a NumPy scalar (typed by its dtype), or a writeable C-contiguous
    array (a copy of a read-only or strided one), so that one signature serves every call."""
    if np.ndim(value) == 0:
        return np.asarray(value, dtype)[()]
    if value.flags.c_contiguous and value.flags.writeable:
        return value
    return np.array(value, order="C")


class NativeRun:
    """The compiled function of a program, called as the Python executor's ``run(*inputs)``; its
    results are arrays (0-d ones included) of the program's dtypes. Its first call compiles (or loads
    from disk); if numba refuses, it runs ``fallback()``'s function from then on."""

    def __init__(self, program: Program, jitted, consts, fallback, text: str):
        self.jitted, self.fallback, self.source = jitted, fallback, text
        self.in_dtypes = [concrete(v.aval.dtype) for v in program.invars]
        self.consts = consts
        avals = [type(x.value) if isinstance(x, Literal) else x.aval.dtype for x in program.outputs]
        self.out_dtypes = [concrete(d) for d in avals]
        # a weak Python scalar result comes back as the Python executor gives it: a float, int or bool
        self.out_weak = [isinstance(d, type) and not issubclass(d, np.generic) for d in avals]
        self.executor = "numba"
        self.reason = ""  # why it runs on the Python executor after all: numba refused the source
        self._python: Callable | None = None
        self._compiled = False

    def __call__(self, *inputs):
        if self._python is not None:
            return self._python(*inputs)
        args = [_scalar_or_array(x, d) for x, d in zip(inputs, self.in_dtypes)]
        if not self._compiled and not self._compile(args):
            python = self._python = self.fallback()
            self.executor = "python"
            return python(*inputs)
        outs = self.jitted(*args, *self.consts)  # what it raises (IndexError, max_steps) is the program's
        return [self._result(o, d, weak, args) for o, d, weak in zip(outs, self.out_dtypes, self.out_weak)]

    def _result(self, out, dtype, weak, args):
        """A result as the Python executor gives it: a Python scalar for a weak one, else an array of
        the program's dtype (a lowering whose numba type differs is a bug: strict mode says so), fresh
        (numba's may be an input, a carry it did not change, or a view of a constant)."""
        if weak:
            return dtype.type(out).item()
        if np.ndim(out) == 0:
            return np.asarray(out, dtype)
        if out.dtype != dtype:
            if _strict():
                raise RuntimeError(f"the compiled executor returned {out.dtype} where the program has {dtype}:"
                                   f"\n{self.source}")
            return out.astype(dtype)
        return out.copy() if self._aliases(out, args) else out

    def _compile(self, args) -> bool:
        """Compile (or load from disk) for ``args``' types, apart from the call, so that any failure of
        numba's (a typing error: a lowering's bug; numba's own state broken by an interrupt during its
        start-up) is told from what the program raises: it sends the program to the Python executor,
        which gives the same numbers."""
        import numba
        try:
            self.jitted.compile(tuple(numba.typeof(a) for a in (*args, *self.consts)))
        except Exception as error:
            if _strict():
                raise RuntimeError(f"numba refused the compiled executor's source (a lowering's bug):\n"
                                   f"{self.source}") from error
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.debug("jit: numba could not compile a program (%s); it runs with the Python executor", first_line)
            self.reason = f"numba refused its source ({first_line})"
            return False
        self._compiled = True
        return True

    def _aliases(self, out, args) -> bool:
        return any(isinstance(a, np.ndarray) and np.may_share_memory(out, a) for a in (*args, *self.consts))


class NotCompiled:
    """Why a program keeps the Python executor (``jit(f).explain``). Falsy, as the None it stands for."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __bool__(self) -> bool:
        return False


def compile_native(program: Program, fallback) -> NativeRun | NotCompiled:
    """A :class:`NativeRun` of ``program`` (optimised), or :class:`NotCompiled` saying why it does not
    compile (the module docstring says which do). ``fallback()`` builds the Python executor's function,
    used if numba refuses the source at the first call."""
    try:
        check(program)
        text, consts = source(program)
    except NotLowerable as error:
        log.debug("jit: program not compiled with numba: %s", error)
        return NotCompiled(str(error))
    except RuntimeError as error:  # a lowering's bug: said, and the Python executor's numbers meanwhile
        if _strict():
            raise
        warnings.warn(f"{error}; the program runs with the Python executor", RuntimeWarning, stacklevel=2)
        return NotCompiled(f"a lowering failed ({error})")
    try:
        module_run = _load(text)
    except OSError as error:  # the cache folder cannot be written: nothing to compile from
        warnings.warn(f"jit's compiled executor cannot write its cache folder ({error}); set "
                      "TAPEGRAD_NUMBA_CACHE_DIR to a writable folder. The program runs with the Python executor",
                      RuntimeWarning, stacklevel=2)
        return NotCompiled(f"the cache folder cannot be written ({error}): set TAPEGRAD_NUMBA_CACHE_DIR")
    import numba
    jitted = numba.njit(cache=True, error_model="numpy")(module_run)
    return NativeRun(program, jitted, consts, fallback, text)


def compile_loop(prim, operands, params, fallback) -> NativeRun | NotCompiled:
    """A loop primitive's equation alone (``scan``, ``while`` or ``while_grad`` on these operands) as a
    :class:`NativeRun`, or :class:`NotCompiled` where its body does not lower."""
    invars = [Var(aval_of(x), np) for x in operands]
    outs = [Var(a, np) for a in prim.abstract_eval(*[v.aval for v in invars], **params)]
    return compile_native(_alone(Eqn(prim, invars, params, outs)), fallback)


def lowers(program: Program) -> bool:
    """Whether :func:`compile_native` would write ``program``'s source (it is written; nothing is
    compiled)."""
    try:
        check(program)
        source(program)
    except NotLowerable:
        return False
    return True


def loop_lowers(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a loop that :func:`compile_loop` compiles (as :func:`lowers`)."""
    if eqn.prim.name not in ("scan", "while", "while_grad") or not all(isinstance(x, Var) for x in eqn.inputs):
        return False
    return lowers(_alone(eqn))


def _alone(eqn: Eqn) -> Program:
    """The program of ``eqn`` alone: its operands in, its results out."""
    return Program(list(eqn.inputs), [], [], [eqn], list(eqn.outs))
