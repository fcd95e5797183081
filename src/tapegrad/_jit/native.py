"""The compiled executor: a program whose equations all have a lowering (``tapegrad.extend.def_lowering``)
becomes the source of one Python function that numba compiles to native code (``njit(cache=True)``);
loops (``scan``, ``fori_loop``, their reverse sweeps) are native loops in it.

Eligible programs (:func:`compile_native` returns None otherwise, and jit keeps the Python executor):
every variable, sub-programs' included, lives on NumPy with dtype float64, int64 or bool, and every
equation's primitive has a lowering that accepts it. In the generated code a 0-d value is a scalar
(so a loop over scalars runs in registers) and any other value an array.

Compile once: the source goes to a file named by its hash under the cache directory
(``TAPEGRAD_NUMBA_CACHE_DIR``, else ``~/.cache/tapegrad/numba``), imported from there, so that numba's
``cache=True`` keeps the machine code on disk for the next process; in a process each jit program
compiles once (its entry keeps the function). numba compiles at the first call: a typing error there
switches that program to the Python executor for good (``executor`` then says ``"python"``).

Numbers: ``error_model="numpy"`` (a division by zero gives inf/NaN, as NumPy, without NumPy's warning);
no fastmath. Elementwise results are NumPy's up to the last bit of the transcendental functions; a
``sum`` of many elements may round differently (NumPy sums pairwise).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import sys
from pathlib import Path

import numpy as np

from tapegrad._jit.program import Literal, Program, Var
from tapegrad._lowerings import NotLowerable, Operand, literal_text

_DTYPES = (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_))
_SCALAR = {np.dtype(np.float64): float, np.dtype(np.int64): int, np.dtype(np.bool_): bool}
log = logging.getLogger("tapegrad.jit")


def available() -> bool:
    """Whether numba imports."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _check(var) -> np.dtype:
    dtype = np.dtype(var.aval.dtype)
    if var.backend is not np or dtype not in _DTYPES:
        raise NotLowerable(f"{var!r} is not a float64, int64 or bool NumPy value")
    return dtype


class Context:
    """What a lowering sees: the equation's output avals, and the generated function's lines."""

    def __init__(self):
        self.lines: list[str] = []
        self.indent = "    "
        self.count = 0
        self.consts: list = []  # the constants of sub-programs: extra arguments of the function
        self.outs: list = []

    def fresh(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    @contextlib.contextmanager
    def block(self):
        self.indent += "    "
        try:
            yield
        finally:
            self.indent = self.indent[:-4]

    def const(self, value) -> str:
        name = f"k{len(self.consts)}"
        self.consts.append(value)
        return name

    def inline(self, program: Program, inputs: list) -> list:
        """Emit ``program``'s equations on the input expressions ``inputs``; returns its output
        expressions (names or literal texts)."""
        names = {}
        for v, text in zip(program.invars, inputs):
            _check(v)
            names[id(v)] = text
        for v, c in zip(program.constvars, program.consts):
            _check(v)
            names[id(v)] = self.const(c)

        def operand(x):
            if isinstance(x, Literal):
                return Operand(literal_text(x.value), (), np.dtype(type(x.value)))
            return Operand(names[id(x)], tuple(x.aval.shape), np.dtype(x.aval.dtype))
        for eqn in program.eqns:
            lowering = eqn.prim.lowering
            if lowering is None:
                raise NotLowerable(f"{eqn.prim.name} has no lowering")
            for out in eqn.outs:
                _check(out)
            saved, self.outs = self.outs, [out.aval for out in eqn.outs]
            try:
                result = lowering(self, *[operand(x) for x in eqn.inputs], **eqn.params)
            finally:
                self.outs = saved
            if result is None:
                raise NotLowerable(f"{eqn.prim.name} declined")
            results = list(result) if eqn.prim.multiple_results else [result]
            for out, text in zip(eqn.outs, results, strict=True):
                if text.isidentifier():  # a name already: no copy
                    names[id(out)] = text
                else:
                    names[id(out)] = self.fresh("v")
                    self.emit(f"{names[id(out)]} = {text}")
        return [operand(x).text for x in program.outputs]


def source(program: Program):
    """``(text, consts)``: ``run(*inputs, *consts)`` returning the tuple of the outputs."""
    ctx = Context()
    inputs = [f"a{k}" for k in range(len(program.invars))]
    outs = ctx.inline(program, inputs)
    params = inputs + [f"k{j}" for j in range(len(ctx.consts))]
    lines = ["import numpy as np", "", "", f"def run({', '.join(params)}):", *ctx.lines,
             f"    return ({''.join(o + ', ' for o in outs)})", ""]
    return "\n".join(lines), ctx.consts


def _cache_dir() -> Path:
    root = os.environ.get("TAPEGRAD_NUMBA_CACHE_DIR") or Path.home() / ".cache" / "tapegrad" / "numba"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _load(text: str):
    """The function ``run`` of the module with source ``text``, written once under the cache directory
    (a file of its own: numba's disk cache needs one)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    name = f"tapegrad_native_{digest}"
    if name in sys.modules:
        return sys.modules[name].run
    path = _cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module.run


def _scalar_or_array(value, dtype):
    if np.ndim(value) == 0:
        return _SCALAR[dtype](value)
    return np.ascontiguousarray(value)


class NativeRun:
    """The compiled function of a program, called as the Python executor's ``run(*inputs)``: 0-d inputs
    go in as Python scalars, 0-d results come back as 0-d arrays of the program's dtypes. Its first
    call compiles (or loads from disk); if numba refuses, it runs ``fallback()``'s function from then on."""

    def __init__(self, program: Program, jitted, consts, fallback):
        self.jitted, self.fallback, self.source = jitted, fallback, jitted.py_func.__module__
        self.in_kinds = [np.dtype(v.aval.dtype) for v in program.invars]
        self.consts = [_scalar_or_array(c, np.dtype(np.asarray(c).dtype)) for c in consts]
        self.out_dtypes = [np.dtype(type(x.value)) if isinstance(x, Literal) else np.dtype(x.aval.dtype)
                           for x in program.outputs]
        self.executor = "numba"
        self._python = None

    def __call__(self, *inputs):
        if self._python is not None:
            return self._python(*inputs)
        args = [_scalar_or_array(x, k) for x, k in zip(inputs, self.in_kinds)]
        try:
            outs = self.jitted(*args, *self.consts)
        except Exception as error:  # numba's typing or lowering error: the Python executor from now on
            import numba.core.errors as errors
            if not isinstance(error, errors.NumbaError):
                raise
            log.debug("jit: numba could not compile a program (%s); it runs with the Python executor",
                      str(error).splitlines()[0])
            self._python, self.executor = self.fallback(), "python"
            return self._python(*inputs)
        return [np.asarray(o, d) if np.ndim(o) == 0 else o for o, d in zip(outs, self.out_dtypes)]


def compile_native(program: Program, fallback):
    """A :class:`NativeRun` of ``program`` (optimised), or None when some variable or equation has no
    lowering (module docstring). ``fallback()`` builds the Python executor's function, used if numba
    fails at the first call."""
    try:
        text, consts = source(program)
    except (NotLowerable, TypeError, ValueError) as error:
        log.debug("jit: program not compiled with numba: %s", error)
        return None
    import numba
    run = _load(text)
    jitted = numba.njit(cache=True, error_model="numpy")(run)
    native = NativeRun(program, jitted, consts, fallback)
    native.source = text
    return native
