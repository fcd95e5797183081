"""Issue 15's numerical functions of ``tapegrad.numpy`` (polynomials, discrete calculus, convolution,
covariance, floating-point ufuncs, closeness tests, windows, ``i0``), from one table: values,
shapes and dtypes against NumPy, derivatives to order 2 in both modes against finite differences,
one ``vmap`` check (against a loop) and one ``jit`` check per function. The known traps follow the
table."""
from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from _specs import check_values
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.errors import ConcretizationError
from tapegrad.testing import check_grads


@dataclasses.dataclass(frozen=True)
class Case:
    """``op(*args)`` against ``ref(*args)`` for the arguments ``draw(dtype, rng)``; ``diff`` lists the
    positions that are differentiated (empty: a non-differentiable function, whose derivatives must
    be 0). ``traced`` is the spelling whose result shape does not depend on values (``roots``'
    ``strip_zeros=False``), for jit, vmap and the finite differences."""

    name: str
    op: Callable
    ref: Callable
    draw: Callable
    dtypes: tuple = (np.float64,)
    diff: tuple = (0,)
    traced: Callable | None = None  # the spelling for jit, vmap and finite differences, where it differs

    def staged(self, *args):
        return (self.traced or self.op)(*args)

    def __repr__(self):
        return self.name


def _u(lo, hi, *shape):
    return lambda dtype, rng: rng.uniform(lo, hi, shape).astype(dtype)


def _args(*draws):
    return lambda dtype, rng: tuple(d(dtype, rng) for d in draws)


def _ints(lo, hi, *shape):
    return lambda dtype, rng: rng.integers(lo, hi, shape)


def _offint(*shape):
    """Away from the integers (the jumps of modf's, divmod's and fix's pieces)."""
    return lambda dtype, rng: (rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)).astype(dtype)


def _fixed(*values):
    return lambda dtype, rng: tuple(np.array(v, dtype) for v in values)


def _increasing(n):
    return lambda dtype, rng: np.cumsum(rng.uniform(0.5, 1.5, n)).astype(dtype)


def _complex(*shape):
    return lambda dtype, rng: (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)


def _phases(dtype, rng):
    """A wrapped phase with jumps well away from the half-period threshold."""
    return np.mod(np.cumsum(rng.uniform(0.5, 1.2, 9)), 2 * math.pi).astype(dtype)


F64, F32, C128 = np.float64, np.float32, np.complex128
REAL = (F64, F32)
XP = np.array([0.0, 1.0, 1.5, 3.0, 4.0])
X_INSIDE = np.array([-0.5, 0.3, 1.2, 2.2, 3.6, 4.5])  # off the knots (each side, and outside)

