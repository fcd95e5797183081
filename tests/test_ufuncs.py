"""The ufuncs added for autograd parity (exp2 ... copysign): values against NumPy, derivatives against
finite differences to order 2 in both modes, and the documented conventions at kinks, plus the forward-mode
conventions of the older elementwise ops (ties, clip's boundary, where)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _specs import OpSpec, check_op
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]


def _draw(domain: str, shape, dtype, rng):
    if domain == "real":
        x = rng.uniform(-2.0, 2.0, shape)
    elif domain == "nonzero":
        x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "unit":
        x = rng.uniform(-0.8, 0.8, shape)
    elif domain == "gt1":
        x = rng.uniform(1.2, 3.0, shape)
    elif domain == "offint":  # away from the jumps of trunc
        x = rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)
    else:
        raise ValueError(domain)
    return np.asarray(x, dtype=dtype)


UNARY = [
    OpSpec("exp2", tnp.exp2, np.exp2),
    OpSpec("fabs", tnp.fabs, np.fabs, ("nonzero",)),
    OpSpec("cbrt", tnp.cbrt, np.cbrt, ("nonzero",)),
    OpSpec("arcsinh", tnp.arcsinh, np.arcsinh),
    OpSpec("arccosh", tnp.arccosh, np.arccosh, ("gt1",)),
    OpSpec("arctanh", tnp.arctanh, np.arctanh, ("unit",)),
    OpSpec("deg2rad", tnp.deg2rad, np.deg2rad),
    OpSpec("rad2deg", tnp.rad2deg, np.rad2deg),
    OpSpec("radians", tnp.radians, np.radians),
    OpSpec("degrees", tnp.degrees, np.degrees),
    OpSpec("sinc", tnp.sinc, np.sinc),
    OpSpec("trunc", tnp.trunc, np.trunc, ("offint",)),
    OpSpec("nan_to_num", tnp.nan_to_num, np.nan_to_num),
]
SHAPES = [(), (3,), (3, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_unary(spec, shape, dtype):
    check_op(spec, (_draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_unary_vmap(spec, shape, dtype):
    x = _draw(spec.domains[0], shape, dtype, np.random.default_rng(0))
    check_vmap_mixes(spec.op, (x,))


def _quotient_off_integers(x, y):
    """Whether ``x / y`` stays 0.05 away from every integer (the jumps of mod, fmod and their
    derivatives), so finite differences see a smooth function."""
    q = np.asarray(x, np.float64) / np.asarray(y, np.float64)
    return bool(np.all(np.abs(q - np.round(q)) > 0.05))


BINARY = [
    OpSpec("fmax", tnp.fmax, np.fmax),
    OpSpec("fmin", tnp.fmin, np.fmin),
    OpSpec("logaddexp2", tnp.logaddexp2, np.logaddexp2),
    OpSpec("hypot", tnp.hypot, np.hypot, ("nonzero", "nonzero")),
    OpSpec("copysign", tnp.copysign, np.copysign, ("nonzero", "nonzero")),
    OpSpec("mod", tnp.mod, np.mod, ("real", "nonzero")),
    OpSpec("remainder", tnp.remainder, np.remainder, ("real", "nonzero")),
    OpSpec("fmod", tnp.fmod, np.fmod, ("real", "nonzero")),
]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((3, 2), (2,)), ((1, 2), (3, 1)), ((), (3, 2))]


def _draw_pair(spec, shapes, dtype, rng):
    while True:
        x = _draw(spec.domains[0], shapes[0], dtype, rng)
        y = _draw(spec.domains[-1], shapes[1], dtype, rng)
        if spec.name not in ("mod", "remainder", "fmod") or _quotient_off_integers(x, y):
            return x, y


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary(spec, shapes, dtype):
    check_op(spec, _draw_pair(spec, shapes, dtype, np.random.default_rng(1)), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_vmap(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw_pair(spec, shapes, dtype, rng)
    check_vmap_mixes(spec.op, (x, y))
    check_vmap(lambda x: spec.op(-2.2, x), (x,), -1)  # a weak Python scalar keeps float32 in the batch too


def test_predicates_and_nan_to_num_vmap():
    x = np.array([[1.5, np.nan, -np.inf], [-2.0, 0.0, np.inf]], np.float32)
    check_vmap_mixes(lambda x: [tnp.signbit(x), tnp.nan_to_num(x, nan=-1.0, posinf=7.0)], (x[0],),
                     draw=lambda rng: (x[1],), batch=2)


@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_with_python_scalar_keeps_float32(spec):
    x = _draw("offint", (3,), np.float32, np.random.default_rng(2))
    check_grads(lambda x: spec.op(x, 0.7), (x,), order=2, name=spec.name)
    check_grads(lambda x: spec.op(-2.2, x), (x,), order=2, name=spec.name)
    assert np.result_type(spec.op(x, 0.7)) == np.float32
    assert tg.grad(lambda x: spec.op(x, 0.7).sum())(x).dtype == np.float32
    assert tg.jvp(lambda x: spec.op(-2.2, x), (x,), (np.ones(3, np.float32),))[1].dtype == np.float32


def test_numpy_ufuncs_dispatch_to_tapegrad():
    x = np.array([0.3, 1.7, 2.5])
    names = ["exp2", "fabs", "cbrt", "arcsinh", "arctanh", "deg2rad", "rad2deg", "radians", "degrees"]
    for name in names:
        ufunc = getattr(np, name)
        arg = x / 3.0 if name == "arctanh" else x
        value, g = tg.value_and_grad(lambda x, ufunc=ufunc: ufunc(x).sum())(arg)
        assert_close(value, ufunc(arg).sum(), rtol=1e-12)
        assert_close(g, tg.grad(lambda x, name=name: getattr(tnp, name)(x).sum())(arg))
    for ufunc in (np.fmax, np.fmin, np.logaddexp2, np.hypot, np.copysign, np.mod, np.remainder, np.fmod):
        assert_close(tg.vjp(lambda x, ufunc=ufunc: ufunc(x, 0.7), x)[0], ufunc(x, 0.7))
    assert_close(tg.grad(lambda x: np.sinc(x).sum() + np.nan_to_num(x).sum())(x),
                 tg.grad(lambda x: (tnp.sinc(x) + x).sum())(x))
    assert_close(tg.grad(lambda x: (x % 0.7).sum() + (2.0 % x).sum())(x), 1.0 - np.floor(2.0 / x))
    np.testing.assert_array_equal(tg.vjp(lambda x: np.signbit(x - 1.0), x)[0], [True, False, False])
    np.testing.assert_array_equal(tg.vjp(lambda x: np.trunc(x), x)[0], [0.0, 1.0, 2.0])
    assert_close(tg.jvp(np.arccosh, (x + 1.0,), (np.ones(3),))[1], 1 / np.sqrt((x + 1.0) ** 2 - 1))


# ---- conventions at kinks ------------------------------------------------------------------------
def _d(fn, x, order=1):
    """The ``order``-th derivative of a scalar function at ``x``, by nested grad and by nested jvp."""
    rev, fwd = fn, fn
    for _ in range(order):
        rev = tg.grad(rev)
        fwd = (lambda f: lambda x: tg.jvp(f, (x,), (np.ones_like(x),))[1])(fwd)
    return rev(np.asarray(x)), fwd(np.asarray(x))


def test_sinc_is_smooth_at_zero():
    assert tnp.sinc(np.asarray(0.0)) == 1.0
    expected = {1: 0.0, 2: -math.pi ** 2 / 3, 3: 0.0, 4: math.pi ** 4 / 5}
    for order, value in expected.items():
        for got in _d(tnp.sinc, 0.0, order):
            assert np.isfinite(got)
            assert_close(got, value, atol=1e-10, rtol=1e-10)
    # no cancellation near 0 either, in float32: sinc'(x) ~ -pi^2 x / 3
    x = np.float32(1e-3)
    assert_close(tg.grad(tnp.sinc)(x), -math.pi ** 2 / 3 * 1e-3, rtol=1e-5)
    # at the series' edge the two formulas agree
    for x in (0.5 / math.pi - 1e-9, 0.5 / math.pi + 1e-9):
        assert_close(tg.grad(tnp.sinc)(np.asarray(x)), (math.cos(0.5) - math.sin(0.5) / 0.5) / x,
                     rtol=1e-7)
    check_grads(tnp.sinc, (np.array([0.0, 0.05, -0.15, 0.16, 1.0, 2.5]),), order=3)


def test_kinks():
    zero = np.zeros(3)
    for got in _d(lambda x: tnp.fabs(x).sum(), zero):
        np.testing.assert_array_equal(got, 0.0)
    # copysign: d/dx = sign(x) sign(y) (0 at x = 0, as fabs); d/dy = 0 everywhere
    x, y = np.array([2.0, -2.0, 0.0, 3.0]), np.array([-1.0, -1.0, 1.0, -0.0])
    gx, gy = tg.grad(lambda x, y: tnp.copysign(x, y).sum(), (0, 1))(x, y)
    np.testing.assert_array_equal(gx, [-1.0, 1.0, 0.0, -1.0])
    np.testing.assert_array_equal(gy, 0.0)
    np.testing.assert_array_equal(tg.jvp(lambda y: tnp.copysign(x, y), (y,), (np.ones(4),))[1], 0.0)
    np.testing.assert_array_equal(tg.jvp(lambda x, y: tnp.copysign(x, y), (x, y), (np.ones(4), np.ones(4)))[1], gx)
    # mod / remainder: d/dx = 1, d/dy = -floor(x / y); fmod: d/dy = -trunc(x / y)
    x, y = np.array([5.3, -5.3, 5.3]), np.array([2.0, 2.0, -2.0])
    for fn, quotient in ((tnp.mod, np.floor), (tnp.remainder, np.floor), (tnp.fmod, np.trunc)):
        gx, gy = tg.grad(lambda x, y, fn=fn: fn(x, y).sum(), (0, 1))(x, y)
        np.testing.assert_array_equal(gx, 1.0)
        np.testing.assert_array_equal(gy, -quotient(x / y))
    # hypot at (0, 0): gradient 0 in both modes
    gx, gy = tg.grad(lambda x, y: tnp.hypot(x, y).sum(), (0, 1))(zero, zero)
    assert np.all(gx == 0) and np.all(gy == 0)
    assert np.all(tg.jvp(tnp.hypot, (zero, zero), (np.ones(3), np.ones(3)))[1] == 0)
    with np.errstate(divide="ignore"):
        assert np.isinf(tg.grad(lambda x: tnp.cbrt(x).sum())(zero)).all()


def test_fmax_fmin_ties_and_nans():
    x, y = np.array([1.0, np.nan, 2.0, np.nan]), np.array([1.0, 3.0, np.nan, np.nan])
    for fn in (tnp.fmax, tnp.fmin):
        gx, gy = tg.grad(lambda x, y, fn=fn: tnp.nan_to_num(fn(x, y)).sum(), (0, 1))(x, y)
        np.testing.assert_array_equal(gx, [0.5, 0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gy, [0.5, 1.0, 0.0, 0.0])
        t = tg.jvp(fn, (x, y), (np.ones(4), 2 * np.ones(4)))[1]
        np.testing.assert_array_equal(t[:3], [1.5, 2.0, 1.0])


def test_nan_to_num():
    x = np.array([1.5, np.nan, np.inf, -np.inf, -2.0], np.float32)
    for kwargs in ({}, dict(nan=-1.0, posinf=7.0, neginf=-7.0)):
        out = tnp.nan_to_num(x, **kwargs)
        np.testing.assert_array_equal(out, np.nan_to_num(x, **kwargs))
        assert out.dtype == np.float32
    g = tg.grad(lambda x: tnp.nan_to_num(x).sum())(x)
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(tg.jvp(tnp.nan_to_num, (x,), (np.full(5, 3.0, np.float32),))[1], [3, 0, 0, 0, 3])
    z = np.array([np.nan + 1j * np.inf, 1.0 - 2j], np.complex64)
    np.testing.assert_array_equal(tnp.nan_to_num(z), np.nan_to_num(z))
    assert tnp.nan_to_num(z).dtype == np.complex64
    np.testing.assert_array_equal(tnp.nan_to_num(np.arange(3)), np.arange(3))
    assert tnp.nan_to_num(1.0) == 1.0


def test_nondifferentiable_predicates():
    x = np.array([-1.5, 0.5, 2.25])
    g = tg.grad(lambda x: (tnp.trunc(x) * x).sum() + tnp.signbit(x).sum())(x)
    np.testing.assert_array_equal(g, np.trunc(x))
    assert tnp.signbit(x).dtype == bool


# ---- forward mode of the existing elementwise ops: the same conventions ---------------------------
def test_forward_mode_conventions():
    zero, ones = np.zeros(3), np.ones(3)
    np.testing.assert_array_equal(tg.jvp(tnp.abs, (zero,), (ones,))[1], 0.0)
    np.testing.assert_array_equal(tg.jvp(tnp.maximum, (zero, zero), (ones, 3 * ones))[1], 2.0)  # ties: mean
    np.testing.assert_array_equal(tg.jvp(tnp.minimum, (zero, zero), (ones, 3 * ones))[1], 2.0)
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    np.testing.assert_array_equal(tg.jvp(lambda x: tnp.clip(x, 0.0, 1.0), (x,), (np.ones(5),))[1], [0, 1, 1, 1, 0])
    lo = np.asarray(0.25)
    np.testing.assert_array_equal(tg.jvp(lambda lo: tnp.clip(x, lo, 1.0), (lo,), (np.ones(()),))[1], [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(tg.jvp(lambda x: x ** 0, (x,), (np.ones(5),))[1], 0.0)
    out, t = tg.jvp(lambda x: tnp.where(x > 0, x * x, 3.0), (x,), (np.ones(5),))
    np.testing.assert_array_equal(t, np.where(x > 0, 2 * x, 0.0))
    out, t = tg.jvp(lambda x: tg.stop_gradient(x) * x, (x,), (np.ones(5),))
    np.testing.assert_array_equal(t, x)
    with np.errstate(divide="ignore"):
        assert np.isinf(tg.jvp(tnp.sqrt, (zero,), (ones,))[1]).all()
    out, t = tg.jvp(lambda x: tnp.astype(x, np.float32), (x,), (np.ones(5),))
    assert out.dtype == t.dtype == np.float32


def test_abstract_eval_matches_impl():
    from tapegrad._rules import aval_of
    from tapegrad.numpy import _complex
    from tapegrad.numpy import _elementwise as ew
    from tapegrad.numpy import _ufuncs as uf
    f32, c64, i64 = np.ones((2, 3), np.float32), np.ones(3, np.complex64), np.ones(3, np.int64)
    cases = [(ew.abs_p, (c64,)), (ew.abs_p, (i64,)), (ew.negative_p, (i64,)), (ew.square_p, (i64,)),
             (ew.isnan_p, (f32,)), (uf.sinc_p, (f32,)), (uf.sinc_p, (i64,)), (uf.signbit_p, (f32,)),
             (uf.trunc_p, (f32,)), (uf.cbrt_p, (i64,)), (uf.hypot_p, (f32, 2.0)), (uf.remainder_p, (i64, 2.5)),
             (_complex.real_p, (c64,)), (_complex.imag_p, (c64,)), (_complex.conj_p, (c64,)),
             (ew.astype_p, (c64,), dict(dtype=np.dtype(np.float32)))]
    for prim, args, *params in cases:
        params = params[0] if params else {}
        out = prim.impl(*args, **params)
        aval = prim.abstract_eval(*[aval_of(a) for a in args], **params)
        assert aval.shape == np.shape(out) and np.dtype(aval.dtype) == np.result_type(out), prim
