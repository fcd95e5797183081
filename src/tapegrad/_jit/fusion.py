"""Elementwise fusion: a group of elementwise equations whose intermediates are used only inside the
group becomes one equation of the ``fused`` primitive, which runs the whole group in one call
(``numexpr`` on CPU, a ``cupy.fuse`` kernel on GPU: any device backend with a ``fuse``).

Groups. Walking the program backwards, an elementwise equation joins the group of its consumers when
its output is not a program output and every consumer lies in that one group; otherwise it roots a
group of its own. Every member but the root then feeds only members, so a group is convex (no path
leaves it and comes back) and its one output is the root's: the fused equation takes the root's
place. A group is capped at ``MAX_INPUTS`` array inputs (numexpr's iterator takes at most 63) and
``MAX_OPS`` equations (numexpr builds its expression tree recursively).

Recomputation. A group may compute again, inside its kernel, an input that a few fusible equations
make from its other inputs, when that input is read outside the group too (``_recompute_inputs``):
a gradient's backward group otherwise reads every forward value it covers, and those extra readers
cut the forward chain into groups too small to pay. A second round then groups what is left, and the
forward chain fuses. numexpr's compiler writes a kernel's expression out as a tree (an operand read
twice is expanded twice), so a kernel whose tree would exceed ``MAX_TREE`` nodes is not built.

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
by the costs each primitive declares with its template (``def_fusion``). The crossover for
arithmetic groups is ~1000 elements; for ``sin`` (float32) ~150; a 3-operation group on 16 elements
breaks even (not fused), a 30-operation one saves ~6 us. On CuPy every group of 2 or more is fused
(a kernel launch costs ~10 us).

Sharing. A kernel is stored, once per process, under the group's canonical form (``_recipe``: the
operations in order, operands by position, literals by dtype and bits, the inputs' dtypes), so the
similar groups of a program (an optimiser's update of each Parameter, identical layers) and of other
programs build one kernel: one ``cupy.fuse`` object, which CuPy traces once per argument signature,
and whose kernel source names no group, so CuPy's on-disk cache finds it again in another process;
one numexpr compilation, copied into each program.

Fusion runs only on the program compiled for the executor (``jit`` keeps the unfused one for
``evaluate`` under outer transforms), so ``fused`` has an impl and an abstract eval but no
derivative rules. It is the last pass: after dead-code elimination, common-subexpression
elimination and constant folding, which change the use counts that decide the groups (a dead
``sum`` reading an intermediate would otherwise end a group there). A compiled numexpr program keeps
its registers in itself, so two threads must not run one at once: the executor of a program with
fused equations holds a lock while it runs (``codegen``).
"""
from __future__ import annotations

import collections
import functools
import operator
import threading
from typing import Any

import numpy as np

from tapegrad._core import Primitive, ShapedArray
from tapegrad._jit.program import Eqn, Literal, Program, Var

numexpr: Any  # both bound by _load_numexpr on first use (None where numexpr is not installed)
_nx: Any


@functools.cache
def _load_numexpr() -> None:
    """Import numexpr, an optional dependency, on first use: it costs about 20 ms, a large part of
    ``import tapegrad``, and only programs with fusible equations need it. Where it is not installed,
    ``numexpr`` and ``_nx`` are None and CPU programs are left unfused."""
    global numexpr, _nx
    try:
        import numexpr
        from numexpr import expressions as _nx
    except ImportError:  # pragma: no cover - exercised only where numexpr is absent
        numexpr = _nx = None


def __getattr__(name: str):
    """``fusion.numexpr`` read from outside (the tests' skip conditions) imports it (PEP 562)."""
    if name in ("numexpr", "_nx"):
        _load_numexpr()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