CASES = [
    # floating point
    Case("ldexp", lambda x, e: tnp.ldexp(x, e), np.ldexp, _args(_u(-2, 2, 3, 2), _ints(-3, 4, 2)), REAL),
    Case("ldexp_python_int", lambda x: tnp.ldexp(x, 3), lambda x: np.ldexp(x, 3), _args(_u(-2, 2, 3)), REAL),
    Case("frexp", tnp.frexp, np.frexp, _args(_u(-9, 9, 4)), REAL),
    Case("modf", tnp.modf, np.modf, _args(_offint(3, 2)), REAL),
    Case("divmod", tnp.divmod, np.divmod, _fixed([5.3, -5.3, 4.1], [2.0, 2.0, -1.5]), REAL, (0, 1)),
    Case("heaviside", tnp.heaviside, np.heaviside, lambda dt, rng: (np.array([-1.0, 0.0, 2.0, 0.0], dt),
                                                                      rng.uniform(0.2, 0.8, 4).astype(dt)), REAL, (1,)),
    Case("positive", tnp.positive, np.positive, _args(_u(-2, 2, 3)), REAL),
    Case("i0", tnp.i0, np.i0, _args(_u(-4, 4, 5)), REAL),
    Case("nextafter", tnp.nextafter, np.nextafter, _args(_u(-2, 2, 4), _u(-2, 2, 4)), REAL, (0,)),
    Case("spacing", tnp.spacing, np.spacing, _args(_u(-2, 2, 4)), REAL, ()),
    Case("rint", tnp.rint, np.rint, _args(_offint(4)), REAL, ()),
    Case("fix", tnp.fix, np.fix, _args(_offint(4)), REAL, ()),
    Case("gcd", tnp.gcd, np.gcd, _args(_ints(-20, 20, 5), _ints(1, 20, 5)), (np.int64,), ()),
    Case("lcm", tnp.lcm, np.lcm, _args(_ints(-20, 20, 5), _ints(1, 20, 5)), (np.int64,), ()),
    # closeness and complex tests
    Case("isclose", lambda a, b: tnp.isclose(a, b, rtol=1e-3), lambda a, b: np.isclose(a, b, rtol=1e-3),
         _fixed([1.0, 2.0, np.inf, np.nan, 3.0], [1.0005, 2.1, np.inf, np.nan, -3.0]), REAL, ()),
    Case("allclose", tnp.allclose, np.allclose, _args(_u(-2, 2, 4), _u(-2, 2, 4)), REAL, ()),
    Case("array_equal", tnp.array_equal, np.array_equal, lambda dt, rng: (np.arange(4.0, dtype=dt),) * 2, REAL, ()),
    Case("array_equiv", tnp.array_equiv, np.array_equiv, _fixed([[1.0, 2.0]] * 3, [1.0, 2.0]), REAL, ()),
    Case("iscomplex", tnp.iscomplex, np.iscomplex, lambda dt, rng: (np.array([1.0, 2 + 1j, 3j], dt),), (C128,), ()),
    Case("isreal", tnp.isreal, np.isreal, lambda dt, rng: (np.array([1.0, 2 + 1j, 3j], dt),), (C128,), ()),
    Case("real_if_close", tnp.real_if_close, np.real_if_close,
         lambda dt, rng: (rng.normal(size=3) + 1e-18j,), (C128,), traced=tnp.real),
    # discrete calculus
    Case("gradient", lambda f: tnp.gradient(f, edge_order=2), lambda f: np.gradient(f, edge_order=2),
         _args(_u(-2, 2, 5, 4)), REAL),
    Case("gradient_coordinates", lambda f, x: tnp.gradient(f, x, axis=0), lambda f, x: np.gradient(f, x, axis=0),
         _args(_u(-2, 2, 5, 3), _increasing(5)), REAL, (0, 1)),
    Case("trapezoid", lambda y, x: tnp.trapezoid(y, x, axis=0), lambda y, x: np.trapezoid(y, x, axis=0),
         _args(_u(-2, 2, 5, 3), _increasing(5)), REAL, (0, 1)),
    Case("ediff1d", lambda a, b: tnp.ediff1d(a, to_begin=b, to_end=-1.5),
         lambda a, b: np.ediff1d(a, to_begin=b, to_end=-1.5), _args(_u(-2, 2, 3, 2), _u(-2, 2, 2)), REAL, (0, 1)),
    Case("unwrap", tnp.unwrap, np.unwrap, _args(_phases), REAL),
    Case("interp", tnp.interp, np.interp, lambda dt, rng: (X_INSIDE, XP, rng.normal(size=5)), (F64,), (0, 1, 2)),
    Case("interp_complex", lambda x, fp: tnp.interp(x, XP, fp), lambda x, fp: np.interp(x, XP, fp),
         lambda dt, rng: (X_INSIDE, _complex(5)(dt, rng)), (C128,), (0, 1)),
    Case("interp_period", lambda x, xp, fp: tnp.interp(x, xp, fp, period=3.7),
         lambda x, xp, fp: np.interp(x, xp, fp, period=3.7),
         lambda dt, rng: (X_INSIDE * 2.1, np.array([2.5, 0.2, 1.1, 3.3]), rng.normal(size=4)), (F64,), (0, 1, 2)),
    # convolution
    *[Case(f"{fn}_{mode}", lambda a, v, fn=fn, mode=mode: getattr(tnp, fn)(a, v, mode),
           lambda a, v, fn=fn, mode=mode: getattr(np, fn)(a, v, mode), draw, dtypes, (0, 1))
      for fn in ("convolve", "correlate") for mode in ("full", "same", "valid")
      for draw, dtypes in ((_args(_u(-2, 2, 6), _u(-2, 2, 3)), REAL), (_args(_complex(3), _complex(5)), (C128,)))],
    # covariance
    Case("cov", lambda m, w: tnp.cov(m, aweights=w), lambda m, w: np.cov(m, aweights=w),
         _args(_u(-2, 2, 3, 6), _u(0.5, 2, 6)), REAL, (0, 1)),
    Case("cov_complex", lambda m: tnp.cov(m, rowvar=False), lambda m: np.cov(m, rowvar=False), _args(_complex(6, 2)),
         (C128,)),
    Case("corrcoef", tnp.corrcoef, np.corrcoef, _args(_u(-2, 2, 3, 6), _u(-2, 2, 6)), REAL, (0, 1)),
    # polynomials
    Case("polyval", tnp.polyval, np.polyval, _args(_u(-2, 2, 4), _u(-2, 2, 3, 2)), REAL, (0, 1)),
    Case("polyadd", tnp.polyadd, np.polyadd, _args(_u(-2, 2, 4), _u(-2, 2, 2)), REAL, (0, 1)),
    Case("polysub", tnp.polysub, np.polysub, _args(_u(-2, 2, 2), _u(-2, 2, 4)), REAL, (0, 1)),
    Case("polymul", tnp.polymul, np.polymul, _args(_u(-2, 2, 4), _u(-2, 2, 3)), REAL + (C128,), (0, 1)),
    Case("polydiv", tnp.polydiv, np.polydiv, _args(_u(-2, 2, 5), _u(0.5, 2, 3)), REAL, (0, 1),
         lambda u, v: tnp.polydiv(u, v, trim_leading_zeros=False)),
    Case("polyder", lambda p: tnp.polyder(p, 2), lambda p: np.polyder(p, 2), _args(_u(-2, 2, 5)), REAL),
    Case("polyint", lambda p, k: tnp.polyint(p, 2, k), lambda p, k: np.polyint(p, 2, k),
         _args(_u(-2, 2, 4), _u(-2, 2, 2)), (F64,), (0, 1)),
    Case("poly", tnp.poly, np.poly, _args(_u(-2, 2, 4)), REAL),
    Case("poly_matrix", tnp.poly, np.poly, lambda dt, rng: (rng.normal(size=(3, 3)).astype(dt),), (F64,)),
    Case("roots", tnp.roots, lambda p: np.roots(p).astype(np.result_type(p.dtype, np.complex64)),
         _args(_u(-2, 2, 5)), REAL, traced=lambda p: tnp.roots(p, strip_zeros=False)),
    Case("roots_complex", tnp.roots, np.roots, _args(_complex(4)), (C128,),
         traced=lambda p: tnp.roots(p, strip_zeros=False)),
    Case("polyfit", lambda x, y: tnp.polyfit(x, y, 2), lambda x, y: np.polyfit(x, y, 2),
         _args(_increasing(7), _u(-2, 2, 7)), (F64,), (0, 1)),
    Case("polyfit_weighted", lambda x, y, w: tnp.polyfit(x, y, 1, w=w), lambda x, y, w: np.polyfit(x, y, 1, w=w),
         _args(_increasing(6), _u(-2, 2, 6, 2), _u(0.5, 2, 6)), (F64,), (0, 1, 2)),
    Case("vander", lambda x: tnp.vander(x, 4), lambda x: np.vander(x, 4), _args(_u(-2, 2, 3)), REAL),
    # running reductions (array API)
    Case("cumulative_sum", lambda x: tnp.cumulative_sum(x, axis=0, include_initial=True),
         lambda x: np.cumulative_sum(x, axis=0, include_initial=True), _args(_u(-2, 2, 4, 3)), REAL),
    Case("cumulative_prod", lambda x: tnp.cumulative_prod(x, axis=1, include_initial=True),
         lambda x: np.cumulative_prod(x, axis=1, include_initial=True), _args(_u(-2, 2, 4, 3)), REAL),
    Case("cumulative_sum_1d", tnp.cumulative_sum, np.cumulative_sum, _args(_u(-2, 2, 5)), REAL),
    Case("cumulative_prod_int", tnp.cumulative_prod, np.cumulative_prod, _args(_ints(-3, 3, 5)), (np.int64,), ()),
    # windows
    Case("kaiser", lambda beta: tnp.kaiser(7, beta), lambda beta: np.kaiser(7, beta),
         lambda dt, rng: (np.float64(rng.uniform(1, 6)),), (F64,)),
    *[Case(name, lambda x, name=name: getattr(tnp, name)(6) * x, lambda x, name=name: getattr(np, name)(6) * x,
           lambda dt, rng: (np.float64(1.5),), (F64,)) for name in ("bartlett", "blackman", "hamming", "hanning")],
]
ITEMS = [pytest.param(case, np.dtype(dt), id=f"{case.name}-{np.dtype(dt).name}")
         for case in CASES for dt in case.dtypes]


