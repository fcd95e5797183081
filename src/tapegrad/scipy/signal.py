"""``tapegrad.scipy.signal``: n-dimensional convolution and correlation, as ``scipy.signal``'s
``convolve``, ``correlate``, ``fftconvolve``, ``convolve2d`` and ``correlate2d``, with the modes
``'full'``, ``'same'`` and ``'valid'``; differentiable in both inputs (real and complex) to any order.

One primitive computes the ``'full'`` convolution (SciPy's, by its ``method``); the other modes are
slices of it, and correlation is convolution with the second input reversed and conjugated. The full
convolution is bilinear, so its rules are convolutions again: ``d(x * y) = dx * y + x * dy``, and
the transpose in ``x`` is the correlation with ``y``, ``x_bar = full(ct, flip(y))[n_y - 1 : n_y - 1 + n_x]``
on every axis (and likewise in ``y``). Complex input follows JAX's conventions (transposes without
conjugation).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of, scipy_module
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad._vmap_api import vmap
from tapegrad.extend import ShapedArray, defbatch, defjvp, defvjp, primitive, shape_of
from tapegrad.numpy.linalg._common import float_operand

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "fftconvolve"]

_MODES = ("full", "same", "valid")


# ---- the full convolution ------------------------------------------------------------------------
def _full_impl(in1, in2, *, method):
    signal = scipy_module(namespace_of(in1, in2), "signal")
    return signal.convolve(in1, in2, mode="full", method=method)


def _full_aval(in1, in2, *, method):
    shape = tuple(a + b - 1 for a, b in zip(in1.shape, in2.shape))
    return ShapedArray(shape, np.result_type(in1.dtype, in2.dtype))


def _full(in1, in2, method):
    return bind(full_p, in1, in2, method=method)


def _correlation_part(ct, other, n, method):
    """The transpose of ``x -> full(x, other)`` at ``ct``, for ``x`` of shape ``n``."""
    m = shape_of(other)
    window = tuple(slice(k - 1, k - 1 + d) for k, d in zip(m, n))
    return _full(ct, tnp.flip(other), method)[window]


full_p = primitive("scipy.signal.convolve", _full_impl, _full_aval)
defjvp(full_p,
       lambda t, ans, in1, in2, *, method: _full(t, in2, method),
       lambda t, ans, in1, in2, *, method: _full(in1, t, method))
defvjp(full_p,
       lambda ct, ans, in1, in2, *, method: _correlation_part(ct, in2, shape_of(in1), method),
       lambda ct, ans, in1, in2, *, method: _correlation_part(ct, in1, shape_of(in2), method))


def _full_batch(vals, dims, *, method):
    """One operand batched: the other gets a unit axis there, and the full convolution along it has
    the batch's length. Both batched: one convolution per example."""
    (in1, in2), (d1, d2) = vals, dims
    if d1 is not None and d2 is not None:
        in1, in2 = tnp.moveaxis(in1, d1, 0), tnp.moveaxis(in2, d2, 0)
        return tnp.stack([_full(in1[i], in2[i], method) for i in range(shape_of(in1)[0])]), 0
    if d1 is None:
        return _full(tnp.expand_dims(in1, d2), in2, method), d2
    return _full(in1, tnp.expand_dims(in2, d1), method), d1


defbatch(full_p, _full_batch)


# ---- modes ---------------------------------------------------------------------------------------
def _operands(in1, in2, name):
    in1, in2 = tnp.asarray(in1), tnp.asarray(in2)
    if tnp.ndim(in1) != tnp.ndim(in2):
        raise ValueError(f"{name}: in1 and in2 should have the same dimensionality, got shapes "
                         f"{tnp.shape(in1)} and {tnp.shape(in2)}")
    if 0 in tnp.shape(in1) or 0 in tnp.shape(in2):
        raise ValueError(f"{name}: in1 and in2 must not be empty, got shapes {tnp.shape(in1)} and {tnp.shape(in2)}")
    return in1, in2


def _check_mode(mode, name):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")


