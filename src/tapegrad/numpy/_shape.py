"""Shape primitives (reshape, transpose, broadcast_to, concatenate, pad) and the shape functions
built on them (ravel, squeeze, expand_dims, swapaxes, moveaxis, stack, split, repeat, tile, flip)."""
from __future__ import annotations

import builtins
import itertools
import operator

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import Boxed, Tracer, bind
from tapegrad.extend import (
    all_at_front,
    defbatch,
    defbatch_front,
    defjvp,
    deflinear,
    defvjp,
    defvjp_argnum,
    lead_batch,
    primitive,
    to_front,
)
from tapegrad.numpy import _elementwise, _reductions
from tapegrad.numpy._creation import as_operand


def _shape_of(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def shape(a) -> tuple:
    """``a``'s shape (also of a traced value), as ``numpy.shape``."""
    return _shape_of(a)


def ndim(a) -> int:
    return len(_shape_of(a))


def size(a, axis=None) -> int:
    dims = _shape_of(a)
    if axis is not None:
        return dims[axis]
    n = 1
    for d in dims:
        n *= d
    return n


def result_type(*arrays_and_dtypes):
    """NumPy's ``result_type``, with traced values standing for their dtype."""
    return np.result_type(*[a.dtype if isinstance(a, (Tracer, Boxed)) else a for a in arrays_and_dtypes])


def _infer_shape(size: int, shape) -> tuple:
    """``shape`` with one ``-1`` resolved, as ``numpy.reshape`` resolves it."""
    shape = tuple(operator.index(d) for d in ((shape,) if isinstance(shape, (int, np.integer)) else shape))
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        shape = tuple(size // known if known and d == -1 else d for d in shape)
    return shape


# ---- reshape -------------------------------------------------------------------------------------
reshape_p = primitive("reshape", lambda x, *, shape: namespace_of(x).reshape(x, shape))
defbatch(reshape_p, lambda vals, dims, *, shape: (
    bind(reshape_p, to_front(vals[0], dims[0]), shape=(vals[0].shape[dims[0]],) + tuple(shape)), 0))
defvjp(reshape_p, lambda ct, ans, x, *, shape: reshape(ct, _shape_of(x)))
deflinear(reshape_p)


def reshape(a, shape, order="C"):
    """``a`` with a new shape (one entry may be -1), as ``numpy.reshape``; only C order."""
    a = as_operand(a)
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    old = _shape_of(a)
    size = 1
    for d in old:
        size *= d
    shape = _infer_shape(size, shape)
    if shape == old:
        return a
    return bind(reshape_p, a, shape=shape)


def ravel(a):
    a = as_operand(a)
    return reshape(a, (-1,))


# ---- transpose -----------------------------------------------------------------------------------
transpose_p = primitive("transpose", lambda x, *, axes: namespace_of(x).transpose(x, axes))
# one transpose that also brings the batch axis d to the front
defbatch(transpose_p, lambda vals, dims, *, axes: (
    bind(transpose_p, vals[0], axes=(dims[0],) + tuple(a + (a >= dims[0]) for a in axes)), 0))
defvjp(transpose_p, lambda ct, ans, x, *, axes: transpose(ct, tuple(np.argsort(axes).tolist())))
deflinear(transpose_p)


def transpose(a, axes=None):
    """Permute the axes (reverse them when ``axes`` is None), as ``numpy.transpose``."""
    a = as_operand(a)
    ndim = len(_shape_of(a))
    axes = tuple(range(ndim))[::-1] if axes is None else tuple(operator.index(i) % builtins.max(ndim, 1) for i in axes)
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {ndim} axes")
    if axes == tuple(range(ndim)):
        return a
    return bind(transpose_p, a, axes=axes)


def swapaxes(a, axis1, axis2):
    a = as_operand(a)
    ndim = len(_shape_of(a))
    perm = list(range(ndim))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(a, perm)


def _axes_tuple(axes, ndim: int) -> tuple:
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    return tuple(operator.index(a) % ndim for a in axes)


def moveaxis(a, source, destination):
    """Move axes ``source`` to positions ``destination``, as ``numpy.moveaxis``."""
    a = as_operand(a)
    ndim = len(_shape_of(a))
    source, destination = _axes_tuple(source, ndim), _axes_tuple(destination, ndim)
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


def expand_dims(a, axis):
    a = as_operand(a)
    shape = list(_shape_of(a))
    n_new = 1 if isinstance(axis, (int, np.integer)) else len(axis)
    for ax in sorted(_axes_tuple(axis, len(shape) + n_new)):
        shape.insert(ax, 1)
    return reshape(a, tuple(shape))


def squeeze(a, axis=None):
    a = as_operand(a)
    shape = _shape_of(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = _reductions.normalize_axis(axis, len(shape))
        if builtins.any(shape[i] != 1 for i in axes):
            raise ValueError(f"squeeze: cannot select an axis of length other than 1 (axis={axis})")
    return reshape(a, tuple(d for i, d in enumerate(shape) if i not in axes))


# ---- broadcasting --------------------------------------------------------------------------------
def unbroadcast(ct, x):
    """Sum ``ct`` down to the shape of operand ``x`` and cast it to ``x``'s dtype.

    Undoes NumPy broadcasting in every binary vjp: leading axes ``x`` lacks are summed away, and so
    are axes where ``x`` has length 1.
    """
    shape, ct_shape = x.shape, ct.shape
    if ct_shape != shape:
        lead = len(ct_shape) - len(shape)
        if lead < 0:  # assignment also broadcasts by dropping leading 1s: x.at[i].set(v[None])
            ct = reshape(ct, (1,) * -lead + tuple(ct_shape))
            ct_shape, lead = ct.shape, 0
        axes = tuple(range(lead)) + tuple(
            lead + i for i, d in enumerate(shape) if d == 1 and ct_shape[lead + i] != 1)
        if axes:
            ct = _reductions.sum(ct, axis=axes)
        if ct.shape != shape:
            ct = reshape(ct, shape)
    if ct.dtype != x.dtype:
        ct = _elementwise.astype(ct, x.dtype)
    return ct


broadcast_to_p = primitive("broadcast_to", lambda x, *, shape: namespace_of(x).broadcast_to(x, shape))


def _broadcast_to_batch(vals, dims, *, shape):
    """The batch axis to the front, then unit axes up to the target rank, then broadcast."""
    x = lead_batch(vals[0], dims[0], len(shape))
    return bind(broadcast_to_p, x, shape=_shape_of(x)[:1] + tuple(shape)), 0


defbatch(broadcast_to_p, _broadcast_to_batch)
defvjp(broadcast_to_p, lambda ct, ans, x, *, shape: unbroadcast(ct, x))
deflinear(broadcast_to_p)


def broadcast_to(array, shape):
    array = as_operand(array)
    shape = _infer_shape(-1, shape)
    if _shape_of(array) == shape:
        return array
    return bind(broadcast_to_p, array, shape=shape)


def broadcast_arrays(*args):
    args = [as_operand(a) for a in args]
    shape = np.broadcast_shapes(*(_shape_of(a) for a in args))
    return [broadcast_to(a, shape) for a in args]


# ---- concatenate and friends ---------------------------------------------------------------------
concatenate_p = primitive("concatenate", lambda *xs, axis: namespace_of(*xs).concatenate(xs, axis=axis))


def _concatenate_vjp(argnum, ct, ans, *xs, axis):
    return _concatenate_operands_vjp((argnum,), ct, ans, xs, axis=axis)[0]


def _concatenate_operands_vjp(argnums, ct, ans, xs, *, axis):
    """The pieces of ``ct`` for the operands ``argnums``; the offsets are summed once for all of them
    (a running sum per operand made ``stack`` of N arrays quadratic in N)."""
    starts = list(itertools.accumulate((_shape_of(x)[axis] for x in xs), initial=0))
    pieces = []
    for argnum in argnums:
        piece = ct[(slice(None),) * axis + (slice(starts[argnum], starts[argnum + 1]),)]
        x = xs[argnum]
        pieces.append(piece if piece.dtype == x.dtype else _elementwise.astype(piece, x.dtype))
    return pieces


defvjp_argnum(concatenate_p, _concatenate_vjp, _concatenate_operands_vjp)
defbatch(concatenate_p, lambda vals, dims, *, axis: (bind(concatenate_p, *all_at_front(vals, dims), axis=axis + 1), 0))
deflinear(concatenate_p)


def concatenate(arrays, axis=0):
    """Join ``arrays`` along an existing ``axis`` (None: flatten first), as ``numpy.concatenate``."""
    arrays = [as_operand(a) for a in arrays]
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    axis = _reductions.normalize_axis(axis, len(_shape_of(arrays[0])))[0]
    return bind(concatenate_p, *arrays, axis=axis)


def stack(arrays, axis=0):
    """Join ``arrays`` along a new ``axis``."""
    arrays = [as_operand(a) for a in arrays]
    arrays = list(arrays)
    if not arrays:
        raise ValueError("stack: need at least one array")
    out_ndim = len(_shape_of(arrays[0])) + 1
    axis = operator.index(axis) % out_ndim
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)


def split(ary, indices_or_sections, axis=0):
    """Split into pieces along ``axis`` (equal sections or at indices), as ``numpy.split``."""
    ary = as_operand(ary)
    n = _shape_of(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        if n % indices_or_sections:
            raise ValueError(f"split: axis of length {n} does not divide into {indices_or_sections} equal sections")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [operator.index(i) for i in indices_or_sections] + [n]
    axis = operator.index(axis) % len(_shape_of(ary))
    return [ary[(slice(None),) * axis + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


# ---- pad -----------------------------------------------------------------------------------------
pad_p = primitive("pad", lambda x, *, pad_width, constant_values:
                  namespace_of(x).pad(x, pad_width, mode="constant", constant_values=constant_values))
defvjp(pad_p, lambda ct, ans, x, *, pad_width, constant_values:
       ct[tuple(slice(lo, lo + d) for (lo, _), d in zip(pad_width, _shape_of(x)))])
# affine, not linear: the padding is a constant, so the tangent is padded with zeros
defjvp(pad_p, lambda t, ans, x, *, pad_width, constant_values:
       bind(pad_p, t, pad_width=pad_width, constant_values=0))
defbatch_front(pad_p, lambda params: dict(params, pad_width=((0, 0),) + params["pad_width"]))


def pad(array, pad_width, mode="constant", constant_values=0):
    """Pad with a constant, as ``numpy.pad``; other modes are not supported yet."""
    array = as_operand(array)
    if mode != "constant":
        raise NotImplementedError(f"pad: mode={mode!r} is not supported; only 'constant'")
    ndim = len(_shape_of(array))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (ndim, 2))
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    return bind(pad_p, array, pad_width=widths, constant_values=constant_values)


# ---- repeat, tile, flip --------------------------------------------------------------------------
def repeat(a, repeats, axis=None):
    """Repeat elements, as ``numpy.repeat``: a gather, so the gradient sums the copies."""
    a = as_operand(a)
    from tapegrad.numpy._indexing import take
    if axis is None:
        a, axis = ravel(a), 0
    n = _shape_of(a)[axis]
    index = np.repeat(np.arange(n), repeats)
    return take(a, index, axis=axis)


def tile(A, reps):
    """Tile ``A`` ``reps`` times, as ``numpy.tile``: a broadcast, so the gradient sums the tiles."""
    A = as_operand(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    shape = _shape_of(A)
    ndim = builtins.max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + tuple(shape)
    reps = (1,) * (ndim - len(reps)) + reps
    interleaved = reshape(A, tuple(x for d in shape for x in (1, d)))
    tiled = broadcast_to(interleaved, tuple(x for r, d in zip(reps, shape) for x in (r, d)))
    return reshape(tiled, tuple(r * d for r, d in zip(reps, shape)))


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (None: all axes)."""
    m = as_operand(m)
    ndim = len(_shape_of(m))
    axes = range(ndim) if axis is None else _reductions.normalize_axis(axis, ndim)
    return m[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(ndim))]
