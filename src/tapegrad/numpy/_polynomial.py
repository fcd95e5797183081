"""Polynomials as coefficient arrays, highest power first (``numpy.polyval``'s convention):
``polyval``, ``polyadd``, ``polysub``, ``polymul``, ``polydiv``, ``polyder``, ``polyint``, ``poly``,
``roots``, ``polyfit`` and ``vander``.

All but ``roots`` are composites of tapegrad operations (differentiable in every mode and order,
batched and staged by their primitives). ``roots`` is one primitive: NumPy's companion-matrix
eigenvalues for the value, and the implicit-function derivative of a simple root ``r`` of ``p``,
``dr = -polyval(dp, r) / polyval(polyder(p), r)``, for both modes (it exists where the roots are
distinct).
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._typing import ArrayLike
from tapegrad.errors import ConcretizationError
from tapegrad.extend import defbatch_front, defjvp, defvjp, primitive
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._comparison import allclose
from tapegrad.numpy._convolve import convolve
from tapegrad.numpy._creation import as_operand, eye, ones_like, with_dtype, zeros, zeros_like
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy._matrices import trace
from tapegrad.numpy._reductions import cumprod
from tapegrad.numpy._reductions import sum as sum_
from tapegrad.numpy._statistics import operand


def _coefficients(p, name="p"):
    """``p`` as a 1-D array (a scalar is a constant polynomial)."""
    p = operand(p)
    if _shape.ndim(p) == 0:
        return _shape.reshape(p, (1,))
    if _shape.ndim(p) != 1:
        raise ValueError(f"{name} must be a 1-D array of coefficients, got shape {tuple(_shape.shape(p))}")
    return p


def _inexact(p):
    return p if np.dtype(p.dtype).kind in "fc" else ew.astype(p, np.float64)


# ---- evaluation and arithmetic -------------------------------------------------------------------
def polyval(p: Any, x: ArrayLike) -> Array:
    """``p[0] * x**(N-1) + ... + p[N-1]`` by Horner's scheme, as ``numpy.polyval``; ``x``'s shape, the
    promoted dtype. Differentiable in ``p`` and ``x``."""
    p = _coefficients(p)
    return _horner([p[i] for i in range(_shape.shape(p)[0])], operand(x))


def _horner(coefficients, x):
    """``((c0 x + c1) x + c2) ...``: NumPy's evaluation order, which fixes the rounding."""
    y = zeros_like(x)
    for c in coefficients:
        y = y * x + c
    return y


def _aligned(a1, a2):
    """The two coefficient arrays with the shorter one padded with leading zeros."""
    a1, a2 = _coefficients(a1, "a1"), _coefficients(a2, "a2")
    n1, n2 = _shape.shape(a1)[0], _shape.shape(a2)[0]
    if n1 < n2:
        a1 = _shape.pad(a1, (n2 - n1, 0))
    elif n2 < n1:
        a2 = _shape.pad(a2, (n1 - n2, 0))
    return a1, a2


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The sum of two polynomials, as ``numpy.polyadd``."""
    a1, a2 = _aligned(a1, a2)
    return a1 + a2


def polysub(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The difference ``a1 - a2`` of two polynomials, as ``numpy.polysub``."""
    a1, a2 = _aligned(a1, a2)
    return a1 - a2


