"""``scan``, ``fori_loop`` and ``map`` (JAX's names and semantics): a loop over a staged body, as one
multi-result primitive ``scan`` whose static parameter is the body's program (:class:`ClosedProgram`).

The body is staged once per call of ``scan``, on the abstract values of the carry and of one slice of
``xs``; the impl runs its compiled program once per step, never the Python function. Values the body
closes over that belong to an outer transform (a tracer, a Parameter read) become explicit operands,
after the carries and ``xs`` ("consts").

The primitive's results are the final carries, then the stacked ``ys``. Its rules are scans again:
forward mode scans the body's jvp, carrying the tangents along. Reverse mode splits the body
(``_partial.py``): when the tape records a scan it runs a forward body that also returns each step's
residuals (the intermediates the step's derivative needs, stacked like ``ys``), and the vjp rule, at
backward time, scans in the opposite direction a body that pulls the cotangent back from those
residuals alone, which is itself differentiable again. A body that staged a ``checkpoint`` stores only
the carries and recomputes each step. ``vmap`` scans the batched body with every carry batched.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import _lowerings, _tree
from tapegrad._backend import namespace_of, zeros_like
from tapegrad._batching import defbatch
from tapegrad._control_flow._closed import (
    _SCALARS,
    ClosedProgram,
    _check_carry,
    _cut,
    _implicit_operands,
    _inexact,
    _is_differentiable,
    _like,
    _operand_leaf,
    _slice_aval,
    _staged,
    _strong,
)
from tapegrad._control_flow._partial import split_body
from tapegrad._control_flow._while import Names, _while_loop, check_structure
from tapegrad._core import ShapedArray, bind
from tapegrad._jit.passes import dce, def_dce
from tapegrad._jit.program import Eqn, Program
from tapegrad._jit.staging import abstractify, is_weak, stage
from tapegrad._jvp import jvp_flat
from tapegrad._owned import owned
from tapegrad._rules import def_lowering, defjvp_joint, defvjp_argnum, defvjp_fwd, primitive
from tapegrad._structural import broadcast_to, moveaxis
from tapegrad._typing import PyTree
from tapegrad._vmap import vmap_flat


# ---- the primitive: operands (*carries, *xs, *consts), body (*carries, *x slices, *consts) -> (*carries, *ys)
def _split(seq, n_carry: int, n_xs: int):
    return list(seq[:n_carry]), list(seq[n_carry:n_carry + n_xs]), list(seq[n_carry + n_xs:])


# A loop of fewer steps runs the body's program step by step: building the Python-float loop costs
# about as much as compiling the program (0.2-0.4 ms), which a short loop would not win back.
SCALAR_MIN_STEPS = 32


def _scan_impl(*args, body, length, reverse, n_carry, n_xs, unroll):
    """A Python loop over the body's compiled program: ``unroll`` steps per iteration (one program
    that applies the body that many times, optimised as a whole), then the remaining steps one by
    one. A long loop whose body works on 0-d float64 values runs as one loop of Python-float code
    (``tapegrad._jit.scalar``) instead."""
    carry, xs, consts = _split(args, n_carry, n_xs)
    loop = body.native_loop(scan_p, args, dict(body=body, length=length, reverse=reverse, n_carry=n_carry,
                                               n_xs=n_xs, unroll=unroll))
    outs = loop(*args) if loop is not None else None
    if outs is not None:
        return list(outs)
    if length >= SCALAR_MIN_STEPS:  # a body on scalars runs as Python floats, unless that gives up
        loop = body.scalar_loop(n_carry, n_xs)
        result = loop(carry, xs, consts, length, reverse) if loop is not None else None
        if result is not None:
            return list(result[0]) + list(result[1])
    steps = range(length - 1, -1, -1) if reverse else range(length)
    ys: list = []
    if unroll > 1 and length >= unroll:
        block = body.derived(("unroll", unroll), lambda: _unrolled(body, unroll, n_carry, n_xs))
        n_blocks = length // unroll
        for b in range(n_blocks):
            at = steps[b * unroll:(b + 1) * unroll]
            outs = block.run(*carry, *[x[i] for i in at for x in xs], *consts)
            carry = outs[:n_carry]
            n_ys = (len(outs) - n_carry) // unroll
            ys.extend(outs[n_carry + s * n_ys:n_carry + (s + 1) * n_ys] for s in range(unroll))
        steps = steps[n_blocks * unroll:]
    for i in steps:
        outs = body.run(*carry, *[x[i] for x in xs], *consts)
        carry = outs[:n_carry]
        ys.append(outs[n_carry:])
    if reverse:
        ys.reverse()
    xp = namespace_of(*args) if args else np
    carry = owned(carry, caller=args)  # the steps' results may alias their inputs: the caller owns these
    return carry + _stacked(xp, ys, body.out_avals[n_carry:])


def _unrolled(body: ClosedProgram, k: int, n_carry: int, n_x: int) -> ClosedProgram:
    """The body applied ``k`` times in a row: ``(*carries, *x slices of step 1, ..., of step k, *consts)
    -> (*carries, *ys of step 1, ..., of step k)``."""
    invars = body.program.invars
    carry_v, x_v, const_v = invars[:n_carry], invars[n_carry:n_carry + n_x], invars[n_carry + n_x:]
    ins = list(carry_v) + list(x_v) * k + list(const_v)

    def unrolled(*args):
        carry, consts, ys = list(args[:n_carry]), list(args[n_carry + k * n_x:]), []
        for s in range(k):
            outs = body.evaluate(*carry, *args[n_carry + s * n_x:n_carry + (s + 1) * n_x], *consts)
            carry = outs[:n_carry]
            ys += outs[n_carry:]
        return carry + ys
    program, _ = stage(unrolled, [v.aval for v in ins], [v.backend for v in ins])
    return ClosedProgram(program)


def _stacked(xp, rows, avals) -> list:
    """Column ``k`` of ``rows`` stacked on a new leading axis (an empty one when there are no rows),
    each a new array of the column's dtype."""
    if not rows:
        return [xp.zeros((0,) + tuple(aval.shape), aval.dtype) for aval in avals]
    return [xp.stack([row[k] for row in rows]).astype(aval.dtype, copy=False) for k, aval in enumerate(avals)]


