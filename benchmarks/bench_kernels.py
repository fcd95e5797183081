"""``kernels``: single kernels against PyTorch (CPU) and NumPy, each a forward (+ backward) on one input.

Cases (``kind`` in the rows), float32 unless said:

- ``embedding``: ``embedding(ids, W)`` and its vjp of ``ct`` (2048, 128) for W (5000, 128), 2048 ids
  (repeats included), against PyTorch's dense backward (``F.embedding`` then ``backward(ct)``).
  Target <= 1.2x.
- ``sort``: ``sort(x, axis=-1)`` and its vjp of ``w`` on float64 (256, 1024), against NumPy's
  ``np.sort`` alone (the forward only). Target <= 2x. The row ``numpy argsort + take_along_axis`` is
  the floor of a sort that must know its permutation: NumPy's ``argsort`` is much slower than ``sort``.
- ``layer_norm``: forward of ``layer_norm(x, (512,), w, b)`` for x (64, 64, 512). Target <= 1.5x.
- ``group_norm``: forward of ``group_norm(x, 8, w, b)`` for x (32, 64, 32, 32). Target <= 1.5x.
- ``max_pool``: ``max_pool2d(x, 3, 2)`` (overlapping windows: a 3x3 window, stride 2) and its vjp of
  ``ct`` for x (32, 8, 32, 32), forward and backward both sides. Target <= 1.5x.

PyTorch runs at one intra-op thread and at every core (``torch N threads``); NumPy keeps the BLAS
setting of ``--threads`` (none of these kernels calls BLAS). The all-core PyTorch rows are timed in a
group of their own, after the others: PyTorch's OpenMP workers spin after each call and would take
the cores from the contestants timed next. Ratios are tapegrad over the best peer
row named in ``REFERENCE``, in the same interleaved run. Every contestant's result is checked against
tapegrad's first (``error``).

Run alone: ``python benchmarks/bench_kernels.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402

TARGETS = {"embedding": 1.2, "sort": 2.0, "layer_norm": 1.5, "group_norm": 1.5, "max_pool": 1.5}
CORES = os.cpu_count() or 1


def _inputs(rng):
    f32 = np.float32
    return {
        "embedding": (rng.integers(0, 5000, 2048), rng.standard_normal((5000, 128)).astype(f32),
                      rng.standard_normal((2048, 128)).astype(f32)),
        "sort": (rng.standard_normal((256, 1024)), rng.standard_normal((256, 1024))),
        "layer_norm": (rng.standard_normal((64, 64, 512)).astype(f32), rng.standard_normal(512).astype(f32),
                       rng.standard_normal(512).astype(f32)),
        "group_norm": (rng.standard_normal((32, 64, 32, 32)).astype(f32), rng.standard_normal(64).astype(f32),
                       rng.standard_normal(64).astype(f32)),
        "max_pool": (rng.standard_normal((32, 8, 32, 32)).astype(f32),
                     rng.standard_normal((32, 8, 15, 15)).astype(f32)),
    }


# ---- tapegrad ------------------------------------------------------------------------------------
def tapegrad_cases(data):
    ids, table, ct = data["embedding"]
    x, w = data["sort"]
    ln, gn, pool = data["layer_norm"], data["group_norm"], data["max_pool"]
    return {
        "embedding": lambda: _vjp(lambda t: F.embedding(ids, t), table, ct),
        "sort": lambda: _vjp(lambda x: tnp.sort(x, axis=-1), x, w),
        "layer_norm": lambda: F.layer_norm(ln[0], (512,), ln[1], ln[2]),
        "group_norm": lambda: F.group_norm(gn[0], 8, gn[1], gn[2]),
        "max_pool": lambda: _vjp(lambda x: F.max_pool2d(x, 3, 2), pool[0], pool[1]),
    }


def _vjp(fn, x, ct):
    """The forward pass and the backward pass of ``ct``: what PyTorch's ``out.backward(ct)`` does."""
    _, vjp_fn = tg.vjp(fn, x)
    return vjp_fn(ct)[0]


# ---- peers ---------------------------------------------------------------------------------------
def torch_cases(torch, data):
    tf = torch.nn.functional
    ids, table, ct = (torch.from_numpy(a) for a in data["embedding"])
    ln, gn = [torch.from_numpy(a) for a in data["layer_norm"]], [torch.from_numpy(a) for a in data["group_norm"]]
    px, pct = (torch.from_numpy(a) for a in data["max_pool"])

    def embedding():
        t = table.detach().requires_grad_(True)
        tf.embedding(ids, t).backward(ct)
        return t.grad.numpy()

    def max_pool():
        x = px.detach().requires_grad_(True)
        tf.max_pool2d(x, 3, 2).backward(pct)
        return x.grad.numpy()

    with_grad = {"embedding": embedding, "max_pool": max_pool}
    no_grad = {"layer_norm": lambda: tf.layer_norm(ln[0], (512,), ln[1], ln[2]).numpy(),
               "group_norm": lambda: tf.group_norm(gn[0], 8, gn[1], gn[2]).numpy()}
    return with_grad, no_grad


