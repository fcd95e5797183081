"""Index construction: the index-trick objects ``r_``, ``c_`` (``s_``, ``index_exp``, ``mgrid``,
``ogrid`` are NumPy's own), grids (``meshgrid``, ``indices``, ``ix_``), triangle and diagonal
index sets (``tri``, ``tril_indices``, ``triu_indices``, ``diag_indices`` and the ``*_from`` forms), and
``rollaxis``.

Index sets and grids of shapes are constants on the default backend. ``r_``/``c_``, ``meshgrid`` and
``ix_`` rearrange their operands with reshapes, broadcasts and concatenations, so they are
differentiable in every operand.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import default_namespace
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._reductions import normalize_axis
from tapegrad.numpy._searching import constant_like, host_value
from tapegrad.numpy._statistics import operand

# Objects that only build slices and NumPy grids of Python numbers: NumPy's own serve.
s_, index_exp, mgrid, ogrid = np.s_, np.index_exp, np.mgrid, np.ogrid


# ---- r_ and c_ -----------------------------------------------------------------------------------
def _ndmin(x, ndmin: int, trans1d: int):
    """``np.array(x, ndmin=ndmin)`` with NumPy's ``trans1d`` placement of the original axes."""
    x = operand(x)
    nd = _shape.ndim(x)
    if nd >= ndmin:
        return x
    x = _shape.reshape(x, (1,) * (ndmin - nd) + tuple(_shape.shape(x)))
    if trans1d == -1:
        return x
    k1 = trans1d + (ndmin - nd + 1 if trans1d < 0 else 0)
    axes = list(range(ndmin))
    return _shape.transpose(x, axes[:k1] + axes[ndmin - nd:] + axes[k1:ndmin - nd])


def _slice_range(item: slice):
    """``start:stop:step`` as NumPy's ``arange``, or ``linspace`` with ``abs(step)`` points for a
    complex step (host constants, moved to the arrays' backend later)."""
    start = 0 if item.start is None else item.start
    step = 1 if item.step is None else item.step
    if isinstance(step, (complex, np.complexfloating)):
        return np.linspace(start, item.stop, num=int(abs(complex(step))))
    return np.arange(start, item.stop, step)


def _directive(item: str, k: int):
    """``(axis, ndmin, trans1d)`` from a string ``"axis[,ndmin[,trans1d]]"``, None where not given."""
    if k != 0:
        raise ValueError("special directives must be the first entry.")
    if item in ("r", "c"):
        raise NotImplementedError(f"r_[{item!r}, ...] builds a numpy.matrix, which tapegrad does not support; "
                                  "use tnp.atleast_2d on the result instead")
    try:
        values = [int(v) for v in item.split(",")]
    except ValueError:
        raise ValueError(f"unknown special directive {item!r}") from None
    if not 1 <= len(values) <= 3:
        raise ValueError(f"unknown special directive {item!r}")
    return tuple(values) + (None,) * (3 - len(values))


class AxisConcatenator:
    """``r_[...]``/``c_[...]``: arrays, scalars and slices joined along an axis, as NumPy's index
    tricks (``r_[1:4, 0, x]``, ``r_['0,2', a, b]``, ``c_[a, b]``). Differentiable in the arrays.

    A slice ``start:stop:step`` is ``arange``, or ``linspace`` with ``abs(step)`` points for a complex
    ``step``; a leading string ``"axis[,ndmin[,trans1d]]"`` changes the axis, the minimum rank and
    where a lifted array's axes go. Everything is cast to the items' common dtype (Python scalars
    weak). The ``'r'``/``'c'`` matrix directives raise ``NotImplementedError`` (no ``numpy.matrix``).
    """

    __slots__ = ("axis", "ndmin", "trans1d")

    def __init__(self, axis=0, ndmin=1, trans1d=-1):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs, dtypes, made = [], [], []  # made: the ones built here from slices and scalars (host)
        for k, item in enumerate(key):
            if isinstance(item, str):
                new_axis, new_ndmin, new_trans = _directive(item, k)
                axis = new_axis
                ndmin = ndmin if new_ndmin is None else new_ndmin
                trans1d = trans1d if new_trans is None else new_trans
                continue
            if isinstance(item, slice):
                obj = _slice_range(item)
                dtypes.append(obj.dtype)
                obj = _ndmin(obj, ndmin, -1)
                objs.append(_shape.swapaxes(obj, -1, trans1d) if ndmin > 1 and trans1d != -1 else obj)
                made.append(True)
            elif type(item) in (int, float, complex, bool) or isinstance(item, np.generic):
                dtypes.append(item)
                objs.append(_ndmin(np.asarray(item), ndmin, -1))
                made.append(True)
            else:
                obj = _ndmin(item, ndmin, trans1d)
                dtypes.append(obj.dtype)
                objs.append(obj)
                made.append(False)
        if not objs:
            return default_namespace().array([])
        given = [o for o, m in zip(objs, made) if not m]
        home = given[0] if given else default_namespace().zeros(())  # the arrays' backend, or the default
        objs = [constant_like(home, o) if m else o for o, m in zip(objs, made)]
        dtype = np.result_type(*dtypes)
        objs = [o if np.dtype(o.dtype) == dtype else ew.astype(o, dtype) for o in objs]
        return _shape.concatenate(objs, axis=axis)

    def __len__(self):
        return 0


class CClass(AxisConcatenator):
    """``c_[...]``, as ``numpy.c_``: ``r_['-1,2,0', ...]``, 1-D arrays become columns joined side by side."""

    __slots__ = ()

    def __init__(self):
        super().__init__(-1, ndmin=2, trans1d=0)


r_ = AxisConcatenator()
c_ = CClass()


