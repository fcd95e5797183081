"""``control_flow``: loops staged as one operation (``tg.fori_loop``, ``tg.scan``) against unrolled Python
loops, hand-written NumPy, and the peers.

Two problems (issue 14):

- **ODE**: 1000 explicit Euler steps (dt = 0.01) of a damped oscillator, state ``(x, v)``, parameters
  ``(k, c)``: ``x += dt v``, ``v += dt (-k x - c v)``, float64 scalars. Two losses: the squared error of
  the final state against a fixed target (``fori_loop``), and the squared error of ``x`` against a fixed
  target trajectory observed every 10 steps (``scan``, whose ``ys`` are the positions). Contestants:
  ``jit(grad)`` of each (steady call, and the best of 3 fresh jit objects' first call beyond a steady one), the
  same loss as an unrolled Python loop under ``jit(grad)`` (first call only: it stages every step; 200
  steps with ``--quick``), eager ``grad`` of the ``fori_loop`` loss and of the Python loop, and the
  hand-written NumPy forward-and-backward loops, the floor.
- **RNN**: an Elman RNN, ``h = tanh(x_t Wx + h Wh + b)``, hidden 128, batch 32, input 64, 100 steps,
  float32, loss ``sum(h_t^2)`` over every step, written with ``scan``: ``jit(value_and_grad)`` against
  a hand-written NumPy forward and backward, PyTorch eager ``nn.RNN`` forward and backward (one thread)
  and JAX ``jit(value_and_grad)`` of ``lax.scan``, when installed.

Memory: peak ``tracemalloc`` MiB of one eager ``grad`` through a 1000-step ``scan`` of that RNN step
(hidden 128, batch 32, float32: one carry is 16 KiB), with and without ``tg.checkpoint`` around the
body. Without it, ``scan``'s reverse mode stores each step's residuals (here ``1 - h**2`` and the
carry that entered the step); with it, only the carries, and the backward pass recomputes each step:
the rows say what that saves and what it costs.

Targets (issue 14): first ``jit`` call <= 50 ms beyond a steady one; steady ``jit(grad)`` <= 2x the
NumPy loop; eager ``grad`` of ``fori_loop`` no slower than of the Python loop; the RNN's
``jit(value_and_grad)`` <= 1.0x PyTorch eager (when installed).

Run alone: ``python benchmarks/bench_control_flow.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import (  # noqa: E402
    apply_thread_flag,
    format_table,
    interleaved,
    met,
    one_torch_thread,
    standalone_main,
    try_import,
)

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
from bench_checkpoint import peak_mib  # noqa: E402  (after apply_thread_flag: these import NumPy)
from bench_mlp import first_call_ms  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

STEPS, DT, EVERY = 1000, 0.01, 10
UNROLLED_QUICK = 200
HIDDEN, BATCH, INPUT, RNN_STEPS, MEM_STEPS = 128, 32, 64, 100, 1000
FIRST_CALL_TARGET_MS, NUMPY_RATIO_TARGET, TORCH_RATIO_TARGET = 50.0, 2.0, 1.0
FIRST_CALLS = 3
FORI, SCAN, RNN = "tapegrad jit(grad) fori_loop", "tapegrad jit(grad) scan", "tapegrad jit(value_and_grad) scan"
EAGER_FORI, EAGER_PY = "tapegrad eager grad fori_loop", "tapegrad eager grad python loop"
ODE_NUMPY, RNN_NUMPY, TORCH = "numpy fwd+bwd loop (hand)", "numpy rnn fwd+bwd (hand)", "torch eager nn.RNN fwd+bwd"


# ---- ODE -----------------------------------------------------------------------------------------
def ode_problem():
    """``(k, c, x0, v0, final_target, trajectory_target)``: targets from other parameters (k=2, c=0.3)."""
    k, c = np.array(1.5), np.array(0.2)
    x0, v0 = np.array(1.0), np.array(0.0)
    xs, vs = numpy_forward(2.0, 0.3, 1.0, 0.0, STEPS)
    return k, c, x0, v0, np.array([xs[-1], vs[-1]]), xs[EVERY::EVERY].copy()


def euler_step(k, c, x, v):
    return x + DT * v, v + DT * (-k * x - c * v)


def loss_fori(k, c, x0, v0, target):
    x, v = tg.fori_loop(0, STEPS, lambda i, s: euler_step(k, c, *s), (x0, v0))
    return (x - target[0]) ** 2 + (v - target[1]) ** 2


def loss_scan(k, c, x0, v0, observed):
    def step(s, _):
        s = euler_step(k, c, *s)
        return s, s[0]
    _, xs = tg.scan(step, (x0, v0), None, length=STEPS)
    return tnp.sum((tnp.reshape(xs, (-1, EVERY))[:, -1] - observed) ** 2)


def make_loss_python(steps):
    def loss(k, c, x0, v0, target):
        x, v = x0, v0
        for _ in range(steps):
            x, v = euler_step(k, c, x, v)
        return (x - target[0]) ** 2 + (v - target[1]) ** 2
    return loss


def numpy_forward(k, c, x0, v0, steps):
    xs, vs = np.empty(steps + 1), np.empty(steps + 1)
    xs[0], vs[0] = x0, v0
    x, v = float(x0), float(v0)
    for n in range(steps):
        x, v = x + DT * v, v + DT * (-k * x - c * v)
        xs[n + 1], vs[n + 1] = x, v
    return xs, vs


def numpy_grad(k, c, x0, v0, target=None, observed=None):
    """d loss / d (k, c) by hand: forward keeping every state, backward through each Euler step."""
    k, c = float(k), float(c)
    xs, vs = numpy_forward(k, c, x0, v0, STEPS)
    gx, gv = (2 * (xs[-1] - target[0]), 2 * (vs[-1] - target[1])) if target is not None else (0.0, 0.0)
    gk = gc = 0.0
    for n in range(STEPS - 1, -1, -1):
        if observed is not None and (n + 1) % EVERY == 0:
            gx += 2 * (xs[n + 1] - observed[(n + 1) // EVERY - 1])
        gk -= gv * DT * xs[n]
        gc -= gv * DT * vs[n]
        gx, gv = gx - gv * DT * k, gx * DT + gv * (1 - DT * c)
    return np.array(gk), np.array(gc)


# ---- RNN -----------------------------------------------------------------------------------------
def rnn_problem(steps=RNN_STEPS, seed=0):
    rng = np.random.default_rng(seed)
    params = ((rng.standard_normal((INPUT, HIDDEN)) / np.sqrt(INPUT)).astype(np.float32),
              (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32),
              (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32))
    xs = rng.standard_normal((steps, BATCH, INPUT)).astype(np.float32)
    return params, xs, np.zeros((BATCH, HIDDEN), np.float32)


def rnn_step(params, h, x):
    Wx, Wh, b = params
    h = tnp.tanh(x @ Wx + h @ Wh + b)
    return h, h


def rnn_loss(params, xs, h0, step=rnn_step):
    _, hs = tg.scan(lambda h, x: step(params, h, x), h0, xs)
    return tnp.sum(hs * hs)


checkpointed_step = tg.checkpoint(rnn_step)


def rnn_loss_checkpointed(params, xs, h0):
    return rnn_loss(params, xs, h0, checkpointed_step)


def numpy_rnn(params, xs, h0):
    """(loss, (dWx, dWh, db)) by hand: keep every h, then ``tanh' = 1 - h^2`` backward."""
    Wx, Wh, b = params
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(x @ Wx + hs[-1] @ Wh + b))
    loss = sum(np.sum(h * h) for h in hs[1:])
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    carry = np.zeros_like(h0)
    for t in range(len(xs), 0, -1):
        h = hs[t]
        a = (2 * h + carry) * (1 - h * h)
        dWx += xs[t - 1].T @ a
        dWh += hs[t - 1].T @ a
        db += a.sum(axis=0)
        carry = a @ Wh.T
    return loss, (dWx, dWh, db)


