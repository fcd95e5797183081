"""Sorting: ``argsort`` and ``argpartition`` (index primitives, not differentiable), and ``sort`` and
``partition`` on top of them.

``sort(x)`` is ``x`` gathered along the axis by ``argsort(x)``: a permutation that does not depend on
``x``'s perturbations, so its derivative is the same gather of the tangent (and its transpose, a
scatter by the permutation, for the cotangent), in both modes and at every order. The gather and the
scatter are two primitives of their own, ``permute`` and ``unpermute``: knowing that the index is a
permutation along one axis, they address x flattened with one 1-d index (4x faster than NumPy's
``take_along_axis``), and the scatter writes every slot once into an uninitialised array (no zeros, no
``add.at``). The permutation is an operand, so the tape keeps it for the backward pass. Where ``x``
has ties, the permutation decides which of the tied elements each sorted slot reads, and so which one
receives that slot's gradient: NumPy's default sort (fast, deterministic, not stable) unless
``stable=True`` or ``kind="stable"`` asks for ties in their original order (JAX's default).
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._dependency import Lines, Structural
from tapegrad._typing import ArrayLike, Axis
from tapegrad.extend import (
    ShapedArray,
    def_dependency,
    def_nondiff,
    defbatch_front,
    defbatch_single_axis,
    defjvp_argnum,
    defvjp_argnum,
    primitive,
)
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._indexing import row_strides
from tapegrad.numpy._reductions import normalize_axis

# ---- index primitives ----------------------------------------------------------------------------
argsort_p = primitive("argsort", lambda x, *, axis, stable:
                      namespace_of(x).argsort(x, axis=axis, kind="stable" if stable else None))
argpartition_p = primitive("argpartition", lambda x, *, kth, axis:
                           namespace_of(x).argpartition(x, kth, axis=axis))
def_nondiff(argsort_p)
def_nondiff(argpartition_p)
defbatch_single_axis(argsort_p, argpartition_p)  # axis is always an int here


# ---- gathers by a permutation along one axis, and their transposes ---------------------------------
def _flat_positions(perm, axis: int):
    """Where each entry of ``perm`` (a permutation of ``range(n)`` along ``axis``, in every lane) points
    in the C-ordered flattening of an array of ``perm``'s shape: the lane's offset plus the entry times
    the axis's stride. The offsets are summed on the small shape that has 1 at ``axis`` first."""
    xp, shape = namespace_of(perm), tuple(perm.shape)
    if not perm.size:  # an empty axis elsewhere makes the strides 0 (and arange's step with them)
        return perm
    strides = row_strides(shape)
    positions = perm if strides[axis] == 1 else perm * strides[axis]
    offsets = None
    for d, n in enumerate(shape):
        if d != axis and n > 1:
            lane = xp.arange(0, n * strides[d], strides[d]).reshape([n if k == d else 1 for k in range(len(shape))])
            offsets = lane if offsets is None else offsets + lane
    return positions if offsets is None else positions + offsets


def _permute_impl(x, perm, *, axis):
    return namespace_of(x).take(x.reshape(-1), _flat_positions(perm, axis))


def _unpermute_impl(ct, perm, *, axis):
    """The transpose of :func:`_permute_impl`: every slot is written exactly once (``perm`` is a
    permutation), so the result needs no zeros and no accumulation."""
    out = namespace_of(ct).empty(tuple(ct.shape), ct.dtype)
    out.reshape(-1)[_flat_positions(perm, axis).reshape(-1)] = ct.reshape(-1)
    return out


def _same_as_x(x, perm, *, axis):
    return ShapedArray(tuple(x.shape), np.dtype(x.dtype))


permute_p = primitive("permute", _permute_impl, _same_as_x)
unpermute_p = primitive("unpermute", _unpermute_impl, _same_as_x)
for _prim, _transpose in ((permute_p, unpermute_p), (unpermute_p, permute_p)):
    # linear in x; the permutation is an index, a constant
    defvjp_argnum(_prim, lambda argnum, ct, ans, x, perm, *, axis, _t=_transpose:
                  bind(_t, ct, perm, axis=axis) if argnum == 0 else None)
    defjvp_argnum(_prim, lambda argnum, t, ans, x, perm, *, axis, _p=_prim:
                  bind(_p, t, perm, axis=axis) if argnum == 0 else None)
    defbatch_front(_prim, lambda params: {"axis": params["axis"] + 1})
    # a known permutation moves elements exactly; a traced one (a sort) may take any of the line's
    def_dependency(_prim, Structural(data=(0,), otherwise=Lines("axis")))


