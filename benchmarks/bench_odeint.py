"""``odeint``: ``tapegrad.scipy.integrate.odeint`` on the Lotka-Volterra model (``_lotka_volterra.py``:
``rhs``, ``Y0``, the 41 ``TIMES``, ``theta = TRUE``) at ``rtol = atol = 1e-8``, float64, in one process,
interleaved; the loss is ``sum(odeint(...))``.

Rows, with issue 38's targets:

- ``jit(grad)``: at most 2x JAX's ``jit(grad)`` of ``jax.experimental.ode.odeint`` (the same algorithm:
  the accepted steps of both forward solves are reported, and should be equal);
- eager ``grad``: at most 10x JAX's ``jit(grad)`` (the eager call runs odeint's own staged programs);
- the same eager ``grad`` with the compiled executor off (reported: the Python executor's programs);
- the eager forward solve: at most 0.1x SciPy's ``solve_ivp(method="RK45")`` at the same tolerances,
  with ``t_eval`` the same times (SciPy's accepted steps are those of its solve without ``t_eval``).

The "first call" note is the first call's time (staging, and numba compiling what it compiles);
``odeint_explain`` says which executor runs each program, and why.

Run alone: ``python benchmarks/bench_odeint.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
import scipy.integrate  # noqa: E402
from _lotka_volterra import TIMES, TRUE, Y0, jax_odeint_grad, jax_rhs, rhs  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy.integrate import odeint, odeint_explain  # noqa: E402
from tapegrad.scipy.integrate._odeint import _accepted_steps  # noqa: E402

TOL = dict(rtol=1e-8, atol=1e-8)
SPAN = (float(TIMES[0]), float(TIMES[-1]))
JIT_GRAD, EAGER_GRAD, OFF_GRAD = "tapegrad jit(grad(odeint))", "tapegrad grad(odeint), eager", \
    "tapegrad grad(odeint), eager, compiled executor off"
FORWARD, SCIPY, JAX = "tapegrad odeint, eager", "SciPy solve_ivp RK45", "JAX jit(grad(odeint))"
TARGETS = {JIT_GRAD: 2.0, EAGER_GRAD: 10.0, FORWARD: 0.1}  # the most time, in units of the row's reference
REFERENCE = {JIT_GRAD: JAX, EAGER_GRAD: JAX, OFF_GRAD: JAX, FORWARD: SCIPY, SCIPY: SCIPY, JAX: JAX}


def rhs_np(t, y, theta):
    a, b, d, g = theta
    return np.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def _loss(func):
    return lambda theta: tnp.sum(odeint(func, Y0, TIMES, theta, **TOL))


def _off(fn):
    """``fn`` whose programs are compiled with the compiled executor off: the switch, as it is at a
    program's first call, decides for that program for good."""
    previous = tg.config.compiled_executor
    tg.config.compiled_executor = False
    try:
        fn()
    finally:
        tg.config.compiled_executor = previous
    return fn


def contestants():
    """name -> zero-argument callable; and name -> the first call's seconds."""
    theta = np.array(TRUE)
    off_rhs = lambda y, t, th: rhs(y, t, th)  # noqa: E731  another function: programs of its own
    jit_grad, eager_grad, off_grad = tg.jit(tg.grad(_loss(rhs))), tg.grad(_loss(rhs)), tg.grad(_loss(off_rhs))
    out = {JIT_GRAD: lambda: jit_grad(theta), EAGER_GRAD: lambda: eager_grad(theta), OFF_GRAD: lambda: off_grad(theta),
           FORWARD: lambda: odeint(rhs, Y0, TIMES, theta, **TOL),
           SCIPY: lambda: scipy.integrate.solve_ivp(rhs_np, SPAN, Y0, method="RK45", t_eval=TIMES, args=(theta,),
                                                    **TOL)}
    reference = _jax_grad()
    if reference is not None:
        out[JAX] = reference
    first = {}
    for name, fn in out.items():
        start = time.perf_counter()
        _off(fn) if name == OFF_GRAD else fn()
        first[name] = time.perf_counter() - start
    return out, first


