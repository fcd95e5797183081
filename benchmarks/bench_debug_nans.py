"""What ``tg.config.debug_nans`` costs when it is off, and what it costs on.

Off, the only change to a primitive's path is one flag test where its impl runs on concrete arrays
(``bind``, the reverse- and forward-mode traces) and after each vjp/jvp rule of the backward and tangent
passes. To time that test itself, this process builds the same functions **without** those lines (their
source with the two lines of each check removed, compiled in the same module) and swaps their code in
for the baseline runs: the two contestants are the shipped code with the checks off, and the code as it
was before the checks existed, interleaved in one process. Target (issue 39): off costs nothing, i.e. a
ratio within the noise of 1.00 (we call it met at <= 1.03 on the eager workloads, where every primitive
pays the test; a 3% band is what repeated runs of one contestant against itself vary by on a loaded
machine).

Workloads (eager: jit's compiled program runs no primitive one by one and checks only its outputs):
a chain of 200 small elementwise operations, and the gradient of a two-layer MLP's loss (a tape of
about 30 primitives on 64x32 arrays). On, for scale, the same workloads with ``debug_nans = True``.
"""
from __future__ import annotations

import inspect
import os
import sys
import textwrap

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import format_table, interleaved, met, standalone_main  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import _core, _jvp, _tape  # noqa: E402

TARGET_RATIO = 1.03
OFF, BEFORE, ON = "checks off (shipped)", "without the checks (before)", "debug_nans on"
# the functions with a check on the eager hot path, and where each lives
CHECKED = [(_core, "bind"), (_core.EvalTrace, "process_primitive"), (_tape.VJPTrace, "process_primitive"),
           (_tape.Tape, "_pass"), (_tape, "_all_operands"), (_jvp.JVPTrace, "process_primitive"),
           (_jvp, "apply_jvp_rule"), (_jvp, "apply_jvp_rules")]


def _without_checks(fn):
    """The code of ``fn`` with each ``if _checking:`` line and the line under it removed."""
    lines, kept, skip = textwrap.dedent(inspect.getsource(fn)).splitlines(), [], False
    for line in lines:
        if skip:
            skip = False
            continue
        if "if _checking:" in line:
            skip = True
            continue
        kept.append(line)
    namespace: dict = {}
    exec(compile("\n".join(kept), inspect.getsourcefile(fn), "exec"), fn.__globals__, namespace)  # noqa: S102
    return namespace[fn.__name__].__code__


class _Swap:
    """Puts the check-free code in place while entered (every caller of these functions sees it)."""

    def __init__(self):
        self.functions = [getattr(owner, name) for owner, name in CHECKED]
        self.shipped = [f.__code__ for f in self.functions]
        self.before = [_without_checks(f) for f in self.functions]

    def __enter__(self):
        for f, code in zip(self.functions, self.before):
            f.__code__ = code

    def __exit__(self, *exc):
        for f, code in zip(self.functions, self.shipped):
            f.__code__ = code


def _chain(x):
    for _ in range(50):
        x = tnp.sin(x) * 0.9 + tnp.cos(x) * 0.1
    return x


def _mlp_workload():
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((32, 32)) * 0.2, rng.standard_normal((32, 4)) * 0.2
    x, y = rng.standard_normal((64, 32)), rng.standard_normal((64, 4))

    def loss(w1, w2):
        h = tnp.tanh(x @ w1)
        return tnp.mean((h @ w2 - y) ** 2) + 1e-3 * tnp.sum(w1 * w1)
    step = tg.grad(loss, grad_position=(0, 1))
    return lambda: step(w1, w2)


def _contestants(fn):
    swap = _Swap()

    def before():
        with swap:
            fn()

    def on():
        tg.config.debug_nans = True
        try:
            fn()
        finally:
            tg.config.debug_nans = False
    return {OFF: fn, BEFORE: before, ON: on}


def run(quick: bool = False):
    x = np.linspace(0.1, 1.0, 8)
    workloads = {"elementwise chain, 200 ops on (8,)": lambda: _chain(x), "grad of an MLP loss": _mlp_workload()}
    results = []
    for workload, fn in workloads.items():
        timings = interleaved(_contestants(fn), repeat=3 if quick else 9)
        base = timings[BEFORE].best
        for name, t in timings.items():
            results.append({"bench": "debug_nans", "workload": workload, "name": name, "best_ms": t.best * 1e3,
                            "ratio": t.best / base})
    return results


def table(results) -> str:
    rows = [[r["workload"], r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.3f}x"] for r in results]
    return format_table(["workload", "contestant", "best", "vs without the checks"], rows, left=2)


def compact_rows(results):
    return [["debug_nans", f"{r['workload']}: {r['name']}", f"{r['best_ms']:.3f} ms", f"{r['ratio']:.3f}x",
             "without the checks", "", "", "float64"] for r in results]


def verdict(results) -> str:
    off = [r for r in results if r["name"] == OFF]
    worst = max(r["ratio"] for r in off)
    return (f"debug_nans off costs nothing (<= {TARGET_RATIO:.2f}x the code without the checks): "
            f"{met(worst <= TARGET_RATIO)} "
            f"(worst {worst:.3f}x: " + ", ".join(f"{r['workload']} {r['ratio']:.3f}x" for r in off) + ")")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
