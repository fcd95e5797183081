"""``mlp``: reverse mode where the arrays are big enough that NumPy's kernels dominate.

A 784-512-512-10 ReLU MLP with mean softmax cross-entropy on integer labels, batch 128, float32.
The parameters are a list of ``(W, b)`` pairs passed at ``grad_position=0`` to
``tapegrad.value_and_grad``; the model is written with ``tapegrad.numpy``: ReLU is
``tapegrad.nn.functional.relu`` when that exists, else ``tnp.maximum(h, 0.0)``; the log-softmax uses
``tapegrad.scipy.special.logsumexp``; the labels are gathered with ``tnp.take_along_axis``.

Baseline: a hand-written NumPy forward and backward (matmuls, a ReLU mask, the softmax-minus-one-hot
gradient), the best straightforward NumPy we know how to write (no gradient for the input batch).

Reported: tapegrad / NumPy (target <= 1.2x); ``tapegrad.jit(tapegrad.value_and_grad(...))`` / NumPy
(target <= 1.0x, issue 5); tapegrad's grad/forward ratio (``value_and_grad`` time over the same
function run forward only on plain arrays); autograd's, PyTorch eager's and ``jax.jit``'s ratios to NumPy
(each when installed; JAX's inputs are put on its device once and its results waited for); each
gradient's max relative error against NumPy's (max abs difference over max abs value, per leaf, worst
leaf) and its dtype (must stay float32).

First-call cost of ``jit`` (target <= 25 ms, issue 5): a fresh ``jit`` object's first call (staging the
program, the passes, compiling it, and one run) minus the steady-state call; the best and the median of
``FIRST_CALLS`` fresh objects, after the timed runs (so the process is warm: imports, optree
registrations, caches shared between programs). The staging alone is timed with
``tapegrad.make_program``. JAX's first call is measured the same way, for scale. Once more in a new
Python process (best of 3 processes): the first jit call a script makes, with every lazy import and
shared cache still cold.

Run alone: ``python benchmarks/bench_mlp.py [--quick] [--threads N]`` (``--threads 1``: single-threaded
BLAS, much steadier on a small shared machine).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
from bench_chain import on_device  # noqa: E402  (after apply_thread_flag: bench_chain imports NumPy)

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.scipy.special import logsumexp  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128
TARGET_RATIO = 1.2
JIT_TARGET_RATIO = 1.0
FIRST_CALL_TARGET_MS = 25.0
FIRST_CALLS = 5
REF = "numpy fwd+bwd (hand)"
EAGER = "tapegrad value_and_grad"
JIT = "tapegrad jit(value_and_grad)"
FORWARD = "tapegrad forward only"


def make_problem(seed: int = 0, sizes=SIZES, batch: int = BATCH):
    """``(params, x, labels)``: He-initialised float32 weights, a float32 batch, int64 labels (``bench_gpu``
    asks for other ``sizes`` and ``batch``)."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        W = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(fan_out) * 0.01).astype(np.float32)
        params.append((W, b))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], size=batch)
    return params, x, labels


# ---- tapegrad ------------------------------------------------------------------------------------
def _relu_impl():
    """``tapegrad.nn.functional.relu`` if a colleague has added it, else ``maximum(h, 0)``."""
    functional = try_import("tapegrad.nn.functional")
    relu = getattr(functional, "relu", None) if functional is not None else None
    if relu is not None:
        return relu, "tapegrad.nn.functional.relu"
    return (lambda h: tnp.maximum(h, 0.0)), "tnp.maximum(h, 0.0)"


relu, RELU_NAME = _relu_impl()


def loss_tnp(params, x, labels):
    h = x
    for W, b in params[:-1]:
        h = relu(tnp.matmul(h, W) + b)
    W, b = params[-1]
    logits = tnp.matmul(h, W) + b
    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    picked = tnp.take_along_axis(logp, labels[:, None], axis=1)
    return -tnp.mean(picked)