MAX_INPUTS = 32
MAX_OPS = 48
MAX_BODY = 2 * MAX_OPS  # equations in one kernel, counting those it recomputes
RECOMPUTE_DEPTH = 3  # how many equations deep a group may recompute one of its inputs
MAX_TREE = 1024  # nodes in a kernel's expression written out as a tree (numexpr's compiler expands it)
MAX_ELEMENTS = 2048  # numexpr runs serially below 2 * its block size (1024): no thread start-up
OP_US = 0.27  # a NumPy ufunc call with its line of generated code, saved per fused equation
CALL_US = 0.85  # one numexpr call, plus INPUT_US per input array
INPUT_US = 0.05
RECOMPUTE_US = 0.05  # one more operation inside a numexpr call on a few elements


# ---- the fused primitive ----------------------------------------------------------------------------
class Kernel:
    """One fused group: ``fn(*inputs)`` computes it; ``text`` spells the expression for the printer;
    ``key`` is its canonical form (:func:`_recipe`), under which ``fn`` is shared."""

    __slots__ = ("fn", "text", "aval", "key")

    def __init__(self, fn, text: str, aval: ShapedArray, key=None):
        self.fn, self.text, self.aval, self.key = fn, text, aval, key

    def __repr__(self):
        return self.text


fused_p = Primitive("fused")  # not registered: it exists only in programs compiled for the executor
fused_p.def_impl(lambda *inputs, kernel: kernel.fn(*inputs))
fused_p.def_abstract_eval(lambda *avals, kernel: kernel.aval)


# ---- numexpr's spelling of NumPy's elementwise functions --------------------------------------------
def _func(name):
    return lambda *args: _nx.functions[name](*args)


def _same_kind_func(name):
    """numexpr's ``maximum``/``minimum`` ask for float64 operands; their float32 opcodes exist too, and
    NaN propagates as in NumPy's."""
    return lambda *args: _nx.FuncNode(name, args, kind=_nx.commonKind(args))


def _reciprocal(x):
    one = np.float32(1) if x.astKind == "float" else np.float64(1)
    return _nx.ConstantNode(one) / x


# NumPy's name -> the numexpr expression it builds: the functions a fusion template (``def_fusion``) may use
_NUMEXPR = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
    "negative": operator.neg, "square": lambda x: x * x, "reciprocal": _reciprocal, "power": operator.pow,
    "equal": operator.eq, "not_equal": operator.ne, "less": operator.lt, "less_equal": operator.le,
    "greater": operator.gt, "greater_equal": operator.ge,
    "logical_and": operator.and_, "logical_or": operator.or_, "logical_not": operator.invert,
    "where": _func("where"), "maximum": _same_kind_func("maximum"), "minimum": _same_kind_func("minimum"),
    "absolute": _func("abs"), "sqrt": _func("sqrt"),
    "sin": _func("sin"), "cos": _func("cos"), "tan": _func("tan"),
    "arcsin": _func("arcsin"), "arccos": _func("arccos"), "arctan": _func("arctan"), "arctan2": _func("arctan2"),
    "sinh": _func("sinh"), "cosh": _func("cosh"), "tanh": _func("tanh"),
    "exp": _func("exp"), "expm1": _func("expm1"), "log": _func("log"), "log1p": _func("log1p"),
    "log10": _func("log10"),
}


def _node_of(x, dtype):
    """``x`` as a numexpr node; a Python number as a constant of the dtype NumPy 2 gives it beside
    operands of ``dtype`` (weak: ``float32 * 2.0`` stays float32; numexpr alone would make it float64)."""
    if isinstance(x, _Operand):
        return x.node
    if isinstance(x, (bool, int, float)) and dtype is not None:
        return _nx.ConstantNode(np.result_type(dtype, x).type(x))
    return x


def _weak(builder):
    """``builder`` (one of :data:`_NUMEXPR`) on :class:`_Operand` and Python numbers."""
    def build(*args):
        dtypes = [_DTYPES[a.node.astKind] for a in args if isinstance(a, _Operand)]
        dtype = np.result_type(*dtypes) if dtypes else None
        return _Operand(builder(*[_node_of(a, dtype) for a in args]))
    return build


def _reflected(builder):
    return _weak(lambda x, y: builder(y, x))


