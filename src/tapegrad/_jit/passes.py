"""Program passes: each a function from a program to an equivalent program, run once per compile.

- :func:`dce` (dead-code elimination) drops the equations and constants no output needs;
- :func:`cse` (common-subexpression elimination) computes each distinct equation once;
- :func:`fold_constants` evaluates, at compile time, the equations whose operands are all constants;
- :func:`elide_broadcasts` lets elementwise equations broadcast their operands themselves;
- :func:`optimize` runs them in order.

Programs are values: a pass builds a new :class:`Program` and never mutates the one it is given (``jit``
keeps the unoptimised program for ``evaluate``). Unchanged equations and all variables are shared
between the two, so no later pass may mutate them either. Every pass is one or two linear walks over
the equations with dicts keyed by variable identity.

The passes rely on every primitive being pure (its result depends on its operands and parameters only,
and it has no effect): true of all of tapegrad's primitives, none of which draws random numbers or
writes into its operands.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._jit import fusion
from tapegrad._jit.program import Eqn, Literal, Program, Var

# Fold an equation only when its result has at most this many elements, or no more than its constant
# operands hold together: folding then never makes the program's constants much larger than they were
# (``broadcast_to`` of a scalar to a large shape stays a cheap view computed at each call).
FOLD_LIMIT = 1 << 16


def optimize(program: Program, fuse: bool = True) -> Program:
    """The pass pipeline run before a program is compiled.

    Dead code goes first (a gradient's program carries forward values that nothing reads, and folding
    or comparing them would be wasted work); then duplicates are merged, so that a constant expression
    written twice is folded once; folding last leaves the constants it consumed unused, which the final
    dead-code pass drops, with the ``broadcast_to`` equations that elementwise equations no longer
    read. Elementwise fusion comes last: the groups it forms depend on the use counts
    that the other passes settle; ``fuse=False`` leaves it out (numba's compiled executor fuses on
    its own).
    """
    program = dce(elide_broadcasts(fold_constants(cse(dce(program)))))
    return fusion.fuse(program) if fuse else program


# ---- dead-code elimination -----------------------------------------------------------------------
DCE_RULES: dict = {}  # primitive -> rule(eqn, used) -> an equation computing fewer results, or None


def def_dce(prim, rule) -> None:
    """Let :func:`dce` shrink an equation of ``prim`` (several results) some of whose results nothing
    reads: ``rule(eqn, used)``, ``used`` one bool per result, returns an equivalent equation whose
    outputs are a subset of ``eqn.outs`` including every used one (``scan`` drops the unread ``ys``
    from its body), or None to keep ``eqn``."""
    DCE_RULES[prim] = rule


def dce(program: Program) -> Program:
    """Drop the equations whose outputs no program output needs, directly or through other equations
    (an equation with several outputs stays when any one is needed, shrunk by its primitive's rule
    where it has one: :func:`def_dce`), and the constants nothing reads any more. The inputs stay as
    they are: the call signature of the program does not change."""
    live = {id(x) for x in program.outputs if isinstance(x, Var)}
    kept = []
    for eqn in reversed(program.eqns):
        if eqn.prim.effectful or _any_in(eqn.outs, live):
            rule = DCE_RULES.get(eqn.prim)
            if rule is not None:
                used = [id(out) in live for out in eqn.outs]
                eqn = (None if all(used) else rule(eqn, used)) or eqn
            kept.append(eqn)
            live.update(id(x) for x in eqn.inputs if isinstance(x, Var))
    kept.reverse()
    constvars, consts = [], []
    for v, c in zip(program.constvars, program.consts):
        if id(v) in live:
            constvars.append(v)
            consts.append(c)
    return Program(list(program.invars), constvars, consts, kept, list(program.outputs))


# ---- common-subexpression elimination ------------------------------------------------------------
def cse(program: Program) -> Program:
    """Compute once each equation that repeats an earlier one: the same primitive, the same parameters
    and the same operands (the same variables, after renaming; literals equal in value *and* type, as
    ``x * 2`` and ``x * 2.0`` promote differently). Later uses of the repeat read the first result.

    One exception keeps aliasing as it was: when a result of both is a program output, merging them
    would return one array object twice where the function returned two (and a caller writing into
    one would change the other), so the repeat is computed again.
    """
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    rename: dict = {}  # id of a dropped equation's output -> the variable that replaces it
    seen: dict = {}  # equation key -> the outputs of its first occurrence
    eqns = []
    for eqn in program.eqns:
        inputs = [rename.get(id(x), x) if isinstance(x, Var) else x for x in eqn.inputs]
        key = _eqn_key(eqn, inputs)
        first = seen.get(key) if key is not None else None
        if first is not None and not (_any_in(first, outputs) and _any_in(eqn.outs, outputs)):
            rename.update((id(out), earlier) for out, earlier in zip(eqn.outs, first))
            continue
        if key is not None and first is None:
            seen[key] = eqn.outs
        changed = any(a is not b for a, b in zip(inputs, eqn.inputs))
        eqns.append(Eqn(eqn.prim, inputs, eqn.params, eqn.outs) if changed else eqn)
    outs = [rename.get(id(x), x) if isinstance(x, Var) else x for x in program.outputs]
    return Program(list(program.invars), list(program.constvars), list(program.consts), eqns, outs)


def _any_in(variables, ids) -> bool:
    """Whether any of ``variables`` (an equation's outputs) has its id in ``ids``."""
    if len(variables) == 1:  # most equations: no generator to build
        return id(variables[0]) in ids
    return any(id(v) in ids for v in variables)


def _eqn_key(eqn: Eqn, inputs):
    """What makes two equations compute the same value, hashable; None when a parameter is not
    hashable (that equation is then never merged)."""
    if eqn.prim.effectful:  # two prints of one value print twice
        return None
    operands = tuple(_literal_key(x.value) if isinstance(x, Literal) else id(x) for x in inputs)
    try:
        params = tuple(sorted((k, _value_key(v)) for k, v in eqn.params.items()))
        key = (eqn.prim, params, operands)
        hash(key)
    except TypeError:
        return None
    return key


def _literal_key(value):
    # the type tells 2 from 2.0 and True from 1; repr tells 0.0 from -0.0 (equal, but 1 / x differs)
    # and is exact for floats, so distinct values never share a key
    return ("literal", type(value), repr(value))


def _value_key(value):
    """A parameter's value with the type of every part spelled out, so that parameters equal under
    ``==`` but not interchangeable (``1`` and ``1.0``, ``0.0`` and ``-0.0``) do not match."""
    if isinstance(value, tuple):
        return (tuple, tuple(_value_key(v) for v in value))
    if isinstance(value, (float, complex)):
        return _literal_key(value)
    return (type(value), value)


# ---- constant folding ----------------------------------------------------------------------------
def fold_constants(program: Program) -> Program:
    """Evaluate at compile time, with the primitive's ``impl``, each equation whose operands are all
    constants or literals (at least one a constant, which fixes the backend); its output variable
    becomes a constant of the program. Constants left unread stay until :func:`dce` drops them.

    Not folded: an equation whose result would be large (more than ``FOLD_LIMIT`` elements and more
    than its constant operands hold), one whose ``impl`` raises (the call will raise as it did), and
    one defining a program output (the call returns a fresh array each time, not one shared constant
    that a caller could write into). An equation with several outputs folds into as many constants.
    """
    constvars, consts = list(program.constvars), list(program.consts)
    values = {id(v): c for v, c in zip(constvars, consts)}
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    eqns = []
    for eqn in program.eqns:
        results = _fold(eqn, values) if not _any_in(eqn.outs, outputs) else None
        if results is None:
            eqns.append(eqn)
            continue
        for out, value in zip(eqn.outs, results):
            values[id(out)] = value
            constvars.append(out)
            consts.append(value)
    return Program(list(program.invars), constvars, consts, eqns, list(program.outputs))


def _fold(eqn: Eqn, values: dict):
    """The list of ``eqn``'s results when it can be folded, else None."""
    args, size = [], 0
    for x in eqn.inputs:
        if isinstance(x, Literal):
            args.append(x.value)
        elif id(x) in values:
            args.append(values[id(x)])
            size += math.prod(x.aval.shape)
        else:
            return None
    if not any(isinstance(x, Var) for x in eqn.inputs) or eqn.prim.effectful:
        return None  # literals only: no constant tells which backend to compute on; an effect runs at run time
    if sum(math.prod(out.aval.shape) for out in eqn.outs) > max(FOLD_LIMIT, size):
        return None
    try:
        result = eqn.prim.impl(*args, **eqn.params)
        return result if eqn.prim.multiple_results else [result]
    except Exception:  # noqa: BLE001 — any error is the call's to raise, at run time, as before folding
        return None


# ---- broadcasts the elementwise equations do themselves -----------------------------------------------
def elide_broadcasts(program: Program) -> Program:
    """Let each elementwise equation (a primitive with a fusion template, which broadcasts as NumPy
    does) read the operand of a ``broadcast_to`` instead of its result, where its operands still
    broadcast to its own shape: the values are the same, and NumPy's ``broadcast_to`` is a Python
    function that costs a few microseconds a call. A gradient has one for each ``sum`` or ``mean``
    it goes back through. The ``broadcast_to`` stays for its other readers; :func:`dce` drops it if
    there are none. Only a broadcast of an operand of the same dtype: a weakly typed Python scalar
    read directly would promote as one (``float32 * 2.0`` stays float32)."""
    operand = {}  # id of a broadcast_to result -> the variable it broadcasts
    eqns = []
    for eqn in program.eqns:
        if eqn.prim.name == "broadcast_to" and isinstance(eqn.inputs[0], Var) and _same_dtype(eqn.inputs[0], eqn.out):
            operand[id(eqn.out)] = eqn.inputs[0]
        elif eqn.prim.fusion is not None and any(isinstance(x, Var) and id(x) in operand for x in eqn.inputs):
            inputs = [operand.get(id(x), x) if isinstance(x, Var) else x for x in eqn.inputs]
            shapes = [tuple(x.aval.shape) for x in inputs if isinstance(x, Var)]
            if np.broadcast_shapes(*shapes) == tuple(eqn.out.aval.shape):
                eqn = Eqn(eqn.prim, inputs, eqn.params, eqn.outs)
        eqns.append(eqn)
    return Program(list(program.invars), list(program.constvars), list(program.consts), eqns, list(program.outputs))


def _same_dtype(x: Var, y: Var) -> bool:
    return isinstance(x.aval.dtype, np.dtype) and x.aval.dtype == y.aval.dtype
