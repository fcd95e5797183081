"""Layers and optimizers on the strict device double: a layer built with the double as the default
backend holds device Parameters; its forward pass, its gradients (by weight and by input, eager and
jitted, per example under vmap) and a few optimizer steps run on device arrays only and equal the
same layer on the host, step for step."""
from __future__ import annotations

import numpy as np
import pytest

import _device
import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray
from _device_check import assert_same, device_backend, sample
from tapegrad import nn, optim
from tapegrad.nn import functional as F

LAYERS = [  # (name, constructor, input shape, input kind)
    ("Dense", lambda: nn.Dense(4, 3, seed=0), (5, 4), "float"),
    ("Dense-tanh-float64", lambda: nn.Dense(4, 3, activation="tanh", dtype=np.float64, seed=1), (5, 4), "float64"),
    ("Dense-nobias", lambda: nn.Dense(4, 2, has_bias=False, seed=2), (3, 4), "float"),
    ("MLP", lambda: nn.Sequential(nn.Dense(4, 8, seed=3), nn.ReLU(), nn.Dense(8, 8, seed=4), nn.Tanh(),
                                  nn.Dense(8, 2, seed=5), nn.Sigmoid()), (6, 4), "float"),
    ("Conv1d", lambda: nn.Conv1d(2, 3, 3, padding=1, seed=6), (2, 2, 7), "float"),
    ("Conv2d", lambda: nn.Conv2d(2, 4, 3, stride=2, padding=1, seed=7), (2, 2, 6, 6), "float"),
    ("Conv2d-groups-same", lambda: nn.Conv2d(4, 4, 3, padding="same", groups=2, seed=8), (1, 4, 5, 5), "float"),
    ("Conv2d-dilation", lambda: nn.Conv2d(2, 2, 2, dilation=2, bias=False, seed=9), (2, 2, 6, 5), "float"),
    ("Conv3d", lambda: nn.Conv3d(1, 2, 2, seed=10), (1, 1, 4, 4, 3), "float"),
    ("ConvTranspose1d", lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, seed=11), (2, 2, 4), "float"),
    ("ConvTranspose2d", lambda: nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, output_padding=1, seed=12),
     (1, 2, 4, 4), "float"),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(3), (6, 3), "float"),
    ("BatchNorm2d", lambda: nn.BatchNorm2d(2), (4, 2, 3, 3), "float"),
    ("LayerNorm", lambda: nn.LayerNorm((3, 4)), (2, 3, 4), "float"),
    ("GroupNorm", lambda: nn.GroupNorm(2, 4), (2, 4, 3), "float"),
    ("MaxPool1d", lambda: nn.MaxPool1d(2), (2, 3, 6), "float"),
    ("MaxPool2d", lambda: nn.MaxPool2d(3, stride=2, padding=1), (2, 2, 7, 7), "float"),
    ("AvgPool1d", lambda: nn.AvgPool1d(3, stride=2), (2, 3, 7), "float"),
    ("AvgPool2d", lambda: nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False), (1, 2, 5, 5), "float"),
    ("Flatten-Dense", lambda: nn.Sequential(nn.Flatten(), nn.Dense(12, 2, seed=13)), (2, 3, 4), "float"),
    ("Embedding", lambda: nn.Embedding(10, 3, padding_idx=0, seed=14), (4, 3), "int"),
    ("CNN", lambda: nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, seed=15), nn.BatchNorm2d(3), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Dense(12, 2, seed=16)), (3, 1, 4, 4), "float"),
]