def _scan_abstract(*avals, body, length, reverse, n_carry, n_xs, unroll):
    carries = body.out_avals[:n_carry]
    return list(carries) + [ShapedArray((length,) + tuple(a.shape), a.dtype) for a in body.out_avals[n_carry:]]


scan_p = primitive("scan", _scan_impl, _scan_abstract, multiple_results=True)


def _scan_lowering(ctx, *operands, body, length, reverse, n_carry, n_xs, unroll):
    """A native loop: the carries in loop variables (unrolled where small), each step's slice of
    ``xs`` read from its stack and each ``ys`` written into a stack allocated before the loop."""
    carry_in, xs, consts = _split(operands, n_carry, n_xs)
    states = [ctx.state(c) for c in carry_in]
    stacks = [ctx.array(x) for x in xs]
    y_avals = body.out_avals[n_carry:]
    names = ctx.stacks(length, y_avals, ctx.out_vars[n_carry:])
    ys = [_lowerings.Value((length, *a.shape), _lowerings.concrete(a.dtype), name=name)
          for a, name in zip(y_avals, names)]
    i = ctx.fresh("i")
    ctx.loop(f"for {i} in {f'range({length - 1}, -1, -1)' if reverse else f'range({length})'}:")
    with ctx.block():
        rows = [ctx.row(stack, i, x.shape[1:], x.dtype) for stack, x in zip(stacks, xs)]
        with ctx.destined(body.program.outputs[n_carry:], names, i):
            outs = ctx.inline(body.program, states + rows + list(consts))
        for y, out in zip(ys, outs[n_carry:]):
            ctx.store(y.name, i, ctx.convert(out, y.dtype))
        ctx.assign(states, outs[:n_carry])
    return states + ys


def_lowering(scan_p, _scan_lowering)




def _stage_body(fun, carries, xs, consts) -> ClosedProgram:
    """``fun`` staged on the carries', one slice of each ``xs``' and the consts' abstract values (a
    derived body: it captures nothing)."""
    pairs = [abstractify(c) for c in carries] + [_slice_aval(x) for x in xs] + [abstractify(c) for c in consts]
    avals, backends = zip(*pairs) if pairs else ((), ())
    program, _ = stage(fun, avals, backends)
    return ClosedProgram(program)


