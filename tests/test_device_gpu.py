"""The device checks on real CuPy, for a machine with a GPU: the same routes as the double's tests
(test_device_ops.py), with CuPy arrays, against the host run. Skipped as a whole without CuPy and a
GPU (``make test-gpu`` runs it, with the whole device suite on real CuPy: docs/testing.md).

On a GPU the numbers come from CuPy's own kernels (cuBLAS, its ufunc loops, its reductions), so the
tolerances are wider than the double's: ``GPU_ULPS`` epsilons of the dtype, scaled by the magnitude
(_device_check.py says where that number comes from)."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device_check import GPU_ULPS, ROUTES, assert_same, check_route, on_device
from tapegrad import nn
from test_ops import BINARY, REDUCTIONS, UNARY, _draw

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception:  # noqa: BLE001 - any failure to see a device means no GPU here
    pytest.skip("no GPU", allow_module_level=True)

ULPS = GPU_ULPS  # CuPy's kernels against NumPy's: see _device_check.GPU_ULPS


@pytest.fixture(autouse=True)
def _cupy():
    with on_device(cupy):
        yield


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", UNARY + BINARY + REDUCTIONS, ids=repr)
def test_op_table_on_cupy(spec, dtype, route):
    rng = np.random.default_rng(0)
    nargs = 2 if spec in BINARY else 1
    args = tuple(_draw(spec.domains[min(i, len(spec.domains) - 1)], (3, 2), dtype, rng) for i in range(nargs))
    check_route(route, spec.op, args, ulps=ULPS)


@pytest.mark.parametrize("jit", [False, True])
def test_a_training_step_on_cupy(jit):
    x = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
    host = nn.Sequential(nn.Dense(4, 8, seed=0), nn.ReLU(), nn.Dense(8, 1, seed=1))
    tg.set_backend(cupy)
    try:
        dev = nn.Sequential(nn.Dense(4, 8, seed=0), nn.ReLU(), nn.Dense(8, 1, seed=1))
    finally:
        tg.set_backend("numpy")

    def step(net, x):
        g = tg.grad(lambda x: tnp.mean(net(x) ** 2), grad_position=None, weights=net.trainable_params())
        return (tg.jit(g) if jit else g)(x)
    assert_same(step(dev, cupy.asarray(x)), step(host, x), "a training step on CuPy", ulps=ULPS)
