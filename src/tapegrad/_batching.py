"""Batch rules by family, and the axis bookkeeping they share.

A batch rule is ``rule(vals, dims, **params) -> (out, out_dim)``: ``dims[i]`` is the batch axis of
``vals[i]`` (None: not mapped), and the rule returns the batched result and its batch axis (for a
primitive with several results, the list of results and the list of their axes). Rules are written in
tapegrad operations (see ``tapegrad._vmap``).

The families keep the batch axis where it is when they can (an elementwise op on one batched operand
and scalars, a reduction over other axes), because every ``moveaxis`` is one more primitive to trace
and often a strided copy to compute; they move it to the front when the op needs it there.
"""
from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tapegrad import _structural as st
from tapegrad._core import Primitive, bind
from tapegrad._structural import broadcast_to, expand_dims, moveaxis, reshape, shape_of
from tapegrad._typing import ArrayLike


def defbatch(prim: Primitive, rule: Callable[..., Any]) -> None:
    """Give ``prim`` its batch rule, the rule ``vmap`` applies it with.

    Args:
        prim: the primitive.
        rule: ``rule(vals, dims, **params) -> (out, out_dim)``: ``dims[i]`` is the batch axis of
            ``vals[i]`` (None: shared by every example); ``out`` is the batched result, with its batch
            axis at ``out_dim`` (for several results, a list of results and a list of axes). Written
            in tapegrad operations (``bind`` of primitives), so that it nests under other transforms.

    Returns:
        None; ``prim.batch_rule`` is set.
    """
    prim.batch_rule = rule


def bind_batched(prim: Primitive, vals: Any, out_dim: int, **params: Any) -> Any:
    """``prim`` bound on already-batched operands whose results all carry the batch axis at
    ``out_dim``, in a batch rule's return form.

    Args:
        prim: the primitive.
        vals: the operands, batched as ``prim`` expects them.
        out_dim: where each result has its batch axis.
        **params: ``prim``'s static parameters.

    Returns:
        ``(out, out_dim)``; for a primitive with several results (the stack axes of ``eigh``'s
        eigenvalues and eigenvectors lead alike), the list of results and ``[out_dim] * len(out)``.
    """
    out = bind(prim, *vals, **params)
    return (out, [out_dim] * len(out)) if prim.multiple_results else (out, out_dim)


def ndim_of(x: ArrayLike) -> int:
    """The number of axes of an array or tracer (0 for a Python scalar).

    Args:
        x: an array, a tracer or a Python scalar.

    Returns:
        An int.
    """
    return getattr(x, "ndim", 0)


def example_shape(x: ArrayLike, d: Any) -> tuple:
    """The shape of one example of ``x`` whose batch axis is ``d``.

    Args:
        x: an array or tracer.
        d: its batch axis, or None (shared: every example is ``x``).

    Returns:
        ``x``'s shape without axis ``d`` (all of it when ``d`` is None), a tuple.
    """
    shape = shape_of(x)
    return shape if d is None else shape[:d] + shape[d + 1:]


def batch_size(vals: Any, dims: Sequence[int | None]) -> int:
    """The number of examples: the length of the first batched operand's batch axis.

    Args:
        vals: a batch rule's operands.
        dims: their batch axes (None: shared).

    Returns:
        An int.

    Raises:
        ValueError: no operand is batched (every entry of ``dims`` is None).
    """
    for v, d in zip(vals, dims):
        if d is not None:
            return shape_of(v)[d]
    raise ValueError("no batched operand")


def to_front(x: ArrayLike, d: Any) -> Any:
    """``x`` with its batch axis ``d`` moved to 0 (``x`` itself when ``d`` is 0).

    Args:
        x: an array or tracer.
        d: its batch axis, an int.

    Returns:
        ``moveaxis(x, d, 0)``, same dtype.
    """
    if d == 0:
        return x
    return moveaxis(x, d, 0)


