"""Dropout: the functional form against its formula (and PyTorch's scaling, bit for bit where both keep
an element), its statistics, its gradient (check_grads to order 2 with a fixed key), vmap and jit; the
Dropout module in train and eval mode, its key in a Parameter (advanced at each call, reproducible
from the seed), under jit and inside grad(weights=...), a jitted training step against eager; errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tapegrad as tg
from _gpu import cupy_or_skip
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad import nn, optim
from tapegrad import random as R
from tapegrad.nn import functional as F
from tapegrad.nn._dropout import Dropout, dropout
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32, np.float16]
X = np.random.default_rng(0).standard_normal((4, 6))


def expected(x, p, key):
    """PyTorch's formula, ``x * (keep / (1 - p))``, with ``keep`` drawn as documented."""
    dtype = np.dtype(x.dtype)
    draw_dtype = np.float32 if dtype == np.float16 else dtype
    keep = R.uniform(key, x.shape, draw_dtype) < 1.0 - p
    return x * (keep.astype(dtype) / dtype.type(1.0 - p))


# ---- the functional form -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_matches_its_formula(p, dtype):
    x, k = X.astype(dtype), R.key(1)
    y = dropout(x, p, key=k)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, expected(x, p, k))
    np.testing.assert_array_equal(y, dropout(x, p, key=k))  # same key, same mask
    ones = np.ones(1000, dtype)
    assert not np.array_equal(dropout(ones, p, key=k), dropout(ones, p, key=R.key(2)))


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_statistics(p):
    n = 100_000
    y = dropout(np.ones(n), p, key=R.key(3))
    zeros = np.mean(y == 0.0)
    assert abs(zeros - p) < 5 * np.sqrt(p * (1 - p) / n)
    assert_close(y[y != 0.0], 1.0 / (1.0 - p))
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(p / (1 - p) / n)  # inverted dropout keeps the mean


@pytest.mark.peer("torch")
def test_dropout_scaling_equals_pytorch():
    import torch
    for dtype, p in [(np.float32, 0.3), (np.float64, 0.7), (np.float32, 0.1)]:
        x = np.random.default_rng(1).standard_normal(10_000).astype(dtype)
        xt = torch.tensor(x, requires_grad=True)
        yt = torch.nn.functional.dropout(xt, p, training=True)
        yt.sum().backward()
        y = dropout(x, p, key=R.key(4))
        both = (y != 0) & (yt.detach().numpy() != 0)
        assert both.sum() > 500
        np.testing.assert_array_equal(y[both], yt.detach().numpy()[both])  # the same scale, bit for bit
        g = tg.grad(lambda x, p=p: dropout(x, p, key=R.key(4)).sum())(x)
        np.testing.assert_array_equal(g[both], xt.grad.numpy()[both])
        assert y.dtype == yt.detach().numpy().dtype


def test_no_dropout_returns_the_input():
    x = X.copy()
    assert dropout(x, 0.5, training=False) is x  # no key needed
    assert dropout(x, 0.0, key=R.key(0)) is x
    assert dropout(x, 0.0) is x


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_p_one_gives_zeros(dtype):
    x = X.astype(dtype)
    x[0, 0] = np.nan
    y = dropout(x, 1.0)  # no key needed: nothing is random
    assert y.dtype == dtype
    assert np.isnan(y[0, 0]) and np.all(y.ravel()[1:] == 0.0)  # NaN stays NaN, as PyTorch's input * 0
    np.testing.assert_array_equal(tg.grad(lambda x: dropout(x, 1.0).sum())(X), np.zeros_like(X))


def test_dropout_gradients():
    k = R.key(5)
    check_grads(lambda x: dropout(x, 0.4, key=k), (X,), order=2)
    check_grads(lambda x: dropout(x * x, 0.6, key=k), (X,), order=2)
    g = tg.grad(lambda x: dropout(x, 0.4, key=k).sum())(X)
    np.testing.assert_array_equal(g, expected(np.ones_like(X), 0.4, k))  # mask * scale * ct
    g32 = tg.grad(lambda x: dropout(x, 0.4, key=k).sum())(X.astype(np.float32))
    assert g32.dtype == np.float32


def test_dropout_under_vmap():
    keys = R.split(R.key(6), 3)
    check_vmap(lambda x, k: dropout(x, 0.5, key=k), (X, keys[0]), (0, 0), batch=3,
               draw=lambda rng: (rng.standard_normal(X.shape), R.key(int(rng.integers(2 ** 40)))))
    check_vmap(lambda x, k: dropout(x, 0.5, key=k), (X, keys[0]), (1, None), batch=3)  # a shared key
    out = tg.vmap(lambda x: dropout(x, 0.5, key=keys[0]))(np.ones((3, 4, 6)))
    assert np.array_equal(out[0], out[1]) and np.array_equal(out[1], out[2])  # one mask for every example


