"""``vmap``: per-example gradients of logistic regression, against a loop and hand-written NumPy.

The loss of one example is ``loss(w, x, y) = log(1 + exp(z)) - y z`` with ``z = x . w`` (binary
cross-entropy on the logit ``z``, label ``y`` in {0, 1}); ``w`` has 100 features, the batch is 256
examples, float64. Its per-example gradient is ``(sigmoid(z_i) - y_i) x_i``: a (256, 100) array.

Contestants (each checked against the NumPy reference: max |g - g_ref| / max |g_ref|):

- ``numpy per-example (hand)``: ``(sigmoid(X w) - y)[:, None] * X``, the baseline of the ratio column;
- ``tapegrad vmap(grad)``: ``tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(w, X, y)`` (JAX's spelling);
- ``tapegrad vmap(grad) nn.Dense weights=``: the MindSpore spelling, ``tg.vmap(tg.grad(loss,
  grad_position=None, weights=net.trainable_params()), in_axes=(0, 0))(X, y)`` with ``net`` a
  ``tg.nn.Dense(100, 1)`` whose weight is ``w`` and whose bias is 0 (so the weight gradients equal the
  reference; the bias gradients are ``sigmoid(z_i) - y_i``); the loss sums the one logit with
  ``tnp.sum`` rather than indexing it (``[0]``), see the README;
- ``tapegrad loop of grad``: ``np.stack([tg.grad(loss)(w, X[i], y[i]) for i in range(256)])``;
- ``tapegrad grad of the batch sum``: one ``tg.grad`` of ``sum_i loss(w, X_i, y_i)`` (the summed
  gradient, not per-example: the price of one ordinary batched gradient, for scale);
- ``autograd loop of grad`` (HIPS autograd has no vmap) and ``torch.func vmap(grad)`` on CPU, when
  installed. PyTorch runs on one intra-op thread (``_timing.one_torch_thread`` says why) and its
  time includes ``torch.from_numpy`` of the inputs and ``.numpy()`` of the result.

Targets (issue 4): ``vmap(grad)`` at least 20x faster than the loop of ``grad``; ``vmap(grad)`` at most
0.2 ms per call, eager.

Run alone: ``python benchmarks/bench_vmap.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, one_torch_thread, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import nn  # noqa: E402

FEATURES, BATCH = 100, 256
TARGET_SPEEDUP = 20.0
TARGET_US = 200.0
REF = "numpy per-example (hand)"
VMAP = "tapegrad vmap(grad)"
VMAP_NN = "tapegrad vmap(grad) nn.Dense weights="
LOOP = "tapegrad loop of grad"
SUMMED = "tapegrad grad of the batch sum"  # not per-example: one summed gradient, for scale


def make_problem(seed: int = 0):
    """``(w, X, y)``: float64 weights (100,) of scale 0.1, a standard normal batch (256, 100), 0/1 labels."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(FEATURES) * 0.1
    X = rng.standard_normal((BATCH, FEATURES))
    y = (rng.random(BATCH) < 0.5).astype(np.float64)
    return w, X, y


# ---- hand-written NumPy --------------------------------------------------------------------------
def numpy_per_example(w, X, y):
    """``(sigmoid(X w) - y)[:, None] * X``: row ``i`` is the gradient of example ``i``'s loss."""
    s = 1.0 / (1.0 + np.exp(-(X @ w)))
    s -= y
    return s[:, None] * X


# ---- tapegrad ------------------------------------------------------------------------------------
def loss(w, x, y):
    """Binary cross-entropy of one example on its logit ``z = x . w``: ``log(1 + e^z) - y z``."""
    z = tnp.dot(x, w)
    return tnp.logaddexp(0.0, z) - y * z


def make_dense(w):
    """A ``Dense(100, 1)`` computing the same logit as ``w`` (bias 0), and its per-example gradients."""
    net = nn.Dense(FEATURES, 1, weight_init=w[None, :], bias_init=0.0, dtype=np.float64)

    def net_loss(x, y):
        z = tnp.sum(net(x))  # the one logit as a scalar
        return tnp.logaddexp(0.0, z) - y * z

    per_example = tg.vmap(tg.grad(net_loss, grad_position=None, weights=net.trainable_params()), in_axes=(0, 0))
    return lambda w, X, y: per_example(X, y)


def tapegrad_contestants(w):
    grad_loss = tg.grad(loss)
    return {
        VMAP: tg.vmap(tg.grad(loss), in_axes=(None, 0, 0)),
        VMAP_NN: make_dense(w),
        LOOP: lambda w, X, y: np.stack([grad_loss(w, X[i], y[i]) for i in range(len(X))]),
        SUMMED: tg.grad(lambda w, X, y: tnp.sum(loss(w, X, y))),
    }