def _input(shape, kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "int":
        return rng.integers(0, 10, shape)
    return rng.standard_normal(shape).astype(np.float64 if kind == "float64" else np.float32)


def _pair(make):
    """The same layer built on the host and on the device (the double as the default backend)."""
    host = make()
    with device_backend():
        device = make()
    return host, device


def _loss(net):
    def loss(x):
        out = net(x)
        return tnp.sum(out * out)
    return loss


ROUTES = {
    "init": lambda net, x: [p.value for p in net.trainable_params()],
    "forward": lambda net, x: net(x),
    "grad-weights": lambda net, x: tg.grad(_loss(net), grad_position=None, weights=net.trainable_params())(x),
    "value-and-grad": lambda net, x: tg.value_and_grad(_loss(net), grad_position=None,
                                                       weights=net.trainable_params())(x),
    "grad-input": lambda net, x: tg.grad(_loss(net))(x),
    "jit-forward": lambda net, x: tg.jit(net)(x),
    "jit-grad-weights": lambda net, x: tg.jit(tg.grad(_loss(net), grad_position=None,
                                                      weights=net.trainable_params()))(x),
    "vmap-grad-input": lambda net, x: tg.vmap(tg.grad(lambda xi: _loss(net)(xi[None])))(x),
    "hvp": lambda net, x: tg.jvp(tg.grad(_loss(net)), (x,), (x * 0.5,))[1],
}


def _applies(case, route) -> bool:
    """Whether ``route`` means something for the layer: integer indices have no gradient, and batch
    statistics of one example are refused on every backend (test_norm). The rest are dropped at
    collection rather than skipped, so that the suite's skip count means something."""
    name, kind = case[0], case[3]
    if kind == "int" and route in ("grad-input", "vmap-grad-input", "hvp"):
        return False
    return not (route == "vmap-grad-input" and name in ("BatchNorm1d", "BatchNorm2d", "CNN"))


@pytest.mark.parametrize("name,make,shape,kind,route", sample(
    [pytest.param(*case, route, id=f"{case[0]}-{route}") for case in LAYERS for route in ROUTES
     if _applies(case, route)]))
def test_layer(name, make, shape, kind, route):
    host_net, device_net = _pair(make)
    x = _input(shape, kind)
    program = ROUTES[route]
    want = program(host_net, x)
    got = program(device_net, _device.asarray(x))
    assert_same(got, want, f"{route} of {name}", ulps=256)
    # in-place state (BatchNorm's running statistics) stays on the device and in step
    for hp, dp in zip(host_net.parameters() if hasattr(host_net, "parameters") else (),
                      device_net.parameters() if hasattr(device_net, "parameters") else ()):
        assert type(dp.value) is DeviceArray, f"{name}: parameter {dp.name} left the device"
        assert_same(dp.value, hp.value, f"{name}: parameter {dp.name} after {route}", ulps=256)


OPTIMIZERS = [
    ("SGD", lambda p: optim.SGD(p, lr=0.1)),
    ("SGD-momentum-wd", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, weight_decay=0.01)),
    ("SGD-nesterov", lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
    ("Momentum", lambda p: optim.Momentum(p, learning_rate=0.1, momentum=0.9)),
    ("Adam", lambda p: optim.Adam(p, lr=0.1)),
    ("Adam-wd", lambda p: optim.Adam(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
]
# not the CNN: its conv bias feeds BatchNorm, so its gradient is rounding noise, which Adam normalises
# into full-size steps of either sign (host and device round it differently)
NETS = [c for c in LAYERS if c[0] in ("Dense", "MLP", "Conv2d", "Embedding", "LayerNorm", "BatchNorm2d")]


def _train(net, opt_factory, x, target, style, steps=3):
    """``steps`` optimizer steps on the squared distance of the output from ``target``; returns the
    losses and the final weights.

    Not the squared output (``_loss``): after BatchNorm the output has mean ``beta`` per channel, so
    that loss's gradient in ``beta`` is exactly 0 at ``beta = 0``: its computed value is rounding noise,
    which Adam normalises into a full step of either sign, and host and device round differently.
    Against a fixed random target every gradient is determined, so the runs can be compared."""
    params = net.trainable_params()
    loss_and_grad = tg.value_and_grad(lambda x: tnp.sum((net(x) - target) ** 2), grad_position=None,
                                      weights=params)
    if style == "jit":
        loss_and_grad = tg.jit(loss_and_grad)
    losses = []
    if style == "functional":
        opt = opt_factory(None)
        weights = [p.value for p in params]
        state = opt.init(weights)
        for _ in range(steps):
            loss, grads = loss_and_grad(x)
            weights, state = opt.update(list(grads), state, weights)
            for p, w in zip(params, weights):
                p.assign(w)
            losses.append(loss)
        return losses, weights, state
    opt = opt_factory(params)
    for _ in range(steps):
        loss, grads = loss_and_grad(x)
        opt.step(grads)
        losses.append(loss)
    return losses, [p.value for p in params], opt.state


@pytest.mark.parametrize("name,make,shape,kind,opt_name,opt_factory,style", sample(
    [pytest.param(*net, *opt, style, id=f"{net[0]}-{opt[0]}-{style}")
     for net in NETS for opt in OPTIMIZERS for style in ("stateful", "jit", "functional")]))
def test_optimizer_steps(name, make, shape, kind, opt_name, opt_factory, style):
    host_net, device_net = _pair(make)
    x = _input(shape, kind)
    target = _input(make()(x).shape, "float", seed=1)  # a third net: a forward pass moves BatchNorm's statistics
    want = _train(host_net, opt_factory, x, target, style)
    got = _train(device_net, opt_factory, _device.asarray(x), _device.asarray(target), style)
    assert_same(got, want, f"{opt_name} ({style}) on {name}", ulps=1024)


LOSSES = [
    ("mse_loss", lambda y, t: F.mse_loss(y, t), "float"),
    ("binary_cross_entropy_with_logits", lambda y, t: F.binary_cross_entropy_with_logits(y, t), "prob"),
    ("cross_entropy-labels", lambda y, t: F.cross_entropy(y, t), "labels"),
    ("cross_entropy-probs", lambda y, t: F.cross_entropy(y, F.softmax(t)), "float"),
    ("nll_loss", lambda y, t: F.nll_loss(F.log_softmax(y), t), "labels"),
    ("one_hot", lambda y, t: tnp.sum(F.one_hot(t, 3) * y), "labels"),
]


@pytest.mark.parametrize("name,fn,target,route", sample(
    [pytest.param(*loss, route, id=f"{loss[0]}-{route}")
     for loss in LOSSES for route in ("value", "grad", "jit-grad", "jvp")]))
def test_loss(name, fn, target, route):
    rng = np.random.default_rng(3)
    y = rng.standard_normal((4, 3))
    t = {"float": rng.standard_normal((4, 3)), "prob": rng.uniform(0, 1, (4, 3)),
         "labels": rng.integers(0, 3, (4,))}[target]
    program = {"value": lambda y, t: fn(y, t), "grad": lambda y, t: tg.grad(fn)(y, t),
               "jit-grad": lambda y, t: tg.jit(tg.grad(fn))(y, t),
               "jvp": lambda y, t: tg.jvp(lambda y: fn(y, t), (y,), (y * 0.5,))}[route]
    assert_same(program(_device.asarray(y), _device.asarray(t)), program(y, t), f"{route} of {name}")
