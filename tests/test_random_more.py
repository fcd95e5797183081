"""tapegrad.random, issue 39: ``truncated_normal`` (distribution against scipy.stats.truncnorm, strictly
inside its bounds, far tails, derivatives in the bounds against the implicit-reparameterisation formula,
jit, vmap, the device double) and keys from traced seeds (``key(i)`` under jit, vmap, fori_loop and
scan equal to ``key(int(i))`` bit for bit; ``PRNGKey``). The JAX peer tests compare distributions and
derivatives with ``jax.random.truncated_normal``; its numbers (threefry) cannot equal Philox's."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import _device
import tapegrad as tg
from _gpu import cupy_or_skip
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad import random as R
from tapegrad.testing import check_grads

stats = pytest.importorskip("scipy.stats")

N = 20_000
KS_999 = 1.95  # Kolmogorov's critical value at the 0.1% level: reject when sqrt(n) * D exceeds it


def assert_truncnorm(x, lower, upper):
    """``x`` (1-d) is a sample of the standard normal truncated to ``(lower, upper)``: strictly inside,
    its mean and variance within 5 standard errors of scipy's, and a one-sample KS test passed."""
    x = np.asarray(x, np.float64)
    law = stats.truncnorm(lower, upper)
    mean, var, _, kurtosis = (float(m) for m in law.stats(moments="mvsk"))
    n = x.size
    assert np.all(x > lower) and np.all(x < upper), (x.min(), x.max())
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / n)
    assert abs(x.var() - var) < 5 * var * np.sqrt((kurtosis + 2.0) / n)  # var(s^2) = (mu_4 - sigma^4) / n
    assert np.sqrt(n) * stats.kstest(x, law.cdf).statistic < KS_999


def implicit_gradient(x, lower, upper):
    """``(dx/dlower, dx/dupper)`` of an inverse-CDF sample ``x`` with its uniform held, from SciPy:
    ``sf(x) * pdf(lower) / pdf(x)`` and ``cdf(x) * pdf(upper) / pdf(x)`` of the truncated law (the
    reparameterisation gradient, which JAX's construction and tapegrad's both compute)."""
    law = stats.truncnorm(lower, upper)
    ratio = lambda b: np.exp(0.5 * (x * x - b * b))  # pdf(b) / pdf(x), one exp: finite in the tails
    return law.sf(x) * ratio(lower), law.cdf(x) * ratio(upper)


# ---- truncated_normal: the distribution ---------------------------------------------------------
INTERVALS = [(-1.0, 2.0), (-np.inf, np.inf), (1.5, np.inf), (-np.inf, -2.0), (0.0, 0.1), (-3.0, 3.0),
             (5.0, 6.0), (30.0, 31.0), (-37.0, -36.0), (36.0, 37.0)]


@pytest.mark.parametrize("lower, upper", INTERVALS, ids=str)
def test_truncated_normal_matches_scipys_law(lower, upper):
    assert_truncnorm(R.truncated_normal(R.key(7), lower, upper, (N,)), lower, upper)


@pytest.mark.parametrize("lower, upper", [(-1.0, 2.0), (4.0, 5.0), (12.0, 13.0), (-13.0, -12.0)], ids=str)
def test_truncated_normal_float32_keeps_the_tails(lower, upper):
    # JAX's erf form puts every float32 sample on the upper bound from about lower = 5 on
    x = R.truncated_normal(R.key(8), lower, upper, (N,), np.float32)
    assert x.dtype == np.float32
    assert_truncnorm(x, lower, upper)
    assert np.all(x > np.float32(lower)) and np.all(x < np.float32(upper))


def test_truncated_normal_shapes_dtypes_and_broadcasting():
    k = R.key(9)
    lower, upper = np.array([-1.0, 0.0, 1.0]), np.array([[2.0], [3.0]])
    x = R.truncated_normal(k, lower, upper)  # shape None: the bounds' broadcast shape
    assert x.shape == (2, 3) and x.dtype == np.float64
    assert np.all(x > lower) and np.all(x < upper)
    assert R.truncated_normal(k, -1.0, 1.0).shape == ()
    assert R.truncated_normal(k, lower, 5.0, (4, 3)).shape == (4, 3)
    for dtype in (np.float16, np.float32, np.float64):
        y = R.truncated_normal(k, -0.5, 0.5, (1000,), dtype)
        assert y.dtype == dtype and np.all(y > dtype(-0.5)) and np.all(y < dtype(0.5))
    # an array bound keeps the result dtype (cast, as JAX casts to dtype)
    assert R.truncated_normal(k, np.float32(-1.0), 1.0, (3,)).dtype == np.float64
    assert R.truncated_normal(k, np.array([-1.0]), 1.0, (3,), np.float32).dtype == np.float32