def _jax_grad():
    return jax_odeint_grad(**TOL)


def _jax_accepted_steps():
    """The steps JAX's forward solve accepts: ``jax.experimental.ode._odeint``'s loop with its own step
    functions (JAX does not report them), counting."""
    import jax
    from jax.experimental import ode
    func = lambda y, t: jax_rhs(y, t, TRUE)  # noqa: E731
    t, y, f = TIMES[0], Y0, func(Y0, TIMES[0])
    dt = ode.initial_step_size(func, t, y, 4, TOL["rtol"], TOL["atol"], f)
    step = jax.jit(lambda y, f, t, dt: ode.runge_kutta_step(func, y, f, t, dt))
    accepted = 0
    for target in TIMES[1:]:
        while t < target:
            next_y, next_f, error, _ = step(y, f, t, dt)
            ratio = ode.mean_error_ratio(error, TOL["rtol"], TOL["atol"], y, next_y)
            if ratio <= 1.0:
                accepted, y, f, t = accepted + 1, next_y, next_f, t + dt
            dt = ode.optimal_step_size(dt, ratio)
    return accepted


def steps() -> dict:
    """The accepted steps of each forward solve."""
    ours = _accepted_steps(rhs, Y0, TIMES, TRUE, **TOL)
    theirs = scipy.integrate.solve_ivp(rhs_np, SPAN, Y0, method="RK45", args=(TRUE,), **TOL)
    counts = {name: ours for name in (JIT_GRAD, EAGER_GRAD, OFF_GRAD, FORWARD)}
    counts[SCIPY] = len(theirs.t) - 1
    if "jax" in sys.modules:
        counts[JAX] = _jax_accepted_steps()
    return counts


def run(quick: bool = False):
    cands, first = contestants()
    timings = interleaved(cands, repeat=3 if quick else 7, warmup=2, target_s=0.05 if quick else 0.2)
    counts = steps()
    rows = []
    for name, timing in timings.items():
        base = timings.get(REFERENCE[name])
        rows.append({"bench": "odeint", "name": name, "best_ms": timing.best * 1e3,
                     "median_ms": timing.median * 1e3, "vs": REFERENCE[name],
                     "ratio": timing.best / base.best if base else float("nan"),
                     "steps": counts.get(name), "first_s": first[name], "target": TARGETS.get(name)})
    rows[0]["explain"] = odeint_explain(rhs, Y0, TIMES, TRUE, **TOL)
    return rows


def table(results) -> str:
    rows = [[r["name"], f"{r['best_ms']:.3f}", f"{r['median_ms']:.3f}", f"{r['ratio']:.3f}x {r['vs']}",
             "" if r["target"] is None else f"{r['target']}x {met(r['ratio'] <= r['target'])}",
             "" if r["steps"] is None else r["steps"], f"{r['first_s']:.2f}"] for r in results]
    title = f"odeint: Lotka-Volterra, {len(TIMES)} outputs, rtol = atol = 1e-8"
    text = format_table([title, "ms best", "ms median", "ratio", "target", "accepted steps", "first call s"],
                        rows)
    return text + "\n" + results[0]["explain"]


def compact_rows(results):
    return [["odeint", r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.3f}x", r["vs"],
             "" if r["steps"] is None else f"{r['steps']} steps", "", "float64"] for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    parts = [f"{name}: {by[name]['ratio']:.2f}x {REFERENCE[name]} (target {target}x) "
             f"{met(by[name]['ratio'] <= target)}" for name, target in TARGETS.items()
             if REFERENCE[name] in by]
    same = by[FORWARD]["steps"] == by[JAX]["steps"] if JAX in by else None
    steps_note = "no JAX" if same is None else \
        f"accepted steps {by[FORWARD]['steps']} vs JAX's {by[JAX]['steps']} ({'equal' if same else 'DIFFERENT'})"
    return "odeint " + "; ".join(parts) + f"; {steps_note}"


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