def _flat_or_axis(a, axis):
    """``(a, axis)`` with ``axis`` a non-negative int; ``axis=None`` flattens ``a`` first (NumPy)."""
    a = as_operand(a)
    if axis is None:
        return _shape.ravel(a), 0
    if _shape.ndim(a) == 0:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for an array of dimension 0")
    return a, normalize_axis(operator.index(axis), _shape.ndim(a))[0]


def _is_stable(kind, stable) -> bool:
    """NumPy's rule: ``stable=True`` or ``kind='stable'``/``'mergesort'`` ask for a stable sort."""
    return bool(stable) or kind in ("stable", "mergesort")


def _no_order(order, name):
    if order is not None:
        raise NotImplementedError(f"{name}: order= (sorting structured arrays by field) is not supported")


def argsort(a: ArrayLike, axis: Axis = -1, kind: str | None = None, order: Any = None, *,
            stable: bool | None = None) -> Array:
    """Indices that sort ``a`` along ``axis`` (None: the flattened array), as ``numpy.argsort``.

    NumPy's default sort, or a stable one (equal elements keep their order) with ``stable=True`` or
    ``kind='stable'``; the result equals NumPy's. NaNs sort to the end. Returns an integer array
    (``intp``), a constant for every transform.

    Raises:
        numpy.exceptions.AxisError: ``axis`` out of range.
        NotImplementedError: ``order`` given.
    """
    _no_order(order, "argsort")
    a, axis = _flat_or_axis(a, axis)
    return bind(argsort_p, a, axis=axis, stable=_is_stable(kind, stable))


def sort(a: ArrayLike, axis: Axis = -1, kind: str | None = None, order: Any = None, *,
         stable: bool | None = None) -> Array:
    """``a`` sorted along ``axis`` (None: the flattened array), as ``numpy.sort``.

    Same shape and dtype as ``a`` (flattened for ``axis=None``); NaNs sort to the end; complex
    numbers sort by real part, then imaginary part. The derivative moves each tangent (cotangent)
    entry with its element; between tied elements, the sort's permutation decides which one a sorted
    slot reads (their original order with ``stable=True`` or ``kind='stable'``).

    Raises:
        numpy.exceptions.AxisError: ``axis`` out of range.
        NotImplementedError: ``order`` given.
    """
    _no_order(order, "sort")
    a, axis = _flat_or_axis(a, axis)
    return bind(permute_p, a, bind(argsort_p, a, axis=axis, stable=_is_stable(kind, stable)), axis=axis)


def _kth_tuple(kth, n: int) -> tuple:
    """``kth`` (an int or a sequence of ints, negatives allowed) as a tuple of indices in ``[0, n)``."""
    kths = (kth,) if isinstance(kth, (int, np.integer)) else tuple(np.asarray(kth).ravel().tolist())
    out = []
    for k in kths:
        k = operator.index(k)
        if not -n <= k < n:
            raise ValueError(f"kth(={k}) out of bounds ({n})")
        out.append(k % n)
    return tuple(out)


def argpartition(a: ArrayLike, kth: Any, axis: Axis = -1, kind: str = "introselect", order: Any = None) -> Array:
    """Indices that partition ``a`` along ``axis`` around the ``kth`` order statistics, as
    ``numpy.argpartition``: the element at each position ``k`` in ``kth`` is the one a full sort would
    put there, smaller ones come before it and larger ones after, in no particular order.

    Returns an integer array, a constant for every transform.

    Raises:
        ValueError: a ``kth`` out of range for the axis length.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    _no_order(order, "argpartition")
    a, axis = _flat_or_axis(a, axis)
    return bind(argpartition_p, a, kth=_kth_tuple(kth, _shape.shape(a)[axis]), axis=axis)


def partition(a: ArrayLike, kth: Any, axis: Axis = -1, kind: str = "introselect", order: Any = None) -> Array:
    """``a`` partially sorted along ``axis`` around the ``kth`` order statistics, as
    ``numpy.partition`` (same values in the same places: it is the gather by :func:`argpartition`).

    Differentiable like :func:`sort`: each element's tangent (cotangent) moves with it.

    Raises:
        ValueError: a ``kth`` out of range for the axis length.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    _no_order(order, "partition")
    a, axis = _flat_or_axis(a, axis)
    order_ = bind(argpartition_p, a, kth=_kth_tuple(kth, _shape.shape(a)[axis]), axis=axis)
    return bind(permute_p, a, order_, axis=axis)