def test_truncated_normal_is_strictly_inside_a_one_ulp_interval():
    # rounding can only land on a bound here: the clip moves every value one ulp inside, as JAX's does
    lower = 1.0
    upper = np.nextafter(np.nextafter(lower, 2.0), 2.0)
    x = R.truncated_normal(R.key(10), lower, upper, (50,))
    np.testing.assert_array_equal(x, np.nextafter(lower, 2.0))


def test_truncated_normal_is_reproducible_and_rekeyed():
    a, b = R.split(R.key(11))
    np.testing.assert_array_equal(R.truncated_normal(a, -1.0, 1.0, (5,)), R.truncated_normal(a, -1.0, 1.0, (5,)))
    assert not np.array_equal(R.truncated_normal(a, -1.0, 1.0, (5,)), R.truncated_normal(b, -1.0, 1.0, (5,)))
    # the inverse CDF of the key's uniform draw: a wider interval moves each sample, in order
    u = R.uniform(a, (5,))
    x = R.truncated_normal(a, -np.inf, np.inf, (5,))
    assert_close(x, stats.norm.ppf(u), rtol=1e-12)


# ---- truncated_normal: derivatives in the bounds ------------------------------------------------
def test_truncated_normal_gradient_is_the_implicit_one():
    k = R.key(12)
    lower, upper = np.array([-1.0, 0.5, -3.0, 30.0, -37.0]), np.array([2.0, 4.0, -2.5, np.inf, -36.0])
    x = R.truncated_normal(k, lower, upper)
    d_lower, d_upper = implicit_gradient(x, lower, upper)
    jac = tg.jacrev(lambda lo, hi: R.truncated_normal(k, lo, hi), grad_position=(0, 1))(lower, upper)
    assert_close(np.diag(jac[0]), d_lower, rtol=1e-8)
    assert_close(np.diag(jac[1]), d_upper, rtol=1e-8)
    _, t = tg.jvp(lambda lo, hi: R.truncated_normal(k, lo, hi), (lower, upper), (np.ones(5), np.zeros(5)))
    assert_close(t, d_lower, rtol=1e-8)
    assert np.all(np.isfinite(jac[0])) and np.all(np.isfinite(jac[1]))


@pytest.mark.parametrize("lower, upper", [(-1.0, 2.0), (0.5, 3.0), (-2.5, -0.5), (1.0, 8.0)], ids=str)
def test_truncated_normal_derivatives_to_third_order(lower, upper):
    k = R.key(13)
    check_grads(lambda lo, hi: R.truncated_normal(k, lo, hi, (3,)), (np.float64(lower), np.float64(upper)), order=3)


def test_truncated_normal_derivatives_with_broadcast_bounds():
    k = R.key(14)
    check_grads(lambda lo, hi: R.truncated_normal(k, lo, hi, (2, 3)), (np.array([-1.0, 0.0, 0.5]), np.array(2.5)),
                order=2)


def test_truncated_normal_hessian_routes_agree():
    k = R.key(15)
    f = lambda b: R.truncated_normal(k, b[0], b[1], (4,)).sum()
    b = np.array([-0.5, 1.5])
    want = tg.jacfwd(tg.jacrev(f))(b)
    assert_close(tg.hessian(f)(b), want, rtol=1e-10)
    assert_close(tg.jit(tg.hessian(f))(b), want, rtol=1e-10)
    assert_close(tg.jacrev(tg.jacfwd(tg.jit(f)))(b), want, rtol=1e-10)