def _torch_threads(torch, n):
    """A callable run with PyTorch's intra-op pool set to ``n`` threads (restored afterwards)."""
    def wrap(fn):
        def call():
            previous = torch.get_num_threads()
            torch.set_num_threads(n)
            try:
                return fn()
            finally:
                torch.set_num_threads(previous)
        return call
    return wrap


def contestants(data):
    """kind -> {name -> zero-argument callable}; the first name of each kind is tapegrad's."""
    ours = tapegrad_cases(data)
    cases = {kind: {"tapegrad": fn} for kind, fn in ours.items()}
    x = data["sort"][0]
    cases["sort"]["numpy np.sort (forward only)"] = lambda: np.sort(x, axis=-1)
    # the floor of any sort whose gradient must know where each element went
    cases["sort"]["numpy argsort + take_along_axis"] = lambda: np.take_along_axis(x, np.argsort(x, axis=-1), -1)
    torch = try_import("torch")
    if torch is not None:
        with_grad, no_grad = torch_cases(torch, data)
        for threads in sorted({1, CORES}):
            wrap = _torch_threads(torch, threads)
            for kind, fn in with_grad.items():
                cases[kind][_torch_name(threads)] = wrap(fn)
            for kind, fn in no_grad.items():
                cases[kind][_torch_name(threads)] = wrap(lambda fn=fn: _no_grad(torch, fn))
    return cases


def _torch_name(threads: int) -> str:
    return f"torch {threads} thread{'s' if threads > 1 else ''}"


def _no_grad(torch, fn):
    with torch.no_grad():
        return fn()


def _error(name, kind, fn, reference):
    """Max abs difference from tapegrad's result (the sort row is the forward: no comparison)."""
    if kind == "sort" and name != "tapegrad":
        return None
    return float(np.max(np.abs(np.asarray(fn(), dtype=np.float64) - reference)))


def run(quick: bool = False):
    """Time every case; returns a list of result dicts (one per contestant and case)."""
    data = _inputs(np.random.default_rng(0))
    results = []
    for kind, cands in contestants(data).items():
        reference = np.asarray(cands["tapegrad"](), dtype=np.float64)
        errors = {name: _error(name, kind, fn, reference) for name, fn in cands.items()}
        spinning = {name for name in cands if CORES > 1 and name == _torch_name(CORES)}
        timings = {}
        for group in ({n: f for n, f in cands.items() if n not in spinning}, {n: cands[n] for n in spinning}):
            if group:
                timings.update(interleaved(group, repeat=3 if quick else 7, target_s=0.03 if quick else 0.1))
        best_peer = min((t.best for name, t in timings.items() if name != "tapegrad"), default=None)
        for name in cands:
            t = timings[name]
            results.append({"bench": "kernels", "kind": kind, "name": name, "best_us": t.best * 1e6,
                            "median_us": t.median * 1e6,
                            "ratio_to_best_peer": t.best / best_peer if best_peer else None,
                            "abs_err": errors[name]})
    return results


def _time(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1e4 else f"{us:.1f} us"


def _ratio(r) -> str:
    return "" if r["ratio_to_best_peer"] is None else f"{r['ratio_to_best_peer']:.2f}x"


def _err(r) -> str:
    return "" if r["abs_err"] is None else f"{r['abs_err']:.1e}"


def table(results) -> str:
    rows = [[r["kind"], r["name"], _time(r["best_us"]), _time(r["median_us"]), _ratio(r), _err(r)] for r in results]
    return format_table(["kernels", "contestant", "best", "median", "vs best peer", "abs err"], rows, left=2)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["kernels", f"{r['kind']}: {r['name']}", _time(r["best_us"]), _ratio(r), "best peer",
             f"target {TARGETS[r['kind']]}x" if r["name"] == "tapegrad" else "", _err(r), ""] for r in results]


def verdict(results) -> str:
    parts = []
    for r in results:
        if r["name"] != "tapegrad":
            continue
        ratio, target = r["ratio_to_best_peer"], TARGETS[r["kind"]]
        ok = "no peer" if ratio is None else "MET" if ratio <= target else "MISSED"
        parts.append(f"{r['kind']} <= {target}x: {ok}" + ("" if ratio is None else f" ({ratio:.2f}x)"))
    return "kernels targets: " + "; ".join(parts)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