def at_front(x: ArrayLike, d: Any, size: int) -> Any:
    """``x`` with a batch axis at 0: moved there, or (``d`` None) the shared value broadcast to
    ``size`` examples.

    Args:
        x: an array, tracer or Python scalar.
        d: its batch axis, or None for a shared operand.
        size: the number of examples (:func:`batch_size`), used when ``d`` is None.

    Returns:
        An array of shape ``(size,) + example_shape(x, d)``, ``x``'s dtype (a Python scalar's as
        NumPy makes it an array).
    """
    if d is not None:
        return to_front(x, d)
    if not hasattr(x, "shape"):  # a Python scalar
        x = np.asarray(x)
    return broadcast_to(expand_dims(x, 0), (size,) + shape_of(x))


def all_at_front(vals: Any, dims: Sequence[int | None]) -> Any:
    """Every operand with its batch axis at 0, the shared ones broadcast (:func:`at_front` of each).

    Args:
        vals: a batch rule's operands.
        dims: their batch axes (None: shared); at least one is batched.

    Returns:
        A list of arrays, each with the batch size as its leading axis.

    Raises:
        ValueError: no operand is batched.
    """
    size = batch_size(vals, dims)
    return [at_front(v, d, size) for v, d in zip(vals, dims)]


def batch_axis_map(axis: int, d: int) -> int:
    """Where an example's axis ``axis`` sits in the batched array whose batch axis is ``d``.

    Args:
        axis: an axis of one example, non-negative.
        d: the batch axis of the batched array.

    Returns:
        ``axis + 1`` if ``axis >= d``, else ``axis`` (the batch axis shifts the axes at and after it).
    """
    return axis + (axis >= d)


def lead_batch(x: ArrayLike, d: int, ndim: int) -> Any:
    """``x`` with its batch axis ``d`` moved to 0, then unit axes after it until one example has
    ``ndim`` axes: NumPy broadcasting aligns examples of different rank from the right, and this keeps
    the batch axis of every operand in the same place.

    Args:
        x: a batched array or tracer.
        d: its batch axis.
        ndim: the rank each example should have (the longest operand's).

    Returns:
        ``x`` reshaped to ``(B, 1, ..., 1) + example_shape``, ``ndim + 1`` axes (unchanged rank when an
        example has ``ndim`` axes or more).
    """
    x = to_front(x, d)
    shape = shape_of(x)
    missing = ndim + 1 - len(shape)
    if missing <= 0:
        return x
    return reshape(x, shape[:1] + (1,) * missing + shape[1:])


# ---- the identity as a batch of basis vectors ------------------------------------------------------
# id -> every live identity basis made by identity_basis
_IDENTITIES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def identity_basis(n: int, dtype):
    """The ``n`` standard basis vectors of a space of ``n`` elements as one batch (the identity matrix,
    a NumPy array of ``dtype``), remembered while it lives so that batch rules can recognise it
    (:func:`is_identity_basis`): a product with it is its other operand, and needs no product."""
    eye = np.eye(n, dtype=dtype)
    _IDENTITIES[id(eye)] = eye
    return eye


def is_identity_basis(v: ArrayLike) -> bool:
    """Whether ``v`` is an identity matrix made by ``jacrev``/``jacfwd`` for their basis (so a batch rule
    may skip a product with it, whichever axis holds the batch).

    Args:
        v: any value.

    Returns:
        True only for the very array object the Jacobians made (an identity check, not a comparison of
        values), while it lives.
    """
    return _IDENTITIES.get(id(v)) is v


