"""``native``: jit's compiled executor (numba, issue 32) against the Python executor and hand-written NumPy.

``tg.config.compiled_executor`` (default on where numba imports) lets ``jit`` compile a program whose
primitives all have a lowering into one native function with numba; other programs keep the Python
executor. ``jit(f).executor(*args)`` says which one a program got (``"numba"``, ``"python"``, or
``"python+numba"`` when only its loops compiled). A ``jit`` object keeps its compiled program per
argument signature, so each contestant below is a fresh ``jit`` made, and called once, with the switch
set; the switch is put back afterwards. Everything is timed in this one process, interleaved.

- **Vector ODE**: the gradient with respect to ``(k, c)`` of 1000 explicit Euler steps (dt = 0.01) of a
  damped oscillator with a 2-vector state, ``y = y + dt * stack([y[1], -k y[0] - c y[1]])``, the loss
  ``sum(y * y)`` accumulated over the steps, float64, as ``jit(grad)`` of a ``fori_loop``: compiled
  executor on and off, against a hand-written NumPy forward keeping every state and adjoint loop.
  Target: ``jit(grad)`` with the compiled executor <= 0.2x the NumPy loops.
- **Scalar ODE**: ``bench_control_flow``'s ``fori_loop`` loss (the same oscillator with scalar state, the
  squared error of the final state) under ``jit(grad)``, on and off, against its hand-written NumPy loop;
  its target stays ``bench_control_flow``'s (<= 2x the NumPy loop), here with the compiled executor on.
- **RNN, chain, mlp**: ``bench_control_flow``'s RNN ``scan`` under ``jit(value_and_grad)``,
  ``bench_chain``'s chain under ``jit(grad)`` and ``bench_mlp``'s MLP under ``jit(value_and_grad)``, each
  with the compiled executor on and off. Target: on/off <= 1.0 (no slower: two runs of the same code
  differ by a few percent, so up to 1.05 counts as no slower), and below 1.0 where the program compiled.
- **First call** (each a fresh Python process importing this tree's ``tapegrad``, ``TAPEGRAD_NUMBA_CACHE_DIR``
  a new temporary folder): a first process with the folder empty (cold), then a second one on the same
  folder (warm). Each times ``import numpy``, ``import tapegrad`` on top of it, ``import numba``, the first
  call of a fresh ``jit(grad)`` of the vector ODE (staging, the passes, numba compiling it or loading it
  from the folder, one run), and then the first call of a second program (the ODE of ``SECOND_STEPS``
  steps), numba being loaded by then: what tapegrad and numba's compiler cost beyond numba's start-up in
  a process. Targets: ``import numba`` + the first call <= 2 s cold and <= 0.1 s warm. The best of
  ``FIRST_CALL_PAIRS`` cold/warm pairs (1 with ``--quick``).

The other benchmark modules are imported inside the functions that use them, not at the top: a
first-call process imports this module for the ODE's loss, and must not get ``tapegrad.scipy`` (the
MLP's ``logsumexp``) or the other benchmarks' programs loaded for free.

Skipped, with a message, where numba does not import. Run alone:
``python benchmarks/bench_native.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import apply_thread_flag, format_table, interleaved, met, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

MISSING = [] if importlib.util.find_spec("numba") else ["numba"]
INSTALL = "pip install numba"  # run.py's hint when MISSING
DT, STEPS, SECOND_STEPS = 0.01, 1000, 500
VECTOR_TARGET, SCALAR_TARGET = 0.2, 2.0  # x the hand-written NumPy loops (the scalar one: bench_control_flow's)
NO_SLOWER, NO_SLOWER_SLACK = 1.0, 1.05  # on/off; the slack: the noise of two runs of the same code
COLD_TARGET_S, WARM_TARGET_S = 2.0, 0.1
FIRST_CALL_PAIRS = 3
ON, OFF = "compiled executor on", "compiled executor off"
VECTOR_NUMPY, SCALAR_NUMPY = "numpy fwd+adjoint loop (hand), vector ODE", "numpy fwd+bwd loop (hand), scalar ODE"


# ---- the vector ODE ------------------------------------------------------------------------------
def make_vector_loss(steps: int = STEPS):
    """The loss of ``steps`` Euler steps of the damped oscillator, state ``y`` a 2-vector, ``sum(y * y)``
    accumulated over the steps."""
    def loss(k, c, y0):
        def body(i, s):
            y, acc = s
            y = y + DT * tnp.stack([y[1], -k * y[0] - c * y[1]])
            return y, acc + tnp.sum(y * y)
        _, acc = tg.fori_loop(0, steps, body, (y0, 0.0 * k))
        return acc
    return loss


def vector_args():
    """``(k, c, y0)``, float64."""
    return np.array(1.5), np.array(0.2), np.array([1.0, 0.0])


def make_vector_jit(steps: int = STEPS):
    return tg.jit(tg.grad(make_vector_loss(steps), grad_position=(0, 1)))


def numpy_vector_grad(k, c, y0, steps: int = STEPS):
    """d loss / d (k, c) by hand: forward keeping every state, adjoint backward through each step."""
    k, c = float(k), float(c)
    ys = np.empty((steps + 1, 2))
    ys[0] = y0
    for n in range(steps):
        y = ys[n]
        ys[n + 1] = y + DT * np.array([y[1], -k * y[0] - c * y[1]])
    g, gk, gc = np.zeros(2), 0.0, 0.0
    for n in range(steps - 1, -1, -1):
        g = g + 2 * ys[n + 1]  # d acc / d y_{n+1}
        y = ys[n]
        gk -= g[1] * DT * y[0]
        gc -= g[1] * DT * y[1]
        g = np.array([g[0] - g[1] * DT * k, g[1] + DT * g[0] - g[1] * DT * c])
    return np.array(gk), np.array(gc)


# ---- contestants ---------------------------------------------------------------------------------
def with_executor(on: bool, make, args):
    """``(fn, executor)``: ``make()``'s fresh jitted function with ``tg.config.compiled_executor = on``,
    called once (its program staged and compiled; numba compiles at the first call) and which executor
    runs it; the switch is put back."""
    previous = tg.config.compiled_executor
    tg.config.compiled_executor = on
    try:
        fn = make()
        fn(*args)
        return fn, fn.executor(*args)
    finally:
        tg.config.compiled_executor = previous


def _row(name, kind, ms, ratio=None, to="", err=None, note="", dtype="", executor=""):
    return {"bench": "native", "name": name, "kind": kind, "best_ms": ms, "ratio": ratio, "to": to,
            "rel_err": err, "note": note, "dtype": dtype, "executor": executor}


def _dtype(leaves) -> str:
    return "/".join(sorted({str(np.asarray(g).dtype) for g in leaves}))


def _timed(cands, quick, target_s):
    """name -> best ms of each zero-argument callable in ``cands``, interleaved."""
    timings = interleaved(cands, repeat=3 if quick else 9, warmup=1 if quick else 3,
                          target_s=target_s / 4 if quick else target_s)
    return {name: t.best * 1e3 for name, t in timings.items()}


def run_ode(quick):
    """The vector ODE and the scalar ODE: the compiled executor on and off, and the NumPy loops."""
    import bench_control_flow as cf
    rows = []
    problems = {
        "vector ODE": (make_vector_jit, vector_args(), numpy_vector_grad, VECTOR_NUMPY, VECTOR_TARGET),
        "scalar ODE": (lambda: tg.jit(tg.grad(cf.loss_fori, (0, 1))), cf.ode_problem()[:5],
                       lambda k, c, x0, v0, t: cf.numpy_grad(k, c, x0, v0, target=t), SCALAR_NUMPY, SCALAR_TARGET),
    }
    for kind, (make, args, numpy_grad, numpy_name, _) in problems.items():
        ref = numpy_grad(*args)
        cands, executors = {}, {}
        for on, label in ((True, ON), (False, OFF)):
            name = f"tapegrad jit(grad) fori_loop {kind}, {label}"
            cands[name], executors[name] = with_executor(on, make, args)
        cands[numpy_name], executors[numpy_name] = numpy_grad, ""
        errs = {name: cf.rel_err(fn(*args), ref) for name, fn in cands.items()}
        best = _timed({name: (lambda fn=fn, args=args: fn(*args)) for name, fn in cands.items()}, quick, 0.2)
        for name in cands:
            rows.append(_row(name, kind, best[name], best[name] / best[numpy_name], "numpy loop", errs[name],
                             f"executor {executors[name]}" if executors[name] else "", "float64", executors[name]))
    return rows


def _on_off(kind, make, args, reference, leaves, quick, target_s, note=None):
    """Two rows, ``make()``'s jitted function with the compiled executor on and off, timed interleaved;
    ratio on/off. ``leaves(result)``: the gradient's arrays, compared with ``leaves(reference)``."""
    import bench_control_flow as cf
    cands, executors = {}, {}
    for on, label in ((True, ON), (False, OFF)):
        name = f"tapegrad {kind}, {label}"
        cands[name], executors[name] = with_executor(on, make, args)
    ref = leaves(reference)
    outs = {name: leaves(fn(*args)) for name, fn in cands.items()}
    best = _timed({name: (lambda fn=fn: fn(*args)) for name, fn in cands.items()}, quick, target_s)
    off = best[f"tapegrad {kind}, {OFF}"]
    return [_row(name, kind, best[name], best[name] / off, "executor off", cf.rel_err(outs[name], ref),
                 f"executor {executors[name]}" + (f", {note(best[name])}" if note else ""), _dtype(outs[name]),
                 executors[name]) for name in cands]


