"""tapegrad.optim's AdamW, RMSprop, Adagrad and Lion: each against a NumPy reference written from its
paper / PyTorch's documented algorithm, and against ``torch.optim`` where PyTorch is installed (not
Lion: PyTorch has none), on one problem whose gradients depend on the parameters, for 25 float64 steps,
in the stateful and functional styles, eagerly and under ``jit``."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
from _tol import assert_close
from tapegrad import optim

try:
    import torch
except ImportError:  # the NumPy references still run
    torch = None

SHAPES = [(3, 2), (4,), ()]
STEPS = 25


# ---- NumPy references -------------------------------------------------------------------------------
def np_adamw(params, grad_fn, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """Loshchilov & Hutter (2019), Algorithm 2, with PyTorch's scaling of the decay by lr."""
    beta1, beta2 = betas
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, STEPS + 1):
        grads = grad_fn(params, t)
        for i, g in enumerate(grads):
            params[i] = params[i] * (1 - lr * weight_decay)
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat, v_hat = m[i] / (1 - beta1 ** t), v[i] / (1 - beta2 ** t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


def np_rmsprop(params, grad_fn, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    """Tieleman & Hinton (2012); centered as Graves (2013); momentum and eps as torch.optim.RMSprop."""
    v = [np.zeros_like(p) for p in params]
    a = [np.zeros_like(p) for p in params]
    b = [np.zeros_like(p) for p in params]
    for t in range(1, STEPS + 1):
        grads = grad_fn(params, t)
        for i, g in enumerate(grads):
            g = g + weight_decay * params[i]
            v[i] = alpha * v[i] + (1 - alpha) * g ** 2
            variance = v[i]
            if centered:
                a[i] = alpha * a[i] + (1 - alpha) * g
                variance = v[i] - a[i] ** 2
            direction = g / (np.sqrt(variance) + eps)
            if momentum:
                b[i] = momentum * b[i] + direction
                direction = b[i]
            params[i] = params[i] - lr * direction
    return params


def np_adagrad(params, grad_fn, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
               eps=1e-10):
    """Duchi, Hazan & Singer (2011), diagonal form, with torch.optim.Adagrad's lr_decay and eps."""
    s = [np.full_like(p, initial_accumulator_value) for p in params]
    for t in range(1, STEPS + 1):
        grads = grad_fn(params, t)
        for i, g in enumerate(grads):
            g = g + weight_decay * params[i]
            s[i] = s[i] + g * g
            params[i] = params[i] - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s[i]) + eps)
    return params


def np_lion(params, grad_fn, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
    """Chen et al. (2023), Algorithm 2."""
    beta1, beta2 = betas
    m = [np.zeros_like(p) for p in params]
    for t in range(1, STEPS + 1):
        grads = grad_fn(params, t)
        for i, g in enumerate(grads):
            c = beta1 * m[i] + (1 - beta1) * g
            params[i] = params[i] - lr * (np.sign(c) + weight_decay * params[i])
            m[i] = beta2 * m[i] + (1 - beta2) * g
    return params


CASES = [
    (optim.AdamW, np_adamw, dict()),
    (optim.AdamW, np_adamw, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.AdamW, np_adamw, dict(lr=0.05, weight_decay=0.0)),
    (optim.RMSprop, np_rmsprop, dict()),
    (optim.RMSprop, np_rmsprop, dict(lr=0.01, momentum=0.9)),
    (optim.RMSprop, np_rmsprop, dict(lr=0.01, alpha=0.9, centered=True)),
    (optim.RMSprop, np_rmsprop, dict(lr=0.005, alpha=0.95, eps=1e-6, weight_decay=0.1, momentum=0.5,
                                     centered=True)),
    (optim.Adagrad, np_adagrad, dict()),
    (optim.Adagrad, np_adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.1,
                                     eps=1e-8)),
    (optim.Lion, np_lion, dict()),
    (optim.Lion, np_lion, dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.5)),
]
IDS = [f"{cls.__name__}-{config}" for cls, _, config in CASES]


