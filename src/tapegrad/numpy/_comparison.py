"""Closeness and equality of arrays, and complex-or-real tests: ``isclose``, ``allclose``,
``array_equal``, ``array_equiv``, ``iscomplex``, ``isreal``, ``iscomplexobj``, ``isrealobj``,
``real_if_close``.

All are boolean (or dtype) tests: constants for every derivative transform. ``real_if_close``
returns ``real(a)`` (whose derivative is ``real``'s) or ``a`` itself.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.errors import ConcretizationError
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._creation import as_operand, with_dtype, zeros_like
from tapegrad.numpy._reductions import all as all_


def _dtype(x):
    return np.dtype(getattr(x, "dtype", None) or np.result_type(x))


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """Where ``|a - b| <= atol + rtol * |b|``, elementwise with broadcasting, as ``numpy.isclose``.

    Infinities are close only to the same infinity; nan is close to nan only with
    ``equal_nan=True``. Integers are compared as floats (NumPy's rule). Returns a boolean array of
    the broadcast shape; non-differentiable.
    """
    a, b = as_operand(a), as_operand(b)
    a, b = (with_dtype(x) for x in (a, b))
    dtype = np.result_type(a.dtype, b.dtype, 1.0)
    a, b = (x if x.dtype == dtype else ew.astype(x, dtype) for x in (a, b))
    finite = ew.logical_and(ew.isfinite(a), ew.isfinite(b))
    # where either is not finite, compare exactly (inf == inf); elsewhere the tolerance
    a_, b_ = ew.where(finite, a, 0), ew.where(finite, b, 0)  # no inf - inf warnings
    close = ew.less_equal(ew.abs(a_ - b_), atol + rtol * ew.abs(b_))
    out = ew.where(finite, close, ew.equal(a, b))
    if equal_nan:
        out = ew.logical_or(out, ew.logical_and(ew.isnan(a), ew.isnan(b)))
    return out


def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
    """Whether every element of ``a`` and ``b`` is close (:func:`isclose`), as ``numpy.allclose``: a 0-d
    boolean (NumPy returns a Python bool; ``bool(...)`` of ours is one, eagerly)."""
    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array | np.bool_:
    """Whether ``a1`` and ``a2`` have the same shape and elements, as ``numpy.array_equal``.
    ``equal_nan=True`` counts nan equal to nan. A 0-d boolean (``False`` for different shapes)."""
    a1, a2 = as_operand(a1), as_operand(a2)
    if tuple(_shape.shape(a1)) != tuple(_shape.shape(a2)):
        return np.False_
    return _all_equal(a1, a2, equal_nan)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array | np.bool_:
    """Whether ``a1`` and ``a2`` broadcast to each other and are then equal, as ``numpy.array_equiv``;
    a 0-d boolean (``False`` when their shapes do not broadcast)."""
    a1, a2 = as_operand(a1), as_operand(a2)
    try:
        np.broadcast_shapes(tuple(_shape.shape(a1)), tuple(_shape.shape(a2)))
    except ValueError:
        return np.False_
    return _all_equal(a1, a2, False)


def _all_equal(a1, a2, equal_nan):
    same = ew.equal(a1, a2)
    if equal_nan and _dtype(a1).kind in "fc" and _dtype(a2).kind in "fc":
        same = ew.logical_or(same, ew.logical_and(ew.isnan(a1), ew.isnan(a2)))
    return all_(same)


def iscomplex(x: ArrayLike) -> Array:
    """Where ``x`` has a nonzero imaginary part, as ``numpy.iscomplex``: a boolean array of ``x``'s
    shape (all False for a real dtype)."""
    x = as_operand(x)
    return ew.not_equal(_complex.imag(x), 0) if _complex.is_complex(x) else ew.astype(zeros_like(x), bool)


def isreal(x: ArrayLike) -> Array:
    """Where ``x``'s imaginary part is 0, as ``numpy.isreal``: a boolean array of ``x``'s shape."""
    return ew.logical_not(iscomplex(x))


def iscomplexobj(x: ArrayLike) -> bool:
    """Whether ``x``'s dtype is complex (whatever its values), as ``numpy.iscomplexobj``."""
    return _dtype(as_operand(x)).kind == "c"


def isrealobj(x: ArrayLike) -> bool:
    """Whether ``x``'s dtype is not complex, as ``numpy.isrealobj``."""
    return not iscomplexobj(x)


def real_if_close(a: ArrayLike, tol: Any = 100) -> Array:
    """``real(a)`` if every imaginary part of ``a`` is within ``tol`` machine epsilons of 0 (``tol`` > 1;
    ``tol <= 1`` is an absolute tolerance), else ``a``, as ``numpy.real_if_close``.

    The result's dtype depends on ``a``'s values, so ``a`` must be concrete (eager mode or under
    ``grad``/``vjp``/``jvp``).

    Raises:
        ConcretizationError: ``a`` is traced by ``jit`` or ``vmap``: use ``tnp.real(a)`` where the
            imaginary parts are known to be small.
    """
    a = as_operand(a)
    if not _complex.is_complex(a):
        return a
    if tol > 1:
        tol = float(np.finfo(_dtype(a)).eps) * tol
    small = all_(ew.less(ew.abs(ew.stop_gradient(_complex.imag(a))), tol))
    try:
        small = bool(small)
    except ConcretizationError:
        raise ConcretizationError(
            "real_if_close: whether the result is real depends on a's values, which jit/vmap do not "
            "know; call tnp.real(a) where the imaginary parts are known to be negligible") from None
    return _complex.real(a) if small else a
