"""What a sparse Jacobian by colouring costs against one evaluation of the function.

The function is a nonlinear 2-D five-point stencil on a k x k grid (``lap(u) + sin(u) * u``, zero
outside), whose Jacobian has the stencil's pattern: column colouring (DSATUR) gives it 5 colours at any
size, so ``tg.sparse_jacfwd`` runs the function once on the tape and sweeps 5 seeds forward in one
batched pass. Target (issue 40): the Jacobian costs at most **(colours + 2)** evaluations of the
function, at n = 10^4 and ~10^5 unknowns. The colouring is computed once, when ``sparse_jacfwd(f, S)``
is called, and is timed apart (it is not part of a Jacobian's cost when the pattern is reused, as in
Newton's method). Both the one batched pass (the default) and one pass per colour (``chunk_size=1``)
are timed: at 10^5 unknowns the batched intermediates (5 x 0.8 MB each) outgrow the caches, and the
per-colour passes can be the faster. ``tg.sparse_jacrev`` is timed too (its row colouring is 5 as well here). For scale,
the dense ``tg.jacfwd`` at a small grid (30 x 30 = 900 unknowns: its n x n result at 10^4 unknowns
would be 800 MB).

Contestants are interleaved within each size (benchmarks/_timing.py); ratios are to one evaluation.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import format_table, interleaved, met, standalone_main  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad._colouring import color_columns, pattern_of  # noqa: E402

EVAL, FWD, FWD1, REV, DENSE = (
    "one evaluation", "sparse_jacfwd", "sparse_jacfwd(chunk_size=1)", "sparse_jacrev", "dense jacfwd")
SIZES = (100, 316)  # grid sides: 10^4 and 99,856 unknowns
DENSE_SIDE = 30


def stencil(u):
    p = tnp.pad(u, 1)
    return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + tnp.sin(u) * u


def stencil_pattern(k: int):
    lap = sp.diags_array([np.ones(k - 1), np.ones(k), np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return sp.csr_array(sp.kron(lap, eye) + sp.kron(eye, lap)) != 0


def _size(k: int, quick: bool):
    u = np.random.default_rng(0).standard_normal((k, k))
    pattern = stencil_pattern(k)
    t0 = time.perf_counter()
    fwd = tg.sparse_jacfwd(stencil, pattern)
    colouring_s = time.perf_counter() - t0
    fwd1 = tg.sparse_jacfwd(stencil, pattern, chunk_size=1)
    rev = tg.sparse_jacrev(stencil, pattern)
    colours = int(color_columns(pattern_of(pattern, "bench")).max()) + 1
    contestants = {EVAL: lambda: stencil(u), FWD: lambda: fwd(u), FWD1: lambda: fwd1(u), REV: lambda: rev(u)}
    if k == SIZES[0]:  # the dense route for scale, at a size it can hold (timed beside this size's others)
        small = u[:DENSE_SIDE, :DENSE_SIDE]
        dense = tg.jacfwd(stencil)
        contestants[DENSE + f" ({DENSE_SIDE * DENSE_SIDE} unknowns)"] = lambda: dense(small)
    timings = interleaved(contestants, repeat=3 if quick else 7)
    base = timings[EVAL].best
    rows = [{"bench": "sparse_jacobian", "n": k * k, "name": name, "best_ms": t.best * 1e3, "ratio": t.best / base,
             "colours": colours} for name, t in timings.items()]
    rows.append({"bench": "sparse_jacobian", "n": k * k, "name": "colouring (once per pattern)",
                 "best_ms": colouring_s * 1e3, "ratio": colouring_s / base, "colours": colours})
    return rows


def run(quick: bool = False):
    return [row for k in SIZES for row in _size(k, quick)]


def table(results) -> str:
    rows = [[r["n"], r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.2f}x", r["colours"]] for r in results]
    return format_table(["unknowns", "contestant", "best", "vs one evaluation", "colours"], rows, left=2)


def compact_rows(results):
    return [["sparse_jacobian", f"n={r['n']}: {r['name']}", f"{r['best_ms']:.3f} ms", f"{r['ratio']:.2f}x",
             "one evaluation", f"{r['colours']} colours", "", "float64"] for r in results]


def verdict(results) -> str:
    fwd = [r for r in results if r["name"] in (FWD, FWD1)]
    ok = all(min(r["ratio"] for r in fwd if r["n"] == n) <= fwd[0]["colours"] + 2 for n in {r["n"] for r in fwd})
    return (f"sparse_jacfwd of the five-point stencil costs <= (colours + 2) evaluations: {met(ok)} ("
            + ", ".join(f"n={r['n']} {r['name']}: {r['ratio']:.2f}x" for r in fwd)
            + f"; {fwd[0]['colours']} colours, target {fwd[0]['colours'] + 2}x)")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
