"""tapegrad.optim: SGD (momentum, weight decay, Nesterov), Momentum and Adam against hand-written NumPy
updates, in the stateful (Parameters, ``step``) and functional (``init``/``update``) styles."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import nn, optim
from tapegrad._core import trace_stack
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
        assert_close(p.value, want, **TOL[dtype])


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
        assert_close(got, expected, **TOL[dtype])
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
    assert_close(p.value, [0.0, 0.0])


def test_with_grad_of_trainable_params():
    net = nn.Dense(3, 2, seed=0, dtype=np.float64)
    x, t = np.ones((4, 3)), np.zeros((4, 2))
    before = [np.copy(p.value) for p in net.trainable_params()]
    grads = tg.grad(lambda: F.mse_loss(net(x), t), grad_position=None, weights=net.trainable_params())()
    optim.SGD(net.trainable_params(), lr=0.1).step(grads)
    for p, b, g in zip(net.trainable_params(), before, grads):
        assert_close(p.value, b - 0.1 * g, rtol=1e-14)


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
    assert_close(tg.grad(loss_after_step)(p), 2 * (1 - 0.2) ** 2 * p, rtol=1e-14)


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
@pytest.mark.peer("torch")
@pytest.mark.parametrize("cls, config", [(optim.SGD, SGD_CONFIGS[-1]), (optim.Adam, ADAM_CONFIGS[-1])],
                         ids=["SGD", "Adam"])
def test_matches_torch(cls, config):
    import torch
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
        assert_close(p.value, tensor.detach().numpy(), rtol=1e-12, atol=1e-14)


# ---- inside jit: the state lives in Parameters, read fresh and written back --------------------------------
JIT_OPTS = {
    "SGD": lambda ps: optim.SGD(ps, lr=0.1),
    "SGD-momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
    "Momentum": lambda ps: optim.Momentum(ps, learning_rate=0.05, momentum=0.8),
    "Adam": lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.1),
}


def _net_and_data(dtype):
    net = nn.Sequential(nn.Dense(3, 5, activation="tanh", seed=0, dtype=dtype), nn.Dense(5, 2, seed=1, dtype=dtype))
    rng = np.random.default_rng(7)
    batches = [(rng.standard_normal((8, 3)).astype(dtype), rng.standard_normal((8, 2)).astype(dtype))
               for _ in range(STEPS)]
    return net, batches


def _training_step(net, opt):
    def step(x, t):
        loss, grads = tg.value_and_grad(lambda x, t: F.mse_loss(net(x), t), grad_position=None,
                                        weights=opt.params)(x, t)
        opt.step(grads)
        return loss
    return step


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(JIT_OPTS))
def test_jitted_training_step_matches_eager(name, dtype):
    (eager_net, batches), (jit_net, _) = _net_and_data(dtype), _net_and_data(dtype)
    eager_opt, jit_opt = JIT_OPTS[name](eager_net.trainable_params()), JIT_OPTS[name](jit_net.trainable_params())
    eager_step, jit_step = _training_step(eager_net, eager_opt), tg.jit(_training_step(jit_net, jit_opt))
    for x, t in batches:
        assert_close(jit_step(x, t), eager_step(x, t), **TOL[dtype])
    assert jit_step._cache_size() == 1  # staged once: the later steps ran the program
    assert trace_stack() == ()
    for p, q in zip(jit_net.trainable_params(), eager_net.trainable_params()):
        assert type(p.value) is np.ndarray and p.dtype == dtype  # written back as arrays, no tracer leaked
        assert_close(p.value, q.value, **TOL[dtype])
    for s, r in zip(tg.tree.tree_leaves(jit_opt.state_params), tg.tree.tree_leaves(eager_opt.state_params)):
        assert type(s.value) is np.ndarray and s.dtype == r.dtype
        assert_close(s.value, r.value, **TOL[dtype])
    if name == "Adam":  # the step counter is a program input and output, not a constant baked in at step 1
        assert int(jit_opt.state.step) == STEPS


def test_jitted_adam_matches_reference():
    values, grad_steps = _problem(np.float64, seed=8)
    params = tg.ParameterTuple(tg.Parameter(v.copy()) for v in values)
    opt = optim.Adam(params, lr=0.1, betas=(0.8, 0.99))
    step = tg.jit(opt.step)
    for grads in grad_steps:
        step(tuple(grads))
    for p, want in zip(params, np_adam(values, grad_steps, lr=0.1, betas=(0.8, 0.99))):
        assert_close(p.value, want, **TOL[np.float64])
    assert step._cache_size() == 1 and int(opt.state.step) == STEPS


def test_state_parameters_names_and_flags():
    net = nn.Dense(3, 2, seed=0, dtype=np.float64)
    adam = optim.Adam(net.trainable_params())
    assert adam.state_params.step.name == "adam.step" and adam.state_params.step.dtype == np.int32
    assert [s.name for s in adam.state_params.exp_avg] == ["adam.exp_avg.weight", "adam.exp_avg.bias"]
    assert [s.name for s in adam.state_params.exp_avg_sq] == ["adam.exp_avg_sq.weight", "adam.exp_avg_sq.bias"]
    sgd = optim.SGD(net.trainable_params(), momentum=0.9)
    assert [s.name for s in sgd.state_params.momentum_buffer] == ["sgd.momentum_buffer.weight",
                                                                  "sgd.momentum_buffer.bias"]
    assert optim.SGD(net.trainable_params()).state_params == optim.SGDState(None)
    for s in tg.tree.tree_leaves((adam.state_params, sgd.state_params)):
        assert isinstance(s, tg.Parameter) and not s.requires_grad
    assert len(net.trainable_params()) == 2  # the optimiser's Parameters are not the model's
    assert optim.Adam().state is None and optim.Adam().state_params is None


def test_state_can_be_saved_and_restored():
    values, grad_steps = _problem(np.float64, seed=9)
    params = [tg.Parameter(v.copy()) for v in values]
    opt = optim.Adam(params, lr=0.1)
    opt.step(grad_steps[0])
    saved_params, saved_state = [np.copy(p.value) for p in params], opt.state
    assert isinstance(saved_state, optim.AdamState) and type(saved_state.exp_avg[0]) is np.ndarray
    opt.step(grad_steps[1])
    after = [np.copy(p.value) for p in params]
    for p, v in zip(params, saved_params):
        p.assign(v)
    opt.state = saved_state  # back to the state after the first step
    opt.step(grad_steps[1])
    for p, want in zip(params, after):
        np.testing.assert_array_equal(p.value, want)
    with pytest.raises(ValueError, match="structure"):
        opt.state = optim.AdamState(saved_state.step, saved_state.exp_avg[:1], saved_state.exp_avg_sq)
    with pytest.raises(ValueError, match="dtype"):
        opt.state = saved_state._replace(step=np.zeros((), np.float64))


def test_state_keeps_the_parameters_dtype_with_float64_gradients():
    p = tg.Parameter(np.ones(3, np.float32))
    for opt in (optim.SGD([p], lr=0.1, momentum=0.9), optim.Adam([p], lr=0.1)):
        for _ in range(2):
            opt.step((np.ones(3),))
        assert all(s.dtype == np.float32 for s in tg.tree.tree_leaves(opt.state_params) if s.ndim)


def test_functional_update_inside_jit():
    values, grad_steps = _problem(np.float32, seed=10)
    opt = optim.Adam(lr=0.1)
    update = tg.jit(opt.update)
    params, state = tuple(values), opt.init(tuple(values))
    eager_params, eager_state = params, state
    for grads in grad_steps:
        params, state = update(tuple(grads), state, params)
        eager_params, eager_state = opt.update(tuple(grads), eager_state, eager_params)
    assert update._cache_size() == 1 and isinstance(state, optim.AdamState) and int(state.step) == STEPS
    for got, want in zip(params, eager_params):
        assert got.dtype == np.float32
        assert_close(got, want, **TOL[np.float32])


def test_a_functional_optimiser_has_no_state_to_assign():
    opt = optim.SGD(lr=0.1, momentum=0.9)
    assert opt.state is None
    with pytest.raises(RuntimeError, match="functional style"):
        opt.state = opt.init((np.ones(3),))
