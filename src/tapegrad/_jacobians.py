"""Jacobians and Hessians: ``jacrev``, ``jacfwd``, ``hessian``.

``jacrev`` records ``fn`` once and pulls every basis cotangent back through the tape in one
``vmap``-batched backward pass; ``jacfwd`` records ``fn`` once (``linearize``) and sweeps every basis
tangent forward through the recorded operations in one batched sweep (JAX's construction: ``vmap`` of
a vjp or jvp). All of it is tapegrad operations, so a Jacobian is differentiable again (``hessian`` is
``jacfwd(jacrev(fn))``, forward over reverse, as in JAX). With ``chunk_size`` the basis is built and
swept a chunk of rows at a time (torch.func's argument), so the batched intermediates, and the basis
itself, hold at most that many rows at once; each chunk's results are written into the Jacobian as
they come (concatenated, differentiably, under an outer transform). ``hvp`` is one
Hessian-vector product, forward over reverse, without forming the Hessian.

Return structure (JAX's, with MindSpore's ``grad_position``): the output pytree, each leaf replaced by
the Jacobian of that output leaf with respect to the selected inputs: for an int ``grad_position`` a
pytree shaped like that input, for a tuple a tuple of such pytrees. A block for output leaf ``o`` and
input leaf ``x`` has shape ``o.shape + x.shape``.
"""
from __future__ import annotations

import functools
import itertools
import numbers
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, overload

import numpy as np

from tapegrad import _tree
from tapegrad._api import (
    _check_flag,
    _differentiable_leaf,
    _select_positions,
    jvp,
    linearize,
    refuse_unknown_keywords,
    require_complex,
    value_and_grad,
    vjp_returning,
)
from tapegrad._backend import namespace_of, zeros_like
from tapegrad._batching import identity_basis
from tapegrad._core import Tracer
from tapegrad._structural import concatenate, reshape
from tapegrad._typing import PyTree

P = ParamSpec("P")


def _jac_positions(grad_position, api: str):
    positions, single = _select_positions(grad_position)
    if positions is None:
        raise ValueError(f"{api}: grad_position=None selects no input; pass an int or a tuple of ints")
    return positions, single


def _selected_inputs(args, positions, api: str, holomorphic: bool = False):
    """The arguments at ``positions``, their leaves checked to be float (or complex) arrays, and complex
    ones with ``holomorphic``."""
    selected = []
    for p in positions:
        if p >= len(args):
            raise IndexError(f"{api}: grad_position {p} is out of range: the function was called with "
                             f"{len(args)} positional argument(s); positions count from 0")
        selected.append(_tree.tree_map(
            functools.partial(_selected_leaf, f"the input at grad_position {p}", api, holomorphic), args[p]))
    return tuple(selected)


def _selected_leaf(where: str, api: str, holomorphic: bool, leaf):
    leaf = _differentiable_leaf(leaf, f"{api}: {where}")
    if holomorphic:
        require_complex(leaf, where, api)
    return leaf


def _block_of_rows(out_leaf, offset: int, total: int, g):
    """The rows of the batched cotangents ``g`` that belong to ``out_leaf``, shaped as its Jacobian block
    (the output's shape, then the input's)."""
    return reshape(_rows(g, offset, out_leaf.size, total), tuple(out_leaf.shape) + tuple(g.shape[1:]))


def _restrict(fn, args, kwargs, positions, has_aux, api):
    """``fn`` as a function of the arguments at ``positions``; the others are held fixed. With
    ``has_aux`` its result's shape is checked here, so that an error names ``api``."""
    def restricted(*selected):
        call_args = list(args)
        for p, x in zip(positions, selected):
            call_args[p] = x
        out = fn(*call_args, **kwargs)
        if has_aux:
            _check_aux_output(out, api)
        return out
    return restricted


def _check_aux_output(out, api):
    if not isinstance(out, (tuple, list)) or len(out) < 2:
        got = f"a tuple of length {len(out)}" if isinstance(out, (tuple, list)) else "a single output"
        raise ValueError(f"{api}(has_aux=True) needs the function to return a tuple (out, aux, ...), got "
                         f"{got}; return (out, aux) or set has_aux=False")


