"""tapegrad.scipy.linalg: values against scipy.linalg over shapes (stacked too) and dtypes, and
derivatives against finite differences to order 2 in both modes (float32 with check_grads' float32
tolerances; test matrices are well conditioned: ``random + n I``, ``B B^T + n I``)."""
from __future__ import annotations

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
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]


def _draw(kind, shape, rng):
    x = rng.standard_normal(shape)
    n = shape[-1]
    if kind == "sq":
        return x + n * np.eye(n)
    if kind == "spd":
        return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)
    if kind == "small":  # moderate norm, for expm
        return 0.5 * x
    return x


def _tri(**kw):
    return lambda L, a, b: L.solve_triangular(a, b, **kw)


TRI_SHAPES = (((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 3, 3), (2, 3, 2)), ((2, 3, 3), (3,)))

SPECS = [
    ModuleSpec("solve_triangular_upper", _tri(), ("sq", "gen"), TRI_SHAPES),
    ModuleSpec("solve_triangular_lower", _tri(lower=True), ("sq", "gen"), TRI_SHAPES),
    ModuleSpec("solve_triangular_trans_T", _tri(trans="T", lower=True), ("sq", "gen"), TRI_SHAPES[:3]),
    ModuleSpec("solve_triangular_trans_1", _tri(trans=1), ("sq", "gen"), TRI_SHAPES[:1]),
    ModuleSpec("solve_triangular_trans_C", _tri(trans=2, lower=True), ("sq", "gen"), TRI_SHAPES[:1]),
    ModuleSpec("solve_triangular_unit", _tri(unit_diagonal=True), ("gen", "gen"), TRI_SHAPES[:3]),
    ModuleSpec("solve_triangular_unit_lower_T", _tri(unit_diagonal=True, lower=True, trans=1), ("gen", "gen"),
               TRI_SHAPES[:3]),
    # the triangle cho_factor uses (SciPy leaves the rest of a in the other one)
    ModuleSpec("cho_factor_upper",
               lambda L, a: np.triu(L.cho_factor(a)[0]) if L is scipy.linalg else L.cho_factor(a)[0],
               ("spd",), (((3, 3),), ((1, 1),))),
    ModuleSpec("cho_factor_lower", lambda L, a: np.tril(L.cho_factor(a, lower=True)[0]) if L is scipy.linalg
               else L.cho_factor(a, lower=True)[0], ("spd",), (((3, 3),), ((2, 4, 4),))),
    ModuleSpec("cho_solve_upper", lambda L, a, b: L.cho_solve(L.cho_factor(a), b), ("spd", "gen"),
               (((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 3, 3), (3,)))),
    ModuleSpec("cho_solve_lower", lambda L, a, b: L.cho_solve(L.cho_factor(a, lower=True), b), ("spd", "gen"),
               (((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 1)))),
    ModuleSpec("expm", lambda L, a: L.expm(a), ("small",), (((3, 3),), ((2, 3, 3),), ((1, 1),), ((4, 4),))),
]
CASES = [(spec, shapes) for spec in SPECS for shapes in spec.shapes]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec,shapes", CASES, ids=[f"{s.name}-{sh}" for s, sh in CASES])
def test_scipy_linalg(spec, shapes, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((spec.name, shapes)).encode()))
    args = tuple(_draw(kind, shape, rng).astype(dtype) for kind, shape in zip(spec.kinds, shapes))
    out, ref = spec.fn(tsl, *args), per_matrix(lambda *xs: spec.fn(scipy.linalg, *xs), *args)
    assert out.shape == ref.shape and out.dtype == ref.dtype == dtype
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    assert_close(out, ref, **tol)
    check_grads(lambda *xs: spec.fn(tsl, *xs), args, order=2, name=spec.name)


def test_solve_triangular_reads_one_triangle():
    """Entries SciPy does not read get zero derivative (and do not change the value)."""
    rng = np.random.default_rng(1)
    a, b = _draw("sq", (3, 3), rng), rng.standard_normal(3)
    ones = np.ones((3, 3))
    for lower, unit, unread in ((True, False, np.triu(ones, 1)), (False, False, np.tril(ones, -1)),
                                (True, True, np.triu(ones)), (False, True, np.tril(ones))):
        solve = lambda a, lower=lower, unit=unit: tsl.solve_triangular(a, b, lower=lower, unit_diagonal=unit)
        fn = lambda a, solve=solve: tnp.sum(solve(a) ** 2)
        assert_close(fn(a + 5.0 * unread), fn(a), rtol=1e-12)
        g = tg.grad(fn)(a)
        np.testing.assert_array_equal(g * unread, 0.0)
        t = tg.jvp(solve, (a,), (unread,))[1]
        np.testing.assert_array_equal(t, 0.0)


def test_expm_derivative_matches_scipy_frechet():
    rng = np.random.default_rng(2)
    a, e = 0.5 * rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    _, frechet = scipy.linalg.expm_frechet(a, e)
    assert_close(tg.jvp(tsl.expm, (a,), (e,))[1], frechet, rtol=1e-10)
    assert_close(tg.vjp(tsl.expm, a)[1](e)[0], scipy.linalg.expm_frechet(a.T, e)[1], rtol=1e-10)


def test_cho_factor_returns_the_flag_and_symmetric_gradients():
    a = _draw("spd", (3, 3), np.random.default_rng(3))
    c, lower = tsl.cho_factor(a)
    assert lower is False
    np.testing.assert_array_equal(np.tril(c, -1), 0.0)  # the unused triangle is zeroed, exactly
    g = tg.grad(lambda a: tnp.sum(tsl.cho_factor(a)[0] * np.arange(9.0).reshape(3, 3)))(a)
    assert_close(g, g.T, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=lambda d: np.dtype(d).name)
def test_holomorphic_complex_input(dtype):
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(dtype)
    b = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(dtype)
    tol = dict(rtol=1e-4) if dtype == np.complex64 else dict(rtol=1e-10)
    assert_close(tsl.expm(0.5 * a), scipy.linalg.expm(0.5 * a), **tol)
    check_grads(lambda a: tsl.expm(0.5 * a), (a,), order=2, name="expm")
    a = a + 3 * np.eye(3, dtype=dtype)
    for kw in (dict(), dict(lower=True, trans=1)):
        assert_close(tsl.solve_triangular(a, b, **kw), scipy.linalg.solve_triangular(a, b, **kw), **tol)
        check_grads(lambda a, b, kw=kw: tsl.solve_triangular(a, b, **kw), (a, b), order=2, name="solve_triangular")
    with pytest.raises(NotImplementedError, match="conjugate"):
        tsl.solve_triangular(a, b, trans="C")


def test_bad_trans_is_refused():
    with pytest.raises(ValueError, match="trans"):
        tsl.solve_triangular(np.eye(2), np.ones(2), trans="X")
