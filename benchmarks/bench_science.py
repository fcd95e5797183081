"""``science``: the scientific building blocks on the compiled path (issue 38), on the Lotka-Volterra fit of
``_lotka_volterra.py`` (RK4, 160 steps in a ``fori_loop`` inside a ``scan``, float64).

- **Batched fit**: ``jit(vmap(value_and_grad(loss)))`` over 16 and 256 data sets against a Python loop of
  single ``jit(value_and_grad(loss))`` calls (the compiled executor on for both). Targets: at most 0.5x the
  loop at 16 sets, 0.1x at 256. Staged by ``jit``, a ``vmap`` whose one-example program lowers runs as
  the compiled program's outer loop (``_control_flow/_batch_loop.py``).
- **First call** (a fresh Python process importing this tree's ``tapegrad``, ``TAPEGRAD_NUMBA_CACHE_DIR`` a
  new temporary folder): the first ``jit(value_and_grad(loss))`` call with the folder empty (cold), then in a
  second process on the same folder (warm). Each process reports ``import tapegrad``, ``import numba``,
  the first call (staging, numba compiling or loading the machine code, one run) and numba's own share of
  it. Targets: import numba + first call at most 2 s cold, 0.3 s warm.
- The other rows of the issue live with their features and are listed in the verdict here:
  ``bench_optimize.py`` (``minimize`` and the other SciPy wrappers against SciPy fed a hand-jitted
  function), ``bench_odeint.py`` (``odeint`` against JAX and SciPy), ``bench_solve_ivp.py``,
  ``bench_minimize_traced.py`` (a fit inside ``jit(vmap(...))``) and ``bench_import.py``.

Skipped, with a message, where numba does not import. Run alone:
``python benchmarks/bench_science.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402

MISSING = [] if importlib.util.find_spec("numba") else ["numba"]
INSTALL = "pip install numba"
BATCHES = {16: 0.5, 256: 0.1}  # sets -> target (x the loop of single compiled calls)
COLD_TARGET_S, WARM_TARGET_S = 2.0, 0.3
FIRST_CALL_PAIRS = 3


def _row(name, kind, ms, ratio=None, to="", err=None, note="", executor=""):
    return {"name": name, "kind": kind, "best_ms": ms, "ratio": ratio, "to": to, "rel_err": err, "note": note,
            "executor": executor, "dtype": "float64"}


# ---- the batched fit ------------------------------------------------------------------------------
def run_batches(quick):
    saved = tg.config.compiled_executor
    tg.config.compiled_executor = True
    try:
        import _lotka_volterra as lv
        single = tg.jit(tg.value_and_grad(lv.loss))
        return [row for n, target in BATCHES.items() for row in _batch(lv, single, n, target, quick)]
    finally:
        tg.config.compiled_executor = saved


def _batch(lv, single, n: int, target: float, quick):
    """The loop of ``n`` single calls and the batched call, each checked against the other."""
    observed, thetas = lv.datasets(n), np.tile(lv.START, (n, 1))
    batched = tg.jit(tg.vmap(tg.value_and_grad(lv.loss)))

    def loop():
        return [single(theta, data) for theta, data in zip(thetas, observed)]
    value, grad = batched(thetas, observed)
    values, grads = zip(*loop())
    err = max(float(np.max(np.abs(grad - np.stack(grads)) / np.abs(grad).max())),
              float(np.max(np.abs(value - np.array(values)) / np.abs(value).max())))
    times = interleaved({"vmap": lambda: batched(thetas, observed), "loop": loop}, repeat=3 if quick else 7)
    vmap_ms, loop_ms = times["vmap"].best * 1e3, times["loop"].best * 1e3
    loop_name = f"tapegrad loop of {n} jit(value_and_grad) calls"
    return [_row(loop_name, "batch", loop_ms, executor=single.executor(thetas[0], observed[0])),
            _row(f"tapegrad jit(vmap(value_and_grad)) over {n} sets", "batch", vmap_ms, vmap_ms / loop_ms,
                 loop_name, err, note=f"target <= {target:g}x", executor=batched.explain(thetas, observed))]


# ---- first call, fresh processes ----------------------------------------------------------------
_CHILD = """
import json, sys, time
{prelude}
sys.path.insert(0, {here!r})
import numpy
t1 = time.perf_counter()
import tapegrad as tg
t2 = time.perf_counter()
import numba
t3 = time.perf_counter()
import _lotka_volterra as lv
observed = lv.data()
f = tg.jit(tg.value_and_grad(lv.loss))
compile_s = []
from tapegrad._jit import native
_compile = native.NativeRun._compile
def timed(self, args):
    start = time.perf_counter()
    try:
        return _compile(self, args)
    finally:
        compile_s.append(time.perf_counter() - start)