def test_dropout_under_jit():
    f = tg.jit(lambda x, k: dropout(x, 0.3, key=k))
    a, b = R.split(R.key(7))
    np.testing.assert_array_equal(f(X, a), dropout(X, 0.3, key=a))
    np.testing.assert_array_equal(f(X, b), dropout(X, 0.3, key=b))
    assert f._cache_size() == 1
    assert "random_uniform" in str(tg.make_program(lambda x, k: dropout(x, 0.3, key=k))(X, a))
    g = tg.jit(tg.grad(lambda x, k: (dropout(x, 0.3, key=k) ** 2).sum()))
    assert_close(g(X, a), 2 * expected(X, 0.3, a) * expected(np.ones_like(X), 0.3, a))


DROPOUT_ERRORS = [
    ("p-negative", lambda: dropout(X, -0.1, key=R.key(0)), ValueError,
     "dropout: dropout probability has to be between 0 and 1, but got -0.1"),
    ("p-above-one", lambda: dropout(X, 1.5), ValueError, "between 0 and 1, but got 1.5"),
    ("p-bool", lambda: dropout(X, True), TypeError, "dropout: p must be a float in [0, 1], got bool"),
    ("p-str", lambda: dropout(X, "0.5"), TypeError, "p must be a float"),
    ("no-key", lambda: dropout(X, 0.5), TypeError, "dropout: key is required when training with 0 < p < 1"),
    ("bad-key", lambda: dropout(X, 0.5, key=3), TypeError, "dropout: key must be a single random key"),
    ("int-input", lambda: dropout(np.arange(4), 0.5, key=R.key(0)), TypeError,
     "dropout: input must be a real float array, got dtype int64"),
    ("training-str", lambda: dropout(X, 0.5, "yes"), TypeError, "dropout: training must be a bool"),
    ("module-p", lambda: Dropout(2.0), ValueError, "Dropout: dropout probability has to be between 0 and 1"),
    ("module-seed", lambda: Dropout(0.5, seed=1.5), TypeError, "Dropout: seed must be an int, a key or None"),
    ("module-seed-array", lambda: Dropout(0.5, seed=np.zeros(2)), TypeError, "Dropout: key must be a single"),
    ("module-seed-negative", lambda: Dropout(0.5, seed=-3), ValueError, "seed must be a non-negative int"),
]


@pytest.mark.parametrize("name, call, error, message", DROPOUT_ERRORS, ids=[e[0] for e in DROPOUT_ERRORS])
def test_errors(name, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


# ---- the module ----------------------------------------------------------------------------------
def _keys_from(seed, n):
    """The keys a Dropout(seed=seed) draws its first ``n`` masks from: split, keep one, draw from the other."""
    k, subs = R.key(seed), []
    for _ in range(n):
        k, sub = R.split(k)
        subs.append(sub)
    return subs


def test_module_draws_a_new_mask_at_each_call_reproducibly():
    layer = Dropout(0.5, seed=3)
    outs = [layer(X) for _ in range(3)]
    for out, sub in zip(outs, _keys_from(3, 3)):
        np.testing.assert_array_equal(out, dropout(X, 0.5, key=sub))
    assert not np.array_equal(outs[0], outs[1])
    again = Dropout(0.5, seed=3)
    np.testing.assert_array_equal(again(X), outs[0])  # reproducible from the seed


def test_module_key_is_a_frozen_parameter():
    layer = Dropout(0.25, seed=1)
    assert layer.trainable_params() == () and layer.parameters() == (layer.key,)
    assert layer.key.requires_grad is False and layer.key.name == "key"
    assert layer.key.shape == (2,) and layer.key.dtype == np.uint64
    assert repr(layer) == "Dropout(p=0.25)"
    before = layer.key.value.copy()
    out = layer(X, key=R.key(9))  # an explicit key leaves the layer's key alone
    np.testing.assert_array_equal(out, dropout(X, 0.25, key=R.key(9)))
    np.testing.assert_array_equal(layer.key.value, before)
    layer(X)
    assert not np.array_equal(layer.key.value, before)


def test_module_seeds():
    a, b = Dropout(0.5), Dropout(0.5)  # fresh entropy: two layers never share their masks
    assert not np.array_equal(a.key.value, b.key.value)
    k = R.split(R.key(0), 2)
    c = Dropout(0.5, seed=k[1])
    np.testing.assert_array_equal(c.key.value, k[1])
    c(X)
    np.testing.assert_array_equal(k[1], R.split(R.key(0), 2)[1])  # the seed key is copied, not advanced


def test_module_eval_mode_is_identity():
    layer = Dropout(0.5, seed=0)
    key = layer.key.value.copy()
    layer.eval()
    assert layer(X) is X
    np.testing.assert_array_equal(layer.key.value, key)
    layer.train()
    assert not np.array_equal(layer(X), X)
    assert Dropout(0.0, seed=0)(X) is X
    assert np.all(Dropout(1.0, seed=0)(X) == 0.0)


def test_module_under_jit_matches_eager():
    eager, jitted = Dropout(0.5, seed=4), Dropout(0.5, seed=4)
    step = tg.jit(lambda x: jitted(x))
    for _ in range(3):
        np.testing.assert_array_equal(step(X), eager(X))
    np.testing.assert_array_equal(jitted.key.value, eager.key.value)  # written back at each call
    assert type(jitted.key.value) is np.ndarray and step._cache_size() == 1
    program = tg.make_program(lambda x: jitted(x))(X)
    assert "random_split" in str(program) and "random_uniform" in str(program)


def test_module_under_vmap_shares_its_mask():
    layer = Dropout(0.5, seed=5)
    out = tg.vmap(layer)(np.ones((3, 8)))
    assert np.array_equal(out[0], out[1]) and np.array_equal(out[0], out[2])
    keys = R.split(R.key(1), 3)
    out = tg.vmap(lambda x, k: layer(x, key=k))(np.ones((3, 8)), keys)
    np.testing.assert_array_equal(out, np.stack([dropout(np.ones(8), 0.5, key=k) for k in keys]))


class Net(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.fc1 = nn.Dense(5, 16, activation="relu", seed=seed, dtype=np.float64)
        self.drop = Dropout(0.3, seed=seed)
        self.fc2 = nn.Dense(16, 2, seed=seed + 1, dtype=np.float64)

    def __call__(self, x):
        return self.fc2(self.drop(self.fc1(x)))


def test_module_inside_grad_with_weights():
    net = Net(0)
    x, t = np.random.default_rng(2).standard_normal((8, 5)), np.zeros((8, 2))
    loss = lambda x: F.mse_loss(net(x), t)
    assert net.drop.key not in net.trainable_params()
    sub = _keys_from(0, 1)[0]
    grads = tg.grad(loss, grad_position=None, weights=net.trainable_params())(x)
    # the same gradients from a copy whose dropout uses that mask explicitly
    h = net.fc1(x)
    ref = tg.grad(lambda w, b: F.mse_loss(dropout(h, 0.3, key=sub) @ w.T + b, t), (0, 1))(
        net.fc2.weight.value, net.fc2.bias.value)
    assert_close(grads[2], ref[0], rtol=1e-12)
    assert_close(grads[3], ref[1], rtol=1e-12)
    np.testing.assert_array_equal(net.drop.key.value, R.split(R.key(0))[0])  # advanced once


def test_jitted_training_step_matches_eager():
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((8, 5)), rng.standard_normal((8, 2))) for _ in range(4)]
    nets = Net(1), Net(1)
    opts = [optim.SGD(n.trainable_params(), lr=0.1) for n in nets]

    def make_step(net, opt):
        def step(x, t):
            loss, grads = tg.value_and_grad(lambda x: F.mse_loss(net(x), t), grad_position=None,
                                            weights=opt.params)(x)
            opt.step(grads)
            return loss
        return step
    eager, jitted = make_step(nets[0], opts[0]), tg.jit(make_step(nets[1], opts[1]))
    for x, t in batches:
        assert_close(jitted(x, t), eager(x, t), rtol=1e-12)
    assert jitted._cache_size() == 1
    for p, q in zip(nets[1].parameters(), nets[0].parameters()):
        assert type(p.value) is np.ndarray
        assert_close(p.value, q.value, rtol=1e-12)
    np.testing.assert_array_equal(nets[1].drop.key.value, nets[0].drop.key.value)