def _draw(case, dtype):
    # crc32, not hash(): str hashes change with each process's PYTHONHASHSEED, and a failure must repeat
    return case.draw(dtype, np.random.default_rng(zlib.crc32(case.name.encode())))


def _differentiated(case, args):
    """The function of the differentiated arguments alone, the others held at their values, and its
    float outputs alone (frexp's exponent, divmod's quotient are integers or piecewise constant)."""
    def fn(*diff_args):
        full = list(args)
        for i, a in zip(case.diff, diff_args):
            full[i] = a
        return [x for x in tg.tree.tree_leaves(case.staged(*full)) if np.dtype(tnp.result_type(x)).kind in "fc"]
    return fn, tuple(args[i] for i in case.diff)


def _tolerance_dtype(dtype):
    return np.float32 if dtype in (np.float32, np.complex64) else np.float64


@pytest.mark.parametrize("case, dtype", ITEMS)
def test_values_match_numpy(case, dtype):
    args = _draw(case, dtype)
    check_values(case.op(*args), case.ref(*args), _tolerance_dtype(dtype))


@pytest.mark.parametrize("case, dtype", ITEMS)
def test_derivatives(case, dtype):
    args = _draw(case, dtype)
    if not case.diff:  # non-differentiable: zero derivatives of every float argument, both modes
        floats = tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc")
        if floats:
            fn, primals = _differentiated(dataclasses.replace(case, diff=floats), args)
            out, vjp_fn = tg.vjp(lambda *a: _float_leaves(fn(*a)), *primals)
            for ct in vjp_fn(tg.tree.tree_map(np.ones_like, out)):
                np.testing.assert_array_equal(ct, 0.0)
        return
    fn, primals = _differentiated(case, args)
    check_grads(fn, primals, order=2, name=case.name)


