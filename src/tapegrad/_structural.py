"""The structural primitives: the array operations the interpreters apply themselves.

Reverse mode adds cotangents (``add_any``), forward mode fits a tangent to its output (``broadcast_to``,
``astype``), and batching moves and broadcasts batch axes (``transpose``, ``reshape``,
``broadcast_to``, ``concatenate``, ``sum``). They are declared here, below the interpreters, so that
the spine needs nothing from ``tapegrad.numpy`` (JAX's ``ad_util``/``lax`` split: its ``ad.py``
imports no numpy layer); ``tapegrad.numpy``'s functions of the same names bind these same
primitives. Their derivative rules are closed over this set: the vjp of ``broadcast_to`` is a
``sum``, of ``sum`` a ``broadcast_to``, of ``transpose`` a ``transpose``, and so on.

The functions here take arrays and tracers (no lists: ``tapegrad.numpy`` converts those first) and
their axes already checked. Their batch rules are given in ``_batching.py``, beside the families
they are instances of.
"""
from __future__ import annotations

import builtins
import itertools
import math
import operator
from typing import Any

import numpy as np

from tapegrad import _lowerings
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._dependency import def_dependency
from tapegrad._rules import (
    broadcast_shapes,
    def_fusion,
    def_lowering,
    def_nondiff,
    def_shape_rule,
    deflinear,
    defvjp,
    defvjp_argnum,
    primitive,
    reduction_abstract_eval,
    result_dtype,
    strong_dtype,
    summed_dtype,
)
from tapegrad._typing import ArrayLike, DTypeLike


