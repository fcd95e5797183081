"""Reverse mode through ``while_loop`` (which JAX refuses): the ``while`` primitive's ``vjp_fwd`` and
vjp rule, and the two primitives they bind.

The loop is differentiated as a ``scan`` of its *masked* body ``c -> where(cond(c), body(c), c)``,
split once for reverse mode (``_partial.py``): a step that runs is the body, a step past the end (an
example of a batch that finished early) keeps its carry, so its cotangent passes through unchanged.

- **Values concrete** (eagerly, under ``grad``/``vjp`` and any nesting of ``grad``, ``jvp`` and
  ``vmap``): recording the loop binds ``while_stored``, which runs the split forward body while the
  condition holds and returns the final carries, each step's residuals stacked (a leading axis of
  the trip count ``n``) and ``n``. Once it has run, ``n`` is known: the vjp rule is ``scan``'s, a
  backward scan of ``n`` steps over the stacked residuals, and ``while_stored``'s own rules are those
  of a scan of ``n`` steps, so every order of derivative composes. Memory: ``n`` times one step's
  residuals.
- **Staged** (``jit`` outside the ``grad``), or with ``checkpoints``: the trip count is not known
  when the program is staged, so the stored residuals cannot be a value of the program. The forward
  pass is the plain ``while``; the vjp rule binds ``while_grad``, one equation that runs the loop again
  keeping each step's residuals in a Python list (or, with ``checkpoints``, the carry every
  ``ceil(max_steps / checkpoints)`` steps, recomputing each segment's residuals on the way back), then
  pulls the cotangent back over them in reverse. ``vmap`` batches it; a derivative of it (reverse
  mode under ``jit`` differentiated again) raises.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._backend import namespace_of, zeros_like
from tapegrad._batching import at_front, defbatch
from tapegrad._control_flow._closed import ClosedProgram, _cut, _stage_closed
from tapegrad._control_flow._partial import _backend_of, split_body
from tapegrad._control_flow._scan import _dense, _scan_fwd, _scan_jvp, _scan_vjp, _stacked
from tapegrad._control_flow._while import check_steps, emit_while, while_p
from tapegrad._core import ShapedArray, Tracer, bind
from tapegrad._jit.staging import StagingTracer, abstractify, stage
from tapegrad._lowerings import NotLowerable, concrete
from tapegrad._owned import owned
from tapegrad._rules import def_lowering, defjvp_joint, defvjp_argnum, defvjp_fwd, primitive
from tapegrad._vmap import BatchTracer, vmap_flat
from tapegrad.numpy import any as any_
from tapegrad.numpy import where

# What the last run of a ``while_grad`` equation held at once (tests read it): ``carries``, the stored
# carries (checkpoints); ``steps``, the steps whose residuals were held.
STORED = {"carries": 0, "steps": 0}


def masked_body(cond: ClosedProgram, body: ClosedProgram, n_carry: int, n_cond: int) -> ClosedProgram:
    """``(*c, *cond consts, *body consts) -> where(cond(c), body(c), c)``, a ``scan`` body with no
    ``xs`` (its consts are the ``while``'s), made once per loop."""
    def make():
        ins = list(body.program.invars[:n_carry]) + list(cond.program.invars[n_carry:]) \
            + list(body.program.invars[n_carry:])

        def masked(*xs):
            c, kc, kb = _cut(xs, n_carry, n_cond, len(xs) - n_carry - n_cond)
            pred = cond.evaluate(*c, *kc)[0]
            if pred.dtype != np.bool_:
                pred = pred != 0
            return [where(pred, new, old) for new, old in zip(body.evaluate(*c, *kb), c)]
        program, _ = stage(masked, [v.aval for v in ins], [v.backend for v in ins])
        return ClosedProgram(program)
    return body.derived(("masked", cond), make)


def _staged_below(x) -> bool:
    """Whether ``x`` stands for a value ``jit`` is staging (abstract: its trip count is unknown)."""
    while isinstance(x, Tracer):
        if isinstance(x, StagingTracer):
            return True
        x = x.val if isinstance(x, BatchTracer) else getattr(x, "primal", None)
    return False


def _count(n) -> int:
    return int(n.concrete_value() if isinstance(n, Tracer) else n)


def _scan_params(n: int, n_carry: int) -> dict:
    return {"length": n, "reverse": False, "n_carry": n_carry, "n_xs": 0, "unroll": 1}


# ---- values concrete: while_stored, a loop that stacks each step's residuals ------------------------
def _stored_impl(*args, cond, fwd, n_carry, n_cond, max_steps):
    """``fwd`` (the split masked body) while ``cond`` holds: ``(*carries, *stacked residuals, n)``."""
    carry, kc, k = list(args[:n_carry]), args[n_carry:n_carry + n_cond], args[n_carry:]
    rows: list = []
    while bool(cond.run(*carry, *kc)[0]):
        check_steps(len(rows), max_steps)
        outs = fwd.run(*carry, *k)
        carry = list(outs[:n_carry])
        rows.append(outs[n_carry:])
    xp = namespace_of(*args) if args else np
    return (owned(carry, caller=args) + _stacked(xp, rows, fwd.out_avals[n_carry:])
            + [np.asarray(len(rows), np.int64)])


def _stored_abstract(*avals, **params):
    raise TypeError("while_loop: internal error: the loop that stores residuals was staged; under jit reverse "
                    "mode runs as one while_grad equation")


while_stored_p = primitive("while_stored", _stored_impl, _stored_abstract, multiple_results=True)


def _stored_jvp(tangents, ans, *args, cond, fwd, n_carry, n_cond, max_steps):
    """It has run: a scan of its ``n`` steps carries the tangents."""
    outs = _scan_jvp(list(tangents), ans[:-1], *args, body=fwd, **_scan_params(_count(ans[-1]), n_carry))
    return None if outs is None else list(outs) + [None]


def _stored_vjp(argnums, cts, ans, primals, *, cond, fwd, n_carry, n_cond, max_steps):
    """It has run: ``scan``'s reverse mode over its ``n`` steps (the forward steps run again, keeping
    this body's own residuals)."""
    params = _scan_params(_count(ans[-1]), n_carry)
    _, residuals = _scan_fwd(*primals, body=fwd, **params)
    return _scan_vjp(argnums, cts[:-1], ans[:-1], primals, body=fwd, residuals=residuals, **params)


def _stored_batch(vals, dims, *, cond, fwd, n_carry, n_cond, max_steps):
    """Until every example's condition is false; the masked body keeps a finished example's carry.
    The residuals come out batched behind the step axis, ``n`` (the longest example's) unbatched."""
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    carries = _batched_front(vals[:n_carry], dims[:n_carry], size)
    consts = list(vals[n_carry:])
    cond_dims = [0] * n_carry + list(dims[n_carry:n_carry + n_cond])
    fwd_dims = [0] * n_carry + list(dims[n_carry:])
    n_out = len(fwd.out_avals)
    key = ("stored batch", tuple(fwd_dims), size)
    bcond = cond.derived(key, lambda: _stage_closed(
        lambda *ins: [any_(vmap_flat(cond.evaluate, list(ins), cond_dims, [0], size)[0])],
        carries + consts[:n_cond]))
    bfwd = fwd.derived(key, lambda: _stage_closed(
        lambda *ins: vmap_flat(fwd.evaluate, list(ins), fwd_dims, [0] * n_out, size), carries + consts))
    outs = bind(while_stored_p, *carries, *consts, cond=bcond, fwd=bfwd, n_carry=n_carry, n_cond=n_cond,
                max_steps=max_steps)
    return outs, [0] * n_carry + [1] * (n_out - n_carry) + [None]


def _batched_front(vals, dims, size) -> list:
    return [at_front(v, d, size) for v, d in zip(vals, dims)]


defjvp_joint(while_stored_p, _stored_jvp)
defvjp_argnum(while_stored_p, lambda argnum, cts, ans, *primals, **params:
              _stored_vjp([argnum], cts, ans, primals, **params)[0], _stored_vjp)
defbatch(while_stored_p, _stored_batch)


# ---- staged, or checkpointed: while_grad, the forward loop and the backward loop in one equation ---
def _grad_impl(*args, cond, fwd, bwd, n_carry, n_cond, n_k, max_steps, checkpoints):
    """Operands ``(*carries, *consts, *state)``, ``state`` the carries' cotangents and the consts'
    running cotangent sums; returns the final ``state``."""
    loop = fwd.native_loop(while_grad_p, args, dict(cond=cond, fwd=fwd, bwd=bwd, n_carry=n_carry, n_cond=n_cond,
                                                    n_k=n_k, max_steps=max_steps, checkpoints=checkpoints))
    outs = loop(*args) if loop is not None else None
    if outs is not None:  # under jit, where both sweeps lower: compiled alone
        return list(outs)
    carry, k, state = _cut(args, n_carry, n_k, len(args) - n_carry - n_k)
    kc = k[:n_cond]

    def step(c):
        outs = fwd.run(*c, *k)
        return list(outs[:n_carry]), outs[n_carry:]

    def pull_back(rows, state):
        STORED["steps"] = max(STORED["steps"], len(rows))
        for res in reversed(rows):
            state = list(bwd.run(*state, *res, *k))
        return state
    STORED.update(carries=0, steps=0)
    if checkpoints is None:  # every step's residuals, in a list as the loop runs
        rows: list = []
        while bool(cond.run(*carry, *kc)[0]):
            check_steps(len(rows), max_steps)
            carry, res = step(carry)
            rows.append(res)
        state = pull_back(rows, state)
    else:  # the carry entering every seg-th step; each segment's residuals recomputed on the way back
        seg, saved, n = math.ceil(max_steps / checkpoints), [], 0
        while bool(cond.run(*carry, *kc)[0]):
            if n % seg == 0:
                saved.append(carry)
                STORED["carries"] = len(saved)
            n = check_steps(n, max_steps)
            carry = step(carry)[0]
        while saved:
            start = (len(saved) - 1) * seg
            carry, rows = saved.pop(), []
            for _ in range(min(seg, n - start)):
                carry, res = step(carry)
                rows.append(res)
            state = pull_back(rows, state)
    return owned(state, caller=args)


while_grad_p = primitive("while_grad", _grad_impl, lambda *avals, bwd, **params: list(bwd.out_avals),
                         multiple_results=True)


def _grad_lowering(ctx, *operands, cond, fwd, bwd, n_carry, n_cond, n_k, max_steps, checkpoints):
    """The forward loop writing each step's residuals into stacks of ``max_steps`` rows, then the
    backward loop over the rows written, last first: ``_grad_impl`` without checkpoints. A loop with no
    ``max_steps`` (nothing sizes the stacks) or with checkpoints is not lowered."""
    if max_steps is None or checkpoints is not None:
        raise NotLowerable("a reverse-mode while_loop without max_steps, or with checkpoints")
    carry, k, state = _cut(operands, n_carry, n_k, len(operands) - n_carry - n_k)
    carries = [ctx.state(c) for c in carry]
    avals = fwd.out_avals[n_carry:]
    stacks = ctx.stacks(max_steps, avals)

    def step(n):
        outs = ctx.inline(fwd.program, carries + list(k))
        for stack, out, aval in zip(stacks, outs[n_carry:], avals):
            ctx.store(stack, n, ctx.convert(out, concrete(aval.dtype)))
        ctx.assign(carries, outs[:n_carry])
    steps = emit_while(ctx, cond, carries, k[:n_cond], max_steps, step)
    states = [ctx.state(s) for s in state]
    i = ctx.fresh("i")
    ctx.loop(f"for {i} in range({steps} - 1, -1, -1):")
    with ctx.block():
        rows = [ctx.row(stack, i, tuple(a.shape), concrete(a.dtype)) for stack, a in zip(stacks, avals)]
        ctx.assign(states, ctx.inline(bwd.program, states + rows + list(k)))
    return states


def_lowering(while_grad_p, _grad_lowering)


def _grad_derivative(*args, **params):
    raise NotImplementedError(
        "while_loop: reverse mode under jit (or with checkpoints) runs as one while_grad equation, which is not "
        "differentiable again; for higher derivatives differentiate outside jit (tg.jit(tg.grad(tg.grad(f))) -> "
        "tg.grad(tg.grad(tg.jit(f))), which runs the loop eagerly) and leave out checkpoints")


def _grad_batch(vals, dims, *, cond, fwd, bwd, n_carry, n_cond, n_k, max_steps, checkpoints):
    """The batched loop until every example is done, and the batched backward loop (the masked body
    passes a finished example's cotangent through)."""
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    carry, k, state = _cut(vals, n_carry, n_k, len(vals) - n_carry - n_k)
    _, k_dims, _ = _cut(dims, n_carry, n_k, len(vals) - n_carry - n_k)
    carry, state = _batched_front(carry, dims[:n_carry], size), _batched_front(state, dims[n_carry + n_k:], size)
    cond_dims, fwd_dims = [0] * n_carry + k_dims[:n_cond], [0] * n_carry + k_dims
    n_res = len(fwd.out_avals) - n_carry
    bwd_dims = [0] * (len(state) + n_res) + k_dims
    key = ("grad batch", tuple(fwd_dims), size)
    bcond = cond.derived(key, lambda: _stage_closed(
        lambda *ins: [any_(vmap_flat(cond.evaluate, list(ins), cond_dims, [0], size)[0])], carry + k[:n_cond]))
    bfwd = fwd.derived(key, lambda: _stage_closed(
        lambda *ins: vmap_flat(fwd.evaluate, list(ins), fwd_dims, [0] * len(fwd.out_avals), size), carry + k))
    res_avals = [(_with_batch(v.aval, size), v.backend) for v in bwd.program.invars[len(state):len(state) + n_res]]
    bbwd = bwd.derived(key, lambda: _stage_on(
        lambda *ins: vmap_flat(bwd.evaluate, list(ins), bwd_dims, [0] * len(state), size),
        [abstractify(s) for s in state] + res_avals + [abstractify(x) for x in k]))
    outs = bind(while_grad_p, *carry, *k, *state, cond=bcond, fwd=bfwd, bwd=bbwd, n_carry=n_carry, n_cond=n_cond,
                n_k=n_k, max_steps=max_steps, checkpoints=checkpoints)
    return outs, [0] * len(outs)


def _with_batch(aval, size):
    return ShapedArray((size,) + tuple(aval.shape), aval.dtype)


def _stage_on(fun, pairs) -> ClosedProgram:
    avals, backends = zip(*pairs) if pairs else ((), ())
    program, _ = stage(fun, avals, backends)
    return ClosedProgram(program)


defjvp_joint(while_grad_p, _grad_derivative)
defvjp_argnum(while_grad_p, _grad_derivative)
defbatch(while_grad_p, _grad_batch)


# ---- the while primitive's reverse mode -------------------------------------------------------------
def _while_fwd(*args, cond, body, n_carry, n_cond, max_steps, checkpoints, reverse_mode):
    """What the tape runs when it records a ``while``: the loop that stores each step's residuals, where
    the values are concrete and no checkpoint budget is set; the plain loop otherwise."""
    params = {"cond": cond, "body": body, "n_carry": n_carry, "n_cond": n_cond, "max_steps": max_steps,
              "checkpoints": checkpoints, "reverse_mode": reverse_mode}
    if not reverse_mode:
        raise TypeError("while_loop: reverse-mode differentiation of this loop is not supported: it belongs to a "
                        "custom rule, which reverse mode should have met instead")
    if checkpoints is not None or any(_staged_below(a) for a in args):
        return bind(while_p, *args, **params), None
    split = split_body(masked_body(cond, body, n_carry, n_cond), n_carry, 0)
    outs = bind(while_stored_p, *args, cond=cond, fwd=split.fwd, n_carry=n_carry, n_cond=n_cond,
                max_steps=max_steps)
    return outs[:n_carry], (outs[n_carry:-1], outs[-1])


def _while_vjp(argnums, cts, ans, primals, *, cond, body, n_carry, n_cond, max_steps, checkpoints, reverse_mode,
               residuals):
    masked = masked_body(cond, body, n_carry, n_cond)
    if residuals is not None:  # the loop ran, storing its residuals: a backward scan of its n steps
        stacked, n = residuals
        return _scan_vjp(argnums, cts, ans, primals, body=masked, residuals=stacked,
                         **_scan_params(_count(n), n_carry))
    split = split_body(masked, n_carry, 0)
    consts = list(primals[n_carry:])
    wanted = set(argnums)
    need_k = tuple(i for i in split.diff_k if n_carry + i in wanted)
    state = [_dense(cts[c], ans[c]) for c in split.diff_c] + [zeros_like(consts[i]) for i in need_k]
    res_pairs = [(aval, _backend_of(out)) for aval, out in
                 zip(split.fwd.out_avals[n_carry:], split.fwd.program.outputs[n_carry:])]
    pairs = [abstractify(s) for s in state] + res_pairs + [abstractify(x) for x in consts]
    bwd = masked.derived(("while_grad", need_k), lambda: _stage_on(split.backward_body((), need_k), pairs))
    outs = bind(while_grad_p, *primals, *state, cond=cond, fwd=split.fwd, bwd=bwd, n_carry=n_carry, n_cond=n_cond,
                n_k=len(consts), max_steps=max_steps, checkpoints=checkpoints)
    by_operand = dict(zip(split.diff_c, outs))
    by_operand.update((n_carry + i, g) for i, g in zip(need_k, outs[len(split.diff_c):]))
    return [by_operand.get(argnum) for argnum in argnums]


defvjp_fwd(while_p, _while_fwd)
defvjp_argnum(while_p, lambda argnum, cts, ans, *primals, **params:
              _while_vjp([argnum], cts, ans, primals, **params)[0], _while_vjp)