def _float_leaves(out):
    """The float leaves of ``out`` as floats (non-differentiable results: booleans, integers)."""
    return [tnp.astype(x, np.float64) if np.dtype(tnp.result_type(x)).kind not in "fc" else x
            for x in tg.tree.tree_leaves(out)]


@pytest.mark.parametrize("case, dtype", ITEMS)
def test_vmap_and_jit(case, dtype):
    args = _draw(case, dtype)
    assert_close_tree(tg.jit(case.staged)(*args), case.staged(*args))
    check_vmap(case.staged, args, 0, slack=4.0)


def assert_close_tree(out, ref):
    assert tg.tree.tree_structure(out) == tg.tree.tree_structure(ref), (out, ref)
    for o, r in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(ref)):
        o, r = np.asarray(o), np.asarray(r)
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        if r.dtype.kind in "fc":
            assert_close(o, r)
        else:
            np.testing.assert_array_equal(o, r)


# ---- the known traps -----------------------------------------------------------------------------
def _both_modes(fn, x):
    """``d fn / dx`` (fn scalar-valued, x 0-d) by grad and by jvp."""
    x = np.asarray(x, np.float64)
    return tg.grad(fn)(x), tg.jvp(fn, (x,), (np.ones_like(x),))[1]


def test_interp_at_the_knots_takes_the_right_hand_slope():
    fp = np.array([0.0, 2.0, 1.0, 4.0, 4.5])
    slopes = np.diff(fp) / np.diff(XP)
    for j in range(len(XP) - 1):  # a knot: the segment to its right
        for got in _both_modes(lambda x: tnp.interp(x, XP, fp), XP[j]):
            assert_close(got, slopes[j])
    for got in _both_modes(lambda x: tnp.interp(x, XP, fp), XP[-1]):  # the last knot: the segment to its left
        assert_close(got, slopes[-1])
    for x in (-1.0, 5.0):  # outside: the constant left/right values
        for got in _both_modes(lambda x: tnp.interp(x, XP, fp), x):
            assert got == 0.0
    # at a knot the value is fp there, and the derivative in fp is the indicator of that knot
    assert tnp.interp(1.5, XP, fp) == 1.0
    np.testing.assert_array_equal(tg.grad(lambda fp: tnp.interp(1.5, XP, fp))(fp), [0, 0, 1, 0, 0])