def _scan(carries, xs, consts, body, params):
    return bind(scan_p, *carries, *xs, *consts, body=body, **dict(params, n_carry=len(carries), n_xs=len(xs)))


def _scan_jvp(tangents, ans, *args, body, residuals=None, **params):
    """A scan of the body's jvp: the float carries' tangents are carried along (zeros where none comes
    in, since the body may make them nonzero), the live tangents of ``xs`` and consts are operands."""
    n_carry, n_xs = params["n_carry"], params["n_xs"]
    carries, xs, consts = _split(args, n_carry, n_xs)
    t_carry, t_xs, t_consts = _split(tangents, n_carry, n_xs)
    invars = body.program.invars
    diff_c = [k for k in range(n_carry) if _is_differentiable(invars[k])]
    live_x = tuple(j for j, t in enumerate(t_xs) if t is not None)
    live_k = tuple(c for c, t in enumerate(t_consts) if t is not None)
    if not (live_x or live_k or any(t_carry[k] is not None for k in diff_c)):
        return None
    n_ys = len(body.out_avals) - n_carry
    float_ys = [k for k in range(n_ys) if _inexact(body.out_avals[n_carry + k])]

    def jvp_body(*ins):
        c, tc, x, tx, k, tk = _cut(ins, n_carry, len(diff_c), n_xs, len(live_x), len(consts), len(live_k))
        tangent_in = [None] * len(invars)
        for i, t in zip(diff_c, tc):
            tangent_in[i] = t
        for j, t in zip(live_x, tx):
            tangent_in[n_carry + j] = t
        for i, t in zip(live_k, tk):
            tangent_in[n_carry + n_xs + i] = t
        outs, out_t = jvp_flat(body.evaluate, c + x + k, tangent_in)
        dense = [zeros_like(o) if t is None else _like(t, o) for o, t in zip(outs, out_t)]
        return (outs[:n_carry] + [dense[i] for i in diff_c] + outs[n_carry:]
                + [dense[n_carry + i] for i in float_ys])
    t_init = [zeros_like(carries[k]) if t_carry[k] is None else t_carry[k] for k in diff_c]
    new_carries = carries + t_init
    new_xs = xs + [t_xs[j] for j in live_x]
    new_consts = consts + [t_consts[i] for i in live_k]
    jbody = body.derived(("jvp", live_x, live_k), lambda: _stage_body(jvp_body, new_carries, new_xs, new_consts))
    outs = _scan(new_carries, new_xs, new_consts, jbody, params)
    n_c = len(new_carries)
    result = [None] * (n_carry + n_ys)
    for j, k in enumerate(diff_c):
        result[k] = outs[n_carry + j]
    for j, k in enumerate(float_ys):
        result[n_carry + k] = outs[n_c + n_ys + j]
    return result




def _scan_fwd(*args, body, **params):
    """Reverse mode's forward scan: the split body's, which also returns each step's residuals."""
    split = split_body(body, params["n_carry"], params["n_xs"])
    outs = bind(scan_p, *args, body=split.fwd, **params)
    n_out = len(body.out_avals)
    return outs[:n_out], outs[n_out:]


def _scan_vjp(argnums, cts, ans, primals, *, body, residuals, **params):
    """A scan in the opposite direction over the stored residuals (``_partial.py``): the carry is the
    cotangent of the carry and the running sum of the consts' cotangents, the ``ys`` the cotangents of
    ``xs``; only the cotangents of ``argnums`` are computed."""
    n_carry, n_xs = params["n_carry"], params["n_xs"]
    carries, xs, consts = _split(primals, n_carry, n_xs)
    split = split_body(body, n_carry, n_xs)
    ct_carry, ct_ys = cts[:n_carry], cts[n_carry:]
    wanted = set(argnums)
    need_x = tuple(j for j in split.diff_x if n_carry + j in wanted)
    need_k = tuple(i for i in split.diff_k if n_carry + n_xs + i in wanted)
    r_carries = [_dense(ct_carry[k], ans[k]) for k in split.diff_c] + [zeros_like(consts[i]) for i in need_k]
    r_xs = (list(residuals) + [xs[j] for j in split.x_used]
            + [_dense(ct_ys[k], ans[n_carry + k]) for k in split.float_ys])
    bwd = body.derived(("vjp", need_x, need_k),
                       lambda: _stage_body(split.backward_body(need_x, need_k), r_carries, r_xs, consts))
    outs = _scan(r_carries, r_xs, consts, bwd, dict(params, reverse=not params["reverse"]))
    by_operand = dict(zip(split.diff_c, outs))
    by_operand.update((n_carry + n_xs + i, g) for i, g in zip(need_k, outs[len(split.diff_c):]))
    by_operand.update((n_carry + j, g) for j, g in zip(need_x, outs[len(r_carries):]))
    return [by_operand.get(argnum) for argnum in argnums]


