"""The tape's records carry their own cotangents: a reusable ``vjp_fn`` must give the same answer on
every call, after a call that raised, from several threads at once, and must let go of what does not
reach its outputs."""
from __future__ import annotations

import threading
import weakref

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

X = np.linspace(-1.0, 1.0, 7)


def _loss(x):
    h = tnp.sin(x) * x
    return tnp.sum(h * h) + tnp.sum(tnp.exp(h) * 0.5)


def _expected_gradient(x):
    h = np.sin(x) * x
    dh = np.cos(x) * x + np.sin(x)
    return (2.0 * h + 0.5 * np.exp(h)) * dh


def test_vjp_fn_called_again_gives_the_same_cotangent():
    _, vjp_fn = tg.vjp(_loss, X)
    for scale in (1.0, 3.0, 1.0):
        (ct,) = vjp_fn(scale)
        assert_close(ct, scale * _expected_gradient(X))


def test_vjp_fn_is_intact_after_a_call_that_raised():
    calls = []

    @tg.custom_vjp
    def fragile(x):
        return tnp.sin(x)

    def bwd(cos_x, g):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first backward fails")
        return (g * cos_x,)
    fragile.defvjp(lambda x: (tnp.sin(x), tnp.cos(x)), bwd)

    def loss(x):  # ``y`` gets cotangents before ``fragile``'s backward raises: a stale one would stay
        y = x * 2.0
        return tnp.sum(fragile(y) * y) + tnp.sum(y * y)
    _, vjp_fn = tg.vjp(loss, X)
    try:
        vjp_fn(1.0)
    except ValueError:
        pass
    else:
        raise AssertionError("the backward pass should have raised")
    (ct,) = vjp_fn(1.0)
    assert_close(ct, 4.0 * X * np.cos(2.0 * X) + 2.0 * np.sin(2.0 * X) + 8.0 * X)


def test_one_vjp_fn_in_threads_equals_the_single_threaded_results():
    _, vjp_fn = tg.vjp(_loss, X)
    scales = [float(k) for k in range(1, 9)]
    results = {}

    def work(scale):
        for _ in range(20):
            (ct,) = vjp_fn(scale)
        results[scale] = ct
    threads = [threading.Thread(target=work, args=(s,)) for s in scales]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for scale in scales:
        assert_close(results[scale], scale * _expected_gradient(X))


def test_vjp_fn_lets_go_of_values_that_do_not_reach_its_output():
    dead = []

    def loss(x):
        unused = tnp.exp(x) * 2.0
        dead.append(weakref.ref(unused.primal))
        return tnp.sum(tnp.sin(x))
    _, vjp_fn = tg.vjp(loss, X)
    (ct,) = vjp_fn(1.0)
    assert_close(ct, np.cos(X))
    assert dead[0]() is None


def test_linearize_sweeps_a_tape_with_several_results_and_dead_branches():
    def f(x):
        top, _ = tnp.linalg.eigh(tnp.outer(x, x) + np.eye(3))
        _ = tnp.exp(x)  # does not reach the output
        return tnp.sum(top * top) + tnp.sum(tnp.sin(x))
    x, v = np.array([0.3, -0.2, 0.5]), np.array([1.0, 0.5, -2.0])
    out, jvp_fn = tg.linearize(f, x)
    _, expected = tg.jvp(f, (x,), (v,))
    assert_close(jvp_fn(v), expected)
    assert_close(jvp_fn(2.0 * v), 2.0 * expected)


def test_vjp_fn_called_from_its_own_backward_pass_is_refused_and_stays_usable():
    box = {}

    @tg.custom_vjp
    def reentrant(x):
        return tnp.sin(x)

    def bwd(x, g):
        if box.pop("reenter", False):
            box["vjp_fn"](1.0)
        return (g * tnp.cos(x),)
    reentrant.defvjp(lambda x: (tnp.sin(x), x), bwd)
    _, box["vjp_fn"] = tg.vjp(lambda x: tnp.sum(reentrant(x)), X)
    box["reenter"] = True
    try:
        box["vjp_fn"](1.0)
    except RuntimeError as e:
        assert "its own backward pass" in str(e)
    else:
        raise AssertionError("a reentrant call should be refused")
    (ct,) = box["vjp_fn"](1.0)
    assert_close(ct, np.cos(X))
