"""``staging``: what ``jit`` pays per equation to stage a program (``tapegrad.make_program``).

Programs staged (each a fresh ``make_program``, so nothing is cached between samples):

- ``chain grad``: ``grad`` of ``bench_chain``'s 200 steps of ``sin(x) * 1.01 + 0.1`` on float32[16]
  (about 1,200 equations: elementwise forward and backward);
- ``mlp value_and_grad``: ``bench_mlp``'s 784-512-512-10 MLP step (about 50 equations: matmuls, reductions,
  ``take_along_axis`` and its scatter), where shape inference used to run each product on dummies;
- ``mlp value_and_grad x20``: the same loss summed over 20 copies of the batch (about 1,000 equations of the
  mlp's kinds).

Reported: microseconds per equation (best of ``REPEAT`` stagings, divided by the program's equations),
wall-clock and the process's CPU time: on a shared machine a staging of 1,000 equations (tens of
milliseconds) is often preempted, which the CPU time does not count. Target (issue 16): <= 30 us per
equation for every row.

Run alone: ``python benchmarks/bench_staging.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import bench_chain  # noqa: E402
import bench_mlp  # noqa: E402

import tapegrad as tg  # noqa: E402

TARGET_US = 30.0
REPEAT = 7
COPIES = 20


def _mlp_many(params, x, labels):
    return sum(bench_mlp.loss_tnp(params, x, labels) for _ in range(COPIES))


def programs():
    """name -> (function to stage, its arguments)."""
    mlp_args = bench_mlp.make_problem()
    return {
        "chain grad": (tg.grad(bench_chain.chain_tnp), (bench_chain.make_input(),)),
        "mlp value_and_grad": (tg.value_and_grad(bench_mlp.loss_tnp), mlp_args),
        f"mlp value_and_grad x{COPIES}": (tg.value_and_grad(_mlp_many), mlp_args),
    }


def staging_us(fn, args, repeat: int):
    """``(best wall microseconds per equation, best CPU microseconds per equation, equations)`` of
    staging ``fn`` on ``args``."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        make = tg.make_program(fn)
        t0, c0 = time.perf_counter(), time.process_time()
        program = make(*args)
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    n = len(program.eqns)
    return wall / n * 1e6, cpu / n * 1e6, n


def run(quick: bool = False):
    results = []
    for name, (fn, args) in programs().items():
        wall, cpu, n = staging_us(fn, args, 2 if quick else REPEAT)
        results.append({"bench": "staging", "name": name, "kind": "staging", "best_us_per_eqn": wall,
                        "cpu_us_per_eqn": cpu, "eqns": n})
    return results


def table(results) -> str:
    return format_table(["program staged", "equations", "us per equation", "CPU us per equation"],
                        [[r["name"], r["eqns"], f"{r['best_us_per_eqn']:.1f}", f"{r['cpu_us_per_eqn']:.1f}"]
                         for r in results])


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["staging", r["name"], f"{r['best_us_per_eqn']:.1f} us/eqn", "", "", f"{r['eqns']} equations", "", ""]
            for r in results]


def verdict(results) -> str:
    worst = max(results, key=lambda r: r["best_us_per_eqn"])
    met = "MET" if worst["best_us_per_eqn"] <= TARGET_US else "MISSED"
    return (f"staging target <= {TARGET_US:.0f} us per equation: {met} "
            f"(worst {worst['best_us_per_eqn']:.1f} us wall, {worst['cpu_us_per_eqn']:.1f} us CPU, {worst['name']})")


if __name__ == "__main__":
    standalone_main(run, table, verdict)
