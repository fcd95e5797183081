"""tapegrad.scipy.linalg, the functions issue 15 added: values against scipy.linalg, derivatives
against finite differences to order 2 in both modes, one vmap (against a loop) and one jit check per
function, and the traps (sqrtm of a positive-definite matrix, polar, expm_frechet, lu's pivots).

Functions of decompositions whose vectors have an arbitrary sign are checked through expressions
invariant to it (``v * v``, ``u @ diag(s) @ vh``), as their docstrings advise."""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
import scipy.linalg

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsl
from _batched import per_matrix
from _specs import ModuleSpec
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.testing import check_grads


def _draw(kind, shape, rng):
    x = rng.standard_normal(shape)
    n = shape[-1] if shape else 1
    if kind == "sq":  # well conditioned, distinct pivots
        return x + n * np.eye(n)
    if kind == "spd":
        return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)
    if kind == "small":  # moderate norm, for expm
        return 0.5 * x
    if kind == "coef":  # polynomial coefficients: a leading one away from zero
        return x + 3.0 * (np.arange(shape[-1]) == 0)
    if kind == "pos":
        return np.abs(x) + 0.5
    return x


def _packed_lu_solve(trans):
    """``lu_solve`` of a matrix already packed as ``lu_factor`` packs it (its pivots: none)."""
    piv = np.arange(4, dtype=np.int32)
    return lambda L, lu, b: L.lu_solve((lu, piv), b, trans=trans)


def _eigh_gen(L, a, b):
    w, v = L.eigh(a, b)
    return w, v * v


def _svd(L, a):
    u, s, vh = L.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vh, s, u * u


F64, BOTH = (np.float64,), (np.float64, np.float32)
SQ, SQ3 = ((4, 4),), ((3, 3),)

