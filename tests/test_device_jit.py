"""jit on the strict device double: elementwise fusion takes the device's ``fuse`` (never numexpr,
which would read device memory through the buffer protocol), and the executor's literals, constants
and buffers stay on the operands' backend."""
from __future__ import annotations

import numpy as np
import pytest

import _device
import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray, Fused, xp
from _device_check import MIXES, assert_same, device_backend
from tapegrad._jit import fusion
from tapegrad._jit.codegen import compile_program, source
from test_jit_fusion import CASES

RNG = np.random.default_rng(0)


def _args(shapes, dtype):
    return [RNG.uniform(0.1, 1.0, size=s).astype(dtype) for s in shapes]


def _host_arrays(namespace) -> list:
    return [k for k, v in namespace.items() if isinstance(v, np.ndarray)]


@pytest.fixture
def always_pays(monkeypatch):
    monkeypatch.setattr(fusion, "_pays", lambda eqns, group: True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_fusion_runs_the_device_kernel_and_matches_the_host(case, dtype):
    fn, shapes = CASES[case]
    args = _args(shapes, dtype)
    dargs = _device.asarray(args)
    program = tg.make_program(fn)(*dargs)
    assert all(v.backend is xp for v in program.invars)
    fused = fusion.fuse(program)
    fused.typecheck()
    assert "fused" in [e.prim.name for e in fused.eqns], "every device group of 2 or more is fused"
    assert not any(fusion.numexpr_fusible(e) for e in program.eqns), "numexpr chosen for device arrays"
    before = Fused.launches
    got = compile_program(fused)(*dargs)
    assert Fused.launches > before
    assert_same(got, compile_program(tg.make_program(fn)(*args))(*args), case)
    assert_same(tg.jit(fn)(*dargs), tg.jit(fn)(*args), f"jit of {case}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_device_program_holds_no_host_array(case, dtype):
    """Literals are Python scalars, not host 0-d arrays (as the NumPy executor passes them)."""
    fn, shapes = CASES[case]
    dargs = _device.asarray(_args(shapes, dtype))
    for program in (tg.make_program(fn)(*dargs), fusion.fuse(tg.make_program(fn)(*dargs))):
        _, namespace = source(program)
        assert _host_arrays(namespace) == []


def test_host_program_still_passes_literals_as_typed_arrays():
    fn, shapes = CASES["literals"]
    _, namespace = source(tg.make_program(fn)(*_args(shapes, np.float32)))
    assert _host_arrays(namespace), "the NumPy executor's 0-d literal arrays went missing"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_chain_is_fused_on_device(dtype):
    def loss(x):
        for _ in range(20):
            x = tnp.sin(x) * 1.01 + 0.1
        return tnp.sum(x)
    x = _args([(16,)], dtype)[0]
    before = Fused.launches
    got = tg.jit(tg.grad(loss))(_device.asarray(x))
    assert Fused.launches > before
    assert_same(got, tg.jit(tg.grad(loss))(x), "jit of grad of a sin chain")


def test_closed_over_device_constants_fold_on_the_device():
    c = np.linspace(0.5, 1.5, 6).reshape(2, 3)
    dc = xp.asarray(c)
    fn = lambda c: (lambda x: x * (tnp.exp(c) * 2.0 + 1.0) + c)  # noqa: E731
    x = RNG.standard_normal((2, 3))
    program = tg.make_program(fn(dc))(xp.asarray(x))
    assert all(type(k) is DeviceArray for k in program.consts)
    assert_same(tg.jit(fn(dc))(xp.asarray(x)), tg.jit(fn(c))(x), "folded constants")
    assert_same(tg.jit(tg.grad(lambda x: tnp.sum(fn(dc)(x) ** 2)))(xp.asarray(x)),
                tg.jit(tg.grad(lambda x: tnp.sum(fn(c)(x) ** 2)))(x), "folded constants, gradient")


def test_a_host_constant_with_device_inputs_is_refused():
    c = np.ones(3)
    with pytest.raises(TypeError, match=MIXES):
        tg.jit(lambda x: x * c + 1.0)(xp.asarray(np.arange(3.0)))


@pytest.mark.parametrize("donate", [(), (0,), (0, 1)])
def test_donated_device_inputs_give_the_same_numbers(donate):
    fn = lambda x, y: tnp.tanh(x * y + 1.0) * 2.0 - y  # noqa: E731
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    dx, dy = xp.asarray(x), xp.asarray(y)
    got = tg.jit(fn, donate_argnums=donate)(dx, dy)
    assert_same(got, fn(x, y), f"donate {donate}")
    assert_same((dx, dy), (x, y), "donated device inputs were written")


def test_host_and_device_arguments_get_their_own_programs():
    f = tg.jit(lambda x: tnp.sin(x) * 2.0)
    x = np.arange(3.0)
    assert type(f(xp.asarray(x))) is DeviceArray and type(f(x)) is np.ndarray
    assert f.program(x).invars[0].backend is np and f.program(xp.asarray(x)).invars[0].backend is xp


def test_jit_creation_functions_follow_the_default_backend():
    fn = lambda x: x + tnp.arange(3.0) * tnp.ones(3)  # noqa: E731
    x = np.arange(3.0)
    with device_backend():
        got = tg.jit(fn)(xp.asarray(x))
        program = tg.make_program(fn)(xp.asarray(x))
    assert_same(got, fn(x), "creation functions inside jit")
    assert all(type(k) is DeviceArray for k in program.consts)
