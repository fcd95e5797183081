"""Elementwise fusion: a group of elementwise equations whose intermediates are used only inside the
group becomes one equation of the ``fused`` primitive, which runs the whole group in one call
(``numexpr`` on CPU, a ``cupy.fuse`` kernel on GPU: any device backend with a ``fuse``).

Groups. Walking the program backwards, an elementwise equation joins the group of its consumers when
its output is not a program output and every consumer lies in that one group; otherwise it roots a
group of its own. Every member but the root then feeds only members, so a group is convex (no path
leaves it and comes back) and its one output is the root's: the fused equation takes the root's
place. A group is capped at ``MAX_INPUTS`` array inputs (numexpr's iterator takes at most 63) and
``MAX_OPS`` equations (numexpr builds its expression tree recursively).

Types. numexpr computes each operation in the larger "kind" of its operands, as NumPy does with
arrays; Python scalars are the exception (NumPy 2 keeps them weak: ``float32 * 1.01`` is float32, while
numexpr would make a float64 constant of ``1.01``). So every literal enters the expression as a constant
of the dtype NumPy gives it (``result_type`` of the equation's array operands and the weak scalar), and
each equation is fused only if numexpr's kind for it is the dtype NumPy gives its output (float32,
float64 or bool: integer and complex equations are left alone). Broadcasting is numexpr's, which is
NumPy's. Results agree with the unfused program to float rounding (numexpr calls the C library's
``sinf``, NumPy its own SIMD loops); numexpr raises no floating-point warnings.

When it pays. Measured on this machine (2 cores, NumPy 2.4, numexpr 2.14 without VML):
a NumPy ufunc call costs ~0.27 us of fixed overhead, a numexpr call ~0.85 us (with numexpr's default
2 threads; 0.6 us with 1) plus ~0.05 us per input array; but per element numexpr is slower than
NumPy's SIMD loops everywhere (arithmetic ~0.6 ns per element per operation more in float32,
transcendental functions 3-15 ns more, except float64 ``sin``/``cos`` where both call libm), and
at 2048 elements and more numexpr starts its threads, which costs ~70 us here. So fusion wins on
small arrays, where it removes per-call overhead (an example: the backward pass of a 200-step
``sin``/``*``/``+`` chain on float32[16] is one ~100-operation group per 32 inputs), and loses on
large ones. The rule (``_pays``): fuse a group of at least 2 operations with fewer than
``MAX_ELEMENTS`` output elements when the overhead it saves exceeds the per-element time it adds,
by the costs in ``_EXTRA_NS``. The crossover for arithmetic groups is ~1000 elements; for ``sin``
(float32) ~150; a 3-operation group on 16 elements breaks even (not fused), a 30-operation one
saves ~6 us. On CuPy every group of 2 or more is fused (a kernel launch costs ~10 us).

Fusion runs only on the program compiled for the executor (``jit`` keeps the unfused one for
``evaluate`` under outer transforms), so ``fused`` has an impl and an abstract eval but no
derivative rules. It is the last pass: after dead-code elimination, common-subexpression
elimination and constant folding, which change the use counts that decide the groups (a dead
``sum`` reading an intermediate would otherwise end a group there). A compiled numexpr program keeps
its registers in itself, so two threads must not run one at once: the executor of a program with
fused equations holds a lock while it runs (``codegen``).
"""
from __future__ import annotations

import operator

import numpy as np

from tapegrad._core import Primitive, ShapedArray
from tapegrad._jit.program import Eqn, Literal, Program, Var

try:  # an optional dependency: without it, CPU programs are left unfused
    import numexpr
    from numexpr import expressions as _nx
except ImportError:  # pragma: no cover - exercised only where numexpr is absent
    numexpr = _nx = None

MAX_INPUTS = 32
MAX_OPS = 48
MAX_ELEMENTS = 2048  # numexpr runs serially below 2 * its block size (1024): no thread start-up
OP_US = 0.27  # a NumPy ufunc call with its line of generated code, saved per fused equation
CALL_US = 0.85  # one numexpr call, plus INPUT_US per input array
INPUT_US = 0.05
CHEAP_NS = (0.6, 0.3)  # numexpr's extra time per element for an arithmetic operation: float32, float64


# ---- the fused primitive ----------------------------------------------------------------------------
class Kernel:
    """One fused group: ``fn(*inputs)`` computes it; ``text`` spells the expression for the printer."""

    __slots__ = ("fn", "text", "aval")

    def __init__(self, fn, text: str, aval: ShapedArray):
        self.fn, self.text, self.aval = fn, text, aval

    def __repr__(self):
        return self.text


