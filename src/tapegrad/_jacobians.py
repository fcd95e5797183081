"""Jacobians and Hessians: ``jacrev``, ``jacfwd``, ``hessian``.

``jacrev`` records ``fn`` once and pulls every basis cotangent back through the tape in one
``vmap``-batched backward pass; ``jacfwd`` records ``fn`` once (``linearize``) and sweeps every basis
tangent forward through the recorded operations in one batched sweep (JAX's construction: ``vmap`` of
a vjp or jvp). All of it is tapegrad operations, so a Jacobian is differentiable again (``hessian`` is
``jacfwd(jacrev(fn))``, forward over reverse, as in JAX).

Return structure (JAX's, with MindSpore's ``grad_position``): the output pytree, each leaf replaced by
the Jacobian of that output leaf with respect to the selected inputs: for an int ``grad_position`` a
pytree shaped like that input, for a tuple a tuple of such pytrees. A block for output leaf ``o`` and
input leaf ``x`` has shape ``o.shape + x.shape``.
"""
from __future__ import annotations

import functools

from tapegrad import _tree
from tapegrad._api import _check_flag, _differentiable_leaf, _select_positions, linearize, refuse_unknown_keywords, vjp
from tapegrad._backend import zeros_like
from tapegrad._structural import reshape
from tapegrad._vmap_api import vmap


def _jac_positions(grad_position, api: str):
    positions, single = _select_positions(grad_position)
    if positions is None:
        raise ValueError(f"{api}: grad_position=None selects no input; pass an int or a tuple of ints")
    return positions, single


def _selected_inputs(args, positions, api: str):
    """The arguments at ``positions``, their leaves checked to be float (or complex) arrays."""
    selected = []
    for p in positions:
        if p >= len(args):
            raise IndexError(f"{api}: grad_position {p} is out of range: the function was called with "
                             f"{len(args)} positional argument(s); positions count from 0")
        where = f"{api}: the input at grad_position {p}"
        selected.append(_tree.tree_map(lambda leaf, where=where: _differentiable_leaf(leaf, where), args[p]))
    return tuple(selected)


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


def _batched_basis(leaves):
    """The standard basis of the space of ``leaves`` (flattened and concatenated), as one batch: for
    each leaf an array of shape ``(total,) + leaf.shape`` that holds the identity in that leaf's rows
    and zeros elsewhere (constants of the leaf's dtype and backend). Also each leaf's row offset."""
    total = sum(leaf.size for leaf in leaves)
    batches, offsets, start = [], [], 0
    for leaf in leaves:
        n = leaf.size
        block = zeros_like(leaf, shape=(total, n))
        block[start:start + n].reshape(-1)[::n + 1] = 1  # the diagonal of this leaf's rows
        batches.append(block.reshape((total,) + tuple(leaf.shape)))
        offsets.append(start)
        start += n
    return batches, offsets, total


def _rows(batched, offset: int, size: int, total: int):
    """Rows ``offset:offset + size`` of a batch of ``total`` results (all of them without a copy)."""
    return batched if size == total else batched[offset:offset + size]


def _zero_block(out_leaf, in_leaf):
    return zeros_like(in_leaf, shape=tuple(out_leaf.shape) + tuple(in_leaf.shape))


def _check_aux(has_aux, api):
    _check_flag(has_aux, "has_aux")
    return has_aux