class _Operand:
    """A numexpr expression inside a fusion template: Python numbers it meets are weakly typed."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    __add__, __radd__ = _weak(operator.add), _reflected(operator.add)
    __sub__, __rsub__ = _weak(operator.sub), _reflected(operator.sub)
    __mul__, __rmul__ = _weak(operator.mul), _reflected(operator.mul)
    __truediv__, __rtruediv__ = _weak(operator.truediv), _reflected(operator.truediv)
    __pow__, __rpow__ = _weak(operator.pow), _reflected(operator.pow)
    __and__, __rand__ = _weak(operator.and_), _reflected(operator.and_)
    __or__, __ror__ = _weak(operator.or_), _reflected(operator.or_)
    __eq__, __ne__ = _weak(operator.eq), _weak(operator.ne)
    __lt__, __le__ = _weak(operator.lt), _weak(operator.le)
    __gt__, __ge__ = _weak(operator.gt), _weak(operator.ge)
    __neg__, __invert__ = _weak(operator.neg), _weak(operator.invert)
    __hash__ = None  # type: ignore[assignment]  # unhashable, as arrays are: == builds an expression


class _Namespace:
    """The ``f`` of a fusion template on CPU: NumPy's names, building numexpr expressions."""

    def __getattr__(self, name):
        try:
            return _WEAK[name]
        except KeyError:
            raise AttributeError(f"numexpr fusion has no {name!r}; it has {sorted(_NUMEXPR)}") from None


_WEAK = {name: _weak(builder) for name, builder in _NUMEXPR.items()}
_NUMEXPR_NAMESPACE = _Namespace()


def _apply(template, f, args, params):
    """A fusion template applied to ``args``: ``template`` names one of ``f``'s functions, or builds
    the result from them (``def_fusion``)."""
    if isinstance(template, str):
        return getattr(f, template)(*args, **params)
    return template(f, *args, **params)


_KINDS = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.bool_): "bool"}
_DTYPES = {"bool": np.dtype(np.bool_), "int": np.dtype(np.int32), "long": np.dtype(np.int64),
           "float": np.dtype(np.float32), "double": np.dtype(np.float64)}
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
    """Whether ``eqn`` may be fused at all: an elementwise primitive with a fusion template, over
    float32/float64/bool arrays of one backend, with no scalar output (NumPy gives a scalar there,
    numexpr a 0-d array)."""
    if eqn.prim.fusion is None or not eqn.out.aval.shape or not _is_typed(eqn.out):
        return False
    variables = [x for x in eqn.inputs if isinstance(x, Var)]
    return (bool(variables) and all(_is_typed(v) and v.backend is eqn.out.backend for v in variables)
            and all(isinstance(x.value, (bool, int, float)) for x in eqn.inputs if isinstance(x, Literal)))


# ---- grouping ----------------------------------------------------------------------------------------
class _Group:
    __slots__ = ("root", "members", "inputs", "copies")

    def __init__(self, root: int):
        self.members: list
        self.inputs: dict
        self.root, self.members, self.inputs = root, [], {}  # inputs: id(var) -> var, ordered
        self.copies: list
        self.copies = []  # equations recomputed inside the group, which stay in the program too

    def body(self) -> list:
        """The indices of the equations the kernel computes, in program order."""
        return sorted(self.members + self.copies) if self.copies else self.members


def _var_inputs(eqn):
    return {id(x): x for x in eqn.inputs if isinstance(x, Var)}


def groups(program: Program, fusible, recompute=None) -> list:
    """The fusion groups of ``program`` (of 2 or more equations), as :class:`_Group` with their members'
    indices in program order and their external inputs. With ``recompute(eqn)`` (whether ``eqn`` may
    be computed twice), each group then recomputes the inputs it can (:func:`_recompute_inputs`)."""
    consumers: dict
    consumers, producer = {}, {}
    for k, eqn in enumerate(program.eqns):
        for x in eqn.inputs:
            if isinstance(x, Var):
                consumers.setdefault(id(x), set()).add(k)
        if len(eqn.outs) == 1:
            producer[id(eqn.out)] = k
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    group_of: dict = {}
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
        if recompute is not None:
            _recompute_inputs(program, g, consumers, producer, recompute)
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


