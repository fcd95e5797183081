"""Indexing: ``x[idx]`` (basic, integer-array and boolean), its transpose ``index_add``, ``index_set``,
the functional updates ``x.at[idx].set/add/get`` (JAX's spelling), ``take`` and ``take_along_axis``.

An index is split into a hashable static spec (ints, slices, None, Ellipsis, and placeholders) and
its index arrays, which travel as (non-differentiable) operands.
"""
from __future__ import annotations

import operator

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import Boxed, Tracer, bind
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._rules import defjvp_argnum, defjvp_joint, defvjp_argnum, primitive


# ---- index specs ---------------------------------------------------------------------------------
def encode_index(idx):
    """``(spec, arrays)``: a hashable description of ``idx`` and the index arrays it holds."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    spec, arrays = [], []
    for item in idx:
        if isinstance(item, Boxed):
            item = item.unbox()
        if item is None:
            spec.append(("newaxis",))
        elif item is Ellipsis:
            spec.append(("ellipsis",))
        elif isinstance(item, slice):
            spec.append(("slice", _opt_index(item.start), _opt_index(item.stop), _opt_index(item.step)))
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            spec.append(("int", operator.index(item)))
        else:
            arr = item if isinstance(item, Tracer) or hasattr(item, "__array_namespace__") else np.asarray(item)
            if arr.dtype.kind not in "iub":
                raise IndexError(f"index arrays must be integer or boolean, got dtype {arr.dtype}")
            spec.append(("array", len(arrays)))
            arrays.append(arr)
    return tuple(spec), arrays


def _opt_index(v):
    return None if v is None else operator.index(v)


def decode_index(spec, arrays):
    out = []
    for item in spec:
        kind = item[0]
        if kind == "slice":
            out.append(slice(*item[1:]))
        elif kind == "int":
            out.append(item[1])
        elif kind == "array":
            out.append(arrays[item[1]])
        elif kind == "newaxis":
            out.append(None)
        else:
            out.append(Ellipsis)
    return tuple(out)


def _has_arrays(spec) -> bool:
    return any(item[0] == "array" for item in spec)


# ---- primitives ----------------------------------------------------------------------------------
getitem_p = primitive("getitem", lambda x, *arrays, idx: x[decode_index(idx, arrays)])
defvjp_argnum(getitem_p, lambda argnum, ct, ans, x, *arrays, idx:
              bind(index_add_p, _zeros_of(x), ct, *arrays, idx=idx) if argnum == 0 else None)
defjvp_argnum(getitem_p, lambda argnum, t, ans, x, *arrays, idx:
              bind(getitem_p, t, *arrays, idx=idx) if argnum == 0 else None)


def _zeros_of(x):
    from tapegrad.numpy._creation import zeros_like
    return zeros_like(x)


def _index_add_impl(x, y, *arrays, idx):
    xp = namespace_of(x, y)
    out = xp.array(x, copy=True)
    index = decode_index(idx, arrays)
    if _has_arrays(idx):  # repeated indices must accumulate: ufunc.at, not +=
        xp.add.at(out, index, y)
    else:
        out[index] += y
    return out


def _index_set_impl(x, y, *arrays, idx):
    out = namespace_of(x, y).array(x, copy=True)
    out[decode_index(idx, arrays)] = y
    return out


def surviving_writes(shape, arrays, idx):
    """Boolean mask over ``x[idx]`` for an ``x`` of ``shape``: True where that write is the one an
    assignment keeps. With repeated integer indices only one write per position survives; the mask
    is found by assigning write numbers the same way the values were assigned."""
    xp = namespace_of(*arrays)
    index = decode_index(idx, arrays)
    slots = xp.zeros(shape, dtype=np.int64)
    written_shape = slots[index].shape
    numbers = xp.arange(int(np.prod(written_shape)), dtype=np.int64).reshape(written_shape)
    slots[index] = numbers
    return slots[index] == numbers


def _update_vjp(is_set: bool):
    def rule(argnum, ct, ans, x, y, *arrays, idx):
        if argnum == 0:  # set: the written positions no longer depend on x
            return bind(index_set_p, ct, 0.0, *arrays, idx=idx) if is_set else ct
        if argnum != 1:
            return None
        ct_y = bind(getitem_p, ct, *arrays, idx=idx)
        if is_set and _has_arrays(idx):  # only the surviving write of a repeated index is seen
            ct_y = ct_y * surviving_writes(tuple(x.shape), arrays, idx)
        return _shape.unbroadcast(ct_y, y)
    return rule


def _update_jvp(prim):
    """Both updates are linear in ``(x, y)`` jointly (the index arrays are constants): the tangent is
    the same update applied to the tangents, a zero standing for a missing one."""
    def rule(tangents, ans, x, y, *arrays, idx):
        t_x, t_y = tangents[0], tangents[1]
        if t_y is None and prim is index_add_p:
            return t_x
        return bind(prim, _zeros_of(x) if t_x is None else t_x, 0.0 if t_y is None else t_y, *arrays, idx=idx)
    return rule


index_add_p = primitive("index_add", _index_add_impl)
index_set_p = primitive("index_set", _index_set_impl)
defvjp_argnum(index_add_p, _update_vjp(is_set=False))
defvjp_argnum(index_set_p, _update_vjp(is_set=True))
defjvp_joint(index_add_p, _update_jvp(index_add_p))
defjvp_joint(index_set_p, _update_jvp(index_set_p))


def getitem(x, idx):
    """``x[idx]`` with NumPy's basic, integer-array and boolean indexing."""
    spec, arrays = encode_index(idx)
    return bind(getitem_p, x, *arrays, idx=spec)


