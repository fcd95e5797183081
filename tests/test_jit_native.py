"""jit's compiled executor (numba): same numbers as the Python executor, and a fallback for programs
with a primitive that has no lowering. Skipped without numba."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEGRAD_NUMBA_CACHE_DIR", str(tmp_path))
    saved = tg.config.compiled_executor
    yield
    tg.config.compiled_executor = saved


def both(fn, *args):
    """(compiled result, its executor, Python executor's result)."""
    tg.config.compiled_executor = True
    f = tg.jit(fn)
    got, executor = f(*args), f.executor(*args)
    tg.config.compiled_executor = False
    g = tg.jit(fn)
    assert g.executor(*args) == "python"
    return got, executor, g(*args)


def small(x, y, s):
    z = tnp.where(x > y, tnp.exp(x) * s, tnp.sin(y) / (1.0 + tnp.cos(x) ** 2))
    v = tnp.concatenate([tnp.reshape(z[0], (1,)), tnp.broadcast_to(tnp.sum(z), (2,))])
    return tnp.sqrt(tnp.tanh(v) + 2.0) - tnp.log(1.5 + x[1]) - v[2], -s * z


def test_small_program_same_numbers():
    x, y = np.array([0.3, -1.2, 2.0]), np.array([0.1, 0.5, 1.0])
    got, executor, want = both(small, x, y, 0.7)
    assert executor == "numba"
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


def ode_loss(k, c, y0):
    def body(i, s):
        y, acc = s
        y = y + 0.01 * tnp.stack([y[1], -k * y[0] - c * y[1]])
        return y, acc + tnp.sum(y * y)
    _, acc = tg.fori_loop(0, 1000, body, (y0, 0.0 * k))
    return acc


def test_ode_jit_grad_same_numbers():
    args = np.array(1.5), np.array(0.2), np.array([1.0, 0.0])
    got, executor, want = both(tg.grad(ode_loss, grad_position=(0, 1)), *args)
    assert executor == "numba"
    for a, b in zip(got, want):
        assert a.shape == b.shape == () and a.dtype == b.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)


def test_scan_with_ys_reverse():
    def f(x0, xs):
        return tg.scan(lambda c, x: (c * 0.9 + x, c * x), x0, xs, reverse=True)
    got, executor, want = both(f, np.array(0.5), np.linspace(-1.0, 1.0, 50))
    assert executor == "numba"
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)


def test_unsupported_primitive_falls_back():
    def f(x):
        return tnp.cumsum(x) * 2.0
    x = np.arange(4.0)
    got, executor, want = both(f, x)
    assert executor == "python"
    np.testing.assert_array_equal(got, want)


def test_float32_falls_back():
    got, executor, want = both(lambda x: x * 2.0 + 1.0, np.ones(3, np.float32))
    assert executor == "python" and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_switch_off():
    tg.config.compiled_executor = False
    f = tg.jit(lambda x: x + 1.0)
    assert f.executor(np.ones(2)) == "python"
