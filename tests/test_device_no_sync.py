"""No host synchronisation in a training step on a device.

A GPU runs ahead of the host only while nothing reads device memory back: a ``float(loss)``, a
``bool(finite)`` or a range check of the labels makes the host wait for every queued kernel, at each
step. Each test here runs training steps with the data, the weights and the optimiser's state on the
device, inside ``cupyx.allow_synchronize(False)``, where any synchronisation CuPy detects raises
``cupyx.DeviceSynchronized``: on the strict device double, which declares its synchronisations where
CuPy's ``ndarray.get()`` does (``tests/_device_cupyx.py``), and on real CuPy with
``TAPEGRAD_DEVICE=cupy`` (``make test-gpu``). Then, outside that block, the results are read and
compared with the same steps run on NumPy.

The steps: an eager MLP step with Adam and with SGD with momentum (cross-entropy on integer class
labels), the same under ``jit``, a jitted CNN step (Conv2d, BatchNorm2d in training mode, MaxPool2d,
Dropout with its key) with Adam, and a step with ``clip_grad_norm``, a dynamic ``LossScaler`` and a
learning-rate schedule, eager and jitted. A ``jit`` step's first call stages the program, inside the
block too: staging works on tracers and reads no device values.
"""
from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import _device
import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray
from _device_check import assert_same, device_backend
from tapegrad import nn, optim
from tapegrad.nn import functional as F

STEPS = 3


@contextlib.contextmanager
def no_sync():
    """``cupyx.allow_synchronize(False)`` (the double's or CuPy's), without its deprecation warning
    (CuPy warns on each entry that detection is not complete: synchronisations outside CuPy's own
    ``get()`` go unseen). On the double the count of declared synchronisations must not move either."""
    before = _device.synchronizations()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="cupyx.allow_synchronize will be removed")
        with _device.xpx.allow_synchronize(False):
            yield
    assert _device.synchronizations() == before


def test_the_double_detects_what_cupy_detects():
    """CuPy's own test of ``allow_synchronize`` (``tests/cupy_tests/core_tests/test_syncdetect.py``),
    and the reads that go through ``get()`` in CuPy's source; what reads nothing passes."""
    a = _device.asarray(np.array([2.0, 3.0]))
    one = a[:1]
    reads = {"get": a.get, "asnumpy": lambda: _device.xp.asnumpy(a), "item": one.item, "tolist": a.tolist,
             "float": lambda: float(one), "int": lambda: int(one), "complex": lambda: complex(one),
             "bool": lambda: bool(one), "repr": lambda: repr(a), "str": lambda: str(a),
             "format": lambda: f"{a[0]:.3f}", "nonzero": lambda: _device.xp.nonzero(a),
             "boolean mask": lambda: a[a > 2.5], "where with one argument": lambda: _device.xp.where(a > 2.5)}
    for what, read in reads.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with _device.xpx.allow_synchronize(False):
                try:
                    read()
                except _device.xpx.DeviceSynchronized:
                    continue
        pytest.fail(f"{what} read the device without a synchronisation")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _device.xpx.allow_synchronize(False):
            with _device.xpx.allow_synchronize(True):  # the innermost block decides
                a.get()
            with pytest.raises(_device.xpx.DeviceSynchronized):
                a.get()
    with no_sync():  # kernels, shapes and an index array read nothing back
        (a * 2).sum(), a.shape, len(a), a[_device.asarray(np.array([1]))], _device.xp.where(a > 2.5, a, 0.0)
    a.get()  # allowed again outside


# ---- the steps ----------------------------------------------------------------------------------
def _data(n, shape, classes, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, classes, n)


def _mlp():
    return nn.Sequential(nn.Dense(6, 16, seed=1), nn.ReLU(), nn.Dense(16, 16, seed=2), nn.Tanh(),
                         nn.Dense(16, 4, seed=3))


def _cnn():
    # no bias before BatchNorm: its gradient would be exactly 0, computed as rounding noise that Adam
    # scales into full steps of either sign, which host and device round differently
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False, seed=4), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25, seed=5), nn.Flatten(), nn.Dense(4 * 3 * 3, 3, seed=6))


def _plain_step(net, opt):
    grad_fn = tg.value_and_grad(lambda x, y: F.cross_entropy(net(x), y), grad_position=None,
                                weights=net.trainable_params())

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt.step(grads)
        return loss
    return step


def _guarded_step(net, opt, scaler, schedule):
    """The careful recipe: a scaled loss, gradients unscaled and clipped, the step skipped on an
    overflow (by ``where``, on the device), then the schedule."""
    grad_fn = tg.value_and_grad(lambda x, y: scaler.scale(F.cross_entropy(net(x), y)), grad_position=None,
                                weights=net.trainable_params())

    def step(x, y):
        scaled_loss, grads = grad_fn(x, y)
        grads, norm = optim.clip_grad_norm(scaler.unscale(grads), 1.0)
        # scaler.step unscales what it is given, so the clipped gradients go back scaled: exactly, since
        # the scale is a power of two; an overflow (inf, so NaN or 0 once clipped) still skips the step
        stepped = scaler.step(opt, tuple(g * scaler.scale_value.value for g in grads))
        schedule.step()
        return scaled_loss / scaler.scale_value.value, norm, stepped
    return step