fused_p = Primitive("fused")  # not in PRIMITIVES: it exists only in programs compiled for the executor
fused_p.def_impl(lambda *inputs, kernel: kernel.fn(*inputs))
fused_p.def_abstract_eval(lambda *avals, kernel: kernel.aval)


# ---- the elementwise primitives numexpr can run -------------------------------------------------------
def _func(name):
    return lambda *args: _nx.functions[name](*args)


def _same_kind_func(name):
    """numexpr's ``maximum``/``minimum`` ask for float64 operands; their float32 opcodes exist too, and
    NaN propagates as in NumPy's."""
    return lambda *args: _nx.FuncNode(name, args, kind=_nx.commonKind(args))


def _reciprocal(x):
    one = np.float32(1) if x.astKind == "float" else np.float64(1)
    return _nx.ConstantNode(one) / x


# name -> (expression builder, (extra ns per element in float32, in float64) over NumPy)
_OPS = {
    "add": (operator.add, CHEAP_NS), "subtract": (operator.sub, CHEAP_NS),
    "multiply": (operator.mul, CHEAP_NS), "divide": (operator.truediv, (0.6, 0.55)),
    "negative": (operator.neg, CHEAP_NS), "square": (lambda x: x * x, CHEAP_NS),
    "reciprocal": (_reciprocal, CHEAP_NS),
    "equal": (operator.eq, CHEAP_NS), "not_equal": (operator.ne, CHEAP_NS),
    "less": (operator.lt, CHEAP_NS), "less_equal": (operator.le, CHEAP_NS),
    "greater": (operator.gt, CHEAP_NS), "greater_equal": (operator.ge, CHEAP_NS),
    "logical_and": (operator.and_, CHEAP_NS), "logical_or": (operator.or_, CHEAP_NS),
    "logical_not": (operator.invert, CHEAP_NS), "where": (_func("where"), CHEAP_NS),
    "maximum": (_same_kind_func("maximum"), (1.9, 1.8)), "minimum": (_same_kind_func("minimum"), (1.9, 1.8)),
    "absolute": (_func("abs"), (2.4, 2.1)), "sqrt": (_func("sqrt"), (0.9, 1.2)),
    "sin": (_func("sin"), (2.8, 0.9)), "cos": (_func("cos"), (2.9, 1.0)), "tan": (_func("tan"), (8.9, 10.1)),
    "arcsin": (_func("arcsin"), (4.8, 5.4)), "arccos": (_func("arccos"), (5.7, 6.0)),
    "arctan": (_func("arctan"), (5.9, 8.1)), "arctan2": (_func("arctan2"), (17.7, 10.8)),
    "sinh": (_func("sinh"), (15.1, 8.8)), "cosh": (_func("cosh"), (11.1, 5.1)),
    "tanh": (_func("tanh"), (15.2, 7.9)),
    "exp": (_func("exp"), (3.4, 5.5)), "expm1": (_func("expm1"), (7.8, 5.5)),
    "log": (_func("log"), (3.8, 4.9)), "log1p": (_func("log1p"), (8.9, 7.7)),
    "log10": (_func("log10"), (7.6, 8.4)), "power": (operator.pow, (6.1, 8.1)),
}
_KINDS = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.bool_): "bool"}
_SIGNATURE_TYPES = {"float": float, "double": np.double, "bool": bool}  # numexpr's names for its kinds


def _value_operands(eqn):
    """The operands that take part in type promotion (``where``'s condition does not)."""
    return eqn.inputs[1:] if eqn.prim.name == "where" else eqn.inputs


def literal_dtype(eqn, position: int):
    """The dtype NumPy 2 gives the Python scalar operand at ``position`` of ``eqn``: weak, it takes the
    dtype of the array operands (``float32 * 1.01`` is float32); with none, the equation's own output
    dtype; ``where``'s condition is a bool."""
    if eqn.prim.name == "where" and position == 0:
        return np.dtype(np.bool_)
    value = eqn.inputs[position].value
    dtypes = [x.aval.dtype for x in _value_operands(eqn) if isinstance(x, Var)]
    return np.result_type(*dtypes, value) if dtypes else eqn.out.aval.dtype


def _is_typed(var) -> bool:
    """A variable with a dtype numexpr computes in (not a weakly typed Python-scalar input)."""
    return isinstance(var.aval.dtype, np.dtype) and var.aval.dtype in _KINDS