def shape_of(x: ArrayLike) -> tuple:
    """The shape of an array, a tracer or a Python scalar.

    Args:
        x: an array, a tracer, or anything ``numpy.shape`` accepts.

    Returns:
        A tuple of ints (``()`` for a Python scalar).
    """
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def infer_shape(size: int, shape) -> tuple:
    """``shape`` with one ``-1`` resolved, as ``numpy.reshape`` resolves it."""
    shape = tuple(operator.index(d) for d in ((shape,) if isinstance(shape, (int, np.integer)) else shape))
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        shape = tuple(size // known if known and d == -1 else d for d in shape)
    return shape


def normalize_axis(axis, ndim: int, name: str = "axis"):
    """``axis`` (None, int or sequence of ints, negatives allowed) as None or a sorted tuple."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise np.exceptions.AxisError(f"{name} {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % builtins.max(ndim, 1) if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{name} {axis!r} repeats an axis")
    return tuple(sorted(out))


def axes_tuple(axes, ndim: int) -> tuple:
    """``axes`` (an int or a sequence, negatives allowed) as a tuple of non-negative ints."""
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    return tuple(operator.index(a) % ndim for a in axes)


# ---- add_any: the sum of two cotangents (or tangents) of one shape and dtype -------------------------
# NumPy's ufunc object as impl (as tnp.add's): CuPy arrays dispatch through __array_ufunc__, and jit
# fuses it and reuses buffers for it as for add
add_any_p = primitive("add_any", np.add)
defvjp(add_any_p, lambda ct, ans, x, y: ct, lambda ct, ans, x, y: ct)
deflinear(add_any_p)
def_fusion(add_any_p, "add")  # a gradient's accumulations fuse with the rules' arithmetic
def_dependency(add_any_p, "elementwise")


def add_any(x, y):
    """``x + y`` for two contributions to one cotangent: no broadcasting, no promotion to undo."""
    return bind(add_any_p, x, y)


# ---- stop_gradient and astype ---------------------------------------------------------------------
stop_gradient_p = primitive("stop_gradient", lambda x: x)
def_shape_rule(stop_gradient_p, lambda x: ShapedArray(tuple(x.shape), strong_dtype(x)))
def_nondiff(stop_gradient_p)


def stop_gradient(x):
    """``x`` itself, seen by every transform as a constant: no gradient flows through it."""
    return bind(stop_gradient_p, x)


def _astype_impl(x, *, dtype):
    if not hasattr(x, "dtype"):  # a weakly typed Python scalar (a jit argument)
        return np.asarray(x, dtype=dtype)
    if x.dtype.kind == "c" and dtype.kind != "c":  # complex to real keeps the real part, as NumPy
        x = namespace_of(x).real(x)                # does, without its ComplexWarning
    return x.astype(dtype, copy=False)


astype_p = primitive("astype", _astype_impl)
def_shape_rule(astype_p, lambda x, *, dtype: ShapedArray(tuple(x.shape), np.dtype(dtype)))
defvjp(astype_p, lambda ct, ans, x, *, dtype: astype(ct, x.dtype))
def_dependency(astype_p, "elementwise")  # to an integer dtype: no dependency (its derivative is zero)
deflinear(astype_p)


def astype(x: ArrayLike, dtype: DTypeLike) -> Any:
    """``x`` converted to ``dtype``, as ``numpy.astype`` (``x.astype(dtype)``). Converting to an
    integer or boolean dtype stops the gradient.

    Complex to real keeps the real part (as NumPy, without its warning), so its derivative is the
    real part of the tangent, and a real-to-complex cast gets the real part of the cotangent.
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return bind(astype_p, stop_gradient(x), dtype=dtype)
    return bind(astype_p, x, dtype=dtype)


# ---- reshape and transpose ------------------------------------------------------------------------
reshape_p = primitive("reshape", lambda x, *, shape: namespace_of(x).reshape(x, shape))


def _reshape_aval(x, *, shape):
    """``shape`` itself, where it holds as many elements as ``x`` (``reshape`` resolves a -1 first)."""
    if math.prod(shape) != math.prod(x.shape) or -1 in shape:
        return None
    return ShapedArray(tuple(shape), strong_dtype(x))


def_shape_rule(reshape_p, _reshape_aval)
def_dependency(reshape_p, "structural")
defvjp(reshape_p, lambda ct, ans, x, *, shape: reshape(ct, shape_of(x)))
deflinear(reshape_p)


def reshape(a, shape):
    """``a`` with a new shape (one entry may be -1), in C order."""
    old = shape_of(a)
    size = 1
    for d in old:
        size *= d
    shape = infer_shape(size, shape)
    if shape == old:
        return a
    return bind(reshape_p, a, shape=shape)


def expand_dims(a, axis):
    """``a`` with unit axes inserted at ``axis`` (an int or a tuple of them)."""
    shape = list(shape_of(a))
    n_new = 1 if isinstance(axis, (int, np.integer)) else len(axis)
    for ax in sorted(axes_tuple(axis, len(shape) + n_new)):
        shape.insert(ax, 1)
    return reshape(a, tuple(shape))


transpose_p = primitive("transpose", lambda x, *, axes: namespace_of(x).transpose(x, axes))
def_shape_rule(transpose_p, lambda x, *, axes: ShapedArray(tuple(x.shape[a] for a in axes), strong_dtype(x))
               if sorted(axes) == list(range(len(x.shape))) else None)
defvjp(transpose_p, lambda ct, ans, x, *, axes: transpose(ct, tuple(int(i) for i in np.argsort(axes))))
def_dependency(transpose_p, "structural")
deflinear(transpose_p)


def transpose(a, axes=None):
    """Permute the axes (reverse them when ``axes`` is None), as ``numpy.transpose``."""
    ndim = len(shape_of(a))
    axes = tuple(range(ndim))[::-1] if axes is None else tuple(operator.index(i) % builtins.max(ndim, 1) for i in axes)
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {ndim} axes")
    if axes == tuple(range(ndim)):
        return a
    return bind(transpose_p, a, axes=axes)


def moveaxis(a, source, destination):
    """Move axes ``source`` to positions ``destination``, as ``numpy.moveaxis``."""
    ndim = len(shape_of(a))
    source, destination = axes_tuple(source, ndim), axes_tuple(destination, ndim)
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


# ---- sum and broadcast_to: each the other's transpose ----------------------------------------------
def keep_reduced(ct: ArrayLike, x_shape: tuple, axis: tuple[int, ...] | None, keepdims: bool) -> Any:
    """The cotangent of a reduction, reshaped so that it broadcasts against the operand: the reduced
    axes come back with length 1 (the helper of every reduction's vjp).

    Args:
        ct: the reduction's cotangent (or its result).
        x_shape: the operand's shape.
        axis: the reduced axes: None (all) or a tuple of non-negative ints.
        keepdims: the reduction's ``keepdims`` (then ``ct`` already has the right rank).

    Returns:
        ``ct``, reshaped to ``x_shape`` with 1 at the reduced axes.
    """
    if keepdims:
        return ct
    if axis is None:
        return reshape(ct, (1,) * len(x_shape))
    return reshape(ct, tuple(1 if i in axis else d for i, d in enumerate(x_shape)))


_FLOAT16 = np.dtype(np.float16)


def reduce_impl(name):
    """The impl of the reduction ``xp.<name>(x, axis=, keepdims=)``; a NumPy array's sum calls
    ``np.add.reduce``, what ``np.sum``'s Python wrapper calls after 2 us of its own."""
    is_sum = name == "sum"
    ufunc_reduce = np.add.reduce if is_sum else None

    def impl(x, *, axis, keepdims):
        if ufunc_reduce is not None and type(x) is np.ndarray:
            if x.dtype == _FLOAT16:  # NumPy adds float16 in float16: 2048 + 1 rounds to 2048
                return ufunc_reduce(x, axis=axis, keepdims=keepdims, dtype=np.float32).astype(np.float16)
            return ufunc_reduce(x, axis=axis, keepdims=keepdims)
        xp = namespace_of(x)
        if is_sum and getattr(x, "dtype", None) == _FLOAT16:  # the same float32 accumulation on any backend
            return xp.sum(x, axis=axis, keepdims=keepdims, dtype=np.float32).astype(np.float16)
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
    return impl


sum_p = primitive("sum", reduce_impl("sum"))
def_shape_rule(sum_p, reduction_abstract_eval(summed_dtype))
def _sum_vjp(ct, ans, x, *, axis, keepdims):
    """``ct`` broadcast back to ``x``; a whole sum's 0-d cotangent broadcasts as it is (no reshape)."""
    if axis is not None:
        ct = keep_reduced(ct, x.shape, axis, keepdims)
    return broadcast_to(ct, x.shape)


defvjp(sum_p, _sum_vjp)
def_dependency(sum_p, "reduction")
deflinear(sum_p)


def reduce_sum(a, axis=None, keepdims=False):
    """The sum over ``axis`` (None: all), as ``numpy.sum``."""
    return bind(sum_p, a, axis=normalize_axis(axis, len(shape_of(a))), keepdims=bool(keepdims))


def _broadcast_to_impl(x, *, shape):
    """``xp.broadcast_to``; a NumPy 0-d array (a whole sum's cotangent, once per ``grad``) becomes the
    zero-stride read-only view directly, without ``np.broadcast_to``'s ~2 us of Python."""
    if type(x) is np.ndarray and x.ndim == 0:
        view: np.ndarray = np.ndarray(shape, x.dtype, buffer=x, strides=(0,) * len(shape))
        view.flags.writeable = False
        return view
    return namespace_of(x).broadcast_to(x, shape)


broadcast_to_p = primitive("broadcast_to", _broadcast_to_impl)
def_shape_rule(broadcast_to_p, lambda x, *, shape: ShapedArray(tuple(shape), strong_dtype(x))
               if broadcast_shapes(tuple(x.shape), tuple(shape)) == tuple(shape) else None)
defvjp(broadcast_to_p, lambda ct, ans, x, *, shape: unbroadcast(ct, x))
deflinear(broadcast_to_p)
def_dependency(broadcast_to_p, "structural")


def broadcast_to(array, shape):
    """``array`` broadcast to ``shape``, as ``numpy.broadcast_to``."""
    shape = infer_shape(-1, shape)
    if shape_of(array) == shape:
        return array
    return bind(broadcast_to_p, array, shape=shape)


def unbroadcast(ct: ArrayLike, x: ArrayLike) -> Any:
    """Sum ``ct`` down to the shape of operand ``x`` and cast it to ``x``'s dtype.

    Undoes NumPy broadcasting in every binary vjp: leading axes ``x`` lacks are summed away, and so
    are axes where ``x`` has length 1.

    Args:
        ct: a cotangent of the broadcast result.
        x: the operand (an array or tracer; its ``shape`` and ``dtype`` are read).

    Returns:
        The cotangent of ``x``, ``x``'s shape and dtype.
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
            ct = reduce_sum(ct, axis=axes)
        if ct.shape != shape:
            ct = reshape(ct, shape)
    if ct.dtype != x.dtype:
        ct = astype(ct, x.dtype)
    return ct


# ---- concatenate and stack ------------------------------------------------------------------------
concatenate_p = primitive("concatenate", lambda *xs, axis: namespace_of(*xs).concatenate(xs, axis=axis))


def _concatenate_aval(*xs, axis):
    """Equal shapes but along ``axis``, where their lengths add; the operands' result type."""
    first = tuple(xs[0].shape)
    if not 0 <= axis < len(first) or any(len(x.shape) != len(first) for x in xs):
        return None
    if any(tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:]) != first[:axis] + first[axis + 1:] for x in xs):
        return None
    shape = first[:axis] + (sum(x.shape[axis] for x in xs),) + first[axis + 1:]
    return ShapedArray(shape, result_dtype(*xs))


