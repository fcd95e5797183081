"""Threads: transforms running at once in several threads give exactly the single-threaded results.

The trace stack and the Parameter substitutions live in ``ContextVar``s, so each thread sees only its
own transforms. Here 8 threads × 125 calls each (1,000 calls in all; the benchmark runs 8 × 1,000),
with the interpreter switching threads every 10 µs so their transforms interleave finely.
"""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

THREADS, CALLS = 8, 125
RNG = np.random.default_rng(0)
W = RNG.normal(size=(6, 5))
XS = [RNG.normal(size=(4, 6)) for _ in range(THREADS)]


@contextlib.contextmanager
def fine_switching():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def run_threads(work):
    """Run ``work(i)`` in thread ``i`` for each of THREADS threads, all released at once; returns
    their results, re-raising the first error."""
    results, errors = [None] * THREADS, []
    start = threading.Barrier(THREADS)

    def target(i):
        try:
            start.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 — handed to the main thread
            errors.append(e)
    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    with fine_switching():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return results


def loss_of(i):
    """A different loss per thread (a different function, power and scale), of the same weights."""
    def loss(w, x):
        h = tnp.tanh(x @ w) * (i + 1)
        return tnp.sum(h ** (1 + i % 3)) + tnp.sum(tnp.sin(w)) * i
    return loss


def test_different_gradients_in_threads_equal_the_single_threaded_ones():
    grads = [tg.grad(loss_of(i), grad_position=(0, 1)) for i in range(THREADS)]
    expected = [grads[i](W, XS[i]) for i in range(THREADS)]

    def work(i):
        return [grads[i](W, XS[i]) for _ in range(CALLS)]
    for i, calls in enumerate(run_threads(work)):
        for got in calls:  # bit for bit: the same operations on the same values
            assert all(np.array_equal(g, e) for g, e in zip(got, expected[i]))


def test_one_shared_jitted_function_in_threads_equals_the_single_threaded_results():
    step = tg.jit(tg.value_and_grad(lambda w, x: tnp.sum(tnp.tanh(x @ w) ** 2)))
    expected = [tg.value_and_grad(lambda w, x: tnp.sum(tnp.tanh(x @ w) ** 2))(W, XS[i]) for i in range(THREADS)]

    def work(i):
        return [step(W, XS[i]) for _ in range(CALLS)]
    for i, calls in enumerate(run_threads(work)):
        for value, grad in calls:
            assert_close(value, expected[i][0])  # jit may fuse, so to rounding, not bit for bit
            assert_close(grad, expected[i][1])
    assert step._cache_size() == 1


class Net(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = tg.Parameter(W.copy())

    def __call__(self, x):
        return tnp.sum(tnp.tanh(x @ self.w) ** 2)


@pytest.mark.parametrize("jitted", [False, True], ids=["grad", "jit(grad)"])
def test_gradients_with_weights_of_one_shared_module_in_threads(jitted):
    """Each thread substitutes its own tracer for the same Parameter: the substitutions are
    per-thread, so no thread reads another's."""
    net = Net()
    step = tg.grad(net, grad_position=None, weights=net.trainable_params())
    step = tg.jit(step) if jitted else step
    expected = [tg.grad(net, grad_position=None, weights=net.trainable_params())(XS[i]) for i in range(THREADS)]

    def work(i):
        return [step(XS[i]) for _ in range(CALLS)]
    for i, calls in enumerate(run_threads(work)):
        for (got,) in calls:
            assert_close(got, expected[i][0])