def _candidate(eqn) -> bool:
    """Whether ``eqn`` may be fused at all: a known elementwise primitive over float32/float64/bool
    arrays of one backend, with no scalar output (NumPy gives a scalar there, numexpr a 0-d array)."""
    if eqn.prim.name not in _OPS or not eqn.out.aval.shape or not _is_typed(eqn.out):
        return False
    variables = [x for x in eqn.inputs if isinstance(x, Var)]
    return (bool(variables) and all(_is_typed(v) and v.backend is eqn.out.backend for v in variables)
            and all(isinstance(x.value, (bool, int, float)) for x in eqn.inputs if isinstance(x, Literal)))


# ---- grouping ----------------------------------------------------------------------------------------
class _Group:
    __slots__ = ("root", "members", "inputs")

    def __init__(self, root: int):
        self.root, self.members, self.inputs = root, [], {}  # inputs: id(var) -> var, ordered


def _var_inputs(eqn):
    return {id(x): x for x in eqn.inputs if isinstance(x, Var)}


def groups(program: Program, fusible) -> list:
    """The fusion groups of ``program`` (of 2 or more equations), as :class:`_Group` with their members'
    indices in program order and their external inputs."""
    consumers = {}
    for k, eqn in enumerate(program.eqns):
        for x in eqn.inputs:
            if isinstance(x, Var):
                consumers.setdefault(id(x), set()).add(k)
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    group_of = {}
    for k in range(len(program.eqns) - 1, -1, -1):
        eqn = program.eqns[k]
        if not fusible(eqn):
            continue
        group = _joinable_group(eqn, consumers.get(id(eqn.out), ()), group_of, outputs)
        if group is None:
            group = _Group(k)
        else:
            del group.inputs[id(eqn.out)]
        group.members.append(k)
        group.inputs.update(_var_inputs(eqn))
        group_of[k] = group
    found = {id(g): g for g in group_of.values() if len(g.members) >= 2}
    for g in found.values():
        g.members.reverse()
    return sorted(found.values(), key=lambda g: g.root)


def _joinable_group(eqn, users, group_of, outputs):
    """The group every consumer of ``eqn``'s output lies in, if ``eqn`` may join it (within the caps)."""
    if id(eqn.out) in outputs or not users:
        return None
    found = {id(group_of.get(k)): group_of.get(k) for k in users}
    if len(found) != 1:
        return None
    (group,) = found.values()
    if group is None or len(group.members) >= MAX_OPS:
        return None
    new_inputs = set(group.inputs) - {id(eqn.out)} | set(_var_inputs(eqn))
    return group if len(new_inputs) <= MAX_INPUTS else None


# ---- numexpr (CPU) -----------------------------------------------------------------------------------
def _leaf(var, names):
    if id(var) not in names:
        names[id(var)] = f"a{len(names)}"
    return _nx.VariableNode(names[id(var)], _KINDS[var.aval.dtype])


def _node(eqn, read):
    """The numexpr expression node of ``eqn``, its operands read by ``read(var)``."""
    args = [_nx.ConstantNode(literal_dtype(eqn, i).type(x.value)) if isinstance(x, Literal) else read(x)
            for i, x in enumerate(eqn.inputs)]
    return _OPS[eqn.prim.name][0](*args)


_checked = {}  # (name, operand kinds/literal dtypes) -> whether numexpr runs it with NumPy's output dtype


def numexpr_fusible(eqn) -> bool:
    """Whether ``eqn`` is a candidate that numexpr computes with NumPy's output dtype (checked once per
    primitive and operand types, by compiling it)."""
    if _nx is None or not _candidate(eqn) or eqn.out.backend is not np:
        return False
    key = (eqn.prim.name, tuple(x.aval.dtype if isinstance(x, Var) else literal_dtype(eqn, i)
                                for i, x in enumerate(eqn.inputs)), eqn.out.aval.dtype)
    if key not in _checked:
        _checked[key] = _compiles_to(eqn)
    return _checked[key]


def _compiles_to(eqn) -> bool:
    names = {}
    try:
        node = _node(eqn, lambda v: _leaf(v, names))
        if node.astKind != _KINDS[eqn.out.aval.dtype]:
            return False
        _compile(node, names, list(_var_inputs(eqn).values()))
    except (TypeError, ValueError, NotImplementedError, KeyError):
        return False
    return True


def _compile(node, names, inputs):
    signature = [(names[id(v)], _SIGNATURE_TYPES[_KINDS[v.aval.dtype]]) for v in inputs]
    return numexpr.NumExpr(node, signature)


