"""``tg.nn.functional_call``: a module evaluated with given values for its Parameters, differentiable with
respect to them (torch.func.functional_call), and the module untouched."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack
from tapegrad.nn import functional as F

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3))
Y = RNG.integers(0, 2, 6)


def make_net():
    return tg.nn.Sequential(tg.nn.Dense(3, 4, activation="tanh", seed=0, dtype=np.float64),
                            tg.nn.Dense(4, 2, seed=1, dtype=np.float64))


def by_hand(p, x):
    """The same network written out on arrays: the reference."""
    h = tnp.tanh(x @ p["layers.0.weight"].T + p["layers.0.bias"])
    return h @ p["layers.1.weight"].T + p["layers.1.bias"]


def values(net):
    return {k: np.array(v) for k, v in net.state_dict().items()}


def test_values_replace_the_parameters_without_changing_the_module():
    net = make_net()
    before = values(net)
    new = {k: v + 0.25 for k, v in before.items()}
    assert_close(tg.nn.functional_call(net, new, X), by_hand(new, X))
    assert_close(tg.nn.functional_call(net, new, (X,)), by_hand(new, X))  # a tuple of arguments
    # a sequence in trainable_params() order
    assert_close(tg.nn.functional_call(net, [new[p.name] for p in net.trainable_params()], X), by_hand(new, X))
    # a name left out keeps the module's value (PyTorch's default)
    partial = {"layers.1.bias": before["layers.1.bias"] - 1.0}
    assert_close(tg.nn.functional_call(net, partial, X), by_hand({**before, **partial}, X))
    for k, v in values(net).items():
        assert np.array_equal(v, before[k]), k
    assert_close(net(X), by_hand(before, X))


def test_hvp_and_jacrev_over_the_values_match_the_function_written_by_hand():
    net = make_net()
    p0 = values(net)
    tangent = {k: RNG.standard_normal(v.shape) for k, v in p0.items()}

    def loss(p):
        return F.cross_entropy(tg.nn.functional_call(net, p, X), Y)

    def loss_by_hand(p):
        return F.cross_entropy(by_hand(p, X), Y)

    value, hvp_out = tg.hvp(loss, (p0,), (tangent,))
    value_ref, hvp_ref = tg.hvp(loss_by_hand, (p0,), (tangent,))
    assert_close(value, value_ref, rtol=1e-14)
    for k in p0:
        assert_close(hvp_out[0][k], hvp_ref[0][k], rtol=1e-10, atol=1e-12)
    # the other route: central differences of grad(weights=...) along the tangent
    eps = 1e-6
    params = net.trainable_params()
    grad_w = tg.grad(lambda: loss_by_hand({p.name: p.value for p in params}), grad_position=None, weights=params)

    def grads_at(sign):
        for p in params:
            p.assign(p0[p.name] + sign * eps * tangent[p.name])
        return grad_w()
    plus, minus = grads_at(1), grads_at(-1)
    for p, gp, gm in zip(params, plus, minus):
        assert_close(hvp_out[0][p.name], (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-7)
    jac = tg.jacrev(lambda p: tg.nn.functional_call(net, p, X))(p0)
    jac_ref = tg.jacrev(lambda p: by_hand(p, X))(p0)
    for k in p0:
        assert_close(jac[k], jac_ref[k], rtol=1e-12, atol=1e-14)


def test_grad_vmap_and_jit_over_the_values():
    net = make_net()
    p0 = values(net)
    g = tg.grad(lambda p: tnp.sum(tg.nn.functional_call(net, p, X) ** 2))(p0)
    g_ref = tg.grad(lambda p: tnp.sum(by_hand(p, X) ** 2))(p0)
    for k in p0:
        assert_close(g[k], g_ref[k], rtol=1e-12)
    # a batch of parameter sets (an ensemble) in one call
    batch = {k: np.stack([v, 2 * v]) for k, v in p0.items()}
    out = tg.vmap(lambda p: tg.nn.functional_call(net, p, X))(batch)
    assert_close(out[1], by_hand({k: 2 * v for k, v in p0.items()}, X))
    jitted = tg.jit(lambda p, x: tg.nn.functional_call(net, p, x))
    assert_close(jitted(p0, X), by_hand(p0, X))
    assert_close(jitted({k: v * 3 for k, v in p0.items()}, X), by_hand({k: v * 3 for k, v in p0.items()}, X))
    assert trace_stack() == ()


def test_bad_input_names_the_problem_and_leaves_the_module_intact():
    net = make_net()
    before = values(net)
    with pytest.raises(KeyError, match=r"\['layers\.0\.wieght'\] name no Parameter.*layers\.0\.weight"):
        tg.nn.functional_call(net, {"layers.0.wieght": before["layers.0.weight"]}, X)
    with pytest.raises(KeyError, match=r"strict=True.*layers\.1\.bias"):
        tg.nn.functional_call(net, {k: v for k, v in before.items() if k != "layers.1.bias"}, X, strict=True)
    with pytest.raises(ValueError, match=r"params\['layers\.0\.bias'\] has shape \(3,\).*\(4,\)"):
        tg.nn.functional_call(net, {"layers.0.bias": np.zeros(3)}, X)
    with pytest.raises(ValueError, match="sequence of 1 values.*4 trainable"):
        tg.nn.functional_call(net, [before["layers.0.weight"]], X)
    with pytest.raises(TypeError, match="params must be a dict"):
        tg.nn.functional_call(net, 3.0, X)
    with pytest.raises(TypeError, match="module must be a tg.nn.Module"):
        tg.nn.functional_call(by_hand, before, X)
    # an exception inside the module's call: no substitution is left behind
    with pytest.raises(ValueError):
        tg.nn.functional_call(net, {k: v + 1 for k, v in before.items()}, np.ones((2, 5)))
    for k, v in values(net).items():
        assert np.array_equal(v, before[k]), k
    assert_close(net(X), by_hand(before, X))
    assert trace_stack() == ()
