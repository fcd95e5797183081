"""``while_loop`` (JAX's ``lax.while_loop``): a loop whose trip count is decided at run time, as one
multi-result primitive ``while`` holding the staged condition and body (:class:`ClosedProgram`).

Operands are the carries, then the values the condition closes over, then those the body closes
over. Forward mode is a ``while`` over the body's jvp (the condition reads the primal carries only).
Reverse mode, which JAX refuses, is in ``_while_rev.py``: it stores each step's residuals as the loop
runs. ``vmap`` batches every carry and runs until every example's condition is false, keeping the
finished examples' carries as they are (``where``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tapegrad import _tree
from tapegrad._backend import zeros_like
from tapegrad._batching import defbatch
from tapegrad._control_flow._closed import (
    _SCALARS,
    ClosedProgram,
    _check_carry,
    _cut,
    _implicit_operands,
    _is_differentiable,
    _like,
    _operand_leaf,
    _stage_closed,
    _staged,
    _strong,
)
from tapegrad._core import bind
from tapegrad._jit.staging import abstractify, is_weak
from tapegrad._jvp import jvp_flat
from tapegrad._owned import owned
from tapegrad._rules import def_lowering, defjvp_joint, primitive
from tapegrad._structural import broadcast_to, moveaxis, reshape
from tapegrad._typing import PyTree
from tapegrad._vmap import vmap_flat
from tapegrad.numpy import any as any_
from tapegrad.numpy import where


class Names(NamedTuple):
    """The public function a user called and its argument names, for the messages of a loop built on
    another (``fori_loop`` on ``scan`` or ``while_loop``, ``map`` on ``scan``): an error names what the
    user wrote, ``fori_loop: body_fun ... init_val``, not the loop underneath."""

    who: str
    body: str
    init: str
    value: str = "value"  # what the body returns: scan's "carry"
    xs: str = "xs"


WHILE = Names("while_loop", "body_fun", "init_val")


def _while_impl(*args, cond, body, n_carry, n_cond, max_steps, checkpoints, reverse_mode):
    loop = body.native_loop(while_p, args, dict(cond=cond, body=body, n_carry=n_carry, n_cond=n_cond,
                                                max_steps=max_steps, checkpoints=checkpoints,
                                                reverse_mode=reverse_mode))
    outs = loop(*args) if loop is not None else None
    if outs is not None:
        return list(outs)
    carry, cond_consts, body_consts = list(args[:n_carry]), args[n_carry:n_carry + n_cond], args[n_carry + n_cond:]
    steps = 0
    while bool(cond.run(*carry, *cond_consts)[0]):
        steps = check_steps(steps, max_steps)
        carry = list(body.run(*carry, *body_consts))
    return owned(carry, caller=args)


def check_steps(steps: int, max_steps: int | None) -> int:
    """``steps + 1``, the number of the step about to run; a RuntimeError past ``max_steps``."""
    if max_steps is not None and steps >= max_steps:
        raise RuntimeError(_too_many_steps(max_steps))
    return steps + 1


def _too_many_steps(max_steps: int) -> str:
    return (f"while_loop: cond_fun still holds after max_steps={max_steps} steps; raise max_steps (it bounds the "
            "loop, and with checkpoints sizes the stored carries) or check that the loop ends")


def _while_lowering(ctx, *operands, cond, body, n_carry, n_cond, max_steps, checkpoints, reverse_mode):
    """A native loop: the carries in loop variables, updated by the body's equations while the
    condition's hold."""
    carry, cond_consts, body_consts = (operands[:n_carry], operands[n_carry:n_carry + n_cond],
                                       operands[n_carry + n_cond:])
    states = [ctx.state(c) for c in carry]
    emit_while(ctx, cond, states, cond_consts, max_steps,
               lambda steps: ctx.assign(states, ctx.inline(body.program, states + list(body_consts))))
    return states


