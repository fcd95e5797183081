"""How control flow's results depend on its operands, for sparsity detection (``tg.jacobian_sparsity``,
docs/sparsity.md): each rule walks the staged sub-programs (``Node.propagate``).

- ``switch``/``cond``: a known index takes its branch; a traced one, the union of the branches
  (conservative: the branch taken depends on values).
- ``scan`` (``fori_loop``, ``map``): up to :data:`UNROLL_STEPS` steps, step by step, each step with
  its own slice of ``xs`` and its own rows of ``ys`` (exact where the body's rules are); a longer one
  iterates the body on the carries to a fixed point, every step's slice of ``xs`` merged into one, and
  gives each step's ``ys`` the fixed point's (conservative).
- ``while_loop``: the number of steps depends on values, so the carries get the union over any number
  of steps, iterated to a fixed point (conservative).
- ``custom_call`` (a ``custom_vjp``, ``custom_jvp``, ``custom_root`` or ``custom_linear_solve``
  staged whole): its derivative is its rule's, not its function's (which may stop gradients, as a
  solver's does), so its forward-mode rule is staged on the operands' types, the tangents standing
  for the operands' dependencies, and walked. Where that rule applies the same call again (a linear
  solve's tangent is a solve with the same matrix), the inner application is dense on its operands.
"""
from __future__ import annotations

import threading

import numpy as np

from tapegrad._backend import zeros_like
from tapegrad._control_flow._scan import scan_p
from tapegrad._control_flow._switch import switch_p
from tapegrad._control_flow._while import while_p
from tapegrad._core import ShapedArray
from tapegrad._dependency import Node, Undetermined, connection, def_dependency, dense, same, size_of, union
from tapegrad._jit.custom_call import custom_call_p
from tapegrad._jit.staging import stage

# the longest scan walked step by step (exactly); a longer one is iterated to a fixed point
UNROLL_STEPS = 256


def _switch(node: Node) -> list:
    index, branches = node.values[0], node.params["branches"]
    if index is not None:
        branches = branches[min(max(int(index), 0), len(branches) - 1):][:1]
    outs = [node.propagate(b.program, node.deps[1:], node.values[1:])[0] for b in branches]
    return [union(parts) for parts in zip(*outs)]


def _rows(dep, start: int, stop: int):
    return None if dep is None else dep[start:stop]


def _stack(parts: list, rows: int, width: int):
    """The per-step matrices (None: none) of ``rows`` rows each, stacked in step order."""
    if all(p is None for p in parts):
        return None
    import scipy.sparse as sp
    empty = sp.csr_array((rows, width), dtype=bool)
    return sp.vstack([empty if p is None else p for p in parts], format="csr")


def _scan(node: Node) -> list:
    p = node.params
    n_carry, n_xs, length = p["n_carry"], p["n_xs"], p["length"]
    if length > UNROLL_STEPS:
        return _scan_fixed_point(node)
    carry, carry_values = list(node.deps[:n_carry]), list(node.values[:n_carry])
    xs, consts = node.avals[n_carry:n_carry + n_xs], slice(n_carry + n_xs, None)
    slice_sizes = [size_of(a.shape[1:]) for a in xs]
    ys: list = [None] * length
    for i in (range(length - 1, -1, -1) if p["reverse"] else range(length)):
        x_deps = [_rows(d, i * s, (i + 1) * s) for d, s in zip(node.deps[n_carry:n_carry + n_xs], slice_sizes)]
        x_values = [None if v is None else np.asarray(v)[i] for v in node.values[n_carry:n_carry + n_xs]]
        deps, values = node.propagate(p["body"].program, carry + x_deps + list(node.deps[consts]),
                                      carry_values + x_values + list(node.values[consts]))
        carry, carry_values, ys[i] = deps[:n_carry], values[:n_carry], deps[n_carry:]
    y_avals = node.out_avals[n_carry:]
    return carry + [_stack([step[k] for step in ys], size_of(a.shape[1:]), node.width)
                    for k, a in enumerate(y_avals)]


def _merged_steps(dep, length: int):
    """The rows of one step's slice, each the union of that row over all steps."""
    if dep is None:
        return None
    rows = dep.shape[0] // length
    merge = connection(np.arange(dep.shape[0]) % rows, np.arange(dep.shape[0]), (rows, dep.shape[0]))
    return merge @ dep


def _fixed_point(body, carry: list, rest_deps: list, rest_values: list, node: Node) -> tuple[list, list]:
    """Carries of the union over any number of steps of ``body``, and the body's other outputs there."""
    n_carry = len(carry)
    while True:
        deps, _ = node.propagate(body, carry + rest_deps, [None] * n_carry + rest_values)
        grown = [union([c, d]) for c, d in zip(carry, deps[:n_carry])]
        if all(same(g, c) for g, c in zip(grown, carry)):
            return carry, deps[n_carry:]
        carry = grown


def _scan_fixed_point(node: Node) -> list:
    p = node.params
    n_carry, n_xs, length = p["n_carry"], p["n_xs"], p["length"]
    x_deps = [_merged_steps(d, length) for d in node.deps[n_carry:n_carry + n_xs]]
    rest_values = [None] * n_xs + list(node.values[n_carry + n_xs:])
    carry, ys = _fixed_point(p["body"].program, list(node.deps[:n_carry]), x_deps + list(node.deps[n_carry + n_xs:]),
                             rest_values, node)
    return carry + [None if y is None else _stack([y] * length, y.shape[0], node.width) for y in ys]


def _while(node: Node) -> list:
    p = node.params
    n_carry, n_cond = p["n_carry"], p["n_cond"]
    body_consts = slice(n_carry + n_cond, None)
    carry, _ = _fixed_point(p["body"].program, list(node.deps[:n_carry]), list(node.deps[body_consts]),
                            list(node.values[body_consts]), node)
    return carry


_walking = threading.local()  # the calls whose rule is being walked, in this thread


def _custom_call(node: Node) -> list:
    call = node.params["call"]
    walking = _walking.__dict__.setdefault("calls", set())
    if id(call) in walking:  # the call applied inside its own rule: dense on its operands
        return dense(node)
    live = [k for k, d in enumerate(node.deps) if d is not None]
    n = len(node.avals)

    def tangent_outputs(*args):
        tangents: list = [None] * n
        for k, t in zip(live, args[n:]):
            tangents[k] = t
        outs, out_tangents = call.jvp(list(args[:n]), tangents)
        return [zeros_like(o) if t is None else t for o, t in zip(outs, out_tangents)]

    avals = [ShapedArray(tuple(a.shape), a.dtype) for a in node.avals]
    walking.add(id(call))
    try:
        program, _ = stage(tangent_outputs, avals + [avals[k] for k in live], [np] * (n + len(live)))
    except Exception as error:  # noqa: BLE001 (a rule that cannot be staged: reported, dense)
        raise Undetermined(f"its forward-mode rule could not be staged: {error}") from error
    finally:
        walking.discard(id(call))
    walking.add(id(call))
    try:
        deps = [None] * n + [node.deps[k] for k in live] + [None] * (len(program.invars) - n - len(live))
        values = list(node.values) + [None] * (len(program.invars) - n)
        return node.propagate(program, deps, values)[0]
    finally:
        walking.discard(id(call))


def_dependency(switch_p, _switch)
def_dependency(scan_p, _scan)
def_dependency(while_p, _while)
def_dependency(custom_call_p, _custom_call)