def _offsets(leaves):
    """Each leaf's first row in the flattened, concatenated space of ``leaves``, and the total size."""
    offsets, start = [], 0
    for leaf in leaves:
        offsets.append(start)
        start += leaf.size
    return offsets, start


def _batched_basis(leaves, start: int, stop: int):
    """Rows ``start:stop`` of the standard basis of the space of ``leaves`` (flattened and
    concatenated), as one batch: for each leaf an array of shape ``(stop - start,) + leaf.shape`` that
    holds the identity's entries in that leaf's columns and zeros elsewhere (constants of the leaf's
    dtype and backend). The whole basis of one NumPy vector is made by ``identity_basis``, so that a
    matrix product with it is known to be its other operand."""
    if len(leaves) == 1 and len(leaves[0].shape) == 1 and start == 0 and stop == leaves[0].size \
            and namespace_of(leaves[0]) is np:  # the whole basis of one vector: the identity, known as such
        return [identity_basis(stop, leaves[0].dtype)]
    batches = []
    for leaf, offset in zip(leaves, _offsets(leaves)[0]):
        n = leaf.size
        block = zeros_like(leaf, shape=(stop - start, n))
        first, last = max(start, offset), min(stop, offset + n)  # the rows that fall in this leaf
        if first < last:  # their ones lie on a diagonal: row r has its one in column r - offset
            rows = block[first - start:last - start].reshape(-1)
            rows[first - offset::n + 1] = 1
        batches.append(block.reshape((stop - start,) + tuple(leaf.shape)))
    return batches


def _sweep(fn, leaves, chunk_size, axis: int):
    """``vmap(fn)`` over the standard basis of ``leaves``, the batch axis of its results at ``axis``
    (0 or -1), in chunks of at most ``chunk_size`` basis vectors (None: all at once), the chunks'
    results joined along ``axis``."""
    total = _offsets(leaves)[1]
    step = total if chunk_size is None else chunk_size
    from tapegrad._vmap_api import vmap  # on first use: it imports optree (tapegrad._tree)
    mapped = vmap(fn, out_axes=axis)
    pieces = (mapped(*_batched_basis(leaves, start, min(start + step, total))) for start in range(0, total, step))
    first = next(pieces)
    if step >= total:
        return first
    first_leaves, treedef = _tree.tree_flatten(first)
    if any(isinstance(leaf, Tracer) for leaf in first_leaves):  # under an outer transform: differentiably
        return _tree.tree_map(lambda *parts: concatenate(parts, axis=axis), first, *pieces)
    # at rest: each chunk is written into the result as it comes, so only one chunk's results are
    # alive beside it (a concatenation would hold all the pieces and the result at its end)
    outs = [zeros_like(leaf, shape=_with_batch(leaf.shape, axis, total)) for leaf in first_leaves]
    for start, piece in zip(range(0, total, step), itertools.chain([first_leaves], map(_tree.tree_leaves, pieces))):
        where = (slice(start, start + step),) if axis == 0 else (Ellipsis, slice(start, start + step))
        for out, leaf in zip(outs, piece):
            out[where] = leaf
    return _tree.tree_unflatten(treedef, outs)


def _single_basis(leaves) -> list:
    """The one basis vector of a space of one element (a scalar among empty leaves), without a batch
    axis: a one in the leaf of size 1, each other leaf empty."""
    return [row[0] for row in _batched_basis(leaves, 0, 1)]


def _unbatched_block(out_leaf, g, in_leaf):
    """The Jacobian block of ``out_leaf`` and ``in_leaf`` from ``g``, the result of the single pass
    of a one-element space: ``g`` itself, reshaped, where both leaves hold that element; zeros where
    one of them is empty."""
    if out_leaf.size == 0 or in_leaf.size == 0:
        return _zero_block(out_leaf, in_leaf)
    return reshape(g, tuple(out_leaf.shape) + tuple(in_leaf.shape))


def _with_batch(shape, axis: int, total: int) -> tuple:
    """``shape`` with its batch axis (0 or -1) of size ``total``."""
    return (total,) + tuple(shape[1:]) if axis == 0 else tuple(shape[:-1]) + (total,)