def run_on_off(quick):
    """The RNN scan, the chain and the MLP: the compiled executor on against off."""
    import bench_chain
    import bench_control_flow as cf
    import bench_mlp
    params, xs, h0 = cf.rnn_problem()
    rows = _on_off("jit(value_and_grad) rnn scan", lambda: tg.jit(tg.value_and_grad(cf.rnn_loss)),
                   (params, xs, h0), cf.numpy_rnn(params, xs, h0), lambda r: list(r[1]), quick, 0.2)
    x = bench_chain.make_input()
    rows += _on_off("jit(grad) chain", lambda: tg.jit(tg.grad(bench_chain.chain_tnp)), (x,),
                    bench_chain.chain_np_grad(x), lambda g: [g], quick, 0.1,
                    note=lambda ms: f"{ms * 1e3 / bench_chain.N_PRIMS:.2f} us/op")
    problem = bench_mlp.make_problem()
    rows += _on_off("jit(value_and_grad) mlp", bench_mlp.make_tapegrad_jit, problem,
                    bench_mlp.numpy_value_and_grad(*problem), lambda r: bench_mlp._leaves(r[1]), quick, 0.3)
    return rows


# ---- first call, fresh processes -----------------------------------------------------------------
# One fresh process: the imports, then the first call of two programs (ms, as one line of JSON).
_CHILD = """
import json, sys, time
{prelude}
sys.path.insert(0, {here!r})
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import tapegrad as tg
t2 = time.perf_counter()
import numba
t3 = time.perf_counter()
import bench_native as bn
args = bn.vector_args()
first, second = bn.make_vector_jit(bn.STEPS), bn.make_vector_jit(bn.SECOND_STEPS)
t4 = time.perf_counter()
first(*args)
t5 = time.perf_counter()
second(*args)
t6 = time.perf_counter()
ms = lambda start, end: (end - start) * 1e3
print(json.dumps({{"import_numpy": ms(t0, t1), "import_tapegrad": ms(t1, t2), "import_numba": ms(t2, t3),
                  "first_call": ms(t4, t5), "second_program": ms(t5, t6),
                  "executor": first.executor(*args), "second_executor": second.executor(*args),
                  "tapegrad": tg.__file__}}))
"""


