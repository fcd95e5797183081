"""``minimize_traced``: the Lotka-Volterra fit batched with ``jit(vmap(fit))`` over 16 and 256 data sets,
against a Python loop of the single jitted fit and JAX's ``jit(vmap(jax.scipy.optimize.minimize))`` (issue 38).

``fit(observed)`` is ``minimize(loss, START, args=(observed,), method="BFGS").x`` where ``observed`` is a
value of ``jit``/``vmap``, so that ``tapegrad.scipy.optimize.minimize`` runs its own BFGS written with
``while_loop`` (``tapegrad/scipy/_minimize_traced.py``, called directly here). Data:
``benchmarks/_lotka_volterra.py``'s ``datasets(n)``, each fitted from ``START``. Contestants, per batch:

- ``jit(vmap(fit))``: one program, the batch as the loop's vector axis (every example runs until the last
  has converged);
- ``loop of jit(fit)``: a Python loop of the single jitted fit, the reference the target is measured
  against (issue 38: ``jit(vmap)`` at most 0.5x the loop at 16 data sets, 0.1x at 256);
- ``jax jit(vmap(minimize))``: JAX's BFGS on the same loss (``_lotka_volterra.jax_loss``), where JAX is
  installed;
- ``loop of scipy(jit(value_and_grad))``: SciPy's BFGS fed ``tg.jit(tg.value_and_grad(loss))`` by hand,
  per data set: what the eager ``minimize`` costs at best (issue 38's reference for it).

Each row says which executor runs the program (``jit(f).executor``), the number of data sets whose fit
converged (``success``), the time per evaluation of the loss and gradient (over all the fits' ``nfev``:
JAX's BFGS gives up on most of these fits after a few evaluations, so its total time is no comparison),
and, over the converged fits, the largest excess of a fit's loss over the lowest loss any
contestant's converged fit reached on that data set ("loss over best"); the first call (staging, numba's
compile, its result the one checked) is in the note, not in the timing. Timed in one process,
interleaved (``_timing.interleaved``), one call per sample. Run alone:
``python benchmarks/bench_minimize_traced.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import _lotka_volterra as lv  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad.scipy._minimize_traced import minimize_traced  # noqa: E402

SIZES = (16, 256)
TARGETS = {16: 0.5, 256: 0.1}  # x the loop of single jitted fits
LOOP = "loop of jit(fit)"
SCIPY = "loop of scipy(jit(value_and_grad))"


def fit(observed):
    """The fitted rates, whether the fit converged, and its evaluations of the loss and gradient."""
    res = minimize_traced(lv.loss, lv.START, (observed,), method="BFGS")
    return res.x, res.success, res.nfev


def _jax_contestant():
    """``jit(vmap(fit))`` in JAX, or None where JAX does not import."""
    reference = lv.jax_loss()
    if reference is None:
        return None
    import jax
    from jax.scipy.optimize import minimize
    jloss, _ = reference

    def jax_fit(observed):
        res = minimize(jloss, lv.START, args=(observed,), method="BFGS")
        return res.x, res.success, res.nfev
    batched = jax.jit(jax.vmap(jax_fit))
    return lambda observed: jax.block_until_ready(batched(observed))  # JAX returns before it has computed


def _scipy_fits(value_and_grad, observed):
    fits = [scipy.optimize.minimize(value_and_grad, lv.START, args=(o,), jac=True, method="BFGS") for o in observed]
    return [(res.x, res.success, res.nfev) for res in fits]


def _first_call(fn, *args):
    """``(result, seconds)`` of the first call (staging and compiling)."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _losses(xs, observed) -> np.ndarray:
    """Each data set's loss at its fitted rates (the rows compare them with the lowest any contestant
    reached)."""
    return np.array([float(lv.loss(np.asarray(x), o)) for x, o in zip(xs, observed)])


def _outcome(name, out):
    """``(rates (n, 4), converged (n,), evaluations (n,))`` from a contestant's result."""
    if name in (LOOP, SCIPY):
        return tuple(np.stack([np.asarray(o[k]) for o in out]) for k in range(3))
    return tuple(np.asarray(o) for o in out)


