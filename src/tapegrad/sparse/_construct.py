"""Assembling operators: ``eye``, ``diags`` and ``kron``, as ``scipy.sparse``'s, with traced values.

The pattern of each result is computed on the host from the shapes and offsets; the values are
``tapegrad.numpy`` expressions of the (possibly traced) inputs, so an operator assembled from parameters
(a diffusivity on a grid, say) is differentiable in them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.sparse._arrays import SparseArray, asarray, coo_array


def _formatted(a: SparseArray, format: str | None) -> SparseArray:
    """``a`` in ``format`` (``None``: CSR, where SciPy would pick DIA, which tapegrad.sparse lacks)."""
    fmt = format or "csr"
    if fmt not in ("csr", "csc", "coo"):
        raise ValueError(f"format must be 'csr', 'csc', 'coo' or None; got {format!r} (tapegrad.sparse has "
                         "no DIA, BSR, LIL or DOK arrays)")
    return getattr(a, f"to{fmt}")()


def eye(m: int, n: int | None = None, *, k: int = 0, dtype: Any = float, format: str | None = None) -> SparseArray:
    """The ``m × n`` sparse array with ones on the ``k``-th diagonal, as ``scipy.sparse.eye_array``.

    Args:
        m: rows. n: columns (default ``m``). k: the diagonal (0 the main one, > 0 above it).
        dtype: of the stored ones (default float64).
        format: ``"csr"`` (default), ``"csc"`` or ``"coo"``.

    Returns:
        A constant sparse array of ``min(m + min(k, 0), n - max(k, 0))`` stored ones (none when ``k`` is off
        the matrix).
    """
    n = m if n is None else n
    length = max(0, min(m + min(k, 0), n - max(k, 0)))
    return diags(np.ones(length, dtype), k, shape=(m, n), format=format)


def diags(diagonals: Any, offsets: Any = 0, shape: tuple[int, int] | None = None, format: str | None = None,
          dtype: Any = None) -> SparseArray:
    """A sparse array from its diagonals, as ``scipy.sparse.diags_array``; the diagonals may be traced.

    Args:
        diagonals: one 1-D array (with one offset) or a sequence of them, one per offset; the diagonal at
            offset ``k`` of an ``m × n`` array has ``min(m + min(k, 0), n - max(k, 0))`` entries, its ``i``-th
            at ``(i, i + k)`` for ``k >= 0`` and ``(i - k, i)`` below. A scalar (with ``shape`` given) fills
            its whole diagonal.
        offsets: an int or a sequence of distinct ints.
        shape: ``(m, n)``; default square, sized by the first diagonal and its offset.
        format: ``"csr"`` (default), ``"csc"`` or ``"coo"``.
        dtype: cast the values to it.

    Returns:
        A sparse array whose stored entries are exactly the diagonals' positions (zeros in them included).

    Raises:
        ValueError: a repeated offset, a diagonal of the wrong length, a diagonal off the matrix, or as
            many offsets as diagonals not given.
    """
    single = np.ndim(offsets) == 0
    offsets = [int(offsets)] if single else [int(k) for k in offsets]
    if single and (np.ndim(diagonals) <= 1 and not isinstance(diagonals, (list, tuple))
                   or isinstance(diagonals, (list, tuple)) and np.ndim(diagonals[0]) == 0):
        diagonals = [diagonals]
    diagonals = list(diagonals)
    if len(diagonals) != len(offsets):
        raise ValueError(f"diags: {len(diagonals)} diagonals for {len(offsets)} offsets; pass one per offset")
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"diags: offsets {offsets} repeat one; give each diagonal once")
    if shape is None:
        first = np.shape(diagonals[0])[0] + abs(offsets[0])
        shape = (first, first)
    m, n = shape
    rows, cols, values = [], [], []
    for d, k in zip(diagonals, offsets):
        length = min(m + min(k, 0), n - max(k, 0))
        if length <= 0:
            raise ValueError(f"diags: offset {k} is outside an array of shape {(m, n)}")
        d = d if hasattr(d, "shape") else tnp.asarray(d)
        if d.ndim == 0:
            d = tnp.broadcast_to(d, (length,))
        if tuple(d.shape) != (length,):
            raise ValueError(f"diags: the diagonal at offset {k} of an array of shape {(m, n)} has {length} "
                             f"entries; got one of shape {tuple(d.shape)}")
        i = np.arange(length)
        rows.append(i - min(k, 0))
        cols.append(i + max(k, 0))
        values.append(d if dtype is None else d.astype(dtype))
    data = values[0] if len(values) == 1 else tnp.concatenate(values)
    return _formatted(coo_array((data, (np.concatenate(rows), np.concatenate(cols))), shape=(m, n)), format)


def kron(A: Any, B: Any, format: str | None = None) -> SparseArray:
    """The Kronecker product of two sparse arrays, as ``scipy.sparse.kron``; both ``data`` may be traced.

    Entry ``(ra, ca)`` of ``A`` and ``(rb, cb)`` of ``B`` give entry ``(ra * mB + rb, ca * nB + cb)`` with value
    ``a * b``: the result stores ``A.nnz * B.nnz`` entries.

    Args:
        A, B: tapegrad.sparse or SciPy sparse arrays (or dense NumPy arrays, made sparse by their nonzeros).
        format: ``"csr"`` (default), ``"csc"`` or ``"coo"``.

    Returns:
        A sparse array of shape ``(mA * mB, nA * nB)``.
    """
    A, B = asarray(A), asarray(B)
    pa, pb = A.pattern, B.pattern
    (_, _), (mb, nb) = pa.shape, pb.shape
    rows = (pa.row[:, None] * mb + pb.row[None, :]).ravel()
    cols = (pa.col[:, None] * nb + pb.col[None, :]).ravel()
    data = tnp.reshape(A.data[:, None] * B.data[None, :], (-1,))
    shape = (pa.shape[0] * mb, pa.shape[1] * nb)
    return _formatted(coo_array((data, (rows, cols)), shape=shape), format)