# ---- broadcasting: elementwise ops, and NumPy's stacked linalg -----------------------------------------
def broadcast_batch(prim: Any, vals: Any, dims: Sequence[int | None], *, core: int = 0, **params: Any) -> Any:
    """The batch rule of a primitive that broadcasts its operands over their leading axes, each operand
    ending in ``core`` axes of its own (0 for elementwise ops, 2 for the matrices of NumPy's linalg):
    the batch axis becomes one more broadcast axis.

    Fast path: every batched operand has the full number of broadcast axes and the same batch axis
    ``d`` among them, and each shared operand is short enough to broadcast against the axes after
    ``d``: the op runs as it is and the output's batch axis is ``d``. Otherwise each batched operand
    gets its batch axis at 0 and unit axes up to the longest operand (:func:`lead_batch`), so the
    shared operands broadcast against the example axes only; the output's batch axis is 0.

    Args:
        prim: the primitive.
        vals: its operands, batched or shared.
        dims: their batch axes (None: shared).
        core: the number of trailing axes of each operand that do not broadcast.
        **params: ``prim``'s static parameters.

    Returns:
        ``(out, out_dim)`` (for several results, the list of results and a list of axes).
    """
    batch_axis: Any  # an int after the loop: a batch rule runs where some operand is batched
    ranks, rank, batch_axis, uniform = [], 0, None, True
    for v, d in zip(vals, dims):  # plain loops: this rule runs for most operations under vmap
        r = getattr(v, "ndim", 0) - core
        if d is not None:
            r -= 1
            if batch_axis is None:
                batch_axis = d
            elif d != batch_axis:
                uniform = False
        ranks.append(r)
        if r > rank:
            rank = r
    if uniform and batch_axis <= rank:
        for r, d in zip(ranks, dims):
            if (r != rank) if d is not None else (r > rank - batch_axis):
                break
        else:
            out = bind(prim, *vals, **params)  # bind_batched, inlined: most operations under vmap come here
            return (out, [batch_axis] * len(out)) if prim.multiple_results else (out, batch_axis)
    moved = [v if d is None else lead_batch(v, d, rank + core) for v, d in zip(vals, dims)]
    return bind_batched(prim, moved, 0, **params)


def defbatch_elementwise(*prims: Primitive) -> None:
    """Give each of ``prims`` (NumPy-broadcasting operations of any number of operands) the rule
    :func:`broadcast_batch` (with ``core=0``).

    Args:
        *prims: the primitives.

    Returns:
        None; each ``prim.batch_rule`` is set.
    """
    for prim in prims:
        prim.batch_rule = functools.partial(broadcast_batch, prim)


# ---- reductions with ``axis`` (None or a sorted tuple) and ``keepdims`` --------------------------------
def _reduction_rule(prim):
    """The batch axis stays put; the reduced axes are renumbered around it."""
    def rule(vals, dims, *, axis, keepdims, **params):
        (x,), (d,) = vals, dims
        n = ndim_of(x) - 1
        axes = tuple(range(n)) if axis is None else axis
        out = bind(prim, x, axis=tuple(batch_axis_map(a, d) for a in axes), keepdims=keepdims, **params)
        return out, d if keepdims else d - sum(1 for a in axes if a < d)
    return rule


def defbatch_reduction(*prims: Primitive) -> None:
    """Give each of ``prims`` a rule that keeps the batch axis in place and renumbers the reduced axes.

    Args:
        *prims: reductions with the static parameters ``axis`` (None or a sorted tuple of
            non-negative axes of one example) and ``keepdims``, as ``sum`` or ``amax``.

    Returns:
        None; each ``prim.batch_rule`` is set.
    """
    for prim in prims:
        prim.batch_rule = _reduction_rule(prim)


def _single_axis_rule(prim):
    """``axis`` one int, or None meaning the flattened example (``argmax``): the batch axis stays put
    (one place lower when ``keepdims=False`` removes an axis before it); None flattens each example
    first. Also for the scans and sorts, which keep every axis (``cumsum``, ``argsort``)."""
    def rule(vals, dims, *, axis, **params):
        (x,), (d,) = vals, dims
        if axis is None:
            x = to_front(x, d)
            x = reshape(x, (shape_of(x)[0], math.prod(shape_of(x)[1:])))  # not -1: the batch may be empty
            out = bind(prim, x, axis=1, **params)
            keepdims = params.get("keepdims", False)
            if keepdims:  # the example's reduced shape is all ones
                out = reshape(out, (shape_of(out)[0],) + (1,) * (ndim_of(vals[0]) - 1))
            return out, 0
        out = bind(prim, x, axis=batch_axis_map(axis, d), **params)
        removed = params.get("keepdims") is False and axis < d  # argmax drops the axis before the batch's
        return out, d - 1 if removed else d
    return rule


