"""tapegrad.numpy.linalg: every function crossed with shapes (stacked too) and dtypes, values checked
against numpy.linalg and derivatives against finite differences to order 2 in both modes.

Each spec is written once against a module (``numpy.linalg`` or ``tapegrad.numpy.linalg``), so the
reference and the traced function are the same expression. Functions of eigenvectors and singular
vectors are gauge invariant (``v * v``, ``u @ diag(f(s)) @ vh``): the vectors' signs are arbitrary.
Test matrices are well conditioned (``random + n I``, ``B B^T + n I``, or built from orthogonal
factors with spread-out eigen/singular values), so float32 passes check_grads' float32 tolerances
(rtol = atol = 1e-2, eps = 1e-3) unless a spec says otherwise.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _specs import ModuleSpec
from _tol import assert_close
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]


def _orthogonal(n, rng):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diagonal(r))


def _draw(kind: str, shape, rng):
    """Test data: ``gen`` any values; ``sq`` invertible; ``spd`` symmetric positive definite;
    ``sym`` symmetric with eigenvalues at least 0.6 apart; ``wc`` any shape, singular values
    spread over [1, 2.5] (well conditioned, distinct)."""
    if kind == "gen":
        return rng.standard_normal(shape)
    *batch, m, n = shape
    out = np.empty(shape)
    for idx in np.ndindex(*batch):
        if kind == "sq":
            out[idx] = rng.standard_normal((m, n)) + n * np.eye(n)
        elif kind == "spd":
            b = rng.standard_normal((n, n))
            out[idx] = b @ b.T + n * np.eye(n)
        elif kind == "sym":
            q = _orthogonal(n, rng)
            out[idx] = q @ np.diag(rng.permutation(np.linspace(-1.5, 1.5, n) + 0.6 * np.arange(n))) @ q.T
        elif kind == "wc":
            k = min(m, n)
            s = rng.permutation(np.linspace(1.0, 2.5, k))
            out[idx] = _orthogonal(m, rng)[:, :k] @ np.diag(s) @ _orthogonal(n, rng)[:k]
        else:
            raise ValueError(kind)
    return out


def _eigh(L, a):
    w, v = L.eigh(a)
    return w, v * v


def _eigh_function(L, a):
    """``V diag(sin w) V^T``, a matrix function: gauge invariant and non-linear in the eigenvalues
    (NumPy's functions on traced values dispatch to tapegrad.numpy)."""
    w, v = L.eigh(a)
    return (v * np.sin(w)[..., None, :]) @ np.swapaxes(v, -1, -2)


def _svd(full_matrices):
    def fn(L, a):
        u, s, vh = L.svd(a, full_matrices=full_matrices)
        return u * u, s, vh * vh, (u * s[..., None, :]) @ vh
    return fn


def _qr(mode):
    def fn(L, a):
        return tuple(L.qr(a, mode)) if mode != "r" else L.qr(a, mode)
    return fn


SQ = ((3, 3), (2, 3, 3), (1, 1))
RECT = ((4, 3), (3, 4), (2, 4, 3), (2, 3, 5))
TALL = ((4, 3), (3, 3), (2, 5, 3))

SPECS = [
    ModuleSpec("solve", lambda L, a, b: L.solve(a, b), ("sq", "gen"),
               (((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 2)), ((3, 3), (3,)), ((2, 3, 3), (3,)), ((3, 3), (2, 3, 1)),
                ((2, 1, 3, 3), (4, 3, 2)))),
    ModuleSpec("inv", lambda L, a: L.inv(a), ("sq",), tuple((s,) for s in SQ)),
    ModuleSpec("det", lambda L, a: L.det(a), ("sq",), tuple((s,) for s in SQ)),
    ModuleSpec("slogdet", lambda L, a: tuple(L.slogdet(a)), ("sq",), tuple((s,) for s in SQ)),
    ModuleSpec("slogdet_negative", lambda L, a: tuple(L.slogdet(-a)), ("sq",), (((3, 3),),)),
    ModuleSpec("pinv", lambda L, a: L.pinv(a), ("wc",), tuple((s,) for s in RECT)),
    ModuleSpec("cholesky", lambda L, a: L.cholesky(a), ("spd",), tuple((s,) for s in SQ)),
    ModuleSpec("cholesky_upper", lambda L, a: L.cholesky(a, upper=True), ("spd",), (((3, 3),), ((2, 3, 3),))),
    ModuleSpec("eigh", _eigh, ("sym",), tuple((s,) for s in SQ) + (((4, 4),),)),
    ModuleSpec("eigh_function", _eigh_function, ("sym",), (((3, 3),), ((2, 4, 4),))),
    ModuleSpec("eigh_upper", lambda L, a: _eigh(L, a) if L is np.linalg else
               (lambda w, v: (w, v * v))(*L.eigh(a, "U", symmetrize_input=False)), ("sym",), (((3, 3),),)),
    ModuleSpec("eigvalsh", lambda L, a: L.eigvalsh(a), ("sym",), tuple((s,) for s in SQ)),
    ModuleSpec("svd_reduced", _svd(False), ("wc",), tuple((s,) for s in RECT + ((3, 3), (1, 1)))),
    ModuleSpec("svd_full_square", _svd(True), ("wc",), (((3, 3),), ((2, 4, 4),))),
    ModuleSpec("svd_values", lambda L, a: L.svd(a, compute_uv=False), ("wc",), tuple((s,) for s in RECT)),
    ModuleSpec("qr", _qr("reduced"), ("wc",), tuple((s,) for s in TALL)),
    ModuleSpec("qr_complete_square", _qr("complete"), ("wc",), (((3, 3),),)),
    ModuleSpec("qr_r", _qr("r"), ("wc",), (((4, 3),), ((2, 3, 3),))),
    ModuleSpec("lstsq", lambda L, a, b: L.lstsq(a, b)[:2] + L.lstsq(a, b)[3:], ("wc", "gen"),
               (((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 3), (3, 2)), ((3, 4), (3,)))),
    ModuleSpec("matrix_power_3", lambda L, a: L.matrix_power(a, 3), ("gen",), tuple((s,) for s in SQ)),
    ModuleSpec("matrix_power_1", lambda L, a: L.matrix_power(a, 1), ("gen",), (((3, 3),),)),
    ModuleSpec("matrix_power_-2", lambda L, a: L.matrix_power(a, -2), ("sq",), (((3, 3),), ((2, 3, 3),))),
    ModuleSpec("multi_dot", lambda L, *xs: L.multi_dot(xs), ("gen", "gen", "gen", "gen"),
               (((4,), (4, 5), (5, 2), (2,)), ((3, 4), (4, 5), (5, 2), (2, 6)), ((4, 1), (1, 5), (5, 2), (2, 3)))),
    ModuleSpec("multi_dot_3", lambda L, *xs: L.multi_dot(xs), ("gen", "gen", "gen"),
               (((2, 4), (4, 5), (5,)),)),
]
CASES = [(spec, shapes) for spec in SPECS for shapes in spec.shapes]


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec,shapes", CASES, ids=[f"{s.name}-{sh}" for s, sh in CASES])
def test_linalg(spec, shapes, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((spec.name, shapes)).encode()))
    args = tuple(_draw(kind, shape, rng).astype(dtype) for kind, shape in zip(spec.kinds, shapes))
    out = spec.fn(tnp.linalg, *args)
    ref = spec.fn(np.linalg, *args)
    for o, r in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(ref)):
        assert np.shape(o) == np.shape(r)
        assert np.result_type(o) == np.result_type(r), spec.name
        assert_close(o, r, **_tol(dtype))
    check_grads(lambda *xs: spec.fn(tnp.linalg, *xs), args, order=2, name=spec.name)