tapegrad_value_and_grad = tg.value_and_grad(loss_tnp, grad_position=0)


def make_tapegrad_jit():
    """A fresh ``jit(value_and_grad)``: a new jit object has an empty cache (the first call stages)."""
    return tg.jit(tg.value_and_grad(loss_tnp, grad_position=0))


# ---- hand-written NumPy --------------------------------------------------------------------------
def numpy_value_and_grad(params, x, labels):
    """Forward keeping the activations, then the chain rule by hand; no gradient for ``x``.

    In-place where it is free (bias add, ReLU, scaling); the ReLU mask is recomputed from the
    stored activation (``h > 0``), which is where the pre-activation was positive.
    """
    acts = [x]
    h = x
    for W, b in params[:-1]:
        h = h @ W
        h += b
        np.maximum(h, 0, out=h)
        acts.append(h)
    W, b = params[-1]
    logits = h @ W
    logits += b
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = np.mean(np.log(s[:, 0]) - logits[rows, labels])
    # d loss / d logits = (softmax - onehot) / batch
    d = e / s
    d[rows, labels] -= 1.0
    d *= np.float32(1.0 / len(labels))
    grads = [None] * len(params)
    for k in range(len(params) - 1, -1, -1):
        W, _ = params[k]
        grads[k] = (acts[k].T @ d, d.sum(axis=0))
        if k > 0:
            d = d @ W.T
            d *= acts[k] > 0
    return np.float32(loss), grads


# ---- peers ---------------------------------------------------------------------------------------
def make_autograd(autograd):
    anp = autograd.numpy
    from autograd.scipy.special import logsumexp as a_logsumexp

    def loss(params, x, labels):
        h = x
        for W, b in params[:-1]:
            h = anp.maximum(anp.dot(h, W) + b, 0.0)
        W, b = params[-1]
        logits = anp.dot(h, W) + b
        logp = logits - a_logsumexp(logits, axis=1, keepdims=True)
        return -anp.mean(logp[anp.arange(len(labels)), labels])
    return autograd.value_and_grad(loss)


def make_torch(torch):
    def value_and_grad(params, x, labels):
        tparams = [(torch.from_numpy(W).requires_grad_(True), torch.from_numpy(b).requires_grad_(True))
                   for W, b in params]
        h = torch.from_numpy(x)
        for W, b in tparams[:-1]:
            h = torch.relu(h @ W + b)
        W, b = tparams[-1]
        loss = torch.nn.functional.cross_entropy(h @ W + b, torch.from_numpy(labels))
        loss.backward()
        return loss.detach().numpy(), [(W.grad.numpy(), b.grad.numpy()) for W, b in tparams]
    return value_and_grad


def jax_loss(jax):
    """The MLP's loss in JAX (``bench_gpu`` takes its per-example gradients too)."""
    jnp = jax.numpy

    def loss(params, x, labels):
        h = x
        for W, b in params[:-1]:
            h = jax.nn.relu(h @ W + b)
        W, b = params[-1]
        logits = h @ W + b
        logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))
    return loss


def make_jax(jax):
    """A fresh ``jax.jit(jax.value_and_grad(loss))`` taking NumPy arrays (see ``bench_chain.on_device``)."""
    return on_device(jax, jax.jit(jax.value_and_grad(jax_loss(jax))))


def contestants():
    out = {
        EAGER: tapegrad_value_and_grad,
        JIT: make_tapegrad_jit(),
        REF: numpy_value_and_grad,
        FORWARD: loss_tnp,
    }
    autograd = try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        out["autograd value_and_grad"] = make_autograd(autograd)
    torch = try_import("torch")
    if torch is not None:
        out["torch eager backward"] = make_torch(torch)
    jax = try_import("jax")
    if jax is not None:
        out["jax jit(value_and_grad)"] = make_jax(jax)
    return out


