"""The known traps of issue 3, in one place: each derivative is finite and has the documented value, in
both modes (docs/numpy.md, "Conventions at kinks and ties")."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.special as tsp
from _tol import assert_close

ZERO = np.zeros(3)
ONES = np.ones(3)


def both_modes(fn, x, v):
    """``(grad, jvp along v)`` of a scalar ``fn`` at ``x``."""
    return tg.grad(fn)(x), tg.jvp(fn, (x,), (v,))[1]


@pytest.mark.parametrize("fn", [
    lambda x: tnp.linalg.norm(x),
    lambda x: tnp.sqrt(tnp.sum(x ** 2)),
    lambda x: tnp.sqrt(tnp.sum(tnp.square(x))),
    lambda x: tnp.sqrt(tnp.sum(tnp.abs(x) ** 2.0)),
], ids=["norm", "sqrt-sum-power", "sqrt-sum-square", "sqrt-sum-abs-power"])
def test_euclidean_norm_at_zero_has_gradient_zero(fn):
    # convention: the minimum-norm subgradient 0 (a zero derivative stops an infinite cotangent)
    with np.errstate(divide="ignore", invalid="ignore"):
        g, t = both_modes(fn, ZERO, ONES)
    np.testing.assert_array_equal(g, ZERO)
    assert float(t) == 0.0


def test_euclidean_norm_away_from_zero_is_unchanged():
    x = np.array([3.0, 4.0, 0.0])
    for fn in (tnp.linalg.norm, lambda x: tnp.sqrt(tnp.sum(x ** 2))):
        g, t = both_modes(fn, x, ONES)
        assert_close(g, x / 5.0)
        assert_close(t, 7.0 / 5.0)
        tg.testing.check_grads(fn, (x + 0.1,))


def test_sqrt_at_zero_is_infinite():
    with np.errstate(divide="ignore"):
        assert tg.grad(tnp.sqrt)(0.0) == np.inf


@pytest.mark.parametrize("x,expected", [
    ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
    ([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]),
    ([0.0, 5.0, 3.0], [15.0, 0.0, 0.0]),
])
def test_prod_with_zeros(x, expected):
    x = np.array(x)
    g, _ = both_modes(tnp.prod, x, ONES)
    np.testing.assert_array_equal(g, expected)
    J = tg.jacfwd(tnp.prod)(x)
    np.testing.assert_array_equal(J, expected)


def test_cumprod_with_zeros():
    x = np.array([2.0, 0.0, 3.0, 0.5])
    J = tg.jacrev(tnp.cumprod)(x)
    expected = np.array([[1, 0, 0, 0], [0, 2, 0, 0], [0, 6, 0, 0], [0, 3, 0, 0]], float)
    np.testing.assert_array_equal(J, expected)
    np.testing.assert_array_equal(tg.jacfwd(tnp.cumprod)(x), expected)


def test_max_ties_split_evenly():
    x = np.array([1.0, 3.0, 3.0])
    g, t = both_modes(tnp.max, x, np.array([0.0, 1.0, 0.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5])
    assert float(t) == 0.5
    g = tg.grad(lambda x: tnp.sum(tnp.maximum(x, 3.0)))(x)
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5])


def test_logsumexp_with_minus_infinity():
    x = np.array([-np.inf, 0.0, 1.0])
    g, t = both_modes(tsp.logsumexp, x, ONES)
    softmax = np.exp(x - np.log(np.exp(0.0) + np.exp(1.0)))
    assert_close(g, softmax)
    assert_close(t, 1.0)
    H = tg.hessian(tsp.logsumexp)(x)
    assert np.all(np.isfinite(H))
    assert_close(H, np.diag(softmax) - np.outer(softmax, softmax), atol=1e-15)
