"""``eigsh``: a few eigenpairs of a sparse symmetric matrix (ARPACK through SciPy, cupyx's Lanczos on
CuPy), with the derivatives of simple eigenvalues and their eigenvectors.

``eigsh`` works on the symmetric part ``(A + Aᵀ) / 2`` (on the union of the two patterns), as JAX's
``eigh`` symmetrises its input: for a symmetric ``A`` it is ``A``, and a perturbation of one stored
value of a pair ``(i, j)``, ``(j, i)`` is then a symmetric perturbation, the only kind for which
"the eigenvector of the perturbed matrix" of a symmetric solver means anything (ARPACK's Lanczos reads
a nonsymmetric matrix as if it were symmetric). The gradient with respect to a stored value is
``v_i v_j``, the same whichever half it sits in.

The eigenpairs come from ``eigsh_p``, a primitive whose impl calls the backend's ``eigsh`` on the CSC
matrix of the stored values, and whose rules, written in tapegrad operations on its results (so that
every order follows), are:

- an eigenvalue (Hellmann–Feynman): ``dλ = vᵀ dA v``, which on the pattern is
  ``Σ_e d_data[e] v[row_e] v[col_e]``;
- its unit eigenvector (Magnus, "On differentiating eigenvalues and eigenvectors", Econometric Theory
  1 (1985), Theorem 1): ``dv = -(A - λI)^+ (dA v - dλ v)``, the pseudo-inverse applied on the
  complement of ``v``. It is computed as the solution ``w`` of the bordered system
  ``[[A - λI, v], [vᵀ, 0]] [w; μ] = [-(dA v - dλ v); 0]``, which is nonsingular exactly when ``λ`` is
  simple: one sparse LU solve (:func:`~._direct.spsolve`, itself differentiable) per eigenvector.

A repeated eigenvalue has no derivative of its eigenvectors (any basis of its eigenspace is one):
the bordered system is then singular. While a derivative is being taken, two computed eigenvalues
equal to rounding raise :class:`~._factor.SingularMatrixError` (as does an exactly singular bordered
system); a repeated eigenvalue whose twin was not computed (``k`` cut between them) cannot be seen from
the ``k`` values, and nearly repeated ones give large, ill-conditioned derivatives, as the
``1 / (λ_i - λ_j)`` of the full-spectrum formula says.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad.extend import ShapedArray, bind, defbatch, defjvp, defvjp, primitive
from tapegrad.scipy.sparse.linalg._direct import spsolve
from tapegrad.scipy.sparse.linalg._factor import SingularMatrixError
from tapegrad.scipy.sparse.linalg._operands import (
    csc_matrix,
    differentiating,
    float_dtype,
    linalg_module,
    refuse_lowering,
    square_matrix,
)
from tapegrad.sparse import SparseArray, coo_array


# ---- the primitive: the backend's eigsh on concrete values -----------------------------------------
def _eigsh_impl(data, *, pattern, k, options, strict):
    xp = namespace_of(data)
    kwargs = dict(options)
    if "v0" in kwargs:  # kept as a tuple of floats in the (hashable) parameters
        kwargs["v0"] = xp.asarray(kwargs["v0"], dtype=data.dtype)
    w, V = linalg_module(data).eigsh(csc_matrix(data, pattern), k=k, **kwargs)
    order = xp.argsort(w)  # ascending, as SciPy returns them with eigenvectors
    w, V = w[order], V[:, order]
    if strict:
        _check_simple(xp, w)
    return [xp.asarray(w, dtype=data.dtype), xp.asarray(V, dtype=data.dtype)]


def _check_simple(xp, w) -> None:
    """A SingularMatrixError when two of the computed eigenvalues are equal to rounding: a derivative is
    being taken, and a repeated eigenvalue's eigenvectors have none."""
    gaps = xp.diff(w)
    scale = float(xp.max(xp.abs(w))) if w.size else 0.0
    tied = [i for i, g in enumerate(gaps.tolist()) if g <= 1e3 * np.finfo(w.dtype).eps * max(scale, 1e-300)]
    if tied:
        i = tied[0]
        raise SingularMatrixError(
            f"eigsh: eigenvalues {i} and {i + 1} are equal to rounding ({float(w[i])!r}): a repeated eigenvalue's "
            "eigenvectors are any basis of its eigenspace and have no derivative (the bordered system of the "
            "derivative is singular). Differentiate functions of the eigenvalues alone, or of the eigenspace's "
            "projector, or perturb the problem so that the eigenvalues separate")


