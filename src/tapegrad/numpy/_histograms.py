"""Counting into bins: ``bincount``, ``histogram``, ``histogram_bin_edges``, ``histogram2d``,
``histogramdd``.

Counts are piecewise constant in the data, so their derivative with respect to the samples is zero
(the bin of each sample comes from ``searchsorted``, a constant for every transform). The weights
are summed into the bins by ``x.at[bins].add(weights)``, so the results are differentiable in
``weights`` (as in JAX); with ``density=True`` they also depend on the bin widths, and so, when the
range is taken from the data (``range=None``), on the smallest and largest sample.

Shapes: ``bincount``'s length depends on the largest value unless ``length=`` is given (required
under jit/vmap, as in JAX); a histogram's number of bins is static (an int, or the given edges),
except for the string rules (``bins='auto'`` and the others), which NumPy computes from concrete data.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions, _shape
from tapegrad.numpy._creation import zeros_like
from tapegrad.numpy._indexing import IndexUpdateRef
from tapegrad.numpy._ranges import linspace
from tapegrad.numpy._searching import concrete, constant_like, host_value, searchsorted
from tapegrad.numpy._statistics import operand


def _sum_into(n: int, index, weights, dtype):
    """``zeros(n, dtype).at[index].add(weights)`` (on ``index``'s backend): differentiable in ``weights``."""
    return IndexUpdateRef(zeros_like(index, dtype=dtype, shape=(n,)), index).add(weights)


# ---- bincount ------------------------------------------------------------------------------------
def bincount(x: ArrayLike, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Array:
    """The number of occurrences of each value ``0, 1, ...`` in the non-negative integer array ``x``
    (with ``weights``: their sum per value), as ``numpy.bincount``. Counts are ``intp``; weighted
    sums are float64 (NumPy's dtype; complex weights stay complex). Differentiable in ``weights``.

    Args:
        minlength: the least length of the result.
        length: the exact length (values at or beyond it are dropped, as in JAX): required under
            jit/vmap, where the largest value is not known.

    Raises:
        ValueError: ``x`` not 1-D, a negative (concrete) value, a negative ``minlength``.
        ConcretizationError: under jit/vmap without ``length``.
    """
    x = operand(x)
    if _shape.ndim(x) != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {_shape.shape(x)}")
    if np.dtype(x.dtype).kind not in "iub":
        raise TypeError(f"bincount: x must be a non-negative integer array, got dtype {x.dtype}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    if length is None:
        value = concrete(x, "bincount", "length")
        if value.size and value.min() < 0:
            raise ValueError("'list' argument must have no negative elements")
        length = max(int(value.max()) + 1 if value.size else 0, minlength)
    length = operator.index(length)
    keep = (x >= 0) & (x < length)
    index = ew.where(keep, x, 0)
    if weights is None:
        return _sum_into(length, index, ew.astype(keep, np.intp), np.intp)
    weights = operand(weights)
    if tuple(_shape.shape(weights)) != tuple(_shape.shape(x)):
        raise ValueError("The weights and list don't have the same length.")
    dtype = np.complex128 if np.dtype(weights.dtype).kind == "c" else np.float64
    weights = ew.astype(weights, dtype) if np.dtype(weights.dtype) != dtype else weights
    return _sum_into(length, index, ew.where(keep, weights, 0), dtype)


# ---- bin edges -----------------------------------------------------------------------------------
def _edge_dtype(a, lo, hi):
    dtype = np.result_type(*[v.dtype if hasattr(v, "dtype") else v for v in (lo, hi, a)])
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _range_of(a, range, name):
    """``(first, last)``: the given ``range``, else ``a``'s smallest and largest value (widened by
    0.5 on each side where they are equal, as NumPy does)."""
    if range is not None:
        first, last = range
        if first > last:
            raise ValueError("max must be larger than min in range parameter.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"supplied range of [{first}, {last}] is not finite")
    elif _shape.size(a) == 0:
        first, last = 0.0, 1.0
    else:
        first, last = _reductions.min(a), _reductions.max(a)
        value = host_value(_shape.stack([first, last]))
        if value is not None and not np.isfinite(value).all():
            raise ValueError(f"autodetected range of [{value[0]}, {value[1]}] is not finite")
    equal = first == last
    if isinstance(equal, (bool, np.bool_)):
        return (first - 0.5, last + 0.5) if equal else (first, last)
    return ew.where(equal, first - 0.5, first), ew.where(equal, last + 0.5, last)


def _bin_edges(a, bins, range, weights, name):
    """The edges for ``a`` (1-D) and ``bins`` (an int, a string rule, or the edges themselves)."""
    if isinstance(bins, str):
        data = concrete(a, f"{name} with bins={bins!r}", "bins")
        w = None if weights is None else concrete(weights, name, "bins")
        return constant_like(a, np.histogram_bin_edges(data, bins, range, w))
    if isinstance(bins, (int, np.integer)):
        n = operator.index(bins)
        if n < 1:
            raise ValueError("`bins` must be positive, when an integer")
        first, last = _range_of(a, range, name)
        edges = linspace(first, last, n + 1, dtype=_edge_dtype(a, first, last))
        return constant_like(a, edges) if isinstance(edges, np.ndarray) else edges  # made from Python numbers
    edges = bins if hasattr(bins, "shape") else constant_like(a, np.asarray(bins))
    if _shape.ndim(edges) != 1:
        raise ValueError("`bins` must be 1d, when an array")
    value = host_value(edges)
    if value is not None and np.any(value[:-1] > value[1:]):
        raise ValueError("`bins` must increase monotonically, when an array")
    return edges


def histogram_bin_edges(a: ArrayLike, bins: Any = 10, range: Any = None, weights: Any = None) -> Array:
    """The bin edges :func:`histogram` uses, as ``numpy.histogram_bin_edges``: ``bins`` equal bins
    over ``range`` (default: the data's smallest to largest value), the given edges, or a string rule
    (``'auto'``, ``'fd'``, ``'sturges'``, ...; concrete data only, constant edges).

    Raises:
        ValueError: a non-positive ``bins``, a bad ``range``, edges that decrease, a non-finite
            autodetected range.
        ConcretizationError: a string rule under jit/vmap.
    """
    a = _shape.ravel(operand(a))
    return _bin_edges(a, bins, range, weights, "histogram_bin_edges")


def _bin_index(x, edges):
    """``(index, inside)``: the bin of each sample (bins half-open, the last one closed, as NumPy)
    and whether it falls inside the edges at all."""
    n = _shape.size(edges) - 1
    index = searchsorted(edges, x, side="right") - 1
    index = ew.where(x == edges[-1], n - 1, index)
    inside = (x >= edges[0]) & (x <= edges[-1])
    return ew.where(inside, index, 0), inside


# ---- histograms ----------------------------------------------------------------------------------
def histogram(a: ArrayLike, bins: Any = 10, range: Any = None, density: bool | None = None,
              weights: Any = None) -> tuple[Array, ...]:
    """A histogram of ``a`` (flattened), as ``numpy.histogram``: ``(hist, bin_edges)``.

    ``hist`` has ``len(bin_edges) - 1`` entries: counts (``intp``), the sums of ``weights`` (their
    dtype), or with ``density=True`` a density (float) that integrates to 1 over the range. Samples
    outside the range are left out. Differentiable in ``weights``; in ``a`` only through the edges
    of a data-derived range (counts are piecewise constant).

    Raises:
        ValueError: as :func:`histogram_bin_edges`; ``weights`` not shaped like ``a``.
    """
    a = operand(a)
    if weights is not None:
        weights = operand(weights)
        if tuple(_shape.shape(weights)) != tuple(_shape.shape(a)):
            raise ValueError("weights should have the same shape as a.")
        weights = _shape.ravel(weights)
    a = _shape.ravel(a)
    edges = _bin_edges(a, bins, range, weights, "histogram")
    index, inside = _bin_index(a, edges)
    n = _shape.size(edges) - 1
    if weights is None:
        hist = _sum_into(n, index, ew.astype(inside, np.intp), np.intp)
    else:
        hist = _sum_into(n, index, ew.where(inside, weights, 0), weights.dtype)
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / widths / _reductions.sum(hist)
    return hist, edges


def _samples(sample):
    """``(N, D)`` samples from an array or a sequence of ``D`` arrays of length ``N``."""
    if isinstance(sample, (list, tuple)):
        return _shape.stack([_shape.ravel(operand(s)) for s in sample], axis=-1)
    sample = operand(sample)
    return _shape.reshape(sample, (-1, 1)) if _shape.ndim(sample) == 1 else sample


def histogramdd(sample: ArrayLike, bins: Any = 10, range: Any = None, density: bool | None = None,
                weights: Any = None) -> tuple[Array, list[Array]]:
    """A ``D``-dimensional histogram of ``N`` samples, as ``numpy.histogramdd``: ``(hist, edges)``
    with ``hist`` of shape ``(nbins_0, ..., nbins_{D-1})`` (float64, or the weights' sums; a density
    with ``density=True``) and ``edges`` a list of ``D`` arrays.

    ``bins``: an int for every dimension, or one per dimension (an int or its edges); ``range``: None
    or one ``(min, max)`` (or None) per dimension. Differentiable as :func:`histogram`.

    Raises:
        ValueError: ``bins`` or ``range`` of the wrong length, and as :func:`histogram`.
    """
    sample = _samples(sample)
    n_samples, dims = _shape.shape(sample)
    per_dim = [bins] * dims if isinstance(bins, (int, np.integer)) else list(bins)
    if len(per_dim) != dims:
        raise ValueError("The dimension of bins must be equal to the dimension of the sample x.")
    ranges = [None] * dims if range is None else list(range)
    if len(ranges) != dims:
        raise ValueError("range argument must have one entry per dimension")
    edges, flat, inside, shape = [], 0, True, []
    for d, (bins_d, range_d) in enumerate(zip(per_dim, ranges)):
        column = sample[:, d]
        e = _bin_edges(column, bins_d, range_d, None, "histogramdd")
        index, ok = _bin_index(column, e)
        nbins = _shape.size(e) - 1
        edges.append(e)
        shape.append(nbins)
        flat = flat * nbins + index
        inside = inside & ok
    total = int(np.prod(shape))
    if weights is None:
        hist = _sum_into(total, flat, ew.astype(inside, np.float64), np.float64)
    else:
        weights = operand(weights)
        dtype = np.complex128 if np.dtype(weights.dtype).kind == "c" else np.float64
        hist = _sum_into(total, flat, ew.where(inside, ew.astype(weights, dtype), 0), dtype)
    hist = _shape.reshape(hist, tuple(shape))
    if density:
        hist = hist / _reductions.sum(hist)
        for d, e in enumerate(edges):
            view = [1] * dims
            view[d] = -1
            hist = hist / _shape.reshape(e[1:] - e[:-1], tuple(view))
    return hist, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10, range: Any = None, density: bool | None = None,
                weights: Any = None) -> tuple[Array, ...]:
    """The two-dimensional histogram of the samples ``(x[i], y[i])``, as ``numpy.histogram2d``:
    ``(hist, xedges, yedges)``, ``hist`` of shape ``(nx, ny)``. ``bins``: an int, ``[nx, ny]``, one
    array of edges for both, or ``[xedges, yedges]``. Differentiable as :func:`histogram`.

    Raises:
        ValueError: ``x`` and ``y`` of different lengths, and as :func:`histogramdd`.
    """
    x, y = _shape.ravel(operand(x)), _shape.ravel(operand(y))
    if _shape.size(x) != _shape.size(y):
        raise ValueError("x and y must have the same length.")
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count not in (1, 2):
        bins = [operand(bins), operand(bins)]
    hist, edges = histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


__all__ = ["bincount", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd"]
