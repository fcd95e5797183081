"""Indexing: ``x[idx]`` (basic, integer-array and boolean), its transposes ``scatter_add`` (into zeros)
and ``index_add``, ``index_set``, the functional updates ``x.at[idx].set/add/get`` (JAX's spelling),
``take`` and ``take_along_axis``.

An index is split into a hashable static spec (ints, slices, None, Ellipsis, and placeholders) and
its index arrays, which travel as (non-differentiable) operands. Under vmap the batch rules rewrite
the spec so that one indexing operation serves the whole batch (see "index specs under vmap").
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import cast

import numpy as np

from tapegrad import _lowerings
from tapegrad._array_type import Array
from tapegrad._backend import is_array, namespace_of, zeros_like
from tapegrad._core import Boxed, Primitive, ShapedArray, Tracer, bind
from tapegrad._dependency import Structural, Update
from tapegrad._structural import astype
from tapegrad._typing import ArrayLike
from tapegrad._vmap import loop_rule
from tapegrad.errors import ConcretizationError
from tapegrad.extend import (
    ShapeRule,
    aval_of,
    batch_size,
    broadcast_shapes,
    def_dependency,
    def_lowering,
    def_shape_rule,
    defbatch,
    defjvp_argnum,
    defjvp_joint,
    defvjp_argnum,
    lead_batch,
    ndim_of,
    primitive,
    result_dtype,
    shape_of,
    to_front,
)
from tapegrad.numpy import _elementwise, _shape
from tapegrad.numpy._creation import as_operand


# ---- index specs ---------------------------------------------------------------------------------
def encode_index(idx):
    """``(spec, arrays)``: a hashable description of ``idx`` and the index arrays it holds."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    arrays: list
    spec: list[tuple]
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
            arr = _index_array(item)
            if arr.dtype.kind not in "iub":
                raise IndexError(f"index arrays must be integer or boolean, got dtype {arr.dtype}")
            spec.append(("array", len(arrays)))
            arrays.append(arr)
    return tuple(spec), arrays


def _index_array(item):
    """An index item that is neither an int nor a slice, as the array NumPy makes of it (``np.asarray``).
    A traced Python scalar (a ``jit`` argument, weakly typed) is an array of its NumPy dtype too: the
    program converts it (``astype``), so that the indexing primitives get an array at run time, as
    they do from ``x[np.int64(1)]``, and never the Python scalar the executor passes for it."""
    if getattr(item, "weak_type", False):
        return astype(item, item.dtype)
    return item if is_array(item) else np.asarray(item)


def _opt_index(v):
    return None if v is None else operator.index(v)


def decode_index(spec, arrays):
    out: list = []
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


# ---- index specs under vmap --------------------------------------------------------------------------
# NumPy's rule that shapes the batch rules: once an index holds arrays, its ints count as 0-d arrays
# ("fancy" items), and the broadcast shape of the fancy items replaces them in place when they stand
# next to each other in the index, or goes to the front of the result when anything (a slice, None,
# even an Ellipsis that covers no axis) stands between them. The batch axis becomes one more item: a
# full slice when no index array is mapped (the batch axis stays where it is), or ``arange(B)`` when
# some are, so that example b gathers with its own indices (JAX's approach). The item goes where x's
# batch axis is if that keeps the fancy items as adjacent as they were; otherwise (inside a mask's
# axes, between adjacent fancy items) x's batch axis first moves to just before the first fancy item.
_FULL_SLICE = ("slice", None, None, None)


