"""How tapegrad tells a device array from anything else: by its type's package (``cupy.ndarray`` lives
under the imported ``cupy`` module), never by ``__array_namespace__``, which CuPy 13's and 14's arrays do
not have. Until 2026-11-28 the double had that method and CuPy did not, so every test here passed on
the double while the same calls failed on an H100: jit, ``Parameter``, a device index array,
``tnp.asarray``, ``take_along_axis`` (and the order statistics built on it) and an optimiser's rate on
the CuPy backend all refused or host-converted CuPy arrays. Each call below failed on that main."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray, xp
from _device_check import assert_same, device_backend
from tapegrad import _backend

X = np.array([[0.3, -1.2, 2.0], [1.5, 0.25, -0.5]])


def test_the_device_arrays_carry_no_array_namespace_as_on_cupy_14():
    # the double models CuPy 13 and 14: if a CuPy release adds the method, model that release here
    assert not hasattr(DeviceArray, "__array_namespace__")
    assert not hasattr(xp.asarray(X), "__array_namespace__")


def test_the_backend_rule_recognises_device_arrays_and_nothing_else():
    d = xp.asarray(X)
    assert _backend.array_module(d) is xp and _backend.is_array(d)
    assert _backend.array_module(X) is np and _backend.is_array(X[0])
    for not_an_array in (1.0, 3, np.float32(2.0), [1.0, 2.0], "x", None, xp):
        assert _backend.array_module(not_an_array) is None, not_an_array
    assert _backend.array_module(np.ma.masked_array([1.0])) is np  # a subclass: its base's package


def test_jit_takes_device_arrays():
    f = tg.jit(lambda x: tnp.sin(x) * 2.0 + x)
    assert_same(f(xp.asarray(X)), f(X), "jit")
    g = tg.jit(tg.grad(lambda x: tnp.sum(tnp.tanh(x) ** 2)))
    assert_same(g(xp.asarray(X)), g(X), "jit of grad")


def test_a_parameter_holds_a_device_array():
    p = tg.Parameter(xp.asarray(X))
    assert type(p.value) is DeviceArray
    grad = tg.grad(lambda: tnp.sum(p * p), grad_position=None, weights=p)()
    assert_same(grad, 2.0 * X, "gradient of a device Parameter")


def test_a_device_index_array_indexes_on_the_device():
    d, idx = xp.asarray(X), xp.asarray(np.array([2, 0]))
    assert_same(tnp.asarray(d)[:, idx], X[:, [2, 0]], "gather")
    assert_same(tg.grad(lambda x: tnp.sum(x[:, idx] ** 2))(d), tg.grad(lambda x: tnp.sum(x[:, [2, 0]] ** 2))(X),
                "gradient of a gather")


def test_asarray_and_order_statistics_keep_device_arrays():
    d = xp.asarray(X)
    assert_same(tnp.asarray(d), X, "asarray")
    assert_same(tnp.array([d[0], d[1]]), X, "array of a list of device arrays")
    order = xp.asarray(np.argsort(X, axis=1))
    assert_same(tnp.take_along_axis(d, order, axis=1), np.take_along_axis(X, np.argsort(X, axis=1), axis=1),
                "take_along_axis")
    assert_same(tnp.quantile(d, 0.3, axis=1), np.quantile(X, 0.3, axis=1), "quantile")
    assert_same(tnp.median(d), np.median(X), "median")


@pytest.mark.parametrize("make", [lambda p: tg.optim.SGD([p], 0.1), lambda p: tg.optim.Adam([p], 0.01)],
                         ids=["SGD", "Adam"])
def test_an_optimiser_on_the_device_backend_keeps_its_rate_there(make):
    p = tg.Parameter(xp.asarray(X))
    with device_backend():
        opt = make(p)
    assert type(opt.learning_rate.value) is DeviceArray
    opt.step((xp.asarray(np.ones_like(X)),))
    assert type(p.value) is DeviceArray


@pytest.mark.parametrize("name", ["rankdata", "mode"])
def test_a_host_only_function_refuses_a_device_array_naming_the_copy(name):
    import tapegrad.scipy.stats as tss
    with pytest.raises(NotImplementedError, match=rf"{name} of a {xp.__name__} array: only NumPy arrays.*\.get\(\)"):
        getattr(tss, name)(xp.asarray(np.array([3.0, 1.0, 2.0, 1.0])))


def test_no_module_but_the_backend_asks_for_array_namespace():
    """The rule lives in one place: a probe elsewhere is how CuPy arrays came to be refused."""
    from pathlib import Path
    src = Path(_backend.__file__).parent
    probes = [str(p.relative_to(src)) for p in src.rglob("*.py")
              if p.name != "_backend.py" and "__array_namespace__" in p.read_text()]
    assert probes == [], f"ask tapegrad._backend (array_module, is_array) instead, in {probes}"
