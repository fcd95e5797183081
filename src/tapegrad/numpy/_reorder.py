"""NumPy's functions that reorder, repeat or pick out the elements of an array: ``lexsort``,
``sort_complex``, ``resize``, ``place``, ``trim_zeros``, ``copy``, and the flat-index arithmetic
``ravel_multi_index``/``unravel_index``/``mask_indices``.

The float results are gathers of their input (``take``, ``take_along_axis``, ``where``), so they are
differentiable in every mode wherever the positions do not depend on the values being
differentiated; the integer results (indices) are constants for every transform.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import Tracer
from tapegrad._typing import ArrayLike, ShapeLike
from tapegrad.errors import ConcretizationError
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._indexing import take, take_along_axis
from tapegrad.numpy._reductions import cumsum
from tapegrad.numpy._sorting import argsort
from tapegrad.numpy._statistics import concrete


def copy(a: ArrayLike, order: Literal["K", "A", "C", "F"] = "K", subok: bool = False) -> Array:
    """A copy of ``a``, as ``numpy.copy``: a new NumPy array for a concrete one; a traced value is
    returned as it is (tapegrad never writes into an array, so a copy could not be told apart)."""
    if isinstance(a, Tracer):
        return a
    return np.copy(a, order=order, subok=subok)  # type: ignore[call-overload]  # its stubs overload on subok's literal


def lexsort(keys: Any, axis: int = -1) -> Array:
    """Indices that sort by several keys, the last key primary, as ``numpy.lexsort``: a stable sort by
    each key in turn, from the first (least significant) to the last. Integer result (``intp``), a
    constant for every transform.

    Args:
        keys: a sequence of arrays of one shape, or a 2-d (or more) array whose first axis lists them.
        axis: the axis to sort along.
    """
    keys = [as_operand(k) for k in (keys if isinstance(keys, (list, tuple)) else list(_unstacked(keys)))]
    if not keys:
        raise TypeError("lexsort: keys must hold at least one array")
    order = argsort(keys[0], axis=axis, stable=True)
    for key in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(key, order, axis), axis=axis, stable=True), axis)
    return order


def _unstacked(a):
    a = as_operand(a)
    return [take(a, np.intp(i), axis=0) for i in range(a.shape[0])]


def sort_complex(a: ArrayLike) -> Array:
    """``a`` sorted by real part, then imaginary part, along its last axis, as ``numpy.sort_complex``:
    always complex (real input is converted, float32 to complex64, other types to complex128).
    Differentiable: each element's tangent moves with it."""
    a = as_operand(a)
    dtype = np.dtype(a.dtype)
    target = dtype if dtype.kind == "c" else np.dtype(np.complex64 if dtype == np.float32 else np.complex128)
    a = ew.astype(a, target)
    return take_along_axis(a, lexsort([_complex.imag(a), _complex.real(a)]), axis=-1)


def resize(a: ArrayLike, new_shape: ShapeLike) -> Array:
    """An array of ``new_shape`` filled with the elements of ``a`` in order, repeated as often as
    needed, as ``numpy.resize``. Differentiable: each output element reads one element of ``a``."""
    a = as_operand(a)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(int(n) for n in new_shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"resize: new_shape {shape} has a negative dimension")
    size, flat = math.prod(shape), _shape.ravel(a)
    if flat.shape[0] == 0 or size == 0:  # NumPy fills with zeros when there is nothing to repeat
        return np.zeros(shape, a.dtype)
    return _shape.reshape(take(flat, np.arange(size) % flat.shape[0]), shape)


def place(arr: ArrayLike, mask: ArrayLike, vals: Any, *, inplace: bool = True) -> Array:
    """``arr`` with the positions where ``mask`` is true set to ``vals`` (cycled), as ``numpy.place``,
    but returned as a new array (JAX's ``inplace=False``, which must be passed: tapegrad never writes
    into an array). Differentiable in ``arr`` and ``vals``; ``mask`` may be traced.

    Raises:
        ValueError: ``inplace`` is true, or ``vals`` is empty while ``mask`` selects something.
    """
    if inplace:
        raise ValueError("place: tapegrad cannot write into arr; pass inplace=False and use the returned array")
    arr, mask = as_operand(arr), as_operand(mask)
    vals = _shape.ravel(as_operand(vals))
    if vals.shape[0] == 0:
        chosen = concrete(mask)
        if chosen is None or np.any(chosen):
            raise ValueError("place: vals is empty, so it cannot fill the positions mask selects")
        return arr
    flat_mask = _shape.ravel(mask)
    slot = (cumsum(ew.astype(flat_mask, np.intp)) - 1) % vals.shape[0]  # the k-th selected position reads vals[k]
    placed = ew.where(flat_mask, ew.astype(take(vals, slot), arr.dtype), _shape.ravel(arr))
    return _shape.reshape(placed, arr.shape)