class _Index:
    """An example's index, item by item: ``widths`` (the axes of x each item consumes), ``outs`` (the
    result axes each non-fancy item makes), ``positions`` (of the fancy items), ``rank`` (of their
    broadcast shape) and ``window_rank`` (the rank of one example's ``x[idx]``)."""

    def __init__(self, spec, arrays, adims, ndim: int):
        self.spec, self.fancy = spec, _has_arrays(spec)
        ex_ndims = [ndim_of(a) - (d is not None) for a, d in zip(arrays, adims)]
        masks = [a.dtype.kind == "b" for a in arrays]
        widths, ranks = [], []
        for kind, *rest in spec:
            if kind == "array":  # a mask consumes its rank of axes and yields one (its true count)
                widths.append(ex_ndims[rest[0]] if masks[rest[0]] else 1)
                ranks.append(1 if masks[rest[0]] else ex_ndims[rest[0]])
            else:
                widths.append(0 if kind in ("newaxis", "ellipsis") else 1)
                ranks.append(0)
        if ("ellipsis",) in spec:
            widths[spec.index(("ellipsis",))] = ndim - sum(widths)
        self.widths = widths
        self.positions = [k for k, (kind, *_) in enumerate(spec) if self.fancy and kind in ("int", "array")]
        self.outs = [w if kind == "ellipsis" else int(kind in ("slice", "newaxis"))
                     for (kind, *_), w in zip(spec, widths)]
        self.rank = max((ranks[k] for k in self.positions), default=0)
        self.adjacent = self.positions == list(range(self.positions[0], self.positions[-1] + 1)) if self.fancy else True
        self.trailing = 0 if ("ellipsis",) in spec else ndim - sum(widths)  # axes no item names
        self.window_rank = sum(self.outs) + self.trailing + self.rank

    def keeps_layout(self, k: int, fancy_item: bool, padded: bool = False) -> bool:
        """Whether one more item placed before item ``k`` (after full slices, when ``padded``) leaves
        the example's fancy items as adjacent as they were: a slice must stay out of an adjacent
        run, an ``arange`` must join it."""
        if not self.fancy or not self.adjacent:
            return True
        first, last = self.positions[0], self.positions[-1]
        if fancy_item:
            return not padded and k in (first, last + 1)
        return not first < k <= last

    def place(self, dx: int, fancy_item: bool):
        """``(axis, k, pad)``: with x's batch axis at ``axis``, the batch item goes before item ``k``
        after ``pad`` full slices (the first axes of an Ellipsis there, or trailing unnamed axes)."""
        consumed = 0
        for k, w in enumerate(self.widths):
            if consumed == dx and self.keeps_layout(k, fancy_item):
                return dx, k, 0
            inside = self.spec[k] == ("ellipsis",) and consumed < dx < consumed + w
            if inside and self.keeps_layout(k, fancy_item, padded=True):
                return dx, k, dx - consumed
            consumed += w
        if consumed <= dx and self.keeps_layout(len(self.spec), fancy_item, padded=dx > consumed):
            return dx, len(self.spec), dx - consumed
        first = self.positions[0]  # only fancy indices leave no place
        return sum(self.widths[:first]), first, 0

    def batch_dim(self, k: int, pad: int, fancy_item: bool) -> int:
        """The result's batch axis, the batch item standing before item ``k`` after ``pad`` slices:
        a fancy batch item leads the fancy block; a slice comes after the axes made before it."""
        if fancy_item:
            return sum(self.outs[:self.positions[0]]) if self.adjacent else 0
        before = sum(self.outs[:k]) + pad
        return before + self.rank if self.fancy and (not self.adjacent or self.positions[0] < k) else before


class _BatchedIndex:
    """An example's index rewritten for the batch: with x's batch axis moved to ``x_axis`` (None: x
    is shared, and the mapped index arrays carry the batch), ``x[decode_index(spec, arrays)]`` is the
    batched result, whose batch axis is ``dim``; ``window_rank`` is the rank of one example's ``x[idx]``."""

    def __init__(self, spec, arrays, adims, ndim: int, dx, size: int, xp):
        index = _Index(spec, arrays, adims, ndim)
        self.window_rank = index.window_rank
        mapped = any(d is not None for d in adims)
        # a mapped index array: batch axis first, then unit axes, to broadcast example by example
        self.arrays = [a if d is None else lead_batch(a, d, index.rank) for a, d in zip(arrays, adims)]
        if dx is None:
            self.x_axis, self.spec, self.dim = None, spec, index.batch_dim(0, 0, True)
            return
        self.x_axis, k, pad = index.place(dx, mapped)
        if mapped:  # integer index arrays are never differentiated: a plain arange will do
            item = ("array", len(self.arrays))
            self.arrays.append(xp.arange(size).reshape((size,) + (1,) * index.rank))
        else:
            item = _FULL_SLICE
        # inside an Ellipsis, its first ``pad`` axes become slices and it keeps the rest
        self.spec = spec[:k] + (_FULL_SLICE,) * pad + (item,) + spec[k:]
        self.dim = index.batch_dim(k, pad, mapped)


def _refuse_mapped_masks(arrays, adims):
    for a, d in zip(arrays, adims):
        if d is not None and a.dtype.kind == "b":
            raise IndexError(
                "vmap of x[mask]: the boolean mask varies over the batch, so each example would select "
                "its own number of elements and the results could not be stacked (JAX refuses this too). "
                "Use tnp.where(mask, x, fill) instead, or a mask that every example shares.")


# ---- primitives ----------------------------------------------------------------------------------
def _getitem_batch(vals, dims, *, idx):
    (x, *arrays), (dx, *adims) = vals, dims
    _refuse_mapped_masks(arrays, adims)
    ndim = ndim_of(x) - (dx is not None)
    batched = _BatchedIndex(idx, arrays, adims, ndim, dx, batch_size(vals, dims), namespace_of(x))
    if batched.x_axis != dx:
        x = _shape.moveaxis(x, dx, batched.x_axis)
    return bind(getitem_p, x, *batched.arrays, idx=batched.spec), batched.dim


_ONE_ARRAY = (("array", 0),)


def _getitem_impl(x, *arrays, idx):
    """``x[idx]``; one integer array on the first axis (an embedding lookup, a gather of rows) is
    ``np.take``, a third faster than NumPy's fancy indexing (same result, same IndexError)."""
    if idx == _ONE_ARRAY and type(x) is np.ndarray and x.ndim and arrays[0].dtype.kind in "iu":
        return np.take(x, arrays[0], axis=0)
    return x[decode_index(idx, arrays)]


getitem_p = primitive("getitem", _getitem_impl)