# ---- recomputation -------------------------------------------------------------------------------------
def _recompute_inputs(program: Program, group: _Group, consumers: dict, producer: dict, recompute) -> None:
    """Let ``group`` compute again, from its other inputs, each input that at most ``RECOMPUTE_DEPTH``
    equations make from them, when something outside the group reads that input too (its equations
    stay in the program, so nothing computed once is lost). Each such input is one operand fewer; and
    a value no group reads any more may join the group of its other readers in a second round.

    The case this is for: a gradient's backward group reads the forward value of every step it
    covers (``cos(x_k)`` for ``sin``), so each forward step ends a group of its own, three NumPy
    calls that do not pay for a numexpr call. Recomputing ``x_k`` from ``x_(k-1)`` inside the
    backward group (three operations, ~0.04 us each on a few elements) leaves one forward value per
    group read outside the forward chain, which then fuses in long groups.
    """
    members = set(group.members)
    available = set(group.inputs) | {id(program.eqns[k].out) for k in group.members}
    for k in sorted(producer[i] for i in group.inputs if i in producer):
        v = program.eqns[k].out
        if consumers[id(v)] <= members:  # read only here: it would be computed twice for nothing
            continue
        cone = _cone(program, producer, k, available - {id(v)}, recompute, RECOMPUTE_DEPTH)
        if cone is None or len(group.members) + len(group.copies) + len(cone) > MAX_BODY:
            continue
        group.copies.extend(cone)
        operand = group.inputs.pop(id(v))
        if tree_size(program.eqns, group) > MAX_TREE:  # each reader of v would now expand v's cone
            del group.copies[-len(cone):]
            group.inputs[id(v)] = operand
            continue
        available.update(id(program.eqns[j].out) for j in cone)


def tree_size(eqns, group: _Group) -> int:
    """How many nodes the group's expression has written out as a tree, as numexpr's compiler
    writes it before merging repeats: an operand read twice counts twice, so a chain of ``x * x``
    doubles at each step."""
    size: dict = {}
    for k in group.body():
        size[id(eqns[k].out)] = 1 + sum(size.get(id(x), 1) for x in eqns[k].inputs)
    return size[id(eqns[group.root].out)]


def _cone(program: Program, producer: dict, k: int, available: set, recompute, depth: int):
    """The indices of the equations (``k`` and what it needs) that compute ``k``'s result from the
    values in ``available``, at most ``depth`` deep, each allowed by ``recompute``; or None."""
    eqn = program.eqns[k]
    if depth == 0 or not recompute(eqn):
        return None
    cone = {k}
    for x in _var_inputs(eqn).values():
        if id(x) in available:
            continue
        if id(x) not in producer:  # a program input or constant the group does not read
            return None
        inner = _cone(program, producer, producer[id(x)], available, recompute, depth - 1)
        if inner is None:
            return None
        cone.update(inner)
    return cone


# ---- numexpr (CPU) -----------------------------------------------------------------------------------
def _leaf(var, names):
    if id(var) not in names:
        names[id(var)] = f"a{len(names)}"
    return _nx.VariableNode(names[id(var)], _KINDS[var.aval.dtype])


def _node(eqn, read):
    """The numexpr expression node of ``eqn``, its operands read by ``read(var)``."""
    args = [_nx.ConstantNode(literal_dtype(eqn, i).type(x.value)) if isinstance(x, Literal) else read(x)
            for i, x in enumerate(eqn.inputs)]
    out = _apply(eqn.prim.fusion.template, _NUMEXPR_NAMESPACE, [_Operand(a) for a in args], eqn.params)
    return _node_of(out, None)


_checked: dict = {}  # (primitive, params, operand kinds/literal dtypes, output dtype) -> whether numexpr runs it with
#               NumPy's output dtype


