"""Run every tapegrad benchmark and print one compact table (``make bench``).

Usage: ``python benchmarks/run.py [--quick] [--threads N] [--json results.json] [chain] [mlp]``

- ``--quick``: fewer repeats (a smoke run; numbers are noisier).
- ``--threads N``: cap BLAS/OpenMP threads (OPENBLAS/OMP/MKL_NUM_THREADS) before NumPy loads.
- ``--json PATH``: also write every result row as JSON.
- names: run only these benchmarks (default: all).

Each benchmark also runs alone: ``python benchmarks/bench_chain.py``, ``python benchmarks/bench_mlp.py``.
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

import numpy as np  # noqa: E402

import bench_chain  # noqa: E402
import bench_mlp  # noqa: E402

BENCHMARKS = {"chain": bench_chain, "mlp": bench_mlp}


def _peers() -> str:
    import importlib.metadata
    found = []
    for name in ("autograd", "torch"):
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


def compact(chain_results, mlp_results) -> str:
    rows = []
    if chain_results:
        ref = next(r for r in chain_results if r["name"] == "numpy fwd+bwd (hand)")["best_us_per_op"]
        for r in chain_results:
            if r["kind"] == "grad":
                rows.append(["chain", r["name"], f"{r['best_us_per_op']:.2f} us/op",
                             f"{r['best_us_per_op'] / ref:.2f}x", "",
                             "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["grad_dtype"]])
    if mlp_results:
        for r in mlp_results:
            is_fwd = r["name"] == "tapegrad forward only"
            rows.append(["mlp", r["name"], f"{r['best_ms']:.2f} ms", f"{r['ratio_to_numpy']:.2f}x",
                         "" if is_fwd else f"{r['ratio_to_tapegrad_forward']:.2f}x",
                         "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["grad_dtype"] or ""])
    return format_table(["bench", "contestant", "time (best)", "vs numpy", "vs tg fwd", "rel err", "dtype"],
                        rows)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    quick = "--quick" in argv
    json_path = None
    if "--json" in argv:
        json_path = argv[argv.index("--json") + 1]
    names = [a for a in argv if a in BENCHMARKS] or list(BENCHMARKS)
    print(_environment())
    results = {name: BENCHMARKS[name].run(quick=quick) for name in names}
    print(compact(results.get("chain"), results.get("mlp")))
    for name in names:
        print(BENCHMARKS[name].verdict(results[name]))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"environment": _environment(), "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
