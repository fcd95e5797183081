"""``implicit``: the hypergradient of a ridge fit, implicit (through ``tapegrad.scipy.optimize.minimize``)
against unrolled (reverse mode through ``K`` steps of gradient descent), time and peak memory as ``K`` grows.

The problem (notebooks/implicit_differentiation.md's): 60 training and 200 validation rows of 40 correlated
features; the inner problem ``w*(λ) = argmin ½ mean((X_tr w - y_tr)²) + λ‖w‖²``; the outer value the
validation loss ``½ mean((X_val w* - y_val)²)``; the derivative is taken in ``s = log λ`` at ``λ = 0.01``.

Contestants:

- ``implicit (L-BFGS-B)``: ``minimize(..., method="L-BFGS-B")`` to ``gtol`` 1e-10, differentiated by the
  implicit function theorem (one dense 40 x 40 adjoint solve at the solution); the solver's own iteration
  count is whatever it needs, and nothing of it is on the tape.
- ``unrolled GD, K = k``: ``k`` steps of gradient descent (step ``1 / L``) in a ``tg.fori_loop``, reverse
  mode through all of them (a ``scan``: ``k`` sets of residuals). An unrolled L-BFGS (its line search
  and its history, data-dependent control flow) is impractical to write as a differentiable loop, so
  the unrolled solver is plain gradient descent, the usual choice of unrolled hyperparameter methods.

Error: relative error of the hypergradient against the closed form ``-2 λ ∇L_valᵀ H⁻¹ w*``. Peak memory:
``tracemalloc`` (NumPy reports its buffers to it) during one gradient call, beyond what was held before:
the tape's residuals, temporaries, SciPy's work arrays. Time: best of interleaved samples, without
``tracemalloc``; ratios are to the implicit row.

Run alone: ``python benchmarks/bench_implicit.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, peak_mib, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy.optimize import minimize  # noqa: E402

N_TRAIN, N_VAL, D = 60, 200, 40
STEPS = (10, 100, 1000, 3000)  # 3000: where unrolled GD has converged (rel err ~4e-7)
S0 = float(np.log(1e-2))
IMPLICIT = "tapegrad implicit (L-BFGS-B)"


def make_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(D, D)) / np.sqrt(D)
    X = rng.normal(size=(N_TRAIN + N_VAL, D)) @ mixing
    y = X @ rng.normal(size=D) + 1.5 * rng.normal(size=N_TRAIN + N_VAL)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


def exact_hypergradient(Xt, yt, Xv, yv, s):
    lam = np.exp(s)
    H = Xt.T @ Xt / len(yt) + 2 * lam * np.eye(Xt.shape[1])
    w = np.linalg.solve(H, Xt.T @ yt / len(yt))
    return -2 * lam * (Xv.T @ (Xv @ w - yv) / len(yv)) @ np.linalg.solve(H, w)


def contestants(Xt, yt, Xv, yv):
    def train_loss(w, lam):
        return 0.5 * tnp.mean((Xt @ w - yt) ** 2) + lam * tnp.sum(w ** 2)

    def val_loss(w):
        return 0.5 * tnp.mean((Xv @ w - yv) ** 2)

    def implicit(s):
        w = minimize(train_loss, np.zeros(D), args=(tnp.exp(s),), method="L-BFGS-B",
                     options={"gtol": 1e-10, "ftol": 1e-14}).x
        return val_loss(w)

    eta = 1.0 / (np.linalg.eigvalsh(Xt.T @ Xt / len(yt)).max() + 2 * np.exp(S0))

    def unrolled(K):
        def outer(s):
            lam = tnp.exp(s)
            w = tg.fori_loop(0, K, lambda i, w: w - eta * tg.grad(train_loss)(w, lam), tnp.zeros(D))
            return val_loss(w)
        return outer

    out = {IMPLICIT: tg.grad(implicit)}
    for K in STEPS:
        out[f"tapegrad unrolled GD, K = {K}"] = tg.grad(unrolled(K))
    return out


def run(quick: bool = False):
    data = make_problem()
    s = np.array(S0)
    cands = contestants(*data)
    ref = exact_hypergradient(*data, S0)
    errors = {name: abs(float(fn(s)) - ref) / abs(ref) for name, fn in cands.items()}
    peaks = {name: peak_mib(lambda fn=fn: fn(s)) for name, fn in cands.items()}
    timings = interleaved({name: (lambda fn=fn: fn(s)) for name, fn in cands.items()},
                          repeat=3 if quick else 9, warmup=1, target_s=0.05 if quick else 0.2)
    ref_time, ref_peak = timings[IMPLICIT].best, peaks[IMPLICIT]
    return [{"bench": "implicit", "name": name, "best_ms": timings[name].best * 1e3,
             "median_ms": timings[name].median * 1e3, "time_ratio": timings[name].best / ref_time,
             "peak_mib": peaks[name], "peak_ratio": peaks[name] / ref_peak, "rel_err": errors[name],
             "grad_dtype": "float64"} for name in cands]


def table(results) -> str:
    rows = [[r["name"], f"{r['best_ms']:.2f}", f"{r['median_ms']:.2f}", f"{r['time_ratio']:.2f}x",
             f"{r['peak_mib']:.2f}", f"{r['peak_ratio']:.1f}x", f"{r['rel_err']:.1e}"] for r in results]
    title = f"implicit: d L_val / d log λ of a ridge fit, {N_TRAIN} x {D}"
    return format_table([title, "ms best", "ms median", "vs implicit", "peak MiB", "vs implicit", "rel err"], rows)


def compact_rows(results):
    return [["implicit", r["name"], f"{r['best_ms']:.2f} ms", f"{r['time_ratio']:.2f}x", "tg implicit",
             f"peak {r['peak_mib']:.2f} MiB ({r['peak_ratio']:.1f}x)", f"{r['rel_err']:.1e}", r["grad_dtype"]]
            for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    imp = by[IMPLICIT]
    parts = [f"K={name.rsplit(' ', 1)[1]}: time {r['time_ratio']:.2f}x, peak {r['peak_ratio']:.1f}x, "
             f"err {r['rel_err']:.0e}" for name, r in by.items() if name != IMPLICIT]
    return (f"implicit (reported, no target): implicit {imp['best_ms']:.1f} ms, {imp['peak_mib']:.2f} MiB, "
            f"err {imp['rel_err']:.0e}; unrolled over implicit: {'; '.join(parts)}")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