def emit_while(ctx, cond, states, cond_consts, max_steps, step) -> str:
    """Write ``while True:`` with ``cond``'s equations on ``states``, a ``break`` when it is false, the
    same RuntimeError as :func:`check_steps` past ``max_steps``, then ``step(steps)`` (``steps`` the
    name counting the steps run before this one); returns that name, which holds the count after."""
    steps = ctx.fresh("n")
    ctx.emit(f"{steps} = 0")
    ctx.loop("while True:")
    with ctx.block():
        (pred,) = ctx.inline(cond.program, list(states) + list(cond_consts))
        ctx.emit(f"if not {ctx.texts(pred)[()]}:")
        ctx.emit("    break")
        if max_steps is not None:
            ctx.emit(f"if {steps} >= {int(max_steps)}:")
            ctx.emit(f"    raise RuntimeError({_too_many_steps(max_steps)!r})")
        step(steps)
        ctx.emit(f"{steps} += 1")
    return steps


while_p = primitive("while", _while_impl, lambda *avals, cond, body, **params: list(body.out_avals),
                    multiple_results=True)
def_lowering(while_p, _while_lowering)


def _while(carries, cond_consts, body_consts, cond, body, **params):
    return bind(while_p, *carries, *cond_consts, *body_consts, cond=cond, body=body, n_carry=len(carries),
                n_cond=len(cond_consts), **params)


def _while_jvp(tangents, ans, *args, cond, body, n_carry, n_cond, residuals=None, **params):
    """A ``while`` over the body's jvp, the float carries' tangents carried along."""
    carries, cond_consts, body_consts = args[:n_carry], args[n_carry:n_carry + n_cond], args[n_carry + n_cond:]
    t_carry, t_body = tangents[:n_carry], tangents[n_carry + n_cond:]
    diff_c = [k for k in range(n_carry) if _is_differentiable(body.program.invars[k])]
    live_k = tuple(i for i, t in enumerate(t_body) if t is not None)
    if not live_k and all(t_carry[k] is None for k in diff_c):
        return None
    n_tc, n_bc = len(diff_c), len(body_consts)

    def jvp_body(*ins):
        c, tc, k, tk = _cut(ins, n_carry, n_tc, n_bc, len(live_k))
        tangent_in = [None] * (n_carry + n_bc)
        for i, t in zip(diff_c, tc):
            tangent_in[i] = t
        for i, t in zip(live_k, tk):
            tangent_in[n_carry + i] = t
        outs, out_t = jvp_flat(body.evaluate, c + k, tangent_in)
        return outs + [zeros_like(outs[i]) if out_t[i] is None else _like(out_t[i], outs[i]) for i in diff_c]
    new_carries = list(carries) + [zeros_like(carries[k]) if t_carry[k] is None else t_carry[k] for k in diff_c]
    new_consts = list(body_consts) + [t_body[i] for i in live_k]

    def primal_cond(*ins):  # the condition of the primal carries (the tangents follow them)
        return cond.evaluate(*ins[:n_carry], *ins[n_carry + n_tc:])
    jcond = cond.derived(("jvp", n_tc), lambda: _stage_closed(primal_cond, new_carries + list(cond_consts)))
    jbody = body.derived(("jvp", live_k), lambda: _stage_closed(jvp_body, new_carries + new_consts))
    outs = _while(new_carries, list(cond_consts), new_consts, jcond, jbody, **params)
    result = [None] * n_carry
    for j, k in enumerate(diff_c):
        result[k] = outs[n_carry + j]
    return result


