"""The nnabla seed's gradient-penalty workload: the gradient of ``loss + sum_p ||d loss / d p||`` with
respect to the parameters of a small CNN (conv 3->8 3x3 pad 1, relu, maxpool 2, conv 8->16, relu,
maxpool 2, affine -> 10, mean softmax cross-entropy). It differentiates through a gradient of
convolutions and max pooling, so every rule's own derivative is exercised.

Checked in float64 against finite differences (``check_grads``, both modes) and against PyTorch's
``create_graph=True`` double backward; the jitted step equals the eager one.
"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads


def make_params(rng, dtype=np.float64, image=8):
    def uniform(shape, fan_in):
        return (rng.uniform(-1.0, 1.0, shape) / np.sqrt(fan_in)).astype(dtype)
    flat = 16 * (image // 4) ** 2
    return {"conv1": (uniform((8, 3, 3, 3), 27), uniform((8,), 27)),
            "conv2": (uniform((16, 8, 3, 3), 72), uniform((16,), 72)),
            "fc": (uniform((10, flat), flat), uniform((10,), flat))}


def net(params, x):
    h = F.max_pool2d(F.relu(F.conv2d(x, *params["conv1"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, *params["conv2"], padding=1)), 2)
    return F.linear(tnp.reshape(h, (h.shape[0], -1)), *params["fc"])


def loss_fn(params, x, labels):
    return F.cross_entropy(net(params, x), labels)


def penalised_loss(params, x, labels):
    """``loss + gp`` with ``gp = sum_p ||d loss / d p||_2`` over every parameter array."""
    loss, grads = tg.value_and_grad(loss_fn)(params, x, labels)
    gp = sum(tnp.sqrt(tnp.sum(g * g)) for g in tg.tree.tree_leaves(grads))
    return loss + gp


def _problem(seed=0, batch=4, image=8):
    rng = np.random.default_rng(seed)
    params = make_params(rng, image=image)
    x = rng.normal(size=(batch, 3, image, image))
    labels = rng.integers(0, 10, batch)
    return params, x, labels


def test_gradient_of_penalised_loss_matches_finite_differences():
    params, x, labels = _problem()
    # the penalty is the norm of a piecewise-constant gradient, so it jumps wherever a relu or a max-pool
    # switches; check_grads' directions follow the gradient, which moves the activations fast enough to
    # reach a switch within a step of 1e-6 (at every seed tried): the step stays below that
    check_grads(lambda p: penalised_loss(p, x, labels), (params,), order=1, eps=1e-7, name="gradient penalty")


def test_penalised_loss_second_order_along_a_direction():
    """The step's own derivative (third order in the network) still matches finite differences,
    along a direction, which keeps the check cheap."""
    params, x, labels = _problem(seed=1, batch=2)
    leaves, treedef = tg.tree.tree_flatten(params)
    direction = [np.random.default_rng(2).normal(size=np.shape(v)) for v in leaves]

    def along(t):
        moved = tg.tree.tree_unflatten(treedef, [v + t * d for v, d in zip(leaves, direction)])
        return penalised_loss(moved, x, labels)

    check_grads(along, (np.float64(0.1),), order=2, name="gradient penalty along a direction")


@pytest.mark.peer("torch")
def test_matches_pytorch_double_backward():
    import torch
    tf = torch.nn.functional
    params, x, labels = _problem(seed=3, batch=5)
    ours = tg.grad(penalised_loss)(params, x, labels)

    tparams = tg.tree.tree_map(lambda a: torch.tensor(a, requires_grad=True), params)
    leaves = tg.tree.tree_leaves(tparams)
    tx, tlabels = torch.tensor(x), torch.tensor(labels)
    h = tf.max_pool2d(tf.relu(tf.conv2d(tx, *tparams["conv1"], padding=1)), 2)
    h = tf.max_pool2d(tf.relu(tf.conv2d(h, *tparams["conv2"], padding=1)), 2)
    loss = tf.cross_entropy(tf.linear(h.reshape(h.shape[0], -1), *tparams["fc"]), tlabels)
    grads = torch.autograd.grad(loss, leaves, create_graph=True)
    total = loss + sum(g.norm() for g in grads)
    expected = torch.autograd.grad(total, leaves)
    for got, want in zip(tg.tree.tree_leaves(ours), expected):
        assert_close(got, want.numpy(), rtol=1e-10, atol=1e-12)


def test_float32_step_stays_float32_and_jit_matches_eager():
    params, x, labels = _problem(seed=4, batch=8, image=16)
    params = tg.tree.tree_map(lambda a: a.astype(np.float32), params)
    x = x.astype(np.float32)
    step = tg.grad(penalised_loss)
    eager = step(params, x, labels)
    jitted = tg.jit(step)(params, x, labels)
    for e, j in zip(tg.tree.tree_leaves(eager), tg.tree.tree_leaves(jitted)):
        assert e.dtype == j.dtype == np.float32
        assert_close(j, e, rtol=2e-5, atol=1e-6)


def test_module_form_with_weights_equals_functional_form():
    """MindSpore's spelling: ``grad(..., weights=net.trainable_params())`` on nn modules, the penalty
    summed over the same weights, equals the functional pytree form."""
    params, x, labels = _problem(seed=5)
    net_modules = tg.nn.Sequential(
        tg.nn.Conv2d(3, 8, 3, padding=1, dtype=np.float64), tg.nn.ReLU(), tg.nn.MaxPool2d(2),
        tg.nn.Conv2d(8, 16, 3, padding=1, dtype=np.float64), tg.nn.ReLU(), tg.nn.MaxPool2d(2),
        tg.nn.Flatten(), tg.nn.Dense(64, 10, dtype=np.float64))
    weights = net_modules.trainable_params()
    for p, value in zip(weights, tg.tree.tree_leaves(params)):
        p.assign(value)

    def module_loss(x, labels):
        return F.cross_entropy(net_modules(x), labels)

    def module_penalised(x, labels):
        loss, grads = tg.value_and_grad(module_loss, grad_position=None, weights=weights)(x, labels)
        return loss + sum(tnp.sqrt(tnp.sum(g * g)) for g in grads)

    got = tg.grad(module_penalised, grad_position=None, weights=weights)(x, labels)
    want = tg.tree.tree_leaves(tg.grad(penalised_loss)(params, x, labels))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-12, atol=1e-14)