def _full_index(spec, ndim: int):
    """``spec`` with its ellipsis (or, without one, the trailing axes) spelled as full slices; None
    where it indexes more axes than ``x`` has or holds two ellipses."""
    consumed = sum(item[0] in ("slice", "int", "array") for item in spec)
    ellipses = sum(item[0] == "ellipsis" for item in spec)
    if consumed > ndim or ellipses > 1:
        return None
    fill = [("slice", None, None, None)] * (ndim - consumed)
    if not ellipses:
        return list(spec) + fill
    at = [item[0] for item in spec].index("ellipsis")
    return list(spec[:at]) + fill + list(spec[at + 1:])


def _getitem_aval(x, *arrays, idx):
    """``x[idx]``'s type by NumPy's indexing rules: a slice keeps its length, an int drops its axis,
    ``None`` adds one; integer arrays (and the ints among them) broadcast together, their shape in
    place of the first where they are adjacent, else in front. None for boolean arrays."""
    if any(np.dtype(a.dtype).kind not in "iu" for a in arrays):
        return None
    items = _full_index(idx, len(x.shape))
    if items is None:
        return None
    out, advanced, where, dim = [], [], [], 0
    for k, item in enumerate(items):
        if item[0] == "newaxis":
            out.append(1)
            continue
        size, dim = x.shape[dim], dim + 1
        if item[0] == "slice":
            out.append(len(range(*slice(*item[1:]).indices(size))))
        elif item[0] == "int" and not -size <= item[1] < size:
            return None  # NumPy's IndexError, from the dummies
        elif item[0] == "int" and not arrays:
            continue
        else:  # an index array, or an int among index arrays: advanced indexing
            advanced.append(() if item[0] == "int" else tuple(arrays[item[1]].shape))
            where.append((k, len(out)))
    if advanced:
        adjacent = [k for k, _ in where] == list(range(where[0][0], where[0][0] + len(where)))
        at = where[0][1] if adjacent else 0
        out[at:at] = broadcast_shapes(*advanced)
    return ShapedArray(tuple(out), np.dtype(x.dtype))


_getitem_shape_rule = ShapeRule(_getitem_aval, getitem_p)


def _getitem_abstract_eval(x, *arrays, idx):
    """The shape of ``x[idx]``, known without the data except through a boolean mask: staging
    (``jit``) refuses a mask rather than guess its number of true elements."""
    for a in arrays:
        if np.dtype(a.dtype) == np.bool_:
            raise ConcretizationError(
                "x[mask] with a traced boolean mask has a data-dependent shape, which jit cannot stage: "
                "use tnp.where(mask, x, fill) (same shape as x), or x.at[mask].set(...)")
    return _getitem_shape_rule(x, *arrays, idx=idx)


getitem_p.def_abstract_eval(_getitem_abstract_eval)
defvjp_argnum(getitem_p, lambda argnum, ct, ans, x, *arrays, idx: bind(
    scatter_add_p, ct, *arrays, idx=idx, shape=tuple(shape_of(x)), dtype=np.dtype(x.dtype)) if argnum == 0 else None)
defjvp_argnum(getitem_p, lambda argnum, t, ans, x, *arrays, idx:
              bind(getitem_p, t, *arrays, idx=idx) if argnum == 0 else None)
defbatch(getitem_p, _getitem_batch)
def_dependency(getitem_p, Structural(data=(0,)))  # a traced index array: every element may be read


def _index_add_impl(x, y, *arrays, idx):
    out = namespace_of(x, y).array(x, copy=True)
    _add_at(out, idx, arrays, y)
    return out


# the fewest values for which the row path pays: it costs ~15 NumPy calls (20-30 us) where ``add.at``
# on an n-d index costs ~10 ns a value (2048 x 128 values: 2.8 ms), and 1 us on a handful
_ROWS_FROM = 4096


def _add_at(out, idx, arrays, y, zeros: bool = False) -> None:
    """``out[idx] += y`` in place, repeated positions accumulating (``ufunc.at``'s meaning); ``zeros``
    says ``out`` holds zeros, so rows written once may be assigned instead of added to."""
    xp = namespace_of(out)
    index = decode_index(idx, arrays)
    if not _has_arrays(idx):  # a basic index names each element once: += is exact
        out[index] += y
    elif xp is np and out.flags.c_contiguous and np.size(y) >= _ROWS_FROM:
        _scatter_add_rows(out, index, y, zeros)
    else:
        xp.add.at(out, index, y)


