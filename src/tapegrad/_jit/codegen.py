"""The executor: a program becomes the source of one Python function, compiled once, that calls each
equation's backend implementation directly (no ``bind``, no trace, no per-op dispatch).

Each equation is one line ``v7 = f3(v2, l0)`` (``v3_0, v3_1 = f3(v2)`` for a primitive with several
results): ``f3`` is the primitive's ``impl`` with its static parameters bound beforehand
(``functools.partial``; a fused group's kernel is called directly), ``l0`` a literal, ``c0`` a
constant; all are globals of the generated function. A variable's last use frees it (``del``) so that
its buffer can go back to the allocator as soon as possible.

Two things make the lines cheaper than the equations they come from:

- a Python-scalar operand of a NumPy ufunc over float arrays is passed as a 0-d array of the dtype
  NumPy 2 gives it (``float32 * 1.01`` multiplies by ``float32(1.01)``: the same numbers), which
  NumPy takes ~0.25 us faster than a Python float, ~0.15 us faster than a NumPy scalar;
- buffer reuse (``buffers.py``): a ufunc writes its result into the buffer of a dead intermediate, or
  of a donated input, passed as its ``out`` argument.

A program with fused numexpr equations (``fusion.py``) runs under a lock: a compiled numexpr program
keeps its registers in itself and must not run in two threads at once.

``evaluate`` is the other way to run a program: through ``bind``, equation by equation, so that an
outer transform (``grad``, ``vmap``, ``jvp``, another ``jit``) sees primitives.
"""
from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

from tapegrad._core import bind
from tapegrad._jit import buffers
from tapegrad._jit.fusion import fused_p, literal_dtype
from tapegrad._jit.program import Literal, Program, Var

_OUT_BY_KEYWORD = (np.maximum, np.minimum)  # a third positional argument is deprecated (NumPy 2.4)


def _bound_impl(eqn):
    if eqn.prim is fused_p:
        return eqn.params["kernel"].fn
    return functools.partial(eqn.prim.impl, **eqn.params) if eqn.params else eqn.prim.impl


@functools.cache
def _one_input_type(ufunc: np.ufunc) -> bool:
    """Whether each of ``ufunc``'s loops takes one type for all its inputs (``ff->f``): then a weak
    scalar operand computes in the arrays' type. A mixed loop (``ldexp``'s ``fi->f``) wants the scalar
    in a type of its own, which only NumPy's own resolution of the Python scalar finds."""
    numeric = [t.split("->")[0] for t in ufunc.types if not set(t) & set("OmM")]  # objects, datetimes aside
    return all(len(set(inputs)) == 1 for inputs in numeric)


def _literal(eqn, position: int):
    """The value passed for the literal operand at ``position``: a 0-d array of NumPy 2's dtype for it
    when the impl is a NumPy ufunc with one input type per loop over float (or complex) arrays, else
    the Python scalar itself."""
    value = eqn.inputs[position].value
    variables = [x for x in eqn.inputs if isinstance(x, Var)]
    if (isinstance(eqn.prim.impl, np.ufunc) and _one_input_type(eqn.prim.impl) and variables
            and type(value) in (bool, int, float)
            and all(v.backend is np and isinstance(v.aval.dtype, np.dtype) and v.aval.dtype.kind in "fc"
                    for v in variables)):
        return np.asarray(value, literal_dtype(eqn, position))
    return value


def _donatable(x, others):
    """``x`` itself when its buffer may be written: a writeable NumPy array that owns its memory and
    that shares none with the other inputs and the constants; else None (the equation allocates)."""
    if type(x) is not np.ndarray or not x.flags.writeable or x.base is not None:
        return None
    for o in others:  # x owns its memory: only x itself, or a view (base set) of it, can overlap it
        if o is x or isinstance(o, np.ndarray) and o.base is not None and np.may_share_memory(o, x):
            return None
    return x


