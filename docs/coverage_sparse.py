"""The sparse rows of ``docs/coverage.md`` (``coverage_page.py`` probes them as it probes every function).

A sparse array is not an example ``coverage_page.candidates`` can guess, so each row here is an
operation written as a function of dense arrays: the stored values ``data`` of a fixed 4 x 4 pattern
(tridiagonal, symmetric positive definite where a solver needs it) and a dense operand. The page then
checks its value, vjp and jvp against finite differences in ``data`` and the dense operand, and vmap
and jit, as for every other function. Rows whose function a module lacks are left out.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

N = 4
_PATTERN = sp.csr_array(sp.diags_array([np.ones(N - 1), np.ones(N), np.ones(N - 1)], offsets=[-1, 0, 1]))
INDICES, INDPTR = _PATTERN.indices, _PATTERN.indptr
_ROWS = np.repeat(np.arange(N), np.diff(INDPTR))
# stored values: 4 on the diagonal, -1 off it, nudged so that no two are equal (a symmetric definite matrix
# with distinct eigenvalues: cg, minres and eigsh read it)
_DATA = np.where(_ROWS == INDICES, 4.0, -1.0) + 0.05 * np.abs(_ROWS - INDICES) * (_ROWS + INDICES)
_X = np.array([0.3, 0.52, 0.7, 0.45])
_XM = np.stack([_X, _X[::-1]], axis=1)  # (4, 2): two right-hand sides


def _csr(data):
    import tapegrad.sparse as tsp
    return tsp.csr_array((data, INDICES, INDPTR), shape=(N, N))


def _symmetric(data):
    """The symmetric part's stored values (the solvers for symmetric matrices read a symmetric one)."""
    return 0.5 * (data + _csr(data).T.tocsr().data)


def _sparse_rows():
    import tapegrad.sparse as tsp
    return [
        ("csr_array @ x", lambda d, x: _csr(d) @ x, lambda: (_DATA.copy(), _X.copy())),
        ("csr_array @ X (matrix)", lambda d, x: _csr(d) @ x, lambda: (_DATA.copy(), _XM.copy())),
        ("x @ csr_array", lambda d, x: x @ _csr(d), lambda: (_DATA.copy(), _X.copy())),
        ("csr_array.T @ x", lambda d, x: _csr(d).T @ x, lambda: (_DATA.copy(), _X.copy())),
        ("csc_array @ x", lambda d, x: _csr(d).tocsc() @ x, lambda: (_DATA.copy(), _X.copy())),
        ("coo_array @ x", lambda d, x: _csr(d).tocoo() @ x, lambda: (_DATA.copy(), _X.copy())),
        ("csr_array * scalar", lambda d: (_csr(d) * 2.5).data, lambda: (_DATA.copy(),)),
        ("multiply(dense)", lambda d, m: _csr(d).multiply(m).toarray(), lambda: (_DATA.copy(), np.outer(_X, _X))),
        ("A + B (union)", lambda d, e: (_csr(d) + tsp.diags(e, 2, shape=(N, N))).toarray(),
         lambda: (_DATA.copy(), _X[:2].copy())),
        ("sum()", lambda d: _csr(d).sum(), lambda: (_DATA.copy(),)),
        ("sum(axis=0)", lambda d: _csr(d).sum(axis=0), lambda: (_DATA.copy(),)),
        ("sum(axis=1)", lambda d: _csr(d).sum(axis=1), lambda: (_DATA.copy(),)),
        ("diagonal()", lambda d: _csr(d).diagonal(), lambda: (_DATA.copy(),)),
        ("toarray()", lambda d: _csr(d).toarray(), lambda: (_DATA.copy(),)),
        ("tocsc().data", lambda d: _csr(d).tocsc().data, lambda: (_DATA.copy(),)),
        ("tocoo().data", lambda d: _csr(d).tocoo().data, lambda: (_DATA.copy(),)),
        ("diags(v).toarray()", lambda v: tsp.diags(v).toarray(), lambda: (_X.copy(),)),
        ("kron(A, B).toarray()", lambda d, e: tsp.kron(_csr(d), tsp.diags(e)).toarray(),
         lambda: (_DATA.copy(), _X[:2].copy())),
    ]


def _iterative(solver, symmetric: bool):
    """``x`` of ``solver(A, b, rtol=1e-12)``, ``A`` made symmetric for a solver that needs it."""
    return lambda d, b: solver(_csr(_symmetric(d) if symmetric else d), b, rtol=1e-12)[0]


def _linalg_rows():
    from tapegrad.scipy.sparse import linalg
    rows = [
        ("spsolve", lambda d, b: linalg.spsolve(_csr(d), b), lambda: (_DATA.copy(), _X.copy())),
        ("spsolve (matrix b)", lambda d, b: linalg.spsolve(_csr(d), b), lambda: (_DATA.copy(), _XM.copy())),
        ("splu(A).solve", lambda d, b: linalg.splu(_csr(d).tocsc()).solve(b), lambda: (_DATA.copy(), _X.copy())),
        ("factorized(A)(b)", lambda d, b: linalg.factorized(_csr(d).tocsc())(b), lambda: (_DATA.copy(), _X.copy())),
    ]
    symmetric = {"cg": True, "minres": True, "gmres": False, "bicgstab": False}
    rows += [(name, _iterative(getattr(linalg, name), symmetric[name]), lambda: (_DATA.copy(), _X.copy()))
             for name in symmetric]
    if hasattr(linalg, "eigsh"):
        rows.append(("eigsh (eigenvalues)", lambda d: linalg.eigsh(_csr(_symmetric(d)), k=2)[0],
                     lambda: (_DATA.copy(),)))
    if hasattr(linalg, "expm_multiply"):
        rows.append(("expm_multiply", lambda d, b: linalg.expm_multiply(_csr(0.1 * d), b),
                     lambda: (_DATA.copy(), _X.copy())))
    return rows


def sections():
    """``[(title, [(name, fn, example)])]``: the sparse namespaces' rows."""
    return [("tapegrad.sparse", _sparse_rows()), ("tapegrad.scipy.sparse.linalg", _linalg_rows())]
