"""What ``switch``, ``scan`` and ``while`` share: :class:`ClosedProgram` (a staged sub-program held as a
primitive's static parameter), staging a derived program on concrete or traced operands, and the
checks and bookkeeping of operands, implicit inputs and output types."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import optree

from tapegrad import _tree
from tapegrad._core import ShapedArray
from tapegrad._jit import native
from tapegrad._jit.api import traceable
from tapegrad._jit.codegen import compile_program, evaluate
from tapegrad._jit.passes import optimize
from tapegrad._jit.program import Program, Var, pretty, type_string
from tapegrad._jit.scalar import compile_scalar_loop
from tapegrad._jit.staging import abstractify, is_weak, stage
from tapegrad._owned import owned
from tapegrad._params import Parameter
from tapegrad._structural import astype

_SCALARS = (bool, int, float, complex)


class ClosedProgram:
    """A staged branch: its :class:`Program` (constants included) and, built at its second concrete
    call, the compiled executor of the optimised program (a first call runs the program through
    ``evaluate``: an eager ``cond`` stages its branches anew at each call, and compiling would cost
    more than it saves). Hashed and compared by identity, so that it can be a primitive's parameter;
    printed as the program's listing."""

    __slots__ = ("program", "out_avals", "remat", "_run", "_calls", "_derived", "_scalar", "__weakref__")

    def __init__(self, program: Program, remat: bool = False):
        self.program = program
        self.out_avals = [_aval_of(x) for x in program.outputs]
        self.remat = remat  # a checkpoint was staged in it: reverse mode recomputes it instead of storing
        self._run: Callable | None = None
        self._calls = 0
        self._derived: dict
        self._derived = {}  # (kind, key) -> ClosedProgram: the jvp, vjp and batched branches made from this one
        self._scalar: Callable | bool | None
        self._scalar = False  # the Python-float loop over this body: not built yet (None: not eligible)

    def __call__(self, *args):
        """The outputs for concrete ``args``, each an array the caller owns."""
        return owned(self.run(*args), caller=list(args) + self.program.consts)

    def run(self, *args):
        """The outputs for concrete ``args``, which may alias them or the constants (or be NumPy
        scalars): for a loop that hands them to its next step and takes ownership once, at the end."""
        if self._run is None:
            self._calls += 1
            if self._calls == 1:
                return evaluate(self.program, args)
            self._run = compile_program(optimize(self.program))
        return self._run(*args)

    def scalar_loop(self, n_carry: int, n_xs: int):
        """This body as one loop of Python-float code (``tapegrad._jit.scalar``), built once; None when
        the body is not made of elementwise operations on 0-d float64 and bool values."""
        if self._scalar is False:  # a carry that is not 0-d rules it out before the cost of optimising
            scalar = all(v.aval.shape == () for v in self.program.invars[:n_carry])
            self._scalar = compile_scalar_loop(optimize(self.program), n_carry, n_xs) if scalar else None
        return self._scalar

    def native_loop(self, prim, args, params):
        """The loop ``prim`` (``scan`` or ``while``, of which this is the body) on ``args``, compiled
        alone by jit's compiled executor (``tapegrad._jit.native.compile_loop``), or None: outside a
        jitted program, in one compiled with the executor off, or where the loop does not lower. Built
        once per signature of ``args``; the function it returns gives None where numba refuses the loop."""
        if not native.in_jit.get():
            return None
        if not all(type(a) is np.ndarray or isinstance(a, np.generic) for a in args):
            return None
        key = ("native", prim.name, tuple((np.shape(a), a.dtype) for a in args), tuple(params.items()))
        run = self.derived(key, lambda: native.compile_loop(prim, args, params, lambda: lambda *a: None) or False)
        return run or None

    def evaluate(self, *args):
        """The outputs through ``bind``, for a transform that must see the branch's primitives."""
        return evaluate(self.program, args)

    def derived(self, key, make) -> ClosedProgram:
        """What ``make()`` builds from this one (a derived program, which inherits ``remat``), made
        once per ``key``."""
        closed = self._derived.get(key)
        if closed is None:
            closed = self._derived[key] = make()
            if isinstance(closed, ClosedProgram):
                closed.remat = self.remat
        return closed

    def __repr__(self):
        return pretty(self.program)


def _aval_of(x):
    return x.aval if isinstance(x, Var) else abstractify(x.value)[0]



def _stage_closed(fun, args) -> ClosedProgram:
    """``fun`` (a list of operands to a list of outputs) staged on the abstract values of ``args``.
    Derived branches capture nothing: their inputs are all explicit."""
    avals, backends = zip(*[abstractify(x) for x in args]) if args else ((), ())
    program, _ = stage(fun, avals, backends)
    return ClosedProgram(program)


def _inexact(aval) -> bool:
    """Whether values of ``aval`` carry derivatives: a float or complex array (a weakly typed Python
    scalar is a literal of the call, never a differentiated value)."""
    return isinstance(aval.dtype, np.dtype) and aval.dtype.kind in "fc"


