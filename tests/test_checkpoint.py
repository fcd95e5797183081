"""checkpoint: same values and derivatives (every order, both modes), recomputation in backward,
Parameters read inside, and the memory it saves."""
import tracemalloc

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.testing import check_grads

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 8)) / 3


def block(x, w):
    return tnp.tanh(x @ w) + x


def test_values_and_gradients_equal_the_plain_function():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8))
    loss = lambda x, w: tnp.sum(block(block(x, w), w) ** 2)
    ck = tg.checkpoint(block)
    loss_ck = lambda x, w: tnp.sum(ck(ck(x, w), w) ** 2)
    assert_close(loss_ck(x, W), loss(x, W))
    for a, b in zip(tg.grad(loss_ck, (0, 1))(x, W), tg.grad(loss, (0, 1))(x, W)):
        assert_close(a, b, rtol=1e-12)


def test_all_orders_both_modes():
    rng = np.random.default_rng(0)
    check_grads(tg.checkpoint(block), (rng.standard_normal((2, 8)), W), order=2)


def test_backward_runs_the_function_again():
    calls = []

    @tg.checkpoint
    def f(x):
        calls.append(1)
        return tnp.sin(x) * 2.0
    g = tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3))
    assert_close(g, 2 * np.cos(np.ones(3)))
    assert len(calls) == 2  # forward, and once more in backward
    calls.clear()
    tg.jvp(f, (np.ones(3),), (np.ones(3),))
    assert len(calls) == 1  # forward mode keeps no residuals: nothing to recompute


def test_parameters_read_inside_get_gradients():
    rng = np.random.default_rng(0)
    net = tg.nn.Sequential(tg.nn.Dense(3, 4), tg.nn.Tanh(), tg.nn.Dense(4, 2))
    x = rng.standard_normal((5, 3))
    plain = lambda x: tnp.sum(net(x) ** 2)
    ck_net = tg.checkpoint(net)
    ck = lambda x: tnp.sum(ck_net(x) ** 2)
    params = net.trainable_params()
    for a, b in zip(tg.grad(ck, None, params)(x), tg.grad(plain, None, params)(x)):
        assert_close(a, b, rtol=1e-12)


def test_keyword_arguments_and_pytrees():
    @tg.checkpoint
    def f(p, scale=1.0):
        return {"y": tnp.sin(p["a"]) * scale, "n": p["a"].shape[0]}
    p = {"a": np.array([0.5, 1.0])}
    out = f(p, scale=2.0)
    assert out["n"] == 2
    g = tg.grad(lambda p: tnp.sum(f(p, scale=2.0)["y"]))(p)
    assert_close(g["a"], 2 * np.cos(p["a"]))


def _peak_bytes_of_grad(loss, *args):
    tracemalloc.start()
    tracemalloc.reset_peak()
    tg.grad(loss)(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_checkpointing_keeps_fewer_residuals():
    # 20 layers of width 256, batch 64: each layer keeps a few 128 KiB arrays without checkpointing
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((256, 256)) / 16 for _ in range(20)]
    x = rng.standard_normal((64, 256))
    layer = lambda h, w: tnp.tanh(h @ w)
    ck_layer = tg.checkpoint(layer)

    def loss(x, layer):
        for w in ws:
            x = layer(x, w)
        return tnp.sum(x)
    for fn in (layer, ck_layer):  # once each first: a first call's one-time allocations are not residuals
        tg.grad(lambda x, fn=fn: loss(x, fn))(x)
    plain = _peak_bytes_of_grad(lambda x: loss(x, layer), x)
    ck = _peak_bytes_of_grad(lambda x: loss(x, ck_layer), x)
    # without checkpointing each layer keeps tanh's input and output (128 KiB each), with it only the
    # layer's input: at least half an activation per layer saved (measured: 0.64 of one, ratio 0.70)
    activation = x.nbytes
    assert plain - ck > 0.5 * len(ws) * activation, (ck, plain)


def test_a_closure_over_traced_weights_is_taped_as_an_ordinary_call():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    ck = lambda a, s: tnp.sum(tg.checkpoint(lambda b: tnp.sin(b * s))(a))
    plain = lambda a, s: tnp.sum(tnp.sin(a * s))
    for a, b in zip(tg.grad(ck, (0, 1))(x, w), tg.grad(plain, (0, 1))(x, w)):
        assert_close(a, b)
    assert_close(tg.jvp(ck, (x, w), (w, x))[1], tg.jvp(plain, (x, w), (w, x))[1])
    check_grads(ck, (x, w), order=2)


def test_state_written_inside_is_recomputed_from_where_it_was_and_written_once():
    """A checkpointed function that updates state (nn.Dropout's key, BatchNorm's running statistics)
    recomputes with the state it first saw, the same mask, and leaves the state as one call leaves it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2, 2))

    def stateful_net():
        drop, norm = tg.nn.Dropout(0.5, seed=1), tg.nn.BatchNorm2d(3, dtype=np.float64)
        return drop, norm, lambda x: tnp.sum(drop(norm(x)) * x)

    results = []
    for wrap in (lambda f: f, tg.checkpoint):
        drop, norm, f = stateful_net()
        g = tg.grad(wrap(f))(x)
        results.append((g, drop.key.value, norm.running_mean.value, norm.num_batches_tracked.value))
    (g0, key0, mean0, count0), (g1, key1, mean1, count1) = results
    np.testing.assert_array_equal(g1, g0)
    np.testing.assert_array_equal(key1, key0)
    np.testing.assert_array_equal(mean1, mean0)
    assert count1 == count0 == 1
