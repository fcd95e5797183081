"""tapegrad.optim: SGD (momentum, weight decay, Nesterov), Momentum and Adam against hand-written NumPy
updates, in the stateful (Parameters, ``step``) and functional (``init``/``update``) styles."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import nn, optim
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

SHAPES = [(3, 2), (4,), ()]
STEPS = 4
TOL = {np.float64: dict(rtol=1e-12, atol=1e-14), np.float32: dict(rtol=1e-5, atol=1e-6)}


# ---- NumPy references, written from the papers / PyTorch docs --------------------------------------
def np_sgd(params, grad_steps, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
    """torch.optim.SGD's documented algorithm (dampening 0): the buffer starts as the first gradient."""
    params = [np.array(p, np.float64) for p in params]
    buffers = [None] * len(params)
    for grads in grad_steps:
        for i, g in enumerate(grads):
            g = np.asarray(g, np.float64) + weight_decay * params[i]
            if momentum:
                buffers[i] = g.copy() if buffers[i] is None else momentum * buffers[i] + g
                g = g + momentum * buffers[i] if nesterov else buffers[i]
            params[i] = params[i] - lr * g
    return params


def np_adam(params, grad_steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Kingma & Ba (2015), Algorithm 1, with bias-corrected moments (eps outside the square root)."""
    beta1, beta2 = betas
    params = [np.array(p, np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grad_steps, start=1):
        for i, g in enumerate(grads):
            g = np.asarray(g, np.float64) + weight_decay * params[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** t)
            v_hat = v[i] / (1 - beta2 ** t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


SGD_CONFIGS = [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.8, weight_decay=0.01),
               dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.1, momentum=0.5, weight_decay=0.1, nesterov=True)]
ADAM_CONFIGS = [dict(lr=1e-3), dict(lr=0.1), dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)]
CASES = ([pytest.param(optim.SGD, cfg, np_sgd, id=f"SGD-{cfg}") for cfg in SGD_CONFIGS]
         + [pytest.param(optim.Adam, cfg, np_adam, id=f"Adam-{cfg}") for cfg in ADAM_CONFIGS])


def _problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grad_steps = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return params, grad_steps


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cls, config, reference", CASES)
def test_stateful_matches_reference(cls, config, reference, dtype):
    values, grad_steps = _problem(dtype)
    params = tg.ParameterTuple(tg.Parameter(v.copy()) for v in values)
    opt = cls(params, **config)
    for grads in grad_steps:
        opt.step(tuple(grads))
    for p, want in zip(params, reference(values, grad_steps, **config)):
        assert isinstance(p.value, np.ndarray) and p.value.dtype == dtype and p.shape == want.shape
        np.testing.assert_allclose(p.value, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cls, config, reference", CASES)
def test_functional_matches_reference(cls, config, reference, dtype):
    values, grad_steps = _problem(dtype, seed=1)
    params = {"layer": {"w": values[0], "b": values[1]}, "scale": values[2]}
    originals = {k: np.copy(v) for k, v in params["layer"].items()}
    opt = cls(**config)
    state = opt.init(params)
    for grads in grad_steps:
        tree = {"layer": {"w": grads[0], "b": grads[1]}, "scale": grads[2]}
        params, state = opt.update(tree, state, params)
    want = reference(values, grad_steps, **config)
    for got, expected in zip((params["layer"]["w"], params["layer"]["b"], params["scale"]), want):
        assert isinstance(got, np.ndarray) and got.dtype == dtype
        np.testing.assert_allclose(got, expected, **TOL[dtype])
    np.testing.assert_array_equal(values[0], originals["w"])  # nothing was mutated
    if cls is optim.Adam:
        assert isinstance(state, optim.AdamState) and int(state.step) == STEPS
        assert state.exp_avg["layer"]["w"].dtype == dtype


def test_both_styles_agree_and_state_structure():
    values, grad_steps = _problem(np.float32, seed=2)
    params = [tg.Parameter(v.copy()) for v in values]
    stateful, functional = optim.SGD(params, lr=0.1, momentum=0.9), optim.SGD(lr=0.1, momentum=0.9)
    arrays, state = tuple(values), functional.init(tuple(values))
    assert isinstance(state, optim.SGDState) and len(state.momentum_buffer) == len(values)
    assert optim.SGD(lr=0.1).init(arrays) == optim.SGDState(None)
    for grads in grad_steps:
        stateful.step(grads)  # a list is accepted too
        arrays, state = functional.update(tuple(grads), state, arrays)
    for p, a in zip(params, arrays):
        np.testing.assert_array_equal(p.value, a)
    np.testing.assert_array_equal(stateful.state.momentum_buffer[0], state.momentum_buffer[0])


def test_momentum_is_mindspore_spelling_of_sgd():
    values, grad_steps = _problem(np.float64, seed=3)
    a = [tg.Parameter(v.copy()) for v in values]
    b = [tg.Parameter(v.copy()) for v in values]
    opt_a = optim.Momentum(a, learning_rate=0.1, momentum=0.9, use_nesterov=True, weight_decay=0.01)
    opt_b = optim.SGD(b, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    for grads in grad_steps:
        opt_a(grads)  # MindSpore calls the optimiser with the gradients
        opt_b.step(grads)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.value, q.value)


def test_float64_gradients_keep_float32_parameters():
    p = tg.Parameter(np.ones(3, np.float32))
    for opt in (optim.SGD([p], lr=0.1, momentum=0.9), optim.Adam([p], lr=0.1)):
        opt.step((np.ones(3),))
        assert p.dtype == np.float32
    opt = optim.Adam(lr=0.1)
    new, _ = opt.update((np.ones(3),), opt.init((np.ones(3, np.float32),)), (np.ones(3, np.float32),))
    assert new[0].dtype == np.float32


def test_single_parameter_and_bare_gradient():
    p = tg.Parameter(np.array([1.0, 2.0]))
    opt = optim.SGD(p, lr=0.5)
    opt.step(tg.grad(lambda: tnp.sum(p * p), grad_position=None, weights=p)())
    np.testing.assert_allclose(p.value, [0.0, 0.0])


def test_with_grad_of_trainable_params():
    net = nn.Dense(3, 2, seed=0, dtype=np.float64)
    x, t = np.ones((4, 3)), np.zeros((4, 2))
    before = [np.copy(p.value) for p in net.trainable_params()]
    grads = tg.grad(lambda: F.mse_loss(net(x), t), grad_position=None, weights=net.trainable_params())()
    optim.SGD(net.trainable_params(), lr=0.1).step(grads)
    for p, b, g in zip(net.trainable_params(), before, grads):
        np.testing.assert_allclose(p.value, b - 0.1 * g, rtol=1e-14)


def test_errors():
    p = tg.Parameter(np.ones(3))
    with pytest.raises(ValueError, match="2 gradients for 1"):
        optim.SGD([p]).step((np.ones(3), np.ones(3)))
    with pytest.raises(ValueError, match="shape"):
        optim.Adam([p]).step((np.ones(4),))
    with pytest.raises(RuntimeError, match="construct it with them"):
        optim.Adam().step((np.ones(3),))
    with pytest.raises(TypeError, match="Parameters"):
        optim.SGD([np.ones(3)])
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD([p], momentum=0.0, nesterov=True)
    with pytest.raises(ValueError, match="lr"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([p], betas=(0.9, 1.0))
    opt = optim.Adam()
    state = opt.init({"a": np.ones(2)})
    with pytest.raises(ValueError, match="structure"):
        opt.update({"b": np.ones(2)}, state, {"a": np.ones(2)})


# ---- the update is traceable --------------------------------------------------------------------------
def test_sgd_update_is_differentiable():
    """Meta-gradient through one step: p1 = p - lr * 2p, so d sum(p1**2) / dp = 2 (1 - 2 lr)**2 p."""
    opt = optim.SGD(lr=0.1)
    state = opt.init((np.zeros(3),))

    def loss_after_step(p):
        (p1,), _ = opt.update((2.0 * p,), state, (p,))
        return tnp.sum(p1 * p1)

    p = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(tg.grad(loss_after_step)(p), 2 * (1 - 0.2) ** 2 * p, rtol=1e-14)


def test_adam_and_momentum_updates_pass_check_grads():
    rng = np.random.default_rng(4)
    p, g = rng.standard_normal(4), rng.standard_normal(4) + 2.0  # gradients away from 0 (|g| in sqrt(v))
    for opt in (optim.Adam(lr=0.1, weight_decay=0.1), optim.SGD(lr=0.1, momentum=0.9, nesterov=True)):
        state = opt.init((p,))
        _, state = opt.update((g,), state, (p,))  # a non-zero state

        def one_step(p, g, opt=opt, state=state):
            return opt.update((g,), state, (p,))[0][0]
        check_grads(one_step, (p, g), order=2, name=type(opt).__name__)


# ---- training ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
                                      lambda ps: optim.Adam(ps, lr=0.02)], ids=["SGD", "Adam"])
def test_training_reduces_loss(make_opt):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
    t = (np.sin(2 * x[:, :1]) * x[:, 1:]).astype(np.float32)
    net = nn.Sequential(nn.Dense(2, 16, activation="tanh", seed=0), nn.Dense(16, 1, seed=1))
    opt = make_opt(net.trainable_params())
    loss_and_grad = tg.value_and_grad(lambda x, t: F.mse_loss(net(x), t), grad_position=None,
                                      weights=net.trainable_params())
    losses = []
    for _ in range(150):
        loss, grads = loss_and_grad(x, t)
        opt.step(grads)
        losses.append(float(loss))
    assert losses[-1] < 0.2 * losses[0]
    assert all(p.dtype == np.float32 for p in net.trainable_params())


# ---- optional: the same numbers as PyTorch -----------------------------------------------------------------
@pytest.mark.parametrize("cls, config", [(optim.SGD, SGD_CONFIGS[-1]), (optim.Adam, ADAM_CONFIGS[-1])],
                         ids=["SGD", "Adam"])
def test_matches_torch(cls, config):
    torch = pytest.importorskip("torch")
    values, grad_steps = _problem(np.float64, seed=6)
    params = [tg.Parameter(v.copy()) for v in values]
    tensors = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    opt = cls(params, **config)
    torch_opt = getattr(torch.optim, cls.__name__)(tensors, **config)
    for grads in grad_steps:
        opt.step(grads)
        for tensor, g in zip(tensors, grads):
            tensor.grad = torch.tensor(g)
        torch_opt.step()
    for p, tensor in zip(params, tensors):
        np.testing.assert_allclose(p.value, tensor.detach().numpy(), rtol=1e-12, atol=1e-14)