native.NativeRun._compile = timed
t4 = time.perf_counter()
f(lv.START, observed)
t5 = time.perf_counter()
ms = lambda start, end: (end - start) * 1e3
print(json.dumps({{"import_tapegrad": ms(t1, t2), "import_numba": ms(t2, t3), "first_call": ms(t4, t5),
                  "numba": sum(compile_s) * 1e3, "executor": f.explain(lv.START, observed)}}))
"""


def first_calls(pairs: int) -> dict:
    """``{"cold": [...], "warm": [...]}``: one dict of milliseconds per process, ``pairs`` times a cold
    process on a new cache folder followed by a warm one on the same folder."""
    import bench_import  # its prelude: this process's tapegrad first on the path, bytecode compiled
    import bench_native  # its child runner: the compiled executor on, the cache folder given
    code = _CHILD.format(prelude=bench_import._PRELUDE.format(src=bench_import._tapegrad_src()), here=HERE)
    runs: dict = {"cold": [], "warm": []}
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(prefix="tapegrad-numba-") as cache_dir:
            runs["cold"].append(bench_native._child(code, cache_dir))
            runs["warm"].append(bench_native._child(code, cache_dir))
    return runs


def run_first_call(quick):
    rows = []
    for cache, procs in first_calls(1 if quick else FIRST_CALL_PAIRS).items():
        best = min(procs, key=lambda p: p["import_numba"] + p["first_call"])
        total = best["import_numba"] + best["first_call"]
        note = (f"import numba {best['import_numba']:.0f} ms, call {best['first_call']:.0f} ms of which numba "
                f"{best['numba']:.0f} ms; import tapegrad {best['import_tapegrad']:.0f} ms; best of {len(procs)}")
        rows.append(_row(f"tapegrad LV jit(value_and_grad) first call, {cache} cache: import numba + call",
                         "first_call", total, note=note, executor=best["executor"]))
    return rows


# ---- run -----------------------------------------------------------------------------------------
def run(quick: bool = False):
    if MISSING:
        raise ImportError(f"bench_science needs {', '.join(MISSING)} ({INSTALL})")
    return run_batches(quick) + run_first_call(quick)


def _ms(ms) -> str:
    if ms >= 1000:
        return f"{ms / 1e3:.2f} s"
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms"


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["science", r["name"], _ms(r["best_ms"]), "" if r["ratio"] is None else f"{r['ratio']:.3f}x",
             r["to"], r["note"], "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["dtype"]]
            for r in results]


def table(results) -> str:
    headers = ["science: the Lotka-Volterra fit", "time (best)", "ratio", "to", "note", "rel err", "dtype"]
    return format_table(headers, [row[1:] for row in compact_rows(results)])


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    lines = []
    for n, target in BATCHES.items():
        r = by[f"tapegrad jit(vmap(value_and_grad)) over {n} sets"]
        lines.append(f"science target jit(vmap) of the fit over {n} sets <= {target:g}x the loop of single calls: "
                     f"{met(r['ratio'] <= target)} ({r['ratio']:.3f}x, {_ms(r['best_ms'])}; {r['executor']})")
    for cache, target in (("cold", COLD_TARGET_S), ("warm", WARM_TARGET_S)):
        r = by[f"tapegrad LV jit(value_and_grad) first call, {cache} cache: import numba + call"]
        lines.append(f"science target first call, {cache} cache, fresh process (import numba + first call) <= "
                     f"{_ms(target * 1e3)}: {met(r['best_ms'] <= target * 1e3)} ({_ms(r['best_ms'])}: {r['note']}; "
                     f"{r['executor']})")
    lines.append("science: the minimize, root, least_squares, fixed_point and root_scalar rows are bench_optimize's; "
                 "odeint's bench_odeint's; solve_ivp's bench_solve_ivp's; the fit inside jit(vmap) "
                 "bench_minimize_traced's; import time bench_import's")
    return "\n".join(lines)


def main(argv=None):
    if MISSING:
        print(f"science: skipped, {', '.join(MISSING)} not installed ({INSTALL})")
        return []
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
