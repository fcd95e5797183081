"""Covariance and correlation matrices: ``cov`` and ``corrcoef``, composites of means, products and
sums (differentiable in the data and in the weights ``aweights``)."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, DTypeLike
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy._linalg import matmul
from tapegrad.numpy._matrices import diag
from tapegrad.numpy._reductions import sum as sum_
from tapegrad.numpy._statistics import operand


def _variables_by_rows(m, rowvar, dtype):
    """``m`` as a 2-D array with one variable per row."""
    m = operand(m)
    if _shape.ndim(m) > 2:
        raise ValueError(f"m has more than 2 dimensions (shape {tuple(_shape.shape(m))}); pass one variable "
                         "per row (or per column with rowvar=False)")
    m = m if m.dtype == dtype else ew.astype(m, dtype)
    m = _shape.reshape(m, (1, -1)) if _shape.ndim(m) < 2 else m
    return m if rowvar or _shape.shape(m)[0] == 1 else _shape.transpose(m)


def cov(m: Any, y: ArrayLike = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: ArrayLike = None, aweights: ArrayLike = None, *, dtype: DTypeLike = None) -> Array:
    """The covariance matrix of the variables in ``m`` (and ``y``), as ``numpy.cov``.

    Args:
        m: 1-D or 2-D; each row a variable, each column an observation (``rowvar=False``: the
            reverse).
        y: more variables, in ``m``'s layout.
        bias: normalise by ``N`` instead of ``N - 1``; ``ddof`` overrides both.
        fweights: integer frequency weights, one per observation (concrete NumPy integers).
        aweights: observation weights (differentiable).
        dtype: the computation's dtype; default NumPy's ``result_type(m, y, float64)``.

    Returns:
        ``(n_vars, n_vars)``, or 0-d for a single variable; differentiable in ``m``, ``y`` and
        ``aweights``.

    Raises:
        ValueError: more than 2 dimensions, ``ddof`` not an integer, weights of the wrong shape.
    """
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"ddof must be integer, got {ddof!r}")
    m = operand(m)
    if dtype is None:
        dtype = np.result_type(m.dtype, *([] if y is None else [operand(y).dtype]), np.float64)
    X = _variables_by_rows(m, rowvar, dtype)
    if y is not None:
        X = _shape.concatenate([X, _variables_by_rows(y, rowvar, dtype)], axis=0)
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    n_obs = _shape.shape(X)[1]
    w = _weights(fweights, aweights, n_obs)
    if w is None:
        avg = sum_(X, axis=1) / n_obs
        fact = n_obs - ddof
    else:
        w_sum = sum_(w)
        avg = sum_(X * w, axis=1) / w_sum
        fact = w_sum - ddof if aweights is None else w_sum - ddof * sum_(w * operand(aweights)) / w_sum
    if isinstance(fact, (int, float)) and fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    X = X - _shape.expand_dims(avg, 1)
    X_T = _shape.transpose(X if w is None else X * w)
    c = matmul(X, _complex.conj(X_T)) / fact
    return _shape.squeeze(c) if _shape.shape(c)[0] == 1 else c


def _weights(fweights, aweights, n_obs):
    """The product of the frequency and observation weights (None where neither is given)."""
    w = None
    if fweights is not None:
        fw = np.asarray(fweights)  # integer counts: concrete, as they are never differentiated
        if not np.issubdtype(fw.dtype, np.integer) or np.any(fw < 0):
            raise TypeError("fweights must be non-negative integers")
        fw = fw.astype(float)
        if fw.ndim != 1 or fw.shape[0] != n_obs:
            raise ValueError(f"fweights must be 1-D with one weight per observation ({n_obs})")
        w = fw
    if aweights is not None:
        aw = operand(aweights)
        if _shape.ndim(aw) != 1 or _shape.shape(aw)[0] != n_obs:
            raise ValueError(f"aweights must be 1-D with one weight per observation ({n_obs})")
        w = aw if w is None else w * aw
    return w


def corrcoef(x: ArrayLike, y: ArrayLike = None, rowvar: bool = True, *, dtype: DTypeLike = None) -> Array:
    """The Pearson correlation coefficients ``cov[i, j] / sqrt(cov[i, i] cov[j, j])``, as
    ``numpy.corrcoef``; the real parts are clipped to ``[-1, 1]`` (NumPy's rule; ``clip`` passes the
    gradient at the boundary, so the diagonal keeps its derivative, which is 0 analytically).

    Returns ``(n_vars, n_vars)`` (0-d for one variable, 1.0 or nan); differentiable in ``x`` and ``y``.
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if _shape.ndim(c) == 0:
        return c / c
    d = ew.sqrt(_complex.real(diag(c)))
    c = c / _shape.expand_dims(d, 1) / _shape.expand_dims(d, 0)
    if _complex.is_complex(c):
        return ew.clip(_complex.real(c), -1, 1) + _complex.imag(c) * 1j
    return ew.clip(c, -1, 1)
