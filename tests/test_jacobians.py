"""jacrev, jacfwd and hessian: values, return structures (grad_position int or tuple, pytrees, has_aux),
shapes out.shape + in.shape, and errors."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 3))
X = RNG.standard_normal(3)
Y = RNG.standard_normal((2, 3))

JACOBIANS = [tg.jacrev, tg.jacfwd]


def g(x, y):
    """R^3 x R^(2x3) -> R^(2x4)."""
    return tnp.tanh(y @ A.T) * tnp.sum(x * x) + tnp.sin(y @ A.T)


def numeric_jacobian(fn, args, position, eps=1e-6):
    """Central differences, shaped out.shape + in.shape."""
    x = np.asarray(args[position], np.float64)
    out = np.asarray(fn(*args))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        hi = list(args)
        lo = list(args)
        hi[position], lo[position] = x + e, x - e
        jac[(...,) + idx] = (np.asarray(fn(*hi)) - np.asarray(fn(*lo))) / (2 * eps)
    return jac


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_of_one_input(jac):
    J = jac(g)(X, Y)
    assert J.shape == (2, 4, 3)
    assert_close(J, numeric_jacobian(g, (X, Y), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_of_a_tuple_of_positions_is_a_tuple(jac):
    Jx, Jy = jac(g, grad_position=(0, 1))(X, Y)
    assert Jx.shape == (2, 4, 3) and Jy.shape == (2, 4, 2, 3)
    assert_close(Jy, numeric_jacobian(g, (X, Y), 1), rtol=1e-6, atol=1e-8)
    (Jy_only,) = jac(g, grad_position=(1,))(X, Y)
    assert_close(Jy_only, Jy)


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_structure_nests_outputs_outside_inputs(jac):
    def h(p):
        return {"s": tnp.sum(p["w"] * p["b"]), "v": p["w"] * 2.0}
    p = {"w": np.array([1.0, 2.0]), "b": np.array(3.0)}
    J = jac(h)(p)
    assert set(J) == {"s", "v"} and set(J["s"]) == {"w", "b"}
    assert J["s"]["w"].shape == (2,) and J["s"]["b"].shape == ()
    assert J["v"]["w"].shape == (2, 2) and J["v"]["b"].shape == (2,)
    assert_close(J["s"]["w"], [3.0, 3.0])
    assert_close(J["s"]["b"], 3.0)
    assert_close(J["v"]["w"], 2 * np.eye(2))
    assert_close(J["v"]["b"], [0.0, 0.0])


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_has_aux(jac):
    J, aux = jac(lambda x: (tnp.sin(x), tnp.sum(x)), has_aux=True)(X)
    assert_close(J, np.diag(np.cos(X)))
    assert_close(aux, np.sum(X))


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_of_scalar_function_and_float32(jac):
    x = X.astype(np.float32)
    J = jac(lambda x: tnp.sum(x ** 3))(x)
    assert J.shape == (3,) and J.dtype == np.float32
    assert_close(J, 3 * x ** 2, rtol=1e-6)


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_with_empty_arrays(jac):
    J = jac(lambda x: x * 2.0)(np.zeros(0))
    assert J.shape == (0, 0)
    J = jac(lambda x: tnp.sum(x) * np.ones(0))(X)
    assert J.shape == (0, 3)


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_of_a_one_element_space_among_empty_leaves(jac):
    """One basis vector (a scalar output for jacrev, a scalar input for jacfwd) takes a single pass
    without a batch axis: the blocks of the empty leaves are zeros of the right shapes, the others the
    derivatives."""
    def h(p):
        s = tnp.sum(tnp.sin(p["x"]) * p["w"])
        return {"s": s, "e": p["e"] * s}
    p = {"x": np.array(0.7), "w": np.array([2.0, 3.0]), "e": np.zeros((0, 2))}
    J = jac(h)(p)
    assert J["s"]["x"].shape == () and J["s"]["w"].shape == (2,) and J["s"]["e"].shape == (0, 2)
    assert J["e"]["x"].shape == (0, 2) and J["e"]["e"].shape == (0, 2, 0, 2)
    assert_close(J["s"]["x"], 5.0 * np.cos(0.7))
    assert_close(J["s"]["w"], [np.sin(0.7)] * 2)
    scalar = jac(lambda x: tnp.stack([tnp.sin(x), x * x]))(np.float32(0.5))
    assert scalar.shape == (2,) and scalar.dtype == np.float32
    assert_close(scalar, np.array([np.cos(0.5), 1.0], np.float32))


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_keyword_arguments_pass_through(jac):
    J = jac(lambda x, scale=1.0: x * scale)(X, scale=3.0)
    assert_close(J, 3 * np.eye(3))


def f_quartic(x):
    return tnp.sum(x ** 4) + tnp.prod(tnp.sin(x))


def test_hessian_matches_finite_differences_of_the_gradient():
    H = tg.hessian(f_quartic)(X)
    assert H.shape == (3, 3)
    numeric = numeric_jacobian(lambda x: tg.grad(f_quartic)(x), (X,), 0)
    assert_close(H, numeric, rtol=1e-5, atol=1e-7)
    assert_close(H, H.T, atol=1e-12)


def test_hessian_of_matrix_input_has_shape_in_plus_in():
    H = tg.hessian(lambda y: tnp.sum(tnp.tanh(y) ** 2))(Y)
    assert H.shape == (2, 3, 2, 3)


def test_hessian_blocks_for_two_positions():
    def fxy(x, y):
        return tnp.sum(x * x * y) + tnp.sum(tnp.exp(y))
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    (Hxx, Hxy), (Hyx, Hyy) = tg.hessian(fxy, grad_position=(0, 1))(x, y)
    assert_close(Hxx, np.diag(2 * y))
    assert_close(Hxy, np.diag(2 * x))
    assert_close(Hyx, np.diag(2 * x))
    assert_close(Hyy, np.diag(np.exp(y)))


def test_hessian_has_aux():
    H, aux = tg.hessian(lambda x: (tnp.sum(x ** 3), x.shape[0]), has_aux=True)(X)
    assert_close(H, np.diag(6 * X))
    assert aux == 3


def test_jacobians_are_differentiable_again():
    # d/dx of the trace of J(x) = diag(cos x) is -sin x
    d = tg.grad(lambda x: tnp.sum(tg.jacrev(tnp.sin)(x) * np.eye(3)))(X)
    assert_close(d, -np.sin(X))
    d = tg.grad(lambda x: tnp.sum(tg.jacfwd(tnp.sin)(x) * np.eye(3)))(X)
    assert_close(d, -np.sin(X))


@pytest.mark.parametrize("jac", [tg.jacrev, tg.jacfwd, tg.hessian])
@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(grad_position=None), ValueError, "selects no input"),
    (dict(grad_position=-1), ValueError, "negative"),
    (dict(grad_position=(0, 0)), ValueError, "repeats"),
    (dict(grad_position=True), TypeError, "int"),
    (dict(has_aux=1), TypeError, "has_aux"),
])
def test_errors_at_definition(jac, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        jac(g, **kwargs)


@pytest.mark.parametrize("jac,api", [(tg.jacrev, "jacrev"), (tg.jacfwd, "jacfwd"), (tg.hessian, "jac")])
def test_has_aux_without_aux_names_the_api(jac, api):
    with pytest.raises(ValueError, match=f"{api}\\w*\\(has_aux=True\\) needs .* got a single output"):
        jac(lambda x: tnp.sum(x ** 2), has_aux=True)(X)
    assert trace_stack() == ()


@pytest.mark.parametrize("jac", [tg.jacrev, tg.jacfwd, tg.hessian])
def test_errors_at_the_call(jac):
    with pytest.raises(IndexError, match="grad_position 2 is out of range"):
        jac(g, grad_position=2)(X, Y)
    with pytest.raises(TypeError, match="grad_position 0"):
        jac(g)(np.arange(3), Y)
    assert trace_stack() == ()


@pytest.mark.parametrize("jac", JACOBIANS)
def test_jacobian_of_a_product_with_the_identity_basis_is_the_matrix_copied(jac):
    """The basis of a vector input (jacfwd) or output (jacrev) is the identity, and a product with it
    is taken as the other operand, without multiplying: the values, dtype and ownership must be those
    of the product, and a non-finite entry stays itself (BLAS would give inf * 0 = nan)."""
    M = A.copy()
    M[1, 2] = np.inf
    J = jac(lambda x: M @ x)(X)
    assert_close(J, M)
    assert not np.isnan(J).any()
    J[0, 0] = 123.0
    assert M[0, 0] == A[0, 0]  # the Jacobian is a buffer of its own
    J = jac(lambda x: x @ A.T)(X)  # the basis on the left of the product
    assert_close(J, A)
    J = jac(lambda x: A @ x)(X.astype(np.float32))  # a float64 constant and a float32 input:
    assert J.dtype == (np.float32 if jac is tg.jacrev else np.float64)  # the input's dtype, the product's
    assert J.shape == (4, 3)
    assert_close(J, A)
    batched = jac(lambda x: Y @ A.T @ x)(np.ones(4))  # a (2, 3) @ (3, 4) constant, then the basis
    assert_close(batched, Y @ A.T)


def test_hessian_through_a_matrix_product_under_grad_and_jit():
    """Where the matrix is traced (grad of a Hessian, jit) the product runs as a product; the values
    agree with the closed form either way."""
    def f(x, M):
        return tnp.sum(tnp.tanh(M @ x))

    def closed(x, M):
        t = np.tanh(M @ x)
        return M.T @ np.diag(-2 * t * (1 - t ** 2)) @ M
    assert_close(tg.hessian(f)(X, A), closed(X, A), rtol=1e-12)
    assert_close(tg.jit(tg.hessian(f))(X, A), closed(X, A), rtol=1e-12)
    dM = tg.grad(lambda M: tnp.sum(tg.hessian(f)(X, M)))(A)
    eps = 1e-6
    E = np.zeros_like(A)
    E[2, 1] = eps
    numeric = (closed(X, A + E).sum() - closed(X, A - E).sum()) / (2 * eps)
    assert_close(dM[2, 1], numeric, rtol=1e-6, atol=1e-8)