def trim_zeros(filt: ArrayLike, trim: str = "fb") -> Array:
    """``filt`` (1-d) without its leading (``'f'``) and/or trailing (``'b'``) zeros, as
    ``numpy.trim_zeros``. Differentiable in the kept elements. The result's length depends on the
    values, so ``filt`` must be concrete (eager code, or a static argument of ``jit``).

    Raises:
        ConcretizationError: ``filt`` is traced by ``jit`` or ``vmap``.
        ValueError: ``filt`` is not 1-d.
    """
    values = concrete(filt)
    if values is None:
        raise ConcretizationError("trim_zeros: the length of the result depends on the values of filt, which jit "
                                  "and vmap do not know; trim outside the transform or mark filt static")
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"trim_zeros: filt must be 1-d, got shape {values.shape}")
    nonzero = np.flatnonzero(values)
    trim = trim.lower()
    start = int(nonzero[0]) if "f" in trim and nonzero.size else (values.size if "f" in trim else 0)
    stop = int(nonzero[-1]) + 1 if "b" in trim and nonzero.size else (start if "b" in trim else values.size)
    return as_operand(filt)[start:max(start, stop)]


# ---- flat indices -----------------------------------------------------------------------------------
def ravel_multi_index(multi_index: Any, dims: Sequence[int], mode: Literal["raise", "wrap", "clip"] = "raise",
                      order: Literal["C", "F"] = "C") -> Array | int:
    """The flat index of each multi-index into an array of shape ``dims``, as
    ``numpy.ravel_multi_index``. Integer result, a constant for every transform.

    ``mode``: ``'raise'`` (NumPy's default) checks the indices, which needs concrete ones; traced
    indices take ``'clip'`` (clamped to each axis) or ``'wrap'`` (modulo each axis), or may be a
    tuple of modes, one per axis.

    Raises:
        ConcretizationError: ``mode='raise'`` with traced indices (say ``mode='clip'`` or ``'wrap'``).
        ValueError: an index is out of bounds with ``mode='raise'``.
    """
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions")
    known = [concrete(i) for i in multi_index]
    if all(k is not None for k in known) and not any(isinstance(i, Tracer) for i in multi_index):
        return np.ravel_multi_index(tuple(known), dims, mode=mode, order=order)
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if "raise" in modes:
        if any(k is None for k in known):
            raise ConcretizationError("ravel_multi_index: mode='raise' checks the indices, which are traced here; "
                                      "pass mode='clip' or mode='wrap'")
        np.ravel_multi_index(tuple(known), dims, mode=mode, order=order)  # raises where NumPy does
    strides = _strides(dims, order)
    flat = 0
    for index, dim, stride, axis_mode in zip(multi_index, dims, strides, modes):
        index = as_operand(index)
        index = index % dim if axis_mode == "wrap" else ew.clip(index, 0, dim - 1) if axis_mode == "clip" else index
        flat = flat + ew.astype(index, np.intp) * stride
    return flat


def unravel_index(indices: ArrayLike, shape: ShapeLike, order: Literal["C", "F"] = "C") -> tuple[Any, ...]:
    """The multi-index (a tuple of integer arrays, one per axis) of each flat index into an array of
    ``shape``, as ``numpy.unravel_index``. Concrete indices out of bounds raise as in NumPy; traced
    ones are clamped to ``[0, size - 1]`` first (JAX's choice: nothing can raise inside ``jit``)."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if not isinstance(indices, Tracer):
        return np.unravel_index(indices, shape, order=order)
    size = math.prod(shape)
    flat = ew.clip(ew.astype(indices, np.intp), 0, max(size - 1, 0))
    return tuple((flat // stride) % dim for dim, stride in zip(shape, _strides(shape, order)))


def _strides(dims, order):
    """The flat-index stride of each axis, in elements, for C or Fortran order."""
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    axes = range(len(dims)) if order == "F" else range(len(dims) - 1, -1, -1)
    strides, step = [0] * len(dims), 1
    for axis in axes:
        strides[axis], step = step, step * dims[axis]
    return strides


def mask_indices(n: int, mask_func: Callable[..., Any], k: int = 0) -> tuple[Array, ...]:
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero (``mask_func`` such as ``tnp.triu``),
    as ``numpy.mask_indices``: a pair of integer arrays, computed from ``n`` and ``k`` alone."""
    return np.nonzero(np.asarray(mask_func(np.ones((int(n), int(n)), dtype=int), k)) != 0)