def _problem(seed=0):
    """Parameters and a gradient function of the parameters and the step (a quadratic bowl with a
    shifting target), so that a wrong update changes every later gradient."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in SHAPES]
    scales = [rng.uniform(0.5, 2.0, s) for s in SHAPES]
    targets = [rng.standard_normal(s) for s in SHAPES]

    def grad_fn(params, t):
        return [2 * c * (np.asarray(p) - x) + np.sin(t + x) for p, c, x in zip(params, scales, targets)]
    return params, grad_fn


def _stateful(cls, config, values, grad_fn, jitted=False):
    params = [tg.Parameter(v.copy()) for v in values]
    opt = cls(params, **config)
    step = tg.jit(opt.step) if jitted else opt.step
    for t in range(1, STEPS + 1):
        step(tuple(grad_fn([p.value for p in params], t)))
    if jitted:
        assert step._cache_size() == 1
    return [p.value for p in params]


def _functional(cls, config, values, grad_fn, jitted=False):
    opt = cls(**config)
    update = tg.jit(opt.update) if jitted else opt.update
    params = {"w": values[0], "b": values[1], "scale": values[2]}
    state = opt.init(params)
    for t in range(1, STEPS + 1):
        g = grad_fn([params["w"], params["b"], params["scale"]], t)
        params, state = update({"w": g[0], "b": g[1], "scale": g[2]}, state, params)
    return [params["w"], params["b"], params["scale"]]


def _torch(cls, config, values, grad_fn):
    tensors = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    opt = getattr(torch.optim, cls.__name__)(tensors, **config)
    for t in range(1, STEPS + 1):
        for tensor, g in zip(tensors, grad_fn([x.detach().numpy() for x in tensors], t)):
            tensor.grad = torch.tensor(g)
        opt.step()
    return [x.detach().numpy() for x in tensors]


ROUTES = {"stateful": _stateful, "functional": _functional,
          "jit-stateful": lambda *a: _stateful(*a, jitted=True),
          "jit-functional": lambda *a: _functional(*a, jitted=True)}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("cls, reference, config", CASES, ids=IDS)
def test_matches_numpy_reference(cls, reference, config, route):
    values, grad_fn = _problem()
    got = ROUTES[route](cls, config, values, grad_fn)
    for g, want in zip(got, reference([v.copy() for v in values], grad_fn, **config)):
        assert type(g) is np.ndarray and g.dtype == np.float64
        assert_close(g, want, rtol=1e-10)


TORCH_CASES = [case for case, name in zip(CASES, IDS) if not name.startswith("Lion")]


@pytest.mark.peer("torch")
@pytest.mark.parametrize("route", ["stateful", "jit-functional"])
@pytest.mark.parametrize("cls, reference, config", TORCH_CASES, ids=[f"{c.__name__}-{k}" for c, _, k in TORCH_CASES])
def test_matches_torch(cls, reference, config, route):
    values, grad_fn = _problem(seed=1)
    got = ROUTES[route](cls, config, values, grad_fn)
    for g, want in zip(got, _torch(cls, config, values, grad_fn)):
        assert_close(g, want, rtol=1e-6)  # the bar; float64 agrees far closer


def test_adamw_is_adam_with_decoupled_weight_decay():
    values, grad_fn = _problem(seed=2)
    a = _stateful(optim.AdamW, dict(lr=0.05, weight_decay=0.2), values, grad_fn)
    b = _stateful(optim.Adam, dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True), values, grad_fn)
    c = _stateful(optim.Adam, dict(lr=0.05, weight_decay=0.2), values, grad_fn)
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
        assert not np.allclose(x, z)  # the L2 penalty is another rule
    assert optim.AdamW().weight_decay == 0.01


@pytest.mark.parametrize("cls", [optim.AdamW, optim.RMSprop, optim.Adagrad, optim.Lion])
def test_float32_parameters_stay_float32(cls):
    p = tg.Parameter(np.linspace(-1, 1, 4, dtype=np.float32))
    opt = cls([p], lr=0.1, weight_decay=0.1, **(dict(momentum=0.9, centered=True) if cls is optim.RMSprop else {}))
    for _ in range(3):
        opt.step((np.ones(4),))  # float64 gradients
    assert p.dtype == np.float32
    assert all(s.dtype == np.float32 for s in tg.tree.tree_leaves(opt.state_params) if s.ndim)


def test_state_names_and_none_fields():
    net = tg.nn.Dense(3, 2, seed=0, dtype=np.float64)
    rms = optim.RMSprop(net.trainable_params())
    assert rms.state_params.momentum_buffer is None and rms.state_params.grad_avg is None
    rms = optim.RMSprop(net.trainable_params(), momentum=0.9, centered=True)
    assert [s.name for s in rms.state_params.grad_avg] == ["rmsprop.grad_avg.weight", "rmsprop.grad_avg.bias"]
    ada = optim.Adagrad(net.trainable_params(), initial_accumulator_value=0.5)
    assert ada.state_params.step.name == "adagrad.step" and np.all(ada.state.sum[0] == 0.5)
    lion = optim.Lion(net.trainable_params())
    assert sorted(lion.state_dict()) == ["lion.exp_avg.bias", "lion.exp_avg.weight", "lion.learning_rate"]


@pytest.mark.parametrize("make, match", [
    (lambda p: optim.AdamW(p, lr=-1.0), "AdamW: lr"),
    (lambda p: optim.AdamW(p, betas=(0.9, 1.0)), r"AdamW: betas\[1\]"),
    (lambda p: optim.AdamW(p, weight_decay=-0.1), "weight_decay"),
    (lambda p: optim.RMSprop(p, alpha=1.5), "alpha"),
    (lambda p: optim.RMSprop(p, momentum=-0.5), "momentum"),
    (lambda p: optim.RMSprop(p, eps=float("nan")), "eps"),
    (lambda p: optim.Adagrad(p, lr_decay=-1.0), "lr_decay"),
    (lambda p: optim.Adagrad(p, initial_accumulator_value=-1.0), "initial_accumulator_value"),
    (lambda p: optim.Lion(p, betas=(-0.1, 0.99)), r"Lion: betas\[0\]"),
    (lambda p: optim.Lion(p, betas=(0.9,)), "pair"),
    (lambda p: optim.Lion(p, weight_decay=-1.0), "weight_decay"),
])
def test_bad_hyperparameters_name_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make([tg.Parameter(np.ones(2))])


@pytest.mark.parametrize("make, error, match", [
    (lambda p: optim.Adam(p, lr="0.1"), TypeError, "Adam: lr must be a number, got str"),
    (lambda p: optim.SGD(p, lr=True), TypeError, "SGD: lr must be a number, got bool"),
    (lambda p: optim.AdamW(p, lr=float("inf")), ValueError, "AdamW: lr must be >= 0 and finite, got inf"),
    (lambda p: optim.RMSprop(p, weight_decay=None), TypeError, "RMSprop: weight_decay must be a number"),
])
def test_hyperparameters_that_are_not_finite_numbers_are_named(make, error, match):
    with pytest.raises(error, match=match):
        make([tg.Parameter(np.ones(2))])