# name, fn(module, *args), kinds, shapes, dtypes
DIFF_SPECS = [
    (ModuleSpec("solve", lambda L, a, b: L.solve(a, b), ("sq", "gen"), ((3, 3), (3, 2))), BOTH),
    (ModuleSpec("solve_vector", lambda L, a, b: L.solve(a, b), ("sq", "gen"), ((3, 3), (3,))), F64),
    (ModuleSpec("solve_sym_lower", lambda L, a, b: L.solve(a, b, assume_a="sym", lower=True), ("sq", "gen"),
                ((3, 3), (3, 2))), F64),
    (ModuleSpec("solve_pos_upper", lambda L, a, b: L.solve(a, b, assume_a="pos"), ("spd", "gen"),
                ((3, 3), (3, 2))), F64),
    (ModuleSpec("solve_transposed", lambda L, a, b: L.solve(a, b, transposed=True), ("sq", "gen"),
                ((3, 3), (3, 2))), F64),
    (ModuleSpec("inv", lambda L, a: L.inv(a), ("sq",), SQ3), BOTH),
    (ModuleSpec("det", lambda L, a: L.det(a), ("sq",), SQ3), BOTH),
    (ModuleSpec("cholesky_upper", lambda L, a: L.cholesky(a), ("spd",), SQ3), BOTH),
    (ModuleSpec("cholesky_lower", lambda L, a: L.cholesky(a, lower=True), ("spd",), SQ3), F64),
    (ModuleSpec("eigh_lower", lambda L, a: (L.eigh(a)[0], L.eigh(a)[1] ** 2), ("gen",), SQ3), F64),
    (ModuleSpec("eigh_upper_values", lambda L, a: L.eigh(a, lower=False, eigvals_only=True), ("gen",), SQ3), BOTH),
    (ModuleSpec("eigh_generalized", _eigh_gen, ("gen", "spd"), ((3, 3), (3, 3))), F64),
    (ModuleSpec("eigh_subset", lambda L, a: L.eigh(a, eigvals_only=True, subset_by_index=(1, 2)), ("gen",), SQ3),
     F64),
    (ModuleSpec("eigh_tridiagonal", lambda L, d, e: (L.eigh_tridiagonal(d, e)[0], L.eigh_tridiagonal(d, e)[1] ** 2),
                ("gen", "pos"), ((4,), (3,))), F64),
    (ModuleSpec("svd", _svd, ("gen",), ((4, 3),)), F64),
    (ModuleSpec("svd_values", lambda L, a: L.svd(a, compute_uv=False), ("gen",), ((3, 4),)), BOTH),
    (ModuleSpec("qr_full", lambda L, a: L.qr(a), ("gen",), SQ3), F64),
    (ModuleSpec("qr_economic", lambda L, a: L.qr(a, mode="economic"), ("gen",), ((4, 3),)), F64),
    (ModuleSpec("qr_r", lambda L, a: L.qr(a, mode="r")[0][..., :3, :], ("gen",), ((4, 3),)), F64),
    (ModuleSpec("qr_multiply_right", lambda L, a, c: L.qr_multiply(a, c), ("gen", "gen"), ((4, 3), (2, 4))), F64),
    (ModuleSpec("qr_multiply_left", lambda L, a, c: L.qr_multiply(a, c, mode="left"), ("gen", "gen"),
                ((4, 3), (3, 2))), F64),
    (ModuleSpec("lu", lambda L, a: L.lu(a), ("gen",), SQ), BOTH),
    (ModuleSpec("lu_permute_l", lambda L, a: L.lu(a, permute_l=True), ("gen",), SQ), F64),
    (ModuleSpec("lu_factor", lambda L, a: L.lu_factor(a)[0], ("gen",), SQ), F64),
    (ModuleSpec("lu_solve", _packed_lu_solve(0), ("sq", "gen"), ((4, 4), (4, 2))), F64),
    (ModuleSpec("lu_solve_T", _packed_lu_solve(1), ("sq", "gen"), ((4, 4), (4,))), F64),
    (ModuleSpec("expm_frechet", lambda L, a, e: L.expm_frechet(a, e), ("small", "gen"), ((3, 3), (3, 3))), BOTH),
    (ModuleSpec("solve_sylvester", lambda L, a, b, q: L.solve_sylvester(a, b, q), ("sq", "sq", "gen"),
                ((3, 3), (2, 2), (3, 2))), BOTH),
    (ModuleSpec("sqrtm_spd", lambda L, a: L.sqrtm(a), ("spd",), SQ), BOTH),
    (ModuleSpec("polar_right", lambda L, a: L.polar(a), ("gen",), ((4, 3),)), F64),
    (ModuleSpec("polar_left", lambda L, a: L.polar(a, side="left"), ("gen",), ((3, 4),)), F64),
    (ModuleSpec("toeplitz", lambda L, c, r: L.toeplitz(c, r), ("gen", "gen"), ((4,), (3,))), BOTH),
    (ModuleSpec("toeplitz_c", lambda L, c: L.toeplitz(c), ("gen",), ((3,),)), F64),
    (ModuleSpec("circulant", lambda L, c: L.circulant(c), ("gen",), ((4,),)), F64),
    (ModuleSpec("hankel", lambda L, c, r: L.hankel(c, r), ("gen", "gen"), ((3,), (4,))), F64),
    (ModuleSpec("hankel_c", lambda L, c: L.hankel(c), ("gen",), ((3,),)), F64),
    (ModuleSpec("companion", lambda L, a: L.companion(a), ("coef",), ((4,),)), BOTH),
    (ModuleSpec("leslie", lambda L, f, s: L.leslie(f, s), ("gen", "gen"), ((4,), (3,))), F64),
    (ModuleSpec("fiedler", lambda L, a: L.fiedler(a), ("gen",), ((4,),)), F64),
    (ModuleSpec("fiedler_companion", lambda L, a: L.fiedler_companion(a), ("coef",), ((6,),)), F64),
    (ModuleSpec("convolution_matrix_full", lambda L, a: L.convolution_matrix(a, 3), ("gen",), ((4,),)), F64),
    (ModuleSpec("convolution_matrix_same", lambda L, a: L.convolution_matrix(a, 5, "same"), ("gen",), ((4,),)), F64),
    (ModuleSpec("convolution_matrix_valid", lambda L, a: L.convolution_matrix(a, 2, "valid"), ("gen",), ((4,),)),
     F64),
    (ModuleSpec("block_diag", lambda L, a, b, c: L.block_diag(a, b, c), ("gen", "gen", "gen"),
                ((2, 3), (3,), ())), BOTH),
]
DIFF_CASES = [(spec, dtype) for spec, dtypes in DIFF_SPECS for dtype in dtypes]


