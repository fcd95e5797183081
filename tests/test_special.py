"""tapegrad.scipy.special: values against SciPy over each function's domain, derivatives against finite
differences to order 2 in both modes (tg.testing.check_grads), in float64 and float32; the documented
conventions (xlogy at 0, i1 at 0, the tails of log_ndtr) and the SciPy-less fallback."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as ss

import tapegrad as tg
import tapegrad.scipy.special as tsp
from _gpu import cupy_or_skip
from _specs import OpSpec
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]
DOMAINS = {
    "real": (-2.0, 2.0),
    "pos": (0.5, 2.5),
    "unit": (-0.8, 0.8),
    "prob": (0.15, 0.85),
    "erfc": (0.3, 1.7),      # erfcinv's domain, away from its poles at 0 and 2
    "near0": (-0.3, 0.3),    # the series branch of i1(x)/x
    "wide": (-6.0, 6.0),     # both branches of log_ndtr's derivative, and i0/i1 past the series
    "negoff": (-2.9, -2.1),  # gamma functions left of 0, between poles
    "multi": (2.0, 3.0),     # multigammaln with d = 3 needs a > 1
}


def _draw(domain, shape, dtype, rng):
    lo, hi = DOMAINS[domain]
    return np.asarray(rng.uniform(lo, hi, shape), dtype=dtype)


UNARY = [
    OpSpec("erf", tsp.erf, ss.erf),
    OpSpec("erfc", tsp.erfc, ss.erfc),
    OpSpec("erfcx", tsp.erfcx, ss.erfcx),
    OpSpec("erfinv", tsp.erfinv, ss.erfinv, ("unit",)),
    OpSpec("erfcinv", tsp.erfcinv, ss.erfcinv, ("erfc",)),
    OpSpec("ndtr", tsp.ndtr, ss.ndtr, ("real", "wide")),
    OpSpec("log_ndtr", tsp.log_ndtr, ss.log_ndtr, ("real", "wide")),
    OpSpec("ndtri", tsp.ndtri, ss.ndtri, ("prob",)),
    OpSpec("expit", tsp.expit, ss.expit),
    OpSpec("logit", tsp.logit, ss.logit, ("prob",)),
    OpSpec("log_expit", tsp.log_expit, ss.log_expit),
    OpSpec("gammaln", tsp.gammaln, ss.gammaln, ("pos", "negoff")),
    OpSpec("digamma", tsp.digamma, ss.digamma, ("pos", "negoff")),
    OpSpec("psi", tsp.psi, ss.psi, ("pos",)),
    OpSpec("gamma", tsp.gamma, ss.gamma, ("pos", "negoff")),
    OpSpec("polygamma0", lambda x: tsp.polygamma(0, x), lambda x: ss.polygamma(0, x), ("pos",)),
    OpSpec("polygamma1", lambda x: tsp.polygamma(1, x), lambda x: ss.polygamma(1, x), ("pos",)),
    OpSpec("polygamma3", lambda x: tsp.polygamma(3, x), lambda x: ss.polygamma(3, x), ("pos",)),
    OpSpec("multigammaln", lambda x: tsp.multigammaln(x, 3), lambda x: ss.multigammaln(x, 3), ("multi",)),
    OpSpec("entr", tsp.entr, ss.entr, ("pos",)),
    OpSpec("i0", tsp.i0, ss.i0, ("real", "near0", "wide")),
    OpSpec("i1", tsp.i1, ss.i1, ("real", "near0", "wide")),
    OpSpec("i0e", tsp.i0e, ss.i0e, ("real", "wide")),
    OpSpec("i1e", tsp.i1e, ss.i1e, ("real", "near0", "wide")),
]
UNARY_CASES = [(spec, domain) for spec in UNARY for domain in spec.domains]
SHAPES = [(), (3,), (3, 2)]


def _value_tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("spec,domain", UNARY_CASES, ids=[f"{s.name}-{d}" for s, d in UNARY_CASES])
def test_unary(spec, domain, shape, dtype):
    x = _draw(domain, shape, dtype, np.random.default_rng(0))
    out = spec.op(x)
    assert np.result_type(out) == dtype and np.shape(out) == shape
    assert_close(out, spec.ref(x.astype(np.float64)), **_value_tol(dtype))
    check_grads(spec.op, (x,), order=2, modes=("fwd", "rev"), name=spec.name)
    g = tg.grad(lambda x: spec.op(x).sum())(x)
    assert g.dtype == dtype and g.shape == shape


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("spec,domain", UNARY_CASES, ids=[f"{s.name}-{d}" for s, d in UNARY_CASES])
def test_unary_vmap(spec, domain, shape, dtype):
    x = _draw(domain, shape, dtype, np.random.default_rng(0))
    check_vmap_mixes(spec.op, (x,))


BINARY = [
    OpSpec("xlogy", tsp.xlogy, ss.xlogy, ("real", "pos")),
    OpSpec("xlog1py", tsp.xlog1py, ss.xlog1py, ("real", "pos")),
    OpSpec("betaln", tsp.betaln, ss.betaln, ("pos", "pos")),
]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((3, 2), (2,)), ((1, 2), (3, 1)), ((), (3, 2))]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw(spec.domains[0], shapes[0], dtype, rng), _draw(spec.domains[1], shapes[1], dtype, rng)
    out = spec.op(x, y)
    assert np.result_type(out) == dtype
    assert_close(out, spec.ref(x.astype(np.float64), y.astype(np.float64)), **_value_tol(dtype))
    check_grads(spec.op, (x, y), order=2, modes=("fwd", "rev"), name=spec.name)
    gx, gy = tg.grad(lambda x, y: spec.op(x, y).sum(), grad_position=(0, 1))(x, y)
    assert (gx.shape, gy.shape, gx.dtype, gy.dtype) == (shapes[0], shapes[1], dtype, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_vmap(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw(spec.domains[0], shapes[0], dtype, rng), _draw(spec.domains[1], shapes[1], dtype, rng)
    check_vmap_mixes(spec.op, (x, y))
    check_vmap(lambda x: spec.op(1.5, x), (x,), -1)  # a weak Python scalar keeps float32 in the batch too


def test_polygamma_with_a_mapped_integer_order_vmap():
    n, x = np.array([0, 1, 2]), _draw("pos", (3,), np.float64, np.random.default_rng(2))
    check_vmap_mixes(tsp.polygamma, (n, x), draw=lambda rng: (rng.permutation(n), x * 1.1))


@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_with_python_scalar_keeps_float32(spec):
    x = _draw("pos", (3,), np.float32, np.random.default_rng(2))
    assert np.result_type(spec.op(x, 1.5)) == np.float32
    assert np.result_type(spec.op(1.5, x)) == np.float32
    check_grads(lambda x: spec.op(x, 1.5), (x,), order=2, name=spec.name)


@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(name, axis):
    x = _draw("real", (3, 4), np.float64, np.random.default_rng(3))
    fn = lambda x: getattr(tsp, name)(x, axis=axis)  # noqa: E731
    assert_close(fn(x), getattr(ss, name)(x, axis=axis), rtol=1e-12)
    check_grads(fn, (x,), order=2, name=name)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_softmax_vmap(name, axis, dtype):
    x = _draw("real", (3, 4), dtype, np.random.default_rng(3))
    check_vmap_mixes(lambda x: getattr(tsp, name)(x, axis=axis), (x,), slack=10.0)


# ---- conventions and numerical care --------------------------------------------------------------
@pytest.mark.parametrize("name,ref", [("xlogy", np.log), ("xlog1py", np.log1p)])
def test_xlogy_is_zero_at_x_zero_with_log_y_gradient(name, ref):
    f = getattr(tsp, name)
    assert f(0.0, 0.0) == 0.0 and f(0.0, 3.0) == 0.0
    y = np.array([0.5, 2.0, 3.0])
    x = np.zeros(3)
    assert_close(tg.grad(lambda x: f(x, y).sum())(x), ref(y))
    _, tangent = tg.jvp(lambda x: f(x, y), (x,), (np.ones(3),))
    assert_close(tangent, ref(y))
    assert_close(tg.grad(lambda y: f(x, y).sum())(y), 0.0)
    check_grads(f, (x, y), order=2, name=name)  # differentiable at x = 0 to order 2


def test_log_ndtr_far_left_tail_value_and_gradients_float64():
    x = np.array([-1e5, -1e3, -40.0, -10.0])
    assert_close(tsp.log_ndtr(x), ss.log_ndtr(x), rtol=1e-14)
    g = tg.grad(lambda x: tsp.log_ndtr(x).sum())(x)
    # the inverse Mills ratio: -x - 1/x + 2/x**3 - 10/x**5 + ... as x -> -inf (exact to rounding for
    # |x| >= 1e3), and pdf/cdf from their logs where that loses only ~x**2/2 * eps
    assert_close(g[:2], (-x - 1 / x + 2 / x ** 3 - 10 / x ** 5)[:2], rtol=1e-14)
    log_pdf = -0.5 * x[2:] ** 2 - 0.5 * np.log(2 * np.pi)
    assert_close(g[2:], np.exp(log_pdf - ss.log_ndtr(x[2:])), rtol=1e-12)
    _, fwd = tg.jvp(tsp.log_ndtr, (x,), (np.ones(4),))
    assert_close(fwd, g, rtol=1e-14)
    h = tg.grad(lambda x: tg.grad(lambda x: tsp.log_ndtr(x).sum())(x).sum())(x)
    # relative precision lost to cancellation: about eps * x**2 (documented in log_ndtr)
    assert_close(h[1:3], (-1 + 1 / x ** 2 - 6 / x ** 4 + 50 / x ** 6)[1:3], rtol=1e-9)
    assert np.isfinite(h).all()
    check_grads(tsp.log_ndtr, (np.array([-60.0, -25.0, -8.0]),), order=2, name="log_ndtr")


def test_log_ndtr_tails_float32_and_right_tail():
    x = np.array([-30.0, -12.0, 0.0, 12.0, 40.0], np.float32)
    g = tg.grad(lambda x: tsp.log_ndtr(x).sum())(x)
    assert g.dtype == np.float32 and np.isfinite(g).all()
    expected = np.exp(-0.5 * x.astype(np.float64) ** 2) / np.sqrt(2 * np.pi) / ss.ndtr(x.astype(np.float64))
    assert_close(g, expected, rtol=1e-5, atol=1e-30)
    # second derivatives stay finite on both sides (erfcx would overflow right of 0)
    h = tg.grad(lambda x: tg.grad(lambda x: tsp.log_ndtr(x).sum())(x).sum())(x)
    assert np.isfinite(h).all()
    _, t2 = tg.jvp(lambda x: tg.jvp(tsp.log_ndtr, (x,), (np.ones_like(x),))[1], (x,), (np.ones_like(x),))
    assert_close(t2, h, rtol=1e-5, atol=1e-6)


def test_i1_at_zero_exact_to_order_three():
    d1 = tg.grad(lambda x: tsp.i1(x))
    d2 = tg.grad(d1)
    d3 = tg.grad(d2)
    assert float(d1(0.0)) == 0.5 and float(d2(0.0)) == 0.0
    assert_close(d3(0.0), 3 / 8, rtol=1e-14)  # i1(x) = x/2 + x**3/16 + ...
    assert_close(tg.grad(lambda x: tsp.i1e(x))(0.0), 0.5)
    assert_close(tg.grad(lambda x: tsp.i0(x))(0.0), 0.0)
    _, t = tg.jvp(lambda x: tg.jvp(tsp.i1, (x,), (1.0,))[1], (0.0,), (1.0,))
    assert float(t) == 0.0
    # both sides of the series radius agree with SciPy's recurrence i1' = (i0 + iv(2, .)) / 2
    x = np.array([-3.0, -1.0 - 1e-9, -1.0 + 1e-9, -0.5, 0.3, 1.0 - 1e-9, 1.0 + 1e-9, 7.0])
    assert_close(tg.grad(lambda x: tsp.i1(x).sum())(x), (ss.i0(x) + ss.iv(2, x)) / 2, rtol=1e-13)


def test_derivative_identities():
    x = np.array([0.7, 1.3, 4.0])
    assert_close(tg.grad(lambda x: tsp.gammaln(x).sum())(x), ss.digamma(x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.digamma(x).sum())(x), ss.polygamma(1, x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.polygamma(2, x).sum())(x), ss.polygamma(3, x), rtol=1e-13)
    n = np.array([0, 1, 2])  # an integer array order, broadcast against x
    assert_close(tsp.polygamma(n, x), ss.polygamma(n, x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.polygamma(n, x).sum())(x), ss.polygamma(n + 1, x), rtol=1e-13)
    q = np.array([1e-10, 0.5, 0.9])  # the inverse-function rule: 1 / pdf(ndtri(q))
    assert_close(tg.grad(lambda q: tsp.ndtri(q).sum())(q),
                 np.sqrt(2 * np.pi) * np.exp(ss.ndtri(q) ** 2 / 2), rtol=1e-12)
    # the fourth derivative of gammaln, by jvp of jvp of jvp of jvp: polygamma(3, x)
    f = tsp.gammaln
    for _ in range(4):
        f = (lambda g: lambda x: tg.jvp(g, (x,), (np.ones_like(x),))[1])(f)
    assert_close(f(x), ss.polygamma(3, x), rtol=1e-12)


def test_dtypes_and_scalars():
    assert np.result_type(tsp.polygamma(1, np.float32(2.0))) == np.float32
    assert np.result_type(tsp.gammaln(np.arange(1, 4))) == np.float64
    assert np.result_type(tsp.xlogy(np.float32([1.0]), 2.0)) == np.float32
    assert_close(tsp.gamma(5), 24.0)
    assert_close(tg.grad(tsp.gammaln)(2.5), ss.digamma(2.5))


def test_without_scipy_core_imports_and_errors_name_pip_install():
    code = """