def _dense(ct, x):
    """A cotangent as the backward scan takes it: zeros for none, else of its result's dtype."""
    return zeros_like(x) if ct is None else _like(ct, x)


def _scan_vjp_one(argnum, cts, ans, *primals, body, **params):
    return _scan_vjp([argnum], cts, ans, primals, body=body, **params)[0]


def _scan_batch(vals, dims, *, body, **params):
    """A scan of the batched body: every carry batched at axis 0 (a carry the body makes batched must
    be batched from the start), ``xs`` batched at axis 1 (behind the scanned axis), consts as they
    come; the ``ys`` come out batched at axis 1."""
    n_carry, n_xs = params["n_carry"], params["n_xs"]
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    carries, xs, consts = _split(vals, n_carry, n_xs)
    c_dims, x_dims, k_dims = _split(dims, n_carry, n_xs)
    carries = [broadcast_to(c, (size,) + tuple(c.shape)) if d is None else moveaxis(c, d, 0)
               for c, d in zip(carries, c_dims)]
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, x_dims)]
    in_dims = [0] * n_carry + [None if d is None else 0 for d in x_dims] + list(k_dims)
    n_out = len(body.out_avals)

    def make():
        return _stage_body(lambda *ins: vmap_flat(body.evaluate, list(ins), in_dims, [0] * n_out, size),
                           carries, xs, consts)
    batched = body.derived(("batch", tuple(in_dims), size), make)
    outs = _scan(carries, xs, consts, batched, params)
    return outs, [0] * n_carry + [1] * (n_out - n_carry)


def _scan_dce(eqn, used):
    """The scan without the ``ys`` nothing reads: its body no longer computes them (jit's DCE)."""
    n_carry, body = eqn.params["n_carry"], eqn.params["body"]
    keep = tuple(k for k in range(n_carry, len(used)) if used[k])
    program = body.program

    def make():
        outputs = program.outputs[:n_carry] + [program.outputs[k] for k in keep]
        return ClosedProgram(dce(Program(program.invars, program.constvars, program.consts, program.eqns, outputs)))
    pruned = body.derived(("dce", keep), make)
    return Eqn(eqn.prim, eqn.inputs, dict(eqn.params, body=pruned), eqn.outs[:n_carry] + [eqn.outs[k] for k in keep])


defjvp_joint(scan_p, _scan_jvp)
defvjp_argnum(scan_p, _scan_vjp_one, _scan_vjp)
defbatch(scan_p, _scan_batch)
defvjp_fwd(scan_p, _scan_fwd)
def_dce(scan_p, _scan_dce)


