"""tapegrad.scipy.stats: norm and multivariate_normal, values against scipy.stats, derivatives in every
argument against finite differences to order 2 in both modes, float64 and float32."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import tapegrad as tg
from _tol import assert_close
from _vmapcheck import check_vmap_mixes
from tapegrad.scipy.stats import multivariate_normal as mvn
from tapegrad.scipy.stats import norm
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]
DTYPE_IDS = ["float64", "float32"]


def _value_tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


# ---- norm ---------------------------------------------------------------------------------------
NORM_X = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
NORM_Q = ["ppf", "isf"]
# (x, loc, scale) shapes: broadcasting in every combination the functions meet
NORM_SHAPES = [((), (), ()), ((3,), (), ()), ((3, 2), (2,), ()), ((3, 1), (2,), (3, 1)), ((4,), (4,), (4,))]


def _norm_args(name, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = (0.1, 0.9) if name in NORM_Q else (-3.0, 3.0)
    first = rng.uniform(lo, hi, shapes[0])
    loc = rng.uniform(-1.0, 1.0, shapes[1])
    scale = rng.uniform(0.5, 2.0, shapes[2])
    return tuple(np.asarray(a, dtype) for a in (first, loc, scale))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("name", NORM_X + NORM_Q)
def test_norm(name, shapes, dtype):
    args = _norm_args(name, shapes, dtype)
    fn = getattr(norm, name)
    out = fn(*args)
    assert np.result_type(out) == dtype
    assert_close(out, getattr(scipy.stats.norm, name)(*[a.astype(np.float64) for a in args]),
                 **_value_tol(dtype))
    check_grads(fn, args, order=2, modes=("fwd", "rev"), name=f"norm.{name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("name", NORM_X + NORM_Q)
def test_norm_vmap(name, shapes, dtype):
    args = _norm_args(name, shapes, dtype)
    check_vmap_mixes(getattr(norm, name), args, slack=10.0)


@pytest.mark.parametrize("name", NORM_X + NORM_Q)
def test_norm_defaults_and_python_scalars_keep_float32(name):
    x = np.asarray([0.2, 0.6], np.float32)
    assert np.result_type(getattr(norm, name)(x)) == np.float32
    assert np.result_type(getattr(norm, name)(x, 0.5, 2.0)) == np.float32
    assert_close(getattr(norm, name)(x), getattr(scipy.stats.norm, name)(x), rtol=2e-6)
    g = tg.grad(lambda x: getattr(norm, name)(x, 0.5, 2.0).sum())(x)
    assert g.dtype == np.float32


def test_norm_tails():
    x = np.array([-200.0, -40.0, 40.0, 200.0])
    assert_close(norm.logcdf(x), scipy.stats.norm.logcdf(x), rtol=1e-14)
    assert_close(norm.logsf(x), scipy.stats.norm.logsf(x), rtol=1e-14)
    g = tg.grad(lambda x: norm.logcdf(x).sum())(x)
    series = -x - 1 / x + 2 / x ** 3 - 10 / x ** 5 + 74 / x ** 7  # the inverse Mills ratio as x -> -inf
    assert_close(g[:2], series[:2], rtol=1e-12)
    assert np.all(np.abs(g[2:]) <= 1e-300)  # pdf / cdf at 40 and 200: below exp(-800), zero in float64
    g_sf = tg.grad(lambda x: norm.logsf(x).sum())(x)
    assert_close(g_sf, -g[::-1])
    assert_close(norm.isf(np.array([1e-300])), scipy.stats.norm.isf(1e-300), rtol=1e-14)


# ---- multivariate_normal: logpdf, pdf -------------------------------------------------------------
def _spd(d, dtype, rng):
    a = rng.standard_normal((d, d))
    return np.asarray(a @ a.T / d + 0.5 * np.eye(d), dtype)


MVN_SHAPES = [((3,), (3,)), ((4, 3), (3,)), ((2, 4, 2), (2,)), ((4, 2), (4, 2))]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", MVN_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["logpdf", "pdf"])
def test_mvn_density(name, shapes, dtype):
    rng = np.random.default_rng(1)
    d = shapes[1][-1]
    mean = np.asarray(rng.standard_normal(shapes[1]), dtype)
    x = np.asarray(mean + rng.standard_normal(shapes[0]), dtype)
    cov = _spd(d, dtype, rng)
    fn = getattr(mvn, name)
    out = fn(x, mean, cov)
    assert out.shape == np.broadcast_shapes(shapes[0], shapes[1])[:-1] and np.result_type(out) == dtype
    x64, mean64 = np.broadcast_arrays(x.astype(np.float64), mean.astype(np.float64))
    ref = np.array([getattr(scipy.stats.multivariate_normal(m, cov.astype(np.float64)), name)(v)
                    for v, m in zip(x64.reshape(-1, d), mean64.reshape(-1, d))]).reshape(out.shape)
    assert_close(out, ref, **_value_tol(dtype))
    check_grads(fn, (x, mean, cov), order=2, modes=("fwd", "rev"), name=f"multivariate_normal.{name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", MVN_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["logpdf", "pdf"])
def test_mvn_density_vmap(name, shapes, dtype):
    rng = np.random.default_rng(1)
    d = shapes[1][-1]

    def example(rng):  # x, mean and a symmetric positive definite cov
        mean = np.asarray(rng.standard_normal(shapes[1]), dtype)
        return np.asarray(mean + rng.standard_normal(shapes[0]), dtype), mean, _spd(d, dtype, rng)
    check_vmap_mixes(getattr(mvn, name), example(rng), draw=example, slack=10.0)


def test_mvn_cdf_vmap():
    rng = np.random.default_rng(6)
    cov, mean, x = _spd(2, np.float64, rng), rng.standard_normal(2), rng.standard_normal((3, 2))
    check_vmap_mixes(lambda x, m, c: mvn.cdf(x, m, c, num_points=64), (x, mean, cov),
                     draw=lambda rng: (rng.standard_normal((3, 2)), rng.standard_normal(2), _spd(2, np.float64, rng)),
                     slack=10.0)


def test_mvn_cov_gradient_is_symmetric_and_matches_the_closed_form():
    rng = np.random.default_rng(2)
    cov, mean, x = _spd(3, np.float64, rng), rng.standard_normal(3), rng.standard_normal(3)
    g = tg.grad(mvn.logpdf, grad_position=2)(x, mean, cov)
    inv = np.linalg.inv(cov)
    diff = x - mean
    # d/dS log N(x; m, S) = (S^-1 (x-m)(x-m)^T S^-1 - S^-1) / 2
    assert_close(g, 0.5 * (inv @ np.outer(diff, diff) @ inv - inv), rtol=1e-12)
    assert_close(g, g.T)


def test_mvn_univariate_with_scalar_mean():
    x = np.array([0.3, -1.2])
    assert_close(mvn.logpdf(x, 0.5, 2.0), scipy.stats.norm.logpdf(x, 0.5, np.sqrt(2.0)))
    assert_close(mvn.cdf(x, 0.5, 2.0), scipy.stats.norm.cdf(x, 0.5, np.sqrt(2.0)))
    check_grads(mvn.logpdf, (x, np.asarray(0.5), np.asarray(2.0)), order=2, name="multivariate_normal.logpdf")


@pytest.mark.parametrize("name", ["logpdf", "cdf"])
def test_mvn_batched_cov_broadcasts(name):
    rng = np.random.default_rng(6)
    covs = np.stack([_spd(2, np.float64, rng) for _ in range(3)])  # (3, 2, 2)
    mean = rng.standard_normal(2)
    x = rng.standard_normal((4, 1, 2))  # batch (4, 1) against cov's (3,)
    out = getattr(mvn, name)(x, mean, covs)
    assert out.shape == (4, 3)
    ref = np.array([[getattr(scipy.stats.multivariate_normal(mean, c), name)(v[0]) for c in covs] for v in x])
    assert_close(out, ref, **(dict(rtol=1e-12) if name == "logpdf" else dict(atol=1e-3)))
    fn = (lambda x, m, c: mvn.cdf(x, m, c, num_points=64)) if name == "cdf" else mvn.logpdf
    check_grads(fn, (x[:2], mean, covs[:2]), order=2, modes=("fwd", "rev"), name=f"multivariate_normal.{name}")


# ---- multivariate_normal: cdf (Genz) -------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_mvn_cdf_matches_scipy(d):
    rng = np.random.default_rng(3 + d)
    cov = _spd(d, np.float64, rng)
    mean = rng.standard_normal(d)
    x = mean + rng.standard_normal((6, d))
    got = mvn.cdf(x, mean, cov)
    ref = scipy.stats.multivariate_normal(mean, cov).cdf(x)
    assert_close(got, ref, atol=1e-3 if d > 1 else 1e-14)
    assert_close(mvn.logcdf(x, mean, cov), np.log(got), rtol=1e-14)
    assert got.shape == (6,) and np.all((got > 0) & (got < 1))


def test_mvn_cdf_is_deterministic_and_converges():
    rng = np.random.default_rng(4)
    cov, mean = _spd(3, np.float64, rng), np.zeros(3)
    x = np.array([0.4, -0.2, 1.0])
    assert mvn.cdf(x, mean, cov) == mvn.cdf(x, mean, cov)
    ref = scipy.stats.multivariate_normal.cdf(x, mean, cov, maxpts=10 ** 7, abseps=1e-9, releps=1e-9)
    errors = [abs(mvn.cdf(x, mean, cov, num_points=n) - ref) for n in (256, 16384)]
    assert errors[1] < 1e-4 and errors[1] < errors[0]
    # far from the mass: the clamp of ndtri's argument keeps it finite
    far = np.array([-40.0, 0.0, 0.0])
    assert mvn.cdf(far, mean, cov) >= 0 and np.isfinite(tg.grad(mvn.cdf)(far, mean, cov)).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("d", [2, 3])
def test_mvn_cdf_gradients_are_those_of_the_estimator(d, dtype):
    rng = np.random.default_rng(5)
    cov = _spd(d, dtype, rng)
    mean = np.asarray(rng.standard_normal(d), dtype)
    x = np.asarray(mean + rng.standard_normal((2, d)), dtype)
    check_grads(lambda x, m, c: mvn.cdf(x, m, c, num_points=128), (x, mean, cov), order=2,
                modes=("fwd", "rev"), name="multivariate_normal.cdf")
    assert np.result_type(mvn.cdf(x, mean, cov)) == dtype


def test_mvn_cdf_gradient_in_x_is_close_to_the_true_one():
    # d/dx1 P(X1 <= x1, X2 <= x2) = pdf_1(x1) * P(X2 <= x2 | X1 = x1), a closed form in 2-D
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    mean = np.array([0.1, -0.3])
    x = np.array([0.5, 0.2])
    g = tg.grad(mvn.cdf)(x, mean, cov)
    cond_mean = mean[1] + cov[1, 0] / cov[0, 0] * (x[0] - mean[0])
    cond_sd = np.sqrt(cov[1, 1] - cov[1, 0] ** 2 / cov[0, 0])
    expected = scipy.stats.norm.pdf(x[0], mean[0], 1.0) * scipy.stats.norm.cdf(x[1], cond_mean, cond_sd)
    assert_close(g[0], expected, atol=1e-4)