def _args(spec, dtype, rng=None):
    rng = rng or np.random.default_rng(zlib.crc32(spec.name.encode()))
    return tuple(np.asarray(_draw(kind, shape, rng)).astype(dtype) for kind, shape in zip(spec.kinds, spec.shapes))


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


# SciPy computes these in float64 for float32 input; tapegrad keeps float32 (no rule upcasts)
KEEPS_FLOAT32 = ("det", "expm_frechet")


def _compare(out, ref, dtype, name=""):
    out_leaves, ref_leaves = tg.tree.tree_leaves(out), tg.tree.tree_leaves(tuple(ref) if isinstance(ref, tuple)
                                                                             else ref)
    assert len(out_leaves) == len(ref_leaves)
    for o, r in zip(out_leaves, ref_leaves):
        o, r = np.asarray(o), np.asarray(r)
        if name in KEEPS_FLOAT32 and dtype == np.float32:
            r = r.astype(np.float32)
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        assert_close(o, r, **_tol(dtype))


@pytest.mark.parametrize("spec,dtype", DIFF_CASES, ids=[f"{s.name}-{np.dtype(d).name}" for s, d in DIFF_CASES])
def test_values_and_derivatives(spec, dtype):
    args = _args(spec, dtype)
    _compare(spec.fn(tsl, *args), spec.fn(scipy.linalg, *args), dtype, spec.name)
    check_grads(lambda *xs: spec.fn(tsl, *xs), args, order=2, name=spec.name)


@pytest.mark.parametrize("spec", [s for s, _ in DIFF_SPECS], ids=lambda s: s.name)
def test_vmap_and_jit(spec):
    args = _args(spec, np.float64)
    fn = lambda *xs: spec.fn(tsl, *xs)  # noqa: E731
    check_vmap(fn, args, in_axes=0, slack=100.0)
    _compare(tg.jit(fn)(*args), fn(*args), np.float64)


# ---- complex input (holomorphic: JAX's conventions) -------------------------------------------------
COMPLEX_SPECS = [s for s, _ in DIFF_SPECS if s.name in (
    "solve", "solve_pos_upper", "inv", "det", "lu", "lu_solve", "expm_frechet", "solve_sylvester", "sqrtm_spd",
    "toeplitz", "toeplitz_c", "circulant", "hankel", "companion", "leslie", "convolution_matrix_full", "block_diag")]


def _complex_args(spec):
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()) + 1)
    return tuple(_draw(kind, shape, rng) + 0.3j * rng.standard_normal(shape) for kind, shape in
                 zip(spec.kinds, spec.shapes))


@pytest.mark.parametrize("spec", COMPLEX_SPECS, ids=lambda s: s.name)
def test_complex_input(spec):
    args = _complex_args(spec)
    if spec.name == "solve_pos_upper":  # Hermitian positive definite
        args = (args[0] @ args[0].conj().T + 3 * np.eye(3),) + args[1:]
    _compare(spec.fn(tsl, *args), spec.fn(scipy.linalg, *args), np.complex128, spec.name)
    check_grads(lambda *xs: spec.fn(tsl, *xs), args, order=2, name=spec.name)


# ---- values only: the Schur family, funm, the constant matrices ------------------------------------
VALUE_SPECS = [
    ModuleSpec("schur_real", lambda L, a: L.schur(a), ("gen",), SQ),
    ModuleSpec("schur_complex", lambda L, a: L.schur(a, output="complex"), ("gen",), SQ),
    ModuleSpec("rsf2csf", lambda L, a: L.rsf2csf(*scipy.linalg.schur(a)) if L is scipy.linalg else
               L.rsf2csf(*L.schur(a)), ("gen",), SQ),
    ModuleSpec("hessenberg", lambda L, a: L.hessenberg(a, calc_q=True), ("gen",), SQ),
    ModuleSpec("funm_sin", lambda L, a: L.funm(a, np.sin), ("small",), SQ),
]