# ---- truncated_normal under jit and vmap --------------------------------------------------------
def test_truncated_normal_under_jit():
    keys = list(R.split(R.key(16), 3))
    draw = tg.jit(lambda k, lo, hi: R.truncated_normal(k, lo, hi, (6,)))
    for k in keys:
        np.testing.assert_array_equal(draw(k, np.array(-1.0), np.array(0.5)), R.truncated_normal(k, -1.0, 0.5, (6,)))
    assert draw._cache_size() == 1
    assert "random_truncated_normal" in str(tg.make_program(lambda k: R.truncated_normal(k, 0.0, 1.0, (2,)))(keys[0]))
    f = lambda lo, k: R.truncated_normal(k, lo, 2.0, (4,)).sum()
    assert_close(tg.jit(tg.grad(f))(np.array(-1.0), keys[0]), tg.grad(f)(np.array(-1.0), keys[0]), rtol=1e-12)


def test_truncated_normal_vmap_over_keys_equals_a_loop():
    check_vmap(lambda k: R.truncated_normal(k, -1.0, 2.0, (3,)), (R.key(17),), (0,), batch=4,
               draw=lambda rng: (R.key(int(rng.integers(2 ** 62))),))
    keys = R.split(R.key(18), 3)
    lower = np.array([-2.0, 0.0, 1.0])
    out = tg.vmap(lambda k, lo: R.truncated_normal(k, lo, lo + 1.0, (2,)))(keys, lower)
    np.testing.assert_array_equal(out, np.stack([R.truncated_normal(k, lo, lo + 1.0, (2,))
                                                 for k, lo in zip(keys, lower)]))


def test_truncated_normal_vmap_of_grad_with_a_shared_key():
    k = R.key(19)
    f = lambda lo: R.truncated_normal(k, lo, 3.0, (5,)).sum()
    lower = np.array([-1.0, 0.0, 2.0])
    assert_close(tg.vmap(tg.grad(f))(lower), [tg.grad(f)(lo) for lo in lower], rtol=1e-12)
    assert_close(tg.jit(tg.vmap(tg.grad(f)))(lower), [tg.grad(f)(lo) for lo in lower], rtol=1e-12)


# ---- truncated_normal on the device (the strict CuPy double) ------------------------------------
def _no_sync():
    warnings.filterwarnings("ignore", message="cupyx.allow_synchronize will be removed")
    return _device.xpx.allow_synchronize(False)


def test_truncated_normal_on_the_device_reads_nothing_back():
    k = R.key(20)
    draws = {"f64": lambda k: R.truncated_normal(k, -1.0, 2.0, (4, 3)),
             "f32-tail": lambda k: R.truncated_normal(k, 5.0, np.inf, (6,), np.float32),
             "f16": lambda k: R.truncated_normal(k, -0.5, 0.5, (5,), np.float16)}
    with warnings.catch_warnings():
        for name, draw in draws.items():
            routes = (("eager", draw, k), ("jit", tg.jit(draw), k), ("vmap", tg.vmap(draw), R.split(k, 3)))
            for route, fn, key in routes:
                want = fn(key)
                before = _device.synchronizations()
                with _no_sync():
                    got = fn(_device.asarray(key))
                assert _device.synchronizations() == before
                assert type(got) is _device.DeviceArray and got.dtype == want.dtype, (name, route)
                np.testing.assert_array_equal(_device.get(got), want, err_msg=f"{name} ({route})")
        lower = np.array([-1.0, 0.0])
        f = lambda lo, k: R.truncated_normal(k, lo, 3.0).sum()
        with _no_sync():
            g = tg.grad(f)(_device.asarray(lower), _device.asarray(k))
        assert type(g) is _device.DeviceArray
        np.testing.assert_array_equal(_device.get(g), tg.grad(f)(lower, k))


@pytest.mark.gpu
@pytest.mark.parametrize("lower, upper, dtype, rtol", [(-1.0, 2.0, np.float64, 1e-12), (5.0, np.inf, np.float32, 1e-5),
                                                       (-37.0, -36.0, np.float64, 1e-12)], ids=str)
def test_truncated_normal_on_cupy(lower, upper, dtype, rtol):
    """On a real GPU the uniform draw is NumPy's bit for bit, and cupyx's ndtr and ndtri agree with
    SciPy's to rounding, eager, jitted and in the derivative."""
    cupy = cupy_or_skip()
    k = R.key(24)
    draw = lambda k: R.truncated_normal(k, lower, upper, (1000,), dtype)
    for fn in (draw, tg.jit(draw)):
        x = fn(cupy.asarray(k))
        assert isinstance(x, cupy.ndarray) and x.dtype == dtype
        host = cupy.asnumpy(x)
        assert np.all(host > dtype(lower)) and np.all(host < dtype(upper))
        assert_close(host, draw(k), rtol=rtol)
    f = lambda lo, k: R.truncated_normal(k, lo, upper, (), dtype)
    lo = np.asarray(lower + 0.5, dtype)
    assert_close(cupy.asnumpy(tg.grad(f)(cupy.asarray(lo), cupy.asarray(k))), tg.grad(f)(lo, k), rtol=100 * rtol)