class IndexUpdateRef:
    """``x.at[idx]``: functional updates that return a new array (JAX's ``.at`` spelling)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self):
        return getitem(self.array, self.index)

    def set(self, values):
        """A copy of the array with ``values`` written at the index (broadcast as in assignment)."""
        spec, arrays = encode_index(self.index)
        return bind(index_set_p, self.array, values, *arrays, idx=spec)

    def add(self, values):
        """A copy of the array with ``values`` added at the index; repeated indices accumulate."""
        spec, arrays = encode_index(self.index)
        return bind(index_add_p, self.array, values, *arrays, idx=spec)

    def multiply(self, values):
        """A copy with the indexed elements multiplied by ``values`` (no repeated indices)."""
        return self._combine(values, "multiply")

    def min(self, values):
        """A copy with the indexed elements replaced by ``minimum(x[idx], values)`` (ties split the
        gradient evenly, as ``tnp.minimum``; no repeated indices)."""
        return self._combine(values, "minimum")

    def max(self, values):
        """A copy with the indexed elements replaced by ``maximum(x[idx], values)``."""
        return self._combine(values, "maximum")

    def _combine(self, values, name):
        """``x.at[idx].set(op(x[idx], values))``: exact when each position is written once, so
        repeated integer indices (which JAX would combine one by one) are refused."""
        from tapegrad.numpy import _elementwise
        spec, arrays = encode_index(self.index)
        if _has_arrays(spec) and not bool(surviving_writes(tuple(self.array.shape), arrays, spec).all()):
            raise ValueError(f"x.at[idx].{name.replace('imum', '')}(v): the index repeats a position; "
                             "use unique indices (or .add for sums)")
        combined = getattr(_elementwise, name)(self.get(), values)
        return bind(index_set_p, self.array, combined, *arrays, idx=spec)


class IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return IndexUpdateRef(self.array, index)


# ---- gathers -------------------------------------------------------------------------------------
def take(a, indices, axis=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (None: of the flattened ``a``)."""
    a = as_operand(a)
    from tapegrad.numpy._shape import ravel
    if axis is None:
        return getitem(ravel(a), indices)
    axis = operator.index(axis) % _shape.ndim(a)
    return getitem(a, (slice(None),) * axis + (indices,))


def take_along_axis(arr, indices, axis):
    """``arr`` gathered along ``axis`` by ``indices`` of the same rank, as ``numpy.take_along_axis``."""
    arr = as_operand(arr)
    from tapegrad.numpy._shape import ravel
    if axis is None:
        return getitem(ravel(arr), indices)
    shape = tuple(arr.shape)
    indices = indices if hasattr(indices, "shape") else np.asarray(indices)
    axis = operator.index(axis) % len(shape)
    xp = namespace_of(indices)
    index = []
    for dim in range(len(shape)):
        if dim == axis:
            index.append(indices)
        else:
            view = [1] * len(shape)
            view[dim] = shape[dim]
            index.append(xp.arange(shape[dim]).reshape(view))
    return getitem(arr, tuple(index))
