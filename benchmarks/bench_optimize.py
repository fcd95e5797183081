"""``optimize``: ``tapegrad.scipy.optimize``'s solvers against SciPy's own fed a hand-jitted function (issue 38).

The wrappers hand SciPy the user's function and the derivatives its method uses, staged by ``jit``
once per (function, shapes) and cached on the function, ``args`` being traced inputs of the program.
The reference is what a user writes by hand for the same speed: SciPy's solver fed
``tg.jit(tg.value_and_grad(f))`` (``jac=True``), ``tg.jit(tg.hessian(f))``, ``tg.jit(tg.jacfwd(f))``
or ``tg.jit(f)``, made once and reused. Both sides run the same SciPy algorithm from the same start, so
they make the same evaluations (counted per row: ``nfev``/``njev``/``nhev`` as SciPy reports them;
``fixed_point`` reports none, so its calls are counted by wrapping the function SciPy gets); the
difference is the wrappers' own cost per solve (the argument checks, the host conversions, the implicit
derivative's set-up) and per evaluation. Target: each row at most 1.2x its reference.

Rows, all float64, all on ``benchmarks/_lotka_volterra.py``'s fit (``loss(theta, observed)``, its
residuals ``simulate(theta) - observed``, from ``START``) except ``fixed_point`` and ``root``:

- ``minimize`` with ``BFGS``, ``L-BFGS-B`` and ``Newton-CG`` (staged Hessian-vector products; the
  reference gets ``jit`` of ``tg.hvp`` as ``hessp``);
- ``least_squares`` (``trf``) of the residuals with their Jacobian (``jacfwd``);
- ``root_scalar`` (``newton``): the prey growth rate ``a`` where ``d loss / d a = 0``, the others at
  ``TRUE``, with ``fprime`` the second derivative;
- ``fixed_point`` (``del2``) of ``x = 0.5 tanh(W x) + b``, ``W`` a fixed 16 x 16 matrix of norm 1/2,
  and ``root`` (``hybr``) of the same equation, ``x - 0.5 tanh(W x) - b = 0``, with its Jacobian
  (``jacfwd``). The root of the fit's gradient is not a row: its Jacobian, the loss's Hessian, is a
  ``vmap``-ped program that ``jit`` runs on the Python executor today (issue 38's third item), 0.2 s a
  call, which would time that and not the wrapper.

What the wrappers cost, measured on the 2-core machine (2026-11-29, loaded): a few microseconds per
evaluation (the host function around the ``jit`` call: the reshape of ``x``, the conversion to floats),
beside ``jit``'s own 25-40 us per call of these small programs, and 50-90 us per solve (the argument
checks, the cached programs' look-up, the first calls' check that the program is reused, the result's
``executor``). A row whose whole solve takes under a millisecond (``root``: 12 evaluations of a
16-unknown system, 0.6 ms) shows that fixed cost as 1.2-1.3x; the rows of the fit, milliseconds to
tens of milliseconds a solve, do not.

Timed in one process, interleaved, after a warm-up solve each (the staging and numba's compile are
not in the rows: docs/jit.md's first-call numbers are). Run alone:
``python benchmarks/bench_optimize.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import _lotka_volterra as lv  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize as scipy_optimize  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy import optimize  # noqa: E402

TARGET = 1.2  # x SciPy fed the hand-jitted functions
N_FIXED = 16
_W = 0.5 * np.linalg.qr(np.random.default_rng(3).standard_normal((N_FIXED, N_FIXED)))[0]
_B = np.linspace(-1.0, 1.0, N_FIXED)


def residuals(theta, observed):
    return tnp.ravel(lv.simulate(theta) - observed)


def rate_gradient(a, observed):
    """``d loss / d a``, the prey growth rate, with the other rates at ``TRUE``."""
    return tg.grad(lambda a: lv.loss(tnp.stack([a, *lv.TRUE[1:]]), observed))(a)


def contraction(x, b):
    return 0.5 * tnp.tanh(_W @ x) + b


def fixed_point_equation(x, b):
    return x - contraction(x, b)


def _counts(res, keys=("nfev", "njev", "nhev")) -> str:
    return ", ".join(f"{k} {getattr(res, k)}" for k in keys if getattr(res, k, None) is not None)


def _calls_of_fixed_point(solve):
    """Run ``solve()`` with ``scipy.optimize.fixed_point`` counting the calls of the function it gets."""
    original, calls = scipy_optimize.fixed_point, [0]

    def counting(func, x0, args=(), **kwargs):
        def counted(x, *a):
            calls[0] += 1
            return func(x, *a)
        return original(counted, x0, args=args, **kwargs)
    scipy_optimize.fixed_point = counting
    try:
        x = solve()
    finally:
        scipy_optimize.fixed_point = original
    return x, calls[0]


def cases():
    """name -> (ours, reference, how to read (solution, counts, executor) from a result of each)."""
    observed = lv.data()
    vg = tg.jit(tg.value_and_grad(lv.loss))
    hessp = tg.jit(lambda x, p, obs: tg.hvp(lambda y: lv.loss(y, obs), (x,), (p,))[1][0])
    jit_equation, equation_jacobian = tg.jit(fixed_point_equation), tg.jit(tg.jacfwd(fixed_point_equation))
    jit_residuals, residual_jacobian = tg.jit(residuals), tg.jit(tg.jacfwd(residuals))
    jit_rate, rate_second = tg.jit(rate_gradient), tg.jit(tg.grad(rate_gradient))
    jit_contraction = tg.jit(contraction)
    start = lv.START
    out = {}
    for method in ("BFGS", "L-BFGS-B", "Newton-CG"):
        second = {"hessp": hessp} if method == "Newton-CG" else {}
        out[f"minimize {method}"] = (
            lambda method=method: optimize.minimize(lv.loss, start, args=(observed,), method=method),
            lambda method=method, second=second: scipy_optimize.minimize(vg, start, args=(observed,), jac=True,
                                                                         method=method, **second))
    out["root hybr"] = (lambda: optimize.root(fixed_point_equation, np.zeros(N_FIXED), args=(_B,)),
                        lambda: scipy_optimize.root(jit_equation, np.zeros(N_FIXED), args=(_B,), jac=equation_jacobian))
    out["least_squares trf"] = (
        lambda: optimize.least_squares(residuals, start, args=(observed,)),
        lambda: scipy_optimize.least_squares(jit_residuals, start, jac=residual_jacobian, args=(observed,)))
    out["root_scalar newton"] = (
        lambda: optimize.root_scalar(rate_gradient, args=(observed,), x0=1.0, method="newton"),
        lambda: scipy_optimize.root_scalar(lambda a, obs: float(jit_rate(np.float64(a), obs)), args=(observed,),
                                           x0=1.0, fprime=lambda a, obs: float(rate_second(np.float64(a), obs)),
                                           method="newton"))
    out["fixed_point del2"] = (lambda: optimize.fixed_point(contraction, np.zeros(N_FIXED), args=(_B,)),
                               lambda: scipy_optimize.fixed_point(jit_contraction, np.zeros(N_FIXED), args=(_B,)))
    return out


def _summary(name, ours, reference):
    """(our solution, the reference's, our counts, theirs, our executor) from one solve each."""
    if name.startswith("fixed_point"):
        (x, n), (y, m) = _calls_of_fixed_point(ours), _calls_of_fixed_point(reference)
        return np.asarray(x), np.asarray(y), f"calls {n}", f"calls {m}", "(not reported)"
    a, b = ours(), reference()
    if name.startswith("root_scalar"):
        keys = ("function_calls", "iterations")
        return np.asarray(a.root), np.asarray(b.root), _counts(a, keys), _counts(b, keys), a.executor
    return np.asarray(a.x), np.asarray(b.x), _counts(a), _counts(b), a.executor


def run(quick: bool = False):
    rows = []
    for name, (ours, reference) in cases().items():
        x, y, n_ours, n_ref, executor = _summary(name, ours, reference)  # also the warm-up: staged, compiled
        timings = interleaved({"ours": ours, "reference": reference}, repeat=3 if quick else 7, warmup=1,
                              target_s=0.05 if quick else 0.2)
        ratio = timings["ours"].best / timings["reference"].best
        rows.append({"bench": "optimize", "name": f"tapegrad.scipy.optimize.{name}",
                     "best_ms": timings["ours"].best * 1e3, "median_ms": timings["ours"].median * 1e3,
                     "ref_ms": timings["reference"].best * 1e3, "ratio": ratio, "evals": n_ours, "ref_evals": n_ref,
                     "executor": executor, "rel_err": float(np.max(np.abs(x - y)) / np.max(np.abs(y))),
                     "dtype": "float64"})
    return rows


def _ms(ms: float) -> str:
    return f"{ms:.2f} ms"


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["optimize", r["name"], _ms(r["best_ms"]), f"{r['ratio']:.2f}x", "scipy + hand jit",
             f"{r['evals']} ({'same' if r['evals'] == r['ref_evals'] else 'ref ' + r['ref_evals']}); "
             f"{r['executor']}", f"{r['rel_err']:.1e}", r["dtype"]] for r in results]


def table(results) -> str:
    headers = ["optimize: the Lotka-Volterra fit", "ms best", "ms ref", "vs ref", "evaluations", "ref evaluations",
               "executor", "rel err"]
    rows = [[r["name"], f"{r['best_ms']:.2f}", f"{r['ref_ms']:.2f}", f"{r['ratio']:.2f}x", r["evals"],
             r["ref_evals"], r["executor"], f"{r['rel_err']:.1e}"] for r in results]
    return format_table(headers, rows)


def verdict(results) -> str:
    lines = []
    for r in results:
        same = "same evaluations" if r["evals"] == r["ref_evals"] else \
            f"evaluations differ: {r['evals']} against {r['ref_evals']}"
        lines.append(f"optimize target {r['name']} <= {TARGET:g}x SciPy fed the hand-jitted functions: "
                     f"{met(r['ratio'] <= TARGET)} ({r['ratio']:.2f}x, {_ms(r['best_ms'])} against "
                     f"{_ms(r['ref_ms'])}; {same}; executor {r['executor']})")
    return "\n".join(lines)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
