"""``checkpoint``: peak memory and time of ``grad`` through a 50-layer MLP, with and without
``tg.checkpoint``.

The model: 50 layers ``h = tanh(h @ W + b)``, width 256, batch 1024, float32 (a batch large next to the
width, so the activations, not the weights, are what a tape keeps); the loss is ``sum(h * h)``; the
gradient is taken with respect to the list of ``(W, b)`` (``tg.grad``, ``grad_position=0``).

Contestants:

- ``plain grad``: every intermediate stays on the tape until the backward pass reaches it (three
  arrays of batch x width per layer: the matmul's output, the bias add's and the tanh's);
- ``checkpoint each layer``: ``tg.checkpoint(layer)``; the tape keeps each layer's input and output
  only, and the backward pass runs each layer forward once more;
- ``checkpoint segments of k``: ``tg.checkpoint`` around runs of ``k`` layers (k = 5, 10): the tape keeps
  one activation per segment, and the backward pass holds one segment's intermediates at a time;
- ``numpy fwd+bwd (hand)``: the floor without recomputation: keeps each layer's output only (tanh'
  comes from it, ``1 - h^2``).

Peak memory: ``tracemalloc`` (NumPy reports its array buffers to it), started after the parameters and
the input exist, so the peak counts what one gradient call allocates: the tape's residuals, the
temporaries and the returned gradients (12.5 MiB here, the same for every row). One activation is
1 MiB. Each gradient is checked against the plain one (max relative error, worst leaf).

Time: best of interleaved samples without ``tracemalloc`` (which slows allocation down); the ratio is
to ``plain grad``. There is no target in issue 3 beyond measuring and reporting.

Page faults: the minor page faults of one more call (``resource.getrusage``). They explain most of the
spread of the timings between processes: depending on the allocator's history (glibc's dynamic mmap
and trim thresholds), the 155 MiB a plain ``grad`` call allocates are either handed back to the OS
after each call and faulted in again on the next (about 40,000 faults, 60 ms on the reference
machine), or kept and reused (almost none). Checkpointing touches less fresh memory, so it gains the
most from the first state: the time ratio was 1.33x in a fresh process and 1.05x inside ``run.py``.

Run alone: ``python benchmarks/bench_checkpoint.py [--quick] [--threads N]``.
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

LAYERS, WIDTH, BATCH = 50, 256, 1024
DTYPE = np.float32
SEGMENTS = (5, 10)
PLAIN = "tapegrad plain grad"
PER_LAYER = "tapegrad checkpoint each layer"


def make_problem(seed: int = 0):
    """``(params, x)``: 50 ``(W, b)`` pairs (W scaled by 1/sqrt(width)) and a (1024, 256) batch."""
    rng = np.random.default_rng(seed)
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(DTYPE),
               (rng.standard_normal(WIDTH) * 0.1).astype(DTYPE)) for _ in range(LAYERS)]
    return params, rng.standard_normal((BATCH, WIDTH)).astype(DTYPE)


# ---- tapegrad ------------------------------------------------------------------------------------
def layer(h, W, b):
    return tnp.tanh(tnp.matmul(h, W) + b)


def layers(params, h):
    for W, b in params:
        h = layer(h, W, b)
    return h


def loss_plain(params, x):
    h = layers(params, x)
    return tnp.sum(h * h)


checkpointed_layer = tg.checkpoint(layer)


def loss_per_layer(params, x):
    h = x
    for W, b in params:
        h = checkpointed_layer(h, W, b)
    return tnp.sum(h * h)


checkpointed_layers = tg.checkpoint(layers)


def make_loss_segments(k):
    def loss(params, x):
        h = x
        for start in range(0, len(params), k):
            h = checkpointed_layers(params[start:start + k], h)
        return tnp.sum(h * h)
    return loss


# ---- hand-written NumPy --------------------------------------------------------------------------
def numpy_grad(params, x):
    """Forward keeping each layer's output, backward with ``tanh' = 1 - h^2``."""
    acts = [x]
    h = x
    for W, b in params:
        h = np.tanh(h @ W + b)
        acts.append(h)
    d = 2.0 * h
    grads = [None] * len(params)
    for k in range(len(params) - 1, -1, -1):
        h = acts.pop()
        d *= 1.0 - h * h  # through the tanh
        W, _ = params[k]
        grads[k] = (acts[-1].T @ d, d.sum(axis=0))
        d = d @ W.T
    return grads


def contestants():
    out = {PLAIN: tg.grad(loss_plain), PER_LAYER: tg.grad(loss_per_layer)}
    for k in SEGMENTS:
        out[f"tapegrad checkpoint segments of {k}"] = tg.grad(make_loss_segments(k))
    out["numpy fwd+bwd (hand)"] = numpy_grad
    return out


def page_faults(fn):
    """Minor page faults during one call of ``fn`` (None where ``resource`` is missing: Windows)."""
    try:
        import resource
    except ImportError:
        return None
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _leaves(grads):
    return [g for pair in grads for g in pair]


def check(cands, params, x):
    """name -> (worst per-leaf max relative error against the plain gradient, dtypes)."""
    ref = [np.asarray(g, np.float64) for g in _leaves(cands[PLAIN](params, x))]
    report = {}
    for name, fn in cands.items():
        grads = _leaves(fn(params, x))
        errs = [float(np.max(np.abs(np.asarray(g, np.float64) - r)) / np.max(np.abs(r)))
                for g, r in zip(grads, ref)]
        report[name] = (max(errs), "/".join(sorted({str(np.asarray(g).dtype) for g in grads})))
    return report


def run(quick: bool = False):
    """Measure every contestant's peak memory, then time them; returns a list of result dicts."""
    params, x = make_problem()
    cands = contestants()
    checks = check(cands, params, x)
    peaks = {name: peak_mib(lambda fn=fn: fn(params, x)) for name, fn in cands.items()}
    timings = interleaved({name: (lambda fn=fn: fn(params, x)) for name, fn in cands.items()},
                          repeat=2 if quick else 5, warmup=1, number=1)
    faults = {name: page_faults(lambda fn=fn: fn(params, x)) for name, fn in cands.items()}
    ref_time, ref_peak = timings[PLAIN].best, peaks[PLAIN]
    results = []
    for name in cands:
        t = timings[name]
        err, dtype = checks[name]
        results.append({
            "bench": "checkpoint", "name": name, "best_ms": t.best * 1e3, "median_ms": t.median * 1e3,
            "time_ratio": t.best / ref_time, "peak_mib": peaks[name], "peak_ratio": peaks[name] / ref_peak,
            "page_faults": faults[name], "rel_err": err, "grad_dtype": dtype,
        })
    return results