def_shape_rule(concatenate_p, _concatenate_aval)
def_dependency(concatenate_p, "structural")


def _concatenate_vjp(argnum, ct, ans, *xs, axis):
    return _concatenate_operands_vjp((argnum,), ct, ans, xs, axis=axis)[0]


def _concatenate_operands_vjp(argnums, ct, ans, xs, *, axis):
    """The pieces of ``ct`` for the operands ``argnums``; the offsets are summed once for all of them
    (a running sum per operand made ``stack`` of N arrays quadratic in N)."""
    starts = list(itertools.accumulate((shape_of(x)[axis] for x in xs), initial=0))
    pieces = []
    for argnum in argnums:
        piece = ct[(slice(None),) * axis + (slice(starts[argnum], starts[argnum + 1]),)]
        x = xs[argnum]
        pieces.append(piece if piece.dtype == x.dtype else astype(piece, x.dtype))
    return pieces


defvjp_argnum(concatenate_p, _concatenate_vjp, _concatenate_operands_vjp)
deflinear(concatenate_p)


def concatenate(arrays, axis=0):
    """Join ``arrays`` along an existing ``axis`` (None: flatten first), as ``numpy.concatenate``."""
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [reshape(a, (-1,)) for a in arrays], 0
    axis = normalize_axis(axis, len(shape_of(arrays[0])))[0]
    return bind(concatenate_p, *arrays, axis=axis)


