"""tapegrad.nn: functional (gradients to order 2, exact values, kinks, dtypes, stability), Module
(naming, order, frozen and shared Parameters), Dense, Sequential and a hand-computed network gradient."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
import scipy.special as sp

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad import nn
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]


# ---- the table of functional ops -----------------------------------------------------------------
def _normal(rng, shape):
    return rng.standard_normal(shape)


def _away_from_zero(rng, shape):
    """Values with |x| in [0.3, 2]: clear of the kink at 0 by more than the finite-difference step."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.3, 2.0, size=shape)


class OpSpec(NamedTuple):
    name: str
    fn: Callable
    reference: Callable  # the same function in NumPy / SciPy
    domain: Callable = _normal
    shapes: tuple = ((), (3,), (2, 3))


def _np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


AXIS_SHAPES = ((3,), (2, 3), (2, 3, 2))

SPECS = [
    OpSpec("relu", F.relu, lambda x: np.maximum(x, 0.0), _away_from_zero),
    OpSpec("leaky_relu", functools.partial(F.leaky_relu, negative_slope=0.2),
           lambda x: np.where(x > 0, x, 0.2 * x), _away_from_zero),
    OpSpec("elu", functools.partial(F.elu, alpha=1.5), lambda x: np.where(x > 0, x, 1.5 * np.expm1(x)),
           _away_from_zero),
    OpSpec("gelu", F.gelu, lambda x: x * sp.ndtr(x)),
    OpSpec("gelu_tanh", functools.partial(F.gelu, approximate="tanh"), _np_gelu_tanh),
    OpSpec("sigmoid", F.sigmoid, sp.expit),
    OpSpec("softplus", F.softplus, _np_softplus),
    OpSpec("softplus_beta", functools.partial(F.softplus, beta=2.0, threshold=3.0),
           functools.partial(_np_softplus, beta=2.0, threshold=3.0), _away_from_zero),
    OpSpec("silu", F.silu, lambda x: x * sp.expit(x)),
    OpSpec("tanh", F.tanh, np.tanh),
    OpSpec("softmax", F.softmax, lambda x: sp.softmax(x, axis=-1), shapes=AXIS_SHAPES),
    OpSpec("softmax_axis0", functools.partial(F.softmax, axis=0), lambda x: sp.softmax(x, axis=0),
           shapes=AXIS_SHAPES),
    OpSpec("log_softmax", F.log_softmax, lambda x: sp.log_softmax(x, axis=-1), shapes=AXIS_SHAPES),
    OpSpec("log_softmax_axis0", functools.partial(F.log_softmax, axis=0),
           lambda x: sp.log_softmax(x, axis=0), shapes=AXIS_SHAPES),
    OpSpec("logsumexp", F.logsumexp, sp.logsumexp, shapes=AXIS_SHAPES),
    OpSpec("logsumexp_axis", functools.partial(F.logsumexp, axis=-1, keepdims=True),
           lambda x: sp.logsumexp(x, axis=-1, keepdims=True), shapes=AXIS_SHAPES),
]

CASES = [pytest.param(spec, shape, id=f"{spec.name}-{shape}") for spec in SPECS for shape in spec.shapes]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shape", CASES)
def test_functional_grads(spec, shape, dtype):
    x = spec.domain(np.random.default_rng(0), shape).astype(dtype)
    check_grads(spec.fn, (x,), order=2, name=spec.name)


