"""Per-example gradients: ``vmap(grad(...))`` in MindSpore's ``weights=`` form and the pure form, on the
digits MLP of the demo, against a Python loop of ``grad``."""
import numpy as np
import pytest
from sklearn import datasets as sklearn_datasets

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import nn
from tapegrad._core import trace_stack
from tapegrad.nn import functional as F


class MLP(nn.Module):
    def __init__(self, seed: int):
        super().__init__()
        self.fc1 = nn.Dense(64, 32, activation="relu", seed=seed)
        self.fc2 = nn.Dense(32, 10, seed=seed + 1)

    def __call__(self, x):
        return self.fc2(self.fc1(x))


@pytest.fixture(scope="module")
def digits():
    data = sklearn_datasets.load_digits()
    return data.data[:24] / 16.0, data.target[:24].astype(np.int64)


def test_per_example_gradients_of_every_parameter_match_a_loop(digits):
    x, y = digits
    net = MLP(seed=0)
    params = net.trainable_params()
    before = [np.array(p.value) for p in params]

    def loss(xi, yi):  # one example: a (64,) image and an integer label
        return F.cross_entropy(net(xi[None]), yi[None])

    per_example = tg.vmap(tg.grad(loss, grad_position=None, weights=params), in_axes=(0, 0))(x, y)
    assert isinstance(per_example, tuple) and len(per_example) == len(params)
    loop = [tg.grad(loss, grad_position=None, weights=params)(xi, yi) for xi, yi in zip(x, y)]
    for k, p in enumerate(params):
        assert per_example[k].shape == (len(x),) + p.shape and per_example[k].dtype == p.dtype
        # float32 Parameters: the batched and the looped products sum in different orders
        assert_close(per_example[k], np.stack([g[k] for g in loop]), rtol=1e-4, atol=1e-6)
    # the batch gradient of the mean loss is the mean of the per-example gradients
    batch = tg.grad(lambda x, y: F.cross_entropy(net(x), y), grad_position=None, weights=params)(x, y)
    for g, pe in zip(batch, per_example):
        assert_close(g, pe.mean(axis=0), rtol=1e-4, atol=1e-6)
    for p, b in zip(params, before):  # the Parameters are untouched
        np.testing.assert_array_equal(p.value, b)
    assert trace_stack() == ()


def test_per_example_gradients_in_pure_form_with_shared_params(digits):
    x, y = digits
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(64, 10)) * 0.1, "b": np.zeros(10)}

    def loss(params, xi, yi):
        logits = xi @ params["w"] + params["b"]
        return tnp.log(tnp.sum(tnp.exp(logits))) - logits[yi]

    grads = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    for key in params:
        assert_close(grads[key], np.stack([tg.grad(loss)(params, xi, yi)[key]
                                                         for xi, yi in zip(x, y)]), rtol=1e-12)
    # in_axes as a pytree prefix: the bias is mapped too (one per example), the weights shared
    biases = rng.normal(size=(len(x), 10))
    grads = tg.vmap(tg.grad(loss), in_axes=({"w": None, "b": 0}, 0, 0))({"w": params["w"], "b": biases}, x, y)
    expected = [tg.grad(loss)({"w": params["w"], "b": b}, xi, yi) for b, xi, yi in zip(biases, x, y)]
    assert_close(grads["b"], np.stack([e["b"] for e in expected]), rtol=1e-12)


def test_per_example_gradient_norms_and_clipping_are_differentiable_per_example():
    # DP-SGD's core step: clip each example's gradient to norm 1, then average
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=5), rng.normal(size=(8, 5)) * 3.0
    loss = lambda w, xi: tnp.sum(tnp.sin(xi * w)) ** 2  # noqa: E731
    g = tg.vmap(tg.grad(loss), in_axes=(None, 0))(w, x)
    norms = tnp.linalg.norm(g, axis=1)
    clipped = g / np.maximum(norms, 1.0)[:, None]
    loop = np.stack([tg.grad(loss)(w, xi) for xi in x])
    assert_close(clipped, loop / np.maximum(np.linalg.norm(loop, axis=1), 1.0)[:, None], rtol=1e-12)
