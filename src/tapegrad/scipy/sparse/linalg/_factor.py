"""The sparse LU factorisation behind ``spsolve``, ``splu`` and ``factorized``, and the primitive that
solves with it.

``lu_solve_p(data, b, pattern=, trans=, strict=, options=)`` solves ``A x = b`` (``trans``: ``A^T x = b``)
for the canonical CSC matrix ``A`` of ``pattern`` holding ``data``, with the backend's ``splu``:
SciPy's SuperLU on the host, cupyx's on CuPy (which factorises on the host through SciPy and runs the
two triangular solves on the device: CuPy has no device LU of a sparse matrix). Its impl calls the
solver on the operands' own arrays, so it needs no host copy on CuPy (``tg.pure_callback`` would copy
every operand to the host and back), ``jit`` runs it with the Python executor (it declines the compiled
one), and its batch rule gives batched right-hand sides to one call as the columns of a matrix (one
factorisation, one multi-column solve) and loops over batched ``data``.

The factorisations live in a small cache keyed by the backend, the pattern, the dtype and the options,
and checked by content (the stored values compared with a copy kept beside the factors): the adjoint
of ``spsolve`` (``custom_linear_solve``'s transpose solve, ``trans=True``) finds the forward pass's
factors there, so a gradient costs one factorisation and two triangular solves. The primitive has no
derivative of its own: the solvers bind it on constants, and ``custom_linear_solve`` differentiates
the solution by the implicit function theorem.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad.extend import ShapedArray, bind, defbatch, primitive
from tapegrad.scipy.sparse.linalg._operands import csc_matrix, host_solver, linalg_module

CACHE_SIZE = 4  # factorisations kept: a batch of up to this many matrices reuses its factors in the adjoint
_cache: list = []  # (backend, pattern, dtype, options), a copy of data, the factors; the most recent last
_lock = threading.Lock()  # the cache is shared by threads (a factorisation itself runs outside the lock)
factorisations = 0  # how many factorisations this process made (a test reads it; so can a benchmark)


def _key(data, pattern, options: tuple) -> tuple:
    return (namespace_of(data).__name__, pattern, np.dtype(data.dtype).str, options)


def _lookup(key: tuple, data):
    """The cached factors of ``key`` whose stored values equal ``data`` (made the most recent), or None."""
    xp = namespace_of(data)
    with _lock:
        for k, (other, stored, lu) in enumerate(_cache):
            # the key first (a pattern compares by hash), then the values: one synchronisation on a device
            if other == key and bool(xp.array_equal(stored, data)):
                _cache.append(_cache.pop(k))
                return lu
    return None


def _store(key: tuple, data, lu) -> None:
    entry = (key, data.copy(), lu)  # a copy: the caller may write to its array afterwards
    with _lock:
        _cache.append(entry)
        del _cache[:-CACHE_SIZE]


def factor(data, pattern, options: tuple = ()):
    """The backend's SuperLU of the CSC matrix of ``pattern`` holding concrete ``data``, from the cache
    when one of equal values is there, else factorised and cached (the least recently used one goes).

    Raises:
        SingularMatrixError: the matrix is exactly singular (SuperLU found a zero pivot).
    """
    key = _key(data, pattern, options)
    lu = _lookup(key, data)
    if lu is None:
        lu = _factorise(data, pattern, options)
        _store(key, data, lu)
    return lu


class SingularMatrixError(np.linalg.LinAlgError, RuntimeError):
    """A sparse matrix is exactly singular (SuperLU met a zero pivot): a ``numpy.linalg.LinAlgError``, and
    a ``RuntimeError`` as SciPy's ``splu`` raises for it."""


def remember(data, pattern, options: tuple, lu) -> None:
    """Put the factors ``lu`` of concrete ``data`` back in the cache (``splu``'s object does before each
    solve, so that its solves find them even after other factorisations pushed them out)."""
    key = _key(data, pattern, options)
    if _lookup(key, data) is None:
        _store(key, data, lu)


def _factorise(data, pattern, options: tuple):
    global factorisations
    splu = linalg_module(data).splu
    try:
        # options: SuperLU's keywords as sorted pairs, splu's own ``options`` dict among them as pairs too
        kwargs = {k: (dict(v) if k == "options" else v) for k, v in options}
        lu = splu(csc_matrix(data, pattern), **kwargs)
    except RuntimeError as error:  # SuperLU's "Factor is exactly singular"
        raise SingularMatrixError(str(error)) from None
    factorisations += 1
    return lu


def clear_cache() -> None:
    """Drop every cached factorisation (their memory is the factors' fill-in)."""
    with _lock:
        _cache.clear()


def singular(where: str) -> str:
    return (f"{where}: the matrix is singular (SuperLU met an exactly zero pivot), so the solution and its "
            "derivative are undefined; check the assembly (an unconstrained node, a missing boundary "
            "condition), or regularise the system")


def _lu_solve_impl(data, b, *, pattern, trans, strict, options, where):
    xp = namespace_of(data, b)
    try:
        lu = factor(data, pattern, options)
    except np.linalg.LinAlgError:
        if strict:
            raise SingularMatrixError(singular(where) + " (raised because a derivative is being taken, "
                                        "where SciPy's NaN result would give a silently wrong gradient)") from None
        linalg = linalg_module(data)
        warnings.warn(linalg.MatrixRankWarning("Matrix is exactly singular") if hasattr(linalg, "MatrixRankWarning")
                      else RuntimeWarning("Matrix is exactly singular"), stacklevel=2)
        return xp.full(b.shape, np.nan, b.dtype)  # SciPy's spsolve returns NaN for a singular matrix
    return xp.asarray(lu.solve(b, trans="T" if trans else "N"), dtype=b.dtype)


def _lu_solve_aval(data, b, **params):
    return ShapedArray(tuple(b.shape), b.dtype)


lu_solve_p = primitive("sparse_lu_solve", _lu_solve_impl, _lu_solve_aval)


host_solver(lu_solve_p, "SciPy's SuperLU", "tapegrad.scipy.sparse.linalg.spsolve (or splu)")


def _lu_solve_batch(vals, dims, **params):
    """Batched ``b`` alone: its examples become columns of one right-hand side (one factorisation, one
    solve). Batched ``data``: one solve per example (each matrix its own factorisation)."""
    data, b = vals
    d_dim, b_dim = dims
    if d_dim is None:
        b = tnp.moveaxis(b, b_dim, -1)  # (n, B) or (n, k, B)
        shape = tuple(b.shape)
        x = bind(lu_solve_p, data, tnp.reshape(b, (shape[0], -1)), **params)
        return tnp.reshape(x, shape), len(shape) - 1
    data = tnp.moveaxis(data, d_dim, 0)
    b = b if b_dim is None else tnp.moveaxis(b, b_dim, 0)
    xs = [bind(lu_solve_p, data[i], b if b_dim is None else b[i], **params) for i in range(data.shape[0])]
    return tnp.stack(xs), 0


defbatch(lu_solve_p, _lu_solve_batch)


def lu_solve(data, b, pattern, *, trans: bool, strict: bool, options: tuple = (), where: str = "spsolve"):
    """``A^-1 b`` (``trans``: ``A^-T b``) for the CSC matrix of ``pattern`` holding ``data``: a bind of
    :data:`lu_solve_p` (constants only: differentiate through ``custom_linear_solve``)."""
    return bind(lu_solve_p, data, b, pattern=pattern, trans=trans, strict=strict, options=options, where=where)