def run(quick: bool = False):
    rows = []
    batched, single, jax_batched = tg.jit(tg.vmap(fit)), tg.jit(fit), _jax_contestant()
    value_and_grad = tg.jit(tg.value_and_grad(lv.loss))
    for n in SIZES:
        observed = lv.datasets(n)
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # trial steps that overshoot make the model blow up
            contestants = {"jit(vmap(fit))": lambda observed=observed: batched(observed),
                           LOOP: lambda observed=observed: [single(o) for o in observed]}
            if jax_batched is not None:
                contestants["jax jit(vmap(minimize))"] = lambda observed=observed: jax_batched(observed)
            contestants[SCIPY] = lambda observed=observed: _scipy_fits(value_and_grad, observed)
            firsts = {name: _first_call(fn) for name, fn in contestants.items()}  # staged and compiled
            timings = interleaved(contestants, repeat=1 if quick else 3, warmup=0, number=1)
            outcomes = {name: _outcome(name, out) for name, (out, _) in firsts.items()}
            losses = {name: _losses(xs, observed) for name, (xs, _, _) in outcomes.items()}
        executors = {"jit(vmap(fit))": batched.executor(observed), LOOP: single.executor(observed[0]),
                     "jax jit(vmap(minimize))": "xla", SCIPY: value_and_grad.executor(lv.START, observed[0])}
        # the lowest loss any contestant's converged fit reached, per data set
        best = np.min(np.stack([np.where(ok, losses[name], np.inf) for name, (_, ok, _) in outcomes.items()]),
                      axis=0)
        loop_ms = timings[LOOP].best * 1e3
        for name, timing in timings.items():
            _, ok, evaluations = outcomes[name]
            ok = ok.astype(bool)
            excess = float(np.max(losses[name][ok] / best[ok] - 1.0)) if ok.any() else float("nan")
            rows.append({"bench": "minimize_traced", "name": name, "datasets": n, "best_ms": timing.best * 1e3,
                         "median_ms": timing.median * 1e3, "ratio": timing.best * 1e3 / loop_ms,
                         "first_s": firsts[name][1], "executor": executors[name], "converged": int(ok.sum()),
                         "us_per_eval": timing.best * 1e6 / int(evaluations.sum()),
                         "loss_excess": excess, "dtype": "float64"})
    return rows


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["minimize_traced", f"{r['name']} x{r['datasets']}", f"{r['best_ms']:.1f} ms", f"{r['ratio']:.2f}x",
             LOOP, f"{r['converged']}/{r['datasets']} converged; {r['us_per_eval']:.1f} us/evaluation; first call "
             f"{r['first_s']:.1f} s; {r['executor']}",
             f"{r['loss_excess']:.1e}", r["dtype"]] for r in results]


def table(results) -> str:
    headers = ["minimize_traced: batched Lotka-Volterra fits", "data sets", "ms best", "vs loop", "us/evaluation",
               "first call s", "converged", "loss over best", "executor"]
    rows = [[r["name"], r["datasets"], f"{r['best_ms']:.1f}", f"{r['ratio']:.2f}x", f"{r['us_per_eval']:.1f}",
             f"{r['first_s']:.1f}", f"{r['converged']}/{r['datasets']}", f"{r['loss_excess']:.1e}", r["executor"]]
            for r in results]
    return format_table(headers, rows)


def verdict(results) -> str:
    lines = []
    for r in results:
        if r["name"] != "jit(vmap(fit))":
            continue
        target = TARGETS[r["datasets"]]
        lines.append(f"minimize_traced target jit(vmap(fit)) over {r['datasets']} data sets <= {target:g}x the loop of "
                     f"single jitted fits: {met(r['ratio'] <= target)} ({r['ratio']:.2f}x, {r['best_ms']:.1f} ms; "
                     f"executor {r['executor']})")
    jax_rows = {r["datasets"]: r for r in results if r["name"].startswith("jax")}
    for r in results:
        if r["name"] == "jit(vmap(fit))" and r["datasets"] in jax_rows:
            j = jax_rows[r["datasets"]]
            lines.append(f"minimize_traced jit(vmap(fit)) over {r['datasets']} data sets against JAX's: "
                         f"{r['best_ms'] / j['best_ms']:.3g}x the time, {r['us_per_eval'] / j['us_per_eval']:.3g}x per "
                         f"evaluation ({r['converged']} against {j['converged']} fits converged)")
    return "\n".join(lines)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