def test_gradients_keep_float32():
    rng = np.random.default_rng(3)
    a = _draw("spd", (3, 3), rng).astype(np.float32)
    for fn in (tnp.linalg.det, tnp.linalg.inv, lambda a: tnp.linalg.eigh(a)[0], lambda a: tnp.linalg.svd(a)[1],
               lambda a: tnp.linalg.qr(a)[1], tnp.linalg.cholesky, tnp.linalg.pinv, lambda a: tnp.linalg.norm(a, 2)):
        g = tg.grad(lambda a, fn=fn: tnp.sum(fn(a)))(a)
        assert g.dtype == np.float32
        _, t = tg.jvp(fn, (a,), (np.ones_like(a),))
        assert tg.tree.tree_leaves(t)[0].dtype == np.float32


def test_named_results_match_numpy():
    a = _draw("spd", (3, 3), np.random.default_rng(4))
    for name, fields in [("eigh", ("eigenvalues", "eigenvectors")), ("svd", ("U", "S", "Vh")), ("qr", ("Q", "R")),
                         ("slogdet", ("sign", "logabsdet"))]:
        ours, theirs = getattr(tnp.linalg, name)(a), getattr(np.linalg, name)(a)
        assert type(ours).__name__ == type(theirs).__name__ and ours._fields == fields == theirs._fields