def _rows(batched, offset: int, size: int, total: int):
    """Rows ``offset:offset + size`` of a batch of ``total`` results (all of them without a copy)."""
    return batched if size == total else batched[offset:offset + size]


def _zero_block(out_leaf, in_leaf):
    return zeros_like(in_leaf, shape=tuple(out_leaf.shape) + tuple(in_leaf.shape))


def _check_flags(has_aux, holomorphic):
    _check_flag(has_aux, "has_aux")
    _check_flag(holomorphic, "holomorphic")


def _check_chunk_size(chunk_size, api: str):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
                                   or chunk_size < 1):
        raise ValueError(f"{api}: chunk_size must be a positive int (at most that many basis vectors at once) "
                         f"or None (all at once), got {chunk_size!r}")
    return None if chunk_size is None else int(chunk_size)


@overload
def jacrev(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: Literal[False] = False,
           chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[P, PyTree]: ...
@overload
def jacrev(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, *, has_aux: Literal[True],
           chunk_size: int | None = None, holomorphic: bool = False) -> Callable[P, tuple[PyTree, Any]]: ...
@overload
def jacrev(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
           chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[..., Any]: ...
def jacrev(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
           chunk_size: int | None = None, *, holomorphic: bool = False, **kwargs: Any) -> Callable[..., Any]:
    """The Jacobian of ``fn`` by reverse mode: one vjp per output element, as JAX's ``jacrev``
    (``argnums`` is ``grad_position`` here, as in MindSpore's ``jacrev``).

    ``fn`` runs once on the tape; the backward passes for every basis cotangent run batched (``vmap``
    of the vjp). The result is made of tapegrad operations, so it is differentiable again. It is the
    cheaper Jacobian when the outputs have fewer elements than the selected inputs.

    Args:
        fn: a function of pytrees of arrays returning a pytree of arrays (with ``has_aux``,
            ``(out, aux...)``).
        grad_position: an int or a tuple of ints: which positional arguments to differentiate.
        has_aux: as in :func:`vjp`: ``fn`` returns ``(out, *aux)``; two outputs give a bare ``aux``,
            more a tuple.
        chunk_size: at most this many basis vectors (rows of the Jacobian) per batched pass
            (torch.func's ``chunk_size``): bounds the memory of the batched intermediates and of the
            basis at the price of one pass per chunk; None (the default) sweeps them all at once.
            The results are the same.
        holomorphic: ``fn`` is promised holomorphic (JAX's ``holomorphic``): the selected inputs and
            the outputs must be complex; the result is the complex Jacobian ``df_i/dz_j``.

    Returns:
        A function of ``fn``'s arguments returning the Jacobian, or ``(jacobian, aux)`` with
        ``has_aux``. The Jacobian has the output's pytree structure, each output leaf ``o``
        replaced by its blocks: for an int ``grad_position`` a pytree shaped like that input, for a
        tuple a tuple of such pytrees, one per position. The block for output leaf ``o`` and input
        leaf ``x`` has shape ``o.shape + x.shape`` (JAX's layout; a scalar output and one array
        input give ``x.shape``) and the dtype of ``x``'s gradient.

        Static type: :data:`~tapegrad._typing.PyTree` (Any): the Jacobian's structure is the
        output's with each leaf replaced by blocks shaped like the inputs, which a type cannot
        spell; ``fn``'s parameters are kept, so a call with the wrong arguments is caught.

    Raises:
        ValueError: ``grad_position`` None, negative, repeated or an empty tuple; ``chunk_size`` not a
            positive int or None (at ``jacrev(...)``); with ``has_aux``, ``fn`` returning fewer than
            two outputs (at the call).
        TypeError: ``grad_position`` not an int or tuple of ints (bools included); ``has_aux`` or
            ``holomorphic`` not a bool; a keyword it does not take (a peer's ``argnums``: the message
            names ``grad_position``) (at ``jacrev(...)``); an integer, bool or non-numeric leaf at a
            differentiated position; with ``holomorphic=True``, a real input or output leaf (at the
            call).
        IndexError: a position beyond the arguments given (at the call).
    """
    refuse_unknown_keywords("jacrev", kwargs)
    positions, single = _jac_positions(grad_position, "jacrev")
    _check_flags(has_aux, holomorphic)
    chunk_size = _check_chunk_size(chunk_size, "jacrev")

    @functools.wraps(fn)
    def jac_fn(*args, **kwargs):
        selected = _selected_inputs(args, positions, "jacrev", holomorphic)
        restricted = _restrict(fn, args, kwargs, positions, has_aux, "jacrev")
        out, vjp_fn, *aux = vjp_returning(restricted, selected, has_aux, holomorphic, "jacrev")
        out_leaves, out_tree = _tree.tree_flatten(out)
        offsets, total = _offsets(out_leaves)
        if total == 0:
            blocks = [_tree.tree_map(functools.partial(_zero_block, o), selected) for o in out_leaves]
        elif total == 1:  # a scalar output: one plain backward pass, no batch axis to add and remove
            cts = vjp_fn(_tree.tree_unflatten(out_tree, _single_basis(out_leaves)))
            blocks = [_tree.tree_map(functools.partial(_unbatched_block, o), cts, selected) for o in out_leaves]
        else:  # batched backward passes for the basis cotangents (one, without chunk_size)
            cts = _sweep(lambda *rows: vjp_fn(_tree.tree_unflatten(out_tree, list(rows))), out_leaves,
                         chunk_size, 0)
            blocks = [_tree.tree_map(functools.partial(_block_of_rows, o, off, total), cts)
                      for o, off in zip(out_leaves, offsets)]
        jac = _tree.tree_unflatten(out_tree, [b[0] if single else b for b in blocks])
        return (jac, *aux) if has_aux else jac
    return jac_fn


@overload
def jacfwd(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: Literal[False] = False,
           chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[P, PyTree]: ...
@overload
def jacfwd(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, *, has_aux: Literal[True],
           chunk_size: int | None = None, holomorphic: bool = False) -> Callable[P, tuple[PyTree, Any]]: ...
@overload
def jacfwd(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
           chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[..., Any]: ...
def jacfwd(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
           chunk_size: int | None = None, *, holomorphic: bool = False, **kwargs: Any) -> Callable[..., Any]:
    """The Jacobian of ``fn`` by forward mode, as JAX's ``jacfwd``: ``fn`` runs once on the tape
    (:func:`linearize`), then every basis tangent is swept forward through the recorded operations,
    batched.

    It is the cheaper Jacobian when the selected inputs have fewer elements than the outputs, and the
    result is differentiable again.

    Args:
        fn: a function of pytrees of arrays returning a pytree of arrays (with ``has_aux``,
            ``(out, aux...)``).
        grad_position: an int or a tuple of ints: which positional arguments to differentiate.
        has_aux: ``fn`` returns ``(out, *aux)``; two outputs give a bare ``aux``, more a tuple.
        chunk_size: at most this many basis tangents (columns of the Jacobian) per batched sweep;
            None (the default) sweeps them all at once. The results are the same.
        holomorphic: ``fn`` is promised holomorphic (JAX's ``holomorphic``): the selected inputs and
            the outputs must be complex; the result is the complex Jacobian ``df_i/dz_j``.

    Returns:
        A function of ``fn``'s arguments returning the Jacobian, or ``(jacobian, aux)`` with
        ``has_aux``; the structure, shapes and values of :func:`jacrev`'s: the output's pytree
        structure, each output leaf ``o`` replaced by its blocks (for an int ``grad_position`` a
        pytree shaped like that input, for a tuple a tuple of such pytrees), the block for output
        leaf ``o`` and input leaf ``x`` of shape ``o.shape + x.shape``. Static type: as
        :func:`jacrev`'s.

    Raises:
        ValueError: as :func:`jacrev`.
        TypeError: as :func:`jacrev`.
        IndexError: a position beyond the arguments given (at the call).
    """
    refuse_unknown_keywords("jacfwd", kwargs)
    positions, single = _jac_positions(grad_position, "jacfwd")
    _check_flags(has_aux, holomorphic)
    chunk_size = _check_chunk_size(chunk_size, "jacfwd")

    @functools.wraps(fn)
    def jac_fn(*args, **kwargs):
        selected = _selected_inputs(args, positions, "jacfwd", holomorphic)
        out, jvp_fn, *aux = linearize(_restrict(fn, args, kwargs, positions, has_aux, "jacfwd"), *selected,
                                      has_aux=has_aux)
        in_leaves, in_tree = _tree.tree_flatten(selected)
        offsets, total = _offsets(in_leaves)
        out_leaves, out_tree = _tree.tree_flatten(out)
        if holomorphic:
            for i, o in enumerate(out_leaves):
                require_complex(o, f"output leaf {i}", "jacfwd", output=True)
        if total == 0:
            columns = [zeros_like(o, shape=tuple(o.shape) + (0,)) for o in out_leaves]
        elif total == 1:  # a scalar input: one plain forward sweep, its results without a batch axis
            columns = _tree.tree_leaves(jvp_fn(*_tree.tree_unflatten(in_tree, _single_basis(in_leaves))))
        else:  # batched forward sweeps for the basis tangents (one, without chunk_size), batch axis last
            columns = _tree.tree_leaves(_sweep(lambda *ts: jvp_fn(*_tree.tree_unflatten(in_tree, list(ts))),
                                               in_leaves, chunk_size, -1))
        blocks = []
        for o, cols in zip(out_leaves, columns):
            if total == 1:
                per_input = [_unbatched_block(o, cols, x) for x in in_leaves]
            else:
                per_input = [reshape(_rows_last(cols, off, x.size, total), tuple(o.shape) + tuple(x.shape))
                             for x, off in zip(in_leaves, offsets)]
            per_position = _tree.tree_unflatten(in_tree, per_input)
            blocks.append(per_position[0] if single else per_position)
        jac = _tree.tree_unflatten(out_tree, blocks)
        return (jac, *aux) if has_aux else jac
    return jac_fn


def _rows_last(batched, offset: int, size: int, total: int):
    """Columns ``offset:offset + size`` of results whose batch axis is last."""
    return batched if size == total else batched[..., offset:offset + size]


@overload
def hessian(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: Literal[False] = False,
            chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[P, PyTree]: ...
@overload
def hessian(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, *, has_aux: Literal[True],
            chunk_size: int | None = None, holomorphic: bool = False) -> Callable[P, tuple[PyTree, Any]]: ...
@overload
def hessian(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
            chunk_size: int | None = None, *, holomorphic: bool = False) -> Callable[..., Any]: ...
def hessian(fn: Callable[P, Any], grad_position: int | tuple[int, ...] = 0, has_aux: bool = False,
            chunk_size: int | None = None, *, holomorphic: bool = False, **kwargs: Any) -> Callable[..., Any]:
    """The Hessian of ``fn``: ``jacfwd(jacrev(fn))``, forward over reverse, as JAX's ``hessian`` (one
    Hessian-vector product per input element, each costing a small multiple of ``fn``).

    Args:
        fn: a function of pytrees of arrays returning a pytree of arrays, usually a scalar (with
            ``has_aux``, ``(out, aux...)``).
        grad_position: an int or a tuple of ints: which positional arguments to differentiate.
        has_aux: ``fn`` returns ``(out, *aux)``; two outputs give a bare ``aux``, more a tuple.
        chunk_size: bounds both sweeps: at most that many basis vectors at once in the outer forward
            sweep and, within each of them, in the inner reverse sweep. None: all at once.
        holomorphic: passed to both: complex inputs and outputs, the complex Hessian
            ``d2f/dz_i dz_j``.

    Returns:
        A function of ``fn``'s arguments returning the Hessian, or ``(H, aux)`` with ``has_aux``.
        :func:`jacrev`'s structure nested twice: for a scalar output and an int ``grad_position`` of
        an array ``x``, an array of shape ``x.shape + x.shape``; for an output leaf ``o``, blocks of
        shape ``o.shape + x.shape + y.shape``; with ``grad_position=(0, 1)``,
        ``hessian(f, (0, 1))(x, y)[i][j]`` is the block of second derivatives in inputs ``i`` and
        ``j``. Static type: as :func:`jacrev`'s.

    Raises:
        ValueError: as :func:`jacrev`.
        TypeError: as :func:`jacrev`.
        IndexError: a position beyond the arguments given (at the call).
    """
    refuse_unknown_keywords("hessian", kwargs)
    _check_chunk_size(chunk_size, "hessian")
    inner = jacrev(fn, grad_position, has_aux, chunk_size=chunk_size, holomorphic=holomorphic)
    return jacfwd(inner, grad_position, has_aux, chunk_size=chunk_size, holomorphic=holomorphic)


def hvp(fn: Callable[..., Any], primals: PyTree, tangents: PyTree, has_aux: bool = False) -> Any:
    """``fn``'s value at ``primals`` and its Hessian-vector product along ``tangents``: forward over
    reverse, ``jvp(grad(fn), primals, tangents)`` (the spelling JAX's documentation gives), returned in
    torch.func's ``hvp`` structure. The Hessian is never formed: the cost is a small multiple of ``fn``'s.

    Args:
        fn: a function of the pytrees in ``primals`` returning a scalar (a Python float or an array of
            one element; with ``has_aux``, ``(out, aux...)``).
        primals: a tuple or list with one pytree per positional argument of ``fn``; float or complex
            leaves. Every argument is differentiated.
        tangents: a tuple or list like ``primals``: each leaf has its primal's shape and dtype.
        has_aux: ``fn`` returns ``(out, *aux)``: exactly two outputs give a bare ``aux``, more a tuple.

    Returns:
        ``(out, hvp_out)`` or ``(out, hvp_out, aux)`` (torch.func's order); ``out`` is ``fn(*primals)``,
        ``hvp_out`` a tuple with one entry per primal, shaped like it: the second derivatives of ``out``
        contracted with the tangents, ``sum_j H[i, j] @ tangents[j]``. The gradient itself is not
        returned (``jax.jvp(jax.grad(f), ...)`` gives it first; ``value_and_grad`` has it).

    Raises:
        ValueError: ``fn``'s output has more than one element (take its sum, or use ``jacfwd`` of
            ``jacrev``); ``primals`` and ``tangents`` of different lengths, structures or shapes.
        TypeError: ``primals``/``tangents`` not a tuple or list, a non-float primal leaf, a tangent
            whose dtype differs from its primal's; ``has_aux`` not a bool.
    """
    _check_flag(has_aux, "has_aux")
    if not isinstance(primals, (tuple, list)):  # before len(): jvp names the argument for tangents
        raise TypeError(f"hvp: primals must be a tuple or list with one entry per argument of fn, got "
                        f"{type(primals).__name__}; e.g. hvp(f, (x,), (v,))")
    if not primals:
        raise ValueError("hvp: primals is empty; pass one entry per argument of fn, e.g. hvp(f, (x,), (v,))")
    positions = tuple(range(len(primals)))

    def scalar_fn(*args):
        out = fn(*args)
        loss = out[0] if has_aux else out
        if has_aux:
            _check_aux_output(out, "hvp")
        if _tree.tree_structure(loss).num_leaves != 1 or getattr(loss, "size", 1) != 1:
            raise ValueError("hvp: fn must return a scalar (one element), got "
                             f"{_describe_output(loss)}; reduce it (a sum or a mean) or use jacfwd(jacrev(fn))")
        return out

    def grad_and_value(*args):  # the gradient is differentiated forward; the value and aux ride along
        value, grads = value_and_grad(scalar_fn, positions, has_aux=has_aux)(*args)
        return grads, value

    _, hvp_out, value = jvp(grad_and_value, primals, tangents, has_aux=True)
    if has_aux:
        return (value[0], hvp_out, value[1] if len(value) == 2 else tuple(value[1:]))
    return value, hvp_out


def _describe_output(out) -> str:
    if hasattr(out, "shape"):
        return f"an array of shape {tuple(out.shape)}"
    return f"a {type(out).__name__} with {_tree.tree_structure(out).num_leaves} leaves"