@pytest.mark.parametrize("spec, shape", CASES)
def test_functional_values(spec, shape):
    x = spec.domain(np.random.default_rng(1), shape)
    assert_close(spec.fn(x), spec.reference(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_functional_float32_preserved(spec):
    x = spec.domain(np.random.default_rng(2), (2, 3)).astype(np.float32)
    out = spec.fn(x)
    assert out.dtype == np.float32
    g = tg.grad(lambda x: tnp.sum(spec.fn(x)))(x)
    assert g.dtype == np.float32
    assert_close(out, spec.reference(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shape", CASES)
def test_functional_vmap(spec, shape, dtype):
    x = spec.domain(np.random.default_rng(0), shape).astype(dtype)
    check_vmap_mixes(spec.fn, (x,), slack=10.0)


# ---- kinks and stability -------------------------------------------------------------------------
def test_relu_derivative_at_zero_is_zero():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(F.relu(x)))(x), [0.0, 0.0, 1.0])
    # second derivative is zero everywhere, including through the rule itself
    d2 = tg.grad(lambda x: tnp.sum(tg.grad(lambda y: tnp.sum(F.relu(y) * y))(x)))(x)
    np.testing.assert_array_equal(d2, [0.0, 0.0, 2.0])


def test_relu_module_and_kinks_of_other_activations():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(nn.ReLU()(x), [0.0, 0.0, 2.0])
    # PyTorch's backward takes the negative branch at 0
    assert_close(tg.grad(lambda x: tnp.sum(F.leaky_relu(x, 0.1)))(x), [0.1, 0.1, 1.0])
    assert_close(tg.grad(lambda x: tnp.sum(F.elu(x, 2.0)))(x), [2 * math.exp(-1), 2.0, 1.0])


def test_stability_at_large_inputs():
    big = np.array([-1000.0, -50.0, 0.5, 50.0, 1000.0], dtype=np.float32)
    for fn in (F.sigmoid, F.softplus, F.silu, F.elu, F.gelu, F.log_softmax, F.softmax):
        out = fn(big)
        g = tg.grad(lambda x, fn=fn: tnp.sum(fn(x)))(big)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(g)), fn.__name__
    assert_close(F.log_softmax(np.array([1000.0, 0.0])), [0.0, -1000.0])
    assert_close(F.softplus(np.array([1000.0, -1000.0])), [1000.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(np.array([100.0, -100.0]), np.array([0.0, 1.0]), reduction="none")
    assert_close(loss, [100.0, 100.0])
    assert_close(tg.grad(lambda x: F.binary_cross_entropy_with_logits(x, np.array([0.0, 1.0]),
                                                                                    reduction="sum"))(
        np.array([100.0, -100.0])), [1.0, -1.0])


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(np.ones(2), approximate="erf")


# ---- losses --------------------------------------------------------------------------------------
def _np_log_softmax(x, axis):
    return x - sp.logsumexp(x, axis=axis, keepdims=True)


def _np_cross_entropy(logits, labels, weight=None, reduction="mean", label_smoothing=0.0, ignore_index=-100):
    """PyTorch's definition, spelled out with loops over (N, C) logits and integer labels."""
    n, c = logits.shape
    logp = _np_log_softmax(logits, 1)
    w = np.ones(c) if weight is None else weight
    losses, denominators = [], []
    for i in range(n):
        if labels[i] == ignore_index:
            losses.append(0.0)
            continue
        nll = -w[labels[i]] * logp[i, labels[i]]
        smooth = -np.sum(w * logp[i])
        losses.append((1 - label_smoothing) * nll + label_smoothing / c * smooth)
        denominators.append(w[labels[i]])
    losses = np.array(losses)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / np.sum(denominators)


def _np_soft_cross_entropy(logits, probs, weight=None, reduction="mean", label_smoothing=0.0):
    c = logits.shape[1]
    w = np.ones(c) if weight is None else weight
    probs = probs * (1 - label_smoothing) + label_smoothing / c
    losses = -np.sum(w * probs * _np_log_softmax(logits, 1), axis=1)
    return {"none": losses, "sum": losses.sum(), "mean": losses.mean()}[reduction]


@pytest.fixture
def logits_and_labels():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((5, 4))
    labels = np.array([0, 3, 1, 1, 2])
    probs = sp.softmax(rng.standard_normal((5, 4)), axis=1)
    weight = rng.uniform(0.5, 2.0, 4)
    return logits, labels, probs, weight


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_values(logits_and_labels, reduction, label_smoothing, weighted):
    logits, labels, probs, weight = logits_and_labels
    weight = weight if weighted else None
    labels_ignored = labels.copy()
    labels_ignored[2] = -1
    for lab in (labels, labels_ignored):
        assert_close(
            F.cross_entropy(logits, lab, weight=weight, reduction=reduction, label_smoothing=label_smoothing,
                            ignore_index=-1),
            _np_cross_entropy(logits, lab, weight, reduction, label_smoothing, ignore_index=-1), rtol=1e-12)
    assert_close(
        F.cross_entropy(logits, probs, weight=weight, reduction=reduction, label_smoothing=label_smoothing),
        _np_soft_cross_entropy(logits, probs, weight, reduction, label_smoothing), rtol=1e-12)


def test_cross_entropy_integer_and_probability_labels_agree(logits_and_labels):
    logits, labels, _, weight = logits_and_labels
    for dtype in DTYPES:
        x = logits.astype(dtype)
        onehot = F.one_hot(labels, 4, dtype=dtype)
        for reduction, w in (("mean", None), ("sum", weight), ("none", weight)):
            a = F.cross_entropy(x, labels, weight=w, reduction=reduction)
            b = F.cross_entropy(x, onehot, weight=w, reduction=reduction)
            assert_close(a, b, rtol=1e-6)
            assert np.result_type(a) == np.result_type(b) == dtype
        ga = tg.grad(lambda x: F.cross_entropy(x, labels))(x)
        gb = tg.grad(lambda x, onehot=onehot: F.cross_entropy(x, onehot))(x)
        assert_close(ga, gb, rtol=1e-6)
        assert_close(ga, (sp.softmax(x.astype(np.float64), 1) - onehot) / 5, rtol=1e-5, atol=1e-7)
        assert ga.dtype == dtype


def test_cross_entropy_spatial_and_unbatched():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4))  # (N, C, d1)
    y = rng.integers(0, 3, (2, 4))
    moved = np.moveaxis(x, 1, -1).reshape(-1, 3)
    assert_close(F.cross_entropy(x, y), _np_cross_entropy(moved, y.reshape(-1)), rtol=1e-12)
    assert_close(F.cross_entropy(x, y, reduction="none"),
                 _np_cross_entropy(moved, y.reshape(-1), reduction="none").reshape(2, 4), rtol=1e-12)
    v = rng.standard_normal(3)  # (C,) logits with a () label
    assert_close(F.cross_entropy(v, np.array(2)), -_np_log_softmax(v, 0)[2], rtol=1e-12)
    assert np.shape(F.cross_entropy(v, np.array(2), reduction="none")) == ()


def test_nll_loss_values(logits_and_labels):
    logits, labels, _, weight = logits_and_labels
    logp = _np_log_softmax(logits, 1)
    picked = -logp[np.arange(5), labels]
    assert_close(F.nll_loss(logp, labels), picked.mean(), rtol=1e-12)
    assert_close(F.nll_loss(logp, labels, reduction="none"), picked, rtol=1e-12)
    w = weight[labels]
    assert_close(F.nll_loss(logp, labels, weight=weight), np.sum(w * picked) / np.sum(w), rtol=1e-12)
    ignored = labels.copy()
    ignored[0] = -100
    assert_close(F.nll_loss(logp, ignored), picked[1:].mean(), rtol=1e-12)


def test_loss_errors(logits_and_labels):
    logits, labels, _, _ = logits_and_labels
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(logits, labels, reduction="average")
    with pytest.raises(ValueError, match="shape"):
        F.cross_entropy(logits, labels[:3])
    with pytest.raises(ValueError, match="shape"):
        F.cross_entropy(logits, np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        F.cross_entropy(logits, np.array([0, 1, 2, 3, 4]))
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(logits, np.ones(5, bool))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(logits, labels, label_smoothing=1.5)
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(logits, logits, reduction="avg")


def test_mse_and_bce_values():
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((3, 4)), rng.uniform(0, 1, (3, 4))
    assert_close(F.mse_loss(x, t), np.mean((x - t) ** 2), rtol=1e-12)
    assert_close(F.mse_loss(x, t, reduction="sum"), np.sum((x - t) ** 2), rtol=1e-12)
    s = sp.expit(x)
    bce = -(t * np.log(s) + (1 - t) * np.log(1 - s))
    assert_close(F.binary_cross_entropy_with_logits(x, t, reduction="none"), bce, rtol=1e-12)
    pos_weight, weight = rng.uniform(0.5, 3, 4), rng.uniform(0.5, 2, (3, 1))
    weighted = -weight * (pos_weight * t * np.log(s) + (1 - t) * np.log(1 - s))
    assert_close(F.binary_cross_entropy_with_logits(x, t, weight=weight, pos_weight=pos_weight),
                 weighted.mean(), rtol=1e-12)
    # the derivative at 0 is sigmoid(0) - t, with or without pos_weight (the ties of max split evenly)
    g = tg.grad(lambda x: F.binary_cross_entropy_with_logits(x, np.array([0.3]), reduction="sum"))(np.zeros(1))
    assert_close(g, [0.5 - 0.3])
    g = tg.grad(lambda x: F.binary_cross_entropy_with_logits(x, np.array([0.3]), pos_weight=np.array([2.0]),
                                                             reduction="sum"))(np.zeros(1))
    assert_close(g, [0.5 * 0.7 - 2.0 * 0.3 * 0.5])


LOSS_CASES = {
    "cross_entropy_int": lambda x, aux: F.cross_entropy(x, aux["labels"]),
    "cross_entropy_int_weighted_smoothed": lambda x, aux: F.cross_entropy(
        x, aux["labels"], weight=aux["weight"], label_smoothing=0.1, reduction="sum"),
    "cross_entropy_prob": lambda x, aux: F.cross_entropy(x, aux["probs"]),
    "nll_loss": lambda x, aux: F.nll_loss(F.log_softmax(x, axis=1), aux["labels"], reduction="none"),
    "mse_loss": lambda x, aux: F.mse_loss(x, aux["probs"]),
    "bce_with_logits": lambda x, aux: F.binary_cross_entropy_with_logits(x, aux["probs"]),
    "bce_with_logits_pos_weight": lambda x, aux: F.binary_cross_entropy_with_logits(
        x, aux["probs"], pos_weight=aux["weight"], reduction="sum"),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_grads(name, dtype, logits_and_labels):
    logits, labels, probs, weight = logits_and_labels
    aux = {"labels": labels, "probs": probs.astype(dtype), "weight": weight.astype(dtype)}
    # keep |x| away from 0: the BCE formulas have |x| and max(x, 0), smooth in total but kinked per term
    x = np.where(np.abs(logits) < 0.2, 0.5, logits).astype(dtype)
    fn = LOSS_CASES[name]
    check_grads(lambda x: fn(x, aux), (x,), order=2, name=name)
    assert tg.grad(lambda x: tnp.sum(fn(x, aux)))(x).dtype == dtype
    assert np.result_type(fn(x, aux)) == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_vmap(name, dtype, logits_and_labels):
    logits, labels, probs, weight = logits_and_labels
    fn = LOSS_CASES[name]

    def example(rng):  # logits, integer labels, probabilities, class weights
        return (rng.standard_normal((5, 4)).astype(dtype), rng.integers(0, 4, 5),
                sp.softmax(rng.standard_normal((5, 4)), axis=1).astype(dtype), rng.uniform(0.5, 2.0, 4).astype(dtype))
    args = (logits.astype(dtype), labels, probs.astype(dtype), weight.astype(dtype))
    loss = lambda x, labels, probs, weight: fn(x, {"labels": labels, "probs": probs, "weight": weight})  # noqa: E731
    check_vmap_mixes(loss, args, draw=example, slack=10.0)


def test_loss_grads_wrt_targets():
    rng = np.random.default_rng(6)
    x, t = rng.standard_normal((3, 4)), sp.softmax(rng.standard_normal((3, 4)), axis=1)
    check_grads(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (x, t), order=2)
    check_grads(lambda x, t: F.binary_cross_entropy_with_logits(x, t), (x + np.sign(x), t), order=2)
    check_grads(F.mse_loss, (x, t), order=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_linear(dtype):
    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((2, 3), (4, 3), (4,)))
    assert_close(F.linear(x, w, b), x @ w.T + b, rtol=1e-6)
    assert_close(F.linear(x, w), x @ w.T, rtol=1e-6)
    check_grads(F.linear, (x, w, b), order=2)
    assert F.linear(x, w, b).dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_linear_vmap(dtype):
    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((2, 3), (4, 3), (4,)))
    check_vmap_mixes(F.linear, (x, w, b), slack=10.0)
    check_vmap(lambda x, w: F.linear(x, w), (x[0], w), (0, None), slack=10.0)


def test_one_hot_vmap():
    labels = np.array([[0, 2], [1, 0]])
    check_vmap_mixes(lambda y: F.one_hot(y, 3), (labels,), draw=lambda rng: (rng.integers(0, 3, (2, 2)),))


def test_one_hot():
    out = F.one_hot(np.array([[0, 2], [1, 0]]), 3)
    assert out.shape == (2, 2, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(F.one_hot(np.array([1, 3]), dtype=np.int64), [[0, 1, 0, 0], [0, 0, 0, 1]])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        F.one_hot(np.array([3]), 3)
    with pytest.raises(TypeError, match="integers"):
        F.one_hot(np.array([1.0]), 3)


# ---- Module ----------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 3, seed=0)
        self.gain = tg.Parameter(np.ones(3))

    def __call__(self, x):
        return self.fc(x) * self.gain


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 3, seed=1)
        self.frozen = tg.Parameter(np.zeros(3), requires_grad=False)
        self.block = Block()
        self.scale = tg.Parameter(np.ones(()), name="my_scale")
        self.heads = [nn.Dense(3, 2, seed=2), nn.Dense(3, 1, has_bias=False, seed=3)]
        self.alias = self.fc1  # shared: listed once, under its first path
        self.tied = self.block.gain

    def __call__(self, x):
        h = self.block(F.tanh(self.fc1(x) + self.frozen))
        return tnp.sum(self.heads[0](h)) * self.scale + tnp.sum(self.heads[1](h))


def test_module_names_order_depth_first():
    net = Net()
    params = net.trainable_params()
    assert isinstance(params, tg.ParameterTuple)
    assert [p.name for p in params] == ["fc1.weight", "fc1.bias", "block.fc.weight", "block.fc.bias",
                                        "block.gain", "my_scale", "heads.0.weight", "heads.0.bias",
                                        "heads.1.weight"]
    assert params[0] is net.fc1.weight and params[4] is net.block.gain
    assert [p.name for p in net.parameters()] == [p.name for p in params[:2]] + ["frozen"] + [
        p.name for p in params[2:]]
    assert net.untrainable_params() == (net.frozen,)
    assert [path for path, _ in net.named_parameters()][5:7] == ["block.gain", "scale"]


def test_module_user_names_kept_and_sub_module_renamed():
    block = Block()
    assert [p.name for p in block.trainable_params()] == ["fc.weight", "fc.bias", "gain"]

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = block

    assert [p.name for p in Outer().trainable_params()] == ["inner.fc.weight", "inner.fc.bias", "inner.gain"]
    p = tg.Parameter(np.ones(2), name="kept")
    seq = nn.Sequential(nn.Dense(2, 2, seed=0))
    seq.extra = p
    assert [q.name for q in seq.trainable_params()] == ["layers.0.weight", "layers.0.bias", "kept"]


def test_frozen_parameter_can_be_unfrozen():
    net = Net()
    net.frozen.requires_grad = True
    assert any(p is net.frozen for p in net.trainable_params())  # `in` would compare elementwise
    assert net.trainable_params()[2] is net.frozen


def test_module_grad_with_trainable_params():
    net = Net()
    x = np.random.default_rng(8).standard_normal((5, 4))
    params = net.trainable_params()
    grads = tg.grad(net, grad_position=None, weights=params)(x)
    assert isinstance(grads, tuple) and len(grads) == len(params)
    for p, g in zip(params, grads):
        assert g.shape == p.shape
    # the gradient of the scale is the head's sum; of a Parameter the output does not use, zeros
    h = net.block(F.tanh(net.fc1(x)))
    assert_close(grads[5], np.sum(net.heads[0](h)), rtol=1e-12)
    named = dict(zip([p.name for p in params], grads))
    check = tg.grad(lambda x: net(x), grad_position=None, weights=net.fc1.bias)(x)
    assert_close(named["fc1.bias"], check)


def test_train_eval_and_call_conventions():
    net = Net()
    assert net.training and net.block.training and net.heads[0].training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())

    class Forward(nn.Module):
        def forward(self, x):
            return x + 1

    assert Forward()(1) == 2
    with pytest.raises(NotImplementedError, match="__call__"):
        nn.Module()(1)
    assert "Dense(in_channels=4, out_channels=3)" in repr(net)


# ---- Dense and Sequential ----------------------------------------------------------------------------
def test_dense_shapes_default_init_and_dtype():
    layer = nn.Dense(16, 5, seed=0)
    assert layer.weight.shape == (5, 16) and layer.bias.shape == (5,)
    assert layer.weight.dtype == layer.bias.dtype == np.float32
    bound = 1 / math.sqrt(16)
    assert np.abs(layer.weight.value).max() <= bound and np.abs(layer.bias.value).max() <= bound
    assert np.abs(layer.weight.value).max() > 0.8 * bound  # U(-b, b), not something narrower
    x = np.ones((2, 7, 16), np.float32)
    assert layer(x).shape == (2, 7, 5) and layer(x).dtype == np.float32
    np.testing.assert_array_equal(nn.Dense(16, 5, seed=0).weight.value, layer.weight.value)
    assert not np.array_equal(nn.Dense(16, 5, seed=1).weight.value, layer.weight.value)
    assert nn.Dense(3, 2, dtype=np.float64).weight.dtype == np.float64


def test_dense_forward_matches_numpy():
    w, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0])
    layer = nn.Dense(3, 2, weight_init=w, bias_init=b, activation="relu", dtype=np.float64)
    x = np.array([[1.0, -2.0, 0.5], [-1.0, 0.0, -3.0]])
    assert_close(layer(x), np.maximum(x @ w.T + b, 0))
    w[0, 0] = 100.0  # the layer holds a copy
    assert layer.weight.value[0, 0] == 0.0
    assert nn.Dense(3, 2, activation=np.tanh, has_bias=False, weight_init=np.ones((2, 3)))(x).shape == (2, 2)
    assert nn.Dense(3, 2, has_bias=False).bias is None