def make_torch(torch, params):
    Wx, Wh, b = params
    rnn = torch.nn.RNN(INPUT, HIDDEN, nonlinearity="tanh")
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.from_numpy(Wx.T.copy()))
        rnn.weight_hh_l0.copy_(torch.from_numpy(Wh.T.copy()))
        rnn.bias_ih_l0.copy_(torch.from_numpy(b))
        rnn.bias_hh_l0.zero_()

    def value_and_grad(params, xs, h0):
        rnn.zero_grad()
        hs, _ = rnn(torch.from_numpy(xs), torch.from_numpy(h0)[None])
        loss = (hs * hs).sum()
        loss.backward()
        return loss.item(), (rnn.weight_ih_l0.grad.numpy().T, rnn.weight_hh_l0.grad.numpy().T,
                             rnn.bias_ih_l0.grad.numpy())
    return value_and_grad


def make_jax(jax):
    jnp = jax.numpy

    def loss(params, xs, h0):
        Wx, Wh, b = params

        def step(h, x):
            h = jnp.tanh(x @ Wx + h @ Wh + b)
            return h, h
        _, hs = jax.lax.scan(step, h0, xs)
        return jnp.sum(hs * hs)
    fn = jax.jit(jax.value_and_grad(loss))
    return lambda params, xs, h0: jax.block_until_ready(fn(params, xs, h0))


