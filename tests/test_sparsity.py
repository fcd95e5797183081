"""Sparsity detection by tracing (tg.jacobian_sparsity, tg.hessian_sparsity): the detected pattern holds
every non-zero of the dense Jacobian (Hessian) at random points, and equals their pattern where every
primitive's rule is exact."""
import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp


def _true_jacobian_pattern(f, x, points=3, seed=0):
    rng = np.random.default_rng(seed)
    found = np.zeros((np.size(f(x)), x.size), dtype=bool)
    for _ in range(points):
        found |= np.asarray(tg.jacfwd(f)(rng.standard_normal(x.shape))).reshape(found.shape) != 0
    return found


def _check(f, x, exact=True):
    detected = tg.jacobian_sparsity(f, x)
    true = _true_jacobian_pattern(f, x)
    assert detected.shape == true.shape and detected.dtype == bool
    dense = detected.toarray()
    assert not (true & ~dense).any(), "a non-zero of the Jacobian is missing from the detected pattern"
    if exact:
        np.testing.assert_array_equal(dense, true)
    return detected


def _stencil(n):
    def f(x):
        u = x.reshape(n, n)
        p = tnp.pad(u, 1)
        return (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + u ** 3).ravel()
    return f


def test_five_point_stencil_exact():
    pattern = _check(_stencil(6), np.zeros(36))
    assert pattern.nnz == 36 * 5 - 4 * 6


def test_docstring_example():
    got = tg.jacobian_sparsity(lambda x: tnp.sin(x[1:]) * x[:-1], np.zeros(4)).toarray()
    np.testing.assert_array_equal(got, np.eye(3, 4, dtype=bool) | np.eye(3, 4, 1, dtype=bool))