def defbatch_single_axis(*prims: Primitive) -> None:
    """Give each of ``prims`` its batch rule: the batch axis stays put (one place lower when
    ``keepdims=False`` removes an axis before it), and ``axis=None`` flattens each example first.

    Args:
        *prims: primitives with one static ``axis``, an int or None for the flattened example (the
            scans, the sorts, ``argmax``), and optionally ``keepdims``.

    Returns:
        None; each ``prim.batch_rule`` is set.
    """
    for prim in prims:
        prim.batch_rule = _single_axis_rule(prim)


def _front_rule(prim, shift_params):
    """Every operand with its batch axis at 0 (shared ones broadcast), and ``shift_params(params)``
    rewriting the example's static parameters for the batched arrays."""
    def rule(vals, dims, **params):
        moved = all_at_front(vals, dims)
        return bind(prim, *moved, **shift_params(dict(params))), 0
    return rule


def defbatch_front(prim: Primitive, shift_params: Any = lambda params: params) -> None:
    """A batch rule for a primitive that works on any leading axes once its static parameters are
    shifted past the batch axis at 0: every operand gets its batch axis at 0 (:func:`all_at_front`)
    and ``prim`` is bound with ``shift_params(params)``.

    Args:
        prim: the primitive.
        shift_params: ``params -> params`` for the batched arrays (an ``axis`` plus one, say); the
            identity by default.

    Returns:
        None; ``prim.batch_rule`` is set, and its results have the batch axis at 0.
    """
    prim.batch_rule = _front_rule(prim, shift_params)


# ---- the structural primitives (tapegrad._structural): the vocabulary of the rules above -------------
def _reshape_batch(vals, dims, *, shape):
    """The batch axis to the front, then the example's new shape after it."""
    x = to_front(vals[0], dims[0])
    return bind(st.reshape_p, x, shape=(shape_of(x)[0],) + tuple(shape)), 0


def _transpose_batch(vals, dims, *, axes):
    """One transpose that also brings the batch axis ``d`` to the front."""
    (x,), (d,) = vals, dims
    return bind(st.transpose_p, x, axes=(d,) + tuple(a + (a >= d) for a in axes)), 0


def _broadcast_to_batch(vals, dims, *, shape):
    """The batch axis to the front, then unit axes up to the target rank, then broadcast."""
    x = lead_batch(vals[0], dims[0], len(shape))
    return bind(st.broadcast_to_p, x, shape=shape_of(x)[:1] + tuple(shape)), 0


def _concatenate_batch(vals, dims, *, axis):
    return bind(st.concatenate_p, *all_at_front(vals, dims), axis=axis + 1), 0


defbatch(st.reshape_p, _reshape_batch)
defbatch(st.transpose_p, _transpose_batch)
defbatch(st.broadcast_to_p, _broadcast_to_batch)
defbatch(st.concatenate_p, _concatenate_batch)
defbatch_reduction(st.sum_p)
def _add_any_batch(vals, dims):
    """Both operands at one batch axis, a shared one broadcast to the batch: ``add_any`` never
    broadcasts (its vjp returns the cotangent as it is), so its operands must keep one shape."""
    (x, y), (dx, dy) = vals, dims
    if dx == dy:
        return bind(st.add_any_p, x, y), dx
    return bind(st.add_any_p, *all_at_front(vals, dims)), 0


defbatch(st.add_any_p, _add_any_batch)
defbatch_elementwise(st.astype_p, st.stop_gradient_p)