def test_module_with_an_explicit_key_under_checkpoint():
    # an explicit key is used as it is, checkpointed or not (the layer's own key: tests/test_checkpoint.py)
    layer, k = Dropout(0.5, seed=1), R.key(3)
    x = np.arange(1.0, 9.0)
    plain = tg.grad(lambda x: (layer(x, key=k) * x).sum())(x)
    checkpointed = tg.grad(tg.checkpoint(lambda x, k: (layer(x, key=k) * x).sum()))(x, k)
    np.testing.assert_array_equal(checkpointed, plain)


@pytest.mark.gpu
def test_dropout_on_cupy():
    cupy = cupy_or_skip()
    x, k = X.astype(np.float32), R.key(8)
    y = dropout(cupy.asarray(x), 0.3, key=cupy.asarray(k))
    assert isinstance(y, cupy.ndarray) and y.dtype == np.float32
    np.testing.assert_array_equal(cupy.asnumpy(y), dropout(x, 0.3, key=k))
    layer = Dropout(0.3, seed=cupy.asarray(k))
    assert isinstance(layer(cupy.asarray(x)), cupy.ndarray) and isinstance(layer.key.value, cupy.ndarray)


def test_a_refused_call_leaves_the_key_as_it_was():
    layer = Dropout(0.5, seed=3)
    before = np.array(layer.key.value)
    with pytest.raises(TypeError):
        layer(np.ones(4, dtype=np.int64))
    np.testing.assert_array_equal(layer.key.value, before)


def test_jit_stages_again_after_eval_and_train():
    """A program staged in training mode has dropout built in; eval() makes the next call stage again."""
    layer = Dropout(0.5, seed=4)
    stagings = []
    step = tg.jit(lambda x: stagings.append(layer.training) or layer(x))
    x = np.ones(16)
    assert np.any(step(x) == 0.0)
    layer.eval()
    np.testing.assert_array_equal(step(x), x)
    layer.train()
    assert np.any(step(x) == 0.0)
    layer.train()  # no change of mode: the cached program is reused
    step(x)
    assert stagings == [True, False, True] and step._cache_size() == 1  # a stale program is replaced
