"""``cond`` and ``switch`` (JAX's names and semantics): the branch chosen at run time by a value that
may be traced, as one multi-result primitive ``switch`` whose static parameter is the tuple of the
branches' staged programs (:class:`ClosedProgram`).

Each branch is staged once per call of ``switch``, on the abstract values of the operands, with jit's
own stager; the primitive's impl runs the chosen branch's program, never the Python function. Values
a branch closes over that belong to an outer transform (a tracer of ``grad``, a Parameter read inside
it) are implicit inputs of its program: they become explicit operands of the primitive, after the
user's, so that the outer transform sees them.

The rules are switches themselves, on the same index, over branches derived from the originals
(cached on the :class:`ClosedProgram`): forward mode switches over each branch's jvp; reverse mode,
called at backward time, switches over branches that recompute the branch and pull the cotangents
back, so that it is differentiable again; ``vmap`` with a shared index switches over the batched
branches, and with a batched index evaluates every branch on the whole batch and selects per
example with ``where``.

This module sits above ``tapegrad.numpy``: the batched-index rule selects with ``tnp.where``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import _tree
from tapegrad._backend import zeros_like
from tapegrad._batching import defbatch
from tapegrad._control_flow._closed import (
    _SCALARS,
    ClosedProgram,
    _aval_of,
    _implicit_inputs,
    _is_differentiable,
    _like,
    _operand_leaf,
    _stage_closed,
    _tree_paths,
    _with_inputs,
)
from tapegrad._core import Boxed, bind
from tapegrad._jit.program import type_string
from tapegrad._jit.staging import abstractify, stage
from tapegrad._jvp import jvp_flat
from tapegrad._params import Parameter
from tapegrad._rules import def_lowering, defjvp_joint, defvjp_argnum, primitive
from tapegrad._structural import astype, moveaxis, reshape
from tapegrad._tape import pull_back_on
from tapegrad._typing import ArrayLike
from tapegrad._vmap import vmap_flat
from tapegrad.numpy import clip, equal, not_equal, where


# ---- the primitive ---------------------------------------------------------------------------------
def _clamp(index, n: int) -> int:
    return min(max(int(index), 0), n - 1)


def _switch_impl(index, *args, branches):
    return branches[_clamp(index, len(branches))](*args)


switch_p = primitive("switch", _switch_impl, lambda index, *avals, branches: list(branches[0].out_avals),
                     multiple_results=True)


def _switch_lowering(ctx, index, *operands, branches):
    """An ``if``/``elif`` chain on the clamped index, each branch assigning the same result variables
    (cast to the results' dtypes, so numba types them alike on every path)."""
    results = [ctx.state(ctx.zeros(a.shape, a.dtype)) for a in branches[0].out_avals]
    k = ctx.let(f"min(max(np.int64({ctx.texts(index)[()]}), 0), {len(branches) - 1})", "b")
    for n, branch in enumerate(branches):
        ctx.emit(f"{'if' if n == 0 else 'elif' if n < len(branches) - 1 else 'else'}"
                 f"{f' {k} == {n}' if n < len(branches) - 1 else ''}:")
        with ctx.block():
            ctx.assign(results, ctx.inline(branch.program, list(operands)))
    return results


def_lowering(switch_p, _switch_lowering)


def _switch_jvp(tangents, ans, index, *args, branches):
    """A switch over the jvp of each branch, on the same index: the outputs are the float results'
    tangents."""
    live = tuple(i for i, t in enumerate(tangents[1:]) if t is not None)
    if not live:
        return None
    inexact = [k for k, aval in enumerate(branches[0].out_avals) if np.dtype(aval.dtype).kind in "fc"]

    def make(branch):
        def jvp_branch(*xs):
            primals, tangent_in = list(xs[:len(args)]), [None] * len(args)
            for i, t in zip(live, xs[len(args):]):
                tangent_in[i] = t
            outs, out_tangents = jvp_flat(branch.evaluate, primals, tangent_in)
            return [zeros_like(outs[k]) if out_tangents[k] is None else out_tangents[k] for k in inexact]
        return _stage_closed(jvp_branch, list(args) + [tangents[1 + i] for i in live])
    jvp_branches = tuple(b.derived(("jvp", live), lambda b=b: make(b)) for b in branches)
    out_tangents = bind(switch_p, index, *args, *[tangents[1 + i] for i in live], branches=jvp_branches)
    result = [None] * len(ans)
    for k, t in zip(inexact, out_tangents):
        result[k] = t
    return result


def _switch_vjp(argnums, cts, ans, primals, *, branches):
    """A switch, on the same index, over branches that recompute their branch under a tape and pull
    the cotangents back: called at backward time, it is recorded by any transform outside, so it is
    differentiable again."""
    index, args = primals[0], primals[1:]
    invars = branches[0].program.invars
    diff = tuple(i for i in range(len(args)) if _is_differentiable(invars[i]))
    reached = tuple(k for k, ct in enumerate(cts) if ct is not None)

    def make(branch):
        def vjp_branch(*xs):
            values, out_cts = list(xs[:len(args)]), [None] * len(branch.out_avals)
            for k, ct in zip(reached, xs[len(args):]):
                out_cts[k] = ct
            grads = pull_back_on(branch.evaluate, values, diff, out_cts)
            return [zeros_like(values[i]) if g is None else _like(g, values[i]) for i, g in zip(diff, grads)]
        return _stage_closed(vjp_branch, list(args) + [cts[k] for k in reached])
    vjp_branches = tuple(b.derived(("vjp", reached), lambda b=b: make(b)) for b in branches)
    in_cts = bind(switch_p, index, *args, *[cts[k] for k in reached], branches=vjp_branches)
    by_operand = dict(zip((1 + i for i in diff), in_cts))
    return [by_operand.get(argnum) for argnum in argnums]


def _switch_batch(vals, dims, *, branches):
    """A shared index: a switch over the batched branches. A batched index: every branch evaluated on
    the whole batch, and each example's result selected from its own branch with ``where``."""
    index, args, index_dim, arg_dims = vals[0], vals[1:], dims[0], tuple(dims[1:])
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    n_out = len(branches[0].out_avals)
    if index_dim is None:
        def make(branch):
            return _stage_closed(lambda *xs: vmap_flat(branch.evaluate, list(xs), arg_dims, [0] * n_out, size),
                                 list(args))
        batched = tuple(b.derived(("batch", arg_dims, size), lambda b=b: make(b)) for b in branches)
        return bind(switch_p, index, *args, branches=batched), [0] * n_out
    per_branch = [vmap_flat(b.evaluate, list(args), arg_dims, [0] * n_out, size) for b in branches]
    index = clip(astype(moveaxis(index, index_dim, 0), np.int64), 0, len(branches) - 1)
    outs = per_branch[0]
    for k, branch_outs in enumerate(per_branch[1:], start=1):
        chosen = equal(index, k)
        outs = [where(reshape(chosen, (size,) + (1,) * (len(o.shape) - 1)), o, previous)
                for o, previous in zip(branch_outs, outs)]
    return outs, [0] * n_out


def _switch_vjp_one(argnum, cts, ans, *primals, branches):
    return _switch_vjp([argnum], cts, ans, primals, branches=branches)[0]


defjvp_joint(switch_p, _switch_jvp)
defvjp_argnum(switch_p, _switch_vjp_one, _switch_vjp)  # the backward pass calls _switch_vjp once per node
defbatch(switch_p, _switch_batch)


# ---- the public functions --------------------------------------------------------------------------
def switch(index: Any, branches: Any, *operands: ArrayLike) -> Any:
    """Apply ``branches[index]`` to ``operands`` (JAX's ``lax.switch``), with ``index`` clamped to
    ``[0, len(branches) - 1]``.

    Every branch is staged once, on the operands' shapes and dtypes, so that the choice can be made at
    run time: under ``jit`` one program serves every index, and under ``vmap`` with an index that
    varies over the batch every branch runs on the whole batch and each example takes its own
    branch's result. Eagerly, Python's ``if`` is as good (and differentiates as well).

    Args:
        index: a scalar integer (a Python int, a 0-d integer array, or a traced one).
        branches: a non-empty sequence of functions, each taking ``*operands`` and returning pytrees
            of the same structure, shapes and dtypes.
        *operands: pytrees of arrays (and Python scalars) passed to the chosen branch.

    Returns:
        The chosen branch's output.

    Raises:
        TypeError: ``index`` is not a scalar integer, ``branches`` is not a list or tuple of
            callables, an operand leaf is not an array, or the branches' outputs differ in pytree
            structure, shape or dtype (the message names the leaf and both types).
        ValueError: ``branches`` is empty, or a branch assigns a Parameter (return the new value and
            assign it outside instead).
    """
    _check_index(index, "switch", "index", integer_only=True)
    branches = _check_branches(branches)
    return _apply(index, branches, operands, "switch")


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: ArrayLike) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (JAX's ``lax.cond``), with
    ``pred`` possibly traced: ``switch`` on ``pred`` as 0 or 1.

    Args:
        pred: a scalar bool or integer (nonzero is true): a Python value, a 0-d array or a traced one.
        true_fun, false_fun: functions of ``*operands`` returning pytrees of the same structure, shapes
            and dtypes.
        *operands: pytrees of arrays (and Python scalars).

    Returns:
        The chosen function's output.

    Raises:
        TypeError: as :func:`switch` does, naming ``pred``, ``true_fun`` or ``false_fun``.
        ValueError: a branch assigns a Parameter.
    """
    _check_index(pred, "cond", "pred", integer_only=False)
    for name, fun in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(fun):
            raise TypeError(f"cond: {name} must be a function of the operands, got {type(fun).__name__}")
    if isinstance(pred, Boxed):
        pred = pred.unbox()
    if type(pred) in _SCALARS or isinstance(pred, np.generic):
        pred = bool(pred)
    elif np.dtype(pred.dtype) != np.bool_:
        pred = not_equal(pred, 0)
    return _apply(pred, (false_fun, true_fun), operands, "cond", names=("false_fun", "true_fun"))


def _check_index(index, where: str, name: str, integer_only: bool) -> None:
    what = "an integer" if integer_only else "a bool or an integer"
    value = index.unbox() if isinstance(index, Boxed) else index
    shape: Any
    dtype: Any
    if type(value) in _SCALARS:
        ok = type(value) is int or (not integer_only and type(value) is bool)
        shape = ()
        dtype = type(value).__name__
    else:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        kinds = "iu" if integer_only else "biu"
        ok = shape is not None and dtype is not None and np.dtype(dtype).kind in kinds
    if not ok or tuple(shape) != ():
        got = type(value).__name__ if dtype is None else f"{dtype} of shape {tuple(shape or ())}"
        raise TypeError(f"{where}: {name} must be a scalar, {what} (a Python value or a 0-d array), got "
                        f"{got}; reduce it to one value (an index into the branches) first")


def _check_branches(branches) -> tuple:
    if callable(branches) or not isinstance(branches, (list, tuple)):
        raise TypeError(f"switch: branches must be a list or tuple of functions, got {type(branches).__name__}")
    if not branches:
        raise ValueError("switch: branches is empty; pass at least one function")
    for k, fun in enumerate(branches):
        if not callable(fun):
            raise TypeError(f"switch: branches[{k}] must be a function of the operands, got {type(fun).__name__}")
    return tuple(branches)


def _apply(index, branches, operands, where: str, names=None):
    names = names or [f"branches[{k}]" for k in range(len(branches))]
    leaves, in_tree = _tree.tree_flatten(operands)
    leaves = [_operand_leaf(x, where, k) for k, x in enumerate(leaves)]
    staged = [_stage_branch(fun, in_tree, leaves, where, name) for fun, name in zip(branches, names)]
    out_tree = _check_outputs(staged, names, where)
    implicit = _implicit_inputs(staged)
    closed = tuple(ClosedProgram(_with_inputs(program, len(leaves), implicit, builder))
                   for program, builder, _ in staged)
    extra = [x.value if isinstance(x, Parameter) else x for x in implicit]
    outs = bind(switch_p, index, *leaves, *extra, branches=closed)
    return _tree.tree_unflatten(out_tree, outs)


def _typed(out):
    """A branch output with a dtype of its own. A Python scalar result, or a Python-scalar operand
    returned as it came (weakly typed while staged), becomes NumPy's default dtype of its kind, so that
    ``lambda x: x`` and ``lambda x: x * 2.0`` on the operand 1.0 both return ``f64[]``."""
    if type(out) in _SCALARS:
        return np.asarray(out)
    if getattr(out, "weak_type", False):
        return astype(out, np.dtype(out.dtype))
    return out


def _stage_branch(fun, in_tree, leaves, where: str, name: str):
    """``(program, builder, out_tree)`` of one branch staged on the operands' abstract values."""
    out_trees = []

    def flat_fun(*xs):
        out_leaves, out_tree = _tree.tree_flatten(fun(*_tree.tree_unflatten(in_tree, list(xs))))
        out_trees.append(out_tree)
        return [_typed(o) for o in out_leaves]
    avals, backends = zip(*[abstractify(x) for x in leaves]) if leaves else ((), ())
    program, builder = stage(flat_fun, avals, backends)
    if builder.writes:
        raise ValueError(f"{where}: {name} assigns Parameter {next(iter(builder.writes)).name!r}; a branch "
                         "must be a pure function of its operands: return the new value and assign it outside")
    return program, builder, out_trees[0]


def _check_outputs(staged, names, where: str):
    """The common output structure of the branches; a TypeError naming the first leaf whose structure,
    shape or dtype differs between the first branch and another."""
    first_program, _, first_tree = staged[0]
    for (program, _, tree), name in zip(staged[1:], names[1:]):
        if tree != first_tree:
            raise TypeError(f"{where}: {names[0]} and {name} return different pytree structures: {first_tree} "
                            f"and {tree}; every branch must return the same structure, shapes and dtypes")
        for k, (a, b) in enumerate(zip(first_program.outputs, program.outputs)):
            ta, tb = type_string(_aval_of(a)), type_string(_aval_of(b))
            if ta != tb:
                paths = _tree_paths(first_tree)
                raise TypeError(f"{where}: output leaf {paths[k]} is {ta} in {names[0]} but {tb} in {name}; "
                                "every branch must return the same shapes and dtypes (cast with .astype)")
    return first_tree


