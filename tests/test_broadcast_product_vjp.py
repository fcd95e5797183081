"""``multiply``'s vjp for an operand broadcast against a full-size one is a contraction (an einsum):
checked against NumPy's sums for leading axes, unit axes in the middle, either side, mixed dtypes,
complex values, under ``vmap``, and differentiated again (the routes of a Hessian)."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("shape", [(4,), (1, 4), (3, 1), (2, 1, 4), (1, 1, 1), ()])
@pytest.mark.parametrize("side", [0, 1])
def test_gradient_of_a_broadcast_operand(shape, side):
    full = (2, 3, 4) if len(shape) == 3 else (5, 3, 4)
    w, x, ct = RNG.standard_normal(shape), RNG.standard_normal(full), RNG.standard_normal(full)

    def f(w):
        return tnp.sum((w * x if side == 0 else x * w) * ct)
    expected = (ct * x).sum(axis=tuple(range(len(full) - len(shape))))
    expected = expected.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True).reshape(shape)
    assert_close(tg.grad(f)(w), expected)


def test_dtypes_follow_the_operand():
    w32 = RNG.standard_normal(4).astype(np.float32)
    x = RNG.standard_normal((3, 4))
    g = tg.grad(lambda w: tnp.sum(w * x))(w32)
    assert g.dtype == np.float32
    assert_close(g, x.sum(axis=0).astype(np.float32))
    z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    out, vjp_fn = tg.vjp(lambda w: w * z, np.ones(4, complex))
    ct = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    assert_close(vjp_fn(ct)[0], (ct * z).sum(axis=0))  # JAX's convention: no conjugate


def test_under_vmap_and_differentiated_again():
    x = RNG.standard_normal((6, 3, 4))
    w = RNG.standard_normal(4)
    per_example = tg.vmap(tg.grad(lambda w, x: tnp.sum(tnp.sin(w * x))), in_axes=(None, 0))(w, x)
    assert_close(per_example, (np.cos(w * x) * x).sum(axis=1))
    hess = tg.hessian(lambda w: tnp.sum(tnp.sin(w * x[0])))(w)
    assert_close(hess, np.diag((-np.sin(w * x[0]) * x[0] ** 2).sum(axis=0)))


def test_reverse_over_forward_hessian_agrees():
    A = RNG.standard_normal((20, 10))
    x = RNG.standard_normal(10) * 0.1

    def f(x):
        return tnp.log(tnp.sum(tnp.exp(A @ x))) + 0.5 * tnp.sum(x * x)
    p = np.exp(A @ x)
    p /= p.sum()
    closed = A.T @ (np.diag(p) - np.outer(p, p)) @ A + np.eye(10)
    assert_close(tg.jacrev(tg.jacfwd(f))(x), closed, rtol=1e-12)
    assert_close(tg.jacfwd(tg.jacrev(f))(x), closed, rtol=1e-12)
