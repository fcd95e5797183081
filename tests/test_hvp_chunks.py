"""``chunk_size=`` on ``jacrev``/``jacfwd``/``hessian`` (at most that many basis vectors per batched
pass: the same Jacobian, in pieces) and ``tg.hvp`` (forward over reverse, torch.func's structure).

References are closed forms or NumPy; every chunked result is compared with the unchunked one and with
the reference, for chunk sizes that divide the basis, that do not, that split a leaf across chunks,
and that exceed it.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

RNG = np.random.default_rng(16)
A = RNG.standard_normal((7, 5))
X = RNG.standard_normal(5)
Y = RNG.standard_normal(3)
V = RNG.standard_normal(5)
CHUNKS = [1, 2, 3, 4, 8, 100]


def tanh_layer(x):
    return tnp.tanh(A @ x)


def tanh_layer_jacobian(x):
    return (1 - np.tanh(A @ x) ** 2)[:, None] * A


def logsumexp_quadratic(x):
    return tnp.log(tnp.sum(tnp.exp(A @ x))) + 0.5 * tnp.sum(x * x)


def logsumexp_quadratic_hessian(x):
    z = A @ x
    p = np.exp(z - z.max())
    p /= p.sum()
    return A.T @ (np.diag(p) - np.outer(p, p)) @ A + np.eye(x.size)


@pytest.mark.parametrize("jac", [tg.jacrev, tg.jacfwd])
@pytest.mark.parametrize("chunk_size", CHUNKS)
def test_chunked_jacobian_is_the_jacobian(jac, chunk_size):
    assert_close(jac(tanh_layer, chunk_size=chunk_size)(X), tanh_layer_jacobian(X))


def two_inputs_two_outputs(x, y):
    return {"a": tnp.sin(x).sum() * y, "b": x[:2] * y[0]}


@pytest.mark.parametrize("jac", [tg.jacrev, tg.jacfwd])
@pytest.mark.parametrize("chunk_size", [1, 2, 4, 7])
def test_chunks_that_split_leaves_give_every_block(jac, chunk_size):
    """Output leaves of 3 and 2 elements (jacrev), input leaves of 5 and 3 (jacfwd): chunks cut across
    leaves; every block equals the unchunked one, and the closed form."""
    got = jac(two_inputs_two_outputs, (0, 1), chunk_size=chunk_size)(X, Y)
    want = jac(two_inputs_two_outputs, (0, 1))(X, Y)
    assert tg.tree.tree_structure(got) == tg.tree.tree_structure(want)
    for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
        assert g.shape == w.shape
        assert_close(g, w)
    assert_close(got["a"][0], np.outer(Y, np.cos(X)))
    assert_close(got["b"][1], np.stack([X[:2], np.zeros(2), np.zeros(2)], axis=1))


@pytest.mark.parametrize("chunk_size", [1, 3, 5, 64])
def test_chunked_hessian_is_the_hessian(chunk_size):
    assert_close(tg.hessian(logsumexp_quadratic, chunk_size=chunk_size)(X), logsumexp_quadratic_hessian(X))


def test_chunked_jacobian_keeps_float32_and_aux():
    x = X.astype(np.float32)
    jac, aux = tg.jacrev(lambda x: (tnp.sin(x), x.sum()), has_aux=True, chunk_size=2)(x)
    assert jac.dtype == np.float32
    assert_close(jac, np.diag(np.cos(x)))
    assert_close(aux, x.sum())


def test_chunked_jacobian_is_differentiable_again():
    """grad of a chunked Jacobian's sum goes through the concatenation of the chunks."""
    def total(x):
        return tg.jacrev(tnp.sin, chunk_size=2)(x).sum()
    assert_close(tg.grad(total)(X), -np.sin(X))


def test_chunked_jacobian_under_jit():
    assert_close(tg.jit(tg.jacfwd(tanh_layer, chunk_size=3))(X), tanh_layer_jacobian(X))


@pytest.mark.parametrize("jac", [tg.jacrev, tg.jacfwd, tg.hessian])
@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "4"])
def test_bad_chunk_size_names_the_argument(jac, bad):
    with pytest.raises(ValueError, match=r"chunk_size must be a positive int .* got"):
        jac(tanh_layer, chunk_size=bad)


