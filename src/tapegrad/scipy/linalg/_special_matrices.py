"""SciPy's special matrices. Those built from array arguments (``toeplitz``, ``circulant``,
``hankel``, ``companion``, ``leslie``, ``fiedler``, ``fiedler_companion``, ``convolution_matrix``,
``block_diag``) gather their entries from the arguments with a constant index table, so they are
differentiable in them (the derivative of a gather: a scatter-add) and batch over leading axes, as
SciPy 1.13+ and JAX batch them. Those of an integer size (``dft``, ``hadamard``, ``helmert``,
``hilbert``, ``invhilbert``, ``pascal``, ``invpascal``) are constants: SciPy builds them.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._typing import Array, ArrayLike
from tapegrad.numpy.linalg._common import float_operand


def _gather(vals, index):
    """``(..., L)`` values, ``index`` a constant integer table ``(m, n)`` with ``-1`` for a zero
    entry: the ``(..., m, n)`` matrix ``vals[..., index]`` (zeros where ``index`` is ``-1``)."""
    zero = tnp.zeros_like(vals[..., :1])
    return tnp.concatenate([vals, zero], axis=-1)[..., np.asarray(index)]


def _vector(x):
    """``x`` as an array of at least one dimension."""
    x = tnp.asarray(x)
    return tnp.reshape(x, (1,)) if tnp.ndim(x) == 0 else x


def _check_concrete(condition, message):
    """Raise ``ValueError(message)`` where ``condition`` (a concrete array) holds anywhere; traced
    values are not checked (their values are unknown at trace time)."""
    if isinstance(condition, (np.ndarray, np.generic)) and condition.any():
        raise ValueError(message)


def toeplitz(c: ArrayLike, r: ArrayLike = None) -> Array:
    """The Toeplitz matrix with first column ``c`` and first row ``r``, as ``scipy.linalg.toeplitz``.

    Args:
        c: ``(..., m)``; r: ``(..., n)`` (``r[..., 0]`` is ignored), default ``conj(c)``. Leading axes
            are a batch (SciPy 1.17's rule).

    Returns:
        ``(..., m, n)``; differentiable in ``c`` and ``r``.
    """
    c = _vector(c)
    r = tnp.conj(c) if r is None else _vector(r)
    m, n = tnp.shape(c)[-1], tnp.shape(r)[-1]
    vals = tnp.concatenate(_broadcast_last(tnp.flip(c, -1), r[..., 1:]), axis=-1)
    return _gather(vals, m - 1 - np.arange(m)[:, None] + np.arange(n))


def _broadcast_last(*xs):
    """Arrays whose leading axes broadcast together, keeping each one's last axis."""
    batch = np.broadcast_shapes(*[tnp.shape(x)[:-1] for x in xs])
    return [tnp.broadcast_to(x, batch + tnp.shape(x)[-1:]) for x in xs]


def circulant(c: ArrayLike) -> Array:
    """The circulant matrix with first column ``c`` (``(..., n)``): ``out[..., i, j] = c[..., (i - j) % n]``,
    as ``scipy.linalg.circulant``; differentiable in ``c``."""
    c = _vector(c)
    n = tnp.shape(c)[-1]
    return _gather(c, (np.arange(n)[:, None] - np.arange(n)) % n)


def hankel(c: ArrayLike, r: ArrayLike = None) -> Array:
    """The Hankel matrix with first column ``c`` (``(..., m)``) and last row ``r`` (``(..., n)``,
    ``r[..., 0]`` ignored; default zeros), as ``scipy.linalg.hankel``: ``out[i, j] = c[i + j]`` for
    ``i + j < m``, else ``r[i + j - m + 1]``. Leading axes are a batch (where SciPy, before 1.19,
    flattens them). Differentiable in ``c`` and ``r``."""
    c = _vector(c)
    r = tnp.zeros_like(c) if r is None else _vector(r)
    m, n = tnp.shape(c)[-1], tnp.shape(r)[-1]
    vals = tnp.concatenate(_broadcast_last(c, r[..., 1:]), axis=-1)
    return _gather(vals, np.arange(m)[:, None] + np.arange(n))


def companion(a: ArrayLike) -> Array:
    """The companion matrix of the polynomial with coefficients ``a`` (``(..., n)``, highest first),
    as ``scipy.linalg.companion``: ``(..., n - 1, n - 1)``, first row ``-a[1:] / a[0]``, ones below
    the diagonal. Differentiable in ``a``.

    Raises:
        ValueError: ``n < 2``, or (concrete input) ``a[..., 0] == 0``.
    """
    a = float_operand(_vector(a))
    n = tnp.shape(a)[-1]
    if n < 2:
        raise ValueError("companion: the length of a along the last axis must be at least 2")
    _check_concrete(a[..., 0] == 0, "companion: the first coefficient(s) a[..., 0] must not be zero")
    first_row = -a[..., 1:] / a[..., :1]
    index = np.full((n - 1, n - 1), -1)
    index[0] = np.arange(n - 1)
    index[np.arange(1, n - 1), np.arange(n - 2)] = n - 1  # the appended one
    return _gather(tnp.concatenate([first_row, tnp.ones_like(a[..., :1])], axis=-1), index)


def leslie(f: Callable[..., Any], s: Any) -> Array:
    """The Leslie matrix of fecundities ``f`` (``(..., n)``) and survival rates ``s`` (``(..., n - 1)``),
    as ``scipy.linalg.leslie``: first row ``f``, ``s`` below the diagonal. Differentiable in both.

    Raises:
        ValueError: ``s`` not one shorter than ``f``, or empty.
    """
    f, s = _vector(f), _vector(s)
    n = tnp.shape(f)[-1]
    if tnp.shape(s)[-1] != n - 1 or n < 2:
        raise ValueError("leslie: the length of s along the last axis must be one less than f's, and at least 1")
    index = np.full((n, n), -1)
    index[0] = np.arange(n)
    index[np.arange(1, n), np.arange(n - 1)] = n + np.arange(n - 1)
    return _gather(tnp.concatenate(_broadcast_last(f, s), axis=-1), index)


def fiedler(a: ArrayLike) -> Array:
    """The symmetric Fiedler matrix ``|a[i] - a[j]|`` of ``a`` (``(..., n)``), as
    ``scipy.linalg.fiedler``; differentiable (``abs'(0) = 0`` on the diagonal)."""
    a = _vector(a)
    return tnp.abs(a[..., :, None] - a[..., None, :])


def _fiedler_companion_index(n):
    """Where each entry of the ``n x n`` Fiedler companion matrix comes from: ``k - 1`` for
    ``-a[k]``, ``n`` for a one, ``-1`` for a zero (SciPy's assignments, in its order)."""
    index = np.full((n, n), -1)
    index[range(3, n, 2), range(1, n - 2, 2)] = n
    index[range(2, n, 2), range(1, n - 1, 2)] = np.arange(3, n + 1, 2) - 1
    index[range(0, n - 2, 2), range(2, n, 2)] = n
    index[range(0, n - 1, 2), range(1, n, 2)] = np.arange(2, n + 1, 2) - 1
    index[[0, 1], 0] = [0, n]
    return index


def fiedler_companion(a: ArrayLike) -> Array:
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` (``(..., n + 1)``,
    highest first), as ``scipy.linalg.fiedler_companion``: ``(..., n, n)``, pentadiagonal, with the
    polynomial's roots as eigenvalues. Differentiable in ``a``.

    Raises:
        ValueError: (concrete input) a zero leading coefficient.
    """
    a = float_operand(_vector(a))
    n = tnp.shape(a)[-1] - 1
    if n < 1:
        return tnp.zeros(tnp.shape(a)[:-1] + (0,), dtype=a.dtype)
    _check_concrete(a[..., 0] == 0, "fiedler_companion: the leading coefficient must not be zero")
    vals = -a[..., 1:] / a[..., :1]
    if n == 1:
        return vals[..., None]
    return _gather(tnp.concatenate([vals, tnp.ones_like(a[..., :1])], axis=-1), _fiedler_companion_index(n))


def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Array:
    """The matrix ``A`` with ``A @ v == numpy.convolve(a, v, mode)`` for ``v`` of length ``n``, as
    ``scipy.linalg.convolution_matrix``; ``a`` ``(..., m)`` (leading axes a batch). Differentiable
    in ``a``.

    Raises:
        ValueError: ``n < 1``, an empty ``a``, or an unknown ``mode``.
    """
    n = operator.index(n)
    a = _vector(a)
    m = tnp.shape(a)[-1]
    if n <= 0 or m == 0:
        raise ValueError("convolution_matrix: n must be a positive integer and a non-empty")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")
    # row i, column j of the 'full' matrix holds a[i - j] (0 outside); 'same'/'valid' keep a band of rows
    rows = np.arange(m + n - 1)
    if mode != "full":
        trim = min(n, m) - 1
        start = trim // 2 if mode == "same" else trim
        rows = rows[start:m + n - 1 - (trim - trim // 2 if mode == "same" else trim)]
    index = rows[:, None] - np.arange(n)
    return _gather(a, np.where((index >= 0) & (index < m), index, -1))


def block_diag(*arrs: Any) -> Array:
    """The block-diagonal matrix of ``arrs``, as ``scipy.linalg.block_diag``.

    Args:
        *arrs: arrays of at most 2 dimensions (a scalar is ``1 x 1``, a vector ``1 x n``), or
            stacks ``(..., r, c)`` whose leading axes broadcast (SciPy 1.16's rule).

    Returns:
        ``(..., sum r, sum c)`` in the promoted dtype; differentiable in every block.
    """
    arrs = [tnp.asarray(a) for a in (arrs or ([],))]
    arrs = [tnp.reshape(a, (1,) * (2 - tnp.ndim(a)) + tnp.shape(a)) if tnp.ndim(a) < 2 else a for a in arrs]
    dtype = np.result_type(*[a.dtype for a in arrs])
    batch = np.broadcast_shapes(*[tnp.shape(a)[:-2] for a in arrs])
    total = sum(tnp.shape(a)[-1] for a in arrs)
    rows, before = [], 0
    for a in arrs:
        width = tnp.shape(a)[-1]
        padding = [(0, 0)] * (len(batch) + 1) + [(before, total - before - width)]
        rows.append(tnp.pad(tnp.broadcast_to(tnp.astype(a, dtype), batch + tnp.shape(a)[-2:]), padding))
        before += width
    return tnp.concatenate(rows, axis=-2)


# ---- constants of an integer size: SciPy's own -----------------------------------------------------
def _scipy():
    import scipy.linalg  # optional dependency (the `dev` extra): only these constructors need it
    return scipy.linalg


def dft(n: int, scale: ArrayLike = None) -> Array:
    """The ``n x n`` discrete Fourier transform matrix (complex128), as ``scipy.linalg.dft``; a constant."""
    return _scipy().dft(operator.index(n), scale=scale)


def hadamard(n: int, dtype: Any = int) -> Array:
    """The ``n x n`` Hadamard matrix (``n`` a power of 2), as ``scipy.linalg.hadamard``; a constant."""
    return _scipy().hadamard(operator.index(n), dtype=dtype)


def helmert(n: int, full: bool = False) -> Array:
    """The Helmert matrix of order ``n``, as ``scipy.linalg.helmert``; a constant."""
    return _scipy().helmert(operator.index(n), full=full)


def hilbert(n: int) -> Array:
    """The ``n x n`` Hilbert matrix ``1 / (i + j + 1)``, as ``scipy.linalg.hilbert``; a constant."""
    return _scipy().hilbert(operator.index(n))


def invhilbert(n: int, exact: bool = False) -> Array:
    """The inverse of the ``n x n`` Hilbert matrix, as ``scipy.linalg.invhilbert``; a constant."""
    return _scipy().invhilbert(operator.index(n), exact=exact)


def pascal(n: int, kind: str = "symmetric", exact: bool = True) -> Array:
    """The ``n x n`` Pascal matrix, as ``scipy.linalg.pascal``; a constant."""
    return _scipy().pascal(operator.index(n), kind=kind, exact=exact)


def invpascal(n: int, kind: str = "symmetric", exact: bool = True) -> Array:
    """The inverse of the ``n x n`` Pascal matrix, as ``scipy.linalg.invpascal``; a constant."""
    return _scipy().invpascal(operator.index(n), kind=kind, exact=exact)