def _is_differentiable(var) -> bool:
    """Whether a branch input carries a derivative (:func:`_inexact` of its abstract value)."""
    return _inexact(var.aval)


def _like(ct, x):
    """A cotangent with its input's dtype (the switch's branches must agree on every output type)."""
    return ct if ct.dtype == x.dtype else astype(ct, x.dtype)


def _operand_leaf(x, where: str, k: int, what: str = "operand"):
    leaf = traceable(x)
    if leaf is not None:
        return leaf
    raise TypeError(f"{where}: {what} leaf {k} is a {type(x).__name__}, which is not an array; pass arrays or "
                    f"Python scalars as {what}s and close over other values{_tree.unregistered_container_hint(x)}")


def _tree_paths(treedef) -> list:
    """A readable path of each leaf of ``treedef`` (``[0]['w']``); the leaf's index when it has none."""
    dummy = optree.tree_unflatten(treedef, list(range(treedef.num_leaves)))
    paths = optree.tree_paths(dummy, namespace=_tree.NAMESPACE)
    return ["".join(f"[{p!r}]" for p in path) or f"#{k}" for k, path in enumerate(paths)]


def _implicit_inputs(staged) -> list:
    """The union, in order of first appearance, of every branch's implicit inputs: captured values of
    outer transforms and Parameters read."""
    seen, union = set(), []
    for _, builder, _ in staged:
        for x in list(builder.captured) + list(builder.params):
            if id(x) not in seen:
                seen.add(id(x))
                union.append(x)
    return union


def _with_inputs(program: Program, n_args: int, implicit, builder) -> Program:
    """``program`` taking the operands, then every branch's implicit inputs (``implicit``): the ones
    it does not read are new, unused variables, so that every branch has one signature."""
    own = {id(x): v for x, v in zip(builder.captured, builder.captured_vars)}
    own.update((id(p), v) for p, v in builder.params.items())
    extra = []
    for x in implicit:
        var = own.get(id(x))
        if var is None:
            var = Var(*abstractify(x._data if isinstance(x, Parameter) else x))
        extra.append(var)
    return Program(program.invars[:n_args] + extra, program.constvars, program.consts, program.eqns,
                   program.outputs)


def _implicit_operands(builder) -> list:
    """The values a staged function read without receiving them, as the primitive's operands: the
    captured values of outer transforms, then the Parameters read (their values)."""
    return [x.value if isinstance(x, Parameter) else x for x in list(builder.captured) + list(builder.params)]


def _slice_aval(x):
    aval, backend = abstractify(x)
    return ShapedArray(tuple(aval.shape[1:]), aval.dtype), backend


def _staged(flat_fun, leaves, where: str, name: str, xs_leaves=()):
    """``(program, builder)`` of ``flat_fun`` staged on the abstract values of ``leaves`` and of one
    slice of each of ``xs_leaves``; a ValueError if it assigns a Parameter."""
    pairs = [abstractify(c) for c in leaves] + [_slice_aval(x) for x in xs_leaves]
    avals, backends = zip(*pairs) if pairs else ((), ())
    program, builder = stage(flat_fun, avals, backends)
    if builder.writes:
        raise ValueError(f"{where}: {name} assigns Parameter {next(iter(builder.writes)).name!r}; a loop body must "
                         "be a pure function of its carry: carry the new value and assign it after the loop")
    return program, builder


def _strong(leaf, out):
    """A weakly typed leaf of the carry (a Python scalar, or jit's tracer of one) as an array: of the
    body's dtype for it where the scalar promotes to that dtype (jit's weak-type rule), else of NumPy's
    default dtype for it."""
    if not is_weak(leaf):
        return leaf
    dtype = out.aval.dtype if hasattr(out, "aval") else None
    scalar = leaf if type(leaf) in _SCALARS else np.dtype(leaf.dtype).type(0).item()  # a traced one: its kind
    target = dtype if isinstance(dtype, np.dtype) and np.result_type(scalar, dtype) == dtype else None
    if type(leaf) in _SCALARS:
        return np.asarray(leaf, target)
    return astype(leaf, target if target is not None else np.dtype(leaf.dtype))


def _check_carry(program, carry_tree, n_carry: int, where="scan", fun="f", init="init") -> None:
    for k, (inp, out) in enumerate(zip(program.invars[:n_carry], program.outputs[:n_carry])):
        t_in, t_out = type_string(inp.aval), type_string(_aval_of(out))
        if t_in != t_out:
            raise TypeError(f"{where}: carry leaf {_tree_paths(carry_tree)[k]} is {t_in} in {init} but {fun} "
                            f"returns {t_out}; the carry must keep its shape and dtype (cast with .astype)")


def _cut(seq, *sizes) -> list:
    """``seq`` cut into consecutive lists of ``sizes``."""
    parts, start = [], 0
    for size in sizes:
        parts.append(list(seq[start:start + size]))
        start += size
    return parts