@pytest.mark.gpu
def test_keys_of_cupy_seeds():
    cupy = cupy_or_skip()
    seeds = [0, 5, 2 ** 40]
    keys = tg.vmap(R.key)(cupy.asarray(np.array(seeds)))
    assert isinstance(keys, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(keys), np.stack([R.key(s) for s in seeds]))


# ---- keys from traced seeds ---------------------------------------------------------------------
SEEDS = [0, 1, 7, 2 ** 31 - 1, 2 ** 40 + 3]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.uint64])
def test_key_of_a_traced_seed_is_the_key_of_its_value(dtype):
    make = tg.jit(R.key)
    for seed in SEEDS if np.iinfo(dtype).max > 2 ** 40 else SEEDS[:4]:
        k = make(np.asarray(seed, dtype))
        assert k.dtype == np.uint64 and k.shape == (2,)
        np.testing.assert_array_equal(k, R.key(seed))
        np.testing.assert_array_equal(R.key(np.asarray(seed, dtype)), R.key(seed))  # a concrete 0-d array
    assert make._cache_size() == 1  # the seed is traced, not baked in
    np.testing.assert_array_equal(tg.jit(R.key)(np.asarray(2 ** 64 - 1, np.uint64)), R.key(2 ** 64 - 1))
    assert "random_key" in str(tg.make_program(R.key)(np.asarray(3)))


def test_prngkey_is_key():
    assert R.PRNGKey is R.key
    np.testing.assert_array_equal(R.PRNGKey(5), R.key(5))


def test_key_of_a_traced_seed_draws_under_jit():
    draw = tg.jit(lambda i: R.normal(R.key(i), (3,)))
    for seed in (0, 4, 9):
        np.testing.assert_array_equal(draw(np.asarray(seed)), R.normal(R.key(seed), (3,)))


def test_key_under_vmap_gives_a_batch_of_keys():
    seeds = np.array([3, 0, 12, 2 ** 33])
    want = np.stack([R.key(int(s)) for s in seeds])
    np.testing.assert_array_equal(tg.vmap(R.key)(seeds), want)
    np.testing.assert_array_equal(tg.jit(tg.vmap(R.key))(seeds), want)
    np.testing.assert_array_equal(tg.vmap(tg.vmap(R.key))(seeds.reshape(2, 2)), want.reshape(2, 2, 2))
    draws = tg.vmap(lambda s: R.uniform(R.key(s), (2,)))(seeds)
    np.testing.assert_array_equal(draws, np.stack([R.uniform(R.key(int(s)), (2,)) for s in seeds]))


def test_key_of_a_loop_index():
    def body(i, acc):
        return acc + R.normal(R.key(i), (2,))
    f = lambda x: tg.fori_loop(0, 5, body, x)
    want = sum(R.normal(R.key(i), (2,)) for i in range(5))
    for fn in (f, tg.jit(f)):
        assert_close(fn(np.zeros(2)), want, rtol=1e-14)
    _, keys = tg.scan(lambda c, i: (c, R.key(i)), 0.0, np.arange(4))
    np.testing.assert_array_equal(keys, np.stack([R.key(i) for i in range(4)]))
    # the index feeds a draw that feeds a derivative: the key itself carries none
    g = tg.grad(lambda x: tg.fori_loop(0, 3, lambda i, a: a * R.uniform(R.key(i), (), np.float64, 1.0, 2.0), x))
    assert_close(g(1.0), np.prod([R.uniform(R.key(i), (), np.float64, 1.0, 2.0) for i in range(3)]), rtol=1e-14)


def test_key_of_a_device_seed():
    seed = _device.asarray(np.asarray(17))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="cupyx.allow_synchronize will be removed")
        k = R.key(seed)  # SeedSequence runs on the host: the seed is read back (declared)
    assert type(k) is _device.DeviceArray
    np.testing.assert_array_equal(_device.get(k), R.key(17))


