"""tapegrad.numpy.linalg's names beyond the decompositions: eig, eigvals, cond, matrix_rank,
tensorinv, tensorsolve, svdvals, matrix_norm, vector_norm and the array API's spellings
(matrix_transpose, outer, vecdot, cross, diagonal, trace, matmul, tensordot); and complex input to
the decompositions (svd, eigh, eigvalsh, qr, cholesky, slogdet, pinv, lstsq, norm 'nuc'/2/-2).

Each spec is one expression over a module (``numpy.linalg`` or ``tapegrad.numpy.linalg``), so the
reference and the traced function are the same; values against NumPy, derivatives by check_grads to
order 2 in both modes, float64 and float32 (complex where the function takes complex), then one vmap
(against a loop) and one jit check per function. Eigenvectors of ``eig`` have an arbitrary phase, so
the specs differentiate phase-invariant functions of them (``|v|**2``, ``v_i conj(v_j)``,
``V exp(diag(w)) V^-1`` = ``expm(a)``).
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.linalg

import tapegrad as tg
import tapegrad.numpy as tnp
from _specs import ModuleSpec
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32, np.complex128, np.complex64]
REAL = {np.float64: np.float64, np.float32: np.float32, np.complex128: np.float64, np.complex64: np.float32}


def _well_separated(shape, rng, complex_):
    """A general matrix (stack) whose eigenvalues are at least 0.5 apart and whose eigenvector matrix
    is well conditioned (cond < 20): eig's derivatives are then moderate, float32 included."""
    out = np.empty(shape, np.complex128 if complex_ else np.float64)
    for idx in np.ndindex(*shape[:-2]):
        while True:
            a = rng.standard_normal(shape[-2:]) + (1j * rng.standard_normal(shape[-2:]) if complex_ else 0)
            w, v = np.linalg.eig(a)
            gaps = np.abs(w[:, None] - w[None, :]) + np.eye(len(w))
            if gaps.min() > 0.5 and np.linalg.cond(v) < 20:
                out[idx] = a
                break
    return out


def _unitary(n, rng, complex_):
    z = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if complex_ else 0)
    q, r = np.linalg.qr(z)
    return q * (np.diagonal(r) / np.abs(np.diagonal(r)))


def _from_factors(kind, shape, rng, complex_):
    """``herm``: Hermitian, eigenvalues at least 0.6 apart; ``hpd``: Hermitian positive definite;
    ``wc``: singular values spread over [1, 2.5] (well conditioned, distinct)."""
    *batch, m, n = shape
    out = np.empty(shape, np.complex128 if complex_ else np.float64)
    for idx in np.ndindex(*batch):
        if kind == "wc":
            k = min(m, n)
            s = rng.permutation(np.linspace(1.0, 2.5, k))
            out[idx] = _unitary(m, rng, complex_)[:, :k] @ np.diag(s) @ _unitary(n, rng, complex_)[:k]
        else:
            q = _unitary(n, rng, complex_)
            w = np.linspace(0.5, 2.0, n) + 0.6 * np.arange(n) - (0 if kind == "hpd" else 1.0)
            out[idx] = q @ np.diag(rng.permutation(w)) @ np.conj(q.T)
    return out


def _draw(kind, shape, dtype, rng):
    """``gen`` any values; ``eig`` distinct eigenvalues (see above); ``sq`` invertible, well
    conditioned (``random + max(m, n) I``); ``low`` rank 2; ``herm``, ``hpd``, ``wc`` see
    :func:`_from_factors`."""
    complex_ = np.dtype(dtype).kind == "c"
    if kind == "eig":
        return _well_separated(shape, rng, complex_).astype(dtype)
    if kind in ("herm", "hpd", "wc"):
        return _from_factors(kind, shape, rng, complex_).astype(dtype)
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    if kind == "sq":
        x = x + max(shape[-2:]) * np.eye(*shape[-2:])
    elif kind == "low":
        x = x[..., :2] @ rng.standard_normal(shape[:-2] + (2, shape[-1]))
    return x.astype(dtype)


