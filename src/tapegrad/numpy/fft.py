"""``tapegrad.numpy.fft``: discrete Fourier transforms that trace, as ``numpy.fft``.

Three primitives carry every transform, each over transform lengths equal to its input's (padding and
truncation for ``n``/``s`` happen first, with ``pad`` and slicing, whose rules already exist):

- ``fft``: complex to complex, forward or inverse, over any distinct axes;
- ``rfft``: real to complex, the last transformed axis halved to ``n // 2 + 1``;
- ``irfft``: complex to real, its inverse.

All are linear, so a jvp is the same transform of the tangent. A vjp is the transpose (JAX's
convention: the transpose, not the adjoint; ``jax/_src/lax/fft.py``):

- the DFT matrix ``F[j, k] = w**(j k)`` is symmetric, so a complex transform is its own transpose;
- ``rfft`` is ``F`` restricted to real inputs and the first ``n // 2 + 1`` outputs, so its transpose
  is the real part of the full transform of the zero-padded cotangent (the real part because the
  input is real);
- ``irfft(Z)[j] = Re(sum_k a_k Z_k w**(-j k)) / N`` with Hermitian weights ``a_k`` (1 for the zero
  frequency and, for even ``n``, the Nyquist one, 2 for the rest), so its transpose is
  ``a * conj(rfft(ct)) / N``.

The scale factors of ``norm`` follow along: the transpose of a transform with scale ``c`` has scale
``c``, which for the ``irfft`` transpose means ``rfft`` with the swapped norm (``"backward"`` and
``"forward"`` trade places).

dtypes follow NumPy 2 (also on NumPy 1.26): float32 in gives complex64 out (and ``irfft`` of
complex64 gives float32); float16 computes in single precision, integers and booleans in double. The
arrays' own ``xp.fft`` runs the transforms, so CuPy arrays stay on the GPU.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import default_namespace, namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._dependency import Lines
from tapegrad._typing import ArrayLike, Axis, DTypeLike
from tapegrad.extend import batch_axis_map, def_dependency, defbatch, deflinear, defvjp, primitive
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy._creation import _contains_traced, as_operand, full_like
from tapegrad.numpy._elementwise import astype
from tapegrad.numpy._operators import register_alternatives, register_numpy_functions

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
           "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_SWAPPED_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _complex_dtype(dtype) -> np.dtype:
    """complex64 for float32/float16/complex64 input, complex128 otherwise (NumPy 2's numpy.fft);
    integers and booleans in double (``result_type`` alone would give uint8 complex64)."""
    if np.dtype(dtype).kind in "biu":
        return np.dtype(np.complex128)
    return np.result_type(dtype, np.complex64)


def _real_dtype(dtype) -> np.dtype:
    return np.finfo(_complex_dtype(dtype)).dtype


# ---- complex to complex --------------------------------------------------------------------------
def _fft_impl(x, *, axes, inverse, norm):
    xp_fft = namespace_of(x).fft
    out = (xp_fft.ifftn if inverse else xp_fft.fftn)(x, axes=axes, norm=norm)
    return out.astype(_complex_dtype(x.dtype), copy=False)  # NumPy < 2 computes in double precision


def _fft_aval(x, *, axes, inverse, norm):
    return ShapedArray(tuple(x.shape), _complex_dtype(x.dtype))


def _transform_batch(prim):
    """The batch rule of a transform over static ``axes`` (non-negative): the batch axis stays where
    it is and the transformed axes are renumbered around it; one bind, no ``moveaxis``."""
    def rule(vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        ndim = _shape.ndim(x) - 1
        return bind(prim, x, axes=tuple(batch_axis_map(a % ndim, d) for a in axes), **params), d
    return rule


fft_p = primitive("fft", _fft_impl, _fft_aval)
defvjp(fft_p, lambda ct, ans, x, **params: bind(fft_p, ct, **params))  # F is symmetric
deflinear(fft_p)
defbatch(fft_p, _transform_batch(fft_p))


# ---- real to complex -----------------------------------------------------------------------------
def _rfft_aval(x, *, axes, norm):
    shape = list(x.shape)
    shape[axes[-1]] = shape[axes[-1]] // 2 + 1
    return ShapedArray(tuple(shape), _complex_dtype(x.dtype))


def _rfft_vjp(ct, ans, x, *, axes, norm):
    """Re(F^T ct) with ct zero-padded to the full spectrum (JAX's ``_rfft_transpose``)."""
    last = axes[-1]
    padding = [(0, 0)] * _shape.ndim(ct)
    padding[last] = (0, x.shape[last] - ct.shape[last])
    full = bind(fft_p, _shape.pad(ct, padding), axes=axes, inverse=False, norm=norm)
    return _complex.real(full)


def _rfft_impl(x, *, axes, norm):
    out = namespace_of(x).fft.rfftn(x, axes=axes, norm=norm)
    return out.astype(_complex_dtype(x.dtype), copy=False)


rfft_p = primitive("rfft", _rfft_impl, _rfft_aval)
defvjp(rfft_p, _rfft_vjp)
deflinear(rfft_p)
defbatch(rfft_p, _transform_batch(rfft_p))


# ---- complex to real -----------------------------------------------------------------------------
def _irfft_aval(z, *, axes, lengths, norm):
    shape = list(z.shape)
    for axis, n in zip(axes, lengths):
        shape[axis] = n
    return ShapedArray(tuple(shape), _real_dtype(z.dtype))


def _hermitian_weights(like, axis: int, n: int):
    """``a_k`` along ``axis`` (broadcastable): how many times frequency ``k < n // 2 + 1`` stands in
    the full spectrum (1 for zero and, for even ``n``, Nyquist; 2 for the others)."""
    m = n // 2 + 1
    weights: Any = full_like(like, 2.0, dtype=_real_dtype(like.dtype), shape=(m,))  # a fresh concrete array
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    return _shape.reshape(weights, tuple(m if i == axis else 1 for i in range(_shape.ndim(like))))


def _irfft_vjp(ct, ans, z, *, axes, lengths, norm):
    """``a * conj(rfft(ct))`` with the swapped norm (JAX's ``_irfft_transpose``)."""
    spectrum = bind(rfft_p, ct, axes=axes, norm=_SWAPPED_NORM[norm])
    return _complex.conj(spectrum) * _hermitian_weights(spectrum, axes[-1], lengths[-1])


def _irfft_impl(z, *, axes, lengths, norm):
    out = namespace_of(z).fft.irfftn(z, s=lengths, axes=axes, norm=norm)
    return out.astype(_real_dtype(z.dtype), copy=False)


irfft_p = primitive("irfft", _irfft_impl, _irfft_aval)
defvjp(irfft_p, _irfft_vjp)
deflinear(irfft_p)
defbatch(irfft_p, _transform_batch(irfft_p))  # lengths follow axes in order: unchanged
# each output element mixes its whole line (block) along the transformed axes
def_dependency(fft_p, Lines("axes"), rfft_p, irfft_p)


# ---- arguments -----------------------------------------------------------------------------------
def _norm(norm) -> str:
    if norm is None:
        return "backward"
    if norm not in _SWAPPED_NORM:
        raise ValueError(f'invalid norm {norm!r}: use None, "backward", "ortho" or "forward"')
    return norm


def _axes_and_lengths(x, s, axes, inverse_real=False):
    """NumPy's ``_cook_nd_args``: axes (non-negative) and transform lengths; ``s`` without ``axes``
    means the last ``len(s)`` axes, an entry -1 the whole axis, and for ``irfftn`` a missing ``s``
    gives the last axis the length ``2 * (m - 1)``."""
    ndim = _shape.ndim(x)
    if axes is None:
        axes = range(ndim) if s is None else range(-len(s), 0)
    axes = tuple(_normalize(a, ndim) for a in axes)
    shape = _shape.shape(x)
    if s is None:
        lengths = [shape[a] for a in axes]
        if inverse_real and axes:
            lengths[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        if len(s) != len(axes):
            raise ValueError(f"s {tuple(s)} and axes {axes} have different lengths")
        lengths = [shape[a] if n == -1 else operator.index(n) for n, a in zip(s, axes)]
    for n in lengths:
        if n < 1:
            raise ValueError(f"invalid number of FFT data points ({n}): every transform length must be >= 1")
    return axes, tuple(lengths)


def _normalize(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _fit(x, axes, lengths):
    """``x`` truncated or zero-padded at the end of each of ``axes`` to ``lengths``."""
    shape = _shape.shape(x)
    cut = [slice(None)] * len(shape)
    padding = [(0, 0)] * len(shape)
    for axis, n in zip(axes, lengths):
        if n < shape[axis]:
            cut[axis] = slice(0, n)
        elif n > shape[axis]:
            padding[axis] = (0, n - shape[axis])
    if any(c != slice(None) for c in cut):
        x = x[tuple(cut)]
    if any(p != (0, 0) for p in padding):
        x = _shape.pad(x, padding)
    return x


def _as_complex(x):
    x = as_operand(x)
    dtype = _complex_dtype(x.dtype)
    return x if x.dtype == dtype else astype(x, dtype)


def _as_real(x, name):
    x = as_operand(x)
    if np.dtype(x.dtype).kind == "c":
        raise TypeError(f"{name}: the input must be real, got dtype {x.dtype}; take its real part "
                        "(tnp.real) or use the complex transform")
    dtype = _real_dtype(x.dtype)
    return x if x.dtype == dtype else astype(x, dtype)


def _distinct(axes) -> bool:
    return len(set(axes)) == len(axes)


# ---- complex transforms --------------------------------------------------------------------------
def _c2c(a, s, axes, norm, inverse):
    x = as_operand(a)
    axes, lengths = _axes_and_lengths(x, s, axes)
    norm = _norm(norm)
    if not axes:  # NumPy returns the input untouched
        return x
    x = _as_complex(x)
    if not _distinct(axes):  # NumPy transforms a repeated axis once per mention, last axis first
        for axis, n in reversed(tuple(zip(axes, lengths))):
            x = _c2c(x, (n,), (axis,), norm, inverse)
        return x
    return bind(fft_p, _fit(x, axes, lengths), axes=axes, inverse=inverse, norm=norm)


def fft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """One-dimensional discrete Fourier transform, as ``numpy.fft.fft``.

    Args:
        a: array (real input is taken as complex).
        n: transform length; ``a`` is truncated or zero-padded along ``axis`` to it (default: the
            axis' length).
        axis: the axis to transform.
        norm: ``"backward"`` (default, no scaling), ``"ortho"`` (``1/sqrt(n)``) or ``"forward"``
            (``1/n``).

    Returns:
        A complex array (complex64 for float32/complex64 input, else complex128), ``a``'s shape with
        length ``n`` along ``axis``.

    Raises:
        ValueError: ``n < 1`` or an unknown ``norm``.

    Derivatives: linear; the vjp is the same transform of the cotangent (the DFT matrix is
    symmetric; JAX's convention, a transpose and not an adjoint), and for a real ``a`` its real part.
    """
    return _c2c(a, None if n is None else (n,), (axis,), norm, inverse=False)


def ifft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """One-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifft``.

    Arguments, return value and derivatives as :func:`fft`; ``norm="backward"`` scales by ``1/n``
    here, ``"forward"`` not at all.
    """
    return _c2c(a, None if n is None else (n,), (axis,), norm, inverse=True)


def fftn(a: ArrayLike, s: Any = None, axes: Any = None, norm: str | None = None) -> Array:
    """N-dimensional discrete Fourier transform, as ``numpy.fft.fftn``.

    Args:
        a: array (real input is taken as complex).
        s: transform lengths, one per axis of ``axes`` (-1: the axis' length); ``a`` is truncated or
            zero-padded to them. Without ``axes``, ``s`` applies to the last ``len(s)`` axes.
        axes: the axes to transform (default: all, or the last ``len(s)``). A repeated axis is
            transformed once per mention, as NumPy does.
        norm: as :func:`fft`, with ``n`` the product of the lengths.

    Returns:
        A complex array as :func:`fft`'s, with the lengths ``s`` along ``axes``.

    Raises:
        ValueError: a length below 1, ``s`` and ``axes`` of different lengths, an unknown ``norm``.
    """
    return _c2c(a, s, axes, norm, inverse=False)


def ifftn(a: ArrayLike, s: Any = None, axes: Any = None, norm: str | None = None) -> Array:
    """N-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifftn``; see :func:`fftn`."""
    return _c2c(a, s, axes, norm, inverse=True)


def fft2(a: ArrayLike, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Array:
    """Two-dimensional discrete Fourier transform, as ``numpy.fft.fft2``: :func:`fftn` over
    ``axes`` (the last two by default)."""
    return _c2c(a, s, axes, norm, inverse=False)


def ifft2(a: ArrayLike, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Array:
    """Two-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifft2``; see :func:`fftn`."""
    return _c2c(a, s, axes, norm, inverse=True)


# ---- real transforms -----------------------------------------------------------------------------
def _r2c(a, s, axes, norm):
    x = _as_real(a, "rfft")
    axes, lengths = _axes_and_lengths(x, s, axes)
    norm = _norm(norm)
    if not axes:
        raise ValueError("rfftn: at least one axis must be transformed")
    if not _distinct(axes):  # as NumPy: rfft along the last axis, then fft along the others
        x = _r2c(x, lengths[-1:], axes[-1:], norm)
        return _c2c(x, lengths[:-1], axes[:-1], norm, inverse=False)
    return bind(rfft_p, _fit(x, axes, lengths), axes=axes, norm=norm)


def _c2r(a, s, axes, norm):
    z = _as_complex(a)
    axes, lengths = _axes_and_lengths(z, s, axes, inverse_real=True)
    norm = _norm(norm)
    if not axes:
        raise ValueError("irfftn: at least one axis must be transformed")
    if not _distinct(axes):  # as NumPy: ifft along the other axes in order, then irfft along the last
        for axis, n in zip(axes[:-1], lengths[:-1]):
            z = _c2c(z, (n,), (axis,), norm, inverse=True)
        return _c2r(z, lengths[-1:], axes[-1:], norm)
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    return bind(irfft_p, _fit(z, axes, half), axes=axes, lengths=lengths, norm=norm)


def rfft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """One-dimensional discrete Fourier transform of real input, as ``numpy.fft.rfft``.

    Args:
        a: real array (a complex one is a ``TypeError``, as in NumPy).
        n: transform length; ``a`` is truncated or zero-padded along ``axis`` to it.
        axis: the axis to transform.
        norm: as :func:`fft`.

    Returns:
        The non-negative frequency terms, a complex array with length ``n // 2 + 1`` along ``axis``
        (complex64 for float32 input, else complex128).

    Raises:
        TypeError: complex input. ValueError: ``n < 1`` or an unknown ``norm``.

    Derivatives: the vjp is the real part of the full transform of the zero-padded cotangent (the
    transpose, JAX's ``_rfft_transpose``); the jvp is ``rfft`` of the tangent.
    """
    return _r2c(a, None if n is None else (n,), (axis,), norm)


def irfft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """Inverse of :func:`rfft`, as ``numpy.fft.irfft``: a real signal of length ``n`` from its
    non-negative frequency terms.

    Args:
        a: complex array of frequency terms (real input is taken as complex). Along ``axis`` it is
            truncated or zero-padded to ``n // 2 + 1`` terms.
        n: output length (default ``2 * (m - 1)`` for ``m`` input terms; pass it for odd lengths).
        axis: the axis to transform.
        norm: as :func:`ifft`.

    Returns:
        A real array (float32 for complex64 input, else float64) with length ``n`` along ``axis``.
        As in NumPy, the imaginary parts of the zero-frequency term (and, for even ``n``, of the
        Nyquist term) are ignored.

    Raises:
        ValueError: ``n < 1`` or an unknown ``norm``.

    Derivatives: the vjp is ``a_k * conj(rfft(ct))`` with the swapped norm and the Hermitian
    weights ``a_k`` (2, or 1 for the zero and Nyquist terms; JAX's ``_irfft_transpose``).
    """
    return _c2r(a, None if n is None else (n,), (axis,), norm)


def rfftn(a: ArrayLike, s: Any = None, axes: Any = None, norm: str | None = None) -> Array:
    """N-dimensional discrete Fourier transform of real input, as ``numpy.fft.rfftn``: the last of
    ``axes`` is transformed as by :func:`rfft` (halved), the others as by :func:`fft`. ``s`` and
    ``axes`` as in :func:`fftn`."""
    return _r2c(a, s, axes, norm)


def irfftn(a: ArrayLike, s: Any = None, axes: Any = None, norm: str | None = None) -> Array:
    """Inverse of :func:`rfftn`, as ``numpy.fft.irfftn``; ``s`` gives the output lengths (default:
    the input's, and ``2 * (m - 1)`` along the last of ``axes``)."""
    return _c2r(a, s, axes, norm)


def rfft2(a: ArrayLike, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Array:
    """:func:`rfftn` over two axes (the last two by default), as ``numpy.fft.rfft2``."""
    return _r2c(a, s, axes, norm)


def irfft2(a: ArrayLike, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Array:
    """:func:`irfftn` over two axes (the last two by default), as ``numpy.fft.irfft2``."""
    return _c2r(a, s, axes, norm)


# ---- Hermitian transforms ------------------------------------------------------------------------
def hfft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """The transform of a signal with Hermitian symmetry (a real spectrum), as ``numpy.fft.hfft``:
    ``irfft(conj(a), n, axis)`` with the swapped ``norm`` (NumPy's definition), so ``n`` real
    outputs from ``n // 2 + 1`` terms.

    Args:
        a: the first half of a Hermitian-symmetric signal (complex; real input is taken as complex).
        n: output length (default ``2 * (m - 1)`` for ``m`` input terms; pass it for odd lengths).
        axis: the axis to transform.
        norm: as :func:`fft` (``"backward"`` scales nothing here, as in NumPy).

    Returns:
        A real array (float32 for complex64 input, else float64) with length ``n`` along ``axis``.

    Raises:
        ValueError: ``n < 1`` or an unknown ``norm``.

    Derivatives: those of ``irfft`` and ``conj`` (``conj`` is not holomorphic: its vjp conjugates,
    JAX's convention).
    """
    return _c2r(_complex.conj(_as_complex(a)), None if n is None else (n,), (axis,), _SWAPPED_NORM[_norm(norm)])


def ihfft(a: ArrayLike, n: int | None = None, axis: Axis = -1, norm: str | None = None) -> Array:
    """The inverse of :func:`hfft`, as ``numpy.fft.ihfft``: ``conj(rfft(a, n, axis))`` with the
    swapped ``norm``; ``n // 2 + 1`` complex terms from a real signal.

    Args:
        a: real array (a complex one is a ``TypeError``, as in NumPy).
        n: transform length; ``a`` is truncated or zero-padded along ``axis`` to it.
        axis: the axis to transform.
        norm: as :func:`ifft`.

    Returns:
        A complex array (complex64 for float32 input, else complex128), ``n // 2 + 1`` long along
        ``axis``.

    Raises:
        TypeError: complex input. ValueError: ``n < 1`` or an unknown ``norm``.
    """
    return _complex.conj(_r2c(a, None if n is None else (n,), (axis,), _SWAPPED_NORM[_norm(norm)]))


# ---- sample frequencies --------------------------------------------------------------------------
def _frequencies(name, n, d, dtype, half):
    """``counts / (n * d)`` with NumPy's integer frequency counts (only the non-negative ones when
    ``half``); ``d`` may be traced (the derivative in ``d`` is ``-counts / (n * d**2)``, as in JAX)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an int, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"{name}: n must be a positive int, got {n}")
    xp = default_namespace()
    if half:
        counts = xp.arange(0, n // 2 + 1)
    else:
        counts = xp.concatenate([xp.arange(0, (n - 1) // 2 + 1), xp.arange(-(n // 2), 0)])
    if _contains_traced(d):
        out = counts * (1.0 / (as_operand(d) * n))
    else:
        out = counts * (1.0 / (n * d))  # NumPy's own arithmetic, so values and dtype are NumPy's
    return out if dtype is None else astype(out, dtype)


def fftfreq(n: int, d: float = 1.0, *, dtype: DTypeLike = None, device: Any = None) -> Array:
    """The sample frequencies of an ``n``-point :func:`fft`, as ``numpy.fft.fftfreq``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (n * d)``.

    Args:
        n: the window length (a positive int).
        d: the sample spacing; a traced ``d`` is differentiable.
        dtype: (JAX's keyword) the result's dtype; default NumPy's (float64 for a Python ``d``).
        device: accepted for the array API; the default backend's arrays are returned.

    Returns:
        ``(n,)`` frequencies in cycles per unit of ``d``.

    Raises:
        TypeError: ``n`` is not an int. ValueError: ``n < 1``.
    """
    return _frequencies("fftfreq", n, d, dtype, half=False)


def rfftfreq(n: int, d: float = 1.0, *, dtype: DTypeLike = None, device: Any = None) -> Array:
    """The sample frequencies of an ``n``-point :func:`rfft`, as ``numpy.fft.rfftfreq``:
    ``[0, 1, ..., n // 2] / (n * d)``, ``(n // 2 + 1,)`` of them. Arguments and errors as
    :func:`fftfreq`."""
    return _frequencies("rfftfreq", n, d, dtype, half=True)


# ---- shifts --------------------------------------------------------------------------------------
def _roll(x, shifts, axes):
    """``numpy.roll`` along each of ``axes``, as two slices and a concatenation (linear, with rules)."""
    shape = _shape.shape(x)
    for shift, axis in zip(shifts, axes):
        k = shift % shape[axis] if shape[axis] else 0
        if k:
            head = (slice(None),) * axis
            x = _shape.concatenate([x[head + (slice(-k, None),)], x[head + (slice(0, -k),)]], axis=axis)
    return x


def _shift_axes(x, axes):
    ndim = _shape.ndim(x)
    if axes is None:
        return tuple(range(ndim))
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    return tuple(_normalize(a, ndim) for a in axes)


def fftshift(x: ArrayLike, axes: Any = None) -> Array:
    """Move the zero-frequency term to the centre, as ``numpy.fft.fftshift``: a roll by ``n // 2``
    along each of ``axes`` (default: all). Keeps ``x``'s dtype; the derivatives are the rolls back."""
    x = as_operand(x)
    axes = _shift_axes(x, axes)
    shape = _shape.shape(x)
    return _roll(x, [shape[a] // 2 for a in axes], axes)


def ifftshift(x: ArrayLike, axes: Any = None) -> Array:
    """The inverse of :func:`fftshift` (they differ for odd lengths), as ``numpy.fft.ifftshift``."""
    x = as_operand(x)
    axes = _shift_axes(x, axes)
    shape = _shape.shape(x)
    return _roll(x, [-(shape[a] // 2) for a in axes], axes)


# np.fft.fft(x) of a traced x dispatches here; its error for a list that holds one names ours
register_numpy_functions({name: globals()[name] for name in __all__}, np.fft)
register_alternatives("numpy.fft", __name__, __all__)
