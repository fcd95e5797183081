"""``hessian``: a dense Hessian and a Hessian-vector product, against a hand-written NumPy Hessian.

The function is ``f(x) = logsumexp(A @ x) + 0.5 * ||x||^2`` with ``A`` of shape (200, 100) and ``x`` of
shape (100,), float64, written with ``tapegrad.numpy`` and ``tapegrad.scipy.special.logsumexp``.

Baseline: the Hessian by hand. With ``p = softmax(A x)``,
``H = A^T (diag(p) - p p^T) A + I = B^T B - (A^T p)(A^T p)^T + I`` where ``B = sqrt(p)[:, None] * A``
(``B.T @ B`` of one buffer is a symmetric rank-k update in BLAS, the fastest spelling we found; about
1.3x faster than ``(A.T * p) @ A``).

Hessian rows (each checked against the NumPy Hessian: max |H - H_ref| / max |H_ref|):

- ``tapegrad hessian``: ``tg.hessian`` = ``jacfwd(jacrev(f))``, forward over reverse (JAX's choice);
- ``tapegrad jacfwd(jacrev)`` spelled out, ``jacrev(jacrev)`` (grad of grad: record ``grad f`` once and
  pull 100 basis cotangents back through it) and ``jacrev(jacfwd)`` (reverse over forward; it records
  100 jvps and pulls 100 cotangents through all of them, so it is quadratic in the input size and is
  timed with fewer repeats);
- ``autograd.hessian`` (``jacobian(jacobian)``), ``torch.func.hessian`` (``jacfwd(jacrev)`` with vmap)
  and ``torch.autograd.functional.hessian(vectorize=True)``, when installed; PyTorch runs on one
  intra-op thread (``_timing.one_torch_thread`` says why).

tapegrad's Jacobians are built on ``vmap`` (issue 4): ``jacrev`` is one batched backward pass over the
whole basis (one plain pass for a scalar output, as ``f`` here), ``jacfwd`` one batched forward sweep
(the identity basis of a vector is never multiplied: ``A @ I`` is ``A``), so the "per basis vector"
column (time / 100) is what one column of the Hessian costs inside that single pass.

Hessian-vector product rows (``v`` a fixed random vector): ``jvp(grad(f), (x,), (v,))`` (forward over
reverse), ``grad(lambda x: vdot(grad(f)(x), v))`` (reverse over reverse), ``grad(lambda x: jvp(f, (x,),
(v,))[1])`` (reverse over forward), ``grad(f)`` alone for scale, and the peers' HVPs; the baseline is
``A^T (p * (A v) - p (p . A v)) + v`` by hand.

Targets: ``tg.hessian`` <= 8x the NumPy Hessian (issue 16; 20x in issue 3) and ``jacfwd(jacrev)`` <= 1 ms
eager (issue 4);
the jvp-of-grad route faster than grad-of-grad (``jacfwd(jacrev)`` against ``jacrev(jacrev)``; the HVP
rows are the per-vector view).

Run alone: ``python benchmarks/bench_hessian.py [--quick] [--threads N]``.
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
from tapegrad.scipy.special import logsumexp  # noqa: E402

M, N = 200, 100
TARGET_RATIO = 8.0  # issue 16 (issue 3 asked for 20x)
TARGET_HESSIAN_MS = 1.0  # issue 4: the full 100 x 100 Hessian via jacfwd(jacrev), eager
REF_HESSIAN = "numpy Hessian (hand)"
REF_HVP = "numpy HVP (hand)"
FWD_OVER_REV = "tapegrad jacfwd(jacrev)"
REV_OVER_REV = "tapegrad jacrev(jacrev)"
SLOW = ("tapegrad jacrev(jacfwd)",)  # timed apart, with fewer repeats


def make_problem(seed: int = 0):
    """``(A, x, v)``: float64, ``A`` (200, 100) standard normal, ``x`` and ``v`` (100,)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, N)), rng.standard_normal(N) * 0.1, rng.standard_normal(N)


# ---- hand-written NumPy --------------------------------------------------------------------------
def _softmax(z):
    p = np.exp(z - z.max())
    p /= p.sum()
    return p


def numpy_hessian(A, x):
    """``A^T (diag(p) - p p^T) A + I`` with ``p = softmax(A x)``, as ``B^T B - a a^T + I``."""
    p = _softmax(A @ x)
    a = p @ A
    B = A * np.sqrt(p)[:, None]
    H = B.T @ B
    H -= np.outer(a, a)
    H.flat[::N + 1] += 1.0
    return H