# ---- the public functions --------------------------------------------------------------------------
def scan(f: Callable[..., Any], init: PyTree, xs: PyTree = None, length: int | None = None, reverse: bool = False,
         unroll: int = 1) -> Any:
    """Loop ``f`` over the leading axis of ``xs``, threading a carry (JAX's ``lax.scan``)::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)

    ``f`` is staged once, on the carry's and one slice's shapes and dtypes: eagerly the loop runs its
    compiled program, and under ``jit`` the program holds one ``scan`` operation, never unrolled.
    Reverse mode stores the carry that entered each step (not every intermediate) and recomputes each
    step during the backward pass; ``vmap`` batches every carry.

    Args:
        f: ``f(carry, x) -> (carry, y)``, with the returned carry of the same pytree structure, shapes
            and dtypes as ``init``; ``y`` any pytree of arrays (None for no ``ys``).
        init: the initial carry, a pytree of arrays and Python scalars (a Python scalar takes the dtype
            of the body's result for it, as ``jit``'s weak types do).
        xs: a pytree of arrays scanned along their leading axis, or None (then ``length`` is required).
        length: the number of steps; optional when ``xs`` has leaves, and then equal to their leading
            axes.
        reverse: scan from the last slice to the first (``ys`` still in the order of ``xs``).
        unroll: a positive int: the number of steps each iteration of the Python loop runs, as one
            program applying the body that many times (optimised as a whole: fewer calls for small
            bodies, a longer first call); the results do not depend on it, up to float rounding.

    Returns:
        ``(carry, ys)``, the final carry and the ``y`` of every step stacked on a new leading axis.

    Raises:
        TypeError: ``f`` is not callable, a leaf is not an array, ``f`` does not return a pair, or its
            carry differs from ``init`` in structure, shape or dtype (naming the leaf and both types).
        ValueError: ``length`` disagrees with the leading axes of ``xs``, is missing or negative,
            ``unroll`` is not a positive int, or ``f`` assigns a Parameter.
    """
    if not callable(f):
        raise TypeError(f"scan: f must be a function f(carry, x) -> (carry, y), got {type(f).__name__}")
    if type(unroll) is not int or unroll < 1:
        raise ValueError(f"scan: unroll must be a positive int, got {unroll!r}")
    return _scan_named(f, init, xs, length, reverse, unroll, _SCAN)


_SCAN = Names("scan", "f", "init", "carry")
_FORI = Names("fori_loop", "body_fun", "init_val")
_MAP = Names("map", "f", "init")


def _scan_named(f, init, xs, length, reverse, unroll, names: Names):
    """:func:`scan`, its errors naming ``names`` (the function the user called, and its arguments)."""
    init_leaves, carry_tree = _tree.tree_flatten(init)
    xs_leaves, xs_tree = _tree.tree_flatten(xs)
    init_leaves = [_operand_leaf(x, names.who, k, names.init) for k, x in enumerate(init_leaves)]
    xs_leaves = [_operand_leaf(x, names.who, k, names.xs) for k, x in enumerate(xs_leaves)]
    length = _check_length(length, xs_leaves, names)
    program, builder, y_tree = _stage_scan_body(f, carry_tree, init_leaves, xs_tree, xs_leaves, names)
    if any(is_weak(c) for c in init_leaves):  # weak types: take the body's dtype, and stage again
        init_leaves = [_strong(c, out) for c, out in zip(init_leaves, program.outputs)]
        program, builder, y_tree = _stage_scan_body(f, carry_tree, init_leaves, xs_tree, xs_leaves, names)
    _check_carry(program, carry_tree, len(init_leaves), names.who, names.body, names.init)
    consts = _implicit_operands(builder)
    outs = bind(scan_p, *init_leaves, *xs_leaves, *consts, body=ClosedProgram(program, builder.remat), length=length,
                reverse=bool(reverse), n_carry=len(init_leaves), n_xs=len(xs_leaves), unroll=unroll)
    n_carry, n_ys = len(init_leaves), y_tree.num_leaves
    return (_tree.tree_unflatten(carry_tree, outs[:n_carry]),
            _tree.tree_unflatten(y_tree, outs[n_carry:n_carry + n_ys]))


def _check_length(length, xs_leaves, names: Names) -> int:
    who, xs = names.who, names.xs
    for k, x in enumerate(xs_leaves):
        if len(getattr(x, "shape", ())) == 0:
            raise ValueError(f"{who}: {xs} leaf {k} is a scalar; every leaf of {xs} needs a leading axis to "
                             "loop over")
    leading = {int(x.shape[0]) for x in xs_leaves}
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 0:
            raise ValueError(f"{who}: length must be a non-negative int, got {length!r}")
        length = int(length)
        if leading and leading != {length}:
            raise ValueError(f"{who}: length={length} but the leading axes of {xs} are {sorted(leading)}; they "
                             "must all equal length (or leave length out)")
        return length
    if not leading:
        raise ValueError(f"{who}: {xs} is None (or has no leaves), so length must be given")
    if len(leading) > 1:
        raise ValueError(f"{who}: the leaves of {xs} have different leading axes {sorted(leading)}; they must "
                         "all have the same length")
    return leading.pop()