def _faults(r) -> str:
    return "" if r["page_faults"] is None else str(r["page_faults"])


def table(results) -> str:
    rows = [[r["name"], f"{r['peak_mib']:.1f}", f"{r['peak_ratio']:.2f}x", f"{r['best_ms']:.0f}",
             f"{r['median_ms']:.0f}", f"{r['time_ratio']:.2f}x", _faults(r), f"{r['rel_err']:.1e}",
             r["grad_dtype"]] for r in results]
    title = f"checkpoint: grad of {LAYERS}-layer tanh MLP, {WIDTH} wide, batch {BATCH}, f32"
    headers = [title, "peak MiB", "vs plain", "ms best", "ms median", "vs plain", "page faults", "rel err",
               "dtype"]
    return format_table(headers, rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["checkpoint", r["name"], f"{r['best_ms']:.0f} ms", f"{r['time_ratio']:.2f}x", "tg plain grad",
             f"peak {r['peak_mib']:.1f} MiB ({r['peak_ratio']:.2f}x), {_faults(r)} faults",
             f"{r['rel_err']:.1e}", r["grad_dtype"]] for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    plain = by[PLAIN]
    parts = [f"{name.replace('tapegrad checkpoint ', '')} {r['peak_mib']:.1f} MiB ({r['peak_ratio']:.2f}x, "
             f"time {r['time_ratio']:.2f}x)"
             for name, r in by.items() if name.startswith("tapegrad checkpoint")]
    saved = "YES" if by[PER_LAYER]["peak_mib"] < plain["peak_mib"] else "NO"
    return (f"checkpoint (reported, no target) memory saved: {saved}; peak plain {plain['peak_mib']:.1f} MiB"
            f" -> {'; '.join(parts)}")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
