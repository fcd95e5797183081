"""A loop body split for reverse mode: a forward body that also returns the residuals of its step, and
a backward program that maps the step's output cotangents to its input cotangents from those
residuals alone (JAX's partial evaluation of a scan body, done here on a staged program).

How. The body's forward and reverse passes are staged together as one *joint* program, of the body's
inputs (carries ``s``, slices ``x``, consts ``k``) and its outputs' cotangents, returning the body's
outputs and the inputs' cotangents. Each equation of the joint program is then

- *primal* when it reads a value derived from ``s`` or ``x`` and no cotangent: it goes to the forward
  body, which runs at every step of the forward scan;
- *linear* when it reads a cotangent: it goes to the backward program;
- *invariant* when it reads only consts and constants: it goes to both, where needed (a transposed
  weight, a zero), and is recomputed at each step rather than stored.

A primal equation that makes a view (``transpose``, ``reshape``, ``broadcast_to``) goes to both as
well: the backward program remakes the view from its operand, which is stored (or is a slice of
``xs``, which costs nothing to keep) instead of a strided copy stacked at every step.

The residuals are the primal values the backward program reads: the forward body returns them as
extra ``ys``, so the forward scan stacks them, one set per step, and the backward scan reads them as
its ``xs``. A carry the backward program reads is a residual too; a slice of ``xs`` is passed as it is.

A body that staged a ``checkpoint`` (``remat``) keeps its primal equations in the backward program as
well: the residuals are then only the carries that entered each step (a step's intermediates are
recomputed from its carry), which is what ``tg.checkpoint`` around a body asks for.
"""
from __future__ import annotations

from typing import cast

import numpy as np

from tapegrad._backend import zeros_like
from tapegrad._control_flow._closed import ClosedProgram, _cut, _inexact, _is_differentiable, _like
from tapegrad._jit.codegen import evaluate
from tapegrad._jit.passes import dce
from tapegrad._jit.program import Program, Var
from tapegrad._jit.staging import stage
from tapegrad._structural import broadcast_to_p, reshape_p, transpose_p
from tapegrad._tape import vjp_flat


class BodySplit:
    """The parts of a split body (see the module notes).

    Attributes:
        fwd: the forward body, ``(*s, *x, *k) -> (*carries, *ys, *residuals)``.
        n_res: the number of residuals.
        x_used: the indices of the ``xs`` the backward program reads.
        diff_c, diff_x, diff_k: the indices of the differentiable carries, ``xs`` and consts.
        float_ys: the indices of the float and complex ``ys`` (those with a cotangent).
        bwd: the backward program, ``(*residuals, *xs[x_used], *k, *ct_carries[diff_c], *ct_ys[float_ys])
            -> cotangents of (*s[diff_c], *x[diff_x], *k[diff_k])``.
    """

    __slots__ = ("fwd", "n_res", "x_used", "diff_c", "diff_x", "diff_k", "float_ys", "bwd")
    fwd: ClosedProgram
    n_res: int
    x_used: list[int]
    diff_c: list[int]
    diff_x: list[int]
    diff_k: list[int]
    float_ys: list[int]
    bwd: Program

    def backward_body(self, need_x, need_k):
        """The backward scan's body, ``(*ct_c, *acc, *residuals, *x_used slices, *ct_ys slices, *k) ->
        (*ct_c, *acc + ct_k, *ct_x)``: the carry is the carries' cotangent and the running sum of the
        cotangents of the consts ``need_k``; the ``ys`` are the cotangents of the ``xs`` ``need_x``."""
        n_c, n_k = len(self.diff_c), len(need_k)
        at_x = [self.diff_x.index(j) for j in need_x]
        at_k = [self.diff_k.index(i) for i in need_k]

        def body(*ins):
            ct_c, acc, res, x, ct_y, k = _cut(ins, n_c, n_k, self.n_res, len(self.x_used), len(self.float_ys),
                                               len(ins) - n_c - n_k - self.n_res - len(self.x_used)
                                               - len(self.float_ys))
            grads = evaluate(self.bwd, res + x + k + ct_c + ct_y)
            g_c, g_x, g_k = _cut(grads, n_c, len(self.diff_x), len(self.diff_k))
            return g_c + [a + g_k[i] for a, i in zip(acc, at_k)] + [g_x[j] for j in at_x]
        return body


def split_body(body: ClosedProgram, n_carry: int, n_xs: int) -> BodySplit:
    """``body`` (inputs ``(*carries, *x slices, *consts)``, outputs ``(*carries, *ys)``) split for
    reverse mode, once per body."""
    return cast(BodySplit, body.derived(("split",), lambda: _split(body, n_carry, n_xs)))


