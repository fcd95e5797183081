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


# ---- assignments the module makes while it runs ------------------------------------------------------------
def bn_net():
    return tg.nn.Sequential(tg.nn.Dense(3, 4, seed=0, dtype=np.float64), tg.nn.BatchNorm1d(4, dtype=np.float64))


def test_an_assign_to_a_given_parameter_is_refused_and_the_module_is_left_intact():
    """BatchNorm in training mode updates its running mean from the value it read: with that value
    given in params, the update has no place to go (params is not written, the module's own value was
    not used), so it is refused, and nothing of the module changes."""
    net = bn_net()
    before = values(net)
    with pytest.raises(RuntimeError, match=r"params\['layers\.1\.running_mean'\].*module\.eval\(\)"):
        tg.nn.functional_call(net, {"layers.1.running_mean": 7 * np.ones(4)}, X)
    for k, v in values(net).items():
        assert np.array_equal(v, before[k]), k
    assert trace_stack() == ()
    # the same through a sequence (Dropout's key is not trainable: given by a dict only)
    drop = tg.nn.Sequential(tg.nn.Dense(3, 4, seed=0, dtype=np.float64), tg.nn.Dropout(0.5))
    key = np.array(drop.state_dict()["layers.1.key"])
    with pytest.raises(RuntimeError, match=r"params\['layers\.1\.key'\]"):
        tg.nn.functional_call(drop, {"layers.1.key": key}, X)
    assert np.array_equal(drop.state_dict()["layers.1.key"], key)
    # in evaluation mode nothing is assigned: the given statistics are used, and the module is untouched
    net.eval()
    out = tg.nn.functional_call(net, {"layers.1.running_mean": 7 * np.ones(4)}, X)
    h = X @ before["layers.0.weight"].T + before["layers.0.bias"]
    assert_close(out, (h - 7.0) / np.sqrt(before["layers.1.running_var"] + 1e-5))
    for k, v in values(net).items():
        assert np.array_equal(v, before[k]), k


def test_an_assign_to_a_parameter_not_given_is_made_as_in_a_plain_call():
    net, twin = bn_net(), bn_net()
    new = {k: v + 0.5 for k, v in values(net).items() if k in ("layers.0.weight", "layers.0.bias")}
    out = tg.nn.functional_call(net, new, X)
    twin.load_state_dict({**values(twin), **new})  # the plain call with those values
    assert_close(out, twin(X))
    for k in ("layers.1.running_mean", "layers.1.running_var", "layers.1.num_batches_tracked"):
        assert np.array_equal(net.state_dict()[k], twin.state_dict()[k]), k
    assert int(net.state_dict()["layers.1.num_batches_tracked"]) == 1


def test_an_exception_during_the_call_puts_back_what_the_module_assigned():
    net = tg.nn.Sequential(tg.nn.BatchNorm1d(3, dtype=np.float64), tg.nn.Dense(4, 2, seed=0, dtype=np.float64))
    before = values(net)
    with pytest.raises(ValueError):  # the BatchNorm updates its statistics, then the Dense refuses 3 features
        tg.nn.functional_call(net, {"layers.1.bias": np.zeros(2)}, X)
    for k, v in values(net).items():
        assert np.array_equal(v, before[k]), k
    # a refused assign after one that was made: the first is put back too
    twice = tg.nn.Sequential(tg.nn.BatchNorm1d(3, dtype=np.float64), tg.nn.BatchNorm1d(3, dtype=np.float64))
    before = values(twice)
    with pytest.raises(RuntimeError, match=r"layers\.1\.running_var"):
        tg.nn.functional_call(twice, {"layers.1.running_var": np.full(3, 2.0)}, X)
    for k, v in values(twice).items():
        assert np.array_equal(v, before[k]), k
    assert trace_stack() == ()