def _child(code: str, cache_dir: str) -> dict:
    env = dict(os.environ, TAPEGRAD_NUMBA_CACHE_DIR=cache_dir, TAPEGRAD_COMPILED_EXECUTOR="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"first-call process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_calls(pairs: int) -> dict:
    """``{"cold": [...], "warm": [...]}``: one dict of milliseconds per process (``_CHILD``), ``pairs`` times
    a cold process on a new cache folder followed by a warm one on the same folder."""
    import bench_import  # its prelude: this process's tapegrad first on the path, bytecode compiled
    code = _CHILD.format(prelude=bench_import._PRELUDE.format(src=bench_import._tapegrad_src()), here=HERE)
    runs = {"cold": [], "warm": []}
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(prefix="tapegrad-numba-") as cache_dir:
            runs["cold"].append(_child(code, cache_dir))
            runs["warm"].append(_child(code, cache_dir))
    return runs


def run_first_call(quick):
    runs = first_calls(1 if quick else FIRST_CALL_PAIRS)
    rows = []
    for cache, procs in runs.items():
        best = {key: min(p[key] for p in procs) for key in procs[0] if key not in ("executor", "second_executor",
                                                                                    "tapegrad")}
        total = min(p["import_numba"] + p["first_call"] for p in procs)
        executor, second = procs[0]["executor"], procs[0]["second_executor"]
        row = _row(f"tapegrad vector ODE jit(grad) first call, {cache} cache: import numba + call", "first_call",
                   total, note=f"import numba {best['import_numba']:.0f} ms, call {best['first_call']:.0f} ms; "
                   f"import tapegrad {best['import_tapegrad']:.0f} ms; best of {len(procs)}", executor=executor)
        row.update({f"{key}_ms": value for key, value in best.items()})
        rows.append(row)
        rows.append(_row(f"tapegrad vector ODE jit(grad) first call, {cache} cache: 2nd program, numba loaded",
                         "first_call", best["second_program"], note=f"{SECOND_STEPS} steps; best of {len(procs)}",
                         executor=second))
    return rows


# ---- run -----------------------------------------------------------------------------------------
def run(quick: bool = False):
    if MISSING:
        raise ImportError(f"bench_native needs {', '.join(MISSING)} ({INSTALL})")
    return run_ode(quick) + run_on_off(quick) + run_first_call(quick)


def _ms(ms) -> str:
    if ms >= 1000:
        return f"{ms / 1e3:.2f} s"
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms"


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["native", r["name"], _ms(r["best_ms"]), "" if r["ratio"] is None else f"{r['ratio']:.3f}x",
             r["to"], r["note"], "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["dtype"]]
            for r in results]


def table(results) -> str:
    headers = ["native: jit's compiled executor (numba)", "time (best)", "ratio", "to", "note", "rel err", "dtype"]
    return format_table(headers, [row[1:] for row in compact_rows(results)])


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    lines = []
    for kind, target in (("vector ODE", VECTOR_TARGET), ("scalar ODE", SCALAR_TARGET)):
        on, off = (by[f"tapegrad jit(grad) fori_loop {kind}, {label}"] for label in (ON, OFF))
        lines.append(f"native target {kind} jit(grad) fori_loop, compiled executor on, <= {target:g}x numpy loop: "
                     f"{met(on['ratio'] <= target)} ({on['ratio']:.3f}x, {_ms(on['best_ms'])}, executor "
                     f"{on['executor']}; executor off {off['ratio']:.2f}x, {_ms(off['best_ms'])})")
    for kind in ("jit(value_and_grad) rnn scan", "jit(grad) chain", "jit(value_and_grad) mlp"):
        on = by[f"tapegrad {kind}, {ON}"]
        compiled = "numba" in on["executor"]
        ok = on["ratio"] < NO_SLOWER if compiled else on["ratio"] <= NO_SLOWER_SLACK
        want = f"< {NO_SLOWER:.1f} (compiled)" if compiled else f"<= {NO_SLOWER:.1f} (no slower; up to " \
                                                                f"{NO_SLOWER_SLACK:.2f} is noise)"
        lines.append(f"native target {kind} executor on/off {want}: {met(ok)} ({on['ratio']:.3f}x, executor "
                     f"{on['executor']}, {_ms(on['best_ms'])})")
    for cache, target in (("cold", COLD_TARGET_S), ("warm", WARM_TARGET_S)):
        r = by[f"tapegrad vector ODE jit(grad) first call, {cache} cache: import numba + call"]
        second = by[f"tapegrad vector ODE jit(grad) first call, {cache} cache: 2nd program, numba loaded"]
        lines.append(f"native target first call, {cache} cache, fresh process (import numba + first call) <= "
                     f"{_ms(target * 1e3)}: {met(r['best_ms'] <= target * 1e3)} ({_ms(r['best_ms'])}: "
                     f"{r['note']}; executor {r['executor']}; a 2nd program's first call, numba loaded: "
                     f"{_ms(second['best_ms'])})")
    return "\n".join(lines)


def main(argv=None):
    if MISSING:
        print(f"native: skipped, {', '.join(MISSING)} not installed ({INSTALL})")
        return []
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