def numpy_hvp(A, x, v):
    """``H v = A^T (p * (A v) - p (p . A v)) + v``."""
    p = _softmax(A @ x)
    Av = A @ v
    return (p * (Av - p @ Av)) @ A + v


# ---- tapegrad ------------------------------------------------------------------------------------
def make_f(A):
    def f(x):
        return logsumexp(tnp.matmul(A, x)) + 0.5 * tnp.sum(x * x)
    return f


def tapegrad_hessians(A):
    f = make_f(A)
    return {
        "tapegrad hessian": tg.hessian(f),
        "tapegrad jit(hessian)": tg.jit(tg.hessian(f)),
        FWD_OVER_REV: tg.jacfwd(tg.jacrev(f)),
        REV_OVER_REV: tg.jacrev(tg.jacrev(f)),
        "tapegrad jacrev(jacfwd)": tg.jacrev(tg.jacfwd(f)),
    }


def tapegrad_hvps(A):
    f = make_f(A)
    grad_f = tg.grad(f)
    return {
        "tapegrad jvp(grad f)": lambda x, v: tg.jvp(grad_f, (x,), (v,))[1],
        "tapegrad grad(vdot(grad f, v))": lambda x, v: tg.grad(lambda y: tnp.vdot(grad_f(y), v))(x),
        "tapegrad grad(jvp(f))": lambda x, v: tg.grad(lambda y: tg.jvp(f, (y,), (v,))[1])(x),
        "tapegrad grad f (one gradient)": lambda x, v: grad_f(x),
    }


# ---- peers ---------------------------------------------------------------------------------------
def autograd_contestants(autograd, A):
    anp = autograd.numpy
    from autograd.scipy.special import logsumexp as a_logsumexp

    def f(x):
        return a_logsumexp(anp.dot(A, x)) + 0.5 * anp.sum(x * x)
    hvp = autograd.hessian_vector_product(f)
    return {"autograd hessian": autograd.hessian(f)}, {"autograd hessian_vector_product": hvp}


def torch_contestants(torch, A):
    import torch.func
    At = torch.from_numpy(A)

    def f(x):
        return torch.logsumexp(At @ x, 0) + 0.5 * (x * x).sum()
    func_hessian = torch.func.hessian(f)
    grad_f = torch.func.grad(f)
    hessians = {
        "torch.func.hessian": lambda x: func_hessian(torch.from_numpy(x)).numpy(),
        "torch.autograd.functional.hessian(vectorize)":
            lambda x: torch.autograd.functional.hessian(f, torch.from_numpy(x), vectorize=True).numpy(),
    }
    hvps = {"torch.func jvp(grad f)":
            lambda x, v: torch.func.jvp(grad_f, (torch.from_numpy(x),), (torch.from_numpy(v),))[1].numpy()}
    return hessians, hvps


def contestants(A):
    """``(hessians, hvps)``: name -> callable of ``x`` (Hessian) or of ``(x, v)`` (HVP)."""
    hessians = {REF_HESSIAN: lambda x: numpy_hessian(A, x), **tapegrad_hessians(A)}
    hvps = {REF_HVP: lambda x, v: numpy_hvp(A, x, v), **tapegrad_hvps(A)}
    autograd = try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        h, p = autograd_contestants(autograd, A)
        hessians.update(h)
        hvps.update(p)
    torch = try_import("torch")
    if torch is not None:
        h, p = torch_contestants(torch, A)
        hessians.update(h)
        hvps.update(p)
    return hessians, hvps


def _rel_err(value, ref) -> float:
    return float(np.max(np.abs(np.asarray(value, np.float64) - ref)) / np.max(np.abs(ref)))


def check(hessians, hvps, A, x, v):
    """name -> (max relative error against the hand-written NumPy result, dtype)."""
    report = {}
    ref = numpy_hessian(A, x)
    for name, fn in hessians.items():
        H = np.asarray(fn(x))
        report[name] = (_rel_err(H, ref), str(H.dtype))
    ref_hvp, ref_grad = numpy_hvp(A, x, v), A.T @ _softmax(A @ x) + x
    for name, fn in hvps.items():
        out = np.asarray(fn(x, v))
        report[name] = (_rel_err(out, ref_grad if "one gradient" in name else ref_hvp), str(out.dtype))
    return report