def _eigsh_aval(data, *, pattern, k, options, strict):
    n = pattern.shape[0]
    return [ShapedArray((k,), data.dtype), ShapedArray((n, k), data.dtype)]


eigsh_p = primitive("sparse_eigsh", _eigsh_impl, _eigsh_aval, multiple_results=True)


refuse_lowering(eigsh_p, "SciPy's eigsh (ARPACK)")


def _eigsh_batch(vals, dims, **params):
    """One call per matrix of the batch."""
    data = tnp.moveaxis(vals[0], dims[0], 0)
    outs = [bind(eigsh_p, data[i], **params) for i in range(data.shape[0])]
    return [tnp.stack([o[j] for o in outs]) for j in range(2)], [0, 0]


defbatch(eigsh_p, _eigsh_batch)


# ---- the derivative -----------------------------------------------------------------------------
def _bordered(data, pattern, lam, v) -> SparseArray:
    """``[[A - λI, v], [vᵀ, 0]]`` as a sparse ``(n + 1, n + 1)`` array (static pattern, traced values):
    symmetric, and nonsingular exactly when ``λ`` is a simple eigenvalue of ``A`` with unit vector ``v``."""
    n = pattern.shape[0]
    idx, last = np.arange(n), np.full(n, n)
    rows = np.concatenate([pattern.row, idx, idx, last])
    cols = np.concatenate([pattern.col, idx, last, idx])
    values = tnp.concatenate([data, -lam * tnp.ones_like(v), v, v])
    return coo_array((values, (rows, cols)), shape=(n + 1, n + 1))


def _pseudo_solve(data, pattern, lam, v, r):
    """``(A - λI)^+ r`` for ``r`` orthogonal to ``v``: the first ``n`` entries of the bordered system's
    solution for ``[r; 0]`` (its last row keeps the result orthogonal to ``v``)."""
    n = pattern.shape[0]
    return spsolve(_bordered(data, pattern, lam, v), tnp.concatenate([r, tnp.zeros_like(r[:1])]))[:n]


def _eigsh_jvp(t, ans, data, *, pattern, k, options, strict):
    """``dλ_i = v_iᵀ dA v_i``, ``dv_i = -(A - λ_i I)^+ (dA v_i - dλ_i v_i)``, with ``dA`` of values ``t``."""
    w, V = ans
    dAV = SparseArray._make(t, pattern) @ V  # t[e] V[col_e] added at row_e
    dw = tnp.sum(V * dAV, axis=0)
    dV = tnp.stack([-_pseudo_solve(data, pattern, w[i], V[:, i], dAV[:, i] - dw[i] * V[:, i]) for i in range(k)],
                   axis=1)
    return [dw, dV]


def _eigsh_vjp(cts, ans, data, *, pattern, k, options, strict):
    """The transpose of :func:`_eigsh_jvp`: ``ct_data[e] = Σ_i (ct_λ_i v_i - y_i)[row_e] v_i[col_e]`` with
    ``y_i = (A - λ_i I)^+ ct_v_i`` projected off ``v_i`` (the bordered matrix is symmetric, so its transpose
    solve is a solve; ``y_i ⟂ v_i`` removes the ``dλ_i v_i`` term)."""
    (w, V), (ct_w, ct_V) = ans, cts
    left = V * ct_w if ct_w is not None else tnp.zeros_like(V)
    if ct_V is not None:
        Y = tnp.stack([_pseudo_solve(data, pattern, w[i], V[:, i], ct_V[:, i] - tnp.sum(ct_V[:, i] * V[:, i])
                                     * V[:, i]) for i in range(k)], axis=1)
        left = left - Y
    return tnp.sum(left[pattern.row] * V[pattern.col], axis=1)


defjvp(eigsh_p, _eigsh_jvp)
defvjp(eigsh_p, _eigsh_vjp)


