"""Convolution layers: outputs against torch.nn.Conv*d / ConvTranspose*d with the weights copied over,
PyTorch's initialisation bounds, Parameter names and order, repr, gradients of a tiny CNN against torch,
and the argument errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.nn import Dense, Module
from tapegrad.nn._conv_layers import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from tapegrad.nn.functional import relu

TOL = {np.float32: 1e-5, np.float64: 1e-12}


def _draw(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def _torch_twin(ours, torch_cls, args, kwargs, dtype):
    """The torch module built with the same arguments, holding our Parameters' values."""
    import torch
    twin = torch_cls(*args, **kwargs, dtype=getattr(torch, np.dtype(dtype).name))
    with torch.no_grad():
        twin.weight.copy_(torch.from_numpy(np.asarray(ours.weight)))
        if ours.bias is not None:
            twin.bias.copy_(torch.from_numpy(np.asarray(ours.bias)))
    return twin


# (class, args, kwargs, input shape)
LAYER_CASES = [
    ("Conv1d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 9)),
    ("Conv1d", (4, 4, 2), dict(groups=4, padding="same", bias=False), (4, 7)),
    ("Conv2d", (3, 6, 3), dict(), (2, 3, 7, 6)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2), (2, 4, 7, 6)),
    ("Conv2d", (3, 4, 2), dict(padding="same", dilation=2, bias=False), (3, 6, 5)),
    ("Conv2d", (3, 5, 3), dict(padding="valid"), (1, 3, 4, 4)),
    ("Conv3d", (2, 4, (2, 3, 2)), dict(stride=(1, 2, 1), padding=1, groups=2), (2, 2, 4, 5, 3)),
    ("ConvTranspose1d", (3, 2, 4), dict(stride=3, padding=2, output_padding=2), (2, 3, 5)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2), (2, 4, 4, 5)),
    ("ConvTranspose2d", (3, 2, (2, 3)), dict(dilation=(2, 1), bias=False), (3, 4, 4)),
    ("ConvTranspose3d", (2, 3, 2), dict(stride=(2, 1, 2), output_padding=(1, 0, 0)), (1, 2, 3, 3, 2)),
]
CLASSES = {c.__name__: c for c in (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)}


def _layer_id(case):
    name, args, kwargs, shape = case
    return f"{name}{args}-" + ",".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.peer("torch")
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own performance note
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", LAYER_CASES, ids=_layer_id)
def test_layer_matches_torch_and_its_repr(case, dtype):
    import torch
    name, args, kwargs, shape = case
    ours = CLASSES[name](*args, **kwargs, dtype=dtype, seed=0)
    twin = _torch_twin(ours, getattr(torch.nn, name), args, kwargs, dtype)
    assert repr(ours) == repr(twin)
    assert ours.weight.value.shape == tuple(twin.weight.shape) and ours.weight.value.dtype == dtype
    x = _draw(shape, dtype, seed=1)
    out = ours(x)
    with torch.no_grad():
        ref = twin(torch.from_numpy(x)).numpy()
    assert out.shape == ref.shape and out.dtype == dtype
    assert_close(out, ref, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(ref).max())


@pytest.mark.parametrize("case", LAYER_CASES, ids=_layer_id)
def test_default_init_is_torchs_uniform_bound(case):
    """weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.shape[1] * prod(kernel)
    (torch's kaiming_uniform with a=sqrt(5)): within the bound, and filling it."""
    name, args, kwargs, _ = case
    layer = CLASSES[name](*args, **kwargs, seed=0)
    w = np.asarray(layer.weight)
    bound = 1.0 / math.sqrt(w.shape[1] * math.prod(w.shape[2:]))
    for p in [w] + ([] if layer.bias is None else [np.asarray(layer.bias)]):
        assert p.dtype == np.float32
        assert np.abs(p).max() <= bound