def _scatter_add_rows(out, index, y, zeros: bool = False) -> None:
    """``np.add.at(out, index, y)`` by rows: the trailing axes the index leaves whole make contiguous
    rows, and the index picks rows. Rows named once each, in increasing order (a mask, a sorted unique
    index), take a plain ``+=`` (``=`` into ``zeros``); repeated rows are summed segment by segment
    first (:func:`_add_by_segments`). What is left goes to ``np.add.at`` with one 1-d index into
    ``out`` flattened, the only form with a fast loop in NumPy (on Embedding's backward, 2048 rows of
    128, 4x faster than ``add.at`` on the n-d index, and 3x faster than summing sorted rows with
    ``add.reduceat``, which is slow along rows). Each axis's coordinate comes from indexing a
    zero-stride ``arange`` the way ``out`` is indexed, so NumPy itself resolves negative and
    out-of-range indices, masks, ints and where the fancy axes go."""
    whole, head = _whole_trailing_axes(index, out.ndim)
    lead, row_shape = out.shape[:out.ndim - whole], out.shape[out.ndim - whole:]
    if not lead:  # only a 0-d mask names no axis: nothing to gain
        np.add.at(out, index, y)
        return
    width = int(np.prod(row_shape, dtype=np.int64))
    rows = _row_numbers(head, lead)
    values = np.broadcast_to(y, rows.shape + row_shape).reshape(-1, width)
    rows, table = rows.reshape(-1), out.reshape(-1, width)
    zeros = zeros and values.dtype == out.dtype  # an assignment would cast where += raises (complex)
    if rows.size < 2 or bool((rows[1:] > rows[:-1]).all()):
        if zeros:
            table[rows] = values
        else:
            table[rows] += values
    elif width == 1 or not _add_by_segments(table, rows, values, zeros):
        if np.can_cast(values.dtype, out.dtype, "same_kind"):
            values = values.astype(out.dtype, copy=False)  # the fast loop wants one dtype
        if width > 1:
            rows = (rows[:, None] * width + np.arange(width, dtype=np.intp)).reshape(-1)
        np.add.at(out.reshape(-1), rows, values.reshape(-1))


def _row_numbers(head, lead):
    """The row of ``out`` (its ``lead`` axes flattened) that each element of ``out[head]`` lies in. A
    single non-negative integer array on a single axis is its own answer (Embedding's case); otherwise
    NumPy indexes a zero-stride ``arange`` per axis the way ``out`` is indexed."""
    if len(head) == 1 and len(lead) == 1 and isinstance(head[0], np.ndarray) and head[0].dtype.kind in "iu":
        rows = head[0]
        if rows.size and rows.min() >= 0 and rows.max() < lead[0]:
            return rows
    rows = np.zeros((), np.intp)
    for axis, (size, step) in enumerate(zip(lead, row_strides(lead))):
        coordinate = np.arange(size, dtype=np.intp).reshape((size,) + (1,) * (len(lead) - axis - 1))
        rows = rows + np.broadcast_to(coordinate, lead)[head] * step
    return rows


_MAX_ROUNDS = 16


def _add_by_segments(table, rows, values, zeros: bool) -> bool:
    """``table[rows] += values`` with repeated rows: sorted (stably) by row, each row's values form a
    segment, summed in order of appearance (as ``ufunc.at`` sums, so the result is the same to the
    bit): the first of every segment gathered at once, then a few rounds adding each segment's ``r``-th
    value where it has one; one write of the sums (``=`` into ``zeros``). On Embedding's backward (2048
    rows of 128 drawn from 5000: 1,680 segments, the longest 4 or 5) this took a quarter less time
    than rounds of ``table[rows] += values`` over the whole table, and under half of ``add.at`` on
    flat positions. False, having done nothing, when a row repeats more than ``_MAX_ROUNDS`` times."""
    # rows < 2**16 sort as uint16: NumPy's stable sort of 16-bit keys is a radix sort, 3x faster
    keys = rows.astype(np.uint16) if table.shape[0] <= 1 << 16 else rows
    order = np.argsort(keys, kind="stable")
    ordered = rows[order]
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    lengths = np.diff(starts, append=ordered.size)
    rounds = int(lengths.max())
    if rounds > _MAX_ROUNDS:
        return False
    if rounds == 1:  # a unique index, unsorted: no sums to form
        targets, sums = rows, values
    else:
        targets, sums = ordered[starts], _segment_sums(values, order, starts, lengths, table.dtype)
    if zeros:
        table[targets] = sums
    else:
        table[targets] += sums
    return True


def _segment_sums(values, order, starts, lengths, dtype):
    """Each segment's values (``values[order]`` cut at ``starts``) summed in order, in ``dtype``."""
    sums = np.take(values, order[starts], axis=0)
    if sums.dtype != dtype and np.can_cast(sums.dtype, dtype, "same_kind"):
        sums = sums.astype(dtype)  # accumulate in the table's precision, as add.at does
    for r in range(1, int(lengths.max())):
        longer = np.flatnonzero(lengths > r)
        sums[longer] += values[order[starts[longer] + r]]
    return sums


def _whole_trailing_axes(index, ndim: int):
    """``(k, head)``: ``index`` leaves the last ``k`` axes of an ``ndim``-d array whole (full slices,
    a final Ellipsis, axes it does not name), and ``head`` is ``index`` without those items."""
    named = sum(0 if item is None or item is Ellipsis else
                item.ndim if getattr(item, "dtype", None) == np.bool_ else 1 for item in index)
    items = list(index)
    whole = 0 if any(item is Ellipsis for item in items) else ndim - named
    while items and (items[-1] is Ellipsis or _is_full_slice(items[-1])):
        whole += (ndim - named) if items.pop() is Ellipsis else 1
    return whole, tuple(items)