def eigsh(A: Any, k: int = 6, M: Any = None, sigma: float | None = None, which: str = "LM", v0: Any = None,
          ncv: int | None = None, maxiter: int | None = None, tol: float = 0, return_eigenvectors: bool = True,
          Minv: Any = None, OPinv: Any = None, mode: str = "normal", rng: Any = None) -> Any:
    """``k`` eigenvalues (and eigenvectors) of a sparse symmetric matrix, as ``scipy.sparse.linalg.eigsh``,
    differentiable in the matrix's stored values.

    The eigenpairs are ARPACK's (SciPy's ``eigsh``; cupyx's on CuPy); their derivatives are the
    perturbation theory of simple eigenvalues (module notes): ``dλ = vᵀ dA v`` and
    ``dv = -(A - λI)^+ (dA v - dλ v)`` (one sparse LU solve of a bordered system per eigenvector), in
    both modes and every order, under ``vmap`` (one ARPACK run per matrix) and ``jit``.

    Args:
        A: an ``(n, n)`` symmetric :mod:`tapegrad.sparse` array (``data`` may be traced) or SciPy (cupyx)
            sparse array or matrix, real. Its symmetric part ``(A + Aᵀ) / 2`` is used (``A`` itself when
            ``A`` is symmetric), so derivatives are those of symmetric perturbations.
        k: how many eigenpairs (``k < n``).
        sigma: shift-invert about ``sigma`` (SciPy's mode; the eigenvalues returned are ``A``'s, and so
            are their derivatives). Constant.
        which, v0, ncv, maxiter, tol, mode: SciPy's (``v0``, a concrete starting vector, makes the run
            deterministic). ``tol=0``: machine precision, which derivatives want.
        return_eigenvectors: False returns the eigenvalues alone (and their derivative costs no solve).
        M, Minv, OPinv, rng: the generalised problem (``M``) and SciPy's operators are not supported;
            ``rng`` is passed on (SciPy's seed of ``v0``).

    Returns:
        The pair ``(w, V)``, ``w`` of shape ``(k,)`` in ascending order (SciPy's), ``V`` of shape ``(n, k)`` with
        unit columns (their signs are ARPACK's); only ``w`` without ``return_eigenvectors``, also in
        ascending order (SciPy's order then is ARPACK's, not sorted). The dtype is ``A``'s float dtype.

    Raises:
        NotImplementedError: ``M``, ``Minv`` or ``OPinv`` given.
        TypeError, ValueError: ``A`` dense, complex or not square; ``k`` not in ``[1, n)``.
        SingularMatrixError: while a derivative is being taken, two computed eigenvalues are equal to
            rounding (their eigenvectors have no derivative; module notes).
    """
    for name, value in (("M", M), ("Minv", Minv), ("OPinv", OPinv)):
        if value is not None:
            raise NotImplementedError(f"eigsh: {name} (the generalised problem / SciPy's operators) is not "
                                      "supported; reduce to a standard symmetric problem first")
    A = square_matrix(A, "eigsh")
    n = A.shape[0]
    if not 1 <= int(k) < n:
        raise ValueError(f"eigsh: k must satisfy 1 <= k < n = {n} (ARPACK's limit); got {k}")
    dtype = float_dtype(A.dtype)
    if np.dtype(A.dtype) != dtype:
        A = type(A)._make(A.data.astype(dtype), A.pattern)
    A = ((A + A.T) * 0.5).tocsc()  # its symmetric part (module notes): A itself when A is symmetric
    if v0 is not None:
        v0 = tuple(np.asarray(v0, float).ravel().tolist())  # hashable, as a static parameter must be
    options = tuple((key, value) for key, value in (
        ("sigma", sigma), ("which", which), ("v0", v0), ("ncv", ncv), ("maxiter", maxiter), ("tol", tol),
        ("mode", None if mode == "normal" else mode), ("rng", rng)) if value is not None)  # cupyx has no mode
    w, V = bind(eigsh_p, A.data, pattern=A.pattern, k=int(k), options=options, strict=differentiating())
    return (w, V) if return_eigenvectors else w

