"""Sparse arrays whose pattern is static and whose stored values ``data`` are traced.

Each class is a pytree node with ``data`` its only leaf and the :class:`~tapegrad.sparse._pattern.Pattern`
in the treedef, so ``grad`` differentiates ``data``, ``vmap`` batches it and ``jit`` stages once per pattern.
Every operation is a few ``tapegrad.numpy`` calls on ``data`` (gathers and scatter-adds at the static
coordinates), so derivatives of every order, batching and staging come from those functions' rules, and
none of them builds a dense array the result does not need.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of, scipy_module, to_host
from tapegrad._core import bind
from tapegrad.numpy import _indexing
from tapegrad.sparse import _pattern
from tapegrad.sparse._pattern import Pattern
from tapegrad.tree import register_node


def _is_scipy_sparse(a) -> bool:
    """A SciPy sparse array or matrix, or one of a device module's ``<module>x.scipy.sparse`` (cupyx's),
    recognised without importing scipy.sparse."""
    head, _, rest = type(a).__module__.partition(".")
    return (head == "scipy" and rest.startswith("sparse") or head.endswith("x") and rest.startswith("scipy.sparse")
            ) and hasattr(a, "tocoo")


class SparseArray:
    """The common behaviour of :class:`csr_array`, :class:`csc_array` and :class:`coo_array`.

    Attributes:
        data: the stored values, shape ``(nnz,)`` (a NumPy array or a traced value), in the order of
            the pattern's entries.
        shape: ``(m, n)``; ``nnz``, ``dtype``, ``ndim`` (always 2), ``format`` as SciPy's.
    """

    __slots__ = ("data", "_pattern")
    __array_ufunc__ = None  # NumPy's operators then defer to ours: ndarray @ A calls A.__rmatmul__
    format: str = ""

    def __init__(self, arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False):
        if not self.format:
            raise TypeError("SparseArray is the common base: build a csr_array, csc_array or coo_array")
        if isinstance(arg1, SparseArray) or _is_scipy_sparse(arg1) or isinstance(arg1, np.ndarray):
            source = asarray(arg1) if not isinstance(arg1, SparseArray) else arg1
            converted = getattr(source, f"to{self.format}")()
            data, pattern = converted.data, converted._pattern
        elif isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple) and self.format != "coo":
            # (data, (row, col)) for CSR/CSC: sorted and duplicates added, as SciPy's tocsr/tocsc do
            converted = getattr(coo_array(arg1, shape=shape, dtype=dtype), f"to{self.format}")()
            data, pattern = converted.data, converted._pattern
        elif isinstance(arg1, tuple) and len(arg1) == 2:
            data, pattern = arg1[0], self._pattern_of(arg1, shape)
        elif isinstance(arg1, tuple) and len(arg1) == 3 and self.format != "coo":
            data, pattern = arg1[0], _pattern.compressed(self.format, shape, arg1[1], arg1[2])
        else:
            raise TypeError(f"{type(self).__name__}: expected {self._spelling()}, a SciPy sparse array or "
                            f"another tapegrad.sparse array; got {type(arg1).__name__}")
        data = _dense(data)
        if dtype is not None:
            data = tnp.asarray(data, dtype=dtype)
        if tuple(data.shape) != (pattern.nnz,):
            raise ValueError(f"{type(self).__name__}: data has shape {tuple(data.shape)}, the pattern stores "
                             f"{pattern.nnz} entries: pass one value per index (a 1-D data of length "
                             f"{pattern.nnz}); to batch over data, vmap a function that builds the array")
        self.data, self._pattern = data, pattern

    def _pattern_of(self, arg1, shape) -> Pattern:
        raise TypeError(f"{type(self).__name__}: expected {self._spelling()}")

    def _spelling(self) -> str:
        return f"{self.format}_array((data, indices, indptr), shape=(m, n))"

    @classmethod
    def _make(cls, data, pattern: Pattern) -> SparseArray:
        """An array of ``pattern`` holding ``data``, unchecked (the pytree's unflatten, the operations)."""
        out = object.__new__(_CLASSES[pattern.fmt])
        out.data, out._pattern = data, pattern
        return out

    # ---- attributes ---------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return self._pattern.shape

    @property
    def nnz(self) -> int:
        return self._pattern.nnz

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def pattern(self) -> Pattern:
        """The static pattern (format, shape, coordinates): what ``jit`` keys its cache on."""
        return self._pattern

    def __repr__(self) -> str:
        return (f"<tapegrad.sparse.{type(self).__name__} of shape {self.shape}, {self.nnz} stored entries, "
                f"data {type(self.data).__name__}>")

    # ---- conversions --------------------------------------------------------------------------------
    def toarray(self):
        """The dense ``(m, n)`` array (a scatter-add of ``data``: duplicates of a COO array add up)."""
        p, xp = self._pattern, namespace_of(self.data)
        return scatter_add(self.data, (p.on(xp, "row"), p.on(xp, "col")), p.shape, _dtype(self.data))

    todense = toarray

    def tocoo(self) -> SparseArray:
        """The COO array of the same entries in the same order (``data`` unchanged)."""
        p = self._pattern
        return self._make(self.data, Pattern("coo", p.shape, p.row, p.col))

    def tocsr(self) -> SparseArray:
        """The canonical CSR array: entries sorted by row then column, duplicates added."""
        return self._compress("csr")

    def tocsc(self) -> SparseArray:
        """The canonical CSC array: entries sorted by column then row, duplicates added."""
        return self._compress("csc")

    def _compress(self, fmt: str) -> SparseArray:
        if self._pattern.fmt == fmt:
            return self
        p, data = self._pattern, self.data
        target, inverse, order = _pattern.conversion(p, fmt)
        xp = namespace_of(data)
        if inverse is not None:  # duplicates (COO only) add up into their position, as SciPy's tocsr does
            index = p.device(xp, (fmt, "inverse"), lambda: inverse)
            data = scatter_add(data, index, (int(inverse.max()) + 1,), _dtype(data))
        return self._make(data if order is None else data[p.device(xp, (fmt, "order"), lambda: order)], target)

    def to_scipy(self):
        """This array as the SciPy sparse array of its format (concrete ``data`` only: outside a transform
        or after ``tg.stop_gradient``); for device ``data``, the device module's (``cupyx.scipy.sparse``'s),
        with ``data`` and indices left on the device."""
        from tapegrad.sparse import _foreign
        xp = namespace_of(self.data)
        return _foreign.build(getattr(scipy_module(xp, "sparse"), f"{self._pattern.fmt}_array"), self.data,
                              self._pattern)

    # ---- products -----------------------------------------------------------------------------------
    def __matmul__(self, other):
        if isinstance(other, SparseArray) or _is_scipy_sparse(other):
            raise TypeError("tapegrad.sparse: a sparse @ sparse product is not supported yet; multiply by "
                            "other.toarray() (dense) or assemble the product's pattern with kron/diags")
        other = _dense(other)
        p = self._pattern
        if other.ndim not in (1, 2) or other.shape[0] != p.shape[1]:
            raise ValueError(f"matmul: A of shape {p.shape} @ x of shape {tuple(other.shape)}: x must be 1-D or "
                             f"2-D with {p.shape[1]} rows (A's columns)")
        xp = namespace_of(self.data, other)
        return _gather_scatter(self.data, p.on(xp, "row"), p.on(xp, "col"), p.shape[0], other)

    def __rmatmul__(self, other):
        other = _dense(other)
        p = self._pattern
        if other.ndim not in (1, 2) or other.shape[-1] != p.shape[0]:
            raise ValueError(f"matmul: x of shape {tuple(other.shape)} @ A of shape {p.shape}: x must be 1-D or "
                             f"2-D with {p.shape[0]} columns (A's rows)")
        xp = namespace_of(self.data, other)
        col, row = p.on(xp, "col"), p.on(xp, "row")
        if other.ndim == 1:
            return _gather_scatter(self.data, col, row, p.shape[1], other)
        return _gather_scatter(self.data, col, row, p.shape[1], other.T).T

    def dot(self, other):
        """``self @ other``."""
        return self @ other

    @property
    def T(self) -> SparseArray:
        """The transpose, with the same ``data`` (as SciPy: CSR becomes CSC and back, COO stays COO)."""
        return self.transpose()

    def transpose(self) -> SparseArray:
        return self._make(self.data, _pattern.transposed(self._pattern))

    # ---- elementwise --------------------------------------------------------------------------------
    def __mul__(self, other):
        if np.ndim(other) == 0 and not isinstance(other, SparseArray):
            return self._make(self.data * other, self._pattern)
        return self.multiply(other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if np.ndim(other) != 0 or isinstance(other, SparseArray):
            raise TypeError("tapegrad.sparse: only division by a scalar is supported (A / s); for values on "
                            "the pattern divided elementwise write A.multiply(1 / dense)")
        return self._make(self.data / other, self._pattern)

    def __neg__(self):
        return self._make(-self.data, self._pattern)

    def __pos__(self):
        return self

    def multiply(self, other) -> SparseArray:
        """The elementwise product with a dense array broadcastable to ``shape`` (or a scalar): a sparse
        array of this pattern, the dense operand read only at the stored positions."""
        if isinstance(other, SparseArray) or _is_scipy_sparse(other):
            raise TypeError("multiply: sparse * sparse is not supported yet; multiply by other.toarray()")
        other = _dense(other)
        if other.ndim == 0:
            return self._make(self.data * other, self._pattern)
        if other.ndim > 2 or any(o not in (1, s) for o, s in zip(other.shape[::-1], self.shape[::-1])):
            raise ValueError(f"multiply: an operand of shape {tuple(other.shape)} does not broadcast to "
                             f"{self.shape}")
        p, xp = self._pattern, namespace_of(self.data, other)
        other2 = other.reshape((1,) * (2 - other.ndim) + tuple(other.shape))
        zeros = p.device(xp, "zeros", lambda: np.zeros_like(p.row))  # a broadcast axis reads its one entry
        rows = p.on(xp, "row") if other2.shape[0] > 1 else zeros
        cols = p.on(xp, "col") if other2.shape[1] > 1 else zeros
        return self._make(self.data * other2[rows, cols], self._pattern)

    def __add__(self, other):
        if np.ndim(other) == 0 and not isinstance(other, SparseArray) and not _is_scipy_sparse(other):
            if isinstance(other, (int, float)) and other == 0:
                return self
            raise NotImplementedError("adding a nonzero scalar to a sparse array would fill it; add "
                                      "A.toarray() + s, as SciPy asks")
        if isinstance(other, SparseArray) or _is_scipy_sparse(other):
            return _union(self, asarray(other))
        return self.toarray() + other  # a dense result, as in SciPy

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other if isinstance(other, SparseArray) else -asarray(other)
                       if _is_scipy_sparse(other) else -other)

    def __rsub__(self, other):
        return (-self) + other

    # ---- reductions ---------------------------------------------------------------------------------
    def sum(self, axis: int | None = None):
        """The sum of all entries (``axis=None``, a 0-d array), or over rows (``axis=0``: shape ``(n,)``) or
        columns (``axis=1``: shape ``(m,)``), as SciPy's sparse arrays return them."""
        p = self._pattern
        if axis is None:
            return tnp.sum(self.data)
        if axis not in (0, 1, -1, -2):
            raise ValueError(f"sum: axis must be None, 0 or 1 for a 2-D sparse array; got {axis!r}")
        index, size = ("col", p.shape[1]) if axis in (0, -2) else ("row", p.shape[0])
        return scatter_add(self.data, p.on(namespace_of(self.data), index), (size,), _dtype(self.data))

    def diagonal(self, k: int = 0):
        """The ``k``-th diagonal as a dense 1-D array, as ``scipy.sparse``'s ``diagonal(k)``."""
        p = self._pattern
        m, n = p.shape
        length = max(0, min(m + min(k, 0), n - max(k, 0)))
        xp = namespace_of(self.data)
        on = p.device(xp, ("diagonal", k), lambda: np.flatnonzero(p.col - p.row == k))
        index = p.device(xp, ("along", k), lambda: np.minimum(p.row, p.col)[p.col - p.row == k])  # position on it
        return scatter_add(self.data[on], index, (length,), _dtype(self.data))


class csr_array(SparseArray):
    """A compressed-sparse-row array with a static pattern and traced ``data``, as ``scipy.sparse.csr_array``.

    Constructed as SciPy's: ``csr_array((data, indices, indptr), shape=(m, n))``,
    ``csr_array((data, (row, col)), shape=(m, n))`` (sorted and duplicates added, like ``tocsr``), or from
    a SciPy sparse array/matrix, a dense NumPy array or another tapegrad.sparse array. ``data`` may be
    traced (inside ``grad``, ``vmap``, ``jit``); the pattern is host data. CSR is kept canonical: column
    indices sorted within each row, no duplicates.

    Args:
        arg1: one of the forms above.
        shape: ``(m, n)`` (required for ``(data, indices, indptr)``).
        dtype: cast ``data`` to it.
        copy: accepted for SciPy's signature; arrays are never written to, so it changes nothing.

    Raises:
        ValueError: ``indptr`` or ``indices`` invalid or unsorted, an index out of range, or ``data`` not
            of length nnz; each message says how to fix it.
        TypeError: an argument of another kind.

    Example:
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp, tapegrad.sparse as ts
        >>> indices, indptr = np.array([0, 1, 1]), np.array([0, 2, 3])
        >>> x = np.array([1.0, 2.0])
        >>> loss = lambda d: tnp.sum(ts.csr_array((d, indices, indptr), shape=(2, 2)) @ x)
        >>> tg.grad(loss)(np.array([1.0, 2.0, 3.0]))  # d/d data: x at each entry's column
        array([1., 2., 2.])
    """

    __slots__ = ()
    format = "csr"

    @property
    def indices(self) -> np.ndarray:
        """Column index of each stored entry (read-only NumPy int64)."""
        return self._pattern.col

    @property
    def indptr(self) -> np.ndarray:
        """Row pointers: row i's entries are ``indptr[i]:indptr[i+1]`` (read-only NumPy int64)."""
        return self._pattern.indptr


class csc_array(SparseArray):
    """A compressed-sparse-column array with a static pattern and traced ``data``, as
    ``scipy.sparse.csc_array``: :class:`csr_array`'s constructor forms and rules with rows and columns
    exchanged (``indices`` are row indices, ``indptr`` column pointers). ``csr_array.T`` is one of these,
    with the same ``data``.
    """

    __slots__ = ()
    format = "csc"

    @property
    def indices(self) -> np.ndarray:
        """Row index of each stored entry (read-only NumPy int64)."""
        return self._pattern.row

    @property
    def indptr(self) -> np.ndarray:
        """Column pointers: column j's entries are ``indptr[j]:indptr[j+1]`` (read-only NumPy int64)."""
        return self._pattern.indptr


class coo_array(SparseArray):
    """A coordinate-format array with a static pattern and traced ``data``, as ``scipy.sparse.coo_array``:
    ``coo_array((data, (row, col)), shape=(m, n))`` (``shape`` inferred from the largest indices when
    omitted), or from a SciPy sparse array, a dense NumPy array or another tapegrad.sparse array. Entries
    may come in any order and repeat; repeated positions add up (in ``toarray``, ``@``, ``tocsr``).

    Raises:
        ValueError: ``row``/``col`` of different lengths or out of range, or ``data`` not of their length.
    """

    __slots__ = ()
    format = "coo"

    def _pattern_of(self, arg1, shape) -> Pattern:
        if not (isinstance(arg1[1], tuple) and len(arg1[1]) == 2):
            raise TypeError("coo_array: expected coo_array((data, (row, col)), shape=(m, n))")
        return _pattern.coordinates(shape, *arg1[1])

    def _spelling(self) -> str:
        return "coo_array((data, (row, col)), shape=(m, n))"

    @property
    def row(self) -> np.ndarray:
        """Row index of each stored entry (read-only NumPy int64)."""
        return self._pattern.row

    @property
    def col(self) -> np.ndarray:
        """Column index of each stored entry (read-only NumPy int64)."""
        return self._pattern.col


_CLASSES = {"csr": csr_array, "csc": csc_array, "coo": coo_array}


def asarray(a: Any) -> SparseArray:
    """``a`` as a tapegrad.sparse array, the counterpart of ``scipy.sparse.csr_array(a)`` for any input.

    Args:
        a: a SciPy sparse array or matrix (any format; its ``data`` is copied, never changed), a dense NumPy
            array (its nonzeros are stored), or a tapegrad.sparse array.

    Returns:
        A :class:`csr_array`, :class:`csc_array` or :class:`coo_array` keeping a SciPy input's format where it
        is one of those (BSR, DIA, LIL and DOK become CSR), CSR/CSC made canonical (indices sorted within each
        row/column, duplicates added, as ``sum_duplicates``); a dense array gives a CSR array; a
        tapegrad.sparse array is returned as it is.

    Raises:
        TypeError: anything else (a traced dense array has no static pattern: build one from
            ``(data, indices, indptr)``).
    """
    if isinstance(a, SparseArray):
        return a
    if isinstance(a, np.ndarray):
        import scipy.sparse as sp
        a = sp.csr_array(a)
    if not _is_scipy_sparse(a):
        raise TypeError(f"tapegrad.sparse.asarray: expected a SciPy sparse array or matrix, a dense NumPy "
                        f"array or a tapegrad.sparse array; got {type(a).__name__}. A traced dense array has no "
                        "static pattern: build csr_array((data, indices, indptr), shape) from a known pattern")
    fmt = a.format if a.format in _CLASSES else "csr"
    a = getattr(a, f"to{fmt}")(copy=True)  # SciPy's and cupyx's spelling (cupyx's asformat takes no copy)
    if fmt == "coo":
        pattern = _pattern.coordinates(a.shape, to_host(a.row), to_host(a.col))
    else:
        a.sum_duplicates()  # canonical (sorted, no duplicates): a copy, so the caller's array is untouched
        pattern = _pattern.compressed(fmt, a.shape, to_host(a.indices), to_host(a.indptr))
    return SparseArray._make(a.data, pattern)  # device data stays on its device


def issparse(a: Any) -> bool:
    """Whether ``a`` is a tapegrad.sparse array, as ``scipy.sparse.issparse`` for SciPy's.

    Args:
        a: any object.

    Returns:
        True for a :class:`csr_array`, :class:`csc_array` or :class:`coo_array` (traced ``data`` or not);
        False otherwise, SciPy's own sparse arrays included (:func:`asarray` converts them).
    """
    return isinstance(a, SparseArray)


# ---- helpers ----------------------------------------------------------------------------------------
def _dtype(data):
    """The dtype of a result accumulated from ``data`` (float64 for integer data, as a sum promotes)."""
    return np.result_type(data.dtype, np.float64) if np.issubdtype(data.dtype, np.integer) else data.dtype


def scatter_add(values, index, shape: tuple[int, ...], dtype):
    """Zeros of ``shape`` and ``dtype`` with ``values`` added at ``index`` (static NumPy ints, or a tuple of
    them; repeats accumulate): the transpose of a gather, through tapegrad.numpy's ``scatter_add``
    primitive (its vjp is the gather, its jvp and batch rule are its own), which allocates its zeros
    fresh instead of copying a zeros array as ``x.at[index].add`` would."""
    if values.dtype != dtype:
        values = values.astype(dtype)
    spec, arrays = _indexing.encode_index(index)
    return bind(_indexing.scatter_add_p, values, *arrays, idx=spec, shape=tuple(shape), dtype=np.dtype(dtype))


def _dense(x):
    """A dense operand (array, traced value, scalar or list) as something with ``ndim`` and ``shape``."""
    if isinstance(x, (list, tuple)) or not hasattr(x, "shape"):
        x = tnp.asarray(x)
    return x


def _gather_scatter(data, out_index, in_index, size: int, x):
    """``y[out_index[e]] += data[e] * x[in_index[e]]`` over the stored entries e: the sparse product with
    no dense matrix, linear in ``data`` and in ``x`` (its derivatives are the same gather and scatter)."""
    values = (data[:, None] if x.ndim == 2 else data) * x[in_index]
    dtype = np.result_type(data.dtype, x.dtype)
    return scatter_add(values, out_index, (size,) + tuple(x.shape[1:]), dtype)


def _union(a: SparseArray, b: SparseArray) -> SparseArray:
    """``a + b`` on the union of their patterns, as a canonical CSR array (as SciPy returns)."""
    if a.shape != b.shape:
        raise ValueError(f"add: shapes {a.shape} and {b.shape} differ; sparse addition needs equal shapes")
    pa, pb = a._pattern, b._pattern
    target, slots_a, slots_b = _pattern.union(pa, pb)
    dtype = np.result_type(_dtype(a.data), _dtype(b.data))
    xp = namespace_of(a.data, b.data)
    into_a = pa.device(xp, ("union", pb, "a"), lambda: slots_a)
    into_b = pa.device(xp, ("union", pb, "b"), lambda: slots_b)
    data = scatter_add(a.data, into_a, (target.nnz,), dtype) + scatter_add(b.data, into_b, (target.nnz,), dtype)
    return SparseArray._make(data, target)


def _flatten(a: SparseArray):
    return (a.data,), a._pattern


def _unflatten(pattern: Pattern, children):
    return SparseArray._make(children[0], pattern)


for _cls in (csr_array, csc_array, coo_array):
    register_node(_cls, _flatten, _unflatten)
