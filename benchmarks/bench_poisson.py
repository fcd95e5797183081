"""A PDE-constrained inverse problem: the gradient of a data misfit through a sparse solve, by the adjoint.

The 2-D Poisson problem -div(kappa grad u) = f on an n x n grid (``_poisson.py``: five-point finite
volumes, harmonic-mean faces), at n = 100 and 300 (10^4 and 9 x 10^4 unknowns). The loss is
``sum((u(kappa) - u_obs)**2)`` over the per-cell ``kappa``; ``tg.value_and_grad`` differentiates it through
``tapegrad.scipy.sparse.linalg.spsolve``, whose derivative is one more solve with the transpose on the
forward solve's factorisation. Contestants, interleaved within each size (``_timing.py``):

- ``SciPy forward (baseline)``: the operator assembled with NumPy, factorised and solved by SciPy's
  ``spsolve``: one forward solve, the unit of the target;
- ``tapegrad forward``: the loss alone (tapegrad's assembly and ``spsolve``);
- ``tapegrad value_and_grad``: the loss and its gradient with respect to all of kappa. Target (issue 40):
  at most **2.5x** the baseline;
- ``jax value_and_grad (BCOO + CG)``: JAX, jitted, with ``jax.experimental.sparse`` and
  ``jax.scipy.sparse.linalg.cg`` (differentiated through ``lax.custom_linear_solve``; JAX has no sparse
  direct solver on the CPU), CG to the relative tolerance ``CG_RTOL``; its first call (compilation) is
  reported apart;
- ``dense value_and_grad``: at n = 100 only (a 10^4 x 10^4 matrix, 800 MB), ``tnp.linalg.solve`` on the
  operator made dense, timed once, for scale (``--quick``: a 30 x 30 grid).

Before timing, the gradient is checked against JAX's (loose: CG's tolerance) and, at the small size,
against the dense route.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _poisson  # noqa: E402
from _timing import format_table, interleaved, met, standalone_main, try_import  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad.scipy.sparse.linalg import spsolve  # noqa: E402

BASE, FWD, GRAD, JAX, DENSE = ("SciPy forward (baseline)", "tapegrad forward", "tapegrad value_and_grad",
                               "jax value_and_grad (BCOO + CG)", "dense value_and_grad")
SIZES = (100, 300)
QUICK_SIZES = (30, 60)
TARGET = 2.5
CG_RTOL = 1e-10


def _jax(n: int, kappa, f, u_obs):
    """JAX's jitted value_and_grad (on fresh kappa at each call), its first call's seconds and gradient at
    ``kappa``, or None without JAX."""
    jax = try_import("jax")
    if jax is None:
        return None
    jax.config.update("jax_enable_x64", True)
    fn = _poisson.jax_value_and_grad(n, CG_RTOL)
    t0 = time.perf_counter()
    _, grad = jax.block_until_ready(fn(kappa, f, u_obs))
    first = time.perf_counter() - t0
    fresh = _fresh(kappa)
    return (lambda: jax.block_until_ready(fn(next(fresh), f, u_obs))), first, grad


def _fresh(kappa):
    """An endless supply of distinct kappa near ``kappa``: every call factorises a new matrix (spsolve keeps
    the factors of the last matrices it saw, so the same kappa twice would time a cache hit)."""
    step = 0
    while True:
        step += 1
        yield kappa * (1.0 + 1e-6 * step)


def _rel(g, ref) -> float:
    return float(np.max(np.abs(np.asarray(g) - np.asarray(ref))) / np.max(np.abs(np.asarray(ref))))


def _dense_row(n: int, kappa, f, u_obs, grad):
    """One timed call of the dense route, and its gradient's distance to the sparse one."""
    dense = tg.value_and_grad(_poisson.dense_loss)
    t0 = time.perf_counter()
    _, g = dense(kappa, f, u_obs)
    seconds = time.perf_counter() - t0
    return seconds, _rel(grad, g)


def _size(n: int, quick: bool, dense_n: int):
    kappa, f, u_obs = _poisson.problem(n)
    value_and_grad = tg.value_and_grad(_poisson.loss)
    _, grad = value_and_grad(kappa, f, u_obs, spsolve)
    fresh = _fresh(kappa)
    contestants = {BASE: lambda: _poisson.forward_scipy(next(fresh), f),
                   FWD: lambda: _poisson.loss(next(fresh), f, u_obs, spsolve),
                   GRAD: lambda: value_and_grad(next(fresh), f, u_obs, spsolve)}
    jax_route = _jax(n, kappa, f, u_obs)
    notes = {}
    if jax_route is not None:
        contestants[JAX], jax_first, jax_grad = jax_route
        notes[JAX] = f"first call {jax_first:.2f} s; grad vs tapegrad {_rel(jax_grad, grad):.1e}"
    timings = interleaved(contestants, repeat=3 if quick else 5, warmup=1, number=1)
    base = timings[BASE].best
    rows = [{"bench": "poisson", "n": n * n, "name": name, "best_ms": t.best * 1e3, "ratio": t.best / base,
             "note": notes.get(name, "")} for name, t in timings.items()]
    if n == dense_n:
        small = _poisson.problem(dense_n)
        seconds, rel = _dense_row(dense_n, *small, tg.grad(_poisson.loss)(*small, spsolve))
        rows.append({"bench": "poisson", "n": n * n, "name": DENSE, "best_ms": seconds * 1e3,
                     "ratio": seconds / base, "note": f"one call; sparse grad vs dense {rel:.1e}"})
    return rows


def run(quick: bool = False):
    sizes = QUICK_SIZES if quick else SIZES
    return [row for n in sizes for row in _size(n, quick, dense_n=sizes[0])]


def table(results) -> str:
    rows = [[r["n"], r["name"], f"{r['best_ms']:.2f} ms", f"{r['ratio']:.2f}x", r["note"]] for r in results]
    return format_table(["unknowns", "contestant", "best", "vs SciPy forward", "note"], rows, left=2)


def compact_rows(results):
    return [["poisson", f"n={r['n']}: {r['name']}", f"{r['best_ms']:.2f} ms", f"{r['ratio']:.2f}x",
             "SciPy forward solve", r["note"], "", "float64"] for r in results]


def verdict(results) -> str:
    grads = [r for r in results if r["name"] == GRAD]
    ok = all(r["ratio"] <= TARGET for r in grads)
    by_n = {(r["n"], r["name"]): r["best_ms"] for r in results}
    jax_part = "; ".join(f"n={r['n']}: tapegrad/jax {r['best_ms'] / by_n[(r['n'], JAX)]:.2f}"
                         for r in grads if (r["n"], JAX) in by_n)
    return (f"Poisson inverse problem: value_and_grad <= {TARGET}x one SciPy forward solve: {met(ok)} ("
            + ", ".join(f"n={r['n']}: {r['ratio']:.2f}x" for r in grads) + (f"; {jax_part}" if jax_part else "")
            + ")")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