def source(program: Program, donate=()):
    """``(text, namespace)``: the generated function ``run(*inputs)`` and the globals it needs.

    ``donate`` lists the indices of inputs whose buffers equations may write into (after their last
    use); each is checked once per call (:func:`_donatable`).
    """
    names: dict
    namespace: dict[str, Any]
    names, namespace = {}, {"_donatable": _donatable}

    def name_of(eqn, i):
        x = eqn.inputs[i]
        if isinstance(x, Literal):
            key = f"l{len(namespace)}"
            namespace[key] = _literal(eqn, i)
            return key
        return names[id(x)]

    for k, v in enumerate(program.invars):
        names[id(v)] = f"a{k}"
    for k, (v, c) in enumerate(zip(program.constvars, program.consts)):
        names[id(v)] = f"c{k}"
        namespace[f"c{k}"] = c
    reuse = buffers.plan(program, donate)
    lines = [f"def run({', '.join(names[id(v)] for v in program.invars)}):"]
    prologue, donated = _donation_prologue(program, reuse)
    lines += prologue
    held = {id(v): k for k, v in reuse.items()}  # a reused buffer's holder lives until its reuse
    dels = _deletions(program, held)
    for k, eqn in enumerate(program.eqns):
        fn = f"f{k}"
        namespace[fn] = buffers.out_impl(eqn) if k in reuse else _bound_impl(eqn)
        args = [name_of(eqn, i) for i in range(len(eqn.inputs))]
        if k in reuse:  # positional: cheaper to parse than out=, except where NumPy deprecates it
            holder = donated.get(id(reuse[k])) or names[id(reuse[k])]
            args.append(f"out={holder}" if namespace[fn] in _OUT_BY_KEYWORD else holder)
        if eqn.prim.multiple_results:
            for i, result in enumerate(eqn.outs):
                names[id(result)] = f"v{k}_{i}"
            targets = ", ".join(names[id(result)] for result in eqn.outs) + ("," if len(eqn.outs) == 1 else "")
        else:
            names[id(eqn.out)] = targets = f"v{k}"
        # no targets: an equation with no results (a host callback), called for its effect
        lines.append(f"    {targets} = {fn}({', '.join(args)})" if targets else f"    {fn}({', '.join(args)})")
        dead = [names[id(x)] for x in dels.get(k, ()) if names[id(x)].startswith("v")]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    outputs = [names[id(x)] if isinstance(x, Var) else _output_literal(namespace, x) for x in program.outputs]
    lines.append(f"    return [{', '.join(outputs)}]")
    if any(eqn.prim is fused_p and eqn.out.backend is np for eqn in program.eqns):
        # a numexpr program keeps its registers in itself: two threads must not run it at once
        namespace["_lock"] = threading.RLock()
        lines = lines[:1] + ["    with _lock:"] + ["    " + line for line in lines[1:]]
    return "\n".join(lines), namespace


def _output_literal(namespace, x):
    key = f"l{len(namespace)}"
    namespace[key] = x.value
    return key


def _donation_prologue(program, reuse):
    """``d3 = _donatable(a3, (a0, ..., c0, ...))`` for each donated input some equation writes into; the
    equation then gets ``d3`` (the buffer, or None to allocate) as its ``out``. Returns the lines and
    ``{id(input var): "d3"}``."""
    lines, donated = [], {}
    inputs = {id(v): k for k, v in enumerate(program.invars)}
    for v in {id(v): v for v in reuse.values() if id(v) in inputs}.values():
        k = inputs[id(v)]
        others = ", ".join([f"a{j}" for j in range(len(program.invars)) if j != k]
                           + [f"c{j}" for j in range(len(program.constvars))])
        lines.append(f"    d{k} = _donatable(a{k}, ({others}{',' if others else ''}))")
        donated[id(v)] = f"d{k}"
    return lines, donated


def _deletions(program: Program, held: dict) -> dict:
    """For each equation index, the variables to ``del`` after it: those it is the last to read
    (outputs are never freed) and the results nothing reads (of a primitive with several results),
    except buffer holders, which are freed after the equation that reuses their buffer."""
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    last = {}
    for k, eqn in enumerate(program.eqns):
        for x in eqn.inputs:
            if isinstance(x, Var) and id(x) not in outputs:
                last[id(x)] = (k, x)
    for k, eqn in enumerate(program.eqns):
        for out in eqn.outs:
            if id(out) in held:
                last[id(out)] = (max(held[id(out)], last.get(id(out), (k,))[0]), out)
            elif id(out) not in last and id(out) not in outputs:  # an unread result of several: freed at once
                last[id(out)] = (k, out)
    by_eqn: dict = {}
    for k, x in last.values():
        by_eqn.setdefault(k, []).append(x)
    return by_eqn


def compile_program(program: Program, donate=()):
    """The program as one Python function of its inputs returning the list of its outputs; the inputs
    at the indices ``donate`` may have their buffers reused."""
    text, namespace = source(program, donate)
    code = compile(text, "<tapegrad.jit program>", "exec")
    exec(code, namespace)  # noqa: S102 — our own generated source, from the program's equations only
    run = namespace.pop("run")  # run's globals are the namespace: kept there, it would be a cycle holding the constants
    run.source = text
    return run


def evaluate(program: Program, inputs):
    """Run ``program`` through ``bind`` (for outer transforms): returns the list of its outputs."""
    env = {id(v): x for v, x in zip(program.invars, inputs)}
    env.update((id(v), c) for v, c in zip(program.constvars, program.consts))

    def read(x):
        return x.value if isinstance(x, Literal) else env[id(x)]
    for eqn in program.eqns:
        result = bind(eqn.prim, *[read(x) for x in eqn.inputs], **eqn.params)
        if eqn.prim.multiple_results:
            env.update((id(out), value) for out, value in zip(eqn.outs, result))
        else:
            env[id(eqn.out)] = result
    return [read(x) for x in program.outputs]