DISPATCH = [
    ("det", lambda L, a: L.det(a)), ("inv", lambda L, a: L.inv(a)), ("pinv", lambda L, a: L.pinv(a)),
    ("cholesky", lambda L, a: L.cholesky(a)), ("slogdet", lambda L, a: L.slogdet(a)[1]),
    ("eigh", lambda L, a: L.eigh(a)[0]), ("eigvalsh", lambda L, a: L.eigvalsh(a)),
    ("svd", lambda L, a: L.svd(a)[1]), ("qr", lambda L, a: L.qr(a)[1]), ("solve", lambda L, a: L.solve(a, a[0])),
    ("lstsq", lambda L, a: L.lstsq(a, a[0])[0]), ("matrix_power", lambda L, a: L.matrix_power(a, 2)),
    ("multi_dot", lambda L, a: L.multi_dot([a, a, a])), ("norm", lambda L, a: L.norm(a)),
]


@pytest.mark.parametrize("name,call", DISPATCH, ids=[d[0] for d in DISPATCH])
def test_numpy_linalg_functions_dispatch_on_tracers(name, call):
    a = _draw("spd", (3, 3), np.random.default_rng(5))
    expected = tg.grad(lambda a: tnp.sum(call(tnp.linalg, a)))(a)
    assert_close(tg.grad(lambda a: tnp.sum(call(np.linalg, a)))(a), expected, rtol=1e-12)


