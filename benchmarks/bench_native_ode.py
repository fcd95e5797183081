"""The gradient of a 1000-step Euler integration of a damped oscillator with a 2-vector state under
``jit(grad)`` with ``fori_loop``: numba's compiled executor vs the Python executor vs a hand-written
NumPy forward+adjoint loop. Prints times; asserts nothing. ``python benchmarks/bench_native_ode.py``."""
from __future__ import annotations

import time

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp

DT, STEPS = 0.01, 1000


def loss(k, c, y0):
    def body(i, s):
        y, acc = s
        y = y + DT * tnp.stack([y[1], -k * y[0] - c * y[1]])
        return y, acc + tnp.sum(y * y)
    _, acc = tg.fori_loop(0, STEPS, body, (y0, 0.0 * k))
    return acc


def numpy_grad(k, c, y0):
    """d loss / d (k, c) by hand: forward keeping every state, adjoint backward through each step."""
    k, c = float(k), float(c)
    ys = np.empty((STEPS + 1, 2))
    ys[0] = y0
    for n in range(STEPS):
        y = ys[n]
        ys[n + 1] = y + DT * np.array([y[1], -k * y[0] - c * y[1]])
    g, gk, gc = np.zeros(2), 0.0, 0.0
    for n in range(STEPS - 1, -1, -1):
        g = g + 2 * ys[n + 1]  # d acc / d y_{n+1}
        y = ys[n]
        gk -= g[1] * DT * y[0]
        gc -= g[1] * DT * y[1]
        g = np.array([g[0] - g[1] * DT * k, g[1] + DT * g[0] - g[1] * DT * c])
    return np.array(gk), np.array(gc)


def best_ms(fn, *args, repeat=20):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def main():
    args = np.array(1.5), np.array(0.2), np.array([1.0, 0.0])
    rows = {}
    for on in (True, False):
        tg.config.compiled_executor = on
        f = tg.jit(tg.grad(loss, grad_position=(0, 1)))
        t = time.perf_counter()
        got = f(*args)
        first = time.perf_counter() - t
        rows[f.executor(*args)] = (best_ms(f, *args), first, got)
    tg.config.compiled_executor = True
    hand_ms, ref = best_ms(numpy_grad, *args), numpy_grad(*args)
    print(f"hand-written numpy fwd+adjoint: {hand_ms:8.3f} ms  grad {float(ref[0]):.12g} {float(ref[1]):.12g}")
    for name, (ms, first, got) in rows.items():
        print(f"jit(grad) fori_loop [{name:6}]:  {ms:8.3f} ms  ({ms / hand_ms:6.3f}x hand)  first call {first:6.2f} s"
              f"  grad {float(got[0]):.12g} {float(got[1]):.12g}")


if __name__ == "__main__":
    main()