def jacrev(fn, grad_position=0, has_aux=False, **kwargs):
    """The Jacobian of ``fn`` by reverse mode: one vjp per output element, as JAX's ``jacrev``.

    Args:
        fn: a function of pytrees of arrays returning a pytree of arrays (with ``has_aux``,
            ``(out, aux...)``).
        grad_position: int or tuple of ints: which positional arguments to differentiate.
        has_aux: as in ``vjp``: ``fn`` returns ``(out, *aux)``; two outputs give a bare ``aux``.

    Returns:
        A function of ``fn``'s arguments returning the Jacobian (module docstring: the output's
        structure, each leaf a pytree, or with a tuple ``grad_position`` a tuple of pytrees, of blocks
        of shape ``out_leaf.shape + in_leaf.shape`` and the input's dtype), or ``(jacobian, aux)``.

    Raises:
        TypeError, ValueError: a bad ``grad_position`` or ``has_aux``, or a keyword it does not take
            (a peer's ``argnums`` names ``grad_position``), at ``jacrev(...)``, as ``grad``.
        IndexError: a position past the arguments; TypeError: a non-float input there (at the call).
    """
    refuse_unknown_keywords("jacrev", kwargs)
    positions, single = _jac_positions(grad_position, "jacrev")
    _check_aux(has_aux, "jacrev")

    @functools.wraps(fn)
    def jac_fn(*args, **kwargs):
        selected = _selected_inputs(args, positions, "jacrev")
        restricted = _restrict(fn, args, kwargs, positions, has_aux, "jacrev")
        out, vjp_fn, *aux = vjp(restricted, *selected, has_aux=has_aux)
        out_leaves, out_tree = _tree.tree_flatten(out)
        basis, offsets, total = _batched_basis(out_leaves)
        if total == 0:
            blocks = [_tree.tree_map(functools.partial(_zero_block, o), selected) for o in out_leaves]
        else:  # one batched backward pass for every basis cotangent at once
            cts = vmap(lambda *rows: vjp_fn(_tree.tree_unflatten(out_tree, list(rows))))(*basis)
            blocks = [_tree.tree_map(functools.partial(_block_of_rows, o, off, total), cts)
                      for o, off in zip(out_leaves, offsets)]
        jac = _tree.tree_unflatten(out_tree, [b[0] if single else b for b in blocks])
        return (jac, *aux) if has_aux else jac
    return jac_fn


def jacfwd(fn, grad_position=0, has_aux=False, **kwargs):
    """The Jacobian of ``fn`` by forward mode: ``linearize`` once, then one forward sweep per input
    element, as JAX's ``jacfwd``.

    Arguments, return structure and errors are those of :func:`jacrev`; ``jacfwd`` is the cheaper of
    the two when the selected inputs have fewer elements than the outputs.
    """
    refuse_unknown_keywords("jacfwd", kwargs)
    positions, single = _jac_positions(grad_position, "jacfwd")
    _check_aux(has_aux, "jacfwd")

    @functools.wraps(fn)
    def jac_fn(*args, **kwargs):
        selected = _selected_inputs(args, positions, "jacfwd")
        out, jvp_fn, *aux = linearize(_restrict(fn, args, kwargs, positions, has_aux, "jacfwd"), *selected,
                                      has_aux=has_aux)
        in_leaves, in_tree = _tree.tree_flatten(selected)
        basis, offsets, total = _batched_basis(in_leaves)
        out_leaves, out_tree = _tree.tree_flatten(out)
        if total == 0:
            columns = [zeros_like(o, shape=tuple(o.shape) + (0,)) for o in out_leaves]
        else:  # one batched forward sweep for every basis tangent, the batch axis last
            tangents = _tree.tree_unflatten(in_tree, basis)
            columns = _tree.tree_leaves(vmap(lambda *ts: jvp_fn(*ts), out_axes=-1)(*tangents))
        blocks = []
        for o, cols in zip(out_leaves, columns):
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


def hessian(fn, grad_position=0, has_aux=False, **kwargs):
    """The Hessian of ``fn``: ``jacfwd(jacrev(fn))``, forward over reverse (JAX's choice: one
    Hessian-vector product per input element, each costing a small multiple of ``fn``).

    For a scalar output and one input ``x`` the result has shape ``x.shape + x.shape``; in general the
    structure nests as the module docstring says, twice: with ``grad_position=(0, 1)``,
    ``hessian(f, (0, 1))(x, y)[i][j]`` is the block of second derivatives in inputs ``i`` and ``j``.
    Arguments and errors are those of :func:`jacrev`; with ``has_aux`` the result is ``(H, aux)``.
    """
    refuse_unknown_keywords("hessian", kwargs)
    return jacfwd(jacrev(fn, grad_position, has_aux), grad_position, has_aux)
