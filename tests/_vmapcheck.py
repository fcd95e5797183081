"""What the vmap tests share: ``check_vmap`` runs a function of one example under ``tg.vmap`` and
compares it with a Python loop over the examples, ``in_axes_mixes`` lists the ``in_axes`` to try, and
``check_vmap_mixes`` runs the one for each of the others."""
from __future__ import annotations

import numpy as np

import tapegrad as tg
from _tol import assert_close


def _perturb(x, rng):
    """Another example near ``x``, in its domain: floats scaled by 1 +- 5% elementwise (signs, and
    so the domains of log, sqrt, arcsin, ... are kept); integers and booleans repeated as they are."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.inexact):
        return x.copy()
    return (x * (1.0 + 0.05 * rng.uniform(-1.0, 1.0, x.shape))).astype(x.dtype)


def _stack(values, axis):
    """The examples' values (pytrees of arrays) stacked leaf by leaf along ``axis`` (None: the first)."""
    if axis is None:
        return values[0]
    return tg.tree.tree_map(lambda *leaves: np.stack([np.asarray(v) for v in leaves], axis=axis), *values)


def check_vmap(fn, args, in_axes, batch=3, rng=None, draw=None, out_axes=0, ref=None, slack=1.0, **kwargs):
    """``tg.vmap(fn, in_axes, out_axes)`` equals a loop of ``fn`` over ``batch`` examples, stacked.

    Args:
        fn: a function of one example (positional arrays; ``kwargs`` are passed as they are, shared).
        args: one example of the positional arguments; it is the batch's first example.
        in_axes: a tuple with one int (the batch axis of that argument, negative allowed) or None
            (shared by every example) per argument, or one int for all.
        batch: the number of examples.
        rng: the generator for the other examples (default: seeded with 0).
        draw: ``draw(rng) -> args``, another example of every argument, for domains that a 5%
            perturbation leaves (no ties, symmetric positive definite, ...); default: perturb ``args``.
        out_axes: an int or None for every output leaf (the reference is stacked there).
        ref: the reference for one example (default ``fn``).
        slack: a factor on the tolerances, for reductions summed in another order.

    Value tolerances: rtol 1e-6 for float32/complex64 outputs, 1e-12 otherwise, times ``slack``, with
    an atol of the same size relative to the largest reference value (cancellation in sums);
    integer and boolean outputs must be equal. Shapes and dtypes must be equal.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    examples = [tuple(args)]
    for _ in range(batch - 1):
        examples.append(tuple(draw(rng)) if draw is not None else tuple(_perturb(a, rng) for a in args))
    batched = [_stack([ex[i] for ex in examples], ax) for i, ax in enumerate(axes)]
    out = tg.vmap(lambda *a: fn(*a, **kwargs), in_axes=axes, out_axes=out_axes)(*batched)

    ref = fn if ref is None else ref
    per_example = [ref(*[ex[i] if ax is not None else args[i] for i, ax in enumerate(axes)], **kwargs)
                   for ex in examples]
    expected = _stack(per_example, out_axes)
    out_leaves, ref_leaves = tg.tree.tree_leaves(out), tg.tree.tree_leaves(expected)
    assert tg.tree.tree_structure(out) == tg.tree.tree_structure(expected), (out, expected)
    for o, r in zip(out_leaves, ref_leaves):
        _check_leaf(np.asarray(o), np.asarray(r), slack, f"in_axes={axes} out_axes={out_axes}")
    return out


def _check_leaf(out, ref, slack, where):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (where, out.shape, out.dtype, ref.shape, ref.dtype)
    if not np.issubdtype(ref.dtype, np.inexact):
        np.testing.assert_array_equal(out, ref, err_msg=where)
        return
    rtol = slack * (1e-6 if ref.dtype in (np.float32, np.complex64) else 1e-12)
    assert_close(out, ref, rtol=rtol, err_msg=where)  # and an atol of rtol * max |ref|


def _mixed_axis(i, ndim):
    """Axes 0, -1, 1, 0, -1, ... for successive arguments (0 where a rank-0 example has no axis 1)."""
    axis = (0, -1, 1)[i % 3]
    return 0 if axis == 1 and ndim < 1 else axis


def in_axes_mixes(n_args, ndims):
    """The ``in_axes`` tuples to try for ``n_args`` arguments of example ranks ``ndims``: every
    argument at axis 0, at axis 1 (where the batched rank allows; 0 elsewhere), at -1, and for
    several arguments each one left unmapped (None) with the others at mixed axes."""
    ndims = (ndims,) * n_args if isinstance(ndims, int) else tuple(ndims)
    mixes = [(0,) * n_args, tuple(1 if nd >= 1 else 0 for nd in ndims), (-1,) * n_args]
    if n_args > 1:
        for skip in range(n_args):
            mixes.append(tuple(None if i == skip else _mixed_axis(i, ndims[i]) for i in range(n_args)))
    unique, seen = [], set()
    for mix in mixes:  # the same batched layout spelled twice (-1 and 0 at rank 1) runs once
        key = tuple(None if ax is None else ax % (nd + 1) for ax, nd in zip(mix, ndims))
        if key not in seen:
            seen.add(key)
            unique.append(mix)
    return unique


def check_vmap_mixes(fn, args, **kwargs):
    """``check_vmap`` for every ``in_axes`` mix of ``in_axes_mixes`` (0, 1, -1, None mixes), the ranks
    taken from ``args``."""
    for in_axes in in_axes_mixes(len(args), [np.ndim(a) for a in args]):
        check_vmap(fn, args, in_axes, **kwargs)