@pytest.mark.peer("torch")
def test_init_statistics_on_a_large_layer():
    import torch
    ours = Conv2d(16, 64, 3, groups=2, seed=0)
    twin = torch.nn.Conv2d(16, 64, 3, groups=2)
    bound = 1.0 / math.sqrt(8 * 9)
    for p, q in ((ours.weight, twin.weight), (ours.bias, twin.bias)):
        p, q = np.asarray(p), q.detach().numpy()
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.9 * bound
        assert abs(p.mean()) < 0.2 * bound
        # statistical checks, not rounding: a relative band around the expected value
        assert abs(p.std() - bound / math.sqrt(3)) <= 0.3 * bound / math.sqrt(3)   # U(-b, b): std b / sqrt(3)
        assert abs(np.abs(p).max() - np.abs(q).max()) <= 0.15 * np.abs(q).max()  # torch's own draw
    t = ConvTranspose2d(8, 12, 2, groups=4, seed=0)   # fan_in from the second axis: 12 / 4 * 2 * 2
    assert np.abs(np.asarray(t.weight)).max() <= 1 / math.sqrt(12) < np.abs(np.asarray(t.weight)).max() * 1.5


def test_seed_and_initialisers():
    a, b = Conv2d(3, 4, 3, seed=7), Conv2d(3, 4, 3, seed=7)
    np.testing.assert_array_equal(a.weight, b.weight)
    np.testing.assert_array_equal(a.bias, b.bias)
    assert not np.array_equal(np.asarray(a.weight), np.asarray(Conv2d(3, 4, 3, seed=8).weight))
    w = _draw((4, 3, 2, 2))
    c = Conv2d(3, 4, 2, weight_init=w, bias_init=0.5, dtype=np.float64)
    np.testing.assert_array_equal(c.weight, w)
    np.testing.assert_array_equal(c.bias, np.full(4, 0.5))
    assert c.weight.value.dtype == np.float64
    assert np.all(np.asarray(Conv1d(2, 3, 2, weight_init="zeros", bias_init="ones").bias) == 1.0)
    xavier = Conv2d(3, 4, 3, weight_init="xavier_uniform", seed=0)
    assert np.abs(np.asarray(xavier.weight)).max() <= math.sqrt(6 / (27 + 36))
    d = Conv2d(3, 4, 3, weight_init=lambda shape, dtype, rng: np.ones(shape, dtype))
    assert np.asarray(d.weight).sum() == 4 * 27


def test_parameter_names_and_order():
    layer = Conv2d(3, 4, 3)
    params = layer.trainable_params()
    assert [p.name for p in params] == ["weight", "bias"]
    assert params[0] is layer.weight and params[1] is layer.bias
    assert [p.name for p in ConvTranspose2d(3, 4, 3, bias=False).trainable_params()] == ["weight"]
    net = TinyCNN(seed=0)
    assert [p.name for p in net.trainable_params()] == ["conv1.weight", "conv1.bias", "conv2.weight",
                                                        "conv2.bias", "fc.weight", "fc.bias"]


class TinyCNN(Module):
    """conv -> relu -> grouped, strided conv -> relu -> mean over space -> dense."""

    def __init__(self, seed=None, dtype=np.float64):
        super().__init__()
        self.conv1 = Conv2d(2, 4, 3, padding=1, dtype=dtype, seed=seed)
        self.conv2 = Conv2d(4, 6, (2, 3), stride=2, groups=2, dtype=dtype, seed=None if seed is None else seed + 1)
        self.fc = Dense(6, 3, dtype=dtype, seed=None if seed is None else seed + 2)

    def __call__(self, x):
        h = relu(self.conv2(relu(self.conv1(x))))
        return self.fc(tnp.mean(h, axis=(2, 3)))


def _torch_cnn(net):
    import torch
    t = lambda p: torch.tensor(np.asarray(p), requires_grad=True)
    weights = [t(p) for p in net.trainable_params()]

    def forward(x):
        w1, b1, w2, b2, wf, bf = weights
        h = torch.relu(torch.nn.functional.conv2d(x, w1, b1, padding=1))
        h = torch.relu(torch.nn.functional.conv2d(h, w2, b2, stride=2, groups=2))
        return h.mean(dim=(2, 3)) @ wf.T + bf
    return forward, weights