def numexpr_fusible(eqn) -> bool:
    """Whether ``eqn`` is a candidate that numexpr computes with NumPy's output dtype (checked once per
    primitive and operand types, by compiling it)."""
    if not _candidate(eqn) or eqn.out.backend is not np:
        return False
    _load_numexpr()
    if _nx is None:
        return False
    operands = tuple(x.aval.dtype if isinstance(x, Var) else literal_dtype(eqn, i) for i, x in enumerate(eqn.inputs))
    key = (eqn.prim, tuple(sorted(eqn.params.items())), operands, eqn.out.aval.dtype)
    if key not in _checked:
        _checked[key] = _compiles_to(eqn)
    return _checked[key]


def _compiles_to(eqn) -> bool:
    names: dict = {}
    try:
        node = _node(eqn, lambda v: _leaf(v, names))
        if node.astKind != _KINDS[eqn.out.aval.dtype]:
            return False
        _compile(node, names, list(_var_inputs(eqn).values()))
    except (TypeError, ValueError, NotImplementedError, KeyError, AttributeError):
        return False
    return True


def _compile(node, names, inputs):
    signature = [(names[id(v)], _SIGNATURE_TYPES[_KINDS[v.aval.dtype]]) for v in inputs]
    return numexpr.NumExpr(node, signature)


def numexpr_kernel(eqns, group, cache: dict) -> Kernel:
    """One numexpr program computing the group's root from its inputs (in ``group.inputs`` order).

    numexpr's compiler takes ~70 us per operation, and a program repeats its groups (a chain, an
    optimiser's update of each Parameter), so a compiled expression is shared under the group's
    canonical form (:func:`_recipe`): compiled once per process (:func:`_shared`), then copied into
    each program that uses it (``cache``, one per program: ~1 us), never shared between programs. A
    numexpr program keeps its registers in itself, and each program runs under its own lock
    (``codegen``), so two programs must not hold the same one.
    """
    root = eqns[group.root].out
    key, _ = _recipe(eqns, group, np)
    if key is None or key not in cache:
        def build():
            names: dict
            env: dict
            names, env = {}, {}
            for v in group.inputs.values():
                _leaf(v, names)
            for k in group.body():
                eqn = eqns[k]
                env[id(eqn.out)] = _node(eqn, lambda v: env[id(v)] if id(v) in env else _leaf(v, names))
            return _compile(env[id(root)], names, list(group.inputs.values()))
        compiled = _copy(_shared(key, build))
        if key is None:
            return Kernel(compiled, _text(eqns, group), root.aval)
        cache[key] = compiled
    return Kernel(cache[key], _text(eqns, group), root.aval, key)


def _copy(compiled):
    """A numexpr program of its own (registers included) with ``compiled``'s code and constants."""
    return numexpr.interpreter.NumExpr(compiled.signature, compiled.tempsig, compiled.program,
                                       compiled.constants, compiled.input_names)


def _text(eqns, group) -> str:
    """The group as a readable expression, ``add(multiply(sin(a0), 1.01), 0.1)``, for the printer."""
    names = {id(v): f"a{i}" for i, v in enumerate(group.inputs.values())}
    for k in group.body():
        eqn = eqns[k]
        args = [repr(x.value) if isinstance(x, Literal) else names[id(x)] for x in eqn.inputs]
        args = ", ".join(args + [f"{k}={v!r}" for k, v in sorted(eqn.params.items())])
        names[id(eqn.out)] = f"{eqn.prim.name}({args})"
    return names[id(eqns[group.root].out)]


def _pays(eqns, group) -> bool:
    """The cost rule of the module docstring: saved call overhead against added per-element time."""
    aval = eqns[group.root].out.aval
    size = int(np.prod(aval.shape))
    if size >= MAX_ELEMENTS:
        return False
    column = 0 if aval.dtype == np.float32 else 1
    extra_ns = sum(eqns[k].prim.fusion.extra_ns[column] for k in group.body())
    saved_us = OP_US * len(group.members) - CALL_US - INPUT_US * len(group.inputs) - RECOMPUTE_US * len(group.copies)
    return saved_us > size * extra_ns * 1e-3