def rel_err(got, ref) -> float:
    """Worst per-leaf max |got - ref| / max |ref|."""
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(r, np.float64))) /
                     np.max(np.abs(np.asarray(r, np.float64)))) for g, r in zip(got, ref))


# ---- run -----------------------------------------------------------------------------------------
def _row(name, kind, ms, ratio=None, to="", err=None, note="", dtype=""):
    return {"bench": "control_flow", "name": name, "kind": kind, "best_ms": ms, "ratio": ratio, "to": to,
            "rel_err": err, "note": note, "dtype": dtype}


def run_ode(quick):
    k, c, x0, v0, target, observed = ode_problem()
    make_fori = lambda: tg.jit(tg.grad(loss_fori, (0, 1)))  # noqa: E731
    make_scan = lambda: tg.jit(tg.grad(loss_scan, (0, 1)))  # noqa: E731
    python_loss = make_loss_python(STEPS)
    cands = {FORI: (make_fori(), target), SCAN: (make_scan(), observed),
             EAGER_FORI: (tg.grad(loss_fori, (0, 1)), target),
             EAGER_PY: (tg.grad(python_loss, (0, 1)), target),
             ODE_NUMPY: (lambda k, c, x0, v0, t: numpy_grad(k, c, x0, v0, target=t), target),
             "numpy fwd+bwd loop (hand), observed": (
                 lambda k, c, x0, v0, o: numpy_grad(k, c, x0, v0, observed=o), observed)}
    ref_final = numpy_grad(k, c, x0, v0, target=target)
    ref_obs = numpy_grad(k, c, x0, v0, observed=observed)
    errs = {name: rel_err(fn(k, c, x0, v0, t), ref_obs if t is observed else ref_final)
            for name, (fn, t) in cands.items()}
    timings = interleaved({name: (lambda fn=fn, t=t: fn(k, c, x0, v0, t)) for name, (fn, t) in cands.items()},
                          repeat=2 if quick else 5, warmup=1, target_s=0.05 if quick else 0.2)
    best = {name: t.best * 1e3 for name, t in timings.items()}
    rows = []
    for name in (FORI, SCAN):
        floor = ODE_NUMPY if name == FORI else "numpy fwd+bwd loop (hand), observed"
        rows.append(_row(name, "steady", best[name], best[name] / best[floor], "numpy loop", errs[name],
                         dtype="float64"))
    for name in (EAGER_FORI, EAGER_PY):
        rows.append(_row(name, "eager", best[name], best[name] / best[EAGER_PY], "eager python loop", errs[name],
                         dtype="float64"))
    for name in (ODE_NUMPY, "numpy fwd+bwd loop (hand), observed"):
        rows.append(_row(name, "floor", best[name], 1.0, "itself", errs[name], dtype="float64"))
    args_f, args_o = (k, c, x0, v0, target), (k, c, x0, v0, observed)
    rows.append(_row("tapegrad jit first call fori_loop", "first_call",
                     first_call_ms(make_fori, args_f, best[FORI] / 1e3, FIRST_CALLS)[0], note=f"{STEPS} steps"))
    rows.append(_row("tapegrad jit first call scan", "first_call",
                     first_call_ms(make_scan, args_o, best[SCAN] / 1e3, FIRST_CALLS)[0], note=f"{STEPS} steps"))
    unrolled = UNROLLED_QUICK if quick else STEPS
    unrolled_loss = make_loss_python(unrolled)
    fn = tg.jit(tg.grad(unrolled_loss, (0, 1)))
    t0 = time.perf_counter()
    fn(*args_f)
    first = time.perf_counter() - t0
    steady = min(_timed(fn, args_f) for _ in range(3))
    rows.append(_row("tapegrad jit first call python loop (unrolled)", "first_call", (first - steady) * 1e3,
                     note=f"{unrolled} steps, steady {steady * 1e3:.1f} ms"))
    return rows