@pytest.mark.peer("torch")
def test_tiny_cnn_gradients_match_torch():
    import torch
    net = TinyCNN(seed=0)
    x, y = _draw((5, 2, 8, 7), seed=1), _draw((5, 3), seed=2)

    def loss(a, t):
        return tnp.mean((net(a) - t) ** 2)

    value, grads = tg.value_and_grad(loss, grad_position=None, weights=net.trainable_params())(x, y)
    forward, weights = _torch_cnn(net)
    ref = ((forward(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
    ref_grads = torch.autograd.grad(ref, weights)
    assert_close(value, ref.item(), rtol=1e-12)
    assert len(grads) == 6
    for g, r, p in zip(grads, ref_grads, net.trainable_params()):
        assert g.shape == p.value.shape and g.dtype == np.float64
        assert_close(g, r.numpy(), rtol=1e-10, atol=1e-12, err_msg=p.name)
    jitted = tg.jit(tg.grad(loss, grad_position=None, weights=net.trainable_params()))(x, y)
    for g, r in zip(jitted, grads):
        assert_close(g, r, rtol=1e-12, atol=1e-14)


def test_tiny_cnn_float32_and_per_example_gradients():
    net = TinyCNN(seed=3, dtype=np.float32)
    x = _draw((4, 2, 6, 6), np.float32, seed=1)
    loss = lambda a: tnp.sum(net(a[None]) ** 2)
    grads = tg.grad(loss, grad_position=None, weights=net.trainable_params())(x[0])
    assert all(g.dtype == np.float32 for g in grads)
    per_example = tg.vmap(tg.grad(loss, grad_position=None, weights=net.trainable_params()))(x)
    for i in range(len(x)):
        for g, want in zip(per_example, tg.grad(loss, grad_position=None, weights=net.trainable_params())(x[i])):
            assert_close(g[i], want, rtol=1e-5, atol=1e-6)


def test_assigned_weights_are_used():
    layer = Conv1d(1, 1, 2, bias=False)
    layer.weight.assign(np.array([[[1.0, -1.0]]], np.float32))
    np.testing.assert_array_equal(layer(np.array([[[1.0, 3.0, 6.0]]], np.float32)), [[[-2.0, -3.0]]])


ERRORS = [
    ("in_channels not an int", lambda: Conv2d(3.0, 4, 3), TypeError, "in_channels"),
    ("out_channels not positive", lambda: Conv2d(3, 0, 3), ValueError, "out_channels"),
    ("groups zero", lambda: Conv2d(4, 4, 3, groups=0), ValueError, "groups"),
    ("in_channels vs groups", lambda: Conv2d(3, 4, 3, groups=2), ValueError, "groups"),
    ("out_channels vs groups", lambda: Conv2d(4, 3, 3, groups=2), ValueError, "groups"),
    ("transpose out_channels vs groups", lambda: ConvTranspose2d(4, 3, 3, groups=2), ValueError, "groups"),
    ("kernel_size length", lambda: Conv2d(3, 4, (3, 3, 3)), TypeError, "kernel_size"),
    ("kernel_size zero", lambda: Conv1d(3, 4, 0), ValueError, "kernel_size"),
    ("stride zero", lambda: Conv3d(3, 4, 2, stride=0), ValueError, "stride"),
    ("negative padding", lambda: Conv2d(3, 4, 3, padding=-1), ValueError, "padding"),
    ("padding word", lambda: Conv2d(3, 4, 3, padding="full"), ValueError, "padding"),
    ("same with stride", lambda: Conv2d(3, 4, 3, padding="same", stride=2), ValueError, "same"),
    ("transpose padding word", lambda: ConvTranspose2d(3, 4, 3, padding="same"), ValueError, "padding"),
    ("output_padding too large", lambda: ConvTranspose2d(3, 4, 3, stride=2, output_padding=2), ValueError,
     "output_padding"),
    ("padding_mode reflect", lambda: Conv2d(3, 4, 3, padding_mode="reflect"), NotImplementedError,
     "padding_mode"),
    ("padding_mode circular", lambda: ConvTranspose1d(3, 4, 3, padding_mode="circular"), NotImplementedError,
     "padding_mode"),
    ("padding_mode unknown", lambda: Conv2d(3, 4, 3, padding_mode="mirror"), ValueError, "padding_mode"),
    ("weight_init shape", lambda: Conv2d(3, 4, 3, weight_init=np.zeros((4, 3, 3))), ValueError, "weight_init"),
    ("weight_init name", lambda: Conv2d(3, 4, 3, weight_init="glorot"), ValueError, "weight_init"),
    ("input channels", lambda: Conv2d(3, 4, 3)(np.zeros((1, 2, 5, 5), np.float32)), ValueError, "input"),
    ("input rank", lambda: Conv2d(3, 4, 3)(np.zeros((5, 5), np.float32)), ValueError, "input"),
]


@pytest.mark.parametrize("name, call, error, word", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_argument(name, call, error, word):
    with pytest.raises(error, match=word):
        call()
