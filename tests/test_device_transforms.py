"""The transforms' API on the strict device double: every way of asking for a derivative (grad and
its MindSpore return conventions, value_and_grad, vjp, jvp, linearize, the Jacobians and Hessian,
checkpoint, custom rules, vmap's options, Parameters) returns device arrays only, equal to the host
run; check_grads runs its finite differences on the device; random keys and draws stay there."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray, xp
from _device_check import CUPY_REFUSES_HOST, MIXES, assert_same, device_backend
from tapegrad import nn
from tapegrad import random as trandom
from tapegrad.testing import check_grads


def f1(x, y):
    return tnp.sum(tnp.sin(x) * y + tnp.exp(-y * y) * x[:, None].sum())


def f2(x, y):
    return tnp.tanh(x @ y.T) * 2.0 + tnp.max(y)


def f3(x, y):
    return tnp.log1p(tnp.abs(x - tnp.mean(y))) * tnp.sqrt(y[0] * y[0] + 1.0)


@tg.custom_vjp
def clipped_square(x):
    return x * x


clipped_square.defvjp(lambda x: (x * x, x), lambda x, ct: (tnp.clip(2.0 * x * ct, -1.0, 1.0),))


@tg.custom_jvp
def soft_abs(x):
    return tnp.sqrt(x * x + 0.01)


soft_abs.defjvp(lambda primals, tangents: (soft_abs(primals[0]), primals[0] / soft_abs(primals[0]) * tangents[0]))


def f4(x, y):
    return tnp.sum(clipped_square(x)) * tnp.sum(soft_abs(y))


def f5(x, y):
    return tg.checkpoint(lambda a, b: tnp.cos(a) * tnp.sum(b * b))(x, y)


FUNCTIONS = {"f1": f1, "f2": f2, "f3": f3, "custom": f4, "checkpoint": f5}
SHAPES = {"f1": ((3,), (2, 3)), "f2": ((2, 3), (4, 3)), "f3": ((4,), (2,)), "custom": ((3,), (2,)),
          "checkpoint": ((3,), (2,))}


def _scalar(fn):
    return lambda *a: tnp.sum(fn(*a))


APIS = {
    "grad-0": lambda fn, x, y: tg.grad(_scalar(fn))(x, y),
    "grad-01": lambda fn, x, y: tg.grad(_scalar(fn), grad_position=(0, 1))(x, y),
    "grad-unused": lambda fn, x, y: tg.grad(lambda x, y, z: tnp.sum(fn(x, y)), grad_position=(0, 2))(x, y, y * 2.0),
    "grad-has-aux": lambda fn, x, y: tg.grad(lambda x, y: (tnp.sum(fn(x, y)), fn(x, y) * 2.0), has_aux=True)(x, y),
    "grad-return-ids": lambda fn, x, y: tg.grad(_scalar(fn), grad_position=(0, 1), return_ids=True)(x, y),
    "value-and-grad": lambda fn, x, y: tg.value_and_grad(_scalar(fn), grad_position=(0, 1))(x, y),
    "vjp-twice": lambda fn, x, y: [tg.vjp(fn, x, y)[1](ct) for ct in (None, tg.vjp(fn, x, y)[0] * 0.5)],
    "jvp": lambda fn, x, y: tg.jvp(fn, (x, y), (x * 0.5, y - 1.0)),
    "linearize": lambda fn, x, y: tg.linearize(fn, x, y)[1](x * 0.5, y - 1.0),
    "jacrev": lambda fn, x, y: tg.jacrev(fn, grad_position=(0, 1))(x, y),
    "jacfwd": lambda fn, x, y: tg.jacfwd(fn, grad_position=(0, 1))(x, y),
    "hessian": lambda fn, x, y: tg.hessian(_scalar(fn))(x, y),
    "jit-hessian": lambda fn, x, y: tg.jit(tg.hessian(_scalar(fn)))(x, y),
    "grad-of-grad": lambda fn, x, y: tg.grad(lambda x, y: tnp.sum(tg.grad(_scalar(fn), 1)(x, y) ** 2))(x, y),
    "vmap-in-axes-none": lambda fn, x, y: tg.vmap(fn, in_axes=(None, 0))(x, tnp.stack([y, y * 0.5, y + 1.0])),
    "vmap-chunked-grad": lambda fn, x, y: tg.vmap(tg.grad(_scalar(fn)), in_axes=(0, None), chunk_size=2)(
        tnp.stack([x, x * 0.5, x + 1.0]), y),
    "vmap-out-axes": lambda fn, x, y: tg.vmap(fn, in_axes=(0, None), out_axes=-1)(tnp.stack([x, x * 2.0]), y),
    "jvp-of-vmap-of-grad": lambda fn, x, y: tg.jvp(lambda x: tg.vmap(tg.grad(_scalar(fn)), (None, 0))(
        x, tnp.stack([y, y * 0.5])), (x,), (x * 0.5,)),
    "stop-gradient": lambda fn, x, y: tg.grad(lambda x, y: tnp.sum(fn(tg.stop_gradient(x), y) * fn(x, y)))(x, y),
}


@pytest.mark.parametrize("api", list(APIS))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_api(name, api):
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(0.2, 1.0, s) for s in SHAPES[name])
    host = APIS[api](FUNCTIONS[name], x, y)
    device = APIS[api](FUNCTIONS[name], xp.asarray(x), xp.asarray(y))
    assert_same(device, host, f"{api} of {name}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_check_grads_runs_on_the_device(name, dtype):
    rng = np.random.default_rng(1)
    # clipped_square's rule is its derivative only where it does not clip, |2 x ct| < 1: with check_grads'
    # cotangents of size up to 1 and sum(soft_abs(y)) up to 2.01, that is x below 0.248
    high = 0.2 if name == "custom" else 1.0
    args = tuple(xp.asarray(rng.uniform(0.2 * high, high, s).astype(dtype)) for s in SHAPES[name])
    check_grads(FUNCTIONS[name], args, order=2, modes=("fwd", "rev") if name != "custom" else ("rev",))


def test_check_grads_on_the_device_still_catches_a_wrong_rule():
    @tg.custom_jvp
    def wrong(x):
        return tnp.sin(x)
    wrong.defjvp(lambda p, t: (tnp.sin(p[0]), tnp.sin(p[0]) * t[0]))  # should be cos
    with pytest.raises(AssertionError, match="check_grads failed"):
        check_grads(wrong, (xp.asarray(np.array([0.3, 1.1])),), order=1, modes=("fwd",))


def test_weights_on_the_device():
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    host = nn.Dense(4, 3, seed=0)
    with device_backend():
        dev = nn.Dense(4, 3, seed=0)
    assert all(type(p.value) is DeviceArray for p in dev.trainable_params())

    def run(net, x):
        loss = lambda x: tnp.sum(net(x) ** 2)  # noqa: E731
        by_name = tg.grad(loss, grad_position=None, weights=net.trainable_params(), return_ids=True)(x)
        both = tg.grad(loss, grad_position=0, weights=net.trainable_params())(x)
        as_dict = tg.grad(loss, grad_position=None, weights={"w": net.weight, "b": net.bias})(x)
        one = tg.grad(loss, grad_position=None, weights=net.weight)(x)
        return by_name, both, as_dict, one, tg.get_grad(by_name, net.weight)
    assert_same(run(dev, xp.asarray(x)), run(host, x), "weights")
    with pytest.raises(TypeError, match=MIXES):
        dev(x)  # a host batch into a device model


def test_parameter_assign_keeps_the_device():
    p = tg.Parameter(xp.asarray(np.ones(3)), name="p")
    p.assign(xp.asarray(np.arange(3.0)))
    assert type(p.value) is DeviceArray
    assert_same(tg.grad(lambda: tnp.sum(p * p), grad_position=None, weights=p)(), 2.0 * np.arange(3.0), "assign")


def test_random_keys_and_draws_stay_on_the_device():
    with device_backend():
        key = trandom.key(0)
        assert type(key) is DeviceArray
        k1, k2 = trandom.split(key)
        draws = [trandom.normal(k1, (3,)), trandom.uniform(k2, (2, 2), np.float32),
                 trandom.bernoulli(k1, 0.3, (4,)), trandom.randint(k2, (3,), 0, 5),
                 trandom.permutation(k1, xp.asarray(np.arange(5.0))), trandom.fold_in(key, 7)]
    host_key = trandom.key(0)
    h1, h2 = trandom.split(host_key)
    want = [trandom.normal(h1, (3,)), trandom.uniform(h2, (2, 2), np.float32), trandom.bernoulli(h1, 0.3, (4,)),
            trandom.randint(h2, (3,), 0, 5), trandom.permutation(h1, np.arange(5.0)), trandom.fold_in(host_key, 7)]
    assert_same(draws, want, "random draws")


def test_dropout_on_the_device_and_its_gradient():
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    host = nn.Dropout(0.3, seed=1)
    with device_backend():
        dev = nn.Dropout(0.3, seed=1)
    assert_same(dev(xp.asarray(x)), host(x), "dropout")
    assert_same(tg.grad(lambda x: tnp.sum(dev(x) ** 2))(xp.asarray(x)),
                tg.grad(lambda x: tnp.sum(host(x) ** 2))(x), "dropout gradient")
    assert type(dev.key.value) is DeviceArray


def test_a_python_scalar_tangent_goes_to_its_primals_device():
    x = np.asarray(1.5)
    assert_same(tg.jvp(tnp.sin, (xp.asarray(x),), (1.0,)), tg.jvp(tnp.sin, (x,), (1.0,)), "scalar tangent")
    assert_same(tg.jvp(tnp.sin, (xp.asarray(np.asarray(0.5)),), (2,)), tg.jvp(tnp.sin, (np.asarray(0.5),), (2,)),
                "integer tangent")


def test_a_python_float_at_a_differentiated_position_lives_on_the_default_backend():
    x = np.array([1.0, 2.0])
    fn = lambda a, x: tnp.sum(a * x * x)  # noqa: E731
    with device_backend():
        got = tg.grad(fn, (0, 1))(2.0, xp.asarray(x))
        got_vjp = tg.vjp(fn, 2.0, xp.asarray(x))[1](1.0)
    assert_same(got, tg.grad(fn, (0, 1))(2.0, x), "float position")
    assert_same(got_vjp, tg.vjp(fn, 2.0, x)[1](1.0), "float primal")
    with pytest.raises(TypeError, match=MIXES):  # the default backend is NumPy here
        tg.grad(fn, (0, 1))(2.0, xp.asarray(x))


def test_set_backend_accepts_a_module_and_refuses_other_objects():
    from tapegrad import _backend
    saved = _backend._default_backend
    try:
        tg.set_backend(xp)
        assert type(tnp.zeros(3)) is DeviceArray and type(tnp.arange(3)) is DeviceArray
        tg.set_backend("numpy")
        assert type(tnp.zeros(3)) is np.ndarray
        with pytest.raises(TypeError, match="array module"):
            tg.set_backend(object())
        with pytest.raises(ValueError, match="'numpy' or 'cupy'"):
            tg.set_backend("torch")
    finally:
        _backend._default_backend = saved


def test_backend_lookup_and_mixing():
    from tapegrad._backend import namespace_of
    d = xp.asarray(np.ones(2))
    assert namespace_of(d) is xp and namespace_of(d, 1.0, np.float32(2.0), None) is xp
    assert namespace_of(np.ones(2), 3) is np and namespace_of() is np
    with pytest.raises(TypeError, match="mixes NumPy"):
        namespace_of(d, np.ones(2))
    with pytest.raises(TypeError, match="mixes NumPy"):
        namespace_of(np.asarray(1.0), d)  # a 0-d host array is a host array (CuPy refuses it too)
    with pytest.raises(TypeError, match=CUPY_REFUSES_HOST):
        tnp.sin(d) + np.ones(2)  # two arrays at rest: the device library's own operator and message
    with pytest.raises(TypeError, match=MIXES):
        tnp.add(tnp.sin(d), np.ones(2))  # through tapegrad: its message, which names the fix
    with pytest.raises(TypeError, match=MIXES):
        tg.grad(lambda a, b: tnp.sum(a * b), (0, 1))(d, np.ones(2))


def test_the_double_refuses_what_cupy_refuses():
    d = xp.asarray(np.arange(3.0))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(d)
    with pytest.raises(TypeError):
        memoryview(d)
    with pytest.raises(TypeError, match=CUPY_REFUSES_HOST):
        d + np.ones(3)
    assert float(d[1]) == 1.0 and int(d[2]) == 2 and bool(d[1]) and d.sum().item() == 3.0
    assert type(d.sum()) is DeviceArray  # reductions give 0-d device arrays, not NumPy scalars
    np.testing.assert_array_equal(d.get(), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(xp.asnumpy(d), [0.0, 1.0, 2.0])
    if xp.__name__ == "cupy":  # (make test-gpu) CuPy has percentile; the rest holds of it as of the double
        return
    with pytest.raises(TypeError):
        np.percentile(d, 50)  # a NumPy function the namespace lacks is refused, not run on the host
    with pytest.raises(AttributeError):
        xp.percentile  # noqa: B018 - not in the namespace: nothing falls back to the host
