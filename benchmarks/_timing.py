"""Timing helpers shared by the benchmarks (not a benchmark itself).

Every contestant of one benchmark is timed in the same process, interleaved: each repeat runs every
contestant once (``number`` calls each) in turn, so slow drifts of the machine (thermal, other
processes) hit all of them alike. After a warm-up call per contestant, we keep the per-call time of
each repeat and report the **minimum** over repeats (the usual ``timeit`` statistic: the run least
disturbed by the rest of the machine); the median is kept too, for the verbose table.

The garbage collector stays **enabled** while timing (unlike ``timeit``'s default): a tape allocates
many small objects, and a user's program pays for the collections they trigger.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time
import tracemalloc

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def apply_thread_flag(argv) -> None:
    """``--threads N`` in ``argv`` caps BLAS/OpenMP threads (must run before NumPy is imported)."""
    if "--threads" in argv:
        n = str(int(argv[argv.index("--threads") + 1]))
        for var in THREAD_VARS:
            os.environ[var] = n


def blas_threads() -> str:
    """The thread cap in effect, as set by ``--threads`` or the environment ("default" if none)."""
    return os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "default"


class Timing:
    """Per-call seconds of one contestant: ``best`` (min over repeats) and ``median``."""

    __slots__ = ("name", "samples")

    def __init__(self, name):
        self.name = name
        self.samples = []

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def calibrate(fn, target_s: float = 0.05) -> int:
    """How many calls of ``fn`` make one sample of about ``target_s`` seconds (at least 1)."""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    n = 1
    while dt * n < target_s / 4 and n < 1_000_000:
        n *= 2
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = (time.perf_counter() - t0) / n
    return max(1, int(target_s / max(dt, 1e-9)))


def interleaved(contestants: dict, repeat: int = 7, target_s: float = 0.05, warmup: int = 3,
                number: int | None = None) -> dict:
    """Time each callable in ``contestants`` (name -> zero-argument callable), interleaved.

    ``number`` calls per sample skips the calibration (for contestants that take 0.1 s or more).

    Returns:
        name -> :class:`Timing` with ``repeat`` samples of seconds per call.
    """
    for fn in contestants.values():
        for _ in range(warmup):
            fn()
    numbers = {name: number or calibrate(fn, target_s) for name, fn in contestants.items()}
    timings = {name: Timing(name) for name in contestants}
    gc_was_enabled = gc.isenabled()
    gc.enable()
    try:
        for _ in range(repeat):
            for name, fn in contestants.items():
                n = numbers[name]
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                timings[name].samples.append((time.perf_counter() - t0) / n)
    finally:
        if not gc_was_enabled:
            gc.disable()
    return timings


def met(ok) -> str:
    """A verdict line's word for a target."""
    return "MET" if ok else "MISSED"


def format_table(headers, rows, left: int = 1) -> str:
    """A plain-text table: the first ``left`` columns left-aligned, the others right-aligned."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for k, r in enumerate(cells):
        parts = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(parts))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def try_import(name):
    """The module, or None when it is not installed (optional peers: autograd, torch)."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def one_torch_thread():
    """Cap PyTorch at one intra-op thread, if it is loaded; returns a function restoring the old count.

    On a 2-core machine PyTorch's OpenMP threads and OpenBLAS's threads spin while waiting for work and
    take the cores from each other: timed interleaved with PyTorch at 2 threads, a 100x100 NumPy Hessian
    went from 0.08 ms to 8 ms and ``torch.func.hessian`` from 2.6 ms to 20 ms. The benchmarks with
    small arrays (``hessian``, ``sin10``) run PyTorch on one thread; NumPy keeps its BLAS setting.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda: None
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    return lambda: torch.set_num_threads(previous)


def standalone_main(run, table, verdict, argv=None):
    """Run one benchmark on its own (``python benchmarks/bench_X.py``): its table, then its verdict."""
    argv = sys.argv[1:] if argv is None else argv
    results = run(quick="--quick" in argv)
    print(table(results))
    print(verdict(results))
    return results


def peak_mib(fn) -> float:
    """MiB allocated at the peak of one call of ``fn`` (its result kept until the end), by tracemalloc:
    host memory that Python's allocators see (NumPy's buffers included), not a device's."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return (peak - base) / 2.0 ** 20