@pytest.mark.parametrize("spec", VALUE_SPECS, ids=lambda s: s.name)
def test_values_only(spec):
    args = _args(spec, np.float64)
    fn = lambda *xs: spec.fn(tsl, *xs)  # noqa: E731
    _compare(fn(*args), spec.fn(scipy.linalg, *args), np.float64)
    check_vmap(fn, args, in_axes=0, slack=100.0)
    _compare(tg.jit(fn)(*args), fn(*args), np.float64)
    with pytest.raises(NotImplementedError, match="scipy.linalg"):
        tg.grad(lambda a: tnp.sum(tnp.real(tg.tree.tree_leaves(fn(a))[0])))(*args)


@pytest.mark.parametrize("name,kw", [("dft", {}), ("dft", {"scale": "sqrtn"}), ("hadamard", {}), ("helmert", {}),
                                     ("helmert", {"full": True}), ("hilbert", {}), ("invhilbert", {}),
                                     ("pascal", {"kind": "lower"}), ("invpascal", {})])
def test_constant_matrices(name, kw):
    out, ref = getattr(tsl, name)(4, **kw), getattr(scipy.linalg, name)(4, **kw)
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


# ---- the traps --------------------------------------------------------------------------------------
def test_sqrtm_derivative_solves_the_sylvester_equation():
    """d sqrtm(A)[E] is the X with S X + X S = E (JAX's rule), checked against SciPy's solver, and the
    derivative of sqrtm(A) @ sqrtm(A) is E itself."""
    rng = np.random.default_rng(7)
    a, e = _draw("spd", (4, 4), rng), rng.standard_normal((4, 4))
    s, ds = tg.jvp(tsl.sqrtm, (a,), (e,))
    assert_close(ds, scipy.linalg.solve_sylvester(s, s, e), rtol=1e-10)
    assert_close(tg.jvp(lambda a: tsl.sqrtm(a) @ tsl.sqrtm(a), (a,), (e,))[1], e, rtol=1e-10)


def test_sqrtm_of_a_real_matrix_with_a_complex_root_raises():
    with pytest.raises(np.linalg.LinAlgError, match="complex"):
        tsl.sqrtm(np.array([[-1.0, 0.0], [0.0, 1.0]]))
    assert_close(tsl.sqrtm(np.array([[-1.0, 0.0], [0.0, 1.0]], complex)), np.diag([1j, 1.0]), rtol=1e-12)


def test_expm_frechet_is_the_expm_jvp():
    rng = np.random.default_rng(8)
    a, e = 0.5 * rng.standard_normal((2, 3, 3)), rng.standard_normal((3, 3))
    value, frechet = tsl.expm_frechet(a, e)
    assert_close(value, tsl.expm(a), rtol=1e-12)
    assert_close(frechet, tg.jvp(tsl.expm, (a,), (np.broadcast_to(e, a.shape),))[1], rtol=1e-10)
    assert_close(tsl.expm_frechet(a, e, compute_expm=False), frechet, rtol=1e-12)


def test_polar_factors():
    a = _draw("gen", (4, 3), np.random.default_rng(9))
    u, p = tsl.polar(a)
    assert_close(u @ p, a, rtol=1e-12)
    assert_close(u.T @ u, np.eye(3), atol=1e-12)
    assert np.all(np.linalg.eigvalsh(p) > 0)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 4, 4)])