def numexpr_kernel(eqns, group, cache: dict) -> Kernel:
    """One numexpr program computing the group's root from its inputs (in ``group.inputs`` order).

    Groups that spell the same expression over inputs of the same dtypes share one compiled program
    through ``cache`` (numexpr's compiler takes ~70 us per operation; a chain repeats its groups).
    """
    root = eqns[group.root].out
    text = _text(eqns, group)
    key = (text, tuple(v.aval.dtype for v in group.inputs.values()))
    if key not in cache:
        names, env = {}, {}
        for v in group.inputs.values():
            _leaf(v, names)
        for k in group.members:
            eqn = eqns[k]
            env[id(eqn.out)] = _node(eqn, lambda v: env[id(v)] if id(v) in env else _leaf(v, names))
        cache[key] = _compile(env[id(root)], names, list(group.inputs.values()))
    return Kernel(cache[key], text, root.aval)


def _text(eqns, group) -> str:
    """The group as a readable expression, ``add(multiply(sin(a0), 1.01), 0.1)``, for the printer (and,
    with the inputs' dtypes, the key under which its compiled program is shared)."""
    names = {id(v): f"a{i}" for i, v in enumerate(group.inputs.values())}
    for k in group.members:
        eqn = eqns[k]
        args = ", ".join(repr(x.value) if isinstance(x, Literal) else names[id(x)] for x in eqn.inputs)
        names[id(eqn.out)] = f"{eqn.prim.name}({args})"
    return names[id(eqns[group.root].out)]


def _pays(eqns, group) -> bool:
    """The cost rule of the module docstring: saved call overhead against added per-element time."""
    aval = eqns[group.root].out.aval
    size = int(np.prod(aval.shape))
    if size >= MAX_ELEMENTS:
        return False
    column = 0 if aval.dtype == np.float32 else 1
    extra_ns = sum(_OPS[eqns[k].prim.name][1][column] for k in group.members)
    saved_us = OP_US * len(group.members) - CALL_US - INPUT_US * len(group.inputs)
    return saved_us > size * extra_ns * 1e-3


# ---- device fusion (CuPy's ``fuse``) -------------------------------------------------------------------
def device_fusible(eqn) -> bool:
    """Whether ``eqn`` is a candidate on a device backend that offers ``fuse`` (``cupy.fuse``). Run
    in the tests through the device double's ``fuse``; never on a real GPU yet."""
    backend = eqn.out.backend
    return backend is not np and hasattr(backend, "fuse") and _candidate(eqn)


def device_kernel(eqns, group) -> Kernel:
    """The group replayed by one ``fuse`` kernel of the operands' backend: each equation calls the
    backend's ufunc of its name, each literal is a NumPy scalar of the dtype NumPy 2 gives it."""
    xp = eqns[group.root].out.backend
    members = [eqns[k] for k in group.members]
    inputs = list(group.inputs.values())

    def body(*arrays):
        env = {id(v): a for v, a in zip(inputs, arrays)}
        for eqn in members:
            args = [literal_dtype(eqn, i).type(x.value) if isinstance(x, Literal) else env[id(x)]
                    for i, x in enumerate(eqn.inputs)]
            env[id(eqn.out)] = getattr(xp, eqn.prim.name)(*args)
        return env[id(members[-1].out)]
    return Kernel(xp.fuse(body), _text(eqns, group), eqns[group.root].out.aval)


# ---- the pass ----------------------------------------------------------------------------------------
def _fusible(eqn) -> bool:
    """numexpr for NumPy arrays, the backend's ``fuse`` for device arrays (never numexpr: it would
    read device memory through the buffer protocol). An equation with several outputs is never fused
    (a group has one output, its root's)."""
    if len(eqn.outs) != 1:
        return False
    return numexpr_fusible(eqn) if eqn.out.backend is np else device_fusible(eqn)


def fuse(program: Program) -> Program:
    """``program`` with each profitable elementwise group replaced by one ``fused`` equation.

    Returns ``program`` itself when nothing is fused (always, on CPU, when numexpr is not importable).
    The fused equation stands where the group's root stood and defines the root's variable, so the
    program's inputs, outputs and other equations are unchanged.
    """
    replaced, drop, compiled = {}, set(), {}
    for group in groups(program, _fusible):
        root = program.eqns[group.root].out
        if root.backend is np:
            if not _pays(program.eqns, group):
                continue
            try:
                kernel = numexpr_kernel(program.eqns, group, compiled)
            except (TypeError, ValueError, NotImplementedError):  # numexpr refuses it: leave it unfused
                continue
        else:
            kernel = device_kernel(program.eqns, group)
        replaced[group.root] = Eqn(fused_p, list(group.inputs.values()), {"kernel": kernel}, [root])
        drop.update(group.members)
    if not replaced:
        return program
    eqns = [replaced.get(k, eqn) for k, eqn in enumerate(program.eqns) if k in replaced or k not in drop]
    return Program(program.invars, program.constvars, program.consts, eqns, program.outputs)