def stack(arrays, axis=0):
    """Join ``arrays`` along a new ``axis``."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("stack: need at least one array")
    out_ndim = len(shape_of(arrays[0])) + 1
    axis = operator.index(axis) % out_ndim
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)


# ---- lowerings for jit's compiled executor (tapegrad._jit.native) ----------------------------------
def_lowering(add_any_p, _lowerings.elementwise("add"))
def_lowering(stop_gradient_p, _lowerings.identity)
def_lowering(astype_p, _lowerings.astype)
def_lowering(reshape_p, _lowerings.structural(
    lambda x, *, shape: x.reshape(shape),
    lambda ctx, x, *, shape: f"np.ascontiguousarray({x}).reshape({tuple(shape)!r})"))
def_lowering(transpose_p, _lowerings.structural(
    lambda x, *, axes: x.transpose(axes),
    lambda ctx, x, *, axes: f"np.ascontiguousarray({x}.transpose({tuple(axes)!r}))"))
def_lowering(broadcast_to_p, _lowerings.structural(
    lambda x, *, shape: np.broadcast_to(x, shape),
    lambda ctx, x, *, shape: f"np.ascontiguousarray(np.broadcast_to({x}, {tuple(shape)!r}))"))
def_lowering(concatenate_p, _lowerings.structural(
    lambda *xs, axis: np.concatenate(xs, axis=axis),
    lambda ctx, *xs, axis: f"np.concatenate(({''.join(x + ', ' for x in xs)}), axis={axis})"))
def_lowering(sum_p, _lowerings.reduction("sum"))