def test_lu_matches_scipy_in_every_output(shape):
    a = _draw("gen", shape, np.random.default_rng(10))
    for out, ref in zip(tsl.lu_factor(a), per_matrix(scipy.linalg.lu_factor, a)):
        assert np.asarray(out).dtype == ref.dtype
        assert_close(out, ref, rtol=1e-12)
    for kw in ({}, {"p_indices": True}, {"permute_l": True}):
        for out, ref in zip(tsl.lu(a, **kw), per_matrix(functools.partial(scipy.linalg.lu, **kw), a)):
            assert_close(out, ref, rtol=1e-12)


def test_lu_solve_with_pivots():
    rng = np.random.default_rng(11)
    a, b = _draw("gen", (5, 5), rng), rng.standard_normal((5, 2))
    lu, piv = scipy.linalg.lu_factor(a)
    assert np.any(piv != np.arange(5))  # the pivots do permute rows here
    for trans in (0, 1, 2):
        assert_close(tsl.lu_solve((lu, piv), b, trans=trans), scipy.linalg.lu_solve((lu, piv), b, trans=trans),
                     rtol=1e-10)
    fn = lambda a, b: tsl.lu_solve(tsl.lu_factor(a), b)  # noqa: E731  differentiable end to end
    check_grads(fn, (a, b), order=2, name="lu_solve(lu_factor)")
    assert_close(tg.grad(lambda a: tnp.sum(fn(a, b)))(a), tg.grad(lambda a: tnp.sum(np.linalg.solve(a, b)))(a),
                 rtol=1e-9)


def test_lu_derivative_needs_square_matrices():
    with pytest.raises(NotImplementedError, match="square"):
        tg.grad(lambda a: tnp.sum(tsl.lu(a)[2]))(np.ones((3, 4)) + np.eye(3, 4))


@pytest.mark.parametrize("call,error", [
    (lambda: tsl.solve(np.eye(2), np.ones(2), assume_a="weird"), ValueError),
    (lambda: tsl.qr(np.eye(2), mode="raw"), NotImplementedError),
    (lambda: tsl.qr(np.eye(2), mode="thin"), ValueError),
    (lambda: tsl.qr(np.eye(2), pivoting=True), NotImplementedError),
    (lambda: tsl.eigh(np.eye(2), type=2), NotImplementedError),
    (lambda: tsl.eigh_tridiagonal(np.ones(3), np.ones(3)), ValueError),
    (lambda: tsl.polar(np.eye(2), side="up"), ValueError),
    (lambda: tsl.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2))), ValueError),
    (lambda: tsl.lu_solve((np.eye(2), np.zeros(2, np.int32)), np.ones(3)), ValueError),
    (lambda: tsl.lu_solve((np.eye(2), np.zeros(2, np.int32)), np.ones(2), trans=3), ValueError),
    (lambda: tsl.companion(np.array([0.0, 1.0, 2.0])), ValueError),
    (lambda: tsl.companion(np.array([1.0])), ValueError),
    (lambda: tsl.leslie(np.ones(3), np.ones(3)), ValueError),
    (lambda: tsl.convolution_matrix(np.ones(3), 0), ValueError),
    (lambda: tsl.convolution_matrix(np.ones(3), 2, mode="wide"), ValueError),
    (lambda: tsl.schur(np.eye(2), output="half"), ValueError),
    (lambda: tsl.funm(np.eye(2), np.sin, disp=False), NotImplementedError),
    (lambda: tsl.expm_frechet(np.eye(2), np.eye(3)), ValueError),
])
def test_bad_input_raises(call, error):
    with pytest.raises(error):
        call()


def test_batched_special_matrices():
    """Leading axes are a batch, as SciPy 1.13+ batches ``toeplitz``, ``circulant``, ``companion``."""
    c = np.random.default_rng(12).standard_normal((2, 4)) + np.array([3.0, 0, 0, 0])
    for name in ("circulant", "companion", "toeplitz"):
        assert_close(getattr(tsl, name)(c), np.stack([getattr(scipy.linalg, name)(row) for row in c]), rtol=1e-12)
    assert_close(tsl.block_diag(np.ones((2, 1, 2)), np.eye(2)),
                 np.stack([scipy.linalg.block_diag(np.ones((1, 2)), np.eye(2))] * 2), rtol=1e-12)