def first_call_ms(make, args, steady_s, calls: int = FIRST_CALLS):
    """Milliseconds of a fresh jitted function's first call beyond a steady-state call: ``calls``
    fresh functions from ``make()``, each called once; returns (best, median)."""
    costs = []
    for _ in range(calls):
        fn = make()
        t0 = time.perf_counter()
        fn(*args)
        costs.append((time.perf_counter() - t0 - steady_s) * 1e3)
    return min(costs), statistics.median(costs)


def staging_ms(args, calls: int = FIRST_CALLS):
    """Best milliseconds of ``make_program`` (staging alone: tracing ``value_and_grad`` into a program)."""
    costs = []
    for _ in range(calls):
        make = tg.make_program(tg.value_and_grad(loss_tnp, grad_position=0))
        t0 = time.perf_counter()
        make(*args)
        costs.append((time.perf_counter() - t0) * 1e3)
    return min(costs)


# The first jit call of a new process: what a script pays once (imports done lazily by the executor or
# the passes, and caches kept across programs, such as numexpr's compiled expressions, start empty).
_FRESH_PROCESS = """
import sys, time
sys.path.insert(0, {here!r})
import bench_mlp as b
args = b.make_problem()
f = b.make_tapegrad_jit()
t0 = time.perf_counter(); f(*args); first = time.perf_counter() - t0
steady = []
for _ in range(5):
    t0 = time.perf_counter(); f(*args); steady.append(time.perf_counter() - t0)
print((first - min(steady)) * 1e3)
"""


def fresh_process_first_call_ms(runs: int = 3):
    """Best milliseconds of the first ``jit(value_and_grad)`` call beyond a steady one, each in a new
    Python process (after its imports of NumPy and tapegrad)."""
    code = _FRESH_PROCESS.format(here=os.path.dirname(os.path.abspath(__file__)))
    costs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout.split()[-1]) for _ in range(runs)]
    return min(costs)


def _leaves(grads):
    return [g for pair in grads for g in pair]


def check(cands, params, x, labels):
    """name -> (loss abs error, worst per-leaf max relative error, set of gradient dtypes)."""
    ref_loss, ref = numpy_value_and_grad(params, x, labels)
    ref = _leaves(ref)
    report = {}
    for name, fn in cands.items():
        if name == FORWARD:
            continue
        loss, grads = fn(params, x, labels)
        grads = _leaves(grads)
        errs = [float(np.max(np.abs(np.asarray(g, np.float64) - r)) / np.max(np.abs(r)))
                for g, r in zip(grads, ref)]
        dtypes = sorted({str(np.asarray(g).dtype) for g in grads})
        report[name] = (abs(float(loss) - float(ref_loss)), max(errs), "/".join(dtypes))
    return report


def run(quick: bool = False):
    params, x, labels = make_problem()
    cands = contestants()
    checks = check(cands, params, x, labels)
    timings = interleaved({name: (lambda fn=fn: fn(params, x, labels)) for name, fn in cands.items()},
                          repeat=3 if quick else 9, target_s=0.1 if quick else 0.3)
    ref = timings[REF].best
    fwd = timings[FORWARD].best
    results = []
    for name in cands:
        t = timings[name]
        loss_err, rel_err, dtype = checks.get(name, (None, None, None))
        results.append({
            "bench": "mlp", "name": name, "kind": "call", "best_ms": t.best * 1e3, "median_ms": t.median * 1e3,
            "ratio_to_numpy": t.best / ref, "ratio_to_tapegrad_forward": t.best / fwd,
            "loss_err": loss_err, "rel_err": rel_err, "grad_dtype": dtype, "relu": RELU_NAME,
        })
    args = (params, x, labels)
    first = {"tapegrad jit first call": (make_tapegrad_jit, timings[JIT].best)}
    jax = try_import("jax")
    if jax is not None:
        first["jax jit first call"] = (lambda: make_jax(jax), timings["jax jit(value_and_grad)"].best)
    for name, (make, steady) in first.items():
        best, median = first_call_ms(make, args, steady)
        results.append({"bench": "mlp", "name": name, "kind": "first_call", "best_ms": best, "median_ms": median,
                        "staging_ms": staging_ms(args) if name.startswith("tapegrad") else None})
    fresh = fresh_process_first_call_ms(1 if quick else 3)
    results.append({"bench": "mlp", "name": "tapegrad jit first call, new process", "kind": "first_call",
                    "best_ms": fresh, "median_ms": None, "staging_ms": None})
    return results


