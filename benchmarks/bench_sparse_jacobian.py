"""What a sparse Jacobian or Hessian by colouring costs against one evaluation of the function.

**Jacobian.** The function is a nonlinear 2-D five-point stencil on a k x k grid (``lap(u) + sin(u) * u``,
zero outside), whose Jacobian has the stencil's pattern: column colouring (DSATUR) gives it 5 colours at
any size, so ``tg.sparse_jacfwd`` runs the function once on the tape and sweeps 5 seeds forward in one
batched pass. Target (issue 40): the Jacobian costs at most **(colours + 2)** evaluations of the
function, at n = 10^4 and ~10^5 unknowns. The colouring is computed once, when ``sparse_jacfwd(f, S)``
is called, and is timed apart (it is not part of a Jacobian's cost when the pattern is reused, as in
Newton's method). Timed: the eager passes in one batched sweep (the default) and one per colour
(``chunk_size=1``), the passes staged by ``jit`` (``jit=True``), and ``tg.sparse_jacrev`` (5 row
colours as well), eager and staged. For scale, the dense ``tg.jacfwd`` at a small grid (30 x 30 = 900
unknowns), interleaved, and at 10^4 unknowns once (its n x n result is 800 MB; 10^4 basis tangents in
batches of ``DENSE_CHUNK``), after the interleaved timings.

The peer is ``sparsejac`` on JAX (when JAX and sparsejac are installed), for the same function and the
same pattern given as a BCOO matrix: ``jax.jit(sparsejac.jacfwd(f, S))`` and ``jacrev``, float64. Their
rows are to one evaluation of tapegrad's function, like the others, and their note says the ratio to
tapegrad's staged Jacobian and how many colours sparsejac's colouring (networkx's greedy
``largest_first``) found; JAX's first call (tracing and XLA compilation) is reported apart, beside
tapegrad's first staged call, and so is sparsejac's colouring.

**Hessian.** A banded objective ``sum_d sum_i c_d sin(x_i x_{i+d}) + sum x^4 / 4`` (d = 1..b) has a
Hessian of half-bandwidth b. Rows: the passes (colours) of star colouring (``tg.sparse_hessian``'s
default) and of column colouring, against the bandwidth, and the time of the sparse Hessian against one
gradient (``tg.grad``, eager; the staged Hessian against the staged gradient). On a band both colourings
take 2b + 1 passes, the least a direct recovery can; star colouring pays off where a few rows are dense:
a last row adds an arrow (a variable coupled to all, as a mean or a shared parameter), where column
colouring needs n colours and star about 2b + 2.

Contestants are interleaved within each size (benchmarks/_timing.py); ratios are to one evaluation (one
gradient for the Hessians).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import format_table, interleaved, met, standalone_main, try_import  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad._colouring import color_columns, pattern_of, star_colouring  # noqa: E402

DENSE_CHUNK = 1000  # basis tangents per batched pass of the dense jacfwd at 10^4 unknowns
EVALJ = "one evaluation (jit)"  # for scale: the staged passes run on jit's executors, the baseline eagerly
EVAL, FWD, FWD1, FWDJ, REV, REVJ, DENSE = (
    "one evaluation", "sparse_jacfwd", "sparse_jacfwd(chunk_size=1)", "sparse_jacfwd(jit=True)", "sparse_jacrev",
    "sparse_jacrev(jit=True)", "dense jacfwd")
SJ_FWD, SJ_REV = "sparsejac.jacfwd (JAX, jit)", "sparsejac.jacrev (JAX, jit)"
SIZES = (100, 316)  # grid sides: 10^4 and 99,856 unknowns
QUICK_SIZES = (30, 60)
DENSE_SIDE = 30
HESSIAN_N, QUICK_HESSIAN_N = 10_000, 1_000
BANDS = (1, 2, 4, 8)


def stencil(u):
    p = tnp.pad(u, 1)
    return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + tnp.sin(u) * u


def stencil_pattern(k: int):
    lap = sp.diags_array([np.ones(k - 1), np.ones(k), np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return sp.csr_array(sp.kron(lap, eye) + sp.kron(eye, lap)) != 0


def _row(n, name, seconds, base, colours, note="", bench="sparse_jacobian", to="one evaluation"):
    return {"bench": bench, "n": n, "name": name, "best_ms": seconds * 1e3, "ratio": seconds / base,
            "colours": colours, "note": note, "to": to}


def _sparsejac(k: int, pattern):
    """sparsejac's jitted jacfwd and jacrev of the stencil on JAX, with their first calls' and colouring's
    seconds and colour count, or None without JAX or sparsejac."""
    jax, sparsejac = try_import("jax"), try_import("sparsejac")
    if jax is None or sparsejac is None:
        return None
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse

    def flat_stencil(v):
        u = v.reshape(k, k)
        p = jnp.pad(u, 1)
        return (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + jnp.sin(u) * u).ravel()

    bcoo = jsparse.BCOO.from_scipy_sparse(sp.coo_array(pattern, dtype=np.float64))
    import networkx as nx  # sparsejac's own colouring: count what it finds
    peers = {}
    for name, transform in ((SJ_FWD, sparsejac.jacfwd), (SJ_REV, sparsejac.jacrev)):
        t0 = time.perf_counter()
        jac = jax.jit(transform(flat_stencil, bcoo))
        colouring_s = time.perf_counter() - t0
        v = jnp.asarray(np.random.default_rng(0).standard_normal(k * k))
        t0 = time.perf_counter()
        jax.block_until_ready(jac(v))
        first_s = time.perf_counter() - t0
        peers[name] = (lambda jac=jac, v=v: jax.block_until_ready(jac(v)), first_s, colouring_s, jac(v))
    s = sp.csr_array(pattern, dtype=np.int32)
    graph = nx.from_scipy_sparse_array(s.T @ s)
    graph.remove_edges_from(nx.selfloop_edges(graph))
    colours = max(nx.greedy_color(graph, strategy="largest_first").values()) + 1
    return peers, colours


def _jacobian_size(k: int, quick: bool):
    u = np.random.default_rng(0).standard_normal((k, k))
    pattern = stencil_pattern(k)
    t0 = time.perf_counter()
    fwd = tg.sparse_jacfwd(stencil, pattern)
    colouring_s = time.perf_counter() - t0
    fwd1 = tg.sparse_jacfwd(stencil, pattern, chunk_size=1)
    fwdj = tg.sparse_jacfwd(stencil, pattern, jit=True)
    rev, revj = tg.sparse_jacrev(stencil, pattern), tg.sparse_jacrev(stencil, pattern, jit=True)
    t0 = time.perf_counter()
    reference = fwdj(u)  # the first staged call: tracing and staging, once per shape
    staging_s = time.perf_counter() - t0
    colours = int(color_columns(pattern_of(pattern, "bench")).max()) + 1
    staged_eval = tg.jit(stencil)
    staged_eval(u)
    contestants = {EVAL: lambda: stencil(u), EVALJ: lambda: staged_eval(u), FWD: lambda: fwd(u),
                   FWD1: lambda: fwd1(u), FWDJ: lambda: fwdj(u),
                   REV: lambda: rev(u), REVJ: lambda: revj(u)}
    if k == (QUICK_SIZES if quick else SIZES)[0]:  # the dense route for scale, at a size it can hold
        small = u[:DENSE_SIDE, :DENSE_SIDE]
        dense = tg.jacfwd(stencil)
        contestants[DENSE + f" ({DENSE_SIDE * DENSE_SIDE} unknowns)"] = lambda: dense(small)
    peers = _sparsejac(k, pattern)
    if peers is not None:
        for name, (call, _, _, jac) in peers[0].items():
            rows, cols = np.asarray(jac.indices).T  # compared sparse: at 1e5 unknowns a dense copy is 80 GB
            theirs = sp.csr_array((np.asarray(jac.data), (rows, cols)), shape=reference.shape)
            error = abs(theirs - reference).max()
            assert error <= 1e-12 * np.max(np.abs(reference.data)), f"{name} disagrees with tapegrad by {error}"
            contestants[name] = call
    timings = interleaved(contestants, repeat=3 if quick else 7)
    base = timings[EVAL].best
    rows = [_row(k * k, name, t.best, base, colours) for name, t in timings.items()]
    rows.append(_row(k * k, "colouring (once per pattern)", colouring_s, base, colours))
    if k == SIZES[0] and not quick:  # the dense route at this size, for scale: one call, 10^4 passes, 800 MB
        t0 = time.perf_counter()
        tg.jacfwd(stencil, chunk_size=DENSE_CHUNK)(u)
        rows.append(_row(k * k, f"dense jacfwd (one call, chunk_size={DENSE_CHUNK})", time.perf_counter() - t0,
                         base, k * k))
    rows.append(_row(k * k, "sparse_jacfwd(jit=True): first call (staging)", staging_s, base, colours))
    if peers is not None:
        ours = timings[FWDJ].best
        for row in rows:
            if row["name"] in peers[0]:
                row["colours"] = peers[1]
                row["note"] = f"{timings[row['name']].best / ours:.2f}x tapegrad's jit=True"
        for name, (_, first_s, colouring_s, _) in peers[0].items():
            rows.append(_row(k * k, f"{name}: first call (JAX tracing + XLA compile)", first_s, base, peers[1]))
            rows.append(_row(k * k, f"{name}: colouring (once per pattern)", colouring_s, base, peers[1]))
    return rows


def banded_objective(half: int, arrow: bool):
    """``sum_d sum_i c_d sin(x_i x_{i+d}) + sum x^4 / 4`` (d = 1..half); with ``arrow``, plus
    ``x[-1] * sum cos(x[:-1])``, which couples the last variable to all."""
    weights = [1.0 / d for d in range(1, half + 1)]

    def objective(x):
        value = tnp.sum(x ** 4) / 4
        for d, c in enumerate(weights, start=1):
            value = value + c * tnp.sum(tnp.sin(x[d:] * x[:-d]))
        return value + x[-1] * tnp.sum(tnp.cos(x[:-1])) if arrow else value
    return objective


def banded_hessian_pattern(n: int, half: int, arrow: bool):
    band = sp.diags_array([np.ones(n - abs(d)) for d in range(-half, half + 1)], offsets=list(range(-half, half + 1)))
    pattern = sp.lil_array(band != 0)
    if arrow:
        pattern[-1, :] = True
        pattern[:, -1] = True
    return sp.csr_array(pattern)


def _hessian_band(n: int, half: int, arrow: bool, quick: bool):
    objective, pattern = banded_objective(half, arrow), banded_hessian_pattern(n, half, arrow)
    canonical = pattern_of(pattern, "bench")
    star, column = int(star_colouring(canonical).max()) + 1, int(color_columns(canonical).max()) + 1
    x = np.random.default_rng(1).standard_normal(n) * 0.5
    gradient, staged_gradient = tg.grad(objective), tg.jit(tg.grad(objective))
    star_hess = tg.sparse_hessian(objective, pattern)
    star_staged = tg.sparse_hessian(objective, pattern, jit=True)
    column_staged = tg.sparse_hessian(objective, pattern, colouring="column", jit=True)
    error = abs(star_hess(x) - column_staged(x)).max() / abs(star_hess(x)).max()
    assert error <= 1e-12, f"star and column Hessians differ by {error}"
    contestants = {"one gradient": lambda: gradient(x), "one gradient (jit)": lambda: staged_gradient(x),
                   "sparse_hessian (star)": lambda: star_hess(x),
                   "sparse_hessian (star, jit=True)": lambda: star_staged(x)}
    if column <= 4 * star:  # column colouring on the arrow takes n passes: its time says nothing new
        contestants["sparse_hessian (column, jit=True)"] = lambda: column_staged(x)
    timings = interleaved(contestants, repeat=3 if quick else 5)
    label = f"band b={half}" + (" + arrow" if arrow else "")
    rows = []
    for name, t in timings.items():
        if name.startswith("one gradient"):
            continue
        base = timings["one gradient (jit)" if "jit" in name else "one gradient"].best
        passes = column if "column" in name else star
        rows.append(_row(n, f"{label}: {name}", t.best, base, passes, bench="sparse_hessian",
                         to="one gradient" + (" (jit)" if "jit" in name else ""),
                         note=f"star {star}, column {column}, 2b+1 = {2 * half + 1} passes"))
    return rows


def run(quick: bool = False):
    rows = [row for k in (QUICK_SIZES if quick else SIZES) for row in _jacobian_size(k, quick)]
    n = QUICK_HESSIAN_N if quick else HESSIAN_N
    for half in BANDS:
        rows += _hessian_band(n, half, False, quick)
    rows += _hessian_band(n, 2, True, quick)
    return rows


def table(results) -> str:
    rows = [[r["bench"], r["n"], r["name"], f"{r['best_ms']:.3f} ms", f"{r['ratio']:.2f}x", r["to"], r["colours"],
             r["note"]] for r in results]
    return format_table(["bench", "unknowns", "contestant", "best", "ratio", "to", "colours", "note"], rows, left=3)


def compact_rows(results):
    return [[r["bench"], f"n={r['n']}: {r['name']}", f"{r['best_ms']:.3f} ms", f"{r['ratio']:.2f}x", r["to"],
             f"{r['colours']} colours" + (f"; {r['note']}" if r["note"] else ""), "", "float64"] for r in results]


def _ms(results, n, name):
    return next((r["best_ms"] for r in results if r["n"] == n and r["name"] == name), None)


def verdict(results) -> str:
    fwd = [r for r in results if r["name"] in (FWD, FWD1, FWDJ)]
    sizes = sorted({r["n"] for r in fwd})
    best = {n: min((r for r in fwd if r["n"] == n), key=lambda r: r["ratio"]) for n in sizes}
    eager = {n: min(r["ratio"] for r in fwd if r["n"] == n and r["name"] != FWDJ) for n in sizes}
    target = fwd[0]["colours"] + 2
    ok = all(r["ratio"] <= target for r in best.values())
    # the staged passes against the staged evaluation too: what the Jacobian costs in units of a jitted f
    staged = {n: _ms(results, n, FWDJ) / _ms(results, n, EVALJ) for n in sizes if _ms(results, n, EVALJ)}
    hess = [r for r in results if r["bench"] == "sparse_hessian" and "(star)" in r["name"]]
    return (f"sparse_jacfwd of the five-point stencil costs <= (colours + 2) evaluations: {met(ok)} ("
            + ", ".join(f"n={n} {best[n]['name']}: {best[n]['ratio']:.2f}x, eager {eager[n]:.2f}x" for n in sizes)
            + f"; {fwd[0]['colours']} colours, target {target}x; jit=True over a jitted evaluation: "
            + ", ".join(f"n={n} {ratio:.2f}x" for n, ratio in staged.items())
            + "); sparse Hessian passes (star/column) vs bandwidth: "
            + ", ".join(f"{r['name'].split(':')[0]}: {r['note'].split(',')[0].split()[1]}/"
                        f"{r['note'].split(',')[1].split()[1]}" for r in hess))


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