# ---- norm ----------------------------------------------------------------------------------------
NORM_CASES = [
    (None, None, (3,)), (None, None, (3, 4)), (2, None, (3,)), (1, None, (3,)), (np.inf, None, (3,)),
    (-np.inf, None, (3,)), (3, None, (3,)), (0.5, None, (3,)), (-1.5, 0, (3, 2)), (None, 1, (3, 4)),
    (1, 0, (3, 4)), ("fro", None, (3, 4)), (1, None, (3, 4)), (np.inf, None, (3, 4)), (-1, None, (3, 4)),
    (-np.inf, None, (3, 4)), ("fro", (1, 2), (2, 3, 4)), (2, None, (3, 4)), (-2, None, (4, 3)),
    ("nuc", None, (3, 4)), (2, (0, 2), (3, 2, 4)), ("nuc", (2, 0), (3, 2, 4)), (-2, (-1, -2), (2, 3, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ord_,axis,shape", NORM_CASES, ids=str)
def test_norm(ord_, axis, shape, dtype):
    rng = np.random.default_rng(10)
    x = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    for keepdims in (False, True):
        out = tnp.linalg.norm(x, ord_, axis, keepdims)
        assert_close(out, np.linalg.norm(x, ord_, axis, keepdims), **_tol(dtype))
        assert np.result_type(out) == dtype
    check_grads(lambda x: tnp.linalg.norm(x, ord_, axis), (x,), order=2, name=f"norm ord={ord_}")


@pytest.mark.parametrize("ord_,axis,shape", [(None, None, (3,)), (2, None, (3,)), (3, None, (3,)),
                                             ("fro", None, (2, 3)), (None, 1, (2, 3))], ids=str)
def test_norm_at_zero_has_zero_derivatives(ord_, axis, shape):
    """The documented convention: gradient 0 (a subgradient) and second derivative 0 at x = 0."""
    x = np.zeros(shape)
    x[0] = 1.0  # one row/element away from zero, the rest exactly at it
    zero = np.zeros(shape)
    for point in (zero, x * (np.arange(x.size).reshape(shape) == 0)):
        fn = lambda x: tnp.sum(tnp.linalg.norm(x, ord_, axis))
        g = tg.grad(fn)(point)
        assert np.all(np.isfinite(g))
        if not point.any():
            np.testing.assert_array_equal(g, np.zeros(shape))
            np.testing.assert_array_equal(tg.jvp(fn, (point,), (np.ones(shape),))[1], 0.0)
        hvp = tg.jvp(tg.grad(fn), (point,), (np.ones(shape),))[1]
        hh = tg.grad(lambda x, fn=fn: tnp.sum(tg.grad(fn)(x) * np.arange(x.size).reshape(shape)))(point)
        assert np.all(np.isfinite(hvp)) and np.all(np.isfinite(hh))
    np.testing.assert_array_equal(tg.grad(tg.grad(lambda x: tnp.linalg.norm(x, ord_, axis).sum()))(zero), 0.0)


def test_norm_rejects_bad_arguments():
    with pytest.raises(ValueError, match="axis"):
        tnp.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2))
    with pytest.raises(ValueError, match="order"):
        tnp.linalg.norm(np.ones((2, 2)), "bad")


# ---- numerical traps and conventions -------------------------------------------------------------
def test_eigh_gradient_is_symmetrized():
    """Symmetric input (JAX's symmetrize_input=True): eigh reads (a + a^T) / 2, so the gradient is
    symmetric and equal to the one of eigh((a + a^T) / 2)."""
    a = _draw("sym", (3, 3), np.random.default_rng(6))
    a_ns = a + np.triu(np.ones((3, 3)), 1) * 0.3  # non-symmetric: upper triangle changed
    fn = lambda a: tnp.sum(tnp.linalg.eigh(a)[1][:, 0] ** 2 * np.arange(3.0)) + tnp.linalg.eigvalsh(a)[0]
    g = tg.grad(fn)(a_ns)
    assert_close(g, g.T, atol=1e-14)
    assert_close(tnp.linalg.eigh(a_ns)[0], np.linalg.eigh((a_ns + a_ns.T) / 2)[0], rtol=1e-12)
    # symmetrize_input=False reads the UPLO triangle, as NumPy: values match NumPy, gradient lives there
    for uplo, keep in (("L", np.tril), ("U", np.triu)):
        w = tnp.linalg.eigh(a_ns, uplo, symmetrize_input=False)[0]
        assert_close(w, np.linalg.eigh(a_ns, uplo)[0], rtol=1e-12)
        g = tg.grad(lambda a, uplo=uplo: tnp.linalg.eigh(a, uplo, symmetrize_input=False)[0][0])(a_ns)
        np.testing.assert_array_equal(g, keep(g))


def test_cholesky_gradient_is_symmetrized():
    a = _draw("spd", (3, 3), np.random.default_rng(7))
    g = tg.grad(lambda a: tnp.sum(tnp.linalg.cholesky(a) * np.arange(9.0).reshape(3, 3)))(a)
    assert_close(g, g.T, atol=1e-14)


def test_repeated_eigenvalues_and_singular_values_give_finite_gradients():
    """Functions of the eigenvalues (singular values) alone have finite derivatives at repeated
    ones: the eigenvector terms of equal pairs are zero, not 0 * inf."""
    eye = np.eye(3)
    g = tg.grad(lambda a: tnp.sum(tnp.linalg.eigvalsh(a) ** 2))(eye)
    assert_close(g, 2 * eye, atol=1e-14)  # d tr(A^2) = 2 A
    g = tg.grad(lambda a: tnp.sum(tnp.linalg.svd(a, compute_uv=False) ** 2))(2 * eye)
    assert_close(g, 4 * eye, atol=1e-14)  # d ||A||_F^2 = 2 A
    g = tg.grad(lambda a: tnp.linalg.norm(a, "nuc"))(np.zeros((3, 2)))
    assert np.all(np.isfinite(g))
    _, t = tg.jvp(lambda a: tnp.linalg.eigh(a)[0], (eye,), (np.diag([1.0, 2.0, 3.0]),))
    assert_close(t, [1.0, 2.0, 3.0], atol=1e-14)


def test_derivative_refusals_are_clear():
    a = np.random.default_rng(8).standard_normal((3, 4))
    with pytest.raises(NotImplementedError, match="full_matrices"):
        tg.grad(lambda a: tnp.sum(tnp.linalg.svd(a)[0]))(a)
    with pytest.raises(NotImplementedError, match="m >= n"):
        tg.grad(lambda a: tnp.sum(tnp.linalg.qr(a)[1]))(a)
    with pytest.raises(NotImplementedError, match="raw"):
        tnp.linalg.qr(a, "raw")
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tnp.linalg.inv(a)
    with pytest.raises(np.linalg.LinAlgError):
        tnp.linalg.cholesky(-np.eye(2))


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=lambda d: np.dtype(d).name)
def test_holomorphic_functions_take_complex_input(dtype):
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)).astype(dtype)
    b = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(dtype)
    for name, fn, args in [("solve", tnp.linalg.solve, (a, b)), ("inv", tnp.linalg.inv, (a,)),
                           ("det", tnp.linalg.det, (a,)),
                           ("matrix_power", lambda a: tnp.linalg.matrix_power(a, -2), (a,)),
                           ("multi_dot", lambda a, b: tnp.linalg.multi_dot([a[0], a[1], b]), (a, b))]:
        out = fn(*args)
        assert out.dtype == dtype
        check_grads(fn, args, order=2, name=name)
    assert_close(tnp.linalg.det(a), np.linalg.det(a), rtol=1e-5)