def test_chunk_size_accepts_numpy_integers():
    assert_close(tg.jacrev(tanh_layer, chunk_size=np.int64(3))(X), tanh_layer_jacobian(X))


# -- hvp ----------------------------------------------------------------------------------------------

def test_hvp_is_the_hessian_times_the_tangent_and_returns_the_value():
    out, (hv,) = tg.hvp(logsumexp_quadratic, (X,), (V,))
    assert_close(out, np.log(np.exp(A @ X).sum()) + 0.5 * X @ X)
    assert_close(hv, logsumexp_quadratic_hessian(X) @ V)


def test_hvp_of_two_arguments_contracts_every_block():
    """f(x, y) = sum(sin(x)) * sum(y**2): H v = (H_xx vx + H_xy vy, H_yx vx + H_yy vy)."""
    x, y, vx, vy = X[:3], Y, V[:3], RNG.standard_normal(3)
    out, (hx, hy) = tg.hvp(lambda x, y: tnp.sum(tnp.sin(x)) * tnp.sum(y ** 2), (x, y), (vx, vy))
    s, q = np.sin(x).sum(), (y ** 2).sum()
    assert_close(out, s * q)
    assert_close(hx, -np.sin(x) * q * vx + np.cos(x) * (2 * y @ vy))
    assert_close(hy, 2 * y * (np.cos(x) @ vx) + 2 * s * vy)


def test_hvp_with_pytree_primals_keeps_their_structure():
    params = {"w": X, "b": np.float64(0.5)}
    tangents = {"w": V, "b": np.float64(2.0)}
    out, (hv,) = tg.hvp(lambda p: tnp.sum(p["w"] ** 3) * p["b"], (params,), (tangents,))
    assert set(hv) == {"w", "b"}
    assert_close(hv["w"], 6 * X * 0.5 * V + 3 * X ** 2 * 2.0)
    assert_close(hv["b"], 3 * X ** 2 @ V)
    assert_close(out, (X ** 3).sum() * 0.5)


def test_hvp_has_aux():
    out, (hv,), aux = tg.hvp(lambda x: (tnp.sum(x ** 3), x * 2), (X,), (V,), has_aux=True)
    assert_close(out, (X ** 3).sum())
    assert_close(hv, 6 * X * V)
    assert_close(aux, 2 * X)


def test_hvp_float32_and_python_float():
    x = X.astype(np.float32)
    out, (hv,) = tg.hvp(lambda x: tnp.sum(tnp.exp(x)), (x,), (V.astype(np.float32),))
    assert hv.dtype == np.float32 and out.dtype == np.float32
    assert_close(hv, np.exp(x) * V.astype(np.float32))
    _, (h,) = tg.hvp(lambda t: t ** 3, (2.0,), (1.0,))
    assert_close(h, 12.0)


def test_hvp_agrees_with_jvp_of_grad():
    _, want = tg.jvp(tg.grad(logsumexp_quadratic), (X,), (V,))
    assert_close(tg.hvp(logsumexp_quadratic, (X,), (V,))[1][0], want)


def test_hvp_refuses_a_vector_output():
    with pytest.raises(ValueError, match=r"hvp: fn must return a scalar .* shape \(7,\)"):
        tg.hvp(tanh_layer, (X,), (V,))


@pytest.mark.parametrize("primals, tangents, exc, match", [
    (X, (V,), TypeError, "hvp: primals must be a tuple or list"),
    ((), (), ValueError, "hvp: primals is empty"),
    ((X,), (V[:3],), ValueError, "tangent leaf 0 has shape"),
    ((X,), (V.astype(np.float32),), TypeError, "dtype"),
])
def test_hvp_bad_arguments(primals, tangents, exc, match):
    with pytest.raises(exc, match=match):
        tg.hvp(logsumexp_quadratic, primals, tangents)


def test_hvp_has_aux_must_be_a_bool():
    with pytest.raises(TypeError, match="has_aux must be a bool"):
        tg.hvp(logsumexp_quadratic, (X,), (V,), has_aux=1)
