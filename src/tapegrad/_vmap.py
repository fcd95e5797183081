"""Batching: ``BatchTrace`` runs a function of one example on a whole batch (Autodidax's ``BatchTrace``).

A :class:`BatchTracer` holds a value with one extra axis, the batch axis ``bdim``, and behaves as one
example: its ``shape`` leaves that axis out. Each primitive's batch rule
``rule(vals, dims, **params) -> (out, out_dim)`` maps operands whose batch axes are ``dims`` (None: not
mapped, the same for every example) to the batched output and its batch axis (None: not mapped); a
primitive with ``multiple_results`` gives the list of its outputs and the list of their axes. The
rules are written in tapegrad operations, so whatever runs below this trace (a tape, another batch, a
forward sweep) records them: ``grad(vmap(f))``, ``vmap(vmap(f))`` and ``vmap(grad(f))`` need nothing
more.

A primitive with no rule falls back to a Python loop over the examples and a ``stack``: always right,
slow, and listed in ``docs/transforms.md``; ``fallback_primitives()`` names those left.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad import _tree
from tapegrad._backend import namespace_of
from tapegrad._core import Trace, Tracer, bind, bind_joint, holds_tracers_of, new_main
from tapegrad._structural import broadcast_to, expand_dims, moveaxis, reduce_sum, stack
from tapegrad.errors import ConcretizationError


class BatchTracer(Tracer):
    """One example of a batch: ``val`` holds every example along axis ``bdim``."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim: int):
        self._trace = trace
        self.val = val
        self.bdim = bdim

    @property
    def shape(self):
        shape = self.val.shape
        return shape[:self.bdim] + shape[self.bdim + 1:]

    @property
    def dtype(self):
        return self.val.dtype

    def array_namespace(self):
        return namespace_of(self.val)

    def concrete_value(self):
        raise ConcretizationError(
            f"{self!r} varies over the vmapped batch, so Python cannot branch on it or convert it with "
            "float()/int()/bool() (each example may take a different branch): use tnp.where to select "
            "per example, or pass the value with in_axes=None if every example shares it")

    def __repr__(self):
        return f"BatchTracer(level={self._trace.level}, shape={self.shape}, dtype={self.dtype})"


class BatchTrace(Trace):
    """``main.global_data`` is the batch size."""

    __slots__ = ()

    @property
    def axis_size(self) -> int:
        return self.main.global_data

    def unpack(self, args):
        vals: list[Any] = list(args)
        dims: list[int | None] = [None] * len(args)
        for i, a in enumerate(args):
            if type(a) is BatchTracer and a._trace is self:
                vals[i], dims[i] = a.val, a.bdim
        return vals, dims

    def process_primitive(self, prim, args, params):
        if prim.multiple_results:  # its own method: the body below stays the single-result hot path
            return self._process_multiple(prim, args, params)
        vals, dims = self.unpack(args)
        rule = prim.batch_rule
        if rule is None:
            out, out_dim = loop_rule(prim, vals, dims, params, self.axis_size)
        else:
            out, out_dim = rule(vals, dims, **params)
        return out if out_dim is None else BatchTracer(self, out, out_dim)

    def _process_multiple(self, prim, args, params):
        vals, dims = self.unpack(args)
        rule = prim.batch_rule or (lambda vals, dims, **params: loop_rule(prim, vals, dims, params, self.axis_size))
        outs, out_dims = rule(vals, dims, **params)
        return [o if d is None else BatchTracer(self, o, d) for o, d in zip(outs, out_dims)]

    def process_joint(self, call, args):
        vals, dims = self.unpack(args)
        batched = _BatchedCall(call, dims, self.axis_size)
        outs = bind_joint(batched, *vals)
        if holds_tracers_of(self, outs):
            return call.on_capture(args)
        return [BatchTracer(self, o, 0) for o in outs]


def loop_rule(prim, vals, dims, params, size: int):
    """The fallback batch rule: ``prim`` once per example, the results stacked along axis 0 (each
    result on its own, for a primitive with ``multiple_results``)."""
    outs = [bind(prim, *[v if d is None else take_example(v, d, b) for v, d in zip(vals, dims)], **params)
            for b in range(size)]
    if prim.multiple_results:
        per_result = list(zip(*outs))
        return [stack(list(r)) for r in per_result], [0] * len(per_result)
    return stack(outs), 0


def take_example(v, d: int, b: int):
    """Example ``b`` of ``v``, whose batch axis is ``d``."""
    return v[(slice(None),) * d + (b,)]