def _is_full_slice(item) -> bool:
    return isinstance(item, slice) and item == slice(None)


def row_strides(shape) -> list:
    """How many items (elements, or rows of a table) apart consecutive entries of each axis of a
    C-ordered ``shape`` lie: its strides counted in items."""
    steps, step = [], 1
    for size in reversed(shape):
        steps.append(step)
        step *= size
    return steps[::-1]


def _index_set_impl(x, y, *arrays, idx):
    out = namespace_of(x, y).array(x, copy=True)
    out[decode_index(idx, arrays)] = y
    return out


def surviving_writes(x, arrays, idx):
    """Boolean mask over ``x[idx]``: True where that write is the one an assignment keeps. With
    repeated integer indices only one write per position survives; the mask is found by assigning
    write numbers the same way the values were assigned, on ``x``'s backend (host index arrays into
    a device ``x`` are allowed, as CuPy allows them)."""
    xp = namespace_of(x)
    slots = xp.zeros(tuple(x.shape), dtype=np.int64)
    # in tapegrad operations, as the arrays may be traced (mapped by vmap, say)
    written_shape = tuple(bind(getitem_p, slots, *arrays, idx=idx).shape)
    numbers = xp.arange(int(np.prod(written_shape)), dtype=np.int64).reshape(written_shape)
    slots = bind(index_set_p, slots, numbers, *arrays, idx=idx)
    return bind(getitem_p, slots, *arrays, idx=idx) == numbers


def _update_vjp(is_set: bool):
    def rule(argnum, ct, ans, x, y, *arrays, idx):
        if argnum == 0:  # set: the written positions no longer depend on x
            return bind(index_set_p, ct, 0.0, *arrays, idx=idx) if is_set else ct
        if argnum != 1:
            return None
        ct_y = bind(getitem_p, ct, *arrays, idx=idx)
        if is_set and _has_arrays(idx):  # only the surviving write of a repeated index is seen
            ct_y = ct_y * surviving_writes(x, arrays, idx)
        return _shape.unbroadcast(ct_y, y)
    return rule


def _update_jvp(prim):
    """Both updates are linear in ``(x, y)`` jointly (the index arrays are constants): the tangent is
    the same update applied to the tangents, a zero standing for a missing one."""
    def rule(tangents, ans, x, y, *arrays, idx):
        t_x, t_y = tangents[0], tangents[1]
        if t_y is None and prim is index_add_p:
            return t_x
        return bind(prim, zeros_like(x) if t_x is None else t_x, 0.0 if t_y is None else t_y, *arrays, idx=idx)
    return rule


def _update_aval(x, y, *arrays, idx):
    """``x``'s type, where ``y`` broadcasts to ``x[idx]`` and casts to ``x``'s dtype as NumPy's
    in-place update would (``same_kind``); None otherwise (the dummy evaluation gives NumPy's error).
    The dummy evaluation would copy a whole ``x``."""
    written = cast(Callable, getitem_p.abstract_eval)(x, *arrays, idx=idx)  # set below, before any call
    if broadcast_shapes(y.shape, written.shape) != tuple(written.shape):
        return None
    if not np.can_cast(result_dtype(x, y), x.dtype, "same_kind"):
        return None
    return ShapedArray(tuple(x.shape), np.dtype(x.dtype))


index_add_p = primitive("index_add", _index_add_impl)
index_set_p = primitive("index_set", _index_set_impl)
def_shape_rule(index_add_p, _update_aval)
def_shape_rule(index_set_p, _update_aval)
defvjp_argnum(index_add_p, _update_vjp(is_set=False))
defvjp_argnum(index_set_p, _update_vjp(is_set=True))
defjvp_joint(index_add_p, _update_jvp(index_add_p))
defjvp_joint(index_set_p, _update_jvp(index_set_p))


# ---- scatter_add: zeros of x's shape with ``ct`` added at the index (getitem's transpose) ---------
# ``index_add`` of zeros would do, but it copies its zeros: on Embedding's backward the copy of a
# freshly allocated table (first touch of every page) cost more than the scatter itself.
def _scatter_add_impl(ct, *arrays, idx, shape, dtype):
    out = namespace_of(ct).zeros(shape, dtype)
    _add_at(out, idx, arrays, ct, zeros=True)
    return out


def _scatter_add_batch(vals, dims, *, idx, shape, dtype):
    """As ``index_add`` into zeros shared by every example."""
    zeros = zeros_like(vals[0], shape, dtype)
    return _update_batch(index_add_p)((zeros, *vals), (None, *dims), idx=idx)


scatter_add_p: Primitive = primitive("scatter_add", _scatter_add_impl,
                          lambda ct, *arrays, idx, shape, dtype: ShapedArray(shape, dtype))
defvjp_argnum(scatter_add_p, lambda argnum, ct, ans, c, *arrays, idx, shape, dtype:
              bind(getitem_p, ct, *arrays, idx=idx) if argnum == 0 else None)
