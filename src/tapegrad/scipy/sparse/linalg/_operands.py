"""What the solvers of ``tapegrad.scipy.sparse.linalg`` share: the matrix and right-hand side as
tapegrad values, the backend's SciPy module, and whether a derivative is being taken.

A matrix is a :mod:`tapegrad.sparse` array (its ``data`` possibly traced) or a SciPy (cupyx) sparse
array or matrix, converted with :func:`tapegrad.sparse.asarray`. The solvers bind their primitives on
the canonical CSC form (``A.tocsc()``, a gather of ``data`` that transforms differentiate): SuperLU
factorises CSC, and ``A.T`` of a CSC array is a CSR array with the same ``data``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of, scipy_module
from tapegrad._core import trace_stack
from tapegrad._jvp import JVPTrace
from tapegrad._tape import VJPTrace
from tapegrad.extend import NotLowerable, def_lowering, defvjp_argnum
from tapegrad.sparse import SparseArray, asarray


def square_matrix(A: Any, where: str) -> SparseArray:
    """``A`` as a canonical CSC :mod:`tapegrad.sparse` array of a float dtype, checked square.

    Raises:
        TypeError: ``A`` is not sparse (a dense array: convert it with ``tapegrad.sparse.csr_array``),
            or its dtype is complex or not a number.
        ValueError: ``A`` is not square.
    """
    if not isinstance(A, SparseArray):
        if hasattr(A, "shape") and not hasattr(A, "tocoo"):
            raise TypeError(f"{where}: A must be a sparse array (tapegrad.sparse or scipy.sparse); got a dense "
                            f"{type(A).__name__}. Wrap a dense matrix as tapegrad.sparse.csr_array(A), or use "
                            "tapegrad.numpy.linalg.solve for a dense system")
        A = asarray(A)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{where}: A must be square; got shape {A.shape}")
    dtype = np.dtype(A.dtype)
    if dtype.kind == "c" or dtype.kind not in "fiub":
        raise TypeError(f"{where}: A has dtype {dtype}; real float matrices are supported (complex ones are not "
                        "yet): cast A's data to float64 or float32")
    return A.tocsc()


def float_dtype(*dtypes) -> np.dtype:
    """The float dtype of a solve of these operands (integers promote to float64, as SciPy's do)."""
    dtype = np.result_type(*dtypes)
    return np.dtype(np.float64) if dtype.kind in "iub" else dtype


def dense_rhs(b: Any, n: int, where: str, matrix_rhs: bool, name: str = "b") -> Any:
    """``b`` as a dense tapegrad value, checked: ``(n,)``, ``(n, 1)`` or, with ``matrix_rhs``, ``(n, k)``.

    Raises:
        TypeError: ``b`` is sparse (SciPy's sparse right-hand sides are not supported: ``b.toarray()``).
        ValueError: ``b``'s first axis is not ``n`` long, or it has the wrong number of axes.
    """
    if isinstance(b, SparseArray) or hasattr(b, "tocoo"):
        raise TypeError(f"{where}: {name} must be a dense array; a sparse right-hand side is not supported, "
                        f"pass {name}.toarray()")
    if not hasattr(b, "shape"):
        b = tnp.asarray(b)
    shape = tuple(b.shape)
    allowed = "(n,) or (n, k)" if matrix_rhs else "(n,) or (n, 1)"
    if len(shape) not in (1, 2) or shape[0] != n or (not matrix_rhs and len(shape) == 2 and shape[1] != 1):
        raise ValueError(f"{where}: {name} has shape {shape}; with A of shape {(n, n)} it must be {allowed} "
                         f"with n = {n}")
    if np.dtype(b.dtype).kind == "c":
        raise TypeError(f"{where}: {name} is complex ({b.dtype}); complex systems are not supported yet")
    return b


def linalg_module(*arrays):
    """``scipy.sparse.linalg`` for host arrays, ``cupyx.scipy.sparse.linalg`` for CuPy's (and the
    device double's ``devicearrayx.scipy.sparse.linalg``), by :func:`tapegrad._backend.scipy_module`."""
    return scipy_module(namespace_of(*arrays), "sparse.linalg")


def csc_matrix(data, pattern, transpose: bool = False):
    """The backend's ``csc_matrix`` of concrete ``data`` on a canonical CSC ``pattern`` (``transpose``:
    the same arrays read as CSR, the transpose, with no copy). The ``*_matrix`` classes, which both
    SciPy and cupyx have (cupyx's solvers take ``spmatrix`` only)."""
    xp = namespace_of(data)
    sparse = scipy_module(xp, "sparse")
    # int32, SuperLU's index type; on a device copied once per pattern and kept with it
    indices = pattern.device(xp, "row int32", lambda: pattern.row.astype(np.int32))
    indptr = pattern.device(xp, "indptr int32", lambda: pattern.indptr.astype(np.int32))
    cls = sparse.csr_matrix if transpose else sparse.csc_matrix
    shape = pattern.shape[::-1] if transpose else pattern.shape
    # a batch rule's example (data[i] of a batch moved to the front) may be a strided view; SuperLU wants
    # contiguous arrays
    return cls((xp.ascontiguousarray(data), indices, indptr), shape=shape)


def differentiating() -> bool:
    """Whether a derivative transform (``grad``, ``jvp``, ``jacfwd``...) is running: then a solve that
    failed (singular, not converged) raises instead of returning SciPy's NaN or ``info``, since the
    implicit-function derivative would be computed at a wrong point without a word."""
    return any(main.trace_type in (JVPTrace, VJPTrace) for main in trace_stack())


def refuse_lowering(prim, solver: str) -> None:
    """Declare that ``prim`` has no native lowering: it calls ``solver`` on the host, which numba cannot,
    so ``jit`` runs a program holding it on the Python executor (and ``explain`` says why)."""
    def refuse(ctx, *operands, **params):
        raise NotLowerable(f"it calls {solver}, which native code cannot")
    def_lowering(prim, refuse)


def host_solver(prim, solver: str, public: str) -> None:
    """The rules of a primitive that runs ``solver`` on constants: no derivative of its own (``public``
    differentiates its solution through ``custom_linear_solve``), no native lowering."""
    def no_derivative(*args, **params):
        raise TypeError(f"{prim.name} has no derivative of its own: call {public}, whose solution is "
                        "differentiated by the adjoint method")
    prim.jvp_rule = no_derivative
    defvjp_argnum(prim, no_derivative)
    refuse_lowering(prim, solver)