def fallback_primitives(primitives) -> list:
    """The names of ``primitives`` that have no batch rule and so run as a loop under vmap."""
    return sorted(p.name for p in primitives if p.batch_rule is None)


# ---- the flat core ---------------------------------------------------------------------------------
def vmap_flat(fun, args, in_dims, out_dims, axis_size: int):
    """Run ``fun`` (a list of values to a list of values) on a batch of ``axis_size`` examples.

    ``in_dims[i]`` is the batch axis of ``args[i]`` (None: the same value for every example; a None
    argument stays None). Each output ``i`` comes back with its batch axis at ``out_dims[i]``: an
    output the examples share is broadcast there, and ``out_dims[i] = None`` returns it as it is
    (raising :class:`MappedOutputError` if it is mapped). ``out_dims`` may be a function of the
    outputs (as tracers of one example), for callers that know the output structure only then.
    """
    with new_main(BatchTrace, axis_size) as main:
        trace = main.trace
        ins = [x if d is None or x is None else BatchTracer(trace, x, d) for x, d in zip(args, in_dims)]
        outs = fun(*ins)
        if callable(out_dims):
            out_dims = out_dims(outs)
        return [_place(trace, o, d, axis_size, i) for i, (o, d) in enumerate(zip(outs, out_dims))]


class MappedOutputError(ValueError):
    """An output varies over the batch but its ``out_axes`` entry is None; ``index`` is its leaf."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def _place(trace, out, dim, size: int, index: int):
    if type(out) is BatchTracer and out._trace is trace:
        if dim is None:
            raise MappedOutputError(index)
        return out.val if out.bdim == dim else moveaxis(out.val, out.bdim, dim)
    if dim is None or out is None:
        return out
    if not hasattr(out, "shape"):  # a Python scalar becomes a 0-d array, then a batch of them
        out = np.asarray(out)
    shape = list(out.shape)
    shape.insert(dim, size)
    return broadcast_to(expand_dims(out, dim), tuple(shape))


# ---- joint calls (custom_vjp, custom_jvp, checkpoint) ------------------------------------------------
class _BatchedCall:
    """A joint call over a batch: each of its functions is the original's, vmapped. Every output,
    residual and cotangent of the batched call carries its batch axis at 0."""

    def __init__(self, call, in_dims, size: int):
        self.call, self.in_dims, self.size = call, list(in_dims), size
        self.name = call.name
        self.remat = call.remat
        self._res_tree = None

    def __repr__(self):
        return f"vmap({self.call!r})"

    def fun(self, *args):
        return vmap_flat(self.call.fun, args, self.in_dims, _at_front, self.size)

    def forward(self, *primals):

        def flat_forward(*xs):
            outs, residuals = self.call.forward(*xs)
            res_leaves, self._res_tree = _tree.tree_flatten(residuals)
            self._n_out = len(outs)
            return list(outs) + list(res_leaves)
        flat = vmap_flat(flat_forward, primals, self.in_dims, _at_front, self.size)
        return flat[:self._n_out], flat[self._n_out:]

    def backward(self, residuals, out_cts):
        n_res = len(residuals)

        def flat_backward(*xs):
            res = _tree.tree_unflatten(self._res_tree, list(xs[:n_res]))
            return list(self.call.backward(res, list(xs[n_res:])))
        args = list(residuals) + list(out_cts)
        in_cts = vmap_flat(flat_backward, args, [0] * n_res + [None if c is None else 0 for c in out_cts],
                           _at_front, self.size)
        return [_to_input_axis(ct, d) for ct, d in zip(in_cts, self.in_dims)]

    def jvp(self, primals, tangents):
        n = len(primals)

        def flat_jvp(*xs):
            outs, out_tangents = self.call.jvp(list(xs[:n]), list(xs[n:]))
            self._n_out = len(outs)
            return list(outs) + list(out_tangents)
        # a tangent has its primal's shape, so its batch axis is the primal's
        flat = vmap_flat(flat_jvp, list(primals) + list(tangents), self.in_dims * 2, _at_front, self.size)
        return flat[:self._n_out], flat[self._n_out:]

    def on_capture(self, args):
        return self.call.on_capture(args)


def _to_input_axis(ct, d):
    """An input cotangent computed with its batch axis at 0, as the input holds it: summed over the
    batch where the input is shared by every example, moved to the input's batch axis otherwise."""
    if ct is None or d == 0:
        return ct
    return reduce_sum(ct, axis=0) if d is None else moveaxis(ct, 0, d)


def _at_front(outs) -> list:
    """``out_dims`` for a joint call's functions: every output (None too: a zero cotangent or tangent
    stays None) with its batch axis at 0."""
    return [0] * len(outs)
