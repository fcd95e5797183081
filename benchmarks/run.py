"""Run every tapegrad benchmark and print one compact table (``make bench``).

Usage: ``python benchmarks/run.py [--quick] [--threads N] [--json results.json] [chain] [mlp] [hessian]
[sin10] [checkpoint] [vmap] [jit_step] [gp] [control_flow] [jacobian_memory] [import] [staging] [kernels]
[distributed] [implicit] [while_rev] [native] [odeint] [optimize] [minimize_traced]``

- ``--quick``: fewer repeats (a smoke run; numbers are noisier).
- ``--threads N``: cap BLAS/OpenMP threads (OPENBLAS/OMP/MKL_NUM_THREADS) before NumPy loads.
- ``--json PATH``: also write every result row as JSON (``make bench`` writes ``benchmarks/out/results.json``,
  an ignored folder, which ``plot.py`` draws as ``benchmarks/out/results.png``). The published figures,
  ``benchmarks/results.json`` and ``results.png`` (committed; the docs site shows them), are written only by
  ``make bench-publish``: a full run. ``--quick``, or a subset of the benchmarks, with ``--json`` naming
  the published file is refused before anything runs.
- names: run only these benchmarks (default: all).

Each benchmark also runs alone: ``python benchmarks/bench_chain.py`` (and ``bench_mlp.py``,
``bench_hessian.py``, ``bench_sin10.py``, ``bench_checkpoint.py``, ``bench_vmap.py``, ``bench_jit_step.py``,
``bench_gp.py``, ``bench_control_flow.py``, ``bench_import.py``, ``bench_implicit.py``,
``bench_while_rev.py``, ``bench_native.py``). ``compare_revisions.py`` runs these
benchmarks at two git revisions, alternated, for a before/after table.

The compact table: "ratio" is the time over the row named in "to" (the hand-written NumPy code; for
``sin10`` the 300 us target; for ``checkpoint`` tapegrad's plain ``grad``; for ``jit_step`` the
speed-up over tapegrad's eager step, eager time over the row's; for ``gp`` PyTorch eager's row of the same
kind, GP step or first-order gradient; for ``import`` NumPy's own import; for ``implicit`` the implicit
hypergradient's row; for ``debug_nans`` the same code without the checks; for ``while_rev`` the ``scan`` row
of the same mode; for ``native`` the hand-written NumPy
loops, or the same ``jit`` with the compiled executor off); "note" holds the second
number of a benchmark (mlp: over tapegrad's forward, and the jit first-call rows' staging time; hessian: per basis
vector; checkpoint and control_flow's memory rows: peak memory; vmap: speed-up over a Python loop of
``grad``; jit_step: steps per second; gp: a jitted row's first call; implicit: peak memory); "error" is the max relative
error against the reference (``sin10``: absolute error; ``jit_step``: the Parameters after a few steps
against eager tapegrad's; ``gp``: against eager tapegrad's row of the same kind).
Timings: best (minimum) per-call time over interleaved repeats, gc enabled (see ``_timing.py``).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, blas_threads, format_table  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import bench_chain  # noqa: E402
import bench_checkpoint  # noqa: E402
import bench_control_flow  # noqa: E402
import bench_debug_nans  # noqa: E402
import bench_distributed  # noqa: E402
import bench_gp  # noqa: E402
import bench_hessian  # noqa: E402
import bench_implicit  # noqa: E402
import bench_import  # noqa: E402
import bench_jacobian_memory  # noqa: E402
import bench_jit_step  # noqa: E402
import bench_kernels  # noqa: E402
import bench_minimize_traced  # noqa: E402
import bench_mlp  # noqa: E402
import bench_native  # noqa: E402
import bench_odeint  # noqa: E402
import bench_optimize  # noqa: E402
import bench_poisson  # noqa: E402
import bench_science  # noqa: E402
import bench_sin10  # noqa: E402
import bench_solve_ivp  # noqa: E402
import bench_sparse_jacobian  # noqa: E402
import bench_staging  # noqa: E402
import bench_vmap  # noqa: E402
import bench_while_rev  # noqa: E402
import numpy as np  # noqa: E402

BENCHMARKS = {"chain": bench_chain, "mlp": bench_mlp, "hessian": bench_hessian, "sin10": bench_sin10,
              "checkpoint": bench_checkpoint, "vmap": bench_vmap, "jit_step": bench_jit_step,
              "gp": bench_gp, "control_flow": bench_control_flow, "jacobian_memory": bench_jacobian_memory,
              "import": bench_import, "staging": bench_staging, "kernels": bench_kernels,
              "distributed": bench_distributed, "implicit": bench_implicit, "while_rev": bench_while_rev,
              "native": bench_native, "solve_ivp": bench_solve_ivp, "odeint": bench_odeint,
              "optimize": bench_optimize, "science": bench_science, "minimize_traced": bench_minimize_traced,
              "debug_nans": bench_debug_nans, "sparse_jacobian": bench_sparse_jacobian,
              "poisson": bench_poisson}


def _peers() -> str:
    import importlib.metadata
    found = []
    for name in ("autograd", "torch", "jax"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return "  ".join(found)


def _environment() -> str:
    import tapegrad
    return (f"{datetime.date.today().isoformat()}  python {platform.python_version()}  numpy {np.__version__}  "
            f"tapegrad {tapegrad.__version__}  cores {os.cpu_count()}  blas threads {blas_threads()}  "
            f"{platform.machine()}  {_peers()}")


def compact(results: dict) -> str:
    """One table of every benchmark that ran (``results``: name -> that benchmark's result rows)."""
    rows = [row for name in BENCHMARKS if name in results
            for row in BENCHMARKS[name].compact_rows(results[name])]
    headers = ["bench", "contestant", "time (best)", "ratio", "to", "note", "error", "dtype"]
    return format_table(headers, rows, left=2)


# the committed results the docs site embeds (through plot.py's picture): only a full run writes them
PUBLISHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    quick = "--quick" in argv
    json_path = None
    if "--json" in argv:
        json_path = argv[argv.index("--json") + 1]
    names = [a for a in argv if a in BENCHMARKS] or list(BENCHMARKS)
    if json_path and os.path.realpath(json_path) == os.path.realpath(PUBLISHED):
        refused = ["--quick"] * quick + ["a subset of the benchmarks"] * (set(names) != set(BENCHMARKS))
        if refused:
            raise SystemExit(f"{json_path} is the published results file, which only a full run writes (make "
                             f"bench-publish), not one with {' and '.join(refused)}; a smoke run writes elsewhere: "
                             "make bench BENCH_FLAGS=--quick (into benchmarks/out/)")
    print(_environment())
    for name in [n for n in names if getattr(BENCHMARKS[n], "MISSING", None)]:  # jit_step: the demo's extras
        hint = getattr(BENCHMARKS[name], "INSTALL", "pip install -e '.[examples]'")  # native: numba
        print(f"{name}: skipped, {', '.join(BENCHMARKS[name].MISSING)} not installed ({hint})")
        names.remove(name)
    results = {name: BENCHMARKS[name].run(quick=quick) for name in names}
    print(compact(results))
    for name in names:
        print(BENCHMARKS[name].verdict(results[name]))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"environment": _environment(), "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