defjvp_argnum(scatter_add_p, lambda argnum, t, ans, c, *arrays, idx, shape, dtype:
              bind(scatter_add_p, t, *arrays, idx=idx, shape=shape, dtype=dtype) if argnum == 0 else None)
defbatch(scatter_add_p, _scatter_add_batch)
def_dependency(scatter_add_p, Update(getitem_p, base=None, overwrite=False))


# ---- lowerings for jit's compiled executor (tapegrad._jit.native) ----------------------------------
def _index_source(ctx, idx, arrays, shape) -> str:
    """The numba source of an index of ints, slices and 0-d integer values (each checked against its
    axis, raising IndexError as NumPy does, and wrapped when negative)."""
    items, axis = [], 0
    spec = _full_index(idx, len(shape))  # the ellipsis spelled as full slices
    if spec is None:
        raise _lowerings.NotLowerable(f"index {idx!r}")
    for item in spec:
        if item[0] == "int":
            items.append(str(int(item[1])))
        elif item[0] == "slice":
            items.append(":".join("" if v is None else str(int(v)) for v in item[1:]))
        elif item[0] == "array" and _is_int_scalar(arrays[item[1]]):
            i = ctx.let(f"np.int64({ctx.texts(arrays[item[1]])[()]})", "j")
            ctx.emit(f"if {i} < -{shape[axis]} or {i} >= {shape[axis]}:")
            ctx.emit(f"    raise IndexError('index out of bounds for axis {axis} with size {shape[axis]}')")
            items.append(ctx.let(f"{i} + {shape[axis]} if {i} < 0 else {i}", "j"))
        else:
            raise _lowerings.NotLowerable(f"index item {item[0]} (an array index other than a 0-d integer)")
        axis += 1
    return ", ".join(items) + ("," if len(items) == 1 else "")


def _is_int_scalar(value) -> bool:
    return not value.shape and _lowerings.concrete(value.dtype).kind == "i"


def _static(ctx, x, arrays) -> bool:
    """Whether an index op on ``x`` is written on its elements: a static index into a small value."""
    return not arrays and (x.unrolled or ctx.unrolls(x.shape))


def _getitem_lowering(ctx, x, *arrays, idx):
    if _static(ctx, x, arrays) and ctx.unrolls(ctx.out.shape):
        return _lowerings.unrolled(ctx.texts(x)[decode_index(idx, ())], x.dtype)
    text = f"{ctx.array(x)}[{_index_source(ctx, idx, arrays, x.shape)}]"
    if not ctx.out.shape:
        return _lowerings.scalar(ctx.let(text), x.dtype)
    return ctx.array_value(text, ctx.out.shape, x.dtype)


def _updated(ctx, base, y, arrays, idx, add: bool, fresh: bool = False):
    """``base`` (a Value of the result's dtype) with ``y`` set or added at the index: element by element
    where small and static, else on a copy of the array (on ``base`` itself where it is ``fresh``, made
    for this result alone)."""
    y = ctx.convert(y, base.dtype)
    if _static(ctx, base, arrays):
        texts = ctx.texts(base).copy()
        positions = np.arange(texts.size).reshape(texts.shape)[decode_index(idx, ())]
        values = np.broadcast_to(ctx.texts(y), positions.shape)
        for p, v in zip(positions.reshape(-1), values.reshape(-1)):
            texts.flat[p] = ctx.let(f"({texts.flat[p]} + {v})") if add else v
        return _lowerings.unrolled(texts, base.dtype)
    out = ctx.array(base) if fresh else ctx.let(f"{ctx.array(base)}.copy()", "a")
    ctx.emit(f"{out}[{_index_source(ctx, idx, arrays, base.shape)}] {'+=' if add else '='} {ctx.array(y)}")
    return _lowerings.Value(base.shape, base.dtype, name=out)


def_lowering(getitem_p, _getitem_lowering)
def_lowering(scatter_add_p, lambda ctx, ct, *arrays, idx, shape, dtype:
             _updated(ctx, ctx.zeros(shape, dtype), ct, arrays, idx, add=True, fresh=True))
def_lowering(index_add_p, lambda ctx, x, y, *arrays, idx: _updated(ctx, x, y, arrays, idx, add=True))
def_lowering(index_set_p, lambda ctx, x, y, *arrays, idx: _updated(ctx, x, y, arrays, idx, add=False))


def _update_batch(prim):
    """``x.at[idx].add/set(y)`` on a batch: x gets its batch axis where ``x[idx]`` would want it
    (broadcast there when x is shared by every example), and ``y`` is laid out to broadcast against
    the batched window."""
    def rule(vals, dims, *, idx):
        (x, y, *arrays), (dx, dy, *adims) = vals, dims
        size = batch_size(vals, dims)
        ndim = ndim_of(x) - (dx is not None)
        if any(d is not None and a.dtype.kind == "b" for a, d in zip(arrays, adims)):
            return _masked_update(prim, vals, dims, idx, ndim, size)
        batched = _BatchedIndex(idx, arrays, adims, ndim, 0 if dx is None else dx, size, namespace_of(x))
        if dx is None:
            x = _broadcast_at(x, batched.x_axis, size)
        elif batched.x_axis != dx:
            x = _shape.moveaxis(x, dx, batched.x_axis)
        y = _update_values(as_operand(y), dy, batched.window_rank, batched.dim, size)
        return bind(prim, x, y, *batched.arrays, idx=batched.spec), batched.x_axis
    return rule