import sys
sys.modules['scipy'] = None
sys.modules['scipy.special'] = None
sys.path.insert(0, sys.argv[1])  # the tests folder, for _tol
import math
import numpy as np
import tapegrad as tg, tapegrad.scipy.special as tsp, tapegrad.scipy.stats
from _tol import assert_close

x = np.array([0.3, 1.7], np.float32)
assert tsp.erf(x).dtype == np.float32
assert_close(tsp.erf(x), [math.erf(v) for v in x])
assert_close(tsp.erfc(x), [math.erfc(v) for v in x])
assert_close(tsp.gamma(x), [math.gamma(v) for v in x])
assert_close(tsp.gammaln(x), [math.lgamma(v) for v in x])
assert_close(tg.grad(lambda x: tsp.erf(x).sum())(x), 2 / math.sqrt(math.pi) * np.exp(-x * x))
try:
    tsp.digamma(x)
except ImportError as e:
    assert 'pip install scipy' in str(e) and 'digamma' in str(e), e
else:
    raise AssertionError('no ImportError')
print('ok')
"""
    result = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_check_grads_catches_a_wrong_rule():
    from tapegrad._rules import defjvp, defvjp
    from tapegrad.scipy.special._error import erfc_p
    saved = erfc_p.vjp_rules, erfc_p.jvp_rule
    try:
        defvjp(erfc_p, lambda ct, ans, x: ct * ans)
        defjvp(erfc_p, lambda t, ans, x: t * ans)
        for mode in ("fwd", "rev"):
            with pytest.raises(AssertionError, match="erfc"):
                check_grads(tsp.erfc, (np.array([0.3, 0.9]),), order=1, modes=(mode,), name="erfc")
    finally:
        erfc_p.vjp_rules, erfc_p.jvp_rule = saved


@pytest.mark.gpu
def test_cupy_matches_numpy():
    cp = cupy_or_skip()
    x = np.array([0.3, 0.9, 1.7])
    for spec in UNARY:
        if spec.name in ("multigammaln",):
            continue
        lo, hi = DOMAINS[spec.domains[0]]
        xs = lo + (hi - lo) * (x - 0.3) / 1.4
        got = spec.op(cp.asarray(xs))
        assert isinstance(got, cp.ndarray), spec.name
        assert_close(cp.asnumpy(got), spec.op(xs), rtol=1e-10, err_msg=spec.name)
        g = tg.grad(lambda x, op=spec.op: op(x).sum())(cp.asarray(xs))
        assert_close(cp.asnumpy(g), tg.grad(lambda x, op=spec.op: op(x).sum())(xs), rtol=1e-9,
                     err_msg=spec.name)
