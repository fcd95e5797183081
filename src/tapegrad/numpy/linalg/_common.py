"""Helpers shared by the linalg primitives: matrix transposes, diagonals and triangle masks written
in tapegrad operations (so rules that use them differentiate again), abstract values, and batching.

Decompositions with several outputs (``eigh -> (w, v)``, ``svd -> (u, s, vh)``, ``qr``, ``slogdet``)
are primitives with ``multiple_results``: one LAPACK call serves every output, and their rules take
the list of the outputs' cotangents (zeros where the caller used an output not at all).

Batching. NumPy's linalg maps over leading (stack) axes, so under ``vmap`` the batch axis is one more
stack axis (``broadcast_batch`` with two core axes: every decomposition, ``det``, ``inv``, ``pinv``, ``expm``); a solve
against a shared matrix folds the batch into the right-hand side's columns instead
(:func:`solve_batch`). Every output keeps the operands' stack axes first, so they batch alike.
"""
from __future__ import annotations

import functools

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad.extend import broadcast_batch, defbatch, shape_of
from tapegrad.numpy import _complex, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy._creation import as_operand


def T(x):
    """The transpose of the last two axes (the matrix transpose of a stack of matrices)."""
    return _shape.swapaxes(x, -1, -2)


def conj(x):
    """The complex conjugate of ``x``; ``x`` itself when it is real (no operation recorded)."""
    return _complex.conj(x) if _complex.is_complex(x) else x


def H(x):
    """The conjugate transpose of the last two axes (``T`` for real ``x``)."""
    return T(conj(x))


def real_part(x):
    """``Re(x)`` as an array of ``x``'s own dtype (``x`` itself when it is real): for rules whose
    derivative keeps only a real part but whose output stays complex."""
    return ew.astype(_complex.real(x), x.dtype) if _complex.is_complex(x) else x


def abs2(x):
    """``|x|**2``: ``x * x``, or ``real(x * conj(x))`` for complex ``x`` (``x * x`` would be complex)."""
    if _complex.is_complex(x):
        return _complex.real(x * _complex.conj(x))
    return x * x


def matrix_operand(a, name: str, square: bool = True):
    """``a`` as an operand of at least 2 dimensions, integers promoted to float64 (as NumPy's linalg).

    Raises:
        numpy.linalg.LinAlgError: fewer than 2 dimensions, or (``square``) non-square matrices.
    """
    a = as_operand(a)
    shape = _shape.shape(a)
    if len(shape) < 2:
        raise np.linalg.LinAlgError(f"{name}: {len(shape)}-dimensional array given; "
                                    "the array must be at least two-dimensional")
    if square and shape[-1] != shape[-2]:
        raise np.linalg.LinAlgError(f"{name}: last 2 dimensions of the array must be square, got {shape}")
    return float_operand(a)


def float_operand(a):
    """Integer and boolean operands promoted to float64, as NumPy's linalg promotes them."""
    a = as_operand(a)
    if not hasattr(a, "dtype"):
        a = np.asarray(a)
    return a if np.dtype(a.dtype).kind in "fc" else ew.astype(a, np.float64)


def eye_like(x, n: int | None = None):
    """The ``n x n`` identity (default: ``x``'s last axis) with ``x``'s dtype and backend (a constant)."""
    return namespace_of(x).eye(x.shape[-1] if n is None else n, dtype=x.dtype)


def tri_like(x, k: int = 0):
    """Lower-triangle mask (ones on and below diagonal ``k``) of ``x``'s matrix shape and dtype."""
    return namespace_of(x).tri(x.shape[-2], x.shape[-1], k, dtype=x.dtype)


def tril(x, k: int = 0):
    """The lower triangle of each matrix (entries above diagonal ``k`` zeroed), differentiably."""
    return x * tri_like(x, k)


def triu(x, k: int = 0):
    """The upper triangle of each matrix (entries below diagonal ``k`` zeroed), differentiably."""
    return x * (1.0 - tri_like(x, k - 1))


