"""``tapegrad.flatten_util.ravel_pytree``: JAX's ``jax.flatten_util.ravel_pytree`` (its dtype rules), with
both directions differentiable, and the use it exists for: ``scipy.optimize`` over a parameter pytree."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack
from tapegrad.flatten_util import ravel_pytree

TREE = {"w": np.arange(6.0).reshape(2, 3), "b": np.array([-1.0, 2.0]), "s": np.array(0.5)}


def test_round_trip_order_and_ownership():
    flat, unravel = ravel_pytree(TREE)
    assert flat.shape == (9,) and flat.dtype == np.float64
    np.testing.assert_array_equal(flat, np.concatenate([TREE["b"], [0.5], TREE["w"].ravel()]))  # keys sorted
    back = unravel(flat)
    assert sorted(back) == ["b", "s", "w"]
    for key in TREE:
        assert back[key].shape == TREE[key].shape and np.array_equal(back[key], TREE[key])
        assert not np.shares_memory(back[key], flat)  # scipy may reuse its buffer: the leaves are their own
    assert "9 elements" in repr(unravel)


def test_dtypes_follow_jax():
    tree = [np.ones(2, np.float32), np.zeros((1, 2), np.float64), np.array([3], np.int32)]
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float64  # the promoted dtype
    assert [leaf.dtype for leaf in unravel(flat)] == [np.float32, np.float64, np.int32]  # cast back
    with pytest.raises(TypeError, match=r"several dtypes.*float64.*float32"):
        unravel(flat.astype(np.float32))
    # one dtype: no cast, and unravel keeps the vector's dtype (JAX's dtype-polymorphic unravel)
    flat32, unravel32 = ravel_pytree([np.ones(2, np.float32), np.ones(3, np.float32)])
    assert flat32.dtype == np.float32 and unravel32(flat32.astype(np.float64))[0].dtype == np.float64
    # a list (what a Python optimiser may hand back) reads as an array of its own dtype, float64 here
    leaves = unravel([1.0, 2.0, 3.0, 4.0, 5.0])
    assert [leaf.dtype for leaf in leaves] == [np.float32, np.float64, np.int32]
    np.testing.assert_array_equal(leaves[1], [[3.0, 4.0]])


def test_empty_tree_and_errors():
    flat, unravel = ravel_pytree({})
    assert flat.shape == (0,) and unravel(flat) == {}
    flat, unravel = ravel_pytree(TREE)
    with pytest.raises(ValueError, match=r"length 9.*\(8,\)"):
        unravel(flat[:8])
    with pytest.raises(ValueError, match=r"length 9.*\(3, 3\)"):
        unravel(flat.reshape(3, 3))
    with pytest.raises(TypeError, match="leaf of the tree is a str"):
        ravel_pytree({"a": np.ones(2), "note": "x"})


def test_gradients_flow_through_both_directions():
    g = tg.grad(lambda tree: tnp.sum(ravel_pytree(tree)[0] ** 2))(TREE)
    for key in TREE:
        assert_close(g[key], 2 * TREE[key])
    flat, unravel = ravel_pytree(TREE)

    def loss(v):
        t = unravel(v)
        return tnp.sum(tnp.sin(t["w"]) * t["s"]) + tnp.sum(t["b"] ** 3)
    tg.testing.check_grads(loss, (flat,), order=2)
    # forward mode, vmap and jit
    _, tangent = tg.jvp(lambda v: unravel(v)["w"], (flat,), (np.arange(9.0),))
    np.testing.assert_array_equal(tangent, np.arange(3.0, 9.0).reshape(2, 3))
    batch = tg.vmap(lambda v: unravel(v)["b"])(np.stack([flat, 2 * flat]))
    np.testing.assert_array_equal(batch, [TREE["b"], 2 * TREE["b"]])
    np.testing.assert_array_equal(tg.jit(lambda tree: ravel_pytree(tree)[0])(TREE), flat)
    assert trace_stack() == ()


def test_parameters_read_as_their_values_also_when_substituted():
    w, b = tg.Parameter(np.ones((2, 2)), name="w"), tg.Parameter(np.zeros(2), name="b")
    flat, unravel = ravel_pytree([w, b])
    np.testing.assert_array_equal(flat, [1, 1, 1, 1, 0, 0])
    assert all(type(leaf) is np.ndarray for leaf in unravel(flat))  # arrays, not Parameters
    grads = tg.grad(lambda: tnp.sum(ravel_pytree([w, b])[0] * np.arange(6.0)), grad_position=None, weights=[w, b])()
    np.testing.assert_array_equal(grads[0], [[0, 1], [2, 3]])
    np.testing.assert_array_equal(grads[1], [4, 5])


def test_scipy_minimize_over_a_parameter_pytree():
    """The use it exists for: ``scipy.optimize.minimize(fun, x0, jac=True)`` over a dict of arrays,
    value and gradient from ``value_and_grad`` through ``unravel``; least squares, whose optimum is
    known in closed form."""
    optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((50, 3)), rng.standard_normal(50)
    params = {"w": np.zeros(3), "b": np.array(0.0)}
    flat0, unravel = ravel_pytree(params)

    def loss(p):
        return tnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    value_and_grad = tg.value_and_grad(lambda v: loss(unravel(v)))

    def fun(v):
        value, grad = value_and_grad(v)
        return float(value), np.asarray(grad, dtype=np.float64)

    result = optimize.minimize(fun, flat0, jac=True, method="BFGS", options={"gtol": 1e-10})
    assert result.success
    fitted = unravel(result.x)
    want, *_ = np.linalg.lstsq(np.column_stack([x, np.ones(50)]), y, rcond=None)
    assert_close(fitted["w"], want[:3], rtol=1e-6, atol=1e-8)
    assert_close(fitted["b"], want[3], rtol=1e-6, atol=1e-8)