def _masked_update(prim, vals, dims, idx, ndim: int, size: int):
    """An update through a mask that varies over the batch (``x.at[x < 0].set(0.0)``): unlike
    ``x[mask]`` its result keeps x's shape. When the mask is the only index array and a shared ``y``
    is not stretched along the selection, x's batch axis joins the mask's axes (x's just before them,
    the mask's first): one selection over the whole batch. Otherwise the loop, which is always right."""
    (x, y, mask, *others), (dx, dy, dm, *_) = vals, dims
    index = _Index(idx, [mask], [dm], ndim)
    block = sum(index.outs[:index.positions[0]]) if index.adjacent else 0  # the selection's axis in x[idx]
    if others or dy is not None or _fit_rank(shape_of(y), index.window_rank)[block] != 1:
        return loop_rule(prim, vals, dims, {"idx": idx}, size)
    axis = sum(index.widths[:idx.index(("array", 0))])
    x = _broadcast_at(x, axis, size) if dx is None else _shape.moveaxis(x, dx, axis)
    return bind(prim, x, y, to_front(mask, dm), idx=idx), axis


def _broadcast_at(x, axis: int | None, size: int):
    """A shared ``x`` repeated for ``size`` examples along ``axis`` (a view; the updates copy it)."""
    shape = shape_of(x)
    return _shape.broadcast_to(_shape.expand_dims(x, axis), shape[:axis] + (size,) + shape[axis:])


def _update_values(y, dy, window_rank: int, dim: int, size: int):
    """``y`` laid out to broadcast against the batched window, whose batch axis is ``dim``: a mapped
    ``y`` gets unit axes up to the window's rank and its batch axis at ``dim``; a shared one that
    reaches back to the batch axis gets a unit axis there."""
    rank = ndim_of(y) - (dy is not None)
    if dy is None:
        if rank <= window_rank - dim:
            return y
        shape = _fit_rank(shape_of(y), window_rank)
        return _shape.reshape(y, shape[:dim] + (1,) + shape[dim:])
    if rank == window_rank and dy == dim:
        return y
    y = to_front(y, dy)
    y = _shape.reshape(y, (size,) + _fit_rank(shape_of(y)[1:], window_rank))
    return _shape.moveaxis(y, 0, dim)


def _fit_rank(shape: tuple, rank: int) -> tuple:
    """``shape`` brought to ``rank`` the way assignment broadcasts: unit axes added in front, or
    leading unit axes dropped."""
    return (1,) * (rank - len(shape)) + shape[max(len(shape) - rank, 0):]


defbatch(index_add_p, _update_batch(index_add_p))
defbatch(index_set_p, _update_batch(index_set_p))
def_dependency(index_add_p, Update(getitem_p, base=0, overwrite=False))
def_dependency(index_set_p, Update(getitem_p, base=0, overwrite=True))


def getitem(x, idx):
    """``x[idx]`` with NumPy's basic, integer-array and boolean indexing."""
    if _holds_a_known_flag(idx):
        # a 0-d boolean index adds an axis of length 1 or 0 (NumPy's rule): a shape known now, though
        # no mask positions can spell it; the positions of x's elements indexed by NumPy itself can
        positions = np.arange(math.prod(tuple(x.shape))).reshape(tuple(x.shape))[idx]
        return bind(getitem_p, _shape.ravel(x), positions, idx=_ONE_ARRAY)
    spec, arrays = encode_index(_masks_as_positions(x, idx))
    return bind(getitem_p, x, *arrays, idx=spec)


