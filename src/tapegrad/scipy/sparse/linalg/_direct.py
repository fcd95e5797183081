"""``spsolve``, ``splu`` and ``factorized``: sparse direct solves differentiated by the adjoint method.

The solution of ``A x = b`` is :func:`tapegrad.custom_linear_solve` of ``matvec = lambda x: A @ x`` (a
tapegrad.sparse product, so its derivative in ``data`` lives on the pattern) with SuperLU solves as
the solvers: the forward one factorises (``_factor.lu_solve_p``), the transpose one (``trans="T"``) finds
the same factors in the cache. Reverse mode then gives ``ct_b = A^-T ct_x`` and
``ct_data[e] = -ct_b[row_e] x[col_e]``; forward mode ``dx = A^-1 (db - dA x)``; every order follows,
since each derivative is again such a solve.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._control_flow import custom_linear_solve
from tapegrad._core import Tracer
from tapegrad.scipy.sparse.linalg import _factor
from tapegrad.scipy.sparse.linalg._operands import dense_rhs, differentiating, float_dtype, square_matrix
from tapegrad.sparse import SparseArray


def _cast(A: SparseArray, b):
    """``A`` (canonical CSC) and ``b`` in their common float dtype."""
    dtype = float_dtype(A.dtype, b.dtype)
    if np.dtype(A.dtype) != dtype:
        A = type(A)._make(A.data.astype(dtype), A.pattern)
    if np.dtype(b.dtype) != dtype:
        b = tnp.asarray(b, dtype=dtype)
    return A, b


def lu_solution(A: SparseArray, b, options: tuple, trans: bool, where: str):
    """``A^-1 b`` (``trans``: ``A^-T b``) for a canonical CSC ``A`` and a dense ``b`` of ``A``'s rows (1-D,
    or 2-D with right-hand sides as columns), differentiable in ``A.data`` and ``b``.

    A solve that meets a singular matrix raises while a derivative is being taken (``strict``) and
    otherwise warns and returns NaN, as SciPy's ``spsolve`` does; the adjoint's solve always raises."""
    A, b = _cast(A, b)
    data, pattern, strict = A.data, A.pattern, differentiating()

    def solver(transposed: bool) -> Callable:
        def solve(_matvec, rhs):
            return _factor.lu_solve(data, rhs, pattern, trans=transposed != trans, strict=strict or transposed,
                                    options=options, where=where)
        return solve
    M = A.T if trans else A
    return custom_linear_solve(lambda x: M @ x, b, solver(False), solver(True))


def _options(**kwargs) -> tuple:
    """SuperLU's keyword options as a hashable, sorted tuple (a static parameter and a cache key); the
    ``options`` dict of ``splu`` flattened into it. None values are left out (SciPy's defaults)."""
    extra = kwargs.pop("options", None) or {}
    if not isinstance(extra, dict):
        raise TypeError(f"splu: options must be a dict of SuperLU options (as SciPy's); got {type(extra).__name__}")
    items = [(k, v) for k, v in kwargs.items() if v is not None]
    if extra:
        items.append(("options", tuple(sorted(extra.items()))))
    return tuple(sorted(items))


def spsolve(A: Any, b: Any, permc_spec: str | None = None, use_umfpack: bool = True) -> Any:
    """Solve the sparse linear system ``A x = b``, as ``scipy.sparse.linalg.spsolve``, differentiably.

    SuperLU (SciPy's on the host, cupyx's on CuPy) factorises ``A`` once; derivatives with respect to
    ``A``'s stored values and to ``b`` come from the adjoint method through
    :func:`tapegrad.custom_linear_solve`: reverse mode solves ``A^T`` with the same factors (a cache holds
    them), so a gradient costs one factorisation and two pairs of triangular solves; forward mode solves
    ``A dx = db - dA x`` with them. Every order of derivative, ``vmap`` (over ``b``: one solve with the
    examples as columns; over ``data``: one factorisation each) and ``jit`` (run by the Python executor)
    work.

    Args:
        A: an ``(n, n)`` :mod:`tapegrad.sparse` array (``data`` may be traced) or a SciPy (cupyx) sparse
            array or matrix; real float or integer values (integers are solved in float64).
        b: dense, ``(n,)`` or ``(n, k)`` (``k`` right-hand sides as columns); may be traced.
        permc_spec: SuperLU's column ordering: ``"COLAMD"`` (SciPy's default), ``"NATURAL"``,
            ``"MMD_ATA"`` or ``"MMD_AT_PLUS_A"``.
        use_umfpack: accepted for SciPy's signature and ignored: SuperLU is always used, so that the
            factors can be reused by the adjoint (SciPy itself uses UMFPACK only with scikit-umfpack).

    Returns:
        The solution ``x``, of dtype ``result_type(A, b)`` (float64 for integers) and shape ``(n,)`` for
        ``b`` of shape ``(n,)`` or ``(n, 1)`` (SciPy ravels the latter), ``(n, k)`` otherwise.

    Raises:
        TypeError: ``A`` dense or complex, or ``b`` sparse or complex.
        ValueError: ``A`` not square, or ``b``'s first axis not ``n``.
        SingularMatrixError: ``A`` is exactly singular while a derivative is being taken (a
            ``numpy.linalg.LinAlgError``). Without one, SciPy's behaviour: a ``MatrixRankWarning`` and a
            NaN solution.
    """
    del use_umfpack
    A = square_matrix(A, "spsolve")
    b = dense_rhs(b, A.shape[0], "spsolve", matrix_rhs=True)
    if b.ndim == 2 and b.shape[1] == 1:
        b = tnp.reshape(b, (b.shape[0],))
    return lu_solution(A, b, _options(permc_spec=permc_spec), trans=False, where="spsolve")


class SuperLU:
    """The LU factorisation of a sparse matrix, as ``scipy.sparse.linalg.SuperLU``, whose :meth:`solve`
    is differentiable in the matrix's stored values and the right-hand side.

    Made by :func:`splu`. For a concrete matrix (outside a transform) it factorises at once and holds
    SciPy's (cupyx's) factors, whose ``L``, ``U``, ``perm_r``, ``perm_c`` and ``nnz`` it shows; for a traced
    one the first solve factorises (the transforms see a solve, not the factors) and later solves of the
    same values, and their adjoints, reuse the factors from the cache.

    Attributes:
        shape: ``(n, n)``.
        L, U, perm_r, perm_c, nnz: SciPy's (concrete matrices only), with ``Pr A Pc = L U``.
    """

    def __init__(self, A: SparseArray, options: tuple):
        self._A, self._options, self.shape = A, options, A.shape
        self._lu = None
        if not isinstance(A.data, Tracer):
            self._data = _cast(A, A.data)[0].data  # the values every solve of a float rhs binds
            try:
                self._lu = _factor.factor(self._data, A.pattern, options)
            except _factor.SingularMatrixError:
                raise _factor.SingularMatrixError(_factor.singular("splu")) from None

    def _factors(self, name: str):
        if self._lu is None:
            raise TypeError(f"SuperLU.{name}: the factors of a traced matrix are not available (the transforms "
                            "see only its solves); call splu on concrete values (outside grad/jit/vmap, or of "
                            "tg.stop_gradient(A.data)) to read them")
        return self._lu

    L = property(lambda self: self._factors("L").L, doc="The unit lower triangular factor (SciPy's).")
    U = property(lambda self: self._factors("U").U, doc="The upper triangular factor (SciPy's).")
    perm_r = property(lambda self: self._factors("perm_r").perm_r, doc="The row permutation (SciPy's).")
    perm_c = property(lambda self: self._factors("perm_c").perm_c, doc="The column permutation (SciPy's).")
    nnz = property(lambda self: self._factors("nnz").nnz, doc="Stored entries of L and U (SciPy's).")

    def solve(self, rhs: Any, trans: str = "N") -> Any:
        """Solve ``A x = rhs`` (``trans="T"`` or ``"H"``: ``A^T x = rhs``; the matrix is real), as SciPy's
        ``SuperLU.solve``, differentiable in ``A``'s stored values and ``rhs`` (see :func:`spsolve`).

        Args:
            rhs: dense, ``(n,)`` or ``(n, k)``; may be traced.
            trans: ``"N"``, ``"T"`` or ``"H"``.

        Returns:
            ``x`` of ``rhs``'s shape, in the common float dtype.

        Raises:
            ValueError: ``trans`` unknown, or ``rhs``'s first axis not ``n``.
            SingularMatrixError: the matrix is singular (for a traced matrix, at the first solve).
        """
        if trans not in ("N", "T", "H"):
            raise ValueError(f"SuperLU.solve: trans must be 'N', 'T' or 'H'; got {trans!r}")
        b = dense_rhs(rhs, self.shape[0], "SuperLU.solve", matrix_rhs=True, name="rhs")
        if self._lu is not None:
            _factor.remember(self._data, self._A.pattern, self._options, self._lu)
        return lu_solution(self._A, b, self._options, trans=trans != "N", where="SuperLU.solve")

    def __repr__(self) -> str:
        state = "factorised" if self._lu is not None else "traced: factorised at its first solve"
        return f"<tapegrad SuperLU of shape {self.shape}, {state}>"


def splu(A: Any, permc_spec: str | None = None, diag_pivot_thresh: float | None = None, relax: int | None = None,
         panel_size: int | None = None, options: dict | None = None) -> SuperLU:
    """The sparse LU factorisation of ``A``, as ``scipy.sparse.linalg.splu``: an object whose ``solve`` is
    differentiable in ``A``'s stored values and the right-hand side, reusing the factors for every solve
    and every adjoint.

    Args:
        A: an ``(n, n)`` :mod:`tapegrad.sparse` array (``data`` may be traced) or SciPy sparse array/matrix.
        permc_spec, diag_pivot_thresh, relax, panel_size, options: SuperLU's, as SciPy's ``splu`` (None:
            SciPy's defaults).

    Returns:
        A :class:`SuperLU`.

    Raises:
        TypeError, ValueError: as :func:`spsolve` for ``A``.
        SingularMatrixError: a concrete ``A`` is exactly singular (also a ``RuntimeError``, which SciPy
            raises).
    """
    A = square_matrix(A, "splu")
    opts = _options(permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh, relax=relax,
                    panel_size=panel_size, options=options)
    return SuperLU(A, opts)


def factorized(A: Any) -> Callable[[Any], Any]:
    """A function that solves ``A x = b`` with ``A`` factorised once, as ``scipy.sparse.linalg.factorized``.

    Args:
        A: as :func:`splu`.

    Returns:
        A function ``solve(b) -> x``, the :meth:`SuperLU.solve` of :func:`splu` of ``A``, differentiable in
        ``A``'s stored values and ``b`` (``(n,)`` or ``(n, k)``).
    """
    lu = splu(A)

    def solve(b: Any) -> Any:
        return lu.solve(b)
    return solve