def _recomputable(eqn) -> bool:
    """Whether a NumPy group may compute ``eqn`` again (``_recompute_inputs``): a candidate whose
    numexpr cost on its elements stays under the NumPy call it would otherwise be."""
    if eqn.out.backend is not np or not numexpr_fusible(eqn):
        return False
    size = int(np.prod(eqn.out.aval.shape))
    column = 0 if eqn.out.aval.dtype == np.float32 else 1
    return RECOMPUTE_US + size * eqn.prim.fusion.extra_ns[column] * 1e-3 < OP_US


# ---- device fusion (CuPy's ``fuse``) -------------------------------------------------------------------
def device_fusible(eqn) -> bool:
    """Whether ``eqn`` is a candidate on a device backend that offers ``fuse`` (``cupy.fuse``). Run
    in the tests through the device double's ``fuse``; never on a real GPU yet."""
    backend = eqn.out.backend
    return backend is not np and hasattr(backend, "fuse") and _candidate(eqn)


def device_kernel(eqns, group) -> Kernel:
    """The group replayed by one ``fuse`` kernel of the operands' backend: each equation applies its
    fusion template with the backend's functions, each literal is a NumPy scalar of the dtype NumPy 2
    gives it. Groups of one canonical form (:func:`_recipe`) share one ``fuse`` object
    (:func:`_shared`), in this program and in every other: CuPy traces and builds a kernel once per
    ``fuse`` object and argument signature (dtypes and ndims), and names it after the function it
    fuses, the same for every group, so identical groups give identical kernel sources, which CuPy's
    on-disk cache (``CUPY_CACHE_DIR``) finds again in the next process."""
    xp = eqns[group.root].out.backend
    key, steps = _recipe(eqns, group, xp)
    fn = _shared(key, lambda: xp.fuse(_replay(xp, steps)))
    return Kernel(fn, _text(eqns, group), eqns[group.root].out.aval, key)


def _replay(xp, steps):
    """The function that ``fuse`` traces: ``steps`` (:func:`_recipe`) applied with ``xp``'s functions
    to its arguments. It reads no variable of the program, so it outlives it, and its name, which
    CuPy gives the kernel, is the same for every group."""
    def fused(*arrays):
        values = list(arrays)
        for template, params, operands in steps:
            values.append(_apply(template, xp, [values[o] if type(o) is int else o for o in operands], params))
        return values[-1]
    return fused


# ---- kernels shared between groups and programs --------------------------------------------------------
def _recipe(eqns, group, backend):
    """``(key, steps)``: the group's canonical form. ``steps`` lists, in program order, each equation
    of the kernel as ``(template, params, operands)``, an operand being the position of an input
    (``0 .. n-1``) or of an earlier step's result (``n + j``), or a literal as the NumPy scalar of the
    dtype NumPy 2 gives it. ``key`` is hashable and equal for two groups exactly when they compute the
    same expression of inputs of the same dtypes on the same backend: templates, parameters (with
    their types), literals by dtype and bits (``-0.0`` is not ``0.0``), no name or id of the program.
    The inputs' ndims and shapes are not in it: ``cupy.fuse`` keys its kernels by ndim itself, and
    numexpr's programs take any shape. None when a parameter is unhashable (the kernel is then not
    shared)."""
    position = {id(v): i for i, v in enumerate(group.inputs.values())}
    steps, step_keys = [], []
    for k in group.body():
        eqn = eqns[k]
        operands: list
        operand_keys: list
        operands, operand_keys = [], []
        for i, x in enumerate(eqn.inputs):
            if isinstance(x, Literal):
                scalar = literal_dtype(eqn, i).type(x.value)
                operands.append(scalar)
                operand_keys.append((scalar.dtype.str, scalar.tobytes()))
            else:
                operands.append(position[id(x)])
                operand_keys.append(position[id(x)])
        position[id(eqn.out)] = len(position)
        params = tuple((name, type(value), value) for name, value in sorted(eqn.params.items()))
        steps.append((eqn.prim.fusion.template, eqn.params, operands))
        step_keys.append((eqn.prim.fusion.template, params, tuple(operand_keys)))
    key = (backend, tuple(v.aval.dtype for v in group.inputs.values()), tuple(step_keys))
    try:
        hash(key)
    except TypeError:
        return None, steps
    return key, steps