def _while_batch(vals, dims, *, cond, body, n_carry, n_cond, **params):
    """Every carry batched at axis 0; the loop runs while any example's condition holds, and a
    finished example keeps its carry."""
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    carries = [broadcast_to(c, (size,) + tuple(c.shape)) if d is None else moveaxis(c, d, 0)
               for c, d in zip(vals[:n_carry], dims[:n_carry])]
    cond_consts, body_consts = list(vals[n_carry:n_carry + n_cond]), list(vals[n_carry + n_cond:])
    cond_dims = [0] * n_carry + list(dims[n_carry:n_carry + n_cond])
    body_dims = [0] * n_carry + list(dims[n_carry + n_cond:])

    def preds(ins):
        return vmap_flat(cond.evaluate, list(ins), cond_dims, [0], size)[0]

    def batched_body(*ins):
        c, k = ins[:n_carry], ins[n_carry + n_cond:]
        pred = preds(list(c) + list(ins[n_carry:n_carry + n_cond]))
        new = vmap_flat(body.evaluate, list(c) + list(k), body_dims, [0] * n_carry, size)
        return [where(reshape(pred, (size,) + (1,) * (len(o.shape) - 1)), o, old) for o, old in zip(new, c)]
    key = ("batch", tuple(cond_dims), tuple(body_dims), size)
    bcond = cond.derived(key, lambda: _stage_closed(lambda *ins: [any_(preds(ins))], carries + cond_consts))
    bbody = body.derived(key, lambda: _stage_closed(batched_body, carries + cond_consts + body_consts))
    # the batched body evaluates the condition too (to keep finished examples): its consts come first
    outs = _while(carries, cond_consts, cond_consts + body_consts, bcond, bbody, **params)
    return outs, [0] * n_carry


defjvp_joint(while_p, _while_jvp)
defbatch(while_p, _while_batch)  # reverse mode: _while_rev.py


def while_loop(cond_fun: Callable[..., Any], body_fun: Callable[..., Any], init_val: PyTree, *,
               max_steps: int | None = None, checkpoints: int | None = None) -> Any:
    """``val = body_fun(val)`` while ``cond_fun(val)`` (JAX's ``lax.while_loop``), with a trip count
    decided at run time: under ``jit`` one ``while`` operation, under ``vmap`` until every example is
    done (finished examples keep their value).

    Both modes differentiate through it. Forward mode (``jvp``, ``jacfwd``) is a loop over the body's
    jvp. Reverse mode (``grad``, ``vjp``), which JAX refuses, stores each step's residuals as the loop
    runs (memory: the trip count times one step's residuals) and pulls the cotangent back over them in
    reverse; with ``checkpoints`` it stores only that many carries and recomputes the steps between
    them. Eagerly the trip count is read from the predicate at each step (on a GPU, one read of device
    memory per step).

    Args:
        cond_fun: ``cond_fun(val)`` -> a scalar bool (or integer).
        body_fun: ``body_fun(val) -> val``, keeping the structure, shapes and dtypes.
        init_val: a pytree of arrays and Python scalars.
        max_steps: an upper bound on the trip count (a positive int), or None for none. A loop still
            running after ``max_steps`` steps raises a ``RuntimeError`` (it never stops early, so
            values and gradients are never those of a truncated loop). Equinox's name.
        checkpoints: with ``max_steps``, the number of carries reverse mode may store (a positive
            int): it stores the carry every ``ceil(max_steps / checkpoints)`` steps and recomputes each
            segment's residuals in the backward pass, so it holds at most ``checkpoints`` carries and one
            segment's residuals, for one more run of the body per step. Equinox's name. None stores
            every step's residuals.

    Returns:
        The final value.

    Raises:
        TypeError: a function is not callable, ``cond_fun`` does not return a scalar, or ``body_fun``
            changes a leaf's structure, shape or dtype (naming the leaf and both types).
        ValueError: a function assigns a Parameter, ``max_steps`` or ``checkpoints`` is not a positive
            int, or ``checkpoints`` is given without ``max_steps``.
        RuntimeError: the loop runs past ``max_steps``.
    """
    return _while_loop(cond_fun, body_fun, init_val, *_check_budget(max_steps, checkpoints), True)


