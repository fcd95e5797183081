"""Shape functions: reshape, transpose, broadcast_to, concatenate and stack (the structural
primitives of ``tapegrad._structural``, which the interpreters apply too, given NumPy's argument
handling here), the ``pad`` primitive, and the shape functions built on them (ravel, squeeze,
expand_dims, swapaxes, moveaxis, split, repeat, tile, flip)."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from tapegrad import _structural
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import Boxed, Tracer, bind
from tapegrad._structural import normalize_axis, shape_of
from tapegrad._structural import unbroadcast as unbroadcast  # re-exported for the rules of this package
from tapegrad._typing import ArrayLike, Axis, ShapeLike
from tapegrad.extend import def_dependency, defbatch_front, defjvp, defvjp, primitive
from tapegrad.numpy._creation import as_operand


def shape(a: ArrayLike) -> tuple:
    """``a``'s shape (also of a traced value), as ``numpy.shape``."""
    return shape_of(a)


def ndim(a: ArrayLike) -> int:
    """The number of axes of ``a`` (also of a traced value), a Python int, as ``numpy.ndim``."""
    return len(shape_of(a))


def size(a: ArrayLike, axis: int | None = None) -> int:
    """The number of elements of ``a``, or its length along ``axis`` (also of a traced value), a
    Python int, as ``numpy.size``.
    """
    dims = shape_of(a)
    if axis is not None:
        return dims[axis]
    n = 1
    for d in dims:
        n *= d
    return n


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype NumPy's promotion gives the arguments, as ``numpy.result_type``, with traced values
    standing for their dtype.
    """
    return np.result_type(*[a.dtype if isinstance(a, (Tracer, Boxed)) else a for a in arrays_and_dtypes])


def reshape(a: ArrayLike, shape: ShapeLike, order: str = "C") -> Array:
    """``a`` with a new shape (one entry may be -1), as ``numpy.reshape``; only C order."""
    a = as_operand(a)
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    return _structural.reshape(a, shape)


def ravel(a: ArrayLike) -> Array:
    """``a`` flattened to 1-D in C order, as ``numpy.ravel``; differentiable (a reshape)."""
    a = as_operand(a)
    return reshape(a, (-1,))


def transpose(a: ArrayLike, axes: Any = None) -> Array:
    """Permute the axes (reverse them when ``axes`` is None), as ``numpy.transpose``."""
    return _structural.transpose(as_operand(a), axes)


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Array:
    """``a`` with axes ``axis1`` and ``axis2`` interchanged, as ``numpy.swapaxes``; differentiable (a
    transpose).
    """
    a = as_operand(a)
    ndim = len(shape_of(a))
    perm = list(range(ndim))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(a, perm)


def moveaxis(a: ArrayLike, source: Any, destination: Any) -> Array:
    """Move axes ``source`` to positions ``destination``, as ``numpy.moveaxis``."""
    return _structural.moveaxis(as_operand(a), source, destination)


def expand_dims(a: ArrayLike, axis: Axis) -> Array:
    """``a`` with unit axes inserted at ``axis``, as ``numpy.expand_dims``."""
    return _structural.expand_dims(as_operand(a), axis)


def squeeze(a: ArrayLike, axis: Axis = None) -> Array:
    """``a`` without its unit axes (those of ``axis`` only, if given), as ``numpy.squeeze``;
    differentiable (a reshape). An ``axis`` of length other than 1 is a ``ValueError``.
    """
    a = as_operand(a)
    shape = shape_of(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = normalize_axis(axis, len(shape))
        if builtins.any(shape[i] != 1 for i in axes):
            raise ValueError(f"squeeze: cannot select an axis of length other than 1 (axis={axis})")
    return reshape(a, tuple(d for i, d in enumerate(shape) if i not in axes))


# ---- broadcasting --------------------------------------------------------------------------------
def broadcast_to(array: ArrayLike, shape: ShapeLike) -> Array:
    """``array`` broadcast to ``shape``, as ``numpy.broadcast_to``."""
    return _structural.broadcast_to(as_operand(array), shape)


def broadcast_arrays(*args: Any) -> list[Array]:
    """The arguments broadcast to their common shape, as ``numpy.broadcast_arrays``; returns a list
    (NumPy 2 returns a tuple); each entry differentiable in its argument.
    """
    args = [as_operand(a) for a in args]
    shape = np.broadcast_shapes(*(shape_of(a) for a in args))
    return [broadcast_to(a, shape) for a in args]


# ---- concatenate and friends ---------------------------------------------------------------------
def concatenate(arrays: Any, axis: Axis = 0) -> Array:
    """Join ``arrays`` along an existing ``axis`` (None: flatten first), as ``numpy.concatenate``."""
    return _structural.concatenate([as_operand(a) for a in arrays], axis)


def stack(arrays: Any, axis: Axis = 0) -> Array:
    """Join ``arrays`` along a new ``axis``, as ``numpy.stack``."""
    return _structural.stack([as_operand(a) for a in arrays], axis)


def split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """Split into pieces along ``axis`` (equal sections or at indices), as ``numpy.split``."""
    ary = as_operand(ary)
    n = shape_of(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        if n % indices_or_sections:
            raise ValueError(f"split: axis of length {n} does not divide into {indices_or_sections} equal sections")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [operator.index(i) for i in indices_or_sections] + [n]
    axis = operator.index(axis) % len(shape_of(ary))
    return [ary[(slice(None),) * axis + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


# ---- pad -----------------------------------------------------------------------------------------
pad_p = primitive("pad", lambda x, *, pad_width, constant_values:
                  namespace_of(x).pad(x, pad_width, mode="constant", constant_values=constant_values))
defvjp(pad_p, lambda ct, ans, x, *, pad_width, constant_values:
       ct[tuple(slice(lo, lo + d) for (lo, _), d in zip(pad_width, shape_of(x)))])
# affine, not linear: the padding is a constant, so the tangent is padded with zeros
defjvp(pad_p, lambda t, ans, x, *, pad_width, constant_values:
       bind(pad_p, t, pad_width=pad_width, constant_values=0))
defbatch_front(pad_p, lambda params: dict(params, pad_width=((0, 0),) + params["pad_width"]))
def_dependency(pad_p, "structural")


def pad(array: ArrayLike, pad_width: Any, mode: str = "constant", constant_values: ArrayLike = 0) -> Array:
    """Pad with a constant, as ``numpy.pad``; other modes are not supported yet."""
    array = as_operand(array)
    if mode != "constant":
        raise NotImplementedError(f"pad: mode={mode!r} is not supported; only 'constant'")
    ndim = len(shape_of(array))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (ndim, 2))
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    return bind(pad_p, array, pad_width=widths, constant_values=constant_values)


# ---- repeat, tile, flip --------------------------------------------------------------------------
def repeat(a: ArrayLike, repeats: Any, axis: int | None = None) -> Array:
    """Repeat elements, as ``numpy.repeat``: a gather, so the gradient sums the copies."""
    a = as_operand(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = operator.index(axis) % len(shape_of(a))
    index = np.repeat(np.arange(shape_of(a)[axis]), repeats)
    return a[(slice(None),) * axis + (index,)]  # a tracer's indexing is tapegrad.numpy's getitem


def tile(A: ArrayLike, reps: Any) -> Array:
    """Tile ``A`` ``reps`` times, as ``numpy.tile``: a broadcast, so the gradient sums the tiles."""
    A = as_operand(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    shape = shape_of(A)
    ndim = builtins.max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + tuple(shape)
    reps = (1,) * (ndim - len(reps)) + reps
    interleaved = reshape(A, tuple(x for d in shape for x in (1, d)))
    tiled = broadcast_to(interleaved, tuple(x for r, d in zip(reps, shape) for x in (r, d)))
    return reshape(tiled, tuple(r * d for r, d in zip(reps, shape)))


def flip(m: Any, axis: Axis = None) -> Array:
    """Reverse the order of elements along ``axis`` (None: all axes), as ``numpy.flip``; differentiable
    (a strided view).
    """
    m = as_operand(m)
    ndim = len(shape_of(m))
    axes = range(ndim) if axis is None else normalize_axis(axis, ndim)
    return m[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(ndim))]