class Counting(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = tg.Parameter(np.full(3, 2.0))
        self.calls = tg.Parameter(np.zeros(()), requires_grad=False)

    @tg.jit
    def __call__(self, x):
        self.calls.assign(self.calls.value + 1.0)
        return x * self.scale


def test_a_jitted_module_cannot_write_back_a_given_parameter():
    """The program staged by a plain call writes ``calls`` back at each call: inside functional_call,
    with ``calls`` given, the write-back is refused before any Parameter changes."""
    net = Counting()
    net(X[0])
    assert float(net.calls.value) == 1.0
    assert_close(tg.nn.functional_call(net, {"scale": np.ones(3)}, X[0]), X[0])  # calls not given: counted
    assert float(net.calls.value) == 2.0
    with pytest.raises(RuntimeError, match=r"params\['calls'\]"):
        tg.nn.functional_call(net, {"scale": np.ones(3), "calls": np.zeros(())}, X[0])
    assert float(net.calls.value) == 2.0 and np.array_equal(net.scale.value, np.full(3, 2.0))


# ---- the keys and values of params ---------------------------------------------------------------------------
class Tied(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = tg.nn.Dense(2, 2, has_bias=False, seed=0, dtype=np.float64)
        self.b = tg.nn.Dense(2, 2, has_bias=False, seed=1, dtype=np.float64)
        self.b.weight = self.a.weight  # one Parameter, two paths; state_dict() names it once

    def __call__(self, x):
        return self.b(self.a(x))


def test_a_tied_parameter_is_given_under_any_of_its_paths():
    net = Tied()
    assert list(net.state_dict()) == ["a.weight"]
    w, x = np.array([[2.0, 1.0], [0.0, 3.0]]), np.array([[1.0, -1.0]])
    expected = x @ w.T @ w.T
    assert_close(tg.nn.functional_call(net, {"a.weight": w}, x), expected)
    assert_close(tg.nn.functional_call(net, {"b.weight": w}, x), expected)
    assert_close(tg.nn.functional_call(net, {"a.weight": w, "b.weight": w}, x), expected)
    assert_close(tg.nn.functional_call(net, {"b.weight": w}, x, strict=True), expected)
    with pytest.raises(ValueError, match=r"params\['a\.weight'\] and params\['b\.weight'\] are the same \(tied\)"):
        tg.nn.functional_call(net, {"a.weight": w, "b.weight": w + 1.0}, x)
    g = tg.grad(lambda p: tnp.sum(tg.nn.functional_call(net, p, x)))({"b.weight": w})
    assert_close(g["b.weight"], tg.grad(lambda v: tnp.sum(x @ v.T @ v.T))(w))


def test_a_value_that_is_not_a_numeric_array_is_named():
    net = make_net()
    with pytest.raises(TypeError, match=r"params\['layers\.0\.bias'\] is a str, not an array.*shape \(4,\)"):
        tg.nn.functional_call(net, {"layers.0.bias": "abc"}, X)
    with pytest.raises(TypeError, match=r"params\['layers\.0\.bias'\] is a NoneType .*not a numeric array"):
        tg.nn.functional_call(net, {"layers.0.bias": None}, X)
    with pytest.raises(TypeError, match=r"params\[1\] \(Parameter 'layers\.0\.bias'\) is a str"):
        tg.nn.functional_call(net, [np.zeros((4, 3)), "abcd", np.zeros((2, 4)), np.zeros(2)], X)


def test_strict_with_a_sequence_requires_every_parameter_to_be_trainable():
    net = make_net()
    p = [np.asarray(q.value) for q in net.trainable_params()]
    assert_close(tg.nn.functional_call(net, p, X, strict=True), net(X))  # every Parameter is trainable
    bn = bn_net().eval()
    p = [np.asarray(q.value) for q in bn.trainable_params()]
    with pytest.raises(KeyError, match=r"strict=True.*\['layers\.1\.running_mean', 'layers\.1\.running_var', "
                                       r"'layers\.1\.num_batches_tracked'\]"):
        tg.nn.functional_call(bn, p, X, strict=True)
    assert_close(tg.nn.functional_call(bn, p, X), bn(X))