def _eig(L, a):
    w, v = L.eig(a)
    return w, np.abs(v) ** 2, v[..., 0, :] * np.conj(v[..., -1, :])


def _eig_function(L, a):
    """``V exp(diag(w)) V^-1``: expm(a), a phase- and scale-invariant function of the eigenvectors."""
    w, v = L.eig(a)
    return np.swapaxes(L.solve(np.swapaxes(v, -1, -2), np.swapaxes(v * np.exp(w)[..., None, :], -1, -2)), -1, -2)


def _eigh(L, a, **kw):
    w, v = L.eigh(a, **kw)
    return w, np.abs(v) ** 2, (v * np.sin(w)[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))


def _svd(L, a):
    u, s, vh = L.svd(a, full_matrices=False)
    return np.abs(u) ** 2, s, np.abs(vh) ** 2, (u * s[..., None, :]) @ vh, u[..., :, :1] * vh[..., :1, :]


SQ = (((3, 3),), ((2, 3, 3),), ((1, 1),))
RECT = (((4, 3),), ((3, 4),), ((2, 4, 3),), ((3, 3),))
COMPLEX = DTYPES[2:]
SPECS = [  # (spec, dtypes)
    (ModuleSpec("c_eigh", _eigh, ("herm",), SQ + (((4, 4),),)), COMPLEX),
    (ModuleSpec("c_eigh_upper", lambda L, a: _eigh(L, a, UPLO="U") if L is np.linalg else
                _eigh(L, a, UPLO="U", symmetrize_input=False), ("gen",), (((3, 3),),)), COMPLEX),
    (ModuleSpec("c_eigvalsh", lambda L, a: L.eigvalsh(a), ("herm",), SQ), COMPLEX),
    (ModuleSpec("c_cholesky", lambda L, a: L.cholesky(a), ("hpd",), SQ), COMPLEX),
    (ModuleSpec("c_cholesky_upper", lambda L, a: L.cholesky(a, upper=True), ("hpd",), (((3, 3),),)), COMPLEX),
    (ModuleSpec("c_slogdet", lambda L, a: tuple(L.slogdet(a)), ("sq",), SQ), COMPLEX),
    (ModuleSpec("c_svd", _svd, ("wc",), RECT), COMPLEX),
    (ModuleSpec("c_svd_values", lambda L, a: L.svd(a, compute_uv=False), ("wc",), RECT), COMPLEX),
    (ModuleSpec("c_qr", lambda L, a: tuple(L.qr(a)), ("wc",), (((3, 3),), ((4, 3),), ((2, 5, 3),))), COMPLEX),
    (ModuleSpec("c_qr_complete", lambda L, a: tuple(L.qr(a, "complete")), ("wc",), (((3, 3),),)), COMPLEX),
    (ModuleSpec("c_pinv", lambda L, a: L.pinv(a), ("wc",), RECT), COMPLEX),
    (ModuleSpec("c_lstsq", lambda L, a, b: L.lstsq(a, b)[:2] + L.lstsq(a, b)[3:], ("wc", "gen"),
                (((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 4), (3,)))), COMPLEX),
    (ModuleSpec("c_norm", lambda L, a: (L.norm(a, "nuc"), L.norm(a, 2), L.norm(a, -2)), ("wc",),
                (((4, 3),), ((3, 4),), ((3, 3),))), COMPLEX),
    (ModuleSpec("eig", _eig, ("eig",), SQ + (((4, 4),),)), DTYPES),
    (ModuleSpec("eig_function", _eig_function, ("eig",), (((3, 3),), ((2, 3, 3),))), DTYPES),
    (ModuleSpec("eigvals", lambda L, a: L.eigvals(a), ("eig",), SQ), DTYPES),
    (ModuleSpec("cond", lambda L, a: L.cond(a), ("sq",), SQ + (((3, 4),),)), DTYPES[:2]),
    (ModuleSpec("cond_-2", lambda L, a: L.cond(a, -2), ("sq",), (((4, 3),), ((2, 3, 3),))), DTYPES[:2]),
    (ModuleSpec("cond_fro", lambda L, a: L.cond(a, "fro"), ("sq",), SQ), DTYPES),
    (ModuleSpec("cond_1", lambda L, a: L.cond(a, 1), ("sq",), (((3, 3),), ((2, 3, 3),))), DTYPES[:2]),
    (ModuleSpec("cond_-inf", lambda L, a: L.cond(a, -np.inf), ("sq",), (((3, 3),),)), DTYPES[:2]),
    (ModuleSpec("cond_nuc", lambda L, a: L.cond(a, "nuc"), ("sq",), (((3, 3),),)), DTYPES[:2]),
    (ModuleSpec("tensorinv", lambda L, a: L.tensorinv(a.reshape(2, 3, 6)[..., :6].reshape(6, 2, 3), ind=1),
                ("sq",), (((6, 6),),)), DTYPES),
    (ModuleSpec("tensorinv_2", lambda L, a: L.tensorinv(a.reshape(2, 3, 3, 2)), ("sq",), (((6, 6),),)), DTYPES),
    (ModuleSpec("tensorsolve", lambda L, a, b: L.tensorsolve(a.reshape(2, 3, 3, 2), b), ("sq", "gen"),
                (((6, 6), (2, 3)),)), DTYPES),
    (ModuleSpec("tensorsolve_axes", lambda L, a, b: L.tensorsolve(a.reshape(6, 2, 3), b, axes=(0,)),
                ("sq", "gen"), (((6, 6), (2, 3)),)), DTYPES),
    (ModuleSpec("svdvals", lambda L, a: L.svdvals(a), ("sq",), SQ + (((4, 3),), ((2, 3, 5),))), DTYPES[:2]),
    (ModuleSpec("matrix_norm", lambda L, a: L.matrix_norm(a), ("gen",), (((3, 4),), ((2, 3, 4),))), DTYPES),
    (ModuleSpec("matrix_norm_nuc_keepdims", lambda L, a: L.matrix_norm(a, ord="nuc", keepdims=True), ("sq",),
                (((3, 4),), ((2, 3, 3),))), DTYPES[:2]),
    (ModuleSpec("matrix_norm_inf", lambda L, a: L.matrix_norm(a, ord=np.inf), ("gen",), (((2, 3, 4),),)),
     DTYPES),
    (ModuleSpec("vector_norm", lambda L, a: L.vector_norm(a), ("gen",), (((3,),), ((3, 4),), ((2, 3, 4),))),
     DTYPES),
    (ModuleSpec("vector_norm_axes", lambda L, a: L.vector_norm(a, axis=(2, 0), keepdims=True, ord=3), ("gen",),
                (((2, 3, 4),),)), DTYPES),
    (ModuleSpec("vector_norm_axis", lambda L, a: L.vector_norm(a, axis=1, ord=1), ("gen",), (((2, 3, 4),),)),
     DTYPES),
    (ModuleSpec("matrix_transpose", lambda L, a: L.matrix_transpose(a), ("gen",), (((3, 4),), ((2, 3, 4),))),
     DTYPES),
    (ModuleSpec("outer", lambda L, a, b: L.outer(a, b), ("gen", "gen"), (((3,), (4,)),)), DTYPES),
    (ModuleSpec("vecdot", lambda L, a, b: L.vecdot(a, b), ("gen", "gen"), (((2, 3), (3,)), ((4, 1, 3), (2, 3)))),
     DTYPES),
    (ModuleSpec("vecdot_axis0", lambda L, a, b: L.vecdot(a, b, axis=0), ("gen", "gen"), (((3, 2), (3, 2)),)),
     DTYPES),
    (ModuleSpec("cross", lambda L, a, b: L.cross(a, b), ("gen", "gen"), (((3,), (3,)), ((2, 3), (3,)))), DTYPES),
    (ModuleSpec("cross_axis0", lambda L, a, b: L.cross(a, b, axis=0), ("gen", "gen"), (((3, 2), (3, 2)),)),
     DTYPES),
    (ModuleSpec("diagonal", lambda L, a: L.diagonal(a, offset=1), ("gen",), (((3, 4),), ((2, 4, 3),))), DTYPES),
    (ModuleSpec("trace", lambda L, a: L.trace(a, offset=-1), ("gen",), (((3, 4),), ((2, 4, 3),))), DTYPES),
    (ModuleSpec("matmul", lambda L, a, b: L.matmul(a, b), ("gen", "gen"), (((2, 3, 4), (4, 2)),)), DTYPES),
    (ModuleSpec("tensordot", lambda L, a, b: L.tensordot(a, b, axes=1), ("gen", "gen"), (((2, 3), (3, 4)),)),
     DTYPES),
]
CASES = [(spec, shapes, dtype) for spec, dtypes in SPECS for shapes in spec.shapes for dtype in dtypes]