# ---- grids ---------------------------------------------------------------------------------------
def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Array, ...]:
    """Coordinate arrays from 1-D coordinate vectors, as ``numpy.meshgrid``: a tuple of ``len(xi)``
    arrays of shape ``(len(x1), ..., len(xn))`` (``indexing='ij'``) or with the first two lengths
    swapped (``'xy'``, the default); ``sparse=True`` leaves them unit-length off their own axis.
    Differentiable in every ``xi`` (each is flattened first, as NumPy does).

    Raises:
        ValueError: ``indexing`` not ``'xy'`` or ``'ij'``.
    """
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    xs = [_shape.ravel(as_operand(x)) for x in xi]
    n = len(xs)
    shapes = [[1] * n for _ in xs]
    for i, x in enumerate(xs):
        shapes[i][i] = _shape.shape(x)[0]
    if indexing == "xy" and n > 1:
        for s in shapes:
            s[0], s[1] = s[1], s[0]
    out = [_shape.reshape(x, tuple(s)) for x, s in zip(xs, shapes)]
    if not sparse:
        out = _shape.broadcast_arrays(*out)
    return tuple(out)


def indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Array:
    """The grid of indices of an array of shape ``dimensions``, as ``numpy.indices``: one array of
    shape ``(len(dimensions), *dimensions)`` (a tuple of broadcastable arrays for ``sparse=True``).
    A constant."""
    return default_namespace().indices(tuple(dimensions), dtype=dtype, sparse=sparse)


def ix_(*args: Any) -> tuple[Array, ...]:
    """An open mesh from 1-D sequences, as ``numpy.ix_``: ``a[ix_(rows, cols)]`` picks the cross
    product. Sequence ``k`` of ``n`` comes back with shape ``(1,) * k + (len,) + (1,) * (n - k - 1)``;
    a boolean sequence is replaced by its true positions (so it must be concrete).

    Raises:
        ValueError: an argument that is not 1-D.
        TypeError: an argument that is not integer or boolean (non-empty).
    """
    out = []
    for k, seq in enumerate(args):
        seq = operand(seq)
        if _shape.ndim(seq) != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if np.dtype(seq.dtype) == np.bool_:
            seq = host_value(seq, "ix_: a boolean sequence must be concrete (its true count shapes the "
                                  "result); under jit/vmap pass integer indices").nonzero()[0]
        elif _shape.size(seq) == 0:
            seq = ew.astype(seq, np.intp)
        elif np.dtype(seq.dtype).kind not in "iu":
            raise TypeError(f"ix_: argument {k} has dtype {seq.dtype}; index sequences must be integer or boolean")
        out.append(_shape.reshape(seq, (1,) * k + (-1,) + (1,) * (len(args) - k - 1)))
    return tuple(out)


# ---- triangles and diagonals ---------------------------------------------------------------------
def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = float) -> Array:
    """A constant ``(N, M)`` array with ones at and below the ``k``-th diagonal, as ``numpy.tri``."""
    return default_namespace().tri(N, M, k, dtype=dtype)


def tril_indices(n: int, k: int = 0, m: Any = None) -> tuple[Array, ...]:
    """The ``(rows, cols)`` indices of the lower triangle (at and below diagonal ``k``) of an
    ``(n, m)`` array, as ``numpy.tril_indices``: constant integer arrays, row-major order."""
    return tuple(default_namespace().asarray(i) for i in np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: Any = None) -> tuple[Array, ...]:
    """The ``(rows, cols)`` indices of the upper triangle (at and above diagonal ``k``), as
    ``numpy.triu_indices``."""
    return tuple(default_namespace().asarray(i) for i in np.triu_indices(n, k, m))


def _matrix_shape(arr, name):
    shape = _shape.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, ...]:
    """``tril_indices`` for the shape of the 2-D ``arr``, as ``numpy.tril_indices_from``.

    Raises:
        ValueError: ``arr`` is not 2-D.
    """
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, ...]:
    """``triu_indices`` for the shape of the 2-D ``arr``, as ``numpy.triu_indices_from``.

    Raises:
        ValueError: ``arr`` is not 2-D.
    """
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n: int, ndim: int = 2) -> tuple[Array, ...]:
    """The indices of the main diagonal of an ``(n,) * ndim`` array: ``ndim`` copies of
    ``arange(n)``, as ``numpy.diag_indices``."""
    idx = default_namespace().arange(n)
    return (idx,) * ndim


def diag_indices_from(arr: ArrayLike) -> tuple[Array, ...]:
    """``diag_indices`` for ``arr``, whose axes must all have the same length, as
    ``numpy.diag_indices_from``.

    Raises:
        ValueError: ``arr`` has fewer than 2 dimensions or unequal ones.
    """
    shape = _shape.shape(arr)
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError(f"All dimensions of input must be of equal length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


# ---- axes ----------------------------------------------------------------------------------------
def rollaxis(a: ArrayLike, axis: int, start: Any = 0) -> Array:
    """``a`` with ``axis`` moved to stand before position ``start``, as ``numpy.rollaxis`` (prefer
    ``moveaxis``, whose meaning of the destination is simpler).

    Raises:
        numpy.exceptions.AxisError: ``axis`` out of range, or ``start`` outside ``[-ndim, ndim]``.
    """
    a = as_operand(a)
    n = _shape.ndim(a)
    axis = normalize_axis(operator.index(axis), n)[0]
    given = operator.index(start)
    start = given + n if given < 0 else given
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"'start' arg requires {-n} <= start < {n + 1}, but {given} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return _shape.transpose(a, axes)


__all__ = [
    "c_", "diag_indices", "diag_indices_from", "index_exp", "indices", "ix_", "meshgrid", "mgrid", "ogrid", "r_",
    "rollaxis", "s_", "tri", "tril_indices", "tril_indices_from", "triu_indices", "triu_indices_from",
]
