"""Resources (issue 12, item 5): memory over many calls, jit's cache, staging memory, threads, and
the scale of long chains and many inputs. The figures of ``benchmarks/README.md``'s "resources"
section; ``tests/test_resources.py`` and ``tests/test_threads.py`` check the same properties at CI
sizes, without times.

Sections (each prints a table):

- ``memory``: 10^4 calls each of ``grad``, ``value_and_grad``, ``jit(grad)`` and ``vmap(grad)`` of a
  small MLP loss; the traced memory (``tracemalloc``) after 100 warm-up calls and after every 2,500
  calls, the growth per call, and the time per call (measured without ``tracemalloc``).
- ``jit cache``: programs held after 2,000 static values; instances alive after 300 instances each
  called a jitted method and were dropped; memory left after 300 jitted closures over 1 MiB
  constants were called and dropped, with the garbage collector off.
- ``staging``: bytes per equation of a staged program (kept: the program; peak: while staging), and
  the peak while ``jit`` stages, optimises and compiles it, for a forward chain and for ``grad`` of
  one.
- ``threads``: 8 threads x 1,000 calls of different gradients and of one shared jitted function:
  the time, and whether every result equals the single-threaded one.
- ``scale``: a chain of 10^5 and 10^6 ``sin`` under ``grad`` (time; peak traced memory), and ``grad``
  of ``sum(sin(stack(xs)))`` over a list of N traced scalars, N = 1,000 to 10^5 (time, and its ratio
  to the previous N: 2 is linear, 4 quadratic), and of the same sum written per leaf.

Run: ``python benchmarks/bench_resources.py [--quick] [--threads N] [section ...]`` (``--quick``
divides the counts by 10; a section name runs only that section). Times are single runs on a shared
machine: read them as orders of magnitude and ratios, not to the percent.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

KIB, MIB = 1024.0, 2.0 ** 20


def mlp_problem():
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(8, 16)), "b1": np.zeros(16), "w2": rng.normal(size=(16, 1)), "b2": np.zeros(1)}
    return params, rng.normal(size=(4, 8)), rng.normal(size=(4, 1))


def mlp_loss(p, x, y):
    h = tnp.tanh(x @ p["w1"] + p["b1"])
    return tnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def traced(fn, *args, collect=True):
    """``(result, current bytes after, peak bytes)`` of ``fn(*args)``, counted from its start.

    With ``collect``, the garbage collector runs before "current" is read, so that it counts what
    stays reachable. ``collect=False`` is for measurements with the collector off: it counts also
    what only a collection would free (a reference cycle holding a constant), plus the interpreter's
    free lists, which a full collection empties (about 0.1 MiB).
    """
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = fn(*args)
        if collect:
            gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, current - before, peak - before


# ---- memory over many calls ----------------------------------------------------------------------
def bench_memory(quick):
    calls = 1000 if quick else 10 ** 4
    params, x, y = mlp_problem()
    transforms = {"grad": tg.grad(mlp_loss), "value_and_grad": tg.value_and_grad(mlp_loss),
                  "jit(grad)": tg.jit(tg.grad(mlp_loss)),
                  "vmap(grad)": tg.vmap(tg.grad(mlp_loss), in_axes=(None, 0, 0))}
    rows = []
    for name, f in transforms.items():
        for _ in range(100):
            f(params, x, y)
        start = time.perf_counter()
        for _ in range(1000):
            f(params, x, y)
        per_call = (time.perf_counter() - start) / 1000
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            samples = []
            for k in range(calls):
                f(params, x, y)
                if (k + 1) % (calls // 4) == 0:
                    gc.collect()
                    samples.append(tracemalloc.get_traced_memory()[0] - base)
        finally:
            tracemalloc.stop()
        rows.append([name, calls, f"{per_call * 1e6:.0f}"] + [f"{s / KIB:.1f}" for s in samples]
                    + [f"{samples[-1] / calls:.1f}"])
    quarter = calls // 4
    headers = ["transform", "calls", "us/call"] + [f"KiB @{quarter * (i + 1)}" for i in range(4)] + ["B/call"]
    return format_table(headers, rows)


# ---- jit's cache ---------------------------------------------------------------------------------
def times_plus_one(c):
    """``x * c + 1``, closing over its own ``c`` (lambdas made in one loop would share one cell)."""
    return lambda x: x * c + 1.0


class Scaled:
    def __init__(self, k):
        self.k = np.full(3, float(k))

    @tg.jit
    def __call__(self, x):
        return x * self.k


def bench_jit_cache(quick):
    rows = []
    n = 200 if quick else 2000
    f = tg.jit(lambda x, k: x * k, static_argnums=1)
    start = time.perf_counter()
    for k in range(n):
        f(np.ones(2), k)
    rows.append([f"{n} static values", f"{f._cache_size()} programs held",
                 f"{(time.perf_counter() - start) / n * 1e3:.2f} ms per staging"])
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        import weakref
        refs = []
        for k in range(300):
            obj = Scaled(k)
            obj(np.ones(3))
            refs.append(weakref.ref(obj))
            del obj
        rows.append(["300 instances, jitted method", f"{sum(r() is not None for r in refs)} alive", ""])

        def closures():
            x = np.ones(2 ** 17)
            for k in range(30 if quick else 300):
                g = tg.jit(times_plus_one(np.full(2 ** 17, float(k))))  # over a 1 MiB constant
                g(x)
                del g
        _, left, peak = traced(closures, collect=False)  # what only a collection would free counts too
        rows.append([f"{30 if quick else 300} closures over 1 MiB, gc off", f"{left / MIB:.2f} MiB left",
                     f"peak {peak / MIB:.1f} MiB"])
    finally:
        if was_enabled:
            gc.enable()
    return format_table(["case", "result", "note"], rows)


# ---- staging memory ------------------------------------------------------------------------------
def chain(x, n):
    for _ in range(n // 2):
        x = tnp.sin(x) * 1.01
    return x


def summed_chain(x, n):
    return tnp.sum(chain(x, n))


def bench_staging(quick):
    rows = []
    x = np.ones(4)
    for n in ((10 ** 4,) if quick else (10 ** 4, 10 ** 5)):
        program, kept, peak = traced(tg.make_program(partial(chain, n=n)), x)
        rows.append([f"make_program, chain of {n}", len(program.eqns), f"{kept / len(program.eqns):.0f}",
                     f"{peak / len(program.eqns):.0f}"])
        del program
    for n in ((3000,) if quick else (3 * 10 ** 4,)):
        _, _, peak = traced(tg.jit(partial(chain, n=n)), x)
        rows.append([f"jit (stage, optimise, compile, run), chain of {n}", n, "", f"{peak / n:.0f}"])
        _, _, peak = traced(tg.jit(tg.grad(partial(summed_chain, n=n))), x)
        rows.append([f"jit(grad), chain of {n} (per forward op)", n, "", f"{peak / n:.0f}"])
    return format_table(["program", "equations", "kept B/eqn", "peak B/eqn"], rows)


# ---- threads ---------------------------------------------------------------------------------------
def run_threads(fn_of, args_of, threads, calls):
    """``(seconds, results)``: thread ``i`` calls ``fn_of(i)(*args_of(i))`` ``calls`` times."""
    results = [None] * threads

    def work(i):
        results[i] = [fn_of(i)(*args_of(i)) for _ in range(calls)]
    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start, results


def bench_threads(quick):
    threads, calls = 8, 100 if quick else 1000
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 5))
    xs = [rng.normal(size=(4, 6)) for _ in range(threads)]

    def loss_of(i):
        return lambda w, x: tnp.sum(tnp.tanh(x @ w) ** (1 + i % 3)) * (i + 1)
    grads = [tg.grad(loss_of(i)) for i in range(threads)]
    shared = tg.jit(tg.grad(loss_of(0)))
    rows = []
    for name, fn_of in (("different gradients", lambda i: grads[i]), ("one shared jit(grad)", lambda i: shared)):
        expected = [fn_of(i)(w, xs[i]) for i in range(threads)]
        elapsed, results = run_threads(fn_of, lambda i: (w, xs[i]), threads, calls)
        exact = all(np.array_equal(g, expected[i]) for i in range(threads) for g in results[i])
        close = all(np.allclose(g, expected[i], rtol=1e-12, atol=0) for i in range(threads) for g in results[i])
        rows.append([name, f"{threads} x {calls}", f"{elapsed:.2f}", "bit for bit" if exact else
                     ("to 1e-12" if close else "DIFFERENT")])
    return format_table(["calls", "threads x calls", "s", "equal to single-threaded"], rows)


# ---- scale -----------------------------------------------------------------------------------------
def sin_chain(x, n):
    for _ in range(n):
        x = tnp.sin(x)
    return x


def bench_scale(quick):
    rows = []
    for n in ((10 ** 4, 10 ** 5) if quick else (10 ** 5, 10 ** 6)):
        f = tg.grad(partial(sin_chain, n=n))
        gc.collect()
        start = time.perf_counter()
        f(np.float64(0.5))
        elapsed = time.perf_counter() - start
        _, _, peak = traced(f, np.float64(0.5))
        rows.append([f"grad of a chain of {n} sin", f"{elapsed:.2f}", f"{peak / MIB:.0f} MiB ({peak / n:.0f} B/op)",
                     ""])
    previous = None
    sizes = (1000, 2000, 4000, 8000, 10 ** 4) if quick else (1000, 2000, 4000, 8000, 16000, 10 ** 5)
    stack_grad = tg.grad(lambda xs: tnp.sum(tnp.sin(tnp.stack(xs))))
    for n in sizes:
        xs = [0.001 * k for k in range(n)]
        gc.collect()
        start = time.perf_counter()
        stack_grad(xs)
        elapsed = time.perf_counter() - start
        ratio = "" if previous is None else f"x{elapsed / previous[1]:.2f} for x{n / previous[0]:g}"
        rows.append([f"grad of sum(sin(stack(xs))), {n} inputs", f"{elapsed:.3f}", "", ratio])
        previous = (n, elapsed)
    per_leaf = tg.grad(lambda xs: sum(tnp.sin(x) for x in xs))
    for n in (8000, sizes[-1]):
        xs = [0.001 * k for k in range(n)]
        gc.collect()
        start = time.perf_counter()
        per_leaf(xs)
        rows.append([f"grad of Python sum of sin per leaf, {n} inputs", f"{time.perf_counter() - start:.3f}", "", ""])
    return format_table(["case", "s", "peak traced", "growth"], rows)


SECTIONS = {"memory": bench_memory, "jit_cache": bench_jit_cache, "staging": bench_staging,
            "threads": bench_threads, "scale": bench_scale}


def main(argv):
    quick = "--quick" in argv
    names = [a for a in argv if a in SECTIONS] or list(SECTIONS)
    for name in names:
        print(f"## {name}")
        print(SECTIONS[name](quick))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
