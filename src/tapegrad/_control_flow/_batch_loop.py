"""``vmap`` staged by ``jit`` as a loop over the batch, where jit's compiled executor lowers the
function of one example.

A batched program computes every operation on arrays of the whole batch: for a small per-example
state (an ODE's two numbers) those are arrays where one example's values would be scalars in
registers, and past the compiled executor's size limit (1,024 elements) they send the program to the
Python executor altogether. Staged by ``jit`` with the compiled executor on, ``vmap(f)`` therefore
becomes a ``scan`` over the examples whose body is ``f`` of one example: the batch is the compiled
program's outer loop, and the size rule and the compile budget apply to one example's work. Where
one example's program does not lower (a primitive without a lowering, a value past the size limit,
the budget) the batched program serves, as it does eagerly and under every other transform.
"""
from __future__ import annotations

import numpy as np

from tapegrad._config import config
from tapegrad._control_flow._closed import _SCALARS, ClosedProgram, _aval_of, _implicit_operands
from tapegrad._control_flow._scan import scan_p
from tapegrad._core import ShapedArray, bind, for_jit, trace_stack
from tapegrad._jit import native
from tapegrad._jit.staging import StagingTrace, abstractify, stage
from tapegrad._structural import moveaxis


class _Example:
    """One example's output leaf, as ``vmap``'s ``out_axes`` checks see it (its shape)."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)


class _NotALoop(Exception):
    """An output the loop cannot stack (None): the batched program serves."""


def batch_as_loop(flat_fun, leaves, in_dims, out_dims, size: int):
    """``vmap_flat(flat_fun, leaves, in_dims, out_dims, size)``'s outputs computed by a ``scan`` over
    the examples, or None where the batched program serves: not staged by ``jit`` with the compiled
    executor on, nothing mapped, an ``out_axes`` entry None, or one example's program not lowered."""
    if not (for_jit.get() and config.compiled_executor and native.available()):
        return None
    stack = trace_stack()
    if not stack or stack[-1].trace_type is not StagingTrace:
        return None
    mapped = [k for k, (x, d) in enumerate(zip(leaves, in_dims)) if d is not None and x is not None]
    if not mapped:
        return None
    staged = _stage_example(flat_fun, leaves, in_dims, mapped)
    if staged is None:
        return None
    program, builder = staged
    dims = out_dims([_Example(_aval_of(x).shape) for x in program.outputs]) if callable(out_dims) else out_dims
    if any(d is None for d in dims) or not native.lowers(program):
        return None
    xs = [moveaxis(leaves[k], in_dims[k], 0) for k in mapped]
    outs = bind(scan_p, *xs, *_implicit_operands(builder), body=ClosedProgram(program, builder.remat), length=size,
                reverse=False, n_carry=0, n_xs=len(xs), unroll=1)
    return [o if d == 0 else moveaxis(o, 0, d) for o, d in zip(outs, dims)]


def _stage_example(flat_fun, leaves, in_dims, mapped):
    """``(program, builder)`` of ``flat_fun`` on one example: the mapped leaves' slices are its
    inputs, the others it closes over. None where it writes a Parameter or returns a None leaf."""
    pairs = [abstractify(leaves[k]) for k in mapped]
    avals = [ShapedArray(tuple(n for axis, n in enumerate(a.shape) if axis != in_dims[k]), a.dtype)
             for (a, _), k in zip(pairs, mapped)]

    def example(*slices):
        args = list(leaves)
        for k, x in zip(mapped, slices):
            args[k] = x
        outs = flat_fun(*args)
        if any(o is None for o in outs):
            raise _NotALoop
        return [np.asarray(o) if type(o) in _SCALARS else o for o in outs]
    try:
        program, builder = stage(example, avals, [b for _, b in pairs])
    except _NotALoop:
        return None
    return None if builder.writes else (program, builder)
