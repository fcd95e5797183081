"""The executor: a program becomes the source of one Python function, compiled once, that calls each
equation's backend implementation directly (no ``bind``, no trace, no per-op dispatch).

Each equation is one line ``v7 = f3(v2, c0)``: ``f3`` is the primitive's ``impl`` with its static
parameters bound beforehand (``functools.partial``), ``c0`` a constant; both are globals of the
generated function. A variable's last use frees it (``del``) so that its buffer can go back to the
allocator as soon as possible.

``evaluate`` is the other way to run a program: through ``bind``, equation by equation, so that an
outer transform (``grad``, ``vmap``, ``jvp``, another ``jit``) sees primitives.
"""
from __future__ import annotations

import functools

from tapegrad._core import bind
from tapegrad._jit.program import Literal, Program, Var


def _bound_impl(eqn):
    return functools.partial(eqn.prim.impl, **eqn.params) if eqn.params else eqn.prim.impl


def source(program: Program):
    """``(text, namespace)``: the generated function ``run(*inputs)`` and the globals it needs."""
    names, namespace = {}, {}

    def name_of(x):
        if isinstance(x, Literal):
            key = f"l{len(namespace)}"
            namespace[key] = x.value
            return key
        return names[id(x)]

    for k, v in enumerate(program.invars):
        names[id(v)] = f"a{k}"
    for k, (v, c) in enumerate(zip(program.constvars, program.consts)):
        names[id(v)] = f"c{k}"
        namespace[f"c{k}"] = c
    last_use = _last_uses(program)
    lines = [f"def run({', '.join(names[id(v)] for v in program.invars)}):"]
    for k, eqn in enumerate(program.eqns):
        fn = f"f{k}"
        namespace[fn] = _bound_impl(eqn)
        names[id(eqn.out)] = f"v{k}"
        lines.append(f"    v{k} = {fn}({', '.join(name_of(x) for x in eqn.inputs)})")
        dead = [names[id(x)] for x in last_use.get(k, ()) if names[id(x)].startswith("v")]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    lines.append(f"    return [{', '.join(name_of(x) for x in program.outputs)}]")
    return "\n".join(lines), namespace


def _last_uses(program: Program) -> dict:
    """For each equation index, the variables it is the last to read (outputs are never freed)."""
    outputs = {id(x) for x in program.outputs if isinstance(x, Var)}
    last = {}
    for k, eqn in enumerate(program.eqns):
        for x in eqn.inputs:
            if isinstance(x, Var) and id(x) not in outputs:
                last[id(x)] = (k, x)
    by_eqn = {}
    for k, x in last.values():
        by_eqn.setdefault(k, []).append(x)
    return by_eqn


def compile_program(program: Program, donate=()):
    """The program as one Python function of its inputs returning the list of its outputs; the inputs
    at the indices ``donate`` may have their buffers reused."""
    text, namespace = source(program)
    code = compile(text, "<tapegrad.jit program>", "exec")
    exec(code, namespace)  # noqa: S102 — our own generated source, from the program's equations only
    run = namespace["run"]
    run.source = text
    return run


def evaluate(program: Program, inputs):
    """Run ``program`` through ``bind`` (for outer transforms): returns the list of its outputs."""
    env = {id(v): x for v, x in zip(program.invars, inputs)}
    env.update((id(v), c) for v, c in zip(program.constvars, program.consts))

    def read(x):
        return x.value if isinstance(x, Literal) else env[id(x)]
    for eqn in program.eqns:
        env[id(eqn.out)] = bind(eqn.prim, *[read(x) for x in eqn.inputs], **eqn.params)
    return [read(x) for x in program.outputs]
