"""float16 through the op table: float16 in, float16 out (value, vjp cotangent and jvp tangent), and
close to the float32 computation of the same float16 inputs rounded to float16.

Each row names how many terms its result accumulates (``n``): the tolerance is a few float16 epsilons
of the result's magnitude, times ``sqrt(n)`` for what is summed in float16 (rounding errors of random
sign grow as the square root of the count). The functions in ``FLOAT32_ACCUMULATION`` sum in float32,
so their rows carry ``n = 1``: only the final rounding to float16 is allowed. A float16 sum of 10^4
ones along a strided axis is 2048 without that (NumPy adds float16 in float16).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.numpy._float16 import FLOAT32_ACCUMULATION

ULPS = 8  # float16 epsilons per compared entry: a few roundings of the float16 result


def _normal(*shape, scale=1.0, shift=0.0):
    return lambda rng: (rng.standard_normal(shape) * scale + shift).astype(np.float16)


def _positive(*shape):
    return lambda rng: (rng.random(shape) + 0.5).astype(np.float16)


def _labels(n, classes):
    return lambda rng: rng.integers(0, classes, n)


# name, function of the float operands (then the constant ones), operand makers, constants, n
CASES = [
    ("exp", tnp.exp, [_normal(3, 4)], [], 1),
    ("log", tnp.log, [_positive(3, 4)], [], 1),
    ("sqrt", tnp.sqrt, [_positive(3, 4)], [], 1),
    ("tanh", tnp.tanh, [_normal(3, 4)], [], 1),
    ("sin", tnp.sin, [_normal(3, 4)], [], 1),
    ("multiply", tnp.multiply, [_normal(3, 4), _normal(4)], [], 1),
    ("divide", tnp.divide, [_normal(3, 4), _positive(3, 4)], [], 1),
    ("sum axis 0 (4000 ones)", lambda x: tnp.sum(x, axis=0), [lambda rng: np.ones((4000, 3), np.float16)], [], 1),
    ("sum", lambda x: tnp.sum(x, axis=1), [_positive(3, 2000)], [], 1),
    ("mean", lambda x: tnp.mean(x, axis=0), [_positive(3000, 2)], [], 1),
    ("var", lambda x: tnp.var(x, axis=0), [_normal(3000, 2, shift=10.0)], [], 1),
    ("std (squares past 65504)", tnp.std, [_normal(200, scale=300.0)], [], 1),
    ("prod", lambda x: tnp.prod(x, axis=1), [_positive(3, 4)], [], 4),
    ("cumsum", tnp.cumsum, [lambda rng: rng.random(5000).astype(np.float16)], [], 1),
    ("amax", lambda x: tnp.amax(x, axis=1), [_normal(3, 5)], [], 1),
    ("linalg.norm", tnp.linalg.norm, [_normal(500, scale=300.0)], [], 1),
    ("linalg.norm axis", lambda x: tnp.linalg.norm(x, axis=1), [_normal(3, 50, scale=100.0)], [], 1),
    ("matmul", tnp.matmul, [_positive(2, 3000), _positive(3000, 2)], [], 1),
    ("einsum", lambda a, b: tnp.einsum("ij,jk->ik", a, b), [_positive(2, 3000), _positive(3000, 2)], [], 1),
    ("relu", F.relu, [_normal(3, 4)], [], 1),
    ("leaky_relu", F.leaky_relu, [_normal(3, 4)], [], 1),
    ("elu", F.elu, [_normal(3, 4)], [], 1),
    ("gelu", F.gelu, [_normal(3, 4)], [], 1),
    ("sigmoid", F.sigmoid, [_normal(3, 4)], [], 1),
    ("softplus", F.softplus, [_normal(3, 4)], [], 1),
    ("silu", F.silu, [_normal(3, 4)], [], 1),
    ("softmax", F.softmax, [_normal(3, 2000, scale=3.0)], [], 1),
    ("log_softmax", F.log_softmax, [_normal(3, 2000, scale=3.0)], [], 1),
    ("logsumexp", lambda x: F.logsumexp(x, axis=-1), [_normal(3, 2000, scale=3.0)], [], 1),
    ("cross_entropy", F.cross_entropy, [_normal(64, 10, scale=3.0)], [_labels(64, 10)], 1),
    ("mse_loss", F.mse_loss, [_normal(2000), _normal(2000)], [], 1),
    ("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits,
     [_normal(2000), lambda rng: rng.integers(0, 2, 2000).astype(np.float16)], [], 1),
    ("linear", F.linear, [_normal(4, 300), _normal(5, 300, scale=0.1), _normal(5)], [], 1),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (500,), w, b),
     [_normal(3, 500, shift=5.0), _normal(500), _normal(500)], [], 1),
    ("group_norm", lambda x: F.group_norm(x, 2), [_normal(2, 4, 20, 20, shift=5.0)], [], 1),
    ("batch_norm", lambda x: F.batch_norm(x, None, None, training=True), [_normal(500, 3, shift=5.0)], [], 1),
    ("layer_norm (squares past 65504)", lambda x: F.layer_norm(x, (400,)), [_normal(2, 400, scale=100.0)], [], 1),
    ("conv1d", F.conv1d, [_normal(2, 3, 20), _normal(4, 3, 5)], [], 15),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), [_normal(2, 3, 8, 8), _normal(4, 3, 3, 3)], [], 27),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [_normal(2, 3, 8, 8)], [], 1),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), [_normal(2, 3, 8, 8)], [], 4),
]


def _check(actual, desired, n, what):
    assert np.asarray(actual).dtype == np.float16, f"{what}: float16 became {np.asarray(actual).dtype}"
    assert_close(np.asarray(actual, np.float32), np.asarray(desired, np.float16).astype(np.float32),
                 dtype=np.float16, ulps=round(ULPS * math.sqrt(n)), err_msg=what)


@pytest.mark.parametrize("name, fn, makers, constants, n", CASES, ids=[c[0] for c in CASES])
def test_float16_value_vjp_jvp(name, fn, makers, constants, n):
    rng = np.random.default_rng(0)
    x16 = [make(rng) for make in makers]
    x32 = [x.astype(np.float32) for x in x16]
    const = [make(rng) for make in constants]
    f16 = lambda *x: fn(*x, *const)  # noqa: E731
    y16, pull16 = tg.vjp(f16, *x16)
    y32, pull32 = tg.vjp(f16, *x32)
    _check(y16, y32, n, f"{name} value")
    ct = rng.standard_normal(np.shape(y16)).astype(np.float16)
    for i, (g16, g32) in enumerate(zip(pull16(ct), pull32(ct.astype(np.float32)))):
        _check(g16, g32, n, f"{name} vjp wrt operand {i}")
    t16 = tuple(rng.standard_normal(x.shape).astype(np.float16) for x in x16)
    _, dy16 = tg.jvp(f16, tuple(x16), t16)
    _, dy32 = tg.jvp(f16, tuple(x32), tuple(t.astype(np.float32) for t in t16))
    _check(dy16, dy32, n, f"{name} jvp")


@pytest.mark.parametrize("name, fn", [
    ("var", lambda x: tnp.var(x, axis=0)),
    ("std", lambda x: tnp.std(x, axis=0)),
    ("linalg.norm", lambda x: tnp.linalg.norm(x, axis=0)),
    ("sum", lambda x: tnp.sum(x * x, axis=0)),
])
def test_float16_second_derivative(name, fn):
    """The float32 detour is made of ``astype``, so the Hessian-vector product stays float16 and right."""
    rng = np.random.default_rng(1)
    x16 = (rng.standard_normal((300, 2)) * 2 + 1).astype(np.float16)
    v16 = rng.standard_normal(x16.shape).astype(np.float16)

    def hvp(x, v):
        return tg.jvp(tg.grad(lambda x: tnp.sum(fn(x))), (x,), (v,))[1]
    _check(hvp(x16, v16), hvp(x16.astype(np.float32), v16.astype(np.float32)), 1, f"{name} hvp")


def test_jit_keeps_float16():
    """numexpr has no float16: fusion leaves float16 equations unfused, and the jitted program's
    values and dtype are the eager ones (a float32 kernel would change both)."""
    def f(x):
        return tnp.sum(tnp.tanh(x * 1.5 + 0.25) * x, axis=0) + tnp.var(x, axis=0)
    x = (np.random.default_rng(2).standard_normal((4000, 3)) * 2).astype(np.float16)
    eager, jitted = f(x), tg.jit(f)(x)
    assert np.asarray(jitted).dtype == np.float16
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))
    g = tg.jit(tg.grad(lambda x: tnp.sum(f(x))))(x)
    assert np.asarray(g).dtype == np.float16
    _check(g, tg.grad(lambda x: tnp.sum(f(x)))(x.astype(np.float32)), 1, "jit(grad) of a float16 chain")


def test_recorded_names_are_public():
    """Every name the coverage page lists as accumulating in float32 is a public function."""
    namespaces = {"": tnp, "linalg": tnp.linalg, "nn.functional": F}
    for name in FLOAT32_ACCUMULATION:
        prefix, _, leaf = name.rpartition(".")
        assert callable(getattr(namespaces[prefix], leaf)), name


def test_a_float16_sum_accumulates_in_float32_on_a_device_too():
    """The float32 accumulation is not a NumPy-only branch: on the strict device double (CuPy's stand-in)
    a float16 sum of 10^4 ones is 10^4, not 2048, and stays on the device in float16."""
    from _device import DeviceArray

    got = tnp.sum(DeviceArray(np.ones((10_000, 2), np.float16)), axis=0)  # a strided axis: no pairwise sum
    assert type(got) is DeviceArray and got.dtype == np.float16
    assert np.array_equal(got.get(), [10_000, 10_000])


# ---- Module.astype: a whole module in float16 ---------------------------------------------------------------
def _mlp():
    return tg.nn.Sequential(tg.nn.Dense(4, 16, activation="relu", seed=0), tg.nn.BatchNorm1d(16),
                            tg.nn.Dropout(0.1), tg.nn.Dense(16, 3, seed=1))


def test_module_astype_casts_the_floating_parameters_in_place():
    net = _mlp()
    params = net.parameters()
    ints = {p.name: (p.dtype, np.array(p.value)) for p in params if np.dtype(p.dtype).kind != "f"}
    assert ints  # Dropout's key, BatchNorm's counter
    assert net.astype(np.float16) is net
    assert net.parameters() == params  # the same Parameter objects (an optimiser's still refer to them)
    for p in params:
        if p.name in ints:
            assert p.dtype == ints[p.name][0] and np.array_equal(p.value, ints[p.name][1]), p.name
        else:
            assert p.dtype == np.float16, p.name
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float16)
    net.eval()
    assert net(x).dtype == np.float16
    grads = tg.grad(lambda x: tnp.sum(net(x)), grad_position=None, weights=net.trainable_params())(x)
    assert all(g.dtype == np.float16 for g in grads)
    before = {p.name: np.array(p.value) for p in params}
    net.astype("float32")
    assert all(p.dtype == (ints[p.name][0] if p.name in ints else np.float32) for p in params)
    for p in params:  # float16 -> float32 is exact
        assert np.array_equal(p.value, before[p.name]), p.name
    assert net(x.astype(np.float32)).dtype == np.float32


def test_module_astype_refuses_other_dtypes_and_changes_nothing():
    net = _mlp()
    before = {p.name: p.dtype for p in net.parameters()}
    for bad in (np.int32, "complex64", "no such dtype"):
        with pytest.raises(TypeError, match="astype: dtype must be"):
            net.astype(bad)
    assert {p.name: p.dtype for p in net.parameters()} == before
    with pytest.raises(RuntimeError, match="inside a jit"):
        tg.jit(lambda x: net.astype(np.float16)(x))(np.ones((2, 4), np.float32))
    assert {p.name: p.dtype for p in net.parameters()} == before


def test_a_jitted_function_stages_again_after_astype():
    net = tg.nn.Dense(4, 3, seed=0)
    f = tg.jit(lambda x: net(x) * 2)
    x = np.ones((2, 4), np.float32)
    assert f(x).dtype == np.float32
    net.astype(np.float64)  # x stays float32: the same cache key, but the weights changed dtype
    assert f(x).dtype == np.float64
    assert_close(f(x), 2 * (x.astype(np.float64) @ np.asarray(net.weight.value).T + net.bias.value))
    net.astype(np.float32)
    assert f(x).dtype == np.float32


def test_a_jitted_function_that_only_writes_a_parameter_stages_again_after_astype():
    """A program that writes a Parameter without reading it has that Parameter's old dtype built into
    its output: after astype it must stage again, not write back a value of the old dtype."""
    net = tg.nn.Dense(2, 3, seed=0)

    @tg.jit
    def reset_bias(x):
        net.bias.assign(tnp.astype(x * 2, net.bias.dtype))  # the dtype read while staging
        return x
    x = np.arange(3, dtype=np.float32)
    reset_bias(x)
    assert net.bias.dtype == np.float32 and np.array_equal(net.bias.value, [0.0, 2.0, 4.0])
    net.astype(np.float64)
    reset_bias(x + 1)  # the same cache key (x is float32): staged again for the float64 bias
    assert net.bias.dtype == np.float64 and np.array_equal(net.bias.value, [2.0, 4.0, 6.0])


def test_a_write_that_no_longer_fits_after_astype_raises_before_any_parameter_changes():
    counter = tg.Parameter(np.zeros(3, np.float32))  # outside the module: astype leaves it float32
    net = tg.nn.Dense(2, 3, seed=0)

    @tg.jit
    def step(x):
        counter.assign(counter.value + 1)
        net.bias.assign(x * 2)  # x is float32: after astype the eager function raises here too
        return x
    step(np.ones(3, np.float32))
    net.astype(np.float64)
    bias = np.array(net.bias.value)
    with pytest.raises(ValueError, match=r"Parameter 'bias'\.assign: expected shape \(3,\) and dtype float64"):
        step(np.ones(3, np.float32))
    assert np.array_equal(counter.value, [1.0, 1.0, 1.0])  # not written: the call raised
    assert np.array_equal(net.bias.value, bias) and net.bias.dtype == np.float64


def _scaled_step(loss_fn, net, opt, scaler):
    """A jitted training step: ``loss_fn(x, y) -> (scaled loss, loss)`` differentiated for ``net``'s
    Parameters, then ``scaler.step``; it returns ``(loss, whether the step was taken)``."""
    grad_fn = tg.grad(loss_fn, grad_position=None, weights=net.trainable_params(), has_aux=True)

    @tg.jit
    def step(x, y):
        grads, (loss,) = grad_fn(x, y)
        return loss, scaler.step(opt, grads)
    return step


def test_float16_training_loops_train():
    """A module cast to float16 trains with a LossScaler; and the mixed-precision recipe, float32
    master weights with a float16 forward pass through ``functional_call``, trains under jit too."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)

    def mlp():
        return tg.nn.Sequential(tg.nn.Dense(4, 16, activation="relu", seed=0), tg.nn.Dense(16, 3, seed=1))

    net = mlp().astype(np.float16)  # pure float16: SGD (Adam's eps=1e-8 is 0 in float16)
    opt, scaler = tg.optim.SGD(net.trainable_params(), lr=0.1), tg.optim.LossScaler.fixed(128.0)

    def loss_fn(x, y):
        loss = F.cross_entropy(tnp.astype(net(x), np.float32), y)
        return scaler.scale(loss), loss
    step = _scaled_step(loss_fn, net, opt, scaler)
    losses = [float(step(x.astype(np.float16), y)[0]) for _ in range(60)]
    assert losses[-1] < 0.6 * losses[0] and all(p.dtype == np.float16 for p in net.trainable_params())

    master = mlp()  # float32 master weights, a float16 forward pass
    opt, scaler = tg.optim.Adam(master.trainable_params(), lr=1e-2), tg.optim.LossScaler()

    def amp_loss(x, y):
        half = {name: tnp.astype(p.value, np.float16) for name, p in master.named_parameters() if p.requires_grad}
        logits = tg.nn.functional_call(master, half, tnp.astype(x, np.float16))
        loss = F.cross_entropy(tnp.astype(logits, np.float32), y)
        return scaler.scale(loss), loss
    amp_step = _scaled_step(amp_loss, master, opt, scaler)
    with np.errstate(over="ignore", invalid="ignore"):  # the first steps overflow and are skipped
        results = [amp_step(x, y) for _ in range(60)]
    assert float(results[-1][0]) < 0.6 * float(results[0][0])
    assert all(p.dtype == np.float32 for p in master.trainable_params())