def table(results) -> str:
    rows = []
    for r in results:
        if r["kind"] == "first_call":
            continue
        err = "" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        rows.append([r["name"], f"{r['best_ms']:.2f}", f"{r['median_ms']:.2f}", f"{r['ratio_to_numpy']:.2f}x",
                     f"{r['ratio_to_tapegrad_forward']:.2f}x", err, r["grad_dtype"] or ""])
    text = format_table(["mlp 784-512-512-10, B=128, f32", "ms best", "ms median", "vs numpy",
                         "vs tg fwd", "rel err", "grad dtype"], rows)
    firsts = [[r["name"], f"{r['best_ms']:.1f}", "" if r["median_ms"] is None else f"{r['median_ms']:.1f}",
               "" if r["staging_ms"] is None else f"{r['staging_ms']:.1f}"]
              for r in results if r["kind"] == "first_call"]
    return text + "\n\n" + format_table(["first call minus a steady call", "ms best", "ms median",
                                          "staging ms"], firsts)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    rows = []
    for r in results:
        if r["kind"] == "first_call":
            note = "" if r["staging_ms"] is None else f"staging {r['staging_ms']:.1f} ms"
            rows.append(["mlp", r["name"], f"{r['best_ms']:.1f} ms", "", "", note, "", ""])
            continue
        note = "" if r["name"] == FORWARD else f"{r['ratio_to_tapegrad_forward']:.2f}x tg fwd"
        rows.append(["mlp", r["name"], f"{r['best_ms']:.2f} ms", f"{r['ratio_to_numpy']:.2f}x",
                     "numpy (hand)", note, "" if r["rel_err"] is None else f"{r['rel_err']:.1e}",
                     r["grad_dtype"] or ""])
    return rows


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    tg_r, jit_r, first = by[EAGER], by[JIT], by["tapegrad jit first call"]
    ok = "MET" if tg_r["ratio_to_numpy"] <= TARGET_RATIO else "MISSED"
    jit_ok = "MET" if jit_r["ratio_to_numpy"] <= JIT_TARGET_RATIO else "MISSED"
    first_ok = "MET" if first["best_ms"] <= FIRST_CALL_TARGET_MS else "MISSED"
    peers = "; ".join(f"{name} {by[name]['ratio_to_numpy']:.2f}x" for name in
                      ("torch eager backward", "jax jit(value_and_grad)") if name in by)
    return (f"mlp target tapegrad/numpy <= {TARGET_RATIO:.1f}x: {ok} ({tg_r['ratio_to_numpy']:.2f}x); "
            f"grad/forward = {tg_r['ratio_to_tapegrad_forward']:.2f}x; relu = {RELU_NAME}\n"
            f"mlp target jit(value_and_grad)/numpy <= {JIT_TARGET_RATIO:.1f}x: {jit_ok} "
            f"({jit_r['ratio_to_numpy']:.2f}x, {jit_r['best_ms']:.2f} ms){'; ' + peers if peers else ''}\n"
            f"mlp target jit first call (trace + compile) <= {FIRST_CALL_TARGET_MS:.0f} ms: {first_ok} "
            f"({first['best_ms']:.1f} ms, of which staging {first['staging_ms']:.1f} ms; the first jit call of a "
            f"new process: {by['tapegrad jit first call, new process']['best_ms']:.1f} ms)")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
