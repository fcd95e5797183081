"""The eager tape's short cuts give the numbers of the general path.

Each short cut (the binary vjp rules, which skip ``unbroadcast`` where the operand has the
cotangent's shape and dtype, and ``add``'s, which is one call; an array on the left of an operator, which
``__array_ufunc__`` binds directly; one operand bound straight to its trace below; a whole sum's
cotangent broadcast without a reshape) has a case where it applies and one where it must not, each
checked against a closed form.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

RNG = np.random.default_rng(16)


def _arr(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("x_shape, y_shape", [((3, 2), (3, 2)), ((3, 2), (2,)), ((1, 2), (3, 1)), ((), (3,))],
                         ids=["same", "y broadcast", "both broadcast", "x scalar"])
def test_add_subtract_multiply_gradients_take_each_operand_shape(x_shape, y_shape):
    x, y = _arr(x_shape), _arr(y_shape)
    out_shape = np.broadcast_shapes(x_shape, y_shape)
    ones = np.ones(out_shape)

    def unbroadcast_ref(g, shape):
        lead = g.ndim - len(shape)
        g = g.sum(axis=tuple(range(lead))) if lead else g
        axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
        return g.sum(axis=axes, keepdims=True) if axes else g

    gx, gy = tg.grad(lambda a, b: tnp.sum(a + b), grad_position=(0, 1))(x, y)
    assert gx.shape == x_shape and gy.shape == y_shape
    assert_close(gx, unbroadcast_ref(ones, x_shape))
    assert_close(gy, unbroadcast_ref(ones, y_shape))
    gx, gy = tg.grad(lambda a, b: tnp.sum(a - b), grad_position=(0, 1))(x, y)
    assert_close(gx, unbroadcast_ref(ones, x_shape))
    assert_close(gy, -unbroadcast_ref(ones, y_shape))
    gx, gy = tg.grad(lambda a, b: tnp.sum(a * b), grad_position=(0, 1))(x, y)
    assert gx.shape == x_shape and gy.shape == y_shape
    assert_close(gx, unbroadcast_ref(ones * y, x_shape))
    assert_close(gy, unbroadcast_ref(ones * x, y_shape))


def test_mixed_dtypes_give_each_operand_its_own_dtype():
    x32, y64 = _arr((4,), np.float32), _arr((4,), np.float64)
    for fn in (lambda a, b: tnp.sum(a * b), lambda a, b: tnp.sum(a + b), lambda a, b: tnp.sum(a - b)):
        gx, gy = tg.grad(fn, grad_position=(0, 1))(x32, y64)
        assert gx.dtype == np.float32 and gy.dtype == np.float64
    gx, gy = tg.grad(lambda a, b: tnp.sum(a * b), grad_position=(0, 1))(x32, y64)
    assert_close(gx, y64.astype(np.float32))
    assert_close(gy, x32.astype(np.float64))


def test_a_python_scalar_operand_keeps_float32():
    x = _arr((5,), np.float32)
    g = tg.grad(lambda a: tnp.sum(a * 1.5 + 0.25 - a * 2.0))(x)
    assert g.dtype == np.float32
    assert_close(g, np.full(5, -0.5, np.float32))


@pytest.mark.parametrize("op, d_left, d_right", [
    (lambda a, t: a * t, lambda a, t: t, lambda a, t: a),
    (lambda a, t: a + t, lambda a, t: np.ones_like(t), lambda a, t: np.ones_like(t)),
    (lambda a, t: a - t, lambda a, t: np.ones_like(t), lambda a, t: -np.ones_like(t)),
    (lambda a, t: a / t, lambda a, t: 1 / t, lambda a, t: -a / t ** 2),
    (lambda a, t: a ** t, lambda a, t: t * a ** (t - 1), lambda a, t: np.log(a) * a ** t),
], ids=["multiply", "add", "subtract", "divide", "power"])
def test_an_array_on_the_left_of_an_operator_traces_the_right_operand(op, d_left, d_right):
    a = np.abs(_arr((3,))) + 0.5
    t = np.abs(_arr((3,))) + 0.5
    assert_close(tg.grad(lambda t_: tnp.sum(op(a, t_)))(t), d_right(a, t))
    assert_close(tg.grad(lambda a_: tnp.sum(op(a_, t)))(a), d_left(a, t))  # the tracer on the left


def test_an_array_times_a_tracer_inside_a_rule_is_differentiable_again():
    # sin's rule is g * cos(x) with g a NumPy array: its second derivative goes through that product
    x = _arr((2, 2))
    d2 = tg.grad(lambda x_: tnp.sum(tg.grad(lambda y: tnp.sum(tnp.sin(y)))(x_)))(x)
    assert_close(d2, -np.sin(x))
    d = tg.grad(lambda t: tnp.sum(np.ones(2) * tnp.exp(t)))(np.array([0.5, -1.0]))
    assert_close(d, np.exp([0.5, -1.0]))


def test_tenth_derivative_of_sin_through_ten_nested_tapes():
    x = np.array([[0.1, 0.7], [-1.2, 2.0]])
    f = tnp.sin
    for _ in range(10):
        f = (lambda inner: tg.grad(lambda y: tnp.sum(inner(y))))(f)
    assert_close(f(x), -np.sin(x))
    g = tnp.cos
    for _ in range(3):
        g = (lambda inner: tg.grad(lambda y: tnp.sum(inner(y))))(g)
    assert_close(g(np.float32(0.3) * np.ones(3, np.float32)), np.full(3, np.sin(np.float32(0.3)), np.float32))


@pytest.mark.parametrize("axis, keepdims", [(None, False), (None, True), (0, False), ((0, 2), True)])
def test_the_gradient_of_sum_is_ones_of_the_operand_shape(axis, keepdims):
    x = _arr((2, 3, 4))
    w = _arr(np.sum(x, axis=axis, keepdims=keepdims).shape)
    g = tg.grad(lambda a: tnp.sum(tnp.sum(a, axis=axis, keepdims=keepdims) * w))(x)
    assert g.shape == x.shape
    assert_close(g, np.broadcast_to(w if keepdims or axis is None else np.expand_dims(w, axis), x.shape))


def test_a_tracer_leaked_from_a_nested_grad_is_refused_and_grad_still_works():
    leaked = []

    def inner(x):
        leaked.append(x)
        return tnp.sum(tnp.sin(x))

    tg.grad(lambda y: tnp.sum(tg.grad(inner)(y)))(np.ones(2))
    with pytest.raises(RuntimeError, match="no longer running"):
        tg.grad(lambda y: tnp.sum(tnp.sin(leaked[0]) * y))(np.ones(2))
    assert tg.grad(lambda y: tnp.sum(tnp.sin(y)))(np.zeros(2)).tolist() == [1.0, 1.0]