SETUPS = {  # name: (network, optimiser, guarded, input shape, classes)
    "mlp-adam": (_mlp, lambda p: optim.Adam(p, lr=0.01), False, (6,), 4),
    "mlp-sgd-momentum": (_mlp, lambda p: optim.SGD(p, lr=0.05, momentum=0.9), False, (6,), 4),
    "cnn-adam": (_cnn, lambda p: optim.Adam(p, lr=0.01), False, (1, 6, 6), 3),
    "mlp-adam-clip-scaler-schedule": (_mlp, lambda p: optim.Adam(p, lr=0.01), True, (6,), 4),
}
CASES = [(setup, jit) for setup in SETUPS for jit in (False, True)]


def _train(setup: str, jit: bool, on_device: bool):
    """``STEPS`` steps of ``setup`` (on the device inside ``no_sync``, or on the host); returns each
    step's outputs and every Parameter's final value (weights, running statistics, keys, the
    optimiser's, the scaler's and the schedule's state)."""
    make_net, make_opt, guarded, shape, classes = SETUPS[setup]
    with device_backend() if on_device else contextlib.nullcontext():
        net = make_net()
        opt = make_opt(net.trainable_params())
        if guarded:
            scaler = optim.LossScaler(2.0 ** 10, scale_window=2)
            schedule = optim.StepLR(opt, step_size=2, gamma=0.5)
            step = _guarded_step(net, opt, scaler, schedule)
            held = [*net.parameters(), *tg.tree.tree_leaves(opt.state_params), scaler.scale_value, scaler.counter,
                    schedule.last_epoch, opt.learning_rate]
        else:
            step = _plain_step(net, opt)
            held = [*net.parameters(), *tg.tree.tree_leaves(opt.state_params), opt.learning_rate]
    step = tg.jit(step) if jit else step
    batches = [_data(8, shape, classes, seed) for seed in range(STEPS)]
    if on_device:
        batches = _device.asarray(batches)
    outputs = []
    with no_sync() if on_device else contextlib.nullcontext():
        for x, y in batches:
            outputs.append(step(x, y))
    return outputs, [p.value for p in held]


@pytest.mark.parametrize("setup,jit", [pytest.param(s, j, id=f"{s}-{'jit' if j else 'eager'}") for s, j in CASES])
def test_a_training_step_does_not_synchronise(setup, jit):
    got = _train(setup, jit, on_device=True)
    want = _train(setup, jit, on_device=False)
    assert all(type(v) is DeviceArray for v in tg.tree.tree_leaves(got))
    assert_same(got, want, f"{setup} ({'jit' if jit else 'eager'}) on the device", ulps=1024)


# ---- what the steps rely on ---------------------------------------------------------------------
def test_random_draws_on_a_device_are_numpys_and_read_nothing_back():
    """``uniform`` (dropout's draw), ``bernoulli``, ``split`` and ``fold_in`` of a device key compute
    NumPy's Philox on the device: the host's numbers bit for bit, one key or a batch, eager, jitted and
    under ``vmap``, with no synchronisation."""
    host = np.stack([np.asarray(tg.random.key(s)) for s in range(3)])
    draws = {
        "uniform": lambda k: [tg.random.uniform(k, (5, 3), dt) for dt in (np.float16, np.float32, np.float64)],
        "bernoulli": lambda k: tg.random.bernoulli(k, 0.3, (7,)),
        "split": lambda k: tg.random.split(k, 3),
        "fold_in": lambda k: [tg.random.fold_in(k, d) for d in (0, 5, 2 ** 63)],
    }
    for name, draw in draws.items():
        for route, fn in (("eager", draw), ("jit", tg.jit(draw)), ("vmap", tg.vmap(draw))):
            key = host if route == "vmap" else host[1]
            want = fn(key)
            device_key = _device.asarray(key)
            with no_sync():
                got = fn(device_key)
            assert all(type(v) is DeviceArray for v in tg.tree.tree_leaves(got))
            for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
                assert g.dtype == w.dtype and np.array_equal(_device.get(g), w), f"{name} ({route})"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_labels_out_of_range_give_nan_on_a_device(reduction):
    """Device labels are not range-checked (that read would synchronise at every step): a label out
    of range makes its loss and the gradients NaN, never a finite wrong number; host labels still
    raise. Under ``jit`` (traced labels, on either side) the same NaN."""
    logits, labels = np.ones((3, 4), np.float32), np.array([0, 4, 2])
    with pytest.raises(ValueError, match="targets must lie in"):
        F.cross_entropy(logits, labels, reduction=reduction)

    def loss(y, t):
        return tnp.sum(F.cross_entropy(y, t, reduction=reduction))
    for fn in (tg.value_and_grad(loss), tg.jit(tg.value_and_grad(loss))):
        with no_sync():
            value, grad = fn(_device.asarray(logits), _device.asarray(labels))
        value, grad = _device.get(value), _device.get(grad)
        assert np.isnan(value) and np.isnan(grad[1]).all()
    value, grad = tg.jit(tg.value_and_grad(loss))(logits, labels)
    assert np.isnan(value) and np.isnan(grad[1]).all()
    with no_sync():
        onehot = F.one_hot(_device.asarray(np.array([1, -1])), 3)
    np.testing.assert_array_equal(_device.get(onehot), [[0, 1, 0], [np.nan] * 3])