def forward_only_while_loop(cond_fun: Callable[..., Any], body_fun: Callable[..., Any], init_val: PyTree) -> Any:
    """:func:`while_loop` whose reverse mode raises a ``TypeError`` (naming ``while_loop: reverse-mode``),
    for a loop inside a custom rule that reverse mode must never reach (``odeint``'s solver)."""
    return _while_loop(cond_fun, body_fun, init_val, None, None, False)


def _while_loop(cond_fun, body_fun, init_val, max_steps, checkpoints, reverse_mode, names: Names = WHILE,
                user_tree=None):
    """:func:`while_loop`, its errors naming ``names``; ``user_tree`` is the structure of the leading
    carry leaves that are the user's own, when the loop carries more (``fori_loop``'s ``(val, i, upper)``)."""
    for name, fun in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(fun):
            raise TypeError(f"while_loop: {name} must be a function of the loop value, got {type(fun).__name__}")
    leaves, tree = _tree.tree_flatten(init_val)
    leaves = [_operand_leaf(x, names.who, k, names.init) for k, x in enumerate(leaves)]
    body_program, body_builder = _staged_body(body_fun, tree, leaves, names)
    if any(is_weak(c) for c in leaves):  # weak types: take the body's dtype, and stage again
        leaves = [_strong(c, out) for c, out in zip(leaves, body_program.outputs)]
        body_program, body_builder = _staged_body(body_fun, tree, leaves, names)
    user_tree = tree if user_tree is None else user_tree
    _check_carry(body_program, user_tree, user_tree.num_leaves, names.who, names.body, names.init)
    cond_program, cond_builder = _staged(lambda *xs: [cond_fun(_tree.tree_unflatten(tree, list(xs)))], leaves,
                                         "while_loop", "cond_fun")
    pred = cond_program.outputs[0]
    aval = pred.aval if hasattr(pred, "aval") else abstractify(pred.value)[0]
    if tuple(aval.shape) != () or not (isinstance(aval.dtype, np.dtype) and aval.dtype.kind in "biu"):
        raise TypeError(f"while_loop: cond_fun must return a scalar bool, got {aval}; reduce it (tnp.all, tnp.any)")
    cond_consts = _implicit_operands(cond_builder)
    outs = bind(while_p, *leaves, *cond_consts, *_implicit_operands(body_builder), cond=ClosedProgram(cond_program),
                body=ClosedProgram(body_program), n_carry=len(leaves), n_cond=len(cond_consts), max_steps=max_steps,
                checkpoints=checkpoints, reverse_mode=reverse_mode)
    return _tree.tree_unflatten(tree, outs)


def _check_budget(max_steps, checkpoints) -> tuple[int | None, int | None]:
    for name, value in (("max_steps", max_steps), ("checkpoints", checkpoints)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"while_loop: {name} must be a positive int or None, got {value!r}")
    if checkpoints is not None and max_steps is None:
        raise ValueError("while_loop: checkpoints needs max_steps (the segment between two stored carries is "
                         "ceil(max_steps / checkpoints) steps); pass max_steps=, or leave checkpoints out to "
                         "store every step")
    return (None if max_steps is None else int(max_steps)), (None if checkpoints is None else int(checkpoints))


def _staged_body(body_fun, tree, leaves, names: Names):
    def flat_body(*xs):
        out_leaves, out_tree = _tree.tree_flatten(body_fun(_tree.tree_unflatten(tree, list(xs))))
        check_structure(out_tree, tree, names)
        return [np.asarray(o) if type(o) in _SCALARS else o for o in out_leaves]
    return _staged(flat_body, leaves, names.who, names.body)


def check_structure(out_tree, tree, names: Names) -> None:
    """A loop body's result must have the pytree structure of the initial value."""
    if out_tree != tree:
        raise TypeError(f"{names.who}: {names.body} returns a {names.value} of pytree structure {out_tree} but "
                        f"{names.init} has {tree}; the {names.value} must keep its structure, shapes and dtypes")