def _split(body: ClosedProgram, n_carry: int, n_xs: int) -> BodySplit:
    joint, n_out = _joint(body)
    invars = joint.invars
    n_in = len(body.program.invars)
    primal_ids = {id(v) for v in invars[:n_carry + n_xs]}
    fwd_eqns, bwd_eqns = _partition(joint, primal_ids, {id(v) for v in invars[n_in:]}, body.remat)
    bwd = dce(Program(list(invars), list(joint.constvars), list(joint.consts), bwd_eqns, joint.outputs[n_out:]))
    residuals = _free_primals(bwd, set(invars[n_carry:]))
    x_used = [j for j in range(n_xs) if _reads(bwd, invars[n_carry + j])]
    split = BodySplit()
    split.fwd = ClosedProgram(dce(Program(invars[:n_in], list(joint.constvars), list(joint.consts), fwd_eqns,
                                          joint.outputs[:n_out] + residuals)))
    split.n_res = len(residuals)
    split.x_used = x_used
    diff = [i for i in range(n_in) if _is_differentiable(invars[i])]
    split.diff_c = [i for i in diff if i < n_carry]
    split.diff_x = [i - n_carry for i in diff if n_carry <= i < n_carry + n_xs]
    split.diff_k = [i - n_carry - n_xs for i in diff if i >= n_carry + n_xs]
    split.float_ys = [o - n_carry for o in _float_outputs(body) if o >= n_carry]
    split.bwd = Program(residuals + [invars[n_carry + j] for j in x_used] + invars[n_carry + n_xs:],
                        bwd.constvars, bwd.consts, bwd.eqns, bwd.outputs)
    return split


def _float_outputs(body: ClosedProgram) -> list:
    return [o for o, aval in enumerate(body.out_avals) if _inexact(aval)]


def _joint(body: ClosedProgram):
    """``(program, n_out)``: the body's forward and reverse passes staged as one program of
    ``(*inputs, *cotangents of the float outputs)`` returning ``(*outputs, *cotangents of the
    differentiable inputs)`` (zeros where none reaches one)."""
    program = body.program
    n_in = len(program.invars)
    diff = [i for i in range(n_in) if _is_differentiable(program.invars[i])]
    float_outs = _float_outputs(body)

    def joint(*ins):
        values = list(ins[:n_in])

        def on_variables(*vs):
            leaves = list(values)
            for i, v in zip(diff, vs):
                leaves[i] = v
            return body.evaluate(*leaves)
        outs, pullback = vjp_flat(on_variables, [values[i] for i in diff])
        out_cts = [None] * len(outs)
        for o, ct in zip(float_outs, ins[n_in:]):
            out_cts[o] = ct
        grads = pullback(out_cts, free=True)
        return list(outs) + [zeros_like(values[i]) if g is None else _like(g, values[i]) for i, g in zip(diff, grads)]
    avals = [v.aval for v in program.invars] + [body.out_avals[o] for o in float_outs]
    backends = [v.backend for v in program.invars] + [_backend_of(program.outputs[o]) for o in float_outs]
    joint_program, _ = stage(joint, avals, backends)
    return joint_program, len(program.outputs)


def _backend_of(x):
    return x.backend if isinstance(x, Var) else np


_VIEWS = frozenset({transpose_p, reshape_p, broadcast_to_p})  # free to remake: never worth storing


def _partition(joint: Program, primal_ids: set, linear_ids: set, remat: bool):
    """The joint program's equations for the forward body and for the backward program (module notes)."""
    primal, linear = set(primal_ids), set(linear_ids)
    fwd, bwd = [], []
    for eqn in joint.eqns:
        ids = [id(x) for x in eqn.inputs if isinstance(x, Var)]
        if any(i in linear for i in ids):
            bwd.append(eqn)
            linear.update(id(o) for o in eqn.outs)
        elif any(i in primal for i in ids):
            fwd.append(eqn)
            if remat or eqn.prim in _VIEWS:
                bwd.append(eqn)
            primal.update(id(o) for o in eqn.outs)
        else:
            fwd.append(eqn)
            bwd.append(eqn)
    return fwd, bwd


def _free_primals(program: Program, passed: set) -> list:
    """The variables ``program`` reads that it neither defines nor takes as constants, less those in
    ``passed`` (slices and consts, which the backward scan receives anyway): the residuals, in order of
    first use."""
    defined = {id(v) for v in program.constvars}
    passed_ids = {id(v) for v in passed}
    free, seen = [], set()

    def read(x):
        if isinstance(x, Var) and id(x) not in defined and id(x) not in passed_ids and id(x) not in seen:
            seen.add(id(x))
            free.append(x)
    for eqn in program.eqns:
        for x in eqn.inputs:
            read(x)
        defined.update(id(o) for o in eqn.outs)
    for x in program.outputs:
        read(x)
    return free


def _reads(program: Program, var: Var) -> bool:
    return any(x is var for eqn in program.eqns for x in eqn.inputs) or any(x is var for x in program.outputs)