def _timed(fn, args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def run_rnn(quick):
    params, xs, h0 = rnn_problem()
    cands = {RNN: tg.jit(tg.value_and_grad(rnn_loss)), RNN_NUMPY: numpy_rnn}
    torch = try_import("torch")
    if torch is not None:
        cands[TORCH] = make_torch(torch, params)
    jax = try_import("jax")
    if jax is not None:
        cands["jax jit(value_and_grad) lax.scan"] = make_jax(jax)
    restore = one_torch_thread()
    try:
        ref = numpy_rnn(params, xs, h0)[1]
        errs = {name: rel_err(fn(params, xs, h0)[1], ref) for name, fn in cands.items()}
        dtypes = {name: str(np.asarray(fn(params, xs, h0)[1][0]).dtype) for name, fn in cands.items()}
        timings = interleaved({name: (lambda fn=fn: fn(params, xs, h0)) for name, fn in cands.items()},
                              repeat=2 if quick else 7, target_s=0.05 if quick else 0.2)
    finally:
        restore()
    peer = TORCH if TORCH in cands else RNN_NUMPY
    best = {name: t.best * 1e3 for name, t in timings.items()}
    return [_row(name, "rnn", best[name], best[name] / best[peer], "torch" if peer == TORCH else "numpy",
                 errs[name], dtype=dtypes[name]) for name in cands]


def run_memory(quick):
    params, xs, h0 = rnn_problem(MEM_STEPS, seed=1)
    cands = {"tapegrad grad scan 1000 steps": tg.grad(rnn_loss),
             "tapegrad grad scan 1000 steps, checkpoint body": tg.grad(rnn_loss_checkpointed)}
    ref = cands["tapegrad grad scan 1000 steps"](params, xs, h0)
    rows = []
    timings = interleaved({name: (lambda fn=fn: fn(params, xs, h0)) for name, fn in cands.items()},
                          repeat=1 if quick else 3, warmup=1, number=1)
    for name, fn in cands.items():
        peak = peak_mib(lambda fn=fn: fn(params, xs, h0))
        rows.append(_row(name, "memory", timings[name].best * 1e3, err=rel_err(fn(params, xs, h0), ref),
                         note=f"peak {peak:.1f} MiB", dtype="float32"))
        rows[-1]["peak_mib"] = peak
    plain = rows[0]
    for r in rows:
        r["ratio"], r["to"] = r["best_ms"] / plain["best_ms"], "tg grad scan"
    return rows


def run(quick: bool = False):
    return run_ode(quick) + run_rnn(quick) + run_memory(quick)


def _ms(ms) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["control_flow", r["name"], _ms(r["best_ms"]), "" if r["ratio"] is None else f"{r['ratio']:.2f}x",
             r["to"], r["note"], "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["dtype"]]
            for r in results]


def table(results) -> str:
    headers = [f"control_flow: Euler ODE {STEPS} steps, RNN h{HIDDEN} b{BATCH} {RNN_STEPS} steps", "time (best)",
               "ratio", "to", "note", "rel err", "dtype"]
    return format_table(headers, [row[1:] for row in compact_rows(results)])


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    lines = []
    for loop in ("fori_loop", "scan"):
        first = by[f"tapegrad jit first call {loop}"]["best_ms"]
        steady = by[f"tapegrad jit(grad) {loop}"]
        lines.append(f"control_flow target jit(grad) {loop} first call <= {FIRST_CALL_TARGET_MS:.0f} ms beyond "
                     f"steady: {met(first <= FIRST_CALL_TARGET_MS)} ({first:.1f} ms; unrolled python loop "
                     f"{by['tapegrad jit first call python loop (unrolled)']['best_ms']:.0f} ms, "
                     f"{by['tapegrad jit first call python loop (unrolled)']['note']})")
        lines.append(f"control_flow target jit(grad) {loop} steady <= {NUMPY_RATIO_TARGET:.0f}x numpy loop: "
                     f"{met(steady['ratio'] <= NUMPY_RATIO_TARGET)} ({steady['ratio']:.2f}x, "
                     f"{steady['best_ms']:.2f} ms)")
    eager = by[EAGER_FORI]
    lines.append(f"control_flow target eager grad fori_loop <= eager python loop: {met(eager['ratio'] <= 1.0)} "
                 f"({eager['ratio']:.2f}x)")
    rnn = by[RNN]
    if TORCH in by:
        lines.append(f"control_flow target rnn jit(value_and_grad) scan <= {TORCH_RATIO_TARGET:.1f}x torch eager: "
                     f"{met(rnn['ratio'] <= TORCH_RATIO_TARGET)} ({rnn['ratio']:.2f}x)")
    else:
        lines.append(f"control_flow rnn vs torch eager: not measured (torch not installed); "
                     f"{rnn['best_ms'] / by[RNN_NUMPY]['best_ms']:.2f}x the numpy hand-written loop")
    mem = [r for r in results if r["kind"] == "memory"]
    lines.append(f"control_flow memory (reported, no target) grad through {MEM_STEPS}-step scan: peak "
                 f"{mem[0]['peak_mib']:.1f} MiB plain, {mem[1]['peak_mib']:.1f} MiB with checkpoint body "
                 f"(time {mem[1]['ratio']:.2f}x)")
    return "\n".join(lines)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
