"""``solve_ivp``: ``tapegrad.scipy.integrate.solve_ivp`` on the Lotka-Volterra model
(``_lotka_volterra.py``: ``rhs``, ``Y0``, the 41 ``TIMES`` as ``t_eval``, ``theta = TRUE``), RK45 at
``rtol = atol = 1e-8``, in one process, interleaved.

Rows:

- forward: ``jit`` of the solve against SciPy's ``solve_ivp(method="RK45")`` (target: at most 0.1x
  SciPy's time), with each solver's accepted steps (the length of ``t`` without ``t_eval``) and ``nfev``;
- gradient of ``sum(y)`` in ``theta``: ``jit(grad)`` with ``adjoint=False`` (through the steps) and
  ``adjoint=True``, against JAX's ``jit(grad)`` of ``jax.experimental.ode.odeint`` at the same
  tolerances (reported: issue 38's 2x target is set for ``odeint``; JAX does not report its steps).

Run alone: ``python benchmarks/bench_solve_ivp.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
import scipy.integrate  # noqa: E402
from _lotka_volterra import TIMES, TRUE, Y0, jax_odeint_grad, rhs  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy.integrate import solve_ivp  # noqa: E402

TOL = dict(rtol=1e-8, atol=1e-8)
SPAN = (float(TIMES[0]), float(TIMES[-1]))
FORWARD, SCIPY = "tapegrad jit(solve_ivp) RK45", "SciPy solve_ivp RK45"
DIRECT, ADJOINT, JAX = "tapegrad jit(grad), adjoint=False", "tapegrad jit(grad), adjoint=True", "JAX jit(grad(odeint))"
TARGET = 0.1  # the forward solve at most this fraction of SciPy's time


def fun(t, y, theta):
    return rhs(y, t, theta)


def fun_np(t, y, theta):
    a, b, d, g = theta
    return np.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def contestants():
    """name -> (zero-argument callable, its result's nfev or None, its accepted steps or None)."""
    def total(theta, adjoint):
        return tnp.sum(solve_ivp(fun, SPAN, Y0, t_eval=TIMES, args=(theta,), adjoint=adjoint, **TOL).y)

    forward = tg.jit(lambda theta: solve_ivp(fun, SPAN, Y0, t_eval=TIMES, args=(theta,), **TOL).y)
    grads = {name: tg.jit(tg.grad(lambda theta, a=adjoint: total(theta, a))) for name, adjoint in
             ((DIRECT, False), (ADJOINT, True))}
    out = {FORWARD: lambda: forward(TRUE),
           SCIPY: lambda: scipy.integrate.solve_ivp(fun_np, SPAN, Y0, t_eval=TIMES, args=(TRUE,), **TOL)}
    out.update({name: (lambda g=g: g(TRUE)) for name, g in grads.items()})
    reference = _jax_grad()
    if reference is not None:
        out[JAX] = reference
    return out


def _jax_grad():
    return jax_odeint_grad(**TOL)


def steps():
    """Accepted steps and nfev of both solvers (their solves without t_eval return every step)."""
    ours = solve_ivp(fun, SPAN, Y0, args=(TRUE,), **TOL)
    theirs = scipy.integrate.solve_ivp(fun_np, SPAN, Y0, args=(TRUE,), **TOL)
    return {FORWARD: (len(ours.t) - 1, int(ours.nfev)), SCIPY: (len(theirs.t) - 1, int(theirs.nfev))}


def run(quick: bool = False):
    cands = contestants()
    timings = interleaved(cands, repeat=3 if quick else 7, warmup=2, target_s=0.05 if quick else 0.2)
    counts = steps()
    ref = {FORWARD: SCIPY, SCIPY: SCIPY, DIRECT: JAX, ADJOINT: JAX, JAX: JAX}
    rows = []
    for name, timing in timings.items():
        base = timings.get(ref[name])
        rows.append({"bench": "solve_ivp", "name": name, "best_ms": timing.best * 1e3,
                     "median_ms": timing.median * 1e3, "vs": ref[name],
                     "ratio": timing.best / base.best if base else float("nan"),
                     "steps": counts.get(name, (None, None))[0], "nfev": counts.get(name, (None, None))[1]})
    return rows


def table(results) -> str:
    rows = [[r["name"], f"{r['best_ms']:.3f}", f"{r['median_ms']:.3f}", f"{r['ratio']:.3f}x {r['vs']}",
             "" if r["steps"] is None else r["steps"], "" if r["nfev"] is None else r["nfev"]] for r in results]
    title = f"solve_ivp: Lotka-Volterra, {len(TIMES)} outputs, RK45, rtol = atol = 1e-8"
    return format_table([title, "ms best", "ms median", "ratio", "accepted steps", "nfev"], rows)


def compact_rows(results):
    return [["solve_ivp", r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.3f}x", r["vs"],
             "" if r["steps"] is None else f"{r['steps']} steps", "", "float64"] for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    forward = by[FORWARD]
    same = forward["steps"] == by[SCIPY]["steps"]
    grads = "; ".join(f"{name}: {by[name]['ratio']:.3g}x JAX" for name in (DIRECT, ADJOINT) if JAX in by)
    return (f"solve_ivp forward at most {TARGET}x SciPy's RK45: {forward['ratio']:.3f}x "
            f"{met(forward['ratio'] <= TARGET)}; accepted steps {forward['steps']} vs SciPy's "
            f"{by[SCIPY]['steps']} ({'equal' if same else 'DIFFERENT'}); gradients (reported): {grads or 'no JAX'}")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