def test_roots_are_complex_and_differentiable_where_distinct():
    p = np.array([1.0, -6.0, 11.0, -6.0])  # (x - 1)(x - 2)(x - 3)
    r = tnp.roots(p)
    assert r.dtype == np.complex128
    assert_close(np.sort(r.real), [1.0, 2.0, 3.0])
    assert tnp.roots(p.astype(np.float32)).dtype == np.complex64
    # dr/dp_k = -r**(3 - k) / p'(r): for r = 2, p'(2) = -1
    order = np.argsort(r.real)
    jac = tg.jacfwd(lambda p: tnp.real(tnp.roots(p)))(p)[order]
    assert_close(jac[1], [8.0, 4.0, 2.0, 1.0])
    assert_close(tg.jacrev(lambda p: tnp.real(tnp.roots(p)))(p)[order], jac)
    # leading zeros are stripped (NumPy), trailing ones give exact zero roots with their derivative
    assert_close(tnp.roots(np.array([0.0, 0.0, 1.0, -3.0, 2.0, 0.0])), np.roots([1.0, -3.0, 2.0, 0.0]) + 0j)
    assert tnp.roots(np.zeros(3)).shape == (0,)
    check_grads(lambda p: tnp.roots(p), (np.array([1.0, -3.0, 2.0, 0.0]),), order=2)
    # a batch of polynomials is one primitive call (its batch rule), derivatives included
    ps = np.array([[1.0, -6.0, 11.0, -6.0], [2.0, 1.0, -3.0, 0.5], [1.0, 0.0, 1.0, 1.0]])
    per_row = [tg.grad(lambda p: tnp.abs(tnp.roots(p, strip_zeros=False)).sum())(p) for p in ps]
    batched = tg.vmap(tg.grad(lambda p: tnp.abs(tnp.roots(p, strip_zeros=False)).sum()), in_axes=1)(ps.T)
    assert_close(batched, np.stack(per_row))


def test_shapes_that_depend_on_values_need_the_static_spelling_under_jit():
    p = np.array([1.0, -3.0, 2.0])
    with pytest.raises(ConcretizationError, match="strip_zeros=False"):
        tg.jit(tnp.roots)(p)
    with pytest.raises(ConcretizationError, match="strip_zeros=False"):
        tg.vmap(tnp.roots)(np.stack([p, p]))
    with pytest.raises(ConcretizationError, match="trim_leading_zeros=False"):
        tg.jit(tnp.polydiv)(p, p[:2])
    with pytest.raises(ConcretizationError, match="tnp.real"):
        tg.jit(tnp.real_if_close)(p + 0j)
    # under grad the values are concrete: NumPy's spelling works
    assert_close(tg.grad(lambda p: tnp.real(tnp.roots(p)).sum())(p), [-3.0, -1.0, 0.0])


def test_polyfit_is_differentiable_in_x_and_y():
    x = np.linspace(-1.0, 1.0, 9)
    y = 0.5 * x ** 2 - x + 0.25
    assert_close(tnp.polyfit(x, y, 2), [0.5, -1.0, 0.25])
    # an exact fit reproduces y's coefficients: dp/dy is the pseudo-inverse of the Vandermonde matrix
    assert_close(tg.jacrev(lambda y: tnp.polyfit(x, y, 2))(y), np.linalg.pinv(np.vander(x, 3)))
    check_grads(lambda x, y: tnp.polyfit(x, y, 2), (x, y + np.sin(3 * x)), order=2)


def test_sinc_and_i0_derivatives():
    for got in _both_modes(tnp.sinc, 0.0):
        assert got == 0.0
    assert_close(tg.grad(tg.grad(tnp.sinc))(np.float64(0.0)), -math.pi ** 2 / 3)
    x = np.array([-2.5, -0.3, 0.0, 0.7, 3.0, 12.0])
    assert_close(tg.grad(lambda x: tnp.i0(x).sum())(x), scipy.special.i1(x))
    assert_close(tg.jvp(tnp.i0, (x,), (np.ones_like(x),))[1], scipy.special.i1(x))
    assert_close(tg.grad(lambda x: tg.grad(lambda x: tnp.i0(x).sum())(x).sum())(x), scipy.special.ivp(0, x, 2))
    assert tnp.i0(np.float32(2.0)).dtype == np.float32


