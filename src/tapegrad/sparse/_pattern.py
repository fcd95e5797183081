"""The static part of a sparse array: its format, shape and the positions of its stored entries.

A :class:`Pattern` is host data (NumPy integer arrays), hashable and compared by value, so it can sit in
a pytree's treedef: ``jit`` then caches one program per pattern, and ``vmap``/``grad`` see only ``data``.
Every operation of :mod:`tapegrad.sparse` is written on the expanded coordinates ``row``/``col`` (one
entry per stored value, in ``data``'s order), whatever the format.
"""
from __future__ import annotations

import functools

import numpy as np

FORMATS = ("csr", "csc", "coo")


def _frozen(a) -> np.ndarray:
    """A read-only int64 copy: a pattern must not change under a cached program."""
    out = np.array(a, dtype=np.int64, copy=True).reshape(-1)
    out.flags.writeable = False
    return out


class Pattern:
    """Format, shape and coordinates of the stored entries, compared and hashed by value.

    Args:
        fmt: ``"csr"``, ``"csc"`` or ``"coo"``. CSR holds its entries sorted by (row, column) with no
            duplicates, CSC by (column, row); COO in any order, duplicates allowed (they add up).
        shape: ``(m, n)``.
        row: the row of each stored entry (int, length nnz).
        col: its column.
    """

    __slots__ = ("fmt", "shape", "row", "col", "_hash", "__dict__")

    def __init__(self, fmt: str, shape: tuple[int, int], row, col):
        self.fmt = fmt
        self.shape = (int(shape[0]), int(shape[1]))
        self.row = _frozen(row)
        self.col = _frozen(col)
        self._hash = hash((fmt, self.shape, self.row.tobytes(), self.col.tobytes()))

    @property
    def nnz(self) -> int:
        return int(self.row.size)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (self is other or isinstance(other, Pattern) and self._hash == other._hash
                and self.fmt == other.fmt and self.shape == other.shape
                and np.array_equal(self.row, other.row) and np.array_equal(self.col, other.col))

    def __repr__(self) -> str:
        return f"Pattern({self.fmt}, shape={self.shape}, nnz={self.nnz})"

    def on(self, xp, name: str):
        """The index array ``name`` (``"row"``, ``"col"``, ``"indptr"``) in the array module ``xp``: the
        host array itself for NumPy; for a device module, copied to the device on first use and kept
        with the pattern, so that no operation copies indices from the host again."""
        return self.device(xp, name, lambda: getattr(self, name))

    def device(self, xp, key, host):
        """``host()`` (an index array derived from this pattern, named by the hashable ``key``) in the
        array module ``xp``: computed and, for a device module, copied once per pattern and module."""
        if xp is np:
            return host()
        cache = self.__dict__.setdefault("_device", {})
        found = cache.get((xp.__name__, key))
        if found is None:
            found = cache[(xp.__name__, key)] = xp.asarray(host())
        return found

    # ---- derived static data, computed once per pattern (cached_property needs __dict__) ----------
    @functools.cached_property
    def indptr(self) -> np.ndarray:
        """CSR's (CSC's) row (column) pointers: entries ``indptr[i]:indptr[i+1]`` are row (column) i."""
        major, size = (self.row, self.shape[0]) if self.fmt == "csr" else (self.col, self.shape[1])
        return _frozen(np.concatenate([[0], np.cumsum(np.bincount(major, minlength=size))]))

    @functools.cached_property
    def keys(self) -> np.ndarray:
        """Row-major linear positions ``row * n + col``: the entries' identity across formats."""
        return self.row * self.shape[1] + self.col

    @functools.cached_property
    def canonical(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, inverse)``: the sorted distinct positions, and for each entry the index of its own."""
        uniq, inverse = np.unique(self.keys, return_inverse=True)
        return uniq, inverse.reshape(-1)


# ---- plans: the static part of an operation, computed once per pattern --------------------------
# An eager loop (an optimiser calling grad on one pattern) would otherwise sort the same indices at
# every step; patterns hash by value, so the caches key on them directly.
@functools.lru_cache(maxsize=256)
def transposed(p: Pattern) -> Pattern:
    """The pattern of the transpose with the same entry order: CSR becomes CSC and back, COO stays COO."""
    return Pattern({"csr": "csc", "csc": "csr", "coo": "coo"}[p.fmt], p.shape[::-1], p.col, p.row)


@functools.lru_cache(maxsize=256)
def conversion(p: Pattern, fmt: str) -> tuple[Pattern, np.ndarray | None, np.ndarray | None]:
    """``(target, inverse, order)`` to convert ``p`` to canonical CSR or CSC: where ``inverse`` is None,
    the target's data is ``data[order]`` (a permutation); otherwise (duplicates) it is the scatter-add of
    ``data`` at ``inverse`` (row-major distinct positions), then gathered at ``order``. ``order`` is None
    where it would be the identity (no gather to record)."""
    keys, inverse = p.canonical
    target = from_keys(fmt, p.shape, keys)
    if keys.size == p.nnz:
        order = np.lexsort((p.col, p.row) if fmt == "csr" else (p.row, p.col))
        return target, None, _unless_identity(order)
    return target, inverse, _unless_identity(np.searchsorted(keys, target.keys))


@functools.lru_cache(maxsize=256)
def union(pa: Pattern, pb: Pattern) -> tuple[Pattern, np.ndarray, np.ndarray]:
    """``(target, slots_a, slots_b)``: the canonical CSR pattern of both patterns' positions, and where
    each entry of either lands in it."""
    keys = np.union1d(pa.keys, pb.keys)
    return from_keys("csr", pa.shape, keys), np.searchsorted(keys, pa.keys), np.searchsorted(keys, pb.keys)


@functools.lru_cache(maxsize=256)
def interned(p: Pattern) -> Pattern:
    """The first pattern equal to ``p`` seen (of the last 256): a pattern read afresh from a SciPy or
    cupyx argument at each call then keeps its device copies of the indices from call to call."""
    return p


def _unless_identity(order: np.ndarray) -> np.ndarray | None:
    return None if np.array_equal(order, np.arange(order.size)) else order


def from_keys(fmt: str, shape: tuple[int, int], keys: np.ndarray) -> Pattern:
    """The CSR or CSC pattern of the distinct row-major positions ``keys`` (sorted ascending)."""
    row, col = np.divmod(keys, shape[1])
    if fmt == "csc":
        order = np.lexsort((row, col))
        row, col = row[order], col[order]
    return Pattern(fmt, shape, row, col)


def compressed(fmt: str, shape, indices, indptr) -> Pattern:
    """The pattern of SciPy's ``(indices, indptr)`` for CSR (``fmt="csr"``) or CSC, checked.

    Raises:
        ValueError: ``indptr`` is not of length ``major + 1``, does not start at 0 or decreases, an
            index is out of range, or the indices of a row (column) are unsorted or repeated.
    """
    indices, indptr = np.asarray(indices), np.asarray(indptr)
    m, n = _shape(shape, fmt)
    major, minor = (m, n) if fmt == "csr" else (n, m)
    what, other = ("row", "column") if fmt == "csr" else ("column", "row")
    if indptr.ndim != 1 or indptr.size != major + 1:
        raise ValueError(f"{fmt}_array: indptr has {indptr.size} entries; a shape of {(m, n)} needs {major + 1} "
                         f"(one per {what}, plus one)")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.size:
        raise ValueError(f"{fmt}_array: indptr must start at 0, never decrease and end at len(indices) = "
                         f"{indices.size}; got {indptr[:3].tolist()}...{indptr[-2:].tolist()}")
    if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer) and indices.size:
        raise ValueError(f"{fmt}_array: indices must be a 1-D integer array; got {indices.dtype} of "
                         f"shape {indices.shape}")
    if indices.size and (indices.min() < 0 or indices.max() >= minor):
        raise ValueError(f"{fmt}_array: a {other} index is outside [0, {minor}) for shape {(m, n)}")
    majors = np.repeat(np.arange(major), np.diff(indptr))
    step = np.diff(indices)
    same = majors[1:] == majors[:-1]
    if np.any(step[same] <= 0):
        bad = int(majors[1:][same & (step <= 0)][0])
        raise ValueError(
            f"{fmt}_array: the {other} indices of {what} {bad} are unsorted or repeated; tapegrad.sparse "
            f"keeps {fmt.upper()} canonical (sorted, no duplicates), so that a pattern is a set of positions. "
            f"Build it as tapegrad.sparse.coo_array((data, (row, col)), shape).to{fmt}(), which sorts the "
            f"entries and adds duplicates (data may be traced), or call sum_duplicates() on the SciPy array")
    row, col = (majors, indices) if fmt == "csr" else (indices, majors)
    return Pattern(fmt, (m, n), row, col)


def coordinates(shape, row, col) -> Pattern:
    """The COO pattern of ``(row, col)``, checked.

    Raises:
        ValueError: ``row`` and ``col`` differ in length or hold an index outside the shape.
    """
    row, col = np.asarray(row).reshape(-1), np.asarray(col).reshape(-1)
    if row.size != col.size:
        raise ValueError(f"coo_array: row has {row.size} entries and col {col.size}; they must match")
    if shape is None:  # SciPy's inference: one past the largest index
        shape = (int(row.max()) + 1 if row.size else 0, int(col.max()) + 1 if col.size else 0)
    m, n = _shape(shape, "coo")
    for name, idx, size in (("row", row, m), ("col", col, n)):
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise ValueError(f"coo_array: a {name} index is outside [0, {size}) for shape {(m, n)}")
    return Pattern("coo", (m, n), row, col)


def _shape(shape, fmt: str) -> tuple[int, int]:
    """``shape`` as two non-negative ints, or a ValueError naming the constructor."""
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{fmt}_array: shape must be a pair (m, n) of ints; got {shape!r}") from None
    if m < 0 or n < 0:
        raise ValueError(f"{fmt}_array: shape must be non-negative; got {shape!r}")
    return m, n