def run(quick: bool = False):
    """Time every contestant; returns a list of result dicts (one per contestant)."""
    A, x, v = make_problem()
    hessians, hvps = contestants(A)
    repeat, target_s = (3, 0.1) if quick else (9, 0.3)
    fast = {name: (lambda fn=fn: fn(x)) for name, fn in hessians.items() if name not in SLOW}
    fast.update({name: (lambda fn=fn: fn(x, v)) for name, fn in hvps.items()})
    slow = {name: (lambda fn=hessians[name]: fn(x)) for name in SLOW}
    restore = one_torch_thread()
    try:
        checks = check(hessians, hvps, A, x, v)
        timings = interleaved(fast, repeat=repeat, target_s=target_s)
        timings.update(interleaved(slow, repeat=1 if quick else 3, warmup=1, number=1))
    finally:
        restore()
    ref_hessian, ref_hvp = timings[REF_HESSIAN].best, timings[REF_HVP].best
    results = []
    for name in list(hessians) + list(hvps):
        t = timings[name]
        kind = "hessian" if name in hessians else "hvp"
        err, dtype = checks[name]
        looped = name.startswith("tapegrad") and kind == "hessian"
        results.append({
            "bench": "hessian", "name": name, "kind": kind, "best_ms": t.best * 1e3,
            "median_ms": t.median * 1e3, "samples": len(t.samples),
            "ratio_to_numpy": t.best / (ref_hessian if kind == "hessian" else ref_hvp),
            "per_basis_vector_us": t.best * 1e6 / N if looped else None, "rel_err": err, "dtype": dtype,
        })
    return results


def _time(ms: float) -> str:
    return f"{ms:.2f} ms" if ms >= 1.0 else f"{ms * 1e3:.0f} us"


def table(results) -> str:
    rows = []
    for kind, ref in (("hessian", "NumPy Hessian"), ("hvp", "NumPy HVP")):
        for r in (r for r in results if r["kind"] == kind):
            per = "" if r["per_basis_vector_us"] is None else f"{r['per_basis_vector_us']:.0f} us"
            rows.append([r["name"], _time(r["best_ms"]), _time(r["median_ms"]), f"{r['ratio_to_numpy']:.1f}x",
                         f"vs {ref}", per, f"{r['rel_err']:.1e}", r["dtype"]])
    return format_table(["hessian f(x) = logsumexp(A x) + |x|^2/2, A (200, 100) f64", "best", "median",
                         "ratio", "to", "per basis vector", "rel err", "dtype"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    rows = []
    for r in results:
        note = "" if r["per_basis_vector_us"] is None else f"{r['per_basis_vector_us']:.0f} us/basis vector"
        rows.append(["hessian" if r["kind"] == "hessian" else "hvp", r["name"], _time(r["best_ms"]),
                     f"{r['ratio_to_numpy']:.1f}x", "numpy (hand)", note, f"{r['rel_err']:.1e}", r["dtype"]])
    return rows


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    ratio = by["tapegrad hessian"]["ratio_to_numpy"]
    ok = "MET" if ratio <= TARGET_RATIO else "MISSED"
    fwd, rev = by[FWD_OVER_REV]["best_ms"], by[REV_OVER_REV]["best_ms"]
    hvp_fwd, hvp_rev = by["tapegrad jvp(grad f)"]["best_ms"], by["tapegrad grad(vdot(grad f, v))"]["best_ms"]
    route = "MET" if fwd < rev else "MISSED"
    absolute = "MET" if fwd <= TARGET_HESSIAN_MS else "MISSED"
    return (f"hessian target tapegrad hessian <= {TARGET_RATIO:.0f}x numpy: {ok} ({ratio:.1f}x)\n"
            f"hessian target jacfwd(jacrev) <= {TARGET_HESSIAN_MS:.0f} ms: {absolute} ({_time(fwd)})\n"
            f"hessian target jvp-of-grad faster than grad-of-grad: {route} (Hessian: jacfwd(jacrev) "
            f"{_time(fwd)} vs jacrev(jacrev) {_time(rev)}; one HVP: jvp(grad f) {_time(hvp_fwd)} vs "
            f"grad(vdot(grad f, v)) {_time(hvp_rev)})")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