def _window(full, n1, n2, mode, name, late=False, axes=None):
    """The ``mode`` part of a full convolution of inputs of shapes ``n1`` and ``n2``: SciPy's
    centred slice (``same``: ``n1``'s shape; ``valid``: the overlap, ``|n1 - n2| + 1``) on each of
    ``axes`` (default all; the others are kept whole, except that ``same`` cuts them to ``n1`` too,
    centred, as SciPy's ``fftconvolve`` does where ``in2`` is the larger there). Where the centring
    is off by a half (an even ``n2`` in ``same``), ``late`` takes the later start, as ``correlate2d``
    does (and ``convolve``, ``correlate``, ``convolve2d`` do not)."""
    axes = range(len(n1)) if axes is None else axes
    if mode == "full":
        return full
    p1, p2 = [n1[ax] for ax in axes], [n2[ax] for ax in axes]
    if mode == "valid":
        if not (all(a >= b for a, b in zip(p1, p2)) or all(b >= a for a, b in zip(p1, p2))):
            raise ValueError(f"{name}: for 'valid' mode, one must be at least as large as the other in every "
                             f"dimension, got shapes {tuple(n1)} and {tuple(n2)}")
    index = [slice(None)] * len(n1)
    if mode == "same":
        for ax in set(range(len(n1))) - set(axes):
            size = shape_of(full)[ax]
            index[ax] = slice((size - n1[ax]) // 2, (size - n1[ax]) // 2 + n1[ax])
    for ax, a, b in zip(axes, p1, p2):
        out = abs(a - b) + 1 if mode == "valid" else a
        start = (a + b - 1 - out + late) // 2
        index[ax] = slice(start, start + out)
    return full[tuple(index)]


def _flip_conj(x):
    return tnp.flip(tnp.conj(x) if np.dtype(x.dtype).kind == "c" else x)


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto") -> Array:
    """The n-dimensional convolution of ``in1`` and ``in2``, as ``scipy.signal.convolve``.

    Args:
        in1, in2: arrays of the same number of dimensions, real or complex.
        mode: ``'full'`` (shape ``n1 + n2 - 1``), ``'same'`` (``in1``'s shape, centred as SciPy) or
            ``'valid'`` (``|n1 - n2| + 1``, where one input is at least as large as the other on
            every axis).
        method: SciPy's ``'auto'``, ``'direct'`` or ``'fft'`` (the values; derivatives use it too).

    Returns:
        The promoted dtype of the inputs (integers stay integers, as in SciPy); differentiable in both
        inputs to any order, in both modes; batched under ``vmap``.

    Raises:
        ValueError: an unknown ``mode`` or ``method``, inputs of different ranks or empty, or
            ``'valid'`` with neither input the larger.
    """
    _check_mode(mode, "convolve")
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: method must be 'auto', 'direct' or 'fft', got {method!r}")
    in1, in2 = tnp.asarray(in1), tnp.asarray(in2)
    if tnp.ndim(in1) == tnp.ndim(in2) == 0:
        return in1 * in2
    in1, in2 = _operands(in1, in2, "convolve")
    return _window(_full(in1, in2, method), tnp.shape(in1), tnp.shape(in2), mode, "convolve")


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto") -> Array:
    """The n-dimensional cross-correlation, as ``scipy.signal.correlate``:
    ``z[k] = sum_l in1[l] conj(in2[l - k + n2 - 1])`` for ``'full'``; ``convolve(in1,
    flip(conj(in2)), mode)``. Arguments, results and errors as :func:`convolve`."""
    _check_mode(mode, "correlate")
    in1, in2 = tnp.asarray(in1), tnp.asarray(in2)
    if tnp.ndim(in1) == tnp.ndim(in2) == 0:
        return in1 * tnp.conj(in2)
    return convolve(in1, _flip_conj(in2), mode, method)


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", axes: Any = None) -> Array:
    """The convolution computed with FFTs, as ``scipy.signal.fftconvolve``: :func:`convolve` with
    ``method='fft'``, integers promoted to float64 (as SciPy's result).

    Args:
        in1, in2, mode: as :func:`convolve`; ``mode`` applies to ``axes`` (``'same'`` also cuts the
            other axes to ``in1``'s sizes, as SciPy does).
        axes: the axes to convolve over (default all); on the others the inputs' sizes must be equal
            or 1, and they broadcast (each slice convolved with its partner).

    Raises:
        ValueError: as :func:`convolve`, or sizes on the other axes that neither match nor are 1.
    """
    _check_mode(mode, "fftconvolve")
    in1, in2 = _operands(float_operand(in1), float_operand(in2), "fftconvolve")
    if axes is None:
        return convolve(in1, in2, mode, method="fft")
    ndim = tnp.ndim(in1)
    axes = sorted({ax % ndim for ax in ((axes,) if isinstance(axes, int) else axes)})
    for ax in set(range(ndim)) - set(axes):
        a, b = tnp.shape(in1)[ax], tnp.shape(in2)[ax]
        if a != b and 1 not in (a, b):
            raise ValueError(f"fftconvolve: in1 and in2 must match or be 1 on the axes not convolved; axis {ax} "
                             f"has {a} and {b}")
    return _convolve_axes(in1, in2, mode, tuple(axes))


def _convolve_axes(in1, in2, mode, axes):
    """The convolution over ``axes`` only. On another axis where one input has size 1, the full
    convolution along it is the broadcast product already; where both have its size, the slices pair
    up: ``vmap`` over that axis."""
    paired = [ax for ax in range(tnp.ndim(in1)) if ax not in axes and min(tnp.shape(in1)[ax], tnp.shape(in2)[ax]) > 1]
    if paired:
        ax = paired[0]
        inner = tuple(a - (a > ax) for a in axes)
        return vmap(lambda a, b: _convolve_axes(a, b, mode, inner), in_axes=(ax, ax), out_axes=ax)(in1, in2)
    full = _full(in1, in2, "fft")
    return _window(full, tnp.shape(in1), tnp.shape(in2), mode, "fftconvolve", axes=axes)


# ---- 2-D, with boundaries ------------------------------------------------------------------------
_BOUNDARIES: dict[str, Any] = {"fill": "constant", "pad": "constant", "wrap": "wrap", "circular": "wrap",
                               "symm": "symmetric", "symmetric": "symmetric"}


def _extend(in1, widths, boundary, fillvalue):
    """``in1`` extended by ``widths`` on both sides of each axis, as SciPy's boundary condition:
    a constant (``fill``), periodic (``wrap``) or mirrored with the edge repeated (``symm``)."""
    mode = _BOUNDARIES[boundary]
    if mode == "constant":
        return tnp.pad(in1, [(w, w) for w in widths], constant_values=fillvalue)
    for axis, w in enumerate(widths):  # a gather of the indices NumPy's pad gives: differentiable
        index = np.pad(np.arange(tnp.shape(in1)[axis]), (w, w), mode=mode)
        in1 = in1[(slice(None),) * axis + (index,)]
    return in1


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill", fillvalue: int = 0) -> Array:
    """The 2-D convolution with a boundary condition, as ``scipy.signal.convolve2d``.

    Args:
        in1, in2: 2-D arrays.
        mode: ``'full'``, ``'same'`` or ``'valid'`` (as :func:`convolve`).
        boundary: ``'fill'`` (pad ``in1`` with ``fillvalue``), ``'wrap'`` (periodic) or ``'symm'``
            (mirrored), as SciPy; ``'valid'`` reads no boundary.
        fillvalue: the padding value of ``'fill'``.

    Returns:
        As :func:`convolve`; differentiable in both inputs.

    Raises:
        ValueError: inputs that are not 2-D, an unknown ``mode`` or ``boundary``.
    """
    return _two_d(in1, in2, mode, boundary, fillvalue, "convolve2d")


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: int = 0) -> Array:
    """The 2-D cross-correlation with a boundary condition, as ``scipy.signal.correlate2d``:
    :func:`convolve2d` with ``in2`` reversed and conjugated, except that ``'same'`` with an even
    ``in2`` dimension is centred half a sample later on it (SciPy's ``correlate2d`` differs there from
    ``correlate``), and that ``'valid'`` with ``in2`` the larger is SciPy's: the correlation of
    ``in2`` with ``in1``, reversed."""
    _check_mode(mode, "correlate2d")
    in1, in2 = tnp.asarray(in1), tnp.asarray(in2)
    if mode == "valid" and tnp.ndim(in1) == tnp.ndim(in2) and any(
            a < b for a, b in zip(tnp.shape(in1), tnp.shape(in2))):
        # SciPy swaps the inputs and reverses the result (for complex input not the same as not swapping)
        return tnp.flip(correlate2d(in2, in1, mode, boundary, fillvalue))
    return _two_d(in1, _flip_conj(in2), mode, boundary, fillvalue, "correlate2d", late=True)


def _two_d(in1, in2, mode, boundary, fillvalue, name, late=False):
    _check_mode(mode, name)
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{name}: boundary must be 'fill', 'wrap' or 'symm', got {boundary!r}")
    in1, in2 = tnp.asarray(in1), tnp.asarray(in2)
    if tnp.ndim(in1) != 2 or tnp.ndim(in2) != 2:
        raise ValueError(f"{name}: in1 and in2 must be 2-D, got shapes {tnp.shape(in1)} and {tnp.shape(in2)}")
    in1, in2 = _operands(in1, in2, name)
    n1, n2 = tnp.shape(in1), tnp.shape(in2)
    if mode == "valid" or (_BOUNDARIES[boundary] == "constant" and fillvalue == 0):
        return _window(_full(in1, in2, "auto"), n1, n2, mode, name, late)
    # the full convolution with the boundary: the valid part of the extended in1's
    extended = _extend(in1, [k - 1 for k in n2], boundary, fillvalue)
    full = _window(_full(extended, in2, "auto"), tnp.shape(extended), n2, "valid", name)
    return _window(full, n1, n2, mode, name, late)