def _args(spec, shapes, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((spec.name, shapes)).encode()))
    return tuple(_draw(kind, shape, dtype, rng) for kind, shape in zip(spec.kinds, shapes))


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-5) if np.finfo(dtype).bits <= 32 else dict(rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("spec,shapes,dtype", CASES,
                         ids=[f"{s.name}-{sh}-{np.dtype(d).name}" for s, sh, d in CASES])
def test_values_and_derivatives(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    out = spec.fn(tnp.linalg, *args)
    ref = spec.fn(np.linalg, *args)
    for o, r in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(ref)):
        assert np.shape(o) == np.shape(r), spec.name
        if not spec.name.startswith(("eig", "cond")):  # eig: always complex; cond: NumPy's own dtype rules
            assert np.result_type(o) == np.result_type(r), spec.name
        assert_close(o, r, **_tol(dtype))
    check_grads(lambda *xs: spec.fn(tnp.linalg, *xs), args, order=2, name=spec.name)


NEEDS_CONCRETE_VALUES = {"c_lstsq"}  # lstsq's rank is a Python int read from the singular values


@pytest.mark.parametrize("spec,dtypes", SPECS, ids=[s.name for s, _ in SPECS])
def test_vmap_and_jit(spec, dtypes):
    dtype = dtypes[0]
    args = _args(spec, spec.shapes[0], dtype)
    fn = lambda *xs: spec.fn(tnp.linalg, *xs)  # noqa: E731
    draw = lambda rng: tuple(_draw(k, s, dtype, rng) for k, s in zip(spec.kinds, spec.shapes[0]))  # noqa: E731
    in_axes = (0,) + (None,) * (len(args) - 1)
    if spec.name in NEEDS_CONCRETE_VALUES:
        with pytest.raises(tg.errors.ConcretizationError):
            tg.jit(fn)(*args)
        return
    check_vmap(fn, args, in_axes=in_axes, draw=draw)
    for o, r in zip(tg.tree.tree_leaves(tg.jit(fn)(*args)), tg.tree.tree_leaves(fn(*args))):
        assert_close(o, r)


# ---- eig: dtypes, the known values, the phase convention -----------------------------------------
@pytest.mark.parametrize("dtype,expected", [(np.float64, np.complex128), (np.float32, np.complex64),
                                            (np.complex64, np.complex64), (np.int64, np.complex128)])
def test_eig_is_always_complex(dtype, expected):
    a = np.array([[2, 0], [0, 3]], dtype)  # real eigenvalues: NumPy returns reals here
    w, v = tnp.linalg.eig(a)
    assert w.dtype == v.dtype == expected
    assert_close(w, [2, 3])
    assert type(tnp.linalg.eig(a)).__name__ == "EigResult" and tnp.linalg.eig(a)._fields == ("eigenvalues",
                                                                                             "eigenvectors")


def test_eig_matrix_function_is_expm_and_its_gradient_is_expm_frechets():
    a = _draw("eig", (3, 3), np.float64, np.random.default_rng(1))
    assert_close(tnp.real(_eig_function(tnp.linalg, a)), scipy.linalg.expm(a), rtol=1e-10)
    ct = np.random.default_rng(2).standard_normal((3, 3))
    grad = tg.vjp(lambda a: tnp.real(_eig_function(tnp.linalg, a)), a)[1](ct)[0]
    # <ct, dexpm(a)[e]> = <expm_frechet(a^T, ct), e>: the gradient of expm is its Frechet derivative at a^T
    assert_close(grad, scipy.linalg.expm_frechet(a.T, ct, compute_expm=False), rtol=1e-8)


def test_eig_eigenvector_derivative_keeps_unit_norm_and_adds_no_phase():
    a = _draw("eig", (4, 4), np.complex128, np.random.default_rng(3))
    t = np.random.default_rng(4).standard_normal((4, 4)) + 0j
    (w, v), (dw, dv) = tg.jvp(tnp.linalg.eig, (a,), (t,))
    inner = np.sum(np.conj(v) * dv, axis=0)  # v_k^H dv_k
    assert_close(inner, np.zeros(4), atol=1e-12)
    # the eigenvalue derivative is the left/right eigenvector formula (y^T dA x) / (y^T x)
    left = np.linalg.inv(v).T
    assert_close(dw, np.einsum("ik,ij,jk->k", left, t, v), rtol=1e-10)


def test_eig_of_a_real_matrix_has_a_real_gradient_and_conjugate_pairs():
    a = np.array([[0.0, -2.0, 0.5], [1.5, 0.3, 0.0], [0.2, 0.1, 1.0]])  # one complex-conjugate pair
    w = tnp.linalg.eigvals(a)
    assert np.sum(np.abs(w.imag) > 0.1) == 2
    g = tg.grad(lambda a: tnp.real(tnp.linalg.eigvals(a) ** 2).sum())(a)
    assert g.dtype == np.float64
    assert_close(g, 2 * a.T, rtol=1e-10)  # sum(w^2) = trace(a^2): its gradient is 2 a^T


# ---- cond and matrix_rank -----------------------------------------------------------------------
def test_cond_of_singular_matrices():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert tnp.linalg.cond(np.zeros((2, 2))) == np.inf == np.linalg.cond(np.zeros((2, 2)))
    assert np.isnan(tnp.linalg.cond(np.array([[np.nan, 0.0], [0.0, 1.0]]), "fro"))  # NaN stays NaN, as NumPy
    assert_close(tnp.linalg.cond(singular), np.linalg.cond(singular), rtol=1e-6)
    with pytest.raises(np.linalg.LinAlgError, match="singular.*p=None gives inf"):
        tnp.linalg.cond(singular, "fro")
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        tnp.linalg.cond(np.zeros((0, 0)))


RANK_CASES = [("low", (4, 5), {}), ("low", (3, 4, 4), {}), ("sq", (3, 3), {}), ("low", (4, 4), dict(tol=1e-3)),
              ("sq", (2, 3, 3), dict(rtol=0.9)), ("low", (5, 3), dict(rtol=np.array(1e-9)))]


@pytest.mark.parametrize("kind,shape,kwargs", RANK_CASES, ids=str)
def test_matrix_rank(kind, shape, kwargs):
    a = _draw(kind, shape, np.float64, np.random.default_rng(5))
    rank = tnp.linalg.matrix_rank(a, **kwargs)
    assert_close(rank, np.linalg.matrix_rank(a, **kwargs))
    assert np.asarray(rank).dtype == np.int64
    # integer-valued: no derivative flows through it; jit and vmap give the same ranks
    assert_close(tg.grad(lambda a: (a * tnp.linalg.matrix_rank(a, **kwargs)[..., None, None]).sum())(a),
                 np.broadcast_to(np.asarray(rank)[..., None, None], a.shape))
    assert_close(tg.jit(lambda a: tnp.linalg.matrix_rank(a, **kwargs))(a), rank)
    assert_close(tg.vmap(lambda a: tnp.linalg.matrix_rank(a, **kwargs))(a[None]), np.asarray(rank)[None])


def test_matrix_rank_of_vectors_and_errors():
    assert tnp.linalg.matrix_rank(np.array([0.0, 2.0])) == 1 == np.linalg.matrix_rank(np.array([0.0, 2.0]))
    assert tnp.linalg.matrix_rank(np.zeros(3)) == 0
    with pytest.raises(ValueError, match="tol or rtol, not both"):
        tnp.linalg.matrix_rank(np.eye(2), tol=1.0, rtol=1.0)


# ---- dispatch and errors ------------------------------------------------------------------------
NEW_NAMES = ["eig", "eigvals", "cond", "matrix_rank", "tensorinv", "tensorsolve", "svdvals", "matrix_norm",
             "vector_norm", "matrix_transpose", "outer", "vecdot", "cross", "diagonal", "trace", "matmul",
             "tensordot"]


def test_every_new_name_is_exported_and_dispatched_from_numpy_linalg():
    for name in NEW_NAMES:
        assert name in tnp.linalg.__all__ and callable(getattr(tnp.linalg, name))
    a = _draw("eig", (3, 3), np.float64, np.random.default_rng(6))
    expected = tg.grad(lambda a: tnp.real(tnp.linalg.eigvals(a) ** 3).sum() + tnp.linalg.cond(a))(a)
    got = tg.grad(lambda a: np.real(np.linalg.eigvals(a) ** 3).sum() + np.linalg.cond(a))(a)
    assert_close(got, expected, rtol=1e-12)
    assert_close(tg.grad(lambda a: np.linalg.vector_norm(np.linalg.matrix_transpose(a)))(a),
                 tg.grad(lambda a: tnp.linalg.vector_norm(a))(a), rtol=1e-12)


ERRORS = [
    (lambda: tnp.linalg.matrix_transpose(np.ones(3)), ValueError, "at least 2-dimensional"),
    (lambda: tnp.linalg.outer(np.ones((2, 2)), np.ones(2)), ValueError, "must be 1-D"),
    (lambda: tnp.linalg.cross(np.ones(2), np.ones(2)), ValueError, "length 3"),
    (lambda: tnp.linalg.vecdot(np.ones(2), np.ones(3)), ValueError, "must be equal"),
    (lambda: tnp.linalg.tensorinv(np.eye(4), ind=0), ValueError, "positive int"),
    (lambda: tnp.linalg.tensorinv(np.ones((2, 3))), np.linalg.LinAlgError, "square"),
    (lambda: tnp.linalg.tensorsolve(np.ones((2, 3, 2)), np.ones(2)), np.linalg.LinAlgError, "square matrix"),
    (lambda: tnp.linalg.eig(np.ones((2, 3))), np.linalg.LinAlgError, "square"),
    (lambda: tnp.linalg.cond(np.ones((2, 3)), 1), np.linalg.LinAlgError, "square"),
]


@pytest.mark.parametrize("call,exc,match", ERRORS, ids=[e[2] for e in ERRORS])
def test_errors_name_the_problem(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---- complex input: JAX's convention, checked on a closed form ----------------------------------
def test_complex_gradient_of_a_real_function_is_jaxs():
    """JAX's grad of a real f of complex z is df/dx - i df/dy (the vjp of 1): for log|det A| that is
    A^-T, and a step along its conjugate increases f at the rate |g|^2."""
    a = _draw("sq", (3, 3), np.complex128, np.random.default_rng(7))
    g = tg.grad(lambda a: tnp.linalg.slogdet(a)[1])(a)
    assert g.dtype == np.complex128
    assert_close(g, np.linalg.inv(a).T, rtol=1e-12)
    eps = 1e-6
    rate = (np.linalg.slogdet(a + eps * np.conj(g))[1] - np.linalg.slogdet(a - eps * np.conj(g))[1]) / (2 * eps)
    assert_close(rate, np.sum(np.abs(g) ** 2), rtol=1e-7)


def test_complex_cholesky_and_eigh_gradients_are_hermitian():
    a = _draw("hpd", (3, 3), np.complex128, np.random.default_rng(8))
    for fn in (lambda a: tnp.abs(tnp.linalg.cholesky(a)).sum(), lambda a: tnp.linalg.eigvalsh(a)[-1]):
        g = tg.grad(fn)(a)
        assert_close(g, np.conj(g.T), rtol=1e-12)