def test_nondifferentiable_pieces_and_derivative_one_of_modf():
    x = np.array([2.3, -1.7, 0.4])
    assert_close(tg.grad(lambda x: tnp.modf(x)[0].sum())(x), np.ones(3))
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.modf(x)[1].sum())(x), 0.0)
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.divmod(x, 0.7)[0].sum())(x), 0.0)
    assert_close(tg.grad(lambda x: tnp.divmod(x, 0.7)[1].sum())(x), np.ones(3))
    assert_close(tg.grad(lambda x: tnp.frexp(x)[0].sum())(x), 2.0 ** -np.frexp(x)[1])
    for fn in (tnp.spacing, tnp.rint, tnp.fix):
        np.testing.assert_array_equal(tg.grad(lambda x, fn=fn: fn(x).sum())(x), 0.0)
    # nextafter moves x by one ulp: derivative 1 in x, 0 in the direction
    assert_close(tg.grad(lambda x: tnp.nextafter(x, 0.0).sum())(x), np.ones(3))
    np.testing.assert_array_equal(tg.grad(lambda y: tnp.nextafter(x, y).sum())(np.zeros(3)), 0.0)
    assert tnp.frexp(x)[1].dtype == np.frexp(x)[1].dtype
    assert_close(tg.grad(lambda y: tnp.heaviside(np.array([-1.0, 0.0, 1.0]), y).sum())(np.ones(3)), [0.0, 1.0, 0.0])


def test_convolve_modes_lengths_and_complex():
    a, v = np.arange(1.0, 6.0), np.array([1.0, 0.5j, -2.0])
    for mode, length in (("full", 7), ("same", 5), ("valid", 3)):
        for fn in ("convolve", "correlate"):
            for x, y in ((a, v), (v, a)):
                out = getattr(tnp, fn)(x, y, mode)
                assert out.shape == (length,)
                assert_close(out, getattr(np, fn)(x, y, mode))
    assert tnp.convolve(np.array([1, 2]), np.array([3])).dtype == np.int64


def test_numpy_calls_on_traced_values_dispatch():
    x = np.array([0.3, 1.7, 2.5])
    funcs = [lambda x: np.ldexp(x, 2), lambda x: np.modf(x)[0], lambda x: np.divmod(x, 0.7)[1],
             lambda x: np.frexp(x)[0], lambda x: np.heaviside(x - 1.0, x), np.positive, np.i0,
             lambda x: np.convolve(x, x), lambda x: np.correlate(x, x[:2]), np.gradient, np.trapezoid,
             np.ediff1d, np.unwrap, lambda x: np.interp(x, [0.0, 1.0, 3.0], [1.0, -1.0, 2.0]),
             np.cov, lambda x: np.polyval(x, 1.3), lambda x: np.polyfit([0.0, 1.0, 2.0], x, 1), np.poly,
             lambda x: np.polyint(x), np.vander, lambda x: np.polymul(x, x)]
    for fn in funcs:
        g = tg.grad(lambda x, fn=fn: tnp.sum(tnp.real(fn(x))))(x)
        check_grads(lambda x, fn=fn: fn(x), (x,), order=1)
        assert g.shape == x.shape
    for fn in (np.rint, np.spacing, lambda x: np.gcd(np.int64(4), np.int64(6)) * x, lambda x: np.isclose(x, 1.7)):
        tg.vjp(fn, x)  # dispatches rather than converting the tracer
    # NumPy's windows take no array argument to dispatch on: the error names ours
    with pytest.raises(TypeError, match="tapegrad.numpy.kaiser"):
        tg.grad(lambda beta: np.kaiser(4, beta).sum())(3.0)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="same length"):
        tnp.interp(0.5, [0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="empty"):
        tnp.interp(0.5, [], [])
    with pytest.raises(ValueError, match="period"):
        tnp.interp(0.5, [0.0, 1.0], [1.0, 2.0], period=0)
    with pytest.raises(ValueError, match="cannot be empty"):
        tnp.convolve([], [1.0])
    with pytest.raises(ValueError, match="mode"):
        tnp.correlate([1.0], [1.0], mode="circular")
    with pytest.raises(ValueError, match="Order of derivative"):
        tnp.polyder([1.0, 2.0], -1)
    with pytest.raises(ValueError, match="1-D"):
        tnp.roots(np.ones((2, 2)))
    with pytest.raises(ValueError, match="edge_order"):
        tnp.gradient(np.ones(4), edge_order=3)
    with pytest.raises(ValueError, match="at least"):
        tnp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(ValueError, match="coordinates"):
        tnp.gradient(np.ones(4), np.arange(3.0))
    with pytest.raises(TypeError, match="complex"):
        tnp.i0(np.array([1j]))
    with pytest.raises(TypeError, match="same length"):
        tnp.polyfit([0.0, 1.0], [1.0], 1)
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        tnp.cov(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="M must be an integer"):
        tnp.hamming(4.5)
    with pytest.raises(ValueError, match="axis"):
        tnp.cumulative_sum(np.ones((2, 2)))
    with pytest.raises(TypeError, match="to_begin"):
        tnp.ediff1d(np.arange(3), to_begin=[0.5])