def _stage_scan_body(f, carry_tree, init_leaves, xs_tree, xs_leaves, names: Names):
    """``(program, builder, y_tree)`` of ``f`` staged on the carry's and one slice's abstract values."""
    n_carry, y_trees = len(init_leaves), []

    def flat_body(*ins):
        carry = _tree.tree_unflatten(carry_tree, list(ins[:n_carry]))
        out = f(carry, _tree.tree_unflatten(xs_tree, list(ins[n_carry:])))
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"{names.who}: {names.body} must return a pair (carry, y), got {type(out).__name__}")
        carry_leaves, tree = _tree.tree_flatten(out[0])
        check_structure(tree, carry_tree, names)
        y_leaves, y_tree = _tree.tree_flatten(out[1])
        y_trees.append(y_tree)
        return [np.asarray(o) if type(o) in _SCALARS else o for o in carry_leaves + y_leaves]
    program, builder = _staged(flat_body, init_leaves, names.who, names.body, xs_leaves)
    return program, builder, y_trees[0]








def fori_loop(lower: Any, upper: Any, body_fun: Callable[..., Any], init_val: PyTree) -> Any:
    """``body_fun(i, val)`` for ``i`` from ``lower`` to ``upper - 1``, threading ``val`` (JAX's
    ``lax.fori_loop``): a :func:`scan` over ``arange(lower, upper)``, differentiable in both modes.

    Args:
        lower, upper: integers. Concrete ones (Python ints) make a ``scan`` of ``upper - lower`` steps
            (``upper <= lower`` returns ``init_val``); a traced one (an array, or a ``jit`` argument) a
            ``while_loop``, which both modes differentiate (JAX refuses reverse mode there).
        body_fun: ``body_fun(i, val) -> val``, with ``i`` a 0-d integer array and the same structure,
            shapes and dtypes in and out.
        init_val: a pytree of arrays and Python scalars.

    Returns:
        The final value.

    Raises:
        TypeError: a bound is not a scalar integer, or as :func:`scan` does.
    """
    if not callable(body_fun):
        raise TypeError("fori_loop: body_fun must be a function body_fun(i, val) -> val, got "
                        f"{type(body_fun).__name__}")
    concrete = [isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in (lower, upper)]
    if not all(concrete):
        for name, bound, ok in (("lower", lower, concrete[0]), ("upper", upper, concrete[1])):
            if not ok and (tuple(getattr(bound, "shape", (1,))) != () or np.dtype(bound.dtype).kind not in "iu"):
                raise TypeError(f"fori_loop: {name} must be a scalar integer, got {type(bound).__name__}")
        return _fori_while(lower, upper, body_fun, init_val)
    if upper <= lower:
        return init_val
    carry, _ = _scan_named(lambda val, i: (body_fun(i, val), None), init_val, np.arange(int(lower), int(upper)),
                           None, False, 1, _FORI)
    return carry


def _fori_while(lower, upper, body_fun, init_val):
    """A traced bound: a ``while_loop`` over ``(val, i, upper)``, differentiable in both modes (JAX
    refuses reverse mode here). ``val``'s leaves and structure are checked here, so that the errors
    name fori_loop's arguments and ``val``'s own leaves."""
    leaves, tree = _tree.tree_flatten(init_val)
    for k, x in enumerate(leaves):
        _operand_leaf(x, _FORI.who, k, _FORI.init)

    def body(c):
        val = body_fun(c[1], c[0])
        check_structure(_tree.tree_structure(val), tree, _FORI)
        return val, c[1] + 1, c[2]
    val, _, _ = _while_loop(lambda c: c[1] < c[2], body, (init_val, lower, upper), None, None, True, _FORI, tree)
    return val


def map(f: Callable[[Any], Any], xs: PyTree) -> Any:  # noqa: A001 (JAX's name)
    """``f`` applied to each slice of ``xs`` along its leading axis, the results stacked (JAX's
    ``lax.map``): a :func:`scan` with no carry.

    Args:
        f: a function of one slice (a pytree like ``xs`` without its leading axis).
        xs: a pytree of arrays with a common leading axis.

    Returns:
        The pytree of ``f``'s outputs, each stacked on a new leading axis.

    Raises:
        TypeError, ValueError: as :func:`scan` does.
    """
    if not callable(f):
        raise TypeError(f"map: f must be a function of one slice of xs, got {type(f).__name__}")
    _, ys = _scan_named(lambda carry, x: (carry, f(x)), (), xs, None, False, 1, _MAP)
    return ys
