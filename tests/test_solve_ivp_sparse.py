"""``solve_ivp(method="Rosenbrock23", jac_sparsity=S)``: the stiff method with its Jacobian by colouring and
its linear systems solved sparse, against the same method dense (the steps are the same up to rounding),
its derivatives against the dense route's, and the counts."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.integrate import solve_ivp

N = 30
T_EVAL = np.array([0.05, 0.2, 0.5])


def reaction_diffusion(t, y, diffusion, rate):
    """A stiff 1-D heat equation with a cubic reaction: fast diffusion modes (N^2 D), zero at the walls."""
    padded = tnp.pad(y, 1)
    laplacian = (padded[:-2] - 2 * y + padded[2:]) * (N + 1) ** 2
    return diffusion * laplacian - rate * y ** 3 + tnp.sin(t)


Y0 = np.sin(np.pi * np.arange(1, N + 1) / (N + 1))
PATTERN = sp.diags_array([np.ones(N - 1), np.ones(N), np.ones(N - 1)], offsets=[-1, 0, 1], format="csr") != 0
SETTINGS = dict(t_eval=T_EVAL, rtol=1e-6, atol=1e-9)


def solve(y0, diffusion, rate, **kwargs):
    return solve_ivp(reaction_diffusion, (0.0, T_EVAL[-1]), y0, method="Rosenbrock23", args=(diffusion, rate),
                     **SETTINGS, **kwargs)


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b)))


def test_the_same_steps_and_solution_as_the_dense_method():
    dense = solve(Y0, 1.0, 2.0)
    sparse = solve(Y0, 1.0, 2.0, jac_sparsity=PATTERN)
    assert int(sparse.nfev) == int(dense.nfev) and int(sparse.njev) == int(dense.njev)
    assert int(sparse.nlu) == int(dense.nlu) // 3  # one factorisation shared by a step's three solves
    assert _rel(sparse.y, dense.y) < 1e3 * np.finfo(np.float64).eps


def test_a_boolean_array_and_a_detected_pattern_serve_as_jac_sparsity():
    detected = tg.jacobian_sparsity(lambda y: reaction_diffusion(0.0, y, 1.0, 2.0), Y0)
    assert (detected != PATTERN).nnz == 0
    dense = solve(Y0, 1.0, 2.0, jac_sparsity=PATTERN.toarray()).y
    np.testing.assert_allclose(solve(Y0, 1.0, 2.0, jac_sparsity=detected).y, dense, rtol=1e-12)


def test_gradients_match_the_dense_route_in_both_modes():
    def loss(params, **kwargs):
        return tnp.sum(solve(Y0, params[0], params[1], **kwargs).y ** 2)

    params = np.array([1.0, 2.0])
    dense_grad = tg.grad(loss)(params)
    assert _rel(tg.grad(lambda p: loss(p, jac_sparsity=PATTERN))(params), dense_grad) < 1e-9
    assert _rel(tg.jacfwd(lambda p: loss(p, jac_sparsity=PATTERN))(params), dense_grad) < 1e-9


def test_second_derivative_matches_the_dense_route():
    def end(rate, **kwargs):
        return tnp.sum(solve(Y0, 1.0, rate, **kwargs).y[:, -1])

    dense = tg.grad(tg.grad(end))(2.0)
    assert _rel(tg.grad(tg.grad(lambda r: end(r, jac_sparsity=PATTERN)))(2.0), dense) < 1e-8


def test_jit_and_vmap():
    sparse = solve(Y0, 1.0, 2.0, jac_sparsity=PATTERN).y
    jitted = tg.jit(lambda y0: solve(y0, 1.0, 2.0, jac_sparsity=PATTERN).y)(Y0)
    np.testing.assert_allclose(jitted, sparse, rtol=1e-12, atol=1e-15)
    batched = tg.vmap(lambda rate: solve(Y0, 1.0, rate, jac_sparsity=PATTERN).y)(np.array([2.0, 3.0]))
    np.testing.assert_allclose(batched[0], sparse, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(batched[1], solve(Y0, 1.0, 3.0, jac_sparsity=PATTERN).y, rtol=1e-10, atol=1e-14)


def test_a_pattern_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"jac_sparsity must have shape \(n, n\) = \(30, 30\)"):
        solve(Y0, 1.0, 2.0, jac_sparsity=PATTERN[:5])


def test_an_explicit_method_warns_that_jac_sparsity_has_no_effect_as_scipy_does():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        solve_ivp(reaction_diffusion, (0.0, 0.01), Y0, method="RK45", args=(0.01, 1.0), jac_sparsity=PATTERN)
    assert any("no effect for a chosen solver: jac_sparsity" in str(w.message) for w in caught)


def test_third_derivative_by_several_routes_matches_the_dense_method():
    """d^3/d rate^3 of the end state's sum: grad of grad of grad, jacfwd of jacrev of grad, jit inside the
    gradients and outside forward mode (a while_loop's reverse mode under jit is of first order), and vmap
    outside, against the same solve with the dense Jacobian (the twin without jac_sparsity)."""
    def end(rate, **kwargs):
        return tnp.sum(solve(Y0, 1.0, rate, **kwargs).y[:, -1])

    sparse = lambda r: end(r, jac_sparsity=PATTERN)  # noqa: E731
    dense = tg.grad(tg.grad(tg.grad(end)))(2.0)
    assert _rel(tg.grad(tg.grad(tg.grad(sparse)))(2.0), dense) < 1e-7
    assert _rel(tg.jacfwd(tg.jacrev(tg.grad(sparse)))(2.0), dense) < 1e-7
    assert _rel(tg.grad(tg.grad(tg.grad(tg.jit(sparse))))(2.0), dense) < 1e-7
    assert _rel(tg.jit(tg.jacfwd(tg.jacfwd(tg.jacfwd(sparse))))(2.0), dense) < 1e-7
    batched = tg.vmap(tg.grad(tg.grad(tg.grad(sparse))))(np.array([2.0, 2.0]))
    assert _rel(batched, np.array([dense, dense])) < 1e-7
