"""Staging: ``StagingTrace`` records every primitive applied to its tracers as an equation of a
:class:`~tapegrad._jit.program.Program`, over abstract values only (shape, dtype, backend).

Operands that are not this trace's tracers enter the program as: literals (Python scalars), constants
(concrete arrays, such as closed-over NumPy arrays), or implicit inputs (tracers of an outer transform
captured by a closure, and every Parameter read: a Parameter is read fresh at each
call, never baked in).
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._batching import defbatch
from tapegrad._core import Primitive, ShapedArray, Trace, Tracer, bind, new_main
from tapegrad._jit.custom_call import custom_call_p, stages_whole
from tapegrad._jit.program import Eqn, Literal, Program, Var, type_string
from tapegrad._lowerings import Value
from tapegrad._params import staging_parameters
from tapegrad._rules import def_lowering, defjvp, defvjp
from tapegrad.errors import ConcretizationError

_SCALARS = (bool, int, float, complex)
_PYTHON_TYPES = {"b": bool, "i": int, "u": int, "f": float, "c": complex}  # by NumPy kind


def is_weak_dtype(dtype) -> bool:
    """Whether an aval's ``dtype`` is a weak Python scalar type (``np.dtype('f8') == float``: no ``in``
    on a NumPy dtype)."""
    return isinstance(dtype, type) and dtype in _SCALARS


# ---- weak results --------------------------------------------------------------------------------
# Python's operators on Python scalars give Python scalars: ``1 + i`` and ``0.1 / (1 + i)`` stay
# weakly typed, so that ``float32_array * (0.1 / (1 + i))`` stays float32, as it does eagerly. Staged,
# such an operator is its primitive (whose result NumPy types strongly: ``np.add(1, 2)`` is an int64)
# followed by ``python_scalar``, which gives the Python scalar of it at run time and the Python type
# while staged. Only jit stages it, and only on weak operands: it is not in the primitive registry.
python_scalar_p = Primitive("python_scalar")
python_scalar_p.def_impl(lambda x: x.item() if hasattr(x, "item") else x)
python_scalar_p.def_abstract_eval(lambda x: ShapedArray((), _PYTHON_TYPES[np.dtype(x.dtype).kind]))
defvjp(python_scalar_p, lambda ct, ans, x: ct)
defjvp(python_scalar_p, lambda t, ans, x: t)
defbatch(python_scalar_p, lambda vals, dims: (vals[0], dims[0]))  # an array per example: no longer a scalar


def _python_scalar_lowering(ctx, x):
    value = ctx.convert(x, ctx.out.dtype)  # the concrete dtype of the weak one (int64 for int)
    return Value(value.shape, ctx.out.dtype, value.texts, value.name)


def_lowering(python_scalar_p, _python_scalar_lowering)


def is_weak(x) -> bool:
    """Whether ``x`` is weakly typed: a Python scalar, or the staging tracer of one."""
    return type(x) in _SCALARS or getattr(x, "weak_type", False)


def _weak_operator(name: str):
    """The operator ``name`` of a staged value: the array operator, whose result is a Python scalar
    again (weakly typed) where every operand is one."""
    def operator(self, *others):
        out = getattr(Tracer, name)(self, *others)
        if self.weak_type and all(is_weak(o) for o in others) and isinstance(out, StagingTracer):
            return bind(python_scalar_p, out)
        return out
    operator.__name__ = operator.__qualname__ = name
    return operator


# Python's arithmetic, comparison and logical operators (``~True`` is -2 in Python, False in NumPy: left
# out, as ``-True``, which NumPy refuses, is by the primitive itself)
_OPERATORS = tuple(f"__{op}__" for op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
                                         "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow", "neg", "abs",
                                         "lt", "le", "gt", "ge", "eq", "ne", "and", "rand", "or", "ror", "xor",
                                         "rxor"))


class StagingTracer(Tracer):
    """A value of the program being staged: only its variable (shape, dtype, backend) is known."""

    __slots__ = ("var",)

    def __init__(self, trace, var: Var):
        self._trace = trace
        self.var = var

    @property
    def shape(self):
        return self.var.aval.shape

    @property
    def dtype(self) -> np.dtype:
        """A NumPy dtype, as an array's: a weakly typed Python scalar's is NumPy's dtype for it (int64,
        float64, bool, complex128), as JAX's tracers give; its weakness stays in :attr:`aval` (whose
        dtype is the Python type), which staging types the program with."""
        return np.dtype(self.var.aval.dtype)

    @property
    def aval(self) -> ShapedArray:
        return self.var.aval

    @property
    def weak_type(self) -> bool:
        """Whether this value is a weakly typed Python scalar (JAX's ``aval.weak_type``)."""
        return is_weak_dtype(self.var.aval.dtype)

    def array_namespace(self):
        return self.var.backend

    def concrete_value(self):
        raise ConcretizationError(abstract_value_message(self._trace.main.global_data, self.var))

    def __repr__(self):
        return f"StagingTracer({type_string(self.var.aval)})"


for _name in _OPERATORS:  # over the array operators tapegrad.numpy installs on Tracer
    setattr(StagingTracer, _name, _weak_operator(_name))


def _from_scalars(builder, var: Var) -> bool:
    """Whether ``var`` is computed from scalar arguments of the staged function alone (with literals
    and constants): then the argument could be marked static. Inputs made from Python scalars keep
    their Python type as dtype (:func:`abstractify`); those made from NumPy scalars (``np.float64(3)``,
    hashable, so static-able too) are in ``builder.scalar_inputs``; Parameters, captured values and
    array arguments are arrays, which ``static_argnums`` cannot take (they are not hashable)."""
    producer = {id(out): eqn for eqn in builder.eqns for out in eqn.outs}
    arrays = {id(v) for v in builder.params.values()} | {id(v) for v in builder.captured_vars}
    consts = {id(v) for v in builder.constvars}
    stack, seen, roots = [var], set(), 0
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        eqn = producer.get(id(v))
        if eqn is not None:
            stack.extend(x for x in eqn.inputs if isinstance(x, Var))
        elif id(v) not in consts:
            if id(v) in arrays or not (isinstance(v.aval.dtype, type)  # np.dtype('f8') == float: no `in`
                                       or id(v) in builder.scalar_inputs):
                return False
            roots += 1
    return roots > 0


def abstract_value_message(builder, var: Var) -> str:
    """Why a staged value cannot be read as a Python value, and the ways out that fit where it comes
    from: ``static_argnums`` only for a value computed from scalar arguments, Python or NumPy (an array
    cannot be static), the traced control flow (``tg.cond``, ``tg.while_loop``) and ``tnp.where`` always."""
    head = (f"a traced value ({type_string(var.aval)}) reached Python control flow or float()/int()/bool() "
            "inside jit, where only its shape and dtype are known, not its value. ")
    traced = ("branch with tg.cond(pred, true_fn, false_fn, *operands) (tg.switch for several branches), "
              "loop with tg.while_loop(cond_fn, body_fn, init) or tg.fori_loop, or select elementwise with "
              "tnp.where(cond, x, y); a value wanted in Python (logging) can be returned from the jitted "
              "function and converted outside")
    if _from_scalars(builder, var):
        return (head + "It is computed from a scalar argument (a Python number or a NumPy scalar): mark that "
                "argument static "
                "(jit(fn, static_argnums=...) or static_argnames=...) so that Python sees its value, "
                "one program per value; or, to keep it traced, " + traced)
    return head + "It is computed from an array (an argument or a Parameter), which cannot be static: " + traced


class Builder:
    """What the staging trace accumulates: equations, constants, implicit inputs, Parameter writes,
    the flags read (a module's ``training``), and whether a ``checkpoint`` was staged (``remat``)."""

    def __init__(self):
        self.eqns = []
        self._consts = {}  # id(array) -> (array, var): constants of the program
        self._captured = {}  # id(tracer) -> (tracer, var): implicit inputs from outer transforms
        self.params = {}  # Parameter -> var: implicit inputs read fresh at each call
        self.writes = {}  # Parameter -> its new value (a tracer), in order of first write
        self.flags_read = {}  # (id(owner), attribute) -> (owner, Flag, value): flags read
        self.scalar_inputs = set()  # ids of the input variables made from NumPy scalar arguments
        self.remat = False  # a joint call asking to be recomputed in reverse mode was staged (checkpoint)
        self.trace = None
        self._avals = {}  # (shape, dtype) -> ShapedArray: one per distinct type, shared by the variables

    def shared_aval(self, aval) -> ShapedArray:
        """``aval`` normalised (a tuple shape; a NumPy dtype, or the Python type of a weakly typed
        scalar), as the one instance this program keeps for its type: a long program has few distinct
        types, and a variable costs a pointer to it."""
        weak = is_weak_dtype(aval.dtype)  # a Python type stays one: the value is weakly typed
        key = (tuple(aval.shape), aval.dtype if weak else np.dtype(aval.dtype), weak)
        shared = self._avals.get(key)
        if shared is None:
            shared = self._avals[key] = ShapedArray(*key[:2])
        return shared

    consts = property(lambda self: [x for x, _ in self._consts.values()])
    constvars = property(lambda self: [v for _, v in self._consts.values()])
    captured = property(lambda self: [x for x, _ in self._captured.values()])
    captured_vars = property(lambda self: [v for _, v in self._captured.values()])

    def operand(self, x):
        if type(x) is StagingTracer and x._trace is self.trace:
            return x.var
        if type(x) in _SCALARS or isinstance(x, str):  # a str: an output leaf such as a return_ids name
            return Literal(x)
        # a value of an outer transform captured by a closure is an input; a concrete array, a constant
        table = self._captured if isinstance(x, Tracer) else self._consts
        key = id(x)
        if key not in table:
            table[key] = (x, Var(*_captured_type(x)))
        return table[key][1]

    def new_input(self, aval: ShapedArray, backend) -> StagingTracer:
        return StagingTracer(self.trace, Var(aval, backend))

    def read_parameter(self, param) -> StagingTracer:
        """The tracer standing for ``param`` in this program: its newest written value, or an implicit
        input read fresh at each call."""
        if param in self.writes:
            return self.writes[param]
        if param not in self.params:
            self.params[param] = Var(*abstractify(param._data))
        return StagingTracer(self.trace, self.params[param])


def abstractify(x):
    """``(aval, backend)`` of an operand: an array or a tracer (its shape, dtype and array module), or a
    Python scalar (weakly typed: the aval's dtype is its Python type)."""
    if type(x) in _SCALARS:
        return ShapedArray((), type(x)), np
    return ShapedArray(tuple(x.shape), np.dtype(x.dtype)), namespace_of(x)


def _captured_type(x):
    """``(aval, backend)`` of a value a program captures: a staged Python scalar (a ``jit`` argument
    that a ``cond`` branch or a loop body closes over) stays weakly typed, as it is where it was staged,
    so ``float32_carry * s`` keeps float32 in the body as outside it."""
    if getattr(x, "weak_type", False):
        return x.aval, x.array_namespace()
    return abstractify(x)


class StagingTrace(Trace):
    """``main.global_data`` is the :class:`Builder`."""

    __slots__ = ()

    def process_primitive(self, prim, args, params):
        builder = self.main.global_data
        inputs = [builder.operand(a) for a in args]
        avals = [ShapedArray((), type(x.value)) if isinstance(x, Literal) else x.aval for x in inputs]
        backend = next((x.backend for x in inputs if isinstance(x, Var)), np)
        if prim.multiple_results:  # a method, not comprehensions here: they would make locals cells
            return self._stage_results(builder, prim, inputs, params, prim.abstract_eval(*avals, **params), backend)
        out = Var(builder.shared_aval(prim.abstract_eval(*avals, **params)), backend)
        builder.eqns.append(Eqn(prim, inputs, dict(params), [out]))
        return StagingTracer(self, out)

    def _stage_results(self, builder, prim, inputs, params, avals, backend):
        outs = [Var(builder.shared_aval(aval), backend) for aval in avals]
        builder.eqns.append(Eqn(prim, inputs, dict(params), outs))
        return [StagingTracer(self, out) for out in outs]

    def process_joint(self, call, args):
        # a custom_vjp/custom_jvp function of its arguments alone stays whole, so that transforms of
        # the program use its rule; a checkpoint (whose values are its function's) and a function that
        # reads anything else are inlined: their rules apply only to transforms inside the program
        if call.remat:
            self.main.global_data.remat = True
        elif stages_whole(call, args):
            return self.process_primitive(custom_call_p, args, {"call": call})
        return call.fun(*args)


def stage(flat_fun, in_avals, backends, scalar_inputs=()):
    """Stage ``flat_fun`` (a list of arrays to a list of outputs) on abstract inputs; the positions
    ``scalar_inputs`` hold NumPy scalars (which a static argument could take, as a Python scalar).

    Returns ``(program, builder, out_leaves)``: the program's inputs are the arguments, then the
    captured values, then the Parameters read; its outputs are the function's, then the new values
    of the Parameters written (``builder.writes``, in order).
    """
    builder = Builder()
    with new_main(StagingTrace, builder) as main:
        builder.trace = main.trace
        ins = [builder.new_input(aval, backend) for aval, backend in zip(in_avals, backends)]
        builder.scalar_inputs = {id(ins[i].var) for i in scalar_inputs}
        with staging_parameters(builder):
            outs = flat_fun(*ins)
        out_operands = [builder.operand(o) for o in outs]
        write_operands = [builder.operand(v) for v in builder.writes.values()]
    program = Program([x.var for x in ins] + builder.captured_vars + list(builder.params.values()), builder.constvars,
                      builder.consts, builder.eqns, out_operands + write_operands)
    return program, builder