def test_dense_init_options():
    calls = []

    def custom(shape, dtype, rng):
        calls.append((shape, np.dtype(dtype), isinstance(rng, np.random.Generator)))
        return np.full(shape, 0.5)

    layer = nn.Dense(4, 3, weight_init=custom, bias_init="zeros", dtype=np.float32)
    assert calls == [((3, 4), np.dtype(np.float32), True)]
    assert layer.weight.dtype == np.float32 and np.all(layer.weight.value == 0.5)
    assert np.all(layer.bias.value == 0)
    layer = nn.Dense(4, 3, weight_init=nn.init.xavier_uniform, bias_init=0.1, seed=0)
    assert np.abs(layer.weight.value).max() <= math.sqrt(6 / 7)
    bias = layer.bias.value
    np.testing.assert_array_equal(bias, bias.dtype.type(0.1))  # a constant fill: exact in its dtype
    layer = nn.Dense(4, 3, weight_init=functools.partial(nn.init.normal, std=1e-3), seed=0)
    assert np.abs(layer.weight.value).max() < 1e-2


def test_dense_errors():
    with pytest.raises(ValueError, match=r"shape \(3, 4\).*needs \(4, 3\)"):
        nn.Dense(3, 4, weight_init=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="bias_init"):
        nn.Dense(3, 4, bias_init=np.zeros(3))
    with pytest.raises(ValueError, match="needs"):
        nn.Dense(3, 4, weight_init=lambda shape, dtype, rng: np.zeros(3))
    with pytest.raises(ValueError, match="activation"):
        nn.Dense(3, 4, activation="swoosh")
    with pytest.raises(ValueError, match="initialiser"):
        nn.Dense(3, 4, weight_init="glorot")
    with pytest.raises(ValueError, match="positive"):
        nn.Dense(0, 4)
    with pytest.raises(TypeError, match="int"):
        nn.Dense(3.0, 4)
    with pytest.raises(ValueError, match="last axis"):
        nn.Dense(3, 4)(np.ones((2, 5)))


