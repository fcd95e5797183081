"""Import time: ``import tapegrad`` on top of NumPy, against NumPy's own import.

Each sample is a fresh interpreter (``python -c ...``), with the package's bytecode compiled first, as
an installed package has it. Three commands run in turn, interleaved, and each keeps its best time:
a bare interpreter, ``import numpy``, and ``import numpy, tapegrad``. NumPy's import is the second
minus the first; tapegrad's is the third minus the second. Target (issues 16 and 38): tapegrad at most
``TARGET_MS`` and at most ``TARGET_RATIO`` of NumPy's import on the same machine, in wall time.

Each command's best CPU time (user + system, of the child process) is kept too: on a machine whose
cores are busy the wall times wait for the cores, and the CPU times' ratio, which does not, tells a
change in the import from a change in the load. It is larger for NumPy than its wall time (OpenBLAS
starts its threads at import), so its ratio is the smaller.

The interpreters import the same ``tapegrad`` this process imports (so ``compare_revisions.py`` times
each revision's): its folder goes first on their path, and setuptools' editable finder is dropped.
"""
from __future__ import annotations

import compileall
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import format_table, standalone_main  # noqa: E402

TARGET_MS = 50.0
TARGET_RATIO = 1 / 3
TAPEGRAD = "tapegrad on top of NumPy"
NUMPY = "NumPy alone"

# every command starts with the same lines, so their cost cancels out of the differences
_PRELUDE = ("import sys; sys.path.insert(0, {src!r}); "
            "sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith('__editable__')]; ")
COMMANDS = {"python": "pass", "numpy": "import numpy", "numpy + tapegrad": "import numpy, tapegrad"}


def _tapegrad_src() -> str:
    """The folder holding the ``tapegrad`` package this process imports; its bytecode compiled."""
    import tapegrad
    package = os.path.dirname(os.path.abspath(tapegrad.__file__))
    compileall.compile_dir(package, quiet=1)  # PYTHONDONTWRITEBYTECODE would otherwise time the compiler
    return os.path.dirname(package)


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best_times(repeat: int) -> tuple[dict, dict]:
    """Best wall time and best CPU time (seconds) of each of :data:`COMMANDS` over ``repeat`` interleaved
    fresh interpreters."""
    prelude = _PRELUDE.format(src=_tapegrad_src())
    wall, cpu = dict.fromkeys(COMMANDS, float("inf")), dict.fromkeys(COMMANDS, float("inf"))
    for _ in range(repeat):
        for name, code in COMMANDS.items():
            start, start_cpu = time.perf_counter(), _children_cpu()
            subprocess.run([sys.executable, "-c", prelude + code], check=True)
            wall[name] = min(wall[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], _children_cpu() - start_cpu)
    return wall, cpu


def run(quick: bool = False):
    """Two rows: NumPy's import over a bare interpreter, and tapegrad's over NumPy's (best of 10), in wall
    time and in CPU time."""
    wall, cpu = best_times(repeat=4 if quick else 10)
    numpy_ms, numpy_cpu_ms = ((t["numpy"] - t["python"]) * 1e3 for t in (wall, cpu))
    tapegrad_ms, tapegrad_cpu_ms = ((t["numpy + tapegrad"] - t["numpy"]) * 1e3 for t in (wall, cpu))
    return [{"bench": "import", "name": NUMPY, "best_ms": numpy_ms, "ratio_to_numpy": 1.0,
             "cpu_ms": numpy_cpu_ms, "cpu_ratio_to_numpy": 1.0},
            {"bench": "import", "name": TAPEGRAD, "best_ms": tapegrad_ms, "ratio_to_numpy": tapegrad_ms / numpy_ms,
             "cpu_ms": tapegrad_cpu_ms, "cpu_ratio_to_numpy": tapegrad_cpu_ms / numpy_cpu_ms}]


def table(results) -> str:
    rows = [[r["name"], f"{r['best_ms']:.1f} ms", f"{r['ratio_to_numpy']:.2f}x", f"{r['cpu_ms']:.1f} ms",
             f"{r['cpu_ratio_to_numpy']:.2f}x"] for r in results]
    return format_table(["import, fresh interpreters, bytecode cached", "best", "vs NumPy's import", "CPU time",
                         "CPU vs NumPy's"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["import", r["name"], f"{r['best_ms']:.1f} ms", f"{r['ratio_to_numpy']:.2f}x", "NumPy's import",
             f"CPU time {r['cpu_ratio_to_numpy']:.2f}x", "", ""] for r in results]


def verdict(results) -> str:
    row = next(r for r in results if r["name"] == TAPEGRAD)
    ok = "MET" if row["best_ms"] <= TARGET_MS and row["ratio_to_numpy"] <= TARGET_RATIO else "MISSED"
    return (f"import target tapegrad <= {TARGET_MS:.0f} ms and <= 1/3 of NumPy's import: {ok} "
            f"({row['best_ms']:.1f} ms, {row['ratio_to_numpy']:.2f}x; CPU time {row['cpu_ratio_to_numpy']:.2f}x)")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