# ---- peers ---------------------------------------------------------------------------------------
def make_autograd(autograd):
    anp = autograd.numpy

    def a_loss(w, x, y):
        z = anp.dot(x, w)
        return anp.logaddexp(0.0, z) - y * z
    grad_loss = autograd.grad(a_loss)
    return lambda w, X, y: np.stack([grad_loss(w, X[i], y[i]) for i in range(len(X))])


def make_torch(torch):
    import torch.func

    def t_loss(w, x, y):
        z = torch.dot(x, w)
        return torch.nn.functional.softplus(z) - y * z
    per_example = torch.func.vmap(torch.func.grad(t_loss), in_dims=(None, 0, 0))
    return lambda w, X, y: per_example(torch.from_numpy(w), torch.from_numpy(X), torch.from_numpy(y)).numpy()


def contestants(w):
    """name -> callable of ``(w, X, y)`` returning per-example gradients (or the summed one)."""
    out = {REF: numpy_per_example, **tapegrad_contestants(w)}
    autograd = try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        out["autograd loop of grad"] = make_autograd(autograd)
    torch = try_import("torch")
    if torch is not None:
        out["torch.func vmap(grad)"] = make_torch(torch)
    return out


def _rel_err(value, ref) -> float:
    return float(np.max(np.abs(np.asarray(value, np.float64) - ref)) / np.max(np.abs(ref)))


def check(cands, w, X, y):
    """name -> (max relative error against the NumPy per-example gradients, worst leaf; dtype)."""
    ref = numpy_per_example(w, X, y)
    report = {}
    for name, fn in cands.items():
        out = fn(w, X, y)
        if name == VMAP_NN:  # (weight (256, 1, 100), bias (256, 1)); the bias gradient is sigmoid(z) - y
            gw, gb = (np.asarray(g) for g in out)
            s = 1.0 / (1.0 + np.exp(-(X @ w))) - y
            report[name] = (max(_rel_err(gw[:, 0], ref), _rel_err(gb[:, 0], s)), f"{gw.dtype}")
        else:
            out = np.asarray(out)
            report[name] = (_rel_err(out, ref.sum(axis=0) if name == SUMMED else ref), str(out.dtype))
    return report


def run(quick: bool = False):
    """Time every contestant; returns a list of result dicts (one per contestant)."""
    w, X, y = make_problem()
    cands = contestants(w)
    restore = one_torch_thread()
    try:
        checks = check(cands, w, X, y)
        timings = interleaved({name: (lambda fn=fn: fn(w, X, y)) for name, fn in cands.items()},
                              repeat=3 if quick else 9, target_s=0.1 if quick else 0.3)
    finally:
        restore()
    ref, loop = timings[REF].best, timings[LOOP].best
    results = []
    for name in cands:
        t = timings[name]
        err, dtype = checks[name]
        results.append({"bench": "vmap", "name": name, "best_us": t.best * 1e6, "median_us": t.median * 1e6,
                        "samples": len(t.samples), "ratio_to_numpy": t.best / ref,
                        "speedup_over_loop": loop / t.best, "rel_err": err, "dtype": dtype})
    return results


def _time(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.0f} us"


def table(results) -> str:
    rows = [[r["name"], _time(r["best_us"]), _time(r["median_us"]), f"{r['ratio_to_numpy']:.1f}x",
             f"{r['speedup_over_loop']:.1f}x", f"{r['rel_err']:.1e}", r["dtype"]] for r in results]
    return format_table([f"vmap: per-example grads, logistic regression {FEATURES} features, B={BATCH}, f64",
                         "best", "median", "vs numpy", "loop / this", "rel err", "dtype"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["vmap", r["name"], _time(r["best_us"]), f"{r['ratio_to_numpy']:.1f}x", "numpy (hand)",
             f"tg loop / this {r['speedup_over_loop']:.1f}x", f"{r['rel_err']:.1e}", r["dtype"]]
            for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    vm = by[VMAP]
    speed_ok = "MET" if vm["speedup_over_loop"] >= TARGET_SPEEDUP else "MISSED"
    time_ok = "MET" if vm["best_us"] <= TARGET_US else "MISSED"
    return (f"vmap target vmap(grad) >= {TARGET_SPEEDUP:.0f}x faster than a loop of grad: {speed_ok} "
            f"({vm['speedup_over_loop']:.1f}x: {_time(vm['best_us'])} vs {_time(by[LOOP]['best_us'])})\n"
            f"vmap target vmap(grad) <= {TARGET_US / 1e3:.1f} ms eager: {time_ok} ({_time(vm['best_us'])}; "
            f"{vm['ratio_to_numpy']:.1f}x numpy; nn.Dense weights= form {_time(by[VMAP_NN]['best_us'])})")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