def test_sequential():
    seq = nn.Sequential(nn.Dense(4, 8, seed=0), nn.ReLU(), tnp.tanh, nn.Dense(8, 2, seed=1), nn.Sigmoid())
    assert len(seq) == 5 and isinstance(seq[1], nn.ReLU)
    assert [p.name for p in seq.trainable_params()] == ["layers.0.weight", "layers.0.bias",
                                                       "layers.3.weight", "layers.3.bias"]
    x = np.random.default_rng(9).standard_normal((3, 4)).astype(np.float32)
    h = np.tanh(np.maximum(x @ seq[0].weight.value.T + seq[0].bias.value, 0))
    expected = sp.expit(h @ seq[3].weight.value.T + seq[3].bias.value)
    assert_close(seq(x), expected, rtol=1e-5)
    assert seq(x).dtype == np.float32
    assert_close(nn.Sequential([nn.Tanh(), nn.Tanh()])(np.array(0.5)), np.tanh(np.tanh(0.5)))
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    with pytest.raises(TypeError, match="not callable"):
        nn.Sequential(nn.ReLU(), 3)


def test_dense_mse_weight_gradient_matches_hand_computed():
    """Two Dense layers with tanh, mse loss: backprop written out in NumPy."""
    rng = np.random.default_rng(10)
    net = nn.Sequential(nn.Dense(3, 4, activation="tanh", dtype=np.float64, seed=0),
                        nn.Dense(4, 2, dtype=np.float64, seed=1))
    x, t = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    grads = tg.grad(lambda x, t: F.mse_loss(net(x), t), grad_position=None, weights=net.trainable_params())(x, t)

    w1, b1, w2, b2 = (p.value for p in net.trainable_params())
    h = np.tanh(x @ w1.T + b1)
    y = h @ w2.T + b2
    dy = 2 * (y - t) / y.size
    dw2, db2 = dy.T @ h, dy.sum(0)
    dh = dy @ w2
    dz = dh * (1 - h ** 2)
    dw1, db1 = dz.T @ x, dz.sum(0)
    for got, want in zip(grads, (dw1, db1, dw2, db2)):
        assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_init_functions():
    rng = np.random.default_rng(11)
    w = nn.init.kaiming_uniform((200, 50), rng=rng, a=math.sqrt(5))
    assert w.dtype == np.float32 and np.abs(w).max() <= 1 / math.sqrt(50)
    w = nn.init.kaiming_uniform((300, 100), np.float64, rng)  # gain sqrt(2 / (1 + 0.01**2))
    assert abs(np.abs(w).max() - math.sqrt(6 / (1 + 1e-4) / 100)) < 0.01
    assert abs(nn.init.xavier_normal((400, 600), rng=rng).std() - math.sqrt(2 / 1000)) < 0.002
    assert abs(nn.init.kaiming_normal((500, 400), rng=rng, nonlinearity="relu").std() - math.sqrt(2 / 400)) < 0.002
    assert nn.init.zeros((2, 3)).shape == (2, 3) and nn.init.ones(4, np.float64).dtype == np.float64
    assert_close(nn.init.calculate_gain("tanh"), 5 / 3)
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.xavier_uniform((3,))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.init.calculate_gain("swoosh")