# ---- errors --------------------------------------------------------------------------------------
ERRORS = [
    ("int-dtype", lambda: R.truncated_normal(R.key(0), -1.0, 1.0, (2,), np.int32), ValueError,
     "truncated_normal: dtype must be a real float dtype"),
    ("empty-interval", lambda: R.truncated_normal(R.key(0), 1.0, 1.0), ValueError,
     "truncated_normal: lower (1.0) must be less than upper (1.0)"),
    ("reversed", lambda: R.truncated_normal(R.key(0), 2, -1.0), ValueError, "lower (2.0) must be less than upper"),
    ("bounds-do-not-broadcast", lambda: R.truncated_normal(R.key(0), np.zeros(2), np.ones(3)), ValueError,
     "truncated_normal: lower of shape (2,) and upper of shape (3,) do not broadcast together"),
    ("bound-grows-shape", lambda: R.truncated_normal(R.key(0), np.zeros((2, 3)), 1.0, (3,)), ValueError,
     "truncated_normal: lower of shape (2, 3) does not broadcast to shape (3,)"),
    ("bound-str", lambda: R.truncated_normal(R.key(0), "a", 1.0), TypeError,
     "truncated_normal: lower and upper must be numbers or arrays"),
    ("key", lambda: R.truncated_normal(3, -1.0, 1.0), TypeError, "truncated_normal: key must be a single random key"),
    ("shape", lambda: R.truncated_normal(R.key(0), -1.0, 1.0, 2.5), TypeError, "truncated_normal: shape must be"),
    ("seed-2d", lambda: tg.jit(R.key)(np.arange(2)), TypeError, "tg.vmap(tapegrad.random.key)(seeds)"),
]


@pytest.mark.parametrize("name, call, error, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_truncated_normal_without_scipy_says_what_to_install(monkeypatch):
    def missing(xp, name):
        raise ImportError("No module named 'scipy'")
    monkeypatch.setattr(R, "scipy_module", missing)
    with pytest.raises(ImportError, match="truncated_normal needs ndtr and ndtri from scipy.special .*pip install"):
        R.truncated_normal(R.key(0), -1.0, 1.0)


# ---- against JAX ---------------------------------------------------------------------------------
@pytest.mark.peer("jax")
@pytest.mark.parametrize("lower, upper", [(-1.0, 2.0), (0.5, np.inf), (-3.0, -1.0)], ids=str)
def test_truncated_normal_matches_jax(lower, upper):
    """Same law (moments, bounds, KS against scipy and a two-sample KS against JAX's draws) and the
    same derivatives in the bounds: JAX's gradient at its own samples and tapegrad's at its own are
    both the implicit gradient of the sample (float64)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    ours = R.truncated_normal(R.key(21), lower, upper, (N,))
    theirs = np.asarray(jax.random.truncated_normal(jax.random.key(21), lower, upper, (N,), np.float64))
    assert_truncnorm(theirs, lower, upper)
    assert_truncnorm(ours, lower, upper)
    n = N / 2  # the two-sample statistic's effective size, N * N / (N + N)
    assert np.sqrt(n) * stats.ks_2samp(ours, theirs).statistic < KS_999

    m = 64
    lo, hi = np.full(m, lower), np.full(m, upper)
    jkey = jax.random.key(22)
    jax_draw = lambda lo, hi: jax.random.truncated_normal(jkey, lo, hi, (m,), np.float64)
    x_jax = np.asarray(jax_draw(lo, hi))
    d_jax = [np.diag(np.asarray(j)) for j in jax.jacfwd(jax_draw, argnums=(0, 1))(lo, hi)]
    k = R.key(22)
    draw = lambda lo, hi: R.truncated_normal(k, lo, hi)
    x = draw(lo, hi)
    d = [np.diag(j) for j in tg.jacfwd(draw, grad_position=(0, 1))(lo, hi)]
    for got, want in zip(d_jax, implicit_gradient(x_jax, lo, hi)):
        keep = (x_jax > lo) & (x_jax < hi)  # JAX's clipped samples have a zero derivative
        assert_close(got[keep], want[keep], rtol=1e-10)
    for got, want in zip(d, implicit_gradient(x, lo, hi)):
        assert_close(got, want, rtol=1e-10)