def diag_embed(v):
    """``(..., n) -> (..., n, n)``: each vector on the diagonal of a matrix."""
    return _shape.expand_dims(v, -1) * eye_like(v)


def diagonal(x):
    """``(..., n, n) -> (..., n)``: the diagonal of each matrix."""
    return red.sum(x * eye_like(x), axis=-1)


def gaps_reciprocal(w):
    """``F[..., i, j] = 1 / (w_j - w_i)``: 0 on the diagonal and between equal values (the gap factor
    of the ``eig``, ``eigh`` and, with squared singular values, ``svd`` rules)."""
    return safe_reciprocal(_shape.expand_dims(w, -2) - _shape.expand_dims(w, -1))


def imaginary_diagonal(x):
    """``i Im(diag(x))`` as a diagonal matrix (zero for real ``x``): the phase terms of the complex
    ``svd`` and ``qr`` rules."""
    d = diagonal(x)
    return diag_embed(d - real_part(d))


def trace(x):
    """``(..., n, n) -> (...)``: the trace of each matrix."""
    return red.sum(diagonal(x), axis=-1)


def symmetrize(x):
    """``(x + x^H) / 2``: the symmetric (Hermitian) part, which is what symmetric-input functions
    read (JAX's ``symmetrize_input=True``)."""
    return (x + H(x)) * 0.5


def safe_reciprocal(x):
    """``1 / x`` with 0 where ``x == 0``; the "double where" keeps every derivative finite there."""
    zero = ew.equal(x, 0.0)
    return ew.where(zero, 0.0, ew.reciprocal(ew.where(zero, 1.0, x)))


# ---- abstract evaluation -------------------------------------------------------------------------
def shaped(shape, *avals) -> ShapedArray:
    """The abstract value of a linalg result: ``shape`` and the operands' promoted dtype.

    Linalg primitives state their shapes instead of using the default abstract eval (running the
    impl on zero-filled dummies), which would fail on singular or indefinite zero matrices.
    """
    return ShapedArray(tuple(shape), np.result_type(*[a.dtype for a in avals]))


def batch_of(*avals) -> tuple:
    """The broadcast leading (stack) axes of matrix operands."""
    return tuple(np.broadcast_shapes(*[tuple(a.shape[:-2]) for a in avals]))


# ---- batching ------------------------------------------------------------------------------------
def defbatch_matrices(*prims) -> None:
    """The batch rule of each of ``prims``, which map over the leading (stack) axes of matrix operands
    and broadcast them: the batch axis is one more stack axis (``broadcast_batch`` with two core axes)."""
    for prim in prims:
        defbatch(prim, functools.partial(broadcast_batch, prim, core=2))


def solve_batch(prim, vals, dims, **params):
    """The batch rule of a solve ``x = op(a)^-1 b`` (``b`` of shape ``(..., n, k)``).

    Fast path, ``a`` shared: the batch joins the columns of ``b``: the batch axis moves next to the
    column axis (``(..., n, B, k)``), which merge, and ONE solve with ``B k`` right-hand sides
    factors each matrix once, instead of ``B`` solves of ``k`` columns (a batch of vectors against
    one matrix is ``solve(a, b_batch.T)``). The output's batch axis is the one before the columns.
    ``a`` mapped: the batch is one more stack axis (``broadcast_batch``).
    """
    (a, b), (da, db) = vals, dims
    if da is not None:
        return broadcast_batch(prim, vals, dims, core=2, **params)
    b = _shape.moveaxis(b, db, -2)
    shape = shape_of(b)
    x = bind(prim, a, _shape.reshape(b, shape[:-2] + (shape[-2] * shape[-1],)), **params)
    x_shape = shape_of(x)
    return _shape.reshape(x, x_shape[:-1] + shape[-2:]), len(x_shape) - 1


def defbatch_solve(prim) -> None:
    """:func:`solve_batch` as the batch rule of ``prim``."""
    defbatch(prim, functools.partial(solve_batch, prim))