def polymul(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The product of two polynomials (the convolution of their coefficients), as ``numpy.polymul``."""
    return convolve(_coefficients(a1, "a1"), _coefficients(a2, "a2"))


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = True) -> tuple[Array, ...]:
    """Quotient and remainder of ``u / v`` by long division, as ``numpy.polydiv``.

    Args:
        u, v: dividend and divisor (``v[0]`` nonzero).
        trim_leading_zeros: drop the remainder's leading coefficients that are 0 (to ``allclose``'s
            tolerance), as NumPy does; this needs concrete values. ``False`` (JAX's default) keeps the
            remainder at ``len(u)`` coefficients, for ``jit`` and ``vmap``.

    Returns:
        ``(q, r)``, float (or complex); differentiable in ``u`` and ``v``.

    Raises:
        ConcretizationError: ``trim_leading_zeros=True`` under ``jit``/``vmap``.
    """
    u, v = _inexact(_coefficients(u, "u")), _inexact(_coefficients(v, "v"))
    m, n = _shape.shape(u)[0] - 1, _shape.shape(v)[0] - 1
    dtype = np.result_type(u.dtype, v.dtype)
    r = u if u.dtype == dtype else ew.astype(u, dtype)
    scale = 1.0 / v[0]
    quotient = []
    for k in range(m - n + 1):
        d = scale * r[k]
        quotient.append(d)
        r = r - _shape.pad(d * v, (k, m - n - k))  # subtract d v x**(m-n-k)
    q = _shape.stack(quotient) if quotient else zeros((1,), dtype)
    while trim_leading_zeros and _shape.shape(r)[0] > 1 and _concrete(
            allclose(ew.stop_gradient(r[0]), 0, rtol=1e-14), "polydiv", "trim_leading_zeros=False"):
        r = r[1:]
    return q, r


def _concrete(flag, name, advice):
    try:
        return bool(flag)
    except ConcretizationError:
        raise ConcretizationError(f"{name}: the result's shape depends on the values, which jit/vmap do not know; "
                                  f"pass {advice}") from None


# ---- calculus ------------------------------------------------------------------------------------
def polyder(p: Any, m: int = 1) -> Array:
    """The ``m``-th derivative of the polynomial ``p``, as ``numpy.polyder``; ``p``'s dtype.

    Raises:
        ValueError: ``m < 0``.
    """
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = _coefficients(p)
    for _ in range(m):
        p = _derivative_last(p)
    return p


def _derivative_last(p):
    """``polyder`` of each polynomial along the last axis of ``p``."""
    return p[..., :-1] * np.arange(_shape.shape(p)[-1] - 1, 0, -1)


def polyint(p: Any, m: int = 1, k: int | None = None) -> Array:
    """The ``m``-th antiderivative of ``p``, with integration constants ``k`` (a scalar, or one per
    order, the first for the first integration), as ``numpy.polyint``; float. Differentiable in ``p``
    and ``k``.

    Raises:
        ValueError: ``m < 0``, or ``k`` of the wrong length.
    """
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    p = _coefficients(p)
    k = zeros((m,)) if k is None else _shape.ravel(_coefficients(k, "k"))
    if _shape.shape(k)[0] == 1 and m > 1:
        k = k[0] * np.ones(m)
    if _shape.shape(k)[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        p = _shape.concatenate([p / np.arange(_shape.shape(p)[0], 0, -1), k[i:i + 1]])
    return p


# ---- from roots and to roots ---------------------------------------------------------------------
def poly(seq_of_zeros: Any) -> Array:
    """The coefficients of the monic polynomial with the given roots, or the characteristic
    polynomial ``det(x I - A)`` of a square matrix ``A``, as ``numpy.poly``.

    Differences from NumPy: complex roots give a complex result (NumPy returns the real part when
    the roots come in conjugate pairs, a test of values that ``jit`` cannot make; JAX does as we do:
    apply ``tnp.real``). A matrix's coefficients come from the Faddeev-LeVerrier recurrence (traces
    of matrix products, exact in exact arithmetic) rather than from its eigenvalues: real for a real
    matrix, and differentiable; accurate for small matrices (its rounding error grows with the
    size).

    Returns:
        ``len(seq) + 1`` coefficients, leading 1; float (integers give float64) or complex.

    Raises:
        ValueError: input neither 1-D nor a non-empty square matrix.
    """
    seq = as_operand(seq_of_zeros)
    seq = _inexact(with_dtype(seq))
    shape = tuple(_shape.shape(seq))
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        return _characteristic(seq)
    if len(shape) > 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    seq = _shape.reshape(seq, (-1,))
    a = ones_like(seq, shape=(1,))
    for i in range(_shape.shape(seq)[0]):  # a(x) (x - z): a shifted up one power, minus z a
        a = _shape.pad(a, (0, 1)) - seq[i] * _shape.pad(a, (1, 0))
    return a


def _characteristic(a):
    """Faddeev-LeVerrier: ``M_k = A M_{k-1} + c_{k-1} I``, ``c_k = -trace(A M_k) / k``."""
    n = _shape.shape(a)[0]
    identity = eye(n, dtype=a.dtype)
    coefficients = [ones_like(a, shape=())]
    m = zeros_like(a)
    for k in range(1, n + 1):
        m = matmul(a, m) + coefficients[-1] * identity
        coefficients.append(-trace(matmul(a, m)) / k)
    return _shape.stack(coefficients)


def _roots_1d(p, xp):
    """NumPy's ``roots`` of one polynomial whose leading coefficient is nonzero, always complex: the
    eigenvalues of the companion matrix, then a zero root per trailing zero coefficient."""
    complex_dtype = np.result_type(p.dtype, np.complex64)
    n = p.shape[0]
    nonzero = xp.nonzero(p)[0]
    last = int(nonzero[-1]) if nonzero.size else n - 1
    trimmed = p[:last + 1]
    if trimmed.shape[0] > 1:
        companion = xp.diag(xp.ones(trimmed.shape[0] - 2, p.dtype), -1)
        companion[0, :] = -trimmed[1:] / trimmed[0]
        found = xp.linalg.eigvals(companion)
    else:
        found = xp.zeros(0, complex_dtype)
    return xp.concatenate([found.astype(complex_dtype), xp.zeros(n - 1 - last, complex_dtype)])


def _roots_impl(p):
    """The roots of each polynomial of the stack ``p`` (coefficients along the last axis): NumPy's
    algorithm row by row (the trailing zeros differ from row to row)."""
    xp = namespace_of(p)
    rows = p.reshape(-1, p.shape[-1])
    out = xp.stack([_roots_1d(row, xp) for row in rows]) if rows.shape[0] else None
    shape = _roots_abstract_eval(p).shape
    return out.reshape(shape) if out is not None else xp.zeros(shape, np.result_type(p.dtype, np.complex64))


def _roots_abstract_eval(p):
    return ShapedArray(tuple(p.shape[:-1]) + (p.shape[-1] - 1,), np.result_type(p.dtype, np.complex64))


def _horner_last(p, x):
    """``polyval`` of each polynomial of the stack ``p`` (last axis) at the matching points ``x``
    (``p.shape[:-1] + (k,)``)."""
    return _horner([p[..., i:i + 1] for i in range(_shape.shape(p)[-1])], x)


def _roots_vjp(ct, ans, p):
    """``ct_p[k] = -sum_i ct_i r_i**(N-1-k) / p'(r_i)``; its real part for real ``p`` (the transpose
    of the R-linear map of the jvp)."""
    weights = ct / _horner_last(_derivative_last(p), ans)
    powers = ew.power(_shape.expand_dims(ans, -1), np.arange(_shape.shape(p)[-1] - 1, -1, -1))
    ct_p = -matmul(_shape.expand_dims(weights, -2), powers)[..., 0, :]
    return ct_p if _complex.is_complex(p) else _complex.real(ct_p)


roots_p = primitive("polynomial_roots", _roots_impl, _roots_abstract_eval)
defvjp(roots_p, _roots_vjp)
defjvp(roots_p, lambda t, ans, p: -_horner_last(t, ans) / _horner_last(_derivative_last(p), ans))
defbatch_front(roots_p)


def roots(p: Any, *, strip_zeros: bool = True) -> Array:
    """The roots of the polynomial ``p`` (highest power first): the eigenvalues of its companion
    matrix, as ``numpy.roots``.

    Args:
        p: 1-D coefficients, real or complex.
        strip_zeros: drop leading zero coefficients first, as NumPy does; this needs concrete values.
            ``False`` (for ``jit`` and ``vmap``, as JAX offers) assumes ``p[0] != 0``; a zero there
            gives non-finite roots.

    Returns:
        ``len(p) - 1`` roots (after stripping), always complex (complex64 for float32 input; NumPy
        returns a real array when every root is real, a test of values, so we never do, as JAX).
        Differentiable in ``p`` where the roots are simple: ``dr = -polyval(dp, r) / p'(r)``; at a
        repeated root the derivative is infinite or nan.

    Raises:
        ValueError: ``p`` not 1-D.
        ConcretizationError: ``strip_zeros=True`` under ``jit``/``vmap``.

    The eigenvalues come from ``xp.linalg.eigvals``, which NumPy has and CuPy does not: on CuPy
    arrays the call fails with CuPy's AttributeError.
    """
    p = _inexact(_coefficients(p))
    if strip_zeros:
        try:
            nonzero = [bool(flag) for flag in ew.not_equal(ew.stop_gradient(p), 0)]
        except ConcretizationError:
            raise ConcretizationError("roots: stripping leading zeros needs p's values, which jit/vmap do not "
                                      "know; pass strip_zeros=False (with p[0] != 0)") from None
        if not any(nonzero):
            return zeros((0,), np.result_type(p.dtype, np.complex64))
        p = p[nonzero.index(True):]
    return bind(roots_p, p)


# ---- least squares and the Vandermonde matrix ----------------------------------------------------
def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """The Vandermonde matrix of ``x``: columns ``x**(N-1), ..., x, 1`` (or increasing powers), as
    ``numpy.vander``, built by running products as NumPy does. ``(len(x), N)``; integers and
    booleans give int64. Differentiable in ``x``.

    Raises:
        ValueError: ``x`` not 1-D.
    """
    x = as_operand(x)
    x = with_dtype(x)
    if _shape.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = _shape.shape(x)[0] if N is None else operator.index(N)
    dtype = np.promote_types(x.dtype, int)
    x = x if x.dtype == dtype else ew.astype(x, dtype)
    columns = [ones_like(x, shape=(_shape.shape(x)[0], min(n, 1)))]
    if n > 1:
        columns.append(cumprod(_shape.broadcast_to(_shape.expand_dims(x, 1), (_shape.shape(x)[0], n - 1)), axis=1))
    v = _shape.concatenate(columns, axis=1)
    return v if increasing else _shape.flip(v, 1)


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: Any = None, full: bool = False, w: ArrayLike = None,
            cov: bool | str = False) -> Array | tuple[Any, ...]:
    """The least-squares polynomial of degree ``deg`` through ``(x, y)``, as ``numpy.polyfit``.

    The Vandermonde matrix is weighted by ``w``, its columns scaled to unit norm (NumPy's
    conditioning), and solved with the pseudo-inverse, so the coefficients are differentiable in
    ``y``, ``x`` and ``w`` (where the fit's rank is locally constant) and the plain call stages
    under ``jit`` and batches under ``vmap``.

    Args:
        x: 1-D sample coordinates.
        y: ``(M,)`` or ``(M, K)`` values (K fits at once).
        deg: the degree.
        rcond: relative cut-off for small singular values (default ``len(x) * eps``).
        full: also return ``(residuals, rank, singular_values, rcond)`` (the rank needs concrete
            values).
        w: 1-D weights, applied to the residuals (``1/sigma``, not ``1/sigma**2``).
        cov: also return the coefficients' covariance, scaled by ``residuals / (M - deg - 1)``, or
            unscaled with ``cov="unscaled"``.

    Returns:
        ``p`` (``(deg + 1,)`` or ``(deg + 1, K)``, highest power first); with ``full``,
        ``(p, residuals, rank, singular_values, rcond)``; with ``cov``, ``(p, V)`` where ``V`` is
        ``(deg + 1, deg + 1)`` or ``(deg + 1, deg + 1, K)``.

    Raises:
        ValueError: ``deg < 0``; ``cov`` with too few points.
        TypeError: ``x`` not 1-D or empty, ``y`` not 1-D/2-D, lengths that differ, bad ``w``.
    """
    from tapegrad.numpy.linalg import inv, lstsq, pinv  # on first use, as tapegrad.numpy imports linalg
    order = operator.index(deg) + 1
    x, y = _inexact(operand(x)), _inexact(operand(y))
    _check_fit(x, y, order)
    rcond = _shape.shape(x)[0] * float(np.finfo(x.dtype).eps) if rcond is None else rcond
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = _inexact(_coefficients(w, "w"))
        if _shape.shape(w)[0] != _shape.shape(y)[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * _shape.expand_dims(w, 1)
        rhs = rhs * (_shape.expand_dims(w, 1) if _shape.ndim(rhs) == 2 else w)
    scale = ew.sqrt(sum_(lhs * lhs, axis=0))
    lhs = lhs / scale
    if not (full or cov):
        return _unscaled(matmul(pinv(lhs, rcond), rhs), scale)
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = _unscaled(c, scale)
    if full:
        return c, resids, rank, s, rcond
    covariance = inv(matmul(_shape.transpose(lhs), lhs)) / (scale[:, None] * scale[None, :])
    if cov == "unscaled":
        factor = 1.0
    elif _shape.shape(x)[0] <= order:
        raise ValueError("the number of data points must exceed order to scale the covariance matrix")
    else:
        factor = resids / (_shape.shape(x)[0] - order)
    return c, (covariance if _shape.ndim(y) == 1 else covariance[:, :, None]) * factor


def _unscaled(c, scale):
    return c / (_shape.expand_dims(scale, 1) if _shape.ndim(c) == 2 else scale)


def _check_fit(x, y, order):
    if order < 1:
        raise ValueError("expected deg >= 0")
    if _shape.ndim(x) != 1:
        raise TypeError("expected 1D vector for x")
    if _shape.shape(x)[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if _shape.ndim(y) < 1 or _shape.ndim(y) > 2:
        raise TypeError("expected 1D or 2D array for y")
    if _shape.shape(x)[0] != _shape.shape(y)[0]:
        raise TypeError("expected x and y to have same length")