def kernel_recipe(kernel: Kernel) -> str:
    """``kernel``'s canonical form as text, the same in every process (for tests and debugging)."""
    if kernel.key is None:
        return "<not shared>"
    backend, dtypes, steps = kernel.key

    def spell(x):
        if isinstance(x, str) or not callable(x):
            return repr(x)
        return f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', '?')}"
    lines = [f"{backend.__name__} ({', '.join(d.name for d in dtypes)})"]
    for n, (template, params, operands) in enumerate(steps, len(dtypes)):
        args = [f"%{x}" if type(x) is int else f"{x[0]}:{x[1].hex()}" for x in operands]
        args += [f"{name}={spell(value)}" for name, _, value in params]
        lines.append(f"  %{n} = {spell(template)}({', '.join(args)})")
    return "\n".join(lines)


MAX_KERNELS = 1024
_kernels: collections.OrderedDict = collections.OrderedDict()  # key -> fuse object or compiled numexpr
_kernels_lock = threading.Lock()


def _shared(key, build):
    """The kernel stored under ``key``, built by ``build()`` at the first request (``key`` None: built
    and not stored). The store keeps the ``MAX_KERNELS`` most recently used: a program staged for
    each new value of a literal (a static argument, a closed-over float) would otherwise add kernels
    without end; an evicted kernel lives on in the programs that use it, and only a later group of
    its form builds it again."""
    if key is None:
        return build()
    with _kernels_lock:
        if key in _kernels:
            _kernels.move_to_end(key)
            return _kernels[key]
    kernel = build()  # outside the lock: compiling takes a while, and another thread's build is as good
    with _kernels_lock:
        kernel = _kernels.setdefault(key, kernel)
        _kernels.move_to_end(key)
        while len(_kernels) > MAX_KERNELS:
            _kernels.popitem(last=False)
    return kernel


def clear_kernel_cache() -> None:
    """Forget the shared kernels (programs keep theirs): the next groups build theirs again."""
    with _kernels_lock:
        _kernels.clear()


def kernel_cache_size() -> int:
    return len(_kernels)


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
    program's inputs, outputs and other equations are unchanged. When a kernel recomputes some of its
    inputs (``_recompute_inputs``), a second round groups what is left unfused: the values those
    inputs were may now be read by one group only.
    """
    compiled: dict = {}
    fused, recomputed = _fuse_round(program, compiled, _recomputable)
    return _fuse_round(fused, compiled, None)[0] if recomputed else fused


def _fuse_round(program: Program, compiled: dict, recompute):
    """One grouping of ``program`` and the replacement of the groups that pay: ``(program, whether a
    kernel recomputes an input)``."""
    replaced, drop, recomputed = {}, set(), False
    for group in groups(program, _fusible, recompute):
        root = program.eqns[group.root].out
        if root.backend is np:
            if not _pays(program.eqns, group) or tree_size(program.eqns, group) > MAX_TREE:
                continue  # (a larger tree takes numexpr's compiler seconds)
            try:
                kernel = numexpr_kernel(program.eqns, group, compiled)
            except (TypeError, ValueError, NotImplementedError):  # numexpr refuses it: leave it unfused
                continue
        else:
            kernel = device_kernel(program.eqns, group)
        replaced[group.root] = Eqn(fused_p, list(group.inputs.values()), {"kernel": kernel}, [root])
        drop.update(group.members)
        recomputed = recomputed or bool(group.copies)
    if not replaced:
        return program, False
    eqns = [replaced.get(k, eqn) for k, eqn in enumerate(program.eqns) if k in replaced or k not in drop]
    return Program(program.invars, program.constvars, program.consts, eqns, program.outputs), recomputed
