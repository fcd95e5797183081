"""``custom_call``: a ``custom_vjp`` or ``custom_jvp`` function kept whole in a staged program, so that
transforms applied to the program later (``grad(jit(f))``, and every derivative of a loop body,
which is always staged) use its rule instead of differentiating its forward computation (JAX's
``custom_vjp_call``).

The primitive's one static parameter is the joint call (the interface of ``bind_joint``): its impl
runs the call's function, and each rule hands the work back to the call, as the interpreters'
``process_joint`` do: reverse mode records ``call.forward``'s residuals (``defvjp_fwd``) and its vjp
rule is ``call.backward``; forward mode is ``call.jvp``; ``vmap`` binds the primitive again with the
vmapped call.

A call is staged this way only when its function reads nothing but its arguments: no value of an
outer transform and no Parameter (see :func:`stages_whole`). Otherwise it is inlined, as before: its
rule then applies to transforms inside the staged function only (docs/jit.md, Limitations).
"""
from __future__ import annotations

import numpy as np

from tapegrad._batching import defbatch
from tapegrad._core import ShapedArray
from tapegrad._jit.program import Var
from tapegrad._lowerings import NotLowerable
from tapegrad._rules import def_lowering, defjvp_joint, defvjp_argnum, defvjp_fwd, primitive
from tapegrad._vmap import _BatchedCall


def _impl(*args, call):
    return list(call.fun(*args))


def _abstract_eval(*avals, call):
    """The output types of ``call.fun``, staged on ``avals`` (on NumPy: only the types are kept), or
    the ones :func:`stages_whole` found for the same ``avals`` (a call it accepted is typed next)."""
    cached = getattr(call, "staged_types", None)
    if cached is not None and cached[0] == avals:
        return list(cached[1])
    from tapegrad._jit.staging import stage  # staging stages this primitive: imported at use
    program, _ = stage(call.fun, avals, [np] * len(avals))
    return _output_types(program)


def _output_types(program) -> list:
    return [x.aval if isinstance(x, Var) else ShapedArray((), type(x.value)) for x in program.outputs]


custom_call_p = primitive("custom_call", _impl, _abstract_eval, multiple_results=True)


def _fwd(*primals, call):
    outs, residuals = call.forward(*primals)
    return list(outs), residuals


def _vjp(argnums, cts, ans, primals, *, call, residuals):
    in_cts = call.backward(residuals, list(cts))
    return [in_cts[argnum] for argnum in argnums]


def _vjp_one(argnum, cts, ans, *primals, **params):
    return _vjp([argnum], cts, ans, primals, **params)[0]


def _jvp(tangents, ans, *primals, call, residuals=None):
    return call.jvp(list(primals), list(tangents))[1]


def _batch(vals, dims, *, call):
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    outs = custom_call_p.bind(*vals, call=_BatchedCall(call, dims, size))
    return outs, [0] * len(outs)


def _lowering(ctx, *operands, call):
    """The call's function staged on the operands' types and inlined: in a compiled program nothing
    differentiates it again, so its rules play no part."""
    from tapegrad._jit.staging import stage
    program, builder = stage(call.fun, [ShapedArray(v.shape, v.dtype) for v in operands], [np] * len(operands))
    if builder.captured or builder.params or builder.writes:
        raise NotLowerable("the custom function reads a value it does not receive")
    return ctx.inline(program, list(operands))


defvjp_fwd(custom_call_p, _fwd)
defvjp_argnum(custom_call_p, _vjp_one, _vjp)
defjvp_joint(custom_call_p, _jvp)
defbatch(custom_call_p, _batch)
def_lowering(custom_call_p, _lowering)


def stages_whole(call, args) -> bool:
    """Whether ``call.fun`` reads nothing but ``args``: staged on their types, it captures no value of
    an outer transform and reads or writes no Parameter."""
    from tapegrad._jit.staging import abstractify, stage
    avals, backends = zip(*[abstractify(a) for a in args]) if args else ((), ())
    program, builder = stage(call.fun, avals, backends)
    call.staged_types = (tuple(avals), tuple(_output_types(program)))  # for _abstract_eval, next
    return not (builder.captured or builder.params or builder.writes)