def test_lstsq_rank_deficient_matches_numpy():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 3))  # rank 2
    b = rng.standard_normal(5)
    ours, theirs = tnp.linalg.lstsq(a, b), np.linalg.lstsq(a, b)
    assert_close(ours[0], theirs[0], rtol=1e-10, atol=1e-12)
    assert ours[1].shape == theirs[1].shape == (0,) and ours[2] == theirs[2] == 2
    assert_close(ours[3], theirs[3], rtol=1e-12, atol=1e-14)


def test_abstract_eval_states_shapes_without_running_on_zeros():
    """Staging needs shapes and dtypes; a zero matrix is singular, so they are stated, not probed."""
    from tapegrad._core import ShapedArray
    from tapegrad.numpy.linalg import _cholesky, _det, _eigh, _qr, _solve, _svd
    from tapegrad.scipy.linalg import _expm, _lu, _schur, _sylvester, _triangular
    rng = np.random.default_rng(13)
    sq32 = _draw("spd", (2, 3, 3), rng).astype(np.float32)
    rect = _draw("wc", (4, 3), rng)
    c64 = (sq32[0] + 0.5j).astype(np.complex64)
    cases = [(_solve.solve_p, (sq32, rng.standard_normal((3, 2))), {}), (_solve.inv_p, (sq32,), {}),
             (_solve.pinv_p, (rect,), dict(rcond=1e-15)), (_det.det_p, (sq32,), {}), (_det.slogdet_p, (sq32,), {}),
             (_cholesky.cholesky_p, (sq32,), {}), (_eigh.eigh_p, (sq32,), {}),
             (_svd.svd_p, (rect,), dict(full_matrices=True)), (_svd.svd_p, (rect,), dict(full_matrices=False)),
             (_qr.qr_p, (rect,), dict(mode="reduced")), (_qr.qr_p, (rect,), dict(mode="complete")),
             (_triangular.tri_solve_p, (sq32, np.ones((3, 1), np.float32)),
              dict(trans=0, lower=True, unit_diagonal=False)),
             (_expm.expm_p, (sq32,), {}), (_lu.lu_p, (sq32,), {}), (_lu.lu_p, (rect.T,), {}),
             (_lu.lu_p, (c64,), {}), (_lu.perm_p, (np.array([2, 2, 2], np.int32),), dict(m=3)),
             (_sylvester.sylvester_p, (sq32, sq32[0], sq32), {}), (_sylvester.sqrtm_p, (c64,), {}),
             (_schur.schur_p, (sq32,), dict(output="complex")), (_schur.hessenberg_p, (c64,), {}),
             (_schur.funm_p, (sq32,), dict(func=np.cos))]
    for prim, args, params in cases:
        outs = prim.impl(*args, **params)
        avals = prim.abstract_eval(*[ShapedArray(a.shape, a.dtype) for a in args], **params)
        if not prim.multiple_results:
            outs, avals = [outs], [avals]
        assert avals == [ShapedArray(out.shape, out.dtype) for out in outs], prim.name