def _holds_a_known_flag(idx) -> bool:
    """Whether ``idx`` is concrete and holds a 0-d boolean (``True``, ``np.False_``, a 0-d mask)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return (any(type(item) in (bool, np.bool_) or type(item) is np.ndarray and item.ndim == 0
                and item.dtype == np.bool_ for item in items)
            and not any(isinstance(item, (Tracer, Boxed)) for item in items))


def _is_concrete_mask(item) -> bool:
    return isinstance(item, np.ndarray) and item.dtype == np.bool_ and item.ndim > 0


def _masks_as_positions(x, idx):
    """A boolean mask known now becomes its ``nonzero()`` positions (NumPy's definition of ``x[mask]``):
    the result's shape is then static, so jit stages ``x[mask]`` with a closed-over mask instead of
    refusing it as data-dependent. The index is first applied to a zero-stride stand-in for ``x``, so a
    mask of the wrong shape still gets NumPy's own IndexError."""
    items = idx if isinstance(idx, tuple) else (idx,)
    if not any(_is_concrete_mask(item) for item in items) or any(isinstance(item, (Tracer, Boxed))
                                                                    for item in items):
        return idx
    np.broadcast_to(np.zeros((), np.int8), tuple(x.shape))[items]  # NumPy's checks, no data
    return tuple(part for item in items for part in (item.nonzero() if _is_concrete_mask(item) else (item,)))


class IndexUpdateRef:
    """``x.at[idx]``: functional updates that return a new array (JAX's ``.at`` spelling)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self):
        return getitem(self.array, self.index)

    def set(self, values):
        """A copy of the array with ``values`` written at the index (broadcast as in assignment).

        Raises:
            TypeError: ``values``' dtype does not cast to the array's by NumPy's ``same_kind`` rule
                (complex into real, float into integer): see :func:`_check_cast`.
        """
        values = as_operand(values)  # a list of traced values is stacked, differentiably
        _check_cast(self.array, values, "set")
        spec, arrays = encode_index(self.index)
        return bind(index_set_p, self.array, values, *arrays, idx=spec)

    def add(self, values):
        """A copy of the array with ``values`` added at the index; repeated indices accumulate.

        Raises:
            TypeError: as :meth:`set`.
        """
        values = as_operand(values)
        _check_cast(self.array, values, "add")
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
        method = name.replace("imum", "")
        values = as_operand(values)
        _check_cast(self.array, values, method)
        spec, arrays = encode_index(self.index)
        method = f"x.at[idx].{method}(v)"
        if _may_repeat(arrays):
            unique = surviving_writes(self.array, arrays, spec).all()
            try:
                unique = bool(unique)
            except ConcretizationError:  # an index mapped by vmap (or staged by jit) has no one answer
                raise ConcretizationError(
                    f"{method}: the index is traced (mapped by vmap, say), so whether it repeats a position "
                    "cannot be checked; if it never does, write x.at[idx].set(op(x[idx], v))") from None
            if not unique:
                raise ValueError(f"{method}: the index repeats a position; use unique indices (or .add for sums)")
        combined = getattr(_elementwise, name)(self.get(), values)
        return bind(index_set_p, self.array, combined, *arrays, idx=spec)


def _may_repeat(arrays) -> bool:
    """Whether index arrays may name a position twice: integer arrays that broadcast to more than one
    element. One position (a traced scalar index, ``x.at[i]`` under jit) is written once, whatever it is."""
    if not arrays:
        return False
    if any(np.dtype(a.dtype).kind == "b" for a in arrays):
        return True
    return math.prod(broadcast_shapes(*[tuple(shape_of(a)) for a in arrays])) > 1


def _check_cast(x, values, method: str) -> None:
    """Refuse ``values`` whose dtype does not cast to ``x``'s by NumPy's ``same_kind`` rule, the rule
    of ``np.add(x, v, out=x)``: otherwise a complex value would lose its imaginary part and a float
    its fraction, silently, where NumPy's ``x[idx] += v`` raises (and ``x[idx] = v`` only warns for
    complex values, JAX's ``.at`` only with a FutureWarning). Python scalars are weak (``x.at[i].set(1)``
    on a float ``x`` is fine), and a float64 value into a float32 ``x`` is the same kind: allowed."""
    if getattr(values, "weak_type", False):  # a Python scalar staged by jit: weak, as it is eagerly
        value = values.aval
    else:
        value = aval_of(values if isinstance(values, (bool, int, float, complex)) or hasattr(values, "dtype")
                        else np.asarray(values))
    target, wanted = np.dtype(x.dtype), result_dtype(aval_of(x), value)
    if np.can_cast(wanted, target, "same_kind"):
        return
    loss = {"c": "the imaginary part", "f": "the fractional part"}.get(wanted.kind, "the values out of range")
    given = f"a Python {value.dtype.__name__}" if isinstance(value.dtype, type) else f"values of dtype {value.dtype}"
    raise TypeError(
        f"x.at[idx].{method}(values): {given} cannot be written into x of dtype {target} "
        f"without losing {loss} (NumPy's 'same_kind' casting rule, as in x[idx] += values). Cast x first "
        f"(x.astype({wanted.name})), or cast the values to {target.name} if dropping {loss} is meant.")


class IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return IndexUpdateRef(self.array, index)


# ---- gathers -------------------------------------------------------------------------------------
def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None) -> Array:
    """Elements of ``a`` at ``indices`` along ``axis`` (None: of the flattened ``a``), as ``numpy.take``;
    differentiable in ``a`` (the cotangent is scattered back, summed over repeated indices).
    """
    a = as_operand(a)
    indices = as_operand(indices)
    if (np.dtype(indices.dtype) if hasattr(indices, "dtype") else np.asarray(indices).dtype).kind == "b":
        indices = astype(indices, np.intp)  # booleans index as 0 and 1: never a mask
    if axis is None:
        return getitem(_shape.ravel(a), indices)
    axis = operator.index(axis) % _shape.ndim(a)
    return getitem(a, (slice(None),) * axis + (indices,))


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1) -> Array:
    """``arr`` gathered along ``axis`` (default the last, as NumPy 2.3's) by ``indices`` of the same
    rank, as ``numpy.take_along_axis``."""
    arr = as_operand(arr)
    if axis is None:
        return getitem(_shape.ravel(arr), indices)
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
