"""``while_rev``: reverse mode through ``tg.while_loop`` against the same loop as a ``tg.scan`` of known length.

The loop: ``N`` steps of ``x = sin(x) * 1.01 + 0.1`` on a vector of 100 float64 (bench_chain's step),
the loss ``sum(x)``, its gradient in the initial ``x``. The ``while_loop`` counts its steps in the carry
and stops at ``N`` (the trip count is decided at run time, as it would be for a tolerance); the ``scan``
has length ``N`` from the start.

Contestants, each eagerly (``tg.grad``) and staged (``tg.jit(tg.grad(...))``):

- ``while_loop``: eagerly the loop runs while the condition holds, keeping each step's residuals, then a
  ``scan`` of ``n`` steps pulls the cotangent back; under ``jit`` the backward pass is one ``while_grad``
  equation, which runs the loop again and keeps the residuals in a Python list.
- ``scan``: reverse mode through a ``scan`` of known length (the residuals stacked).

The ratio is the ``while_loop`` row's time over the ``scan`` row's of the same mode; gradients are
compared with the ``scan``'s (max relative error). Time: best of interleaved samples, in one process.

Run alone: ``python benchmarks/bench_while_rev.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

N, SIZE = 100, 100


def step(x):
    return tnp.sin(x) * 1.01 + 0.1


def loss_while(x):
    _, x = tg.while_loop(lambda c: c[0] < N, lambda c: (c[0] + 1, step(c[1])), (0, x))
    return tnp.sum(x)


def loss_scan(x):
    x, _ = tg.scan(lambda c, _: (step(c), None), x, None, length=N)
    return tnp.sum(x)


MODES = {"eager grad": tg.grad, "jit(grad)": lambda f: tg.jit(tg.grad(f))}


def contestants():
    out = {}
    for mode, wrap in MODES.items():
        out[("while_loop", mode)] = wrap(loss_while)
        out[("scan", mode)] = wrap(loss_scan)
    return out


def run(quick: bool = False):
    x = np.random.default_rng(0).normal(size=SIZE)
    cands = contestants()
    ref = np.asarray(cands[("scan", "eager grad")](x))
    errors = {key: float(np.max(np.abs(np.asarray(fn(x)) - ref)) / np.max(np.abs(ref))) for key, fn in cands.items()}
    timings = interleaved({key: (lambda fn=fn: fn(x)) for key, fn in cands.items()}, repeat=3 if quick else 9)
    results = []
    for (loop, mode), t in timings.items():
        base = timings[("scan", mode)].best
        results.append({"bench": "while_rev", "name": f"tapegrad {loop} {mode}", "loop": loop, "mode": mode,
                        "best_ms": t.best * 1e3, "median_ms": t.median * 1e3, "ratio": t.best / base,
                        "rel_err": errors[(loop, mode)], "grad_dtype": str(np.asarray(cands[(loop, mode)](x)).dtype)})
    return results


def table(results) -> str:
    rows = [[r["name"], f"{r['best_ms']:.3f}", f"{r['median_ms']:.3f}", f"{r['ratio']:.2f}x", f"{r['rel_err']:.1e}",
             r["grad_dtype"]] for r in results]
    title = f"while_rev: grad through {N} steps of sin(x)*1.01+0.1, {SIZE} float64"
    return format_table([title, "ms best", "ms median", "vs scan (same mode)", "rel err", "dtype"], rows)


def compact_rows(results):
    return [["while_rev", r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.2f}x", f"tg scan {r['mode']}", "",
             f"{r['rel_err']:.1e}", r["grad_dtype"]] for r in results]


def verdict(results) -> str:
    parts = [f"{r['mode']} {r['ratio']:.2f}x ({r['best_ms']:.3f} ms)" for r in results if r["loop"] == "while_loop"]
    return f"while_rev (reported, no target): reverse-mode while_loop over scan of known length: {'; '.join(parts)}"


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
